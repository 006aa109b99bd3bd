//! [`Host`]: the helper's collaborators (its paths, the engine, the clock,
//! the liveness check) held once, and the library form of each command
//! that opens the controller: `rpc`, `show`, `list`, `approve`, `reject`,
//! `resolve`. Runs as root inside `volce-lab-host`.
//!
//! One `Host` is built per process (`entry.rs`: [`Host::shipped`]) and
//! spent on the one command the process runs: every method takes `self`,
//! as sudo-rs's `Pipeline::run` does, so no second command can reuse a
//! half-used engine or a stale controller. Tests build theirs on a
//! temporary world with a fake engine ([`Host::new`]).
//!
//! Each method is one straight pipeline, readable top to bottom; rpc's is
//! [`Host::rpc_reporting`].

use std::io::Read;

use super::clock::SystemClock;
use super::confirm::{Confirmation, Decision};
use super::controller::{AppAfterResolve, Controller, Executed, Liveness, Resolved};
use super::liveness::ProcLiveness;
use super::paths::{self, HostPaths};
use super::request_row::{self, Caller};
use super::rpc::{self, Reply, Request};
use super::{gate, leftovers, list, process, show};
use crate::control::Clock;
use crate::docker::client::DockerClient;
use crate::docker::{Engine, NoProgress, ProgressSink};
use crate::store::{AuditOperation, Store};
use crate::vocab::Action;
use crate::vocab::PlanState;
use crate::vocab::{Code, Refusal};
use crate::vocab::{Digest, PlanId};
use crate::wire::Answered;
use crate::wire::answers::Body;

/// The helper's collaborators, held for one command.
#[derive(Debug, Clone)]
pub struct Host<E, C, L> {
    pub paths: HostPaths,
    pub engine: E,
    pub clock: C,
    pub liveness: L,
    /// Where the line of a new plan that waits for approval goes
    /// (`alert.rs`): the host's syslog socket for the shipped helper, none
    /// on a test's own paths unless the test listens.
    pub alert_socket: Option<std::path::PathBuf>,
}

/// What the shipped binary runs on: the real engine, the system clock,
/// /proc.
pub type ShippedHost = Host<DockerClient, SystemClock, ProcLiveness>;

/// The engine the shipped binary uses: the docker CLI with fixed argv.
/// There is deliberately no way to select any other engine here.
pub fn real_engine(paths: &HostPaths) -> DockerClient {
    DockerClient::new(paths.state_dir.clone())
}

impl ShippedHost {
    /// The real engine, the system clock and /proc on `paths` (tests of
    /// the real engine give their own paths).
    pub fn real(paths: HostPaths) -> ShippedHost {
        let engine = real_engine(&paths);
        let alert = (paths == HostPaths::fixed()).then(|| crate::store::DEV_LOG.into());
        Host { alert_socket: alert, ..Host::new(paths, engine, SystemClock, ProcLiveness) }
    }

    /// What the shipped binary uses: [`HostPaths::fixed`] only, and always
    /// the real engine; there is no switch that selects a fake.
    pub fn shipped() -> ShippedHost {
        Host::real(HostPaths::fixed())
    }
}

/// The operator's files are none of the agent's business: the reason
/// (which may quote the policy or name a path) is for `show` and `doctor`,
/// run as root on the terminal; the agent gets the code and a fixed sentence.
fn for_the_agent(refusal: Refusal) -> Refusal {
    if matches!(refusal.code, Code::PolicyInvalid | Code::UnsafePath) {
        return Refusal::new(
            refusal.code,
            "The server's volce-lab installation is not usable; the operator should run volce-lab-host doctor.",
        );
    }
    refusal
}

/// How an operator command meets a migration that waits for a plan the
/// previous version executes (`upgrade_waiting`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WhileWaiting {
    /// Refused: the command writes, or must record what it read.
    Refuse,
    /// Answered from a copy migrated in memory: the command only reads.
    ReadCopy,
}

/// The waiting refusal, when not even a copy of the database could be read
/// and migrated in memory: the migration itself would fail the same way.
fn copy_unreadable(waiting: &Refusal, error: &crate::store::StoreError) -> Refusal {
    Refusal::new(
        waiting.code,
        format!(
            "{} A copy of it could not be read and migrated in memory either ({}); `volce-lab-host audit head` \
             answers, and `volce-lab-host doctor` checks the database.",
            waiting.message,
            error.refusal().code.as_str()
        ),
    )
}

/// `show --json`: the plan as the agent's answers carry it, with what
/// only the operator learns here: a stopped claimer's pid, and while a
/// migration waits, its sentence (`upgrade_waiting`).
fn show_json(
    stored: &crate::store::StoredPlan,
    stopped: Option<&super::StoppedClaimer>,
    waiting: Option<&Refusal>,
) -> serde_json::Value {
    let mut value = Body::Plan(Box::new(stored.view())).to_json();
    if let Some(object) = value.as_object_mut() {
        if let Some(stopped) = stopped {
            let key = match stopped.hold {
                super::liveness::Hold::Stopped => "claimer_stopped_pid",
                super::liveness::Hold::StuckOnOutput => "claimer_stuck_on_output_pid",
            };
            object.insert(key.into(), stopped.pid.into());
        }
        if let Some(waiting) = waiting {
            object.insert("upgrade_waiting".into(), waiting.message.clone().into());
        }
    }
    value
}

/// Pretty JSON for a terminal or a script: hidden characters escaped
/// (`crate::text::json_for_terminal`), one trailing newline.
fn json_text(value: &serde_json::Value) -> String {
    // Serializing a `Value` cannot fail (its keys are strings).
    let mut text = crate::text::json_for_terminal(&serde_json::to_string_pretty(value).unwrap_or_default());
    text.push('\n');
    text
}

impl<E: Engine, C: Clock, L: Liveness> Host<E, C, L> {
    /// A host on `paths` with these collaborators: the shipped binary's
    /// ([`Host::shipped`]), a real-engine test's, or a fake world's.
    pub fn new(paths: HostPaths, engine: E, clock: C, liveness: L) -> Host<E, C, L> {
        Host { paths, engine, clock, liveness, alert_socket: None }
    }

    /// Opens the controller on checked paths: the policy, then the state
    /// directory and the store.
    pub fn open(self) -> Result<Controller<E, C, L>, Refusal> {
        let policy = paths::load_policy(&self.paths)?;
        self.open_with(policy)
    }

    /// [`Host::open`] with a policy already loaded from these paths.
    fn open_with(self, policy: crate::control::policy::Policy) -> Result<Controller<E, C, L>, Refusal> {
        let store = self.open_store()?;
        Ok(self.controller_on(policy, store))
    }

    /// The checked state directory and its store, migrated. A migration
    /// after a package upgrade waits for a plan the previous helper still
    /// executes (`Store::open_settled`: refused `upgrade_waiting`).
    fn open_store(&self) -> Result<Store, Refusal> {
        let paths = &self.paths;
        paths::prepare_state(paths)?;
        let mut store = Store::open_settled(&paths.database(), &|claim| self.liveness.alive(claim))
            .map_err(|e| crate::store::space::explain(&e, &paths.state_dir))?;
        // The requests refused while it waited go onto the trail now.
        super::counted::flush_waiting(&mut store, paths, self.clock.now());
        // The shipped helper copies each row to the host's syslog; a test's
        // own paths never touch the machine's.
        if *paths == HostPaths::fixed() {
            store.send_to_syslog(std::path::Path::new(crate::store::DEV_LOG));
        }
        Ok(store)
    }

    /// The controller on `store` with this host's collaborators.
    fn controller_on(self, policy: crate::control::policy::Policy, store: Store) -> Controller<E, C, L> {
        let Host { paths, engine, clock, liveness, .. } = self;
        let env_dir = super::env_files::EnvDir::of(&paths);
        Controller::new(policy, store, engine, clock, liveness, paths.apps_dir()).with_env_dir(env_dir)
    }

    /// One rpc request, after the process-level self-check and guard
    /// (`entry.rs`). The library form of `volce-lab-host rpc`; see
    /// [`Host::rpc_reporting`].
    pub fn rpc(self, caller: &str, input: impl Read) -> Reply {
        self.rpc_reporting(caller, input, &NoProgress)
    }

    /// [`Host::rpc`], reporting the steps of a long execute to `progress`
    /// (the shipped helper prints them as progress lines before the reply).
    ///
    /// Order: the pause (`pause.rs`) -> load the policy -> take a slot -> read the request -> (a gate
    /// refusal is recorded here and answered) -> open the store -> act ->
    /// record -> reply. The policy is checked first, so a server without a
    /// usable installation gets nothing created under its state directory.
    /// The slot comes before the read, so that helpers waiting on a stdin
    /// that stays open count too: beyond [`process::RPC_SLOTS`] of them the
    /// next is refused at once (`busy`), and each lives at most the read
    /// deadline.
    pub fn rpc_reporting(self, caller: &str, input: impl Read, progress: &dyn ProgressSink) -> Reply {
        self.rpc_answered(caller, input, progress).reply
    }

    /// [`Host::rpc_reporting`] with the audit proof beside the reply
    /// (`crate::wire::witness`): what the shipped helper prints. Only a
    /// request of protocol 2 or later gets one, and only once the store is
    /// open: it is read after the request's own row is written, so the
    /// head it names includes it.
    pub fn rpc_answered(self, caller: &str, input: impl Read, progress: &dyn ProgressSink) -> Answered {
        // Every way out records its row (`request_row`): before the store is
        // open, a refusal is recorded on its own; after, through the
        // controller.
        let mut meta = Caller::from(caller).request(AuditOperation::Rpc);
        // The answer passes `for_the_agent` again (`recorded`).
        let early = |meta, refusal| recorded(&self.paths, self.clock.now(), meta, for_the_agent(refusal));
        // First of all: a paused helper opens nothing (`paused`).
        match self.paused(caller) {
            Ok(None) => {}
            Ok(Some(reply)) => return reply.into(),
            Err(refusal) => return early(meta, refusal),
        }
        let policy = match paths::load_policy(&self.paths) {
            Ok(policy) => policy,
            Err(refusal) => return early(meta, refusal),
        };
        let _slot = match process::take_slot(&self.paths) {
            Ok(slot) => slot,
            Err(refusal) => return early(meta, refusal),
        };
        let received = match rpc::read_request(input) {
            Ok(read) => read,
            Err(refusal) => return early(meta, refusal),
        };
        let (request, request_id) = (received.request, received.id);
        // Only a workstation of protocol 2 or later reads a proof beside the reply.
        let witness = (received.protocol >= 2).then_some(received.witness);
        meta.operation = request.operation().into();
        meta.request_id = request_id.map(|id| id.as_str().to_owned());
        let now = self.clock.now();
        if let Request::GateRefusal { reason, command_bytes, command_sha256 } = &request {
            // Recorded like a refusal before the store is open (nothing is
            // created for it, no engine is asked): see `gate_refusal`.
            let refusal = match gate::gate_refusal(*reason, *command_bytes, command_sha256.as_deref()) {
                Ok(record) => {
                    meta.gate = Some(record);
                    gate::recorded_refusal()
                }
                Err(refusal) => refusal,
            };
            return recorded(&self.paths, now, meta, refusal);
        }
        let paths = self.paths.clone();
        let alert_socket = self.alert_socket.clone();
        let mut controller = match self.open_with(policy) {
            Ok(controller) => controller,
            // The store is what failed: there is no trail to write to. A
            // migration that waits is counted, and written once it ran.
            Err(refusal) => {
                if refusal.code == Code::UpgradeWaiting {
                    super::counted::count(
                        &paths,
                        super::counted::Tally::UpgradeWaiting,
                        caller,
                        meta.operation,
                    );
                }
                return recorded(&paths, now, meta, for_the_agent(refusal));
            }
        };
        controller.begin_request(meta);
        let (plan_id, action) = subject(&request);
        let reply = match serve(&mut controller, request, caller, progress, alert_socket.as_deref(), &paths) {
            Served::Answer(result, app_log) => match controller.answer(result, plan_id.as_ref(), action) {
                Ok(body) => body.into(),
                Err(refusal) => {
                    // Not beside another refusal (the request's row could not be written).
                    let app_log = app_log.filter(|(code, _)| *code == refusal.code).map(|(_, log)| log);
                    Reply::Rejected { refusal, app_log }
                }
            },
            // Its claimed and needs_inspection rows were written with the
            // changes, stamped with this request.
            Served::NeedsInspection(reply) => reply,
        };
        Answered { audit: witnessed(&mut controller, witness), reply }
    }

    /// The refusal of a paused helper, which opens nothing (`pause.rs`):
    /// any open of the store could migrate it. The refusal is counted
    /// beside the pause and written to the trail when the pause ends.
    /// `Err` when the pause file itself is unsafe (refused as any early
    /// refusal is).
    fn paused(&self, caller: &str) -> Result<Option<Reply>, Refusal> {
        let Some(pause) = super::pause::current(&self.paths)? else { return Ok(None) };
        super::counted::count(&self.paths, super::counted::Tally::Paused, caller, AuditOperation::Rpc);
        Ok(Some(pause.refusal().into()))
    }

    /// Opens the controller for one operator command, runs `work`, and
    /// records the request (`request_row`): the command's answer is given
    /// only once its row is written. A policy or store that cannot be
    /// opened is answered unrecorded.
    pub(super) fn operator_request<T>(
        self,
        caller: &Caller,
        operation: AuditOperation,
        plan_id: Option<&str>,
        work: impl FnOnce(&mut Controller<E, C, L>) -> Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        self.operator_command(caller, operation, plan_id, WhileWaiting::Refuse, work)
            .map(|(answer, _)| answer)
    }

    /// [`Host::operator_request`] for a command that only reads (`list`,
    /// `show`): while a migration waits (`upgrade_waiting`), `work` runs on
    /// a copy of the database migrated in memory
    /// (`Store::open_migrated_copy`), the file itself untouched; the
    /// request is counted as the waiting refusals are, not recorded, and
    /// the refusal comes back beside the answer for the command to say so.
    fn operator_read<T>(
        self,
        caller: &Caller,
        operation: AuditOperation,
        plan_id: Option<&str>,
        work: impl FnOnce(&mut Controller<E, C, L>) -> Result<T, Refusal>,
    ) -> Result<(T, Option<Refusal>), Refusal> {
        self.operator_command(caller, operation, plan_id, WhileWaiting::ReadCopy, work)
    }

    fn operator_command<T>(
        self,
        caller: &Caller,
        operation: AuditOperation,
        plan_id: Option<&str>,
        waiting: WhileWaiting,
        work: impl FnOnce(&mut Controller<E, C, L>) -> Result<T, Refusal>,
    ) -> Result<(T, Option<Refusal>), Refusal> {
        let policy = paths::load_policy(&self.paths)?;
        let store = match self.open_store() {
            Ok(store) => store,
            Err(refusal) if refusal.code == Code::UpgradeWaiting => {
                super::counted::count(
                    &self.paths,
                    super::counted::Tally::UpgradeWaiting,
                    &caller.name,
                    operation,
                );
                if waiting == WhileWaiting::Refuse {
                    return Err(refusal);
                }
                let copy = Store::open_migrated_copy(&self.paths.database())
                    .map_err(|error| copy_unreadable(&refusal, &error))?;
                let mut controller = self.controller_on(policy, copy);
                return work(&mut controller).map(|answer| (answer, Some(refusal)));
            }
            Err(refusal) => return Err(refusal),
        };
        let mut controller = self.controller_on(policy, store);
        controller.begin_request(caller.request(operation));
        let result = work(&mut controller);
        let id = plan_id.and_then(|id| PlanId::parse(id).ok());
        controller.answer(result, id.as_ref(), None).map(|answer| (answer, None))
    }

    /// `show`: the human view (or the stored JSON) of one plan. While a
    /// migration waits (`upgrade_waiting`) it answers from a copy migrated
    /// in memory (`operator_read`), and says so first.
    pub fn show(self, caller: &str, plan_id: &str, json: bool) -> Result<String, Refusal> {
        let now = self.clock.now();
        let who = Caller::from(caller);
        let ((stored, stopped, left), waiting) =
            self.operator_read(&who, AuditOperation::Show, Some(plan_id), |controller| {
                let id = PlanId::parse(plan_id)?;
                let stored = controller.load(&id, caller)?;
                let stopped = controller.stopped_claimer(&stored);
                // Read-only, after the store was read: no lock is held.
                let left =
                    (!json && stored.state == PlanState::NeedsInspection).then(|| controller.leftovers(&id));
                Ok((stored, stopped, left))
            })?;
        if json {
            return Ok(json_text(&show_json(&stored, stopped.as_ref(), waiting.as_ref())));
        }
        let mut text = waiting.map(|waiting| list::waiting_note(&waiting, "show")).unwrap_or_default();
        text.push_str(&show::render(&stored, now));
        if let Some(stopped) = stopped {
            text.push('\n');
            text.push_str(&stopped.way_out(&stored.plan.id));
        }
        if let Some(left) = left {
            text.push('\n');
            text.push_str(&leftovers::render(&stored.plan.id, &left));
        }
        Ok(text)
    }

    /// `list`: the plans awaiting an operator and the recorded apps, as
    /// text or (`json`) one JSON object.
    ///
    /// While a migration waits for a plan the previous version executes
    /// (`upgrade_waiting`), both forms answer from a copy of the database
    /// migrated in memory (`operator_read`): the text says so first, the
    /// JSON in its `upgrade_waiting` field (null otherwise).
    pub fn list(self, caller: &str, json: bool) -> Result<String, Refusal> {
        let who = Caller::from(caller);
        let (awaiting, waiting) =
            self.operator_read(&who, AuditOperation::List, None, |controller| controller.awaiting(caller))?;
        Ok(if json {
            json_text(&list::to_json(&awaiting, waiting.as_ref()))
        } else {
            let mut text = waiting.map(|waiting| list::waiting_note(&waiting, "list")).unwrap_or_default();
            text.push_str(&list::render(&awaiting));
            text
        })
    }

    /// `reject`: the operator ends a pending plan they do not want.
    /// `reason` (`--reason`) is recorded with it and shown to the agent as
    /// the operator's words.
    pub fn reject(
        self,
        operator: impl Into<Caller>,
        plan_id: &str,
        reason: Option<&str>,
    ) -> Result<String, Refusal> {
        let who = operator.into();
        let operator = who.name.as_str();
        let stored = self.operator_request(&who, AuditOperation::Reject, Some(plan_id), |c| {
            c.reject(&PlanId::parse(plan_id)?, operator, reason)
        })?;
        let told = if reason.is_some() { ", with your reason," } else { "" };
        Ok(format!(
            "Rejected plan {} ({}) as {}; it will never run. The agent is told so{told} when it tries; \
             a new plan is needed for the change.\n",
            stored.plan.id,
            stored.plan.action.as_str(),
            crate::text::for_terminal(operator)
        ))
    }

    /// `approve`: records the caller's approval of one plan's exact digest.
    /// Hands the plan's summary (what `show` prints, escaped) and what would
    /// confirm it to `decide` before it records anything, so the operator
    /// sees what they approve; records only on [`Decision::Confirmed`]. The
    /// terminal edge asks (or `--yes` confirms); tests pass the decision.
    ///
    /// The summary is read before the approving transaction, yet it is what
    /// is approved: the body is immutable and sealed by its digest, and the
    /// approval is recorded only for that digest (state, expiry and policy
    /// are checked again under the write lock).
    pub fn approve(
        self,
        approver: impl Into<Caller>,
        plan_id: &str,
        digest: &str,
        decide: impl FnOnce(&str, &Confirmation) -> Decision,
    ) -> Result<String, Refusal> {
        let who = approver.into();
        let approver = who.name.as_str();
        let now = self.clock.now();
        let stored = self.operator_request(&who, AuditOperation::Approve, Some(plan_id), |c| {
            let id = PlanId::parse(plan_id)?;
            let digest = Digest::parse(digest)?;
            let before = c.load(&id, approver)?;
            // Before the question: a plan that needs no approval, an
            // operator who may not give it, or a digest that is not the
            // plan's is refused without asking.
            c.approvable(&before, &digest, approver)?;
            if decide(&show::summary(&before, now), &Confirmation::of(&before)) != Decision::Confirmed {
                return Err(Refusal::new(
                    Code::NotConfirmed,
                    "That is neither the app name nor the digest's first 8 characters; nothing was recorded.",
                ));
            }
            c.approve(&id, &digest, approver)
        })?;
        Ok(format!(
            "\nApproved plan {} ({}) as {approver}; it expires at {} and can be executed once.\n",
            stored.plan.id,
            stored.plan.action.as_str(),
            crate::text::rfc3339_seconds(stored.plan.expires_at)
        ))
    }

    /// `resolve`: records that the caller inspected the server after a plan
    /// that needed inspection, which lets new plans be made again.
    pub fn resolve(self, operator: impl Into<Caller>, plan_id: &str) -> Result<String, Refusal> {
        let who = operator.into();
        let operator = who.name.as_str();
        let Resolved { stored, app, left } =
            self.operator_request(&who, AuditOperation::Resolve, Some(plan_id), |c| {
                c.resolve(&PlanId::parse(plan_id)?, operator)
            })?;
        let mut text = format!(
            "Plan {} ({}) is now inspected, as attested by {operator}; new plans are accepted again.\n",
            stored.plan.id,
            stored.plan.action.as_str()
        );
        let esc = crate::text::for_terminal;
        match app {
            Some(AppAfterResolve::Forgotten(name)) => text.push_str(&format!(
                "No container of app {} exists: its record is removed, its name, port and quota slot are free. \
                 Its directory under the state directory is kept as evidence; remove it before deploying that name again.\n",
                esc(&name)
            )),
            Some(AppAfterResolve::Kept { app, state, containers }) => text.push_str(&format!(
                "The record of app {} is kept ({}); containers of it still exist: {}. \
                 volce-lab will not change an app that is not running.\n",
                esc(&app),
                state.as_str(),
                if containers.is_empty() { "none".to_owned() } else { esc(&containers.join(", ")) }
            )),
            None => {}
        }
        text.push_str(&leftovers::render(&stored.plan.id, &left));
        Ok(text)
    }
}

/// What one request of the agent's comes to, before it is recorded.
enum Served {
    /// The operation's answer, and a rolled-back plan's app log with the
    /// code of the refusal it goes beside.
    Answer(Result<Body, Refusal>, Option<(Code, crate::logs::AppLog)>),
    /// An execute that may have changed something: answered as it is.
    NeedsInspection(Reply),
}

/// Runs one request of the agent's on the open controller.
fn serve<E: Engine, C: Clock, L: Liveness>(
    controller: &mut Controller<E, C, L>,
    request: Request,
    caller: &str,
    progress: &dyn ProgressSink,
    alert_socket: Option<&std::path::Path>,
    paths: &HostPaths,
) -> Served {
    // Only the two operations of signed approvals read the host's identity
    // and the signers' file: built for them alone.
    let verifier = || super::signed::Verifier::of(paths);
    // A rolled-back plan's failed app container's last lines, answered
    // beside its refusal (the refusal's code says whose they are).
    let mut app_log = None;
    let result = match request {
        Request::GatewayStatus {} => controller.gateway_status().map(Body::GatewayStatus),
        Request::Inventory {} => controller.inventory(caller).map(|body| Body::Inventory(Box::new(body))),
        Request::Plan { action, parameters } => {
            controller.prepare(&action, &parameters, caller).map(|stored| {
                let stored = controller.alert_waiting(stored, alert_socket);
                Body::Plan(Box::new(stored.view()))
            })
        }
        Request::Logs { app, container, tail, since_minutes } => {
            controller.logs(&app, &container, &tail, since_minutes.as_ref()).map(Body::Logs)
        }
        // Answered above, before the store was opened; should it get here,
        // it is the same recorded refusal.
        Request::GateRefusal { .. } => Err(gate::recorded_refusal()),
        Request::Statement { plan_id } => PlanId::parse(&plan_id)
            .and_then(|id| controller.statement(&id, caller, &verifier().identity))
            .map(Body::Statement),
        Request::SignedApproval { plan_id, approval } => PlanId::parse(&plan_id)
            .and_then(|id| controller.approve_signed(&id, caller, &approval, &verifier()))
            .map(|stored| Body::SignedApproval(Box::new(stored.view()))),
        Request::Execute { plan_id } => match PlanId::parse(&plan_id) {
            Err(refusal) => Err(refusal),
            Ok(id) => match controller.execute_reporting(&id, caller, progress) {
                Ok(Executed::Completed(executed)) => Ok(Body::Execute(executed)),
                Ok(Executed::NeedsInspection { plan_id, message }) => {
                    return Served::NeedsInspection(Reply::needs_inspection(plan_id, message));
                }
                Ok(Executed::Failed { refusal, app_log: log, .. }) => {
                    app_log = log.map(|log| (refusal.code, log));
                    Err(refusal)
                }
                Err(refusal) => Err(refusal),
            },
        },
    };
    Served::Answer(result, app_log)
}

/// A refusal before the store is open, recorded on its own
/// (`request_row::refused`) and made fit for the agent again: an unsafe
/// state directory found while recording is the operator's to read.
fn recorded(paths: &HostPaths, now: i64, meta: crate::store::RequestMeta, refusal: Refusal) -> Answered {
    Reply::from(for_the_agent(request_row::refused(paths, now, meta, refusal))).into()
}

/// The proof beside a reply to a request of protocol 2 or later
/// (`witness`: `Some` of what the request carried): `None` for an older
/// request, or when the trail cannot be read (the workstation then sees a
/// reply without its head, which it does not take as witnessed).
fn witnessed<E: Engine, C: Clock, L: Liveness>(
    controller: &mut Controller<E, C, L>,
    witness: Option<Option<crate::wire::witness::Witnessed>>,
) -> Option<crate::wire::witness::AuditProof> {
    controller.audit_proof(witness?.as_ref())
}

/// The plan or action a request is about, for its answer's audit row.
fn subject(request: &Request) -> (Option<PlanId>, Option<Action>) {
    match request {
        Request::Plan { action, .. } => (None, Action::parse(action).ok()),
        Request::Execute { plan_id }
        | Request::Statement { plan_id }
        | Request::SignedApproval { plan_id, .. } => (PlanId::parse(plan_id).ok(), None),
        _ => (None, None),
    }
}
