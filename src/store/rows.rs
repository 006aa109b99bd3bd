//! The rows of the state database as Rust types: plan states and outcomes,
//! claims, approvals, resolutions, audit events. Runs as root inside the
//! host helper; pure data, no I/O.
//!
//! Each closed set of names stored in a column (`PlanState`, `PlanOutcome`,
//! `Event`, `AuditOutcome`) has exactly one name table: its strum derive.
//! `as_str` and `parse` are built on it, serde (where derived) uses the same
//! snake_case names, and the schema's CHECK lists must equal it (a test reads
//! them back). The stored strings are part of the on-disk format: renaming a
//! variant renames nothing in a database, so it needs a migration.

use std::str::FromStr;

use serde::Serialize;
use strum::{EnumString, IntoStaticStr, VariantArray};

use super::StoreError;
use crate::actions::plan::Plan;
use crate::vocab::{Digest, PlanOutcome, PlanState, Refusal};
use crate::wire::answers::Open;
use crate::wire::answers::plan_view::{ApprovalStamp, PlanView, RejectionStamp, Stamp};

/// A stored name that is not in its enum's table: the row is unreadable.
pub(super) fn parse_stored<T: FromStr>(value: &str) -> Result<T, StoreError> {
    value.parse().map_err(|_| StoreError::Corrupt)
}

/// Who claimed a plan for execution: enough to tell later whether that
/// process still lives (pid, its start time in clock ticks since boot, and
/// the boot id; a pid alone can be reused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Claim {
    pub pid: i32,
    pub start_time: u64,
    pub boot_id: String,
}

/// An approval as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Approval {
    pub by: String,
    pub at: i64,
    pub digest: Digest,
}

/// An operator's `resolve` of a plan that needed inspection, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolution {
    pub by: String,
    pub at: i64,
}

/// An operator's `reject` of a pending plan, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    pub by: String,
    pub at: i64,
    /// The operator's words (`reject --reason`), at most
    /// [`MAX_REASON_CHARS`]; untrusted text wherever it is shown.
    pub reason: Option<String>,
}

/// The most characters of a `reject --reason` (the schema's CHECK too).
pub const MAX_REASON_CHARS: usize = 500;

/// A plan and its life cycle, as read from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPlan {
    pub plan: Plan,
    pub state: PlanState,
    pub approval: Option<Approval>,
    pub claim: Option<Claim>,
    pub claimed_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub outcome: Option<PlanOutcome>,
    /// Present only in state `inspected`.
    pub resolution: Option<Resolution>,
    /// Present only in state `rejected`.
    pub rejection: Option<Rejection>,
    /// Why a `failed` plan failed (migration 11; absent on older rows).
    pub failure: Option<Refusal>,
    /// For a plan that waits for approval: whether its syslog alert was
    /// sent (`false`: it could not be); `None` when none was due or tried.
    pub alerted: Option<bool>,
    /// A rolled-back plan's failed app container's last lines (schema step
    /// 15; absent on older rows and when the failure came before there was
    /// an app container): safe, bounded, untrusted application output.
    pub app_log: Option<crate::logs::AppLog>,
}

impl StoredPlan {
    /// A plan just prepared: pending, nothing approved, claimed or finished.
    pub fn pending(plan: Plan) -> StoredPlan {
        StoredPlan {
            plan,
            state: PlanState::Pending,
            approval: None,
            claim: None,
            claimed_at: None,
            finished_at: None,
            outcome: None,
            resolution: None,
            rejection: None,
            failure: None,
            alerted: None,
            app_log: None,
        }
    }

    /// The plan view the rpc `plan` reply and `show --json` print: every
    /// field of the immutable plan, then the life cycle beside it; every
    /// time as RFC 3339 UTC (the sealed plan, and so its digest, keeps the
    /// Unix seconds it was made with). The wire type defines the JSON.
    pub fn view(&self) -> PlanView {
        let time = crate::text::rfc3339_seconds;
        let plan = &self.plan;
        let stamp = |by: &str, at: i64| Stamp { by: by.to_owned(), at: time(at) };
        PlanView {
            format: plan.format,
            id: plan.id.clone(),
            action: plan.action,
            parameters: plan.parameters.clone(),
            payload: plan.payload.clone(),
            impact: plan.impact.clone(),
            snapshot_digest: plan.snapshot_digest.clone(),
            policy_hash: plan.policy_hash.clone(),
            requester: plan.requester.clone(),
            requires_approval: plan.requires_approval,
            created_at: time(plan.created_at),
            expires_at: time(plan.expires_at),
            digest: plan.digest.clone(),
            state: self.state.into(),
            approval: self.approval.as_ref().map(|a| ApprovalStamp {
                by: a.by.clone(),
                at: time(a.at),
                digest: a.digest.clone(),
            }),
            claimed_at: self.claimed_at.map(time),
            finished_at: self.finished_at.map(time),
            outcome: self.outcome.map(Open::Known),
            resolution: self.resolution.as_ref().map(|r| stamp(&r.by, r.at)),
            rejection: self.rejection.as_ref().map(|r| RejectionStamp {
                by: r.by.clone(),
                at: time(r.at),
                reason: r.reason.clone(),
            }),
            failure: self.failure.clone(),
            app_log: self.app_log.clone(),
        }
    }
}

/// Audit events, one per state change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoStaticStr, EnumString, VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Event {
    Prepared,
    Approved,
    Claimed,
    Completed,
    NeedsInspection,
    ClaimAbandoned,
    Invalidated,
    Inspected,
    Failed,
    Rejected,
    /// A request that changed nothing: a read, or a refusal (its code says
    /// why). A request that changed a plan is recorded by that change's row.
    Request,
    /// Retention removed terminal plans older than `retention_days`
    /// (`count` says how many).
    Pruned,
}

impl Event {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The outcome category of an audit row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoStaticStr, EnumString, VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum AuditOutcome {
    Ok,
    Failed,
    Uncertain,
    Refused,
}

impl AuditOutcome {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One audit row. Numbers and categories only, by construction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub at: i64,
    pub event: Event,
    pub outcome: AuditOutcome,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
    /// The requester or the approver: a validated unix user name.
    pub actor: String,
    /// How the engine's process ended, when it did not end with exit 0.
    pub process: Option<crate::exec::ProcessOutcome>,
}

/// What a `volce-lab-host` request was: the rpc operations, the operator's
/// commands, and the helper's own retention run. Stored in `audit.operation`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, IntoStaticStr, EnumString, VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum AuditOperation {
    /// `volce-lab-host rpc` refused before its operation was read (busy,
    /// request_timeout, invalid_request, ...).
    Rpc,
    GatewayStatus,
    Inventory,
    Plan,
    Execute,
    Logs,
    Show,
    List,
    Approve,
    Reject,
    Resolve,
    Doctor,
    /// Not a request: retention pruning plans inside another request.
    Retention,
    AuditPrune,
    /// The ssh forced command's refusals: the gate sends the helper a
    /// `gate_refusal` request, recorded by `host::request_row::record_refusal`.
    SshGate,
    /// The rpc's `statement` and `signed_approval` (migration 17 let the
    /// column take any name of the shape).
    Statement,
    SignedApproval,
    /// The operator's commands on the helper's own state (before migration
    /// 17 their rows named the command in `code`, with no operation).
    Pause,
    Resume,
    StateBackup,
    StateRestore,
    /// `state remove-container`: one container volce-lab labelled and no
    /// record holds, removed (the row names its app).
    StateRemoveContainer,
}

impl AuditOperation {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl From<crate::wire::Operation> for AuditOperation {
    fn from(operation: crate::wire::Operation) -> AuditOperation {
        use crate::wire::Operation as O;
        match operation {
            O::GatewayStatus => AuditOperation::GatewayStatus,
            O::Inventory => AuditOperation::Inventory,
            O::Plan => AuditOperation::Plan,
            O::Execute => AuditOperation::Execute,
            O::Logs => AuditOperation::Logs,
            O::GateRefusal => AuditOperation::SshGate,
            O::Statement => AuditOperation::Statement,
            O::SignedApproval => AuditOperation::SignedApproval,
        }
    }
}

/// What a signed approval's `approved` row carries besides the approver
/// (`Tx::approve_signed`): the signing key's OpenSSH fingerprint
/// (`SHA256:...`) and the sha256 (hex) of the statement it signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedBy {
    pub key: String,
    pub statement_sha256: String,
}

/// Who asked for what: stamped on every audit row a request writes, so the
/// rows of one request (and the workstation's `audit.jsonl` line with the
/// same request id) can be joined. Metadata only: ids, names, numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMeta {
    pub operation: AuditOperation,
    /// The id the workstation sent (validated by `crate::wire`).
    pub request_id: Option<String>,
    /// The caller: a validated unix user name.
    pub actor: String,
    /// For operator commands: `SUDO_UID` and the session's login uid, as
    /// `host::operator` cross-checked them.
    pub sudo_uid: Option<u32>,
    pub login_uid: Option<u32>,
    /// A validated app name, when the request names one.
    pub app: Option<String>,
    /// For the ssh gate's `gate_refusal`: why it refused, and the command's
    /// length and sha256 (checked by `wire::gate::RefusalRecord::checked`).
    pub gate: Option<crate::wire::gate::RefusalRecord>,
    pub started: std::time::Instant,
}

impl RequestMeta {
    pub fn new(operation: AuditOperation, actor: &str) -> RequestMeta {
        RequestMeta {
            operation,
            request_id: None,
            actor: actor.to_owned(),
            sudo_uid: None,
            login_uid: None,
            app: None,
            gate: None,
            started: std::time::Instant::now(),
        }
    }

    pub fn elapsed_ms(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX)
    }
}

/// How a request that changed nothing ended, for its `request` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestEnd<'a> {
    pub at: i64,
    pub outcome: AuditOutcome,
    /// The stable code of a refusal.
    pub code: Option<crate::vocab::Code>,
    pub plan_id: Option<&'a str>,
    pub action: Option<&'a str>,
}

/// An audit row as read back (for tests and the operator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub at: i64,
    pub event: String,
    pub plan_id: String,
    pub action: String,
    pub outcome: String,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<i64>,
    pub actor: String,
}

#[cfg(test)]
mod tests {
    use std::fmt::Debug;

    use super::*;

    /// Every name reads back as its variant; a near miss does not.
    fn names_round_trip<T>()
    where
        T: VariantArray + Copy + PartialEq + Debug + FromStr + Into<&'static str>,
    {
        for &variant in T::VARIANTS {
            let name: &'static str = variant.into();
            assert_eq!(name.parse::<T>().ok(), Some(variant), "{name}");
            assert!(name.to_uppercase().parse::<T>().is_err(), "{name}: names are case-sensitive");
            assert!(format!("{name} ").parse::<T>().is_err(), "{name}: no trimming");
        }
    }

    /// serde writes the same names as the store (the rpc replies and
    /// `show --json` print these).
    fn serde_names_are_the_stored_names<T>()
    where
        T: VariantArray + Copy + Serialize + Into<&'static str>,
    {
        for &variant in T::VARIANTS {
            let name: &'static str = variant.into();
            assert_eq!(serde_json::to_value(variant).unwrap(), serde_json::json!(name));
        }
    }

    #[test]
    fn every_stored_name_reads_back_as_its_variant() {
        names_round_trip::<PlanState>();
        names_round_trip::<PlanOutcome>();
        names_round_trip::<Event>();
        names_round_trip::<AuditOutcome>();
        names_round_trip::<AuditOperation>();
    }

    #[test]
    fn serde_and_strum_agree_on_every_name() {
        serde_names_are_the_stored_names::<PlanState>();
        serde_names_are_the_stored_names::<PlanOutcome>();
        serde_names_are_the_stored_names::<AuditOperation>();
    }

    #[test]
    fn an_unknown_stored_name_is_a_corrupt_row() {
        assert!(matches!(parse_stored::<PlanState>("approved"), Err(StoreError::Corrupt)));
        assert!(matches!(parse_stored::<PlanOutcome>("Completed"), Err(StoreError::Corrupt)));
    }
}
