//! The rmcp `ServerHandler`: lists the five tools, validates every call,
//! runs it behind the identity gate, shapes the result envelope, and writes
//! the local audit line. Runs unprivileged on the workstation (or on the
//! server in local mode).
//!
//! Invariants enforced here:
//! - nothing runs before [`tools::validate`] accepted the arguments;
//! - every result has `structuredContent` and the same JSON as text, and
//!   `isError` is true exactly when `status` is not `ok`;
//! - management calls run only outside demo mode, with identity verified
//!   (and verified again inside `Inspector::host_rpc`) and management enabled;
//! - rmcp does not drop a handler's future when the client cancels: it only
//!   cancels `RequestContext::ct`. We race the work against that token, so a
//!   cancel drops the work future, and dropping `exec::run` kills the child's
//!   process group. The audit line of a cancelled call says `unknown`;
//! - every call, refused or not, leaves exactly one audit line (a task's
//!   execute, later, leaves its own: `server/task.rs`);
//! - only a `service_execute` whose request carries a progress token gets
//!   progress notifications (`super::progress`), all sent before its result;
//! - `ping` answers `{}` in every protocol version and at every point of a
//!   session ([`super::Conformant`]), so clients can use it as a keep-alive.
//!
//! The handler and the result envelope it builds for every tool stay
//! together here; the sentence each status carries is sentences.rs, and
//! the Service rmcp runs (`ping` answered in every version) conformant.rs.

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::model::{CancelTaskParams, GetTaskParams, GetTaskResult, ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Map, Value};
use strum::VariantArray as _;
use tokio_util::sync::CancellationToken;

use crate::config::{DEFAULT_FAN_OUT, Fleet, FleetTarget};
use crate::exec::Execution;
use crate::inspect::{Check, Inspector, Status, request_id, timestamp};
use crate::vocab::Action;
use crate::vocab::{Code, PlanId, Refusal};
use crate::wire::{self, Request};

use super::envelope::{self, Served};
use super::result::Base;
use super::rpc::{self, Answer};
use super::tools::{self, Call, Choices, Selection, ToolName};

mod options;
pub use options::Options;

mod demo;
mod record;
mod rollout;
mod seal;
mod signed;
mod task;
mod wait;

use wait::Handled;

/// The volce-lab MCP server: cheap to clone (one shared state), so a
/// task (`task.rs`) can keep waiting after the call that made it answered.
#[derive(Clone)]
pub struct VolceLab(Arc<Shared>);

impl std::ops::Deref for VolceLab {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What every clone of a [`VolceLab`] shares.
pub struct Shared {
    /// The configured targets, in fleet order; `choices` names them.
    members: Vec<Member>,
    choices: Choices,
    /// How many checks of a fan-out run at once.
    fan_out: usize,
    options: Options,
    tools: Vec<Tool>,
    /// Seals the `requestState` of the 2026-07-28 approval path (`seal.rs`).
    sealer: seal::Sealer,
    /// The tasks of the Tasks extension (`task.rs`).
    tasks: rmcp::task_manager::TaskManager,
    /// Where each task's watch stands, for an honest `tasks/cancel` (`task.rs`).
    task_phases: task::Phases,
    /// The simulated plans of demo mode (`demo.rs`).
    demo_plans: demo::Plans,
    /// Each target's witnessed audit head, beside the audit log (`super::witness`).
    witness: super::witness::Witness,
}

/// One configured target: its name and its own inspector (its own
/// identity gate and ssh master).
#[derive(Clone)]
struct Member {
    name: String,
    inspector: Arc<Inspector>,
    /// Whatever its call, the note that other targets expect this one's
    /// identity (issue 38: volce-lab cannot tell them apart).
    shared: Option<String>,
}

impl VolceLab {
    /// A server for one target, named as its configuration names it.
    pub fn new(inspector: Inspector, options: Options) -> VolceLab {
        let name = inspector.config().target().to_owned();
        VolceLab::with_targets(vec![(name, Vec::new(), inspector)], DEFAULT_FAN_OUT, options)
    }

    /// A server for every target of `fleet`, each with the inspector `make` gives it.
    pub fn for_fleet(fleet: &Fleet, make: impl Fn(&FleetTarget) -> Inspector, options: Options) -> VolceLab {
        let targets = fleet.targets().iter().map(|t| (t.name.clone(), t.groups.clone(), make(t))).collect();
        VolceLab::with_targets(targets, fleet.fan_out, options)
    }

    /// (name, groups, inspector) per target, in fleet order.
    pub fn with_targets(
        targets: Vec<(String, Vec<String>, Inspector)>,
        fan_out: usize,
        options: Options,
    ) -> VolceLab {
        let mut choices = Choices::default();
        let mut members = Vec::with_capacity(targets.len());
        for (index, (name, groups, inspector)) in targets.into_iter().enumerate() {
            for group in groups {
                match choices.groups.iter_mut().find(|(g, _)| *g == group) {
                    Some((_, indexes)) => indexes.push(index),
                    None => choices.groups.push((group, vec![index])),
                }
            }
            choices.names.push(name.clone());
            members.push(Member { name, inspector: Arc::new(inspector), shared: None });
        }
        choices.groups.sort();
        let identities = members.iter().map(|m| {
            let config = m.inspector.config();
            (m.name.as_str(), config.expected_host.as_str(), config.expected_user.as_str())
        });
        for group in super::fan_out::sharing(identities) {
            for member in members.iter_mut().filter(|m| group.targets.contains(&m.name)) {
                member.shared = Some(group.note_for(&member.name));
            }
        }
        let tools = tools::list_for(&choices);
        let sealer = seal::Sealer::new();
        let tasks = rmcp::task_manager::TaskManager::new();
        let witness = super::witness::Witness::beside(options.audit.path());
        VolceLab(Arc::new(Shared {
            members,
            choices,
            fan_out: fan_out.max(1),
            options,
            tools,
            sealer,
            tasks,
            task_phases: Default::default(),
            demo_plans: Default::default(),
            witness,
        }))
    }

    /// The fields every result starts with; `member` is `None` only when
    /// the call was refused before a target was chosen.
    fn base(&self, member: Option<&Member>, request_id: &str) -> Base {
        // Mode and demo-ness are the same for every target of a fleet.
        let inspector = &self.members[0].inspector;
        Base {
            request_id: request_id.to_owned(),
            timestamp: timestamp(),
            is_demo: inspector.is_demo(),
            mode: inspector.config().mode,
            target: member.map(|m| m.name.clone()),
        }
    }

    /// Validates and runs one call of a known tool. A call on a target
    /// that shares its identity with another carries the note that says so,
    /// whatever its answer: the servers may be one.
    async fn run(
        &self,
        tool: ToolName,
        arguments: Option<&Map<String, Value>>,
        request_id: String,
        progress: Option<Watcher>,
        waiter: wait::Waiter,
        cancel: CancellationToken,
    ) -> Handled {
        let (selection, rest) = match self.choices.select(tool, arguments) {
            Ok(chosen) => chosen,
            Err(refusal) => return self.refused(tool, None, refusal, request_id).into(),
        };
        let shared = match &selection {
            Selection::One(index) => self.members[*index].shared.as_deref(),
            Selection::FanOut(_) | Selection::Fleet(_) | Selection::Rollout => None,
        };
        let call = tools::validate(tool, rest.as_ref().or(arguments));
        let index = match selection {
            Selection::One(index) => index,
            other => {
                return self.dispatch_several(tool, other, call, request_id, progress, cancel).await.into();
            }
        };
        let mut handled = self.dispatch(tool, &self.members[index], call, request_id, progress, waiter).await;
        if let Some(note) = shared {
            let message = format!("{} {note}", handled.served.message());
            handled.served = handled.served.with_message(message);
        }
        handled
    }

    /// [`VolceLab::run`] for a call on several targets: a fan-out, a
    /// rollout's plan, or a rollout's execute (issue 43), which alone
    /// watches `cancel` (its batch finishes; no later one starts).
    async fn dispatch_several(
        &self,
        tool: ToolName,
        selection: Selection,
        call: Result<Call, Refusal>,
        request_id: String,
        progress: Option<Watcher>,
        cancel: CancellationToken,
    ) -> Served {
        let call = match call {
            Ok(call) => call,
            Err(refusal) => return self.refused(tool, None, refusal, request_id),
        };
        match (selection, call) {
            (Selection::FanOut(indexes), Call::Check(check)) => {
                self.fan_out(check, &indexes, request_id).await
            }
            (Selection::Fleet(indexes), Call::Plan { action, parameters, batches }) => {
                self.plan_rollout(&indexes, action, parameters, batches, request_id).await
            }
            (Selection::Rollout, Call::ExecuteRollout { rollout_id, signed_approval }) => {
                self.execute_rollout(rollout_id, signed_approval, request_id, progress, cancel).await
            }
            _ => unreachable!("select and validate agree on which calls take several targets"),
        }
    }

    /// [`VolceLab::run`] once the target is chosen.
    async fn dispatch(
        &self,
        tool: ToolName,
        member: &Member,
        call: Result<Call, Refusal>,
        request_id: String,
        progress: Option<Watcher>,
        waiter: wait::Waiter,
    ) -> Handled {
        let served = match call {
            Err(refusal) => self.refused(tool, Some(member), refusal, request_id),
            Ok(Call::Check(check)) => self.check(member, check).await,
            Ok(Call::Inventory) => {
                self.manage(member, tool, Request::Inventory {}, None, None, request_id, None).await
            }
            Ok(Call::Plan { batches, .. }) if batches.given() => {
                let refusal = Refusal::new(
                    Code::UnexpectedField,
                    "`batch_size` and `health_wait_seconds` go with `targets` (a rollout), not with one `target`; \
                     nothing was run.",
                );
                self.refused(tool, Some(member), refusal, request_id)
            }
            Ok(Call::Plan { action, parameters, .. }) if member.inspector.is_demo() => {
                self.demo_plan(member, action, &parameters, request_id)
            }
            Ok(Call::Plan { action, parameters, .. }) => {
                let request = Request::plan(action, parameters);
                self.manage(member, tool, request, Some(action), None, request_id, None).await
            }
            // Only an execute runs long steps, so only it is watched; only
            // it waits for an approval (`wait.rs`).
            // Demo mode: a simulated plan rehearses the wait (`demo.rs`);
            // any other id gets today's `demo_only`.
            Ok(Call::Execute { plan_id, .. }) if member.inspector.is_demo() => {
                return match self.demo_execute(member, &plan_id, request_id.clone(), waiter).await {
                    Some(handled) => handled,
                    None => {
                        self.execute_waiting(member, plan_id, request_id, progress, wait::Waiter::Not).await
                    }
                };
            }
            Ok(Call::Execute { plan_id, signed_approval: None }) => {
                return self.execute_waiting(member, plan_id, request_id, progress, waiter).await;
            }
            Ok(Call::Execute { plan_id, signed_approval: Some(signed) }) => {
                return self.execute_signed(member, plan_id, signed, request_id, progress, waiter).await;
            }
            Ok(Call::Logs { app, container, tail, since_minutes }) => {
                let request = Request::logs(&app, container, tail, since_minutes);
                self.manage(member, tool, request, None, None, request_id, None).await
            }
            Ok(Call::ExecuteRollout { .. }) => unreachable!("a rollout's execute selects no target"),
        };
        served.into()
    }

    fn refused(
        &self,
        tool: ToolName,
        member: Option<&Member>,
        refusal: Refusal,
        request_id: String,
    ) -> Served {
        envelope::refused(self.base(member, &request_id), tool, refusal, request_id)
    }

    async fn check(&self, member: &Member, check: Check) -> Served {
        let mode = member.inspector.config().mode;
        let witnessed = self.witness.held(&member.name).map(|entry| entry.witnessed());
        let result = member.inspector.check_witnessed(check, witnessed.as_ref()).await;
        self.witness_check(&member.name, &result);
        envelope::check(&member.name, mode, result, self.witness_note(&member.name))
    }

    /// `cloud_check` on the targets at `indexes`, at most `fan_out` at
    /// once: one result per target (as a single check gives it) and the
    /// summary (`super::fan_out`).
    async fn fan_out(&self, check: Check, indexes: &[usize], request_id: String) -> Served {
        let targets: Vec<super::fan_out::Target> = indexes
            .iter()
            .map(|&i| {
                let name = &self.members[i].name;
                let witnessed = self.witness.held(name).map(|entry| entry.witnessed());
                (name.clone(), self.members[i].inspector.clone(), witnessed)
            })
            .collect();
        let results = super::fan_out::check_all(targets, self.fan_out, check).await;
        for (name, result) in &results {
            self.witness_check(name, result);
        }
        // An ok answer passed the target's identity gate: it answered as
        // its expected host and account.
        let answered =
            results.iter().zip(indexes).filter(|((_, r), _)| r.status == Status::Ok).map(|(_, &i)| {
                let config = self.members[i].inspector.config();
                (self.members[i].name.as_str(), config.expected_host.as_str(), config.expected_user.as_str())
            });
        let shared = super::fan_out::sharing(answered);
        let note = |name: &str| self.witness_note(name);
        envelope::fan_out(self.base(None, &request_id), check, results, &shared, request_id, note)
    }

    /// The inspector of the configured target `name` (`super::approve`).
    pub(super) fn inspector(&self, name: &str) -> Arc<Inspector> {
        let member = self.members.iter().find(|m| m.name == name).expect("a configured target");
        member.inspector.clone()
    }

    /// One request to the target `name` by the checked path every tool
    /// uses (`super::approve`, the operator's own command).
    pub(super) async fn ask_target(&self, name: &str, request: &Request) -> (Answer, Option<Execution>) {
        let member = self.members.iter().find(|m| m.name == name).expect("a configured target");
        self.ask(member, request, &request_id(), None).await
    }

    /// Runs one host RPC as a tool call: its result and audit facts.
    /// `action` and `plan_id` are the validated values `request` was built
    /// from, for the result and the audit line.
    #[allow(clippy::too_many_arguments)] // each is one fact of the call's result and audit line
    async fn manage(
        &self,
        member: &Member,
        tool: ToolName,
        request: Request,
        action: Option<Action>,
        plan_id: Option<PlanId>,
        request_id: String,
        progress: Option<Watcher>,
    ) -> Served {
        let (answer, execution) = self.ask(member, &request, &request_id, progress).await;
        let base = self.base(Some(member), &request_id);
        let facts =
            envelope::Managed { tool, operation: request.operation(), action, plan_id, answer, execution };
        envelope::managed(base, facts, request_id)
    }

    /// Asks the host helper of `member`, through the rpc client, behind
    /// every check a management call passes (demo mode, the identity gate,
    /// the user's switch, the server's protocol, the request's size): the
    /// typed answer, and the facts of the process when one ran.
    async fn ask(
        &self,
        member: &Member,
        request: &Request,
        request_id: &str,
        progress: Option<Watcher>,
    ) -> (Answer, Option<Execution>) {
        let inspector = &member.inspector;
        if inspector.is_demo() {
            return (Answer::plain(Status::DemoOnly), None);
        }
        if let Some(refusal) = inspector.gate_refusal().await {
            return (Answer::plain(refusal), None);
        }
        if !inspector.config().management {
            return (Answer::management_disabled(&inspector.config().management_switch), None);
        }
        // Learned at the identity check that opened the gate above.
        if let Err(refusal) =
            wire::versions::may_send(request.needs(), &inspector.server_version(), &member.name)
        {
            return (Answer::new(Status::Rejected, Some(refusal.code.into()), refusal.message), None);
        }
        // A target whose trail failed the witness is managed no more
        // until the operator resolves it (`super::witness`).
        let held = self.witness.held(&member.name);
        if let Some(found) = held.as_ref().and_then(|entry| entry.mismatch.as_ref())
            && rpc::may_change(request.operation())
        {
            let code = Some(Code::AuditWitnessMismatch.into());
            return (Answer::new(Status::Rejected, code, found.refusal_message(&member.name)), None);
        }
        // The request id goes with the request, so the host's rows for
        // it join this call's audit line (`crate::mcp::audit`); the
        // protocol field and the witnessed head only for a server that
        // reads them (`wire::versions`).
        let id = wire::RequestId::parse(request_id);
        let witnessed = held.map(|entry| entry.witnessed());
        let bytes = request.to_bytes_witnessed(id.as_ref(), &inspector.server_version(), witnessed.as_ref());
        if bytes.len() > wire::MAX_REQUEST_BYTES {
            // Unreachable with the argument limit; kept as the last guard.
            let message = "The request would exceed the helper's 16 KiB limit; nothing was run.";
            return (
                Answer::new(Status::InvalidArguments, Some(Code::TooLarge.into()), message.into()),
                None,
            );
        }
        // Identity is verified again inside host_rpc, under the same lock as the run.
        match self.send(inspector, &bytes, progress).await {
            Err(refusal) => (Answer::plain(refusal.status), refusal.execution),
            Ok(outcome) => {
                let operation = request.operation();
                let mut answer = rpc::interpret(operation, &outcome, inspector.config().mode);
                if operation == wire::Operation::Inventory && answer.status == Status::Ok {
                    answer.message = rpc::with_server_version(&answer.message, &inspector.server_version());
                }
                if answer.code == Some(Code::PlanNotFound.into())
                    && let Some(elsewhere) = self.choices.plan_elsewhere(&member.name)
                {
                    answer.message = format!("{} {elsewhere}", answer.message);
                }
                self.witness_answer(member, &outcome, &mut answer);
                (answer, Some(outcome.execution))
            }
        }
    }

    /// What a read-only check of `target` says while its trail failed the
    /// witness: the checks still run (`super::witness`).
    fn witness_note(&self, target: &str) -> Option<String> {
        self.witness.held(target)?.mismatch.map(|found| found.note(target))
    }

    /// Takes the audit proof `outcome` carried into `member`'s witness
    /// (`super::witness`); an answer of a target whose trail failed it
    /// says so (the call that finds it still reports what the host did).
    fn witness_answer(&self, member: &Member, outcome: &crate::exec::ProcessOutput, answer: &mut Answer) {
        let proof = wire::witness::carried(wire::progress::reply_bytes(&outcome.stdout));
        let observed = super::witness::Observed {
            carries: member.inspector.server_version().protocol() >= 2,
            ok: answer.status == Status::Ok,
            proof: proof.as_ref(),
        };
        let entry = self.witness.observe(&member.name, &observed, super::witness::now());
        if let Some(found) = entry.as_ref().and_then(|entry| entry.mismatch.as_ref()) {
            answer.message = format!("{} {}", answer.message, found.note(&member.name));
        }
    }

    /// Takes what a check's helper answer carried (web_status's
    /// `gateway_status`, `crate::inspect::Carried`) into `target`'s witness,
    /// as [`Self::witness_answer`] takes an rpc's: a mismatch it finds is
    /// recorded, and the check's result says so ([`Self::witness_note`]).
    fn witness_check(&self, target: &str, result: &crate::inspect::CheckResult) {
        let Some(carried) = &result.carried else { return };
        let observed = super::witness::Observed {
            carries: carried.carries,
            ok: carried.ok,
            proof: carried.proof.as_ref(),
        };
        self.witness.observe(target, &observed, super::witness::now());
    }

    /// Sends `bytes` to the helper; with a watcher, its progress lines
    /// become the client's progress notifications (`super::progress`).
    async fn send(
        &self,
        inspector: &Inspector,
        bytes: &[u8],
        progress: Option<Watcher>,
    ) -> Result<crate::exec::ProcessOutput, crate::inspect::GateRefusal> {
        let limits = self.options.rpc_limits;
        let Some(Watcher { token, peer }) = progress else {
            return inspector.host_rpc(bytes, limits).await;
        };
        let run = |tap| inspector.host_rpc_watched(bytes, limits, Some(tap));
        let notify = |count: u32, message: String| {
            let param = ProgressNotificationParam::new(token.clone(), f64::from(count)).with_message(message);
            let peer = peer.clone();
            // A client that went away is no reason to stop the call.
            async move {
                let _ = peer.notify_progress(param).await;
            }
        };
        super::progress::watched(run, self.options.heartbeat, notify).await
    }
}

/// Where a call's progress goes: the client's token, and the peer to notify.
#[derive(Clone)]
struct Watcher {
    token: ProgressToken,
    peer: Peer<RoleServer>,
}

impl ServerHandler for VolceLab {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
            .with_server_info(Implementation::new("volce-lab", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!("{} {}", tools::INSTRUCTIONS, self.choices.described()))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        // An unknown or forged id is `invalid_params`, quoted short (`task.rs`).
        task::known(&request.task_id, self.tasks.get_task(&request.task_id)).map(GetTaskResult::new)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // Stops the wait only (`task.rs`); it approves nothing, and it
        // says so when it comes too late to stop anything.
        self.task_phases.cancel(&request.task_id, &self.tasks)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|tool| tool.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let started = Instant::now();
        let Some(tool) = ToolName::parse(&request.name) else {
            self.audit(None, &Served::bare(Status::InvalidArguments, request_id()), started);
            let names: Vec<&str> = ToolName::VARIANTS.iter().map(|t| t.as_str()).collect();
            let (last, rest) = names.split_last().expect("five tools");
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool {}; the tools are {} and {last}",
                    tools::shown(&request.name),
                    rest.join(", ")
                ),
                None,
            ));
        };
        let id = request_id();
        let arguments = request.arguments.as_ref();
        let watcher =
            context.meta.get_progress_token().map(|token| Watcher { token, peer: context.peer.clone() });
        // A rollout's execute watches the token itself: its batch runs to
        // the end (a host's execute is never cut), and no later one starts.
        if tool == ToolName::ServiceExecute && arguments.is_some_and(|a| a.contains_key("rollout")) {
            let waiter = wait::Waiter::Not;
            let handled = self.run(tool, arguments, id, watcher, waiter, context.ct.clone()).await;
            self.audit(Some(tool), &handled.served, started);
            return Ok(handled.served.tool_result().into());
        }
        tokio::select! {
            biased;
            () = context.ct.cancelled() => {
                // The work future was dropped with this branch: its child is dead.
                self.audit_cancelled(tool, arguments, id, started);
                // MCP: no response for a cancelled request; rmcp discards this one.
                Err(McpError::internal_error("the call was cancelled", None))
            }
            handled = self.run(tool, arguments, id.clone(), watcher, wait::Waiter::of(&context, &request), context.ct.clone()) => {
                self.audit(Some(tool), &handled.served, started);
                Ok(match handled.ask {
                    Some(instead) => instead,
                    None => handled.served.tool_result().into(),
                })
            }
        }
    }
}
