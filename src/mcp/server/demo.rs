//! Demo mode rehearses the approval cycle (issue 24): `service_plan`
//! answers a simulated plan (an id, the `show` and `approve` text the
//! operator would see on the server), and `service_execute` of that id
//! waits the way the client can (a task, a form, or in the call) while a
//! simulated operator approves it after a moment, then answers a simulated
//! result. Every result says `is_demo`; nothing is contacted and nothing
//! runs. Runs unprivileged in the MCP server.

use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::CreateTaskResult;
use rmcp::task_manager::TaskOptions;
use serde::Serialize;
use serde_json::{Map, Value};

use super::seal;
use super::wait::{self, Handled, Waiter};
use super::{Member, VolceLab};
use crate::inspect::Status;
use crate::vocab::{Action, Code, PlanId};
use crate::wire::Operation;
use crate::wire::answers::execution::ExecutionOutcome;
use crate::wire::answers::read::Read;

use super::super::envelope::{self, Served};
use super::super::rpc::{Answer, Returned};
use super::super::tools::ToolName;

/// How long the simulated operator takes to approve.
pub const OPERATOR_DELAY: Duration = Duration::from_secs(2);

/// At most this many simulated plans are remembered (the oldest go first).
const KEPT: usize = 32;

/// The simulated plans of this process: id, action, app.
#[derive(Default)]
pub struct Plans(Mutex<Vec<(PlanId, Action, Option<String>)>>);

impl Plans {
    fn add(&self, plan: (PlanId, Action, Option<String>)) {
        let mut plans = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if plans.len() == KEPT {
            plans.remove(0);
        }
        plans.push(plan);
    }

    /// The action of the plan an answer names.
    fn find_answer(&self, answer: &Answer) -> Option<Action> {
        answer.plan_id.as_ref().and_then(|id| self.find(id)).map(|(action, _)| action)
    }

    fn find(&self, id: &PlanId) -> Option<(Action, Option<String>)> {
        let plans = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        plans.iter().find(|(p, ..)| p == id).map(|(_, action, app)| (*action, app.clone()))
    }
}

/// The `result` of a simulated plan: its `plan_id` (as every result
/// names a plan), and what the operator would see and run.
#[derive(Serialize)]
struct SimulatedPlan<'a> {
    plan_id: &'a PlanId,
    action: Action,
    app: Option<&'a str>,
    requires_approval: bool,
    simulated: bool,
    operator_show: String,
    digest: String,
    operator_approve: String,
}

/// The `result` of a simulated execution: the plan, and the outcome word
/// a real execution carries.
#[derive(Serialize)]
struct SimulatedExecution<'a> {
    plan_id: &'a PlanId,
    outcome: ExecutionOutcome,
    simulated: bool,
}

/// A simulated body as an `ok` answer's: the object, read as a real
/// answer to `operation` naming `plan_id` is.
fn returned(body: impl Serialize, operation: Operation, plan_id: &PlanId) -> Option<Returned> {
    let Ok(Value::Object(object)) = serde_json::to_value(body) else { return None };
    let read = match operation {
        Operation::Plan => Read::Plan { plan_id: plan_id.clone(), terms: None },
        _ => Read::Execute { plan_id: plan_id.clone() },
    };
    Some(Returned { object, read })
}

/// The simulated plan's digest: what a real operator approves beside the
/// id (`approve PLAN_ID DIGEST`), so the rehearsal shows the command whole.
/// Derived from the id, so nothing more is remembered; it means nothing
/// anywhere else.
fn digest_of(id: &PlanId) -> String {
    use sha2::{Digest as _, Sha256};
    crate::text::hex(&Sha256::digest(format!("volce-lab demo plan {id}")))
}

/// The operator's approve command for the simulated plan.
fn approve_command(id: &PlanId) -> String {
    format!("sudo volce-lab-host approve {id} {}", digest_of(id))
}

/// What `sudo volce-lab-host show ID` would print for the simulated plan.
fn show_text(target: &str, id: &PlanId, action: Action, app: Option<&str>) -> String {
    let app = app.map(|app| format!("\napp: {app}")).unwrap_or_default();
    format!(
        "plan {id} (SIMULATED, demo mode)\ntarget: {target}\naction: {}{app}\ndigest: {}\n\
         state: pending, approval REQUIRED\napprove with: {}\nreject with: sudo volce-lab-host reject {id} \
         --reason TEXT",
        action.as_str(),
        digest_of(id),
        approve_command(id),
    )
}

impl VolceLab {
    fn demo_served(&self, member: &Member, tool: ToolName, answer: Answer, request_id: &str) -> Served {
        let action = self.demo_plans.find_answer(&answer);
        let operation = match tool {
            ToolName::ServicePlan => Operation::Plan,
            _ => Operation::Execute,
        };
        let plan_id = answer.plan_id.clone();
        let facts = envelope::Managed { tool, operation, action, plan_id, answer, execution: None };
        envelope::managed(self.base(Some(member), request_id), facts, request_id.to_owned())
    }

    /// `service_plan` in demo mode: a simulated plan that waits for approval.
    pub(super) fn demo_plan(
        &self,
        member: &Member,
        action: Action,
        parameters: &Map<String, Value>,
        request_id: String,
    ) -> Served {
        let id = PlanId::parse(&seal::random_hex()).expect("32 hex digits");
        let app = parameters.get("app").and_then(Value::as_str).map(str::to_owned);
        let show = show_text(&member.name, &id, action, app.as_deref());
        self.demo_plans.add((id.clone(), action, app.clone()));
        let message = format!(
            "Simulated plan (demo mode): no server was contacted and nothing was recorded. On a real \
             server this plan waits for an operator, who reviews it with `sudo volce-lab-host show {id}` \
             and approves it there. Call service_execute with plan_id {id} to rehearse the wait: a \
             simulated operator approves it after a moment. Say it is a demo."
        );
        let plan = SimulatedPlan {
            plan_id: &id,
            action,
            app: app.as_deref(),
            requires_approval: true,
            simulated: true,
            operator_show: show,
            digest: digest_of(&id),
            operator_approve: approve_command(&id),
        };
        let answer = Answer {
            result: returned(plan, Operation::Plan, &id),
            plan_id: Some(id.clone()),
            ..Answer::new(Status::Ok, None, message)
        };
        self.demo_served(member, ToolName::ServicePlan, answer, &request_id)
    }

    /// The simulated result once the simulated operator approved.
    fn demo_done(&self, member: &Member, id: &PlanId, request_id: &str) -> Served {
        let message = format!(
            "Simulated execution (demo mode): a simulated operator approved plan {id} and nothing ran; \
             no server was contacted. On a real server the operator approves with `{}` and the plan \
             then runs once. Say it is a demo.",
            approve_command(id)
        );
        let done = SimulatedExecution { plan_id: id, outcome: ExecutionOutcome::Completed, simulated: true };
        let answer = Answer {
            result: returned(done, Operation::Execute, id),
            plan_id: Some(id.clone()),
            ..Answer::new(Status::Ok, None, message)
        };
        self.demo_served(member, ToolName::ServiceExecute, answer, request_id)
    }

    /// `service_execute` in demo mode; `None` for an id that is not one
    /// of this process's simulated plans (today's `demo_only`).
    pub(super) async fn demo_execute(
        &self,
        member: &Member,
        id: &PlanId,
        request_id: String,
        waiter: Waiter,
    ) -> Option<Handled> {
        let (action, app) = self.demo_plans.find(id)?;
        let done = || self.demo_done(member, id, &request_id);
        match waiter {
            Waiter::Task => {
                let message = "Simulated (demo mode): the plan waits for a simulated operator.";
                let waiting = Answer {
                    plan_id: Some(id.clone()),
                    ..Answer::new(Status::Rejected, Some(Code::ApprovalRequired.into()), message.into())
                };
                let served = self.demo_served(member, ToolName::ServiceExecute, waiting, &request_id);
                let result = done().tool_result();
                let options = TaskOptions::new()
                    .with_poll_interval_ms(super::task::POLL_INTERVAL_MS)
                    .with_status_message(format!(
                        "awaiting a simulated operator's approval of plan {id} on {} (demo mode)",
                        member.name
                    ));
                let task = self.tasks.spawn(options, move |_context| {
                    Box::pin(async move {
                        tokio::time::sleep(OPERATOR_DELAY).await;
                        Ok(result)
                    })
                });
                Some(Handled { served, ask: Some(CreateTaskResult::new(task).into()) })
            }
            Waiter::Form(peer) => {
                let message = form_message(member, id, action, app.as_deref());
                if wait::ask(&peer, message, OPERATOR_DELAY * 60).await == wait::Choice::StopWaiting {
                    return Some(self.demo_declined(member, id, &request_id).into());
                }
                tokio::time::sleep(OPERATOR_DELAY).await;
                Some(done().into())
            }
            // 2026-07-28 (issue 37: it waited in the call although the
            // client declared forms): the same InputRequiredResult and sealed
            // state the real path gives, so a decline can be rehearsed too.
            Waiter::Retry { state: None, digest, .. } => {
                let message = "Simulated (demo mode): the plan waits for a simulated operator.";
                let waiting = Answer {
                    plan_id: Some(id.clone()),
                    ..Answer::new(Status::Rejected, Some(Code::ApprovalRequired.into()), message.into())
                };
                let served = self.demo_served(member, ToolName::ServiceExecute, waiting, &request_id);
                let form = form_message(member, id, action, app.as_deref());
                let ask = self.sealed_form(member, id, &digest, form, OPERATOR_DELAY.as_secs() * 60, 1);
                Some(Handled { served, ask: Some(ask.into()) })
            }
            Waiter::Retry { state: Some(state), responses, digest } => {
                if let Err(refusal) = self.opened_round(member, id, &state, &digest) {
                    return Some(
                        self.refused(ToolName::ServiceExecute, Some(member), refusal, request_id).into(),
                    );
                }
                if !wait::accepted(responses.as_ref()) {
                    return Some(self.demo_declined(member, id, &request_id).into());
                }
                tokio::time::sleep(OPERATOR_DELAY).await;
                Some(done().into())
            }
            // No way to ask the client: the wait stays in the call.
            Waiter::Not => {
                tokio::time::sleep(OPERATOR_DELAY).await;
                Some(done().into())
            }
        }
    }

    /// The user declined the simulated wait: nothing ran (nothing would have).
    fn demo_declined(&self, member: &Member, id: &PlanId, request_id: &str) -> Served {
        let message = format!("{} (demo mode)", wait::DECLINED);
        let declined = Answer {
            plan_id: Some(id.clone()),
            ..Answer::new(Status::Rejected, Some(Code::ApprovalRequired.into()), message)
        };
        self.demo_served(member, ToolName::ServiceExecute, declined, request_id)
    }
}

/// The demo's approval form: what a real operator would do, and that
/// accepting approves nothing real.
fn form_message(member: &Member, id: &PlanId, action: Action, app: Option<&str>) -> String {
    format!(
        "volce-lab demo mode: nothing is contacted. On a real server an operator would now approve plan {id} \
         ({} {}) on {} with `sudo volce-lab-host show {id}`. Accept to let a simulated operator approve it \
         (accepting approves nothing on a real server); Decline to stop waiting.\n\n{}",
        action.as_str(),
        app.unwrap_or(""),
        member.name,
        show_text(&member.name, id, action, app),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_show_text_is_marked_simulated_and_names_the_commands() {
        // Tried: an app and none.
        let id = PlanId::parse("0123456789abcdef0123456789abcdef").unwrap();
        let text = show_text("demo", &id, Action::Stop, Some("shop"));
        assert!(text.contains("SIMULATED") && text.contains("app: shop"), "{text}");
        // The approve command is whole: the id and the digest, as the real one takes them.
        let digest = digest_of(&id);
        assert!(crate::text::is_lower_hex(&digest, 64), "{digest}");
        assert!(text.contains(&format!("sudo volce-lab-host approve {id} {digest}\n")), "{text}");
        assert!(text.contains(&format!("digest: {digest}\n")), "{text}");
        assert_ne!(digest, digest_of(&PlanId::parse("fedcba9876543210fedcba9876543210").unwrap()));
        assert!(!show_text("demo", &id, Action::Stop, None).contains("app:"));
    }
}
