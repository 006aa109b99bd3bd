//! What the workstation reads of the helper's `ok` answers: for each
//! operation, the fields it acts on, read once (`crate::mcp::rpc`) through
//! the field names and types the helper writes them with (the tests hold
//! each to its body type). Pure; runs unprivileged on the workstation.
//!
//! Why the fields and not the whole body: the workstation and the server
//! are installed separately, and the agent gets the body whole beside this
//! reading. A body whose other fields this build cannot read (a newer
//! helper's new action word in a plan it does not wait for, say) still
//! names its plan, as version 1's reader did; a body that does not have
//! the fields read here reads as [`Read::Nothing`] and is still passed on
//! as it came.

use std::time::SystemTime;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::inventory::OpenPlan;
use crate::vocab::{Digest, PlanId};
use crate::wire::Operation;

/// What the workstation acts on in one `ok` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// `plan`: the plan it stored ([`super::plan_view::PlanView::id`]),
    /// and the terms a rollout records of it (issue 43).
    Plan { plan_id: PlanId, terms: Option<PlanTerms> },
    /// `execute`: the plan it ran ([`super::execution::ExecutedPlan::plan_id`]).
    Execute { plan_id: PlanId },
    /// `inventory`: its open plans ([`super::inventory::Inventory::plans`]),
    /// which the approval wait looks at.
    Inventory { plans: Vec<ListedPlan> },
    /// Nothing the workstation acts on (`gateway_status`, `logs`), or a
    /// body without the fields read here.
    Nothing,
}

/// An open plan as an inventory lists it, and its expiry as a time (read
/// once, with the answer; `None` when the helper's text is no RFC 3339 time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedPlan {
    pub plan: OpenPlan,
    pub expires: Option<SystemTime>,
}

/// What a rollout's manifest keeps of a stored plan (`crate::mcp::rollout`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PlanTerms {
    pub digest: Digest,
    pub requires_approval: bool,
    pub expires_at: String,
}

/// The fields of a plan view the workstation reads.
#[derive(Deserialize)]
struct StoredPlan {
    id: PlanId,
    #[serde(flatten)]
    terms: Option<PlanTerms>,
}

/// The field of an execution the workstation reads.
#[derive(Deserialize)]
struct RanPlan {
    plan_id: PlanId,
}

/// The field of an inventory the workstation reads.
#[derive(Deserialize)]
struct OpenPlans {
    #[serde(deserialize_with = "listed")]
    plans: Vec<ListedPlan>,
}

/// The open plans, each read on its own: a plan this build cannot read (a
/// newer helper's action word, say) is left out rather than making the
/// whole list unreadable, so the wait still finds the plan it waits for
/// (which this workstation made, with an action it knows).
fn listed<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<ListedPlan>, D::Error> {
    let entries = Vec::<Value>::deserialize(deserializer)?;
    Ok(entries
        .into_iter()
        .filter_map(|entry| OpenPlan::deserialize(entry).ok())
        .map(|plan| {
            let expires = humantime::parse_rfc3339(&plan.expires_at).ok();
            ListedPlan { plan, expires }
        })
        .collect())
}

impl Read {
    /// What `result`, the body of an `ok` answer to `operation`, says.
    pub fn of(operation: Operation, result: &Value) -> Read {
        let read = match operation {
            Operation::Plan | Operation::SignedApproval => {
                StoredPlan::deserialize(result).map(|p| Read::Plan { plan_id: p.id, terms: p.terms })
            }
            Operation::Execute => RanPlan::deserialize(result).map(|p| Read::Execute { plan_id: p.plan_id }),
            Operation::Inventory => {
                OpenPlans::deserialize(result).map(|p| Read::Inventory { plans: p.plans })
            }
            Operation::GatewayStatus | Operation::Logs | Operation::GateRefusal | Operation::Statement => {
                return Read::Nothing;
            }
        };
        read.unwrap_or(Read::Nothing)
    }

    /// The plan the answer names, if any.
    pub fn plan_id(&self) -> Option<&PlanId> {
        match self {
            Read::Plan { plan_id, .. } | Read::Execute { plan_id } => Some(plan_id),
            Read::Inventory { .. } | Read::Nothing => None,
        }
    }

    /// The open plan `id`, if the answer is an inventory that lists it.
    pub fn open_plan(&self, id: &PlanId) -> Option<&ListedPlan> {
        match self {
            Read::Inventory { plans } => plans.iter().find(|listed| listed.plan.plan_id == *id),
            _ => None,
        }
    }
}
