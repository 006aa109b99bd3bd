//! The `gateway_status` answer: each managed app's gateway, what web_status
//! judges (`crate::inspect`). Built as root by the helper
//! (`Controller::gateway_status`); read unprivileged on the workstation.
//!
//! A helper from before drift sent `name`, `app` and docker's word for the
//! gateway container as `state`, nothing else: every field but `state`
//! defaults, and a `state` outside [`EngineState`] is kept as it came
//! (web_status calls such a gateway unhealthy, as it always did).

use serde::{Deserialize, Serialize};

use super::Open;
use super::app_state::{Drift, EngineState};
use super::inventory::{AcmeErrorView, CertificateView};
use crate::vocab::{HttpsAnswer, PlanId, ServerName};

/// The `gateway_status` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayStatus {
    pub gateways: Vec<Gateway>,
}

/// One managed app's gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gateway {
    #[serde(default)]
    pub app: String,
    /// The gateway container's name.
    #[serde(default)]
    pub name: String,
    /// The app's state as the engine shows it.
    pub state: Open<EngineState>,
    /// Docker's word for the recorded gateway container, or `missing`.
    #[serde(default)]
    pub container_state: String,
    /// Stopped by a completed stop plan: a choice, not an outage.
    #[serde(default)]
    pub stopped_on_purpose: bool,
    /// The completed stop plan that stopped it, when `stopped_on_purpose`
    /// (absent from helpers older than issue 26).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<PlanId>,
    /// For an app that should run: whether its gateway answered its server
    /// name (`null` for the others).
    #[serde(default)]
    pub answers: Option<bool>,
    #[serde(default)]
    pub drift: Option<Drift>,
    /// For an exposed app that should run: each of its names asked through
    /// the HTTPS edge (issue 39). Absent for the others, and from a helper
    /// before 0.2.0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub https: Vec<HttpsCheck>,
    /// The last failed ACME order for one of the app's names, as the
    /// inventory's `acme_error` says it. Absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acme_error: Option<AcmeErrorView>,
}

/// One exposed name asked through the edge, TLS verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpsCheck {
    pub name: ServerName,
    pub answer: Open<HttpsAnswer>,
    /// The certificate the edge serves for it; null when its copy cannot
    /// be read.
    pub certificate: Option<CertificateView>,
}
