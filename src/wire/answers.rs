//! The bodies of the helper's `ok` answers, one type per operation, written
//! once for both ends: the root helper (`crate::host`) builds them, and the
//! unprivileged workstation (`crate::inspect`, `crate::mcp::rpc`) reads the
//! fields it uses through the same types (`read.rs`: what it acts on in
//! each operation's body). Pure data: no I/O.
//!
//! ```text
//! gateway_status  GatewayStatus  gateways.rs   (web_status judges it)
//! inventory       Inventory      inventory.rs
//! plan            PlanView       plan_view.rs  (also `volce-lab-host show --json`)
//! execute         ExecutedPlan   execution.rs
//! logs            LogLines       log_lines.rs
//! statement       ApprovalStatement  statement.rs
//! signed_approval PlanView       plan_view.rs  (the plan, approved)
//! ```
//! `app_state.rs` holds the words the inventory and gateway_status share:
//! an app's state as the engine shows it, and why it drifted.
//!
//! The JSON is protocol 1's plus the fields protocol 2 added (`super::versions`): the field names, the
//! nesting and every choice between a null and a missing field are held to
//! golden files by tests/hermetic/wire_answers.rs. An `ok` reply's `result`
//! still reaches the agent as the object the helper printed, fields this
//! build does not know included.
//!
//! The workstation and the server are installed separately, so what the
//! workstation reads tolerates older and newer helpers alike: no type here
//! refuses unknown fields, a field an older helper did not send defaults
//! where the workstation reads it, and a word of a closed set this build
//! does not know is kept ([`Open::Other`]) rather than refused.

pub mod app_state;
pub mod execution;
pub mod gateways;
pub mod inventory;
pub mod log_lines;
pub mod plan_view;
pub mod read;
pub mod statement;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::wire::{Operation, Reply};
use execution::ExecutedPlan;
use gateways::GatewayStatus;
use inventory::Inventory;
use log_lines::LogLines;
use plan_view::PlanView;
use statement::ApprovalStatement;

/// The body of an `ok` reply: one variant per operation that answers `ok`
/// (a gate refusal never does), so a body travels under its own
/// operation's name only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    GatewayStatus(GatewayStatus),
    Inventory(Box<Inventory>),
    Plan(Box<PlanView>),
    Execute(ExecutedPlan),
    Logs(LogLines),
    Statement(ApprovalStatement),
    /// The plan a signed approval approved.
    SignedApproval(Box<PlanView>),
}

impl Body {
    pub fn operation(&self) -> Operation {
        match self {
            Body::GatewayStatus(_) => Operation::GatewayStatus,
            Body::Inventory(_) => Operation::Inventory,
            Body::Plan(_) => Operation::Plan,
            Body::Execute(_) => Operation::Execute,
            Body::Logs(_) => Operation::Logs,
            Body::Statement(_) => Operation::Statement,
            Body::SignedApproval(_) => Operation::SignedApproval,
        }
    }

    /// The body as its reply's `result`: always an object.
    pub fn to_json(&self) -> Value {
        let value = match self {
            Body::GatewayStatus(body) => serde_json::to_value(body),
            Body::Inventory(body) => serde_json::to_value(body),
            Body::Plan(body) => serde_json::to_value(body),
            Body::Execute(body) => serde_json::to_value(body),
            Body::Logs(body) => serde_json::to_value(body),
            Body::Statement(body) => serde_json::to_value(body),
            Body::SignedApproval(body) => serde_json::to_value(body),
        };
        // Strings, numbers and string-keyed maps, and a plan's paths, which
        // were serialized once already when the plan was sealed: nothing fails.
        value.expect("an answer serializes")
    }
}

impl From<Body> for Reply {
    fn from(body: Body) -> Reply {
        Reply::Ok { operation: body.operation(), result: body.to_json() }
    }
}

/// A word of one of the contract's closed sets: one this build knows, or
/// the word as another helper sent it (an older helper's docker state
/// word, a newer helper's new reason). Written as the word either way; the
/// helper only ever builds [`Open::Known`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Open<T> {
    Known(T),
    Other(String),
}

impl<T> From<T> for Open<T> {
    fn from(known: T) -> Open<T> {
        Open::Known(known)
    }
}

impl<T: Copy + Into<&'static str>> Open<T> {
    /// The word as it travels.
    pub fn as_str(&self) -> &str {
        match self {
            Open::Known(known) => (*known).into(),
            Open::Other(word) => word,
        }
    }
}

#[cfg(test)]
mod tests;
