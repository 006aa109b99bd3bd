//! The local audit line of each call, and of a call the client cancelled
//! (`super::super::audit` writes it). Runs unprivileged in the MCP server.

use std::time::Instant;

use serde_json::{Map, Value};

use super::VolceLab;
use crate::inspect::Status;

use super::super::envelope::Served;
use super::super::tools::{self, Call, Selection, ToolName};

impl VolceLab {
    pub(super) fn audit(&self, tool: Option<ToolName>, served: &Served, started: Instant) {
        self.options.audit.append(&served.record(tool, started));
    }

    /// The audit line of a call the client cancelled: we killed whatever ran,
    /// so what happened on the server is not known.
    pub(super) fn audit_cancelled(
        &self,
        tool: ToolName,
        arguments: Option<&Map<String, Value>>,
        request_id: String,
        started: Instant,
    ) {
        let (target, rest) = match self.choices.select(tool, arguments) {
            Ok((Selection::One(index), rest)) => (Some(self.members[index].name.clone()), rest),
            Ok((Selection::FanOut(_) | Selection::Fleet(_) | Selection::Rollout, rest)) => (None, rest),
            Err(_) => (None, None),
        };
        let (check, action, plan_id) = match tools::validate(tool, rest.as_ref().or(arguments)) {
            Ok(Call::Check(check)) => (Some(check), None, None),
            Ok(Call::Plan { action, .. }) => (None, Some(action.as_str()), None),
            Ok(Call::Execute { plan_id, .. }) => (None, None, Some(plan_id)),
            _ => (None, None, None),
        };
        let served = Served { target, check, action, plan_id, ..Served::bare(Status::Unknown, request_id) };
        self.audit(Some(tool), &served, started);
    }
}
