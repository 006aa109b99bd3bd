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
//!
//! Under 2026-07-28 (no server-to-client requests) the same form travels in
//! an `InputRequiredResult` with a sealed `requestState` (`seal.rs`); the
//! client's retry carries the answer and the state, which must open (ours,
//! unchanged, for this call, unexpired, unused) before anything is asked
//! of the host. A decline on that path asks the host nothing at all.

use std::time::{Duration, SystemTime};

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientResult, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationSchema, InputRequest, InputRequiredResult, InputResponses, ProtocolVersion,
    ServerRequest,
};
use rmcp::service::{Peer, RequestContext};

use super::seal::{self, State};
use super::{Member, VolceLab, Watcher};
use crate::inspect::Status;
use crate::vocab::{Code, PlanId, PlanState};
use crate::wire::Request;
use crate::wire::answers::Open;
use crate::wire::answers::read::ListedPlan;

use super::super::envelope::{self, Served};
use super::super::rpc::{Answer, AnswerCode};
use super::super::tools::ToolName;

/// At most this many forms per call; then the answer is today's
/// `approval_required`, and the agent can call again.
pub const ROUNDS: u32 = 5;

/// The most one form may stay open, besides the plan's own time left.
const FORM_TIMEOUT: Duration = Duration::from_secs(600);

/// The key of our one input request in an `InputRequiredResult`.
const INPUT_KEY: &str = "operator_approval";

/// How this call may wait for the operator.
pub(super) enum Waiter {
    /// The client cannot show a form: today's answer.
    Not,
    /// Before 2026-07-28: ask with `elicitation/create` on this peer.
    Form(Peer<RoleServer>),
    /// 2026-07-28: answer `InputRequiredResult`; `state` and `responses`
    /// are what the client's retry carried, `digest` the arguments'.
    Retry { state: Option<String>, responses: Option<InputResponses>, digest: String },
    /// The request declared the Tasks extension: answer a task that
    /// watches the plan on the host (`task.rs`).
    Task,
}

impl Waiter {
    /// From the request: the client declared form elicitation (or
    /// elicitation with no mode, which means form), and the protocol says
    /// which way to ask.
    pub(super) fn of(context: &RequestContext<RoleServer>, request: &CallToolRequestParams) -> Waiter {
        let form = context
            .client_capabilities()
            .and_then(|caps| caps.elicitation)
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        let tasks = context.client_capabilities().is_some_and(|caps| caps.supports_tasks());
        match context.protocol_version() {
            _ if tasks => Waiter::Task,
            _ if !form => Waiter::Not,
            Some(version) if version >= ProtocolVersion::V_2026_07_28 => Waiter::Retry {
                state: request.request_state.clone(),
                responses: request.input_responses.clone(),
                digest: seal::sha256_hex(
                    serde_json::to_string(&request.arguments).unwrap_or_default().as_bytes(),
                ),
            },
            Some(_) => Waiter::Form(context.peer.clone()),
            None => Waiter::Not,
        }
    }
}

/// A call as served, and, on the 2026-07-28 path, the `InputRequiredResult`
/// the client gets instead of the result (the served call is its audit
/// line); on the task path, the task.
pub struct Handled {
    pub(super) served: Served,
    pub(super) ask: Option<CallToolResponse>,
}

impl From<Served> for Handled {
    fn from(served: Served) -> Handled {
        Handled { served, ask: None }
    }
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The form, as an input request of an `InputRequiredResult`.
fn form_request(message: String) -> InputRequest {
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: ElicitationSchema::new(Default::default()),
    };
    InputRequest::Elicitation(ElicitRequest::new(params))
}

/// What the retry answered to our form: only an `accept` looks again.
pub(super) fn accepted(responses: Option<&InputResponses>) -> bool {
    responses
        .and_then(|r| r.get(INPUT_KEY))
        .and_then(|value| serde_json::from_value::<ElicitResult>(value.clone()).ok())
        .is_some_and(|result| result.action == ElicitationAction::Accept)
}

/// Whether an execute's result is the host's `approval_required`.
pub(super) fn waits_for_approval(served: &Served) -> bool {
    served.code() == Some(&AnswerCode::Known(Code::ApprovalRequired))
}

/// What the user chose on one form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Choice {
    LookAgain,
    StopWaiting,
}

/// The form's text: everything the user needs to get the operator to act.
fn form_message(target: &str, listed: &ListedPlan, left_secs: u64, round: u32) -> String {
    let plan = &listed.plan;
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

/// Seconds until the plan expires, 0 if past or unreadable.
pub(super) fn left_secs(listed: &ListedPlan) -> u64 {
    listed.expires.and_then(|at| at.duration_since(SystemTime::now()).ok()).map_or(0, |left| left.as_secs())
}

/// The plan while it waits for approval: listed and pending.
pub(super) fn pending(open: Option<ListedPlan>) -> Option<ListedPlan> {
    open.filter(|listed| listed.plan.state == Open::Known(PlanState::Pending))
}

/// Shows one form and waits for the choice (at most the plan's time left).
pub(super) async fn ask(peer: &Peer<RoleServer>, message: String, left: Duration) -> Choice {
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
        waiter: Waiter,
    ) -> Handled {
        let peer = match waiter {
            Waiter::Not => None,
            Waiter::Form(peer) => Some(peer),
            Waiter::Retry { state, responses, digest } => {
                let retry = Retry { state, responses, digest };
                return self.execute_retrying(member, plan_id, request_id, progress, retry).await;
            }
            Waiter::Task => {
                let first = self.execute_once(member, &plan_id, &request_id, progress.clone()).await;
                if !waits_for_approval(&first) {
                    return first.into();
                }
                let open = self.open_plan(member, &plan_id, &request_id).await;
                let task = self.watch_as_task(member, plan_id, request_id, open, progress);
                return Handled { served: first, ask: task.map(Into::into) };
            }
        };
        self.execute_asking(member, plan_id, request_id, progress, peer).await.into()
    }

    /// The 2025-11-25 path: forms sent with `elicitation/create`.
    async fn execute_asking(
        &self,
        member: &Member,
        plan_id: PlanId,
        request_id: String,
        progress: Option<Watcher>,
        peer: Option<Peer<RoleServer>>,
    ) -> Served {
        let execute = |progress| self.execute_once(member, &plan_id, &request_id, progress);
        let first = execute(progress.clone()).await;
        let Some(peer) = peer.filter(|_| waits_for_approval(&first)) else { return first };
        let mut open = self.open_plan(member, &plan_id, &request_id).await;
        for round in 1..=ROUNDS {
            let Some(plan) = pending(open) else { break };
            let left = left_secs(&plan);
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
                Some(listed) if listed.plan.approved => return execute(progress).await,
                Some(_) => {}
                // No longer open (expired, rejected, used): the host says which.
                None => return execute(progress).await,
            }
        }
        still_waiting(first)
    }

    /// The 2026-07-28 path: the form in an `InputRequiredResult`, the
    /// answer in the retry, bound by the sealed state.
    async fn execute_retrying(
        &self,
        member: &Member,
        plan_id: PlanId,
        request_id: String,
        progress: Option<Watcher>,
        retry: Retry,
    ) -> Handled {
        let execute = |progress| self.execute_once(member, &plan_id, &request_id, progress);
        let round = match &retry.state {
            // The first call: today's execute; the form only if it waits.
            None => {
                let first = execute(progress).await;
                if !waits_for_approval(&first) {
                    return first.into();
                }
                let open = self.open_plan(member, &plan_id, &request_id).await;
                return match self.input_required(member, &plan_id, &retry.digest, open, 1) {
                    Some(ask) => Handled { served: first, ask: Some(ask.into()) },
                    None => first.into(),
                };
            }
            Some(text) => match self.opened_round(member, &plan_id, text, &retry.digest) {
                Err(refusal) => {
                    return self.refused(ToolName::ServiceExecute, Some(member), refusal, request_id).into();
                }
                Ok(round) => round,
            },
        };
        if !accepted(retry.responses.as_ref()) {
            // Declined or cancelled: the host is not asked at all.
            return self.not_run(member, &plan_id, request_id, DECLINED).into();
        }
        let open = self.open_plan(member, &plan_id, &request_id).await;
        match &open {
            Some(listed) if listed.plan.approved => return execute(progress).await.into(),
            None => return execute(progress).await.into(),
            Some(_) => {}
        }
        let waiting = self.not_run(member, &plan_id, request_id, STILL_WAITING);
        let ask =
            (round < ROUNDS).then(|| self.input_required(member, &plan_id, &retry.digest, open, round + 1));
        Handled { served: waiting, ask: ask.flatten().map(Into::into) }
    }

    /// The `InputRequiredResult` of look `round`, while the plan is open.
    fn input_required(
        &self,
        member: &Member,
        plan_id: &PlanId,
        digest: &str,
        open: Option<ListedPlan>,
        round: u32,
    ) -> Option<InputRequiredResult> {
        let plan = pending(open)?;
        let left = left_secs(&plan);
        if left == 0 {
            return None;
        }
        let message = form_message(&member.name, &plan, left, round);
        Some(self.sealed_form(member, plan_id, digest, message, left, round))
    }

    /// An `InputRequiredResult` asking `message` in one form, with a state
    /// sealed for this target, plan and call, good for `left` seconds (at
    /// most the form's own limit). Demo mode asks the same way.
    pub(super) fn sealed_form(
        &self,
        member: &Member,
        plan_id: &PlanId,
        digest: &str,
        message: String,
        left: u64,
        round: u32,
    ) -> InputRequiredResult {
        let state = State {
            target: member.name.clone(),
            plan_id: plan_id.to_string(),
            digest: digest.to_owned(),
            expires_at: now_secs() + left.min(FORM_TIMEOUT.as_secs()),
            nonce: seal::random_hex(),
            round,
        };
        let requests = [(INPUT_KEY.to_owned(), form_request(message))].into_iter().collect();
        InputRequiredResult::new(Some(requests), Some(self.sealer.seal(&state)))
    }

    /// The round a retry's sealed `state` answers, or why it is refused
    /// (tampered, foreign, expired, replayed: `seal.rs`).
    pub(super) fn opened_round(
        &self,
        member: &Member,
        plan_id: &PlanId,
        state: &str,
        digest: &str,
    ) -> Result<u32, crate::vocab::Refusal> {
        self.sealer.open(state, &member.name, plan_id.as_str(), digest, now_secs()).map(|state| state.round)
    }

    /// `approval_required` without asking the host: nothing ran.
    fn not_run(&self, member: &Member, plan_id: &PlanId, request_id: String, message: &str) -> Served {
        let message =
            format!("{message} Ask the operator to run `sudo volce-lab-host show {plan_id}` on the server.");
        let answer = Answer::new(Status::Rejected, Some(Code::ApprovalRequired.into()), message);
        let facts = envelope::Managed {
            tool: ToolName::ServiceExecute,
            operation: crate::wire::Operation::Execute,
            action: None,
            plan_id: Some(plan_id.clone()),
            answer,
            execution: None,
        };
        envelope::managed(self.base(Some(member), &request_id), facts, request_id)
    }

    /// One execute request, as a call without any wait makes it.
    pub(super) async fn execute_once(
        &self,
        member: &Member,
        plan_id: &PlanId,
        request_id: &str,
        progress: Option<Watcher>,
    ) -> Served {
        let request = Request::execute(plan_id);
        let tool = ToolName::ServiceExecute;
        self.manage(member, tool, request, None, Some(plan_id.clone()), request_id.to_owned(), progress).await
    }

    /// The plan as the host lists it among the open plans, if it is:
    /// the read-only inventory, asked through the rpc client and read
    /// typed (`crate::wire::answers::read`), with no result of its own.
    pub(super) async fn open_plan(
        &self,
        member: &Member,
        plan_id: &PlanId,
        request_id: &str,
    ) -> Option<ListedPlan> {
        let (answer, _) = self.ask(member, &Request::Inventory {}, request_id, None).await;
        let returned = answer.result.filter(|_| answer.status == Status::Ok)?;
        returned.read.open_plan(plan_id).cloned()
    }
}

/// What the retry of the 2026-07-28 path carried.
struct Retry {
    state: Option<String>,
    responses: Option<InputResponses>,
    digest: String,
}

pub(super) const DECLINED: &str = "The user declined to wait for the operator's approval; nothing ran.";
const STILL_WAITING: &str = "The operator has not approved the plan yet; nothing ran.";

/// The user declined (or cancelled, or did not answer): nothing ran.
fn declined(first: Served) -> Served {
    let message = format!("{DECLINED} {}", first.message());
    first.with_message(message)
}

/// Every look found the plan still waiting.
fn still_waiting(first: Served) -> Served {
    let message = format!(
        "The operator had not approved the plan after {ROUNDS} looks, or it is no longer open; nothing ran. {}",
        first.message()
    );
    first.with_message(message)
}
