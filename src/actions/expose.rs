//! `expose` (issue 39): an app's names made reachable over HTTPS through
//! the operator's edge, each with the certificate the policy names for it.
//! Runs in the root helper (derive at prepare and again at execute; act at
//! execute).
//!
//! Security invariants enforced here:
//! - the agent names an app, never an address, a port, a name or a
//!   certificate: the names are the app's own (its deploy chose them), the
//!   addresses and certificates the operator's policy;
//! - each certificate is root's file nobody else can write, its key nobody
//!   else can read; the plan seals the certificate's sha256, so a file
//!   replaced after the review voids the plan (a changed policy does too);
//! - always an operator's approval (the fixed minimum): making an app
//!   public is the step the docker policy keeps for a review.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange, config_lines};
use super::edge::{config_with, names_of, review_names, running_edge};
use crate::control::scope::Scope;
use crate::control::validate::{Context, HostFacts, app_name, exact_keys, owned_running};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{
    AcmeOrder, Action, AppName, CertSource, Code, ContainerId, EDGE_CONTAINER, EdgeChange, EdgeConfig,
    ExposedName, Exposure, PlanId, Refusal, refuse,
};

/// An expose's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expose {
    pub app: AppName,
    /// The recorded container ids, sorted (the scope).
    pub containers: Vec<ContainerId>,
    pub exposure: Exposure,
    /// Where the edge answers, as the policy says (for the review).
    pub http: String,
    pub https: String,
    pub change: EdgeChange,
}

impl PlanAction for Expose {
    const ACTION: Action = Action::Expose;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        facts: &dyn HostFacts,
    ) -> Result<(Expose, Impact), Refusal> {
        exact_keys(params, Action::Expose)?;
        let app = app_name(params)?;
        let record = owned_running(&app, ctx)?;
        let edge = running_edge(ctx)?;
        let exposure = certified(&app, &names_of(record), edge, facts)?;
        // Exposed already, an expose serves certificates replaced since
        // (a renewal); with the same ones it has nothing to do.
        if record.exposed.as_ref() == Some(&exposure) {
            return refuse(
                Code::AlreadyExposed,
                format!("{app}'s names are on the HTTPS edge already, with these certificates."),
            );
        }
        let mut containers = record.containers.clone();
        containers.sort();
        let change = EdgeChange {
            plan_id: ctx.plan_id.clone(),
            config: config_with(ctx, edge, &app, Some(&exposure)),
            install: exposure
                .names
                .iter()
                .filter(|n| matches!(n.source, CertSource::File { .. }))
                .cloned()
                .collect(),
            obtain: edge
                .acme
                .clone()
                .map(|acme| AcmeOrder { acme, names: exposure.acme_names() })
                .filter(|o| !o.names.is_empty()),
            remove: Vec::new(),
            connect: Some(app.names().edge_network),
            disconnect: None,
            probe: exposure.names.iter().map(|n| n.name.clone()).collect(),
            health_path: record.health_path.clone().unwrap_or_default(),
        };
        let payload = Expose {
            app,
            containers,
            exposure,
            http: edge.http.to_string(),
            https: edge.https.to_string(),
            change,
        };
        let impact = impact(&payload, edge);
        Ok((payload, impact))
    }

    fn app(&self) -> Option<&AppName> {
        Some(&self.app)
    }

    fn scope(&self) -> Scope<'_> {
        Scope::App { names: self.app.names(), recorded: &self.containers, own_states: true }
    }

    fn review(&self, out: &mut String) {
        let _ = writeln!(out, "App      {} (its containers are not touched)", esc(self.app.as_str()));
        review_names(out, &self.exposure);
        let _ = writeln!(out, "Answers  HTTPS on {}, plain HTTP on {}", esc(&self.https), esc(&self.http));
        let _ = writeln!(
            out,
            "Edge     {EDGE_CONTAINER} joins {}; its nginx.conf becomes:",
            self.change.connect.as_deref().unwrap_or("")
        );
        config_lines(out, &self.change.config);
    }

    fn act<E: Engine>(&self, engine: &E, _progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        engine.edge_apply(&self.change)?;
        Ok(Effect::from(vec![EDGE_CONTAINER.to_owned()]))
    }

    fn record(&self, done: &Done<'_>) -> Vec<RecordChange> {
        match done.apps.get(self.app.as_str()) {
            Some(record) if done.ok() => {
                let mut record = record.clone();
                record.exposed = Some(self.exposure.clone());
                record.plan_id = done.plan_id.clone();
                vec![RecordChange::Put(Box::new(record))]
            }
            _ => Vec::new(),
        }
    }

    fn rolled_back(cause: &EngineError, id: &PlanId) -> Refusal {
        super::rolled_back::edge(cause, id)
    }
}

/// Each of the app's names with the certificate the policy names for it,
/// checked now; every name without a usable one is named in the refusal.
fn certified(
    app: &AppName,
    names: &[crate::vocab::ServerName],
    edge: &EdgeConfig,
    facts: &dyn HostFacts,
) -> Result<Exposure, Refusal> {
    let mut exposed = Vec::new();
    let mut problems = Vec::new();
    for name in names {
        // The operator's files first; ACME for a name without any.
        match (edge.certificates.get(name), &edge.acme) {
            (None, Some(acme)) => exposed.push(ExposedName {
                name: name.clone(),
                source: CertSource::Acme { directory: acme.directory.clone() },
            }),
            (None, None) => problems.push(format!(
                "{name} has no entry in the policy's edge.certificates (and the policy names no edge.acme)"
            )),
            (Some(files), _) => match facts.certificate(files) {
                Ok(cert_sha256) => exposed.push(ExposedName {
                    name: name.clone(),
                    source: CertSource::File { files: files.clone(), cert_sha256 },
                }),
                Err(problem) => problems.push(format!("{name}: {problem}")),
            },
        }
    }
    if !problems.is_empty() {
        return refuse(
            Code::EdgeCertificateInvalid,
            format!("{app} cannot be exposed: {}. Nothing was changed.", problems.join("; ")),
        );
    }
    Ok(Exposure { names: exposed })
}

/// What an expose touches, in the operator's words.
fn impact(payload: &Expose, edge: &EdgeConfig) -> Impact {
    Impact {
        target: format!("app {}: its names {} over HTTPS on {}", payload.app, payload.exposure.describe(), edge.https),
        containers_touched: vec![format!(
            "{EDGE_CONTAINER} (the edge: joins {}, its nginx.conf replaced, tested and reloaded)",
            payload.change.connect.as_deref().unwrap_or("")
        )],
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback: "If nginx refuses the new configuration or a name does not reach the app through the edge, \
                   the old configuration is put back and reloaded, the network left and the certificate copies \
                   deleted; the plan ends failed. Later: an unexpose plan."
            .into(),
    }
}
