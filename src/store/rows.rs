//! The rows of the state database as Rust types: plan states and outcomes,
//! claims, approvals, resolutions, audit events. Runs as root inside the
//! host helper; pure data, no I/O.

use serde::Serialize;

use super::StoreError;
use crate::control::plan::{Digest, Plan};

/// Where a plan is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanState {
    Pending,
    Executing,
    Completed,
    NeedsInspection,
    /// Refused at execute because the policy or the server changed: its
    /// approval is void for good.
    Invalidated,
    /// Was `needs_inspection`; an operator attested with `resolve` that they
    /// inspected the server. Terminal.
    Inspected,
    /// The engine failed but provably changed nothing (refused before its
    /// first mutation, or rolled back and verified). Terminal; blocks nothing.
    Failed,
}

impl PlanState {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanState::Pending => "pending",
            PlanState::Executing => "executing",
            PlanState::Completed => "completed",
            PlanState::NeedsInspection => "needs_inspection",
            PlanState::Invalidated => "invalidated",
            PlanState::Inspected => "inspected",
            PlanState::Failed => "failed",
        }
    }
    pub(super) fn parse(value: &str) -> Result<PlanState, StoreError> {
        Ok(match value {
            "pending" => PlanState::Pending,
            "executing" => PlanState::Executing,
            "completed" => PlanState::Completed,
            "needs_inspection" => PlanState::NeedsInspection,
            "invalidated" => PlanState::Invalidated,
            "inspected" => PlanState::Inspected,
            "failed" => PlanState::Failed,
            _ => return Err(StoreError::Corrupt),
        })
    }
}

/// Why a plan ended where it did (a category, never free text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanOutcome {
    Completed,
    /// The engine reported a failure; the change may be partial.
    EngineFailed,
    /// The process that claimed the plan died before recording an outcome.
    ClaimerDied,
    /// The engine acted but the result could not be recorded.
    RecordFailed,
    PolicyChanged,
    SnapshotChanged,
    /// The change failed, and what it had changed was restored and verified.
    RolledBack,
    /// The engine refused before its first mutation: nothing was touched.
    NotStarted,
}

impl PlanOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanOutcome::Completed => "completed",
            PlanOutcome::EngineFailed => "engine_failed",
            PlanOutcome::ClaimerDied => "claimer_died",
            PlanOutcome::RecordFailed => "record_failed",
            PlanOutcome::PolicyChanged => "policy_changed",
            PlanOutcome::SnapshotChanged => "snapshot_changed",
            PlanOutcome::RolledBack => "rolled_back",
            PlanOutcome::NotStarted => "not_started",
        }
    }
    pub(super) fn parse(value: &str) -> Result<PlanOutcome, StoreError> {
        Ok(match value {
            "completed" => PlanOutcome::Completed,
            "engine_failed" => PlanOutcome::EngineFailed,
            "claimer_died" => PlanOutcome::ClaimerDied,
            "record_failed" => PlanOutcome::RecordFailed,
            "policy_changed" => PlanOutcome::PolicyChanged,
            "snapshot_changed" => PlanOutcome::SnapshotChanged,
            "rolled_back" => PlanOutcome::RolledBack,
            "not_started" => PlanOutcome::NotStarted,
            _ => return Err(StoreError::Corrupt),
        })
    }
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
}

impl StoredPlan {
    /// The JSON the rpc `plan` reply and `show --json` print: every field of
    /// the immutable plan, then the life cycle beside it.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(&self.plan).expect("plan serializes");
        let object = value.as_object_mut().expect("plan is an object");
        object.insert("state".into(), serde_json::json!(self.state));
        object.insert("approval".into(), serde_json::json!(self.approval));
        object.insert("claimed_at".into(), serde_json::json!(self.claimed_at));
        object.insert("finished_at".into(), serde_json::json!(self.finished_at));
        object.insert("outcome".into(), serde_json::json!(self.outcome));
        object.insert("resolution".into(), serde_json::json!(self.resolution));
        value
    }
}

/// Audit events, one per state change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

impl Event {
    pub fn as_str(self) -> &'static str {
        match self {
            Event::Prepared => "prepared",
            Event::Approved => "approved",
            Event::Claimed => "claimed",
            Event::Completed => "completed",
            Event::NeedsInspection => "needs_inspection",
            Event::ClaimAbandoned => "claim_abandoned",
            Event::Invalidated => "invalidated",
            Event::Inspected => "inspected",
            Event::Failed => "failed",
        }
    }
}

/// The outcome category of an audit row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditOutcome {
    Ok,
    Failed,
    Uncertain,
    Refused,
}

impl AuditOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditOutcome::Ok => "ok",
            AuditOutcome::Failed => "failed",
            AuditOutcome::Uncertain => "uncertain",
            AuditOutcome::Refused => "refused",
        }
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
