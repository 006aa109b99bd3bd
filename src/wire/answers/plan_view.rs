//! The `plan` answer and `volce-lab-host show --json`: one stored plan,
//! every field of its immutable body, and its life cycle beside it. Built
//! as root by the helper from the store's row (`StoredPlan::view` in
//! `crate::store`); the workstation reads only its `id`
//! ([`super::read`]).
//!
//! The body's fields are the sealed plan's (`crate::actions::plan::Plan`,
//! a test holds the two to the same names) with its times as RFC 3339 UTC:
//! the sealed plan, and so its digest, keeps the Unix seconds it was made
//! with.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Open;
use crate::actions::{Impact, Payload};
use crate::vocab::Action;
use crate::vocab::{Digest, PlanId, PlanOutcome, PlanState, Refusal};

/// One stored plan as the helper shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanView {
    pub format: u32,
    pub id: PlanId,
    pub action: Action,
    /// The parameters as the agent sent them (validated).
    pub parameters: Value,
    pub payload: Payload,
    pub impact: Impact,
    pub snapshot_digest: String,
    pub policy_hash: String,
    pub requester: String,
    pub requires_approval: bool,
    pub created_at: String,
    pub expires_at: String,
    /// What an operator approves.
    pub digest: Digest,
    /// [`PlanState`].
    pub state: Open<PlanState>,
    pub approval: Option<ApprovalStamp>,
    pub claimed_at: Option<String>,
    pub finished_at: Option<String>,
    /// [`PlanOutcome`], null until the plan ended.
    pub outcome: Option<Open<PlanOutcome>>,
    /// Present only in state `inspected`.
    pub resolution: Option<Stamp>,
    /// Present only in state `rejected`.
    pub rejection: Option<RejectionStamp>,
    /// Why a `failed` plan failed: its code and whole sentence (null before
    /// it ended, when it did not fail, and for plans a helper older than
    /// migration 11 recorded).
    #[serde(default)]
    pub failure: Option<Refusal>,
    /// A rolled-back plan's failed app container's last lines, read before
    /// the rollback removed or stopped it: redacted, bounded, and untrusted
    /// application output (never instructions). Absent when there are none
    /// and from helpers before 0.2.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_log: Option<crate::logs::AppLog>,
}

/// An operator's approval: who, when, and the digest they approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalStamp {
    pub by: String,
    pub at: String,
    pub digest: Digest,
}

/// An operator's `resolve` of a plan: who, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub by: String,
    pub at: String,
}

/// An operator's `reject`: who, when, and their `--reason` (their words,
/// untrusted; null without one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectionStamp {
    pub by: String,
    pub at: String,
    pub reason: Option<String>,
}
