//! The `inventory` answer (`service_inventory`): the managed apps held
//! against the engine, the operator's offer, the open plans, and counts of
//! everything else. Built as root by the helper (`Controller::inventory`).
//! The workstation reads only its open plans (the approval wait,
//! [`super::read`]); the agent gets the object as the helper printed it
//! (before the workstation reads one of its closed words, make that field
//! [`super::Open`]).
//!
//! Every time is RFC 3339 UTC; foreign objects are counts, never names.

use serde::{Deserialize, Serialize};

use super::Open;
use super::app_state::{ContainerView, Drift, EngineState};
use crate::control::app_record::AppState;
use crate::vocab::Action;
use crate::vocab::{
    AccessoryName, AcmeFailure, AppName, CertKind, CertificateFacts, HealthPath, ImageId, ImageRef,
    IssuerName, PlanId, ServerName,
};
use crate::vocab::{PlanOutcome, PlanState};
pub use crate::wire::versions::HelperVersion;

/// The `inventory` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inventory {
    pub generated_at: String,
    /// Every app record, by name.
    pub apps: Vec<ManagedApp>,
    pub offer: Offer,
    /// Pending and unexpired, executing, or needing inspection; newest first.
    pub plans: Vec<OpenPlan>,
    /// The plan that blocks new ones (executing or needing inspection), or null.
    pub unsettled_plan: Option<UnsettledPlan>,
    pub foreign: ForeignCounts,
    /// The helper that answered: its version and host protocol (issue 27),
    /// so the agent and the user can see what a server runs. Absent from a
    /// helper older than 0.2.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helper: Option<HelperVersion>,
}

/// One managed app: the record's facts, the engine's state and any drift.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManagedApp {
    pub app: AppName,
    /// As the engine shows it.
    pub state: EngineState,
    /// As volce-lab recorded it.
    pub recorded_state: AppState,
    pub drift: Option<Drift>,
    /// The primary name: the one the health check and `answers` ask for.
    pub server_name: ServerName,
    /// The other names its gateway serves (`also_server_names`). Absent
    /// when there are none, and from a helper before 0.2.0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_server_names: Vec<ServerName>,
    pub host_port: u16,
    pub container_port: u16,
    pub image: AppImage,
    /// The recorded containers, app first.
    pub containers: Vec<ContainerView>,
    /// The plan that last changed the record (null when it is gone).
    pub last_plan: Option<LastPlan>,
    /// The versions `rollback` can return to, newest first (what it
    /// returns to is the first). Absent from a helper before 0.2.0.
    #[serde(default)]
    pub kept_versions: Vec<KeptVersionView>,
    /// The app's data directory, when its catalog entry gave it one.
    /// Absent from a helper before 0.2.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataView>,
    /// The names the HTTPS edge serves of it (an expose plan put them
    /// there), each with the certificate it serves. Absent when it is not
    /// exposed, and from a helper before 0.2.0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exposed: Vec<ExposedNameView>,
    /// The last failed ACME order for one of its names that no order has
    /// succeeded since (an expose's or a renewal's). Absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acme_error: Option<AcmeErrorView>,
    /// The accessories its deploy created beside it (issue 40), by name.
    /// Absent when it has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accessories: Vec<AccessoryView>,
}

/// One accessory of an app: the image its container runs, the one the
/// policy pins for it now when that is another (an `update_accessory` plan
/// moves it there), its container as the engine shows it, and its data.
/// Never its credential, in any form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessoryView {
    pub name: AccessoryName,
    pub image: ImageRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_image: Option<ImageRef>,
    /// Null when the engine has no container of its name that we recorded.
    pub container: Option<crate::vocab::ContainerId>,
    /// Docker's state word (`running`, `exited`, ...), or `missing`.
    pub state: String,
    pub data: DataView,
}

/// One name the HTTPS edge serves of an app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExposedNameView {
    pub name: ServerName,
    /// `file` (the operator's; its paths stay on the host) or `acme`.
    pub source: CertKind,
    /// The certificate the edge serves for it; null when its copy cannot
    /// be read (doctor says why).
    pub certificate: Option<CertificateView>,
}

/// What a served certificate says of itself, as much as the agent needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertificateView {
    /// Its issuer's common name.
    pub issuer: IssuerName,
    pub expires_at: String,
    /// Whole days left (negative once expired).
    pub days_left: i64,
}

impl CertificateView {
    pub fn of(facts: &CertificateFacts, now: i64) -> CertificateView {
        CertificateView {
            issuer: facts.issuer.clone(),
            expires_at: crate::text::rfc3339_seconds(facts.not_after),
            days_left: facts.days_left(now),
        }
    }
}

/// A failed ACME order: when, its stable code and its sentence with the
/// next step (from volce-lab's closed set, never the CA's own text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcmeErrorView {
    pub name: ServerName,
    pub at: String,
    pub code: String,
    pub message: String,
}

impl AcmeErrorView {
    pub fn of(name: &ServerName, failure: &AcmeFailure) -> AcmeErrorView {
        AcmeErrorView {
            name: name.clone(),
            at: crate::text::rfc3339_seconds(failure.at),
            code: failure.error.code().to_owned(),
            message: failure.error.to_string(),
        }
    }
}

/// An app's data directory: where the app sees it, its cap, and whether
/// it is mounted now (false after a reboot until a start or restart plan
/// mounts it again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataView {
    pub path: crate::vocab::DataPath,
    pub max_mib: u32,
    pub mounted: bool,
    /// Its backups (issue 41), when the policy names a repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupView>,
}

/// What the host knows of an app's backups: the last one that recorded a
/// snapshot, the last one that failed, the schedule, and whether a
/// scheduled backup is late (none within two periods).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupView {
    pub last_success_at: Option<String>,
    pub snapshot: Option<crate::vocab::SnapshotId>,
    pub bytes: Option<u64>,
    pub last_failure_at: Option<String>,
    pub schedule: Option<crate::vocab::BackupEvery>,
    pub late: bool,
}

/// A version an update replaced, kept for `rollback`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptVersionView {
    /// The catalog key it ran under (the catalog may pin another image now).
    pub key: String,
    pub reference: ImageRef,
    /// Whether the host still has its image; if not, a rollback pulls it
    /// again by the reference's digest.
    pub present: bool,
}

/// The image a managed app runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppImage {
    /// The catalog key it was chosen by.
    pub key: String,
    pub reference: ImageRef,
    /// The reference's digest (after `@`), null for a reference without one.
    pub digest: Option<String>,
    /// The local image ids its containers ran (volce-lab's claim on them).
    pub image_ids: Vec<ImageId>,
}

/// The plan that last changed an app record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastPlan {
    pub plan_id: PlanId,
    pub action: Action,
    /// [`PlanState`].
    pub state: Open<PlanState>,
    /// [`PlanOutcome`], null until the plan ended.
    pub outcome: Option<Open<PlanOutcome>>,
    pub requested_at: String,
    pub finished_at: Option<String>,
}

/// What the operator's policy offers the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    pub catalog: Vec<CatalogImage>,
    pub gateway_image: GatewayImage,
    pub ports: PortOffer,
    pub quota: Quota,
    pub plan_ttl_seconds: u32,
    /// Every action a plan can take.
    pub actions: Vec<Action>,
    /// Those that need an operator's approval.
    pub approval_required: Vec<Action>,
    /// Whether the gateways that later plans configure log each request
    /// (the policy's `gateway_access_log`), so `service_logs` of a gateway
    /// shows requests. Absent from a 0.1.0 helper: off.
    #[serde(default)]
    pub gateway_access_log: bool,
}

/// One catalog entry, and whether its image is on the host already.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogImage {
    pub key: String,
    pub reference: ImageRef,
    pub present: bool,
    pub image_id: Option<ImageId>,
    /// The port its app listens on, when the operator's entry says it (then
    /// a deploy may leave `container_port` out); `null`: the agent names it.
    #[serde(default)]
    pub container_port: Option<u16>,
    /// What the health check asks through the gateway (`/` by default).
    #[serde(default)]
    pub health_path: HealthPath,
    /// Whether the entry gives the app configuration (never a value).
    #[serde(default)]
    pub has_configuration: bool,
    /// Whether the entry gives the app a data directory.
    #[serde(default)]
    pub has_data: bool,
    /// The tasks the entry declares, by name (a `run_task` names one; the
    /// argv is the operator's and not shown). Absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<crate::vocab::TaskName>,
    /// The accessories a deploy of it creates beside the app, by name.
    /// Absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accessories: Vec<AccessoryName>,
}

/// The gateway image every app's gateway runs, and whether it is here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayImage {
    pub reference: ImageRef,
    pub present: bool,
    pub image_id: Option<ImageId>,
}

/// The policy's port range: which ports our apps hold, how many something
/// else publishes (a count), and the free ones as ranges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortOffer {
    pub first: u16,
    pub last: u16,
    pub used: Vec<PortUse>,
    pub taken_by_others: usize,
    /// Every free port, however many ranges `free` lists.
    pub free_count: u32,
    /// `[first, last]` of each free range, the first 16 of them (the
    /// helper's `MAX_FREE_RANGES`).
    pub free: Vec<[u16; 2]>,
    pub free_ranges_truncated: bool,
}

/// A port of the range one of our apps holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortUse {
    pub port: u16,
    pub app: AppName,
}

/// How many apps there are, and how many the policy allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quota {
    pub used: usize,
    pub max: u32,
}

/// An open plan: what it would do, where it stands, until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenPlan {
    pub plan_id: PlanId,
    pub action: Action,
    /// The app it is about, null for an image.
    pub app: Option<String>,
    /// [`PlanState`].
    pub state: Open<PlanState>,
    pub requester: String,
    pub requested_at: String,
    pub expires_at: String,
    pub requires_approval: bool,
    pub approved: bool,
}

/// The plan that blocks every new one until an operator looked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnsettledPlan {
    pub plan_id: PlanId,
    /// [`PlanState`]: executing or needs_inspection.
    pub state: Open<PlanState>,
}

/// What volce-lab does not manage, as counts only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignCounts {
    pub containers: usize,
    pub images: usize,
    pub networks: usize,
}
