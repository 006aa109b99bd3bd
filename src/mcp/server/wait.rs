//! Waiting for the operator inside one `service_execute` (issue 24): when
//! the plan waits for approval and the client declared form elicitation
//! (protocol before 2026-07-28, where the server may ask the client), the
//! user is shown a form naming the target, the plan, its action and app,
//! the time left and the command to review it on the server. Runs
//! unprivileged in the MCP server.
//!
//! Security invariant: nothing the client answers approves or executes
//! anything. Accept only means "look again": the server asks the host
//! (inventory) and executes once only if the host says the plan is
//! approved; the host checks the approval again when it claims the plan.
//! Decline, cancel, no answer or a broken form end the wait: nothing runs.
//! The form asks for no data, so there is nothing for a client (or a hook
//! answering for it) to fill in that could mean consent.

use std::time::{Duration, SystemTime};

use rmcp::RoleServer;
use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema, ProtocolVersion,
    ServerRequest,
};
use rmcp::service::{Peer, RequestContext};
use serde_json::json;

use super::{Member, VolceLab, Watcher};
use crate::inspect::Status;
use crate::vocab::PlanId;
use crate::wire::Request;
use crate::wire::answers::inventory::OpenPlan;

use super::super::envelope::Served;
use super::super::tools::ToolName;

/// At most this many forms per call; then the answer is today's
/// `approval_required`, and the agent can call again.
pub const ROUNDS: u32 = 5;

/// The most one form may stay open, besides the plan's own time left.
const FORM_TIMEOUT: Duration = Duration::from_secs(600);

/// The client's peer, when it can be asked with a form in this request:
/// it declared form elicitation (or elicitation with no mode, which means
/// form) and the request is of a protocol that allows server requests.
pub(super) fn form_peer(context: &RequestContext<RoleServer>) -> Option<Peer<RoleServer>> {
    let version = context.protocol_version()?;
    if version >= ProtocolVersion::V_2026_07_28 {
        return None;
    }
    let elicitation = context.client_capabilities()?.elicitation?;
    (elicitation.form.is_some() || elicitation.url.is_none()).then(|| context.peer.clone())
}

/// Whether an execute's result is the host's `approval_required`.
fn waits_for_approval(served: &Served) -> bool {
    served.value["code"] == "approval_required"
}

/// What the user chose on one form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    LookAgain,
    StopWaiting,
}

/// The form's text: everything the user needs to get the operator to act.
fn form_message(target: &str, plan: &OpenPlan, left_secs: u64, round: u32) -> String {
    let app = plan.app.as_deref().map(|app| format!(" of app {app}")).unwrap_or_default();
    format!(
        "volce-lab is waiting for an operator to approve a plan on the server.\n\
         Target: {target}\nPlan: {id}\nAction: {action}{app}\nTime left: {} min {} s\n\
         On the server the operator reviews it with: sudo volce-lab-host show {id}\n\
         and approves it with the command show prints. Choose Accept once they have approved it, to \
         look again (accepting approves nothing; only the operator can); Decline to stop waiting. \
         (Look {round} of {ROUNDS}.)",
        left_secs / 60,
        left_secs % 60,
        id = plan.plan_id,
        action = plan.action.as_str(),
    )
}

/// Seconds until `expires_at` (RFC 3339), 0 if past or unreadable.
fn left_secs(expires_at: &str) -> u64 {
    humantime::parse_rfc3339(expires_at)
        .ok()
        .and_then(|at| at.duration_since(SystemTime::now()).ok())
        .map_or(0, |left| left.as_secs())
}

/// Shows one form and waits for the choice (at most the plan's time left).
async fn ask(peer: &Peer<RoleServer>, message: String, left: Duration) -> Choice {
    let schema = ElicitationSchema::new(Default::default());
    let params = ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: schema };
    let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
    match tokio::time::timeout(left.min(FORM_TIMEOUT), peer.send_request(request)).await {
        Ok(Ok(ClientResult::ElicitResult(result))) if result.action == ElicitationAction::Accept => {
            Choice::LookAgain
        }
        _ => Choice::StopWaiting,
    }
}

impl VolceLab {
    /// `service_execute` of `plan_id` on `member`: today's call, then, if
    /// the host answers `approval_required` and `peer` can be asked, the
    /// wait of the module header.
    pub(super) async fn execute_waiting(
        &self,
        member: &Member,
        plan_id: PlanId,
        request_id: String,
        progress: Option<Watcher>,
        peer: Option<Peer<RoleServer>>,
    ) -> Served {
        let execute = |progress| {
            let request = Request::execute(&plan_id);
            self.manage(
                member,
                ToolName::ServiceExecute,
                request,
                None,
                Some(plan_id.clone()),
                request_id.clone(),
                progress,
            )
        };
        let first = execute(progress.clone()).await;
        let Some(peer) = peer.filter(|_| waits_for_approval(&first)) else { return first };
        let mut open = self.open_plan(member, &plan_id, &request_id).await;
        for round in 1..=ROUNDS {
            let Some(plan) = open.filter(|p| p.state.as_str() == "pending") else { break };
            let left = left_secs(&plan.expires_at);
            if left == 0 {
                break;
            }
            let message = form_message(&member.name, &plan, left, round);
            if ask(&peer, message, Duration::from_secs(left)).await == Choice::StopWaiting {
                return declined(first);
            }
            open = self.open_plan(member, &plan_id, &request_id).await;
            match &open {
                // Approved on the host: the one execute; the host checks again.
                Some(plan) if plan.approved => return execute(progress).await,
                Some(_) => {}
                // No longer open (expired, rejected, used): the host says which.
                None => return execute(progress).await,
            }
        }
        still_waiting(first)
    }

    /// The plan as the host lists it among the open plans, if it is.
    async fn open_plan(&self, member: &Member, plan_id: &PlanId, request_id: &str) -> Option<OpenPlan> {
        let served = self
            .manage(
                member,
                ToolName::ServiceInventory,
                Request::Inventory {},
                None,
                None,
                request_id.to_owned(),
                None,
            )
            .await;
        if served.status != Status::Ok {
            return None;
        }
        let plans: Vec<OpenPlan> = serde_json::from_value(served.value["result"]["plans"].clone()).ok()?;
        plans.into_iter().find(|plan| plan.plan_id == *plan_id)
    }
}

/// Sets the sentence of the kept `approval_required` result.
fn with_message(mut served: Served, message: &str) -> Served {
    if let Some(map) = served.value.as_object_mut() {
        map.insert("message".into(), json!(message));
    }
    served
}

/// The user declined (or cancelled, or did not answer): nothing ran.
fn declined(first: Served) -> Served {
    let before = first.value["message"].as_str().unwrap_or_default().to_owned();
    with_message(
        first,
        &format!("The user declined to wait for the operator's approval; nothing ran. {before}"),
    )
}

/// Every look found the plan still waiting.
fn still_waiting(first: Served) -> Served {
    let before = first.value["message"].as_str().unwrap_or_default().to_owned();
    with_message(
        first,
        &format!(
            "The operator had not approved the plan after {ROUNDS} looks, or it is no longer open; nothing ran. {before}"
        ),
    )
}
