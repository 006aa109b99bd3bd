//! The root helper on the server: `volce-lab-host rpc` (the only command the
//! agent's account may run, through an exact sudoers rule), and the
//! operator's `list`, `show PLAN_ID`, `approve PLAN_ID DIGEST`,
//! `reject PLAN_ID` and `resolve PLAN_ID`, and the audit trail's `audit
//! verify`, `audit head`, `audit export` and `audit prune` (`audit`). Runs
//! as root.
//!
//! Each command is one straight pipeline, readable top to bottom:
//! self-check -> read bounded request -> load policy -> open store ->
//! verify -> claim -> act -> record -> reply (see [`rpc()`] and
//! `controller::Controller::execute`).
//!
//! Invariants enforced here:
//! - every request leaves an audit row before it is answered (`record`,
//!   `controller/record.rs`): a state change's own row in its transaction,
//!   else one `request` row; no row, no answer but `audit_unavailable`;
//! - rpc/list/show/approve/reject/resolve/audit refuse unless the effective
//!   uid is 0;
//! - list, approve, reject, resolve and audit are terminal commands only:
//!   the rpc request enum has no variant that reaches them;
//! - rpc runs in its own process context (`process`: own session, caught
//!   TERM/TSTP and friends, fixed rlimits, a read deadline, a bounded
//!   number of helpers) set up before it reads its request;
//! - approve, reject and resolve record a person only after `operator`
//!   cross-checked `SUDO_USER` with `SUDO_UID`, the account database and
//!   the session's login uid; approve records only what the operator
//!   confirmed (typed on the terminal, or `--yes`);
//! - at start: umask 077 and cwd `/`. The process environment is not
//!   trusted and not used: `SUDO_USER` (and, for the operator's commands,
//!   `SUDO_UID`) is read exactly once (who asked),
//!   and every child process gets an explicit environment built from
//!   `crate::exec::minimal_env` (docker calls add their socket and config
//!   in `crate::docker::cli::docker_env`); `crate::exec` clears the rest. We
//!   do not rewrite our own environment because edition 2024 makes
//!   `std::env::set_var` unsafe and the crate forbids unsafe; not reading
//!   it is the stronger guarantee anyway;
//! - the shipped binary uses [`HostPaths::fixed`] only and always the real
//!   engine ([`real_engine`]); there is no switch that selects a fake;
//! - raw docker stderr never reaches a reply: engine errors become fixed
//!   sentences with stable codes.
//!
//! A little over 450 lines: the rpc pipeline and the library forms of the
//! operator's commands (each wrapped in `operator_request` for its audit
//! row) read best side by side; the terminal edge is `entry.rs`.

pub mod audit;
pub mod controller;
pub mod drift;
mod entry;
pub mod gate;
pub mod leftovers;
pub mod list;
pub mod liveness;
pub mod operator;
pub mod paths;
pub mod process;
pub mod record;
pub mod rpc;
pub mod setup;
pub mod show;

use std::ffi::OsStr;
use std::io::Read;

use crate::control::plan::{Action, Digest, PlanId};
use crate::control::{Clock, Code, Refusal, SystemClock};
use crate::docker::{Engine, NoProgress, Progress};
use crate::exit::Exit;
use crate::store::AuditOperation;
use crate::wire::answers::Body;

pub use controller::{AppAfterResolve, Awaiting, Controller, Executed, Liveness, Resolved, StoppedClaimer};
pub use entry::{
    cli_approve, cli_audit_export, cli_audit_head, cli_audit_prune, cli_audit_verify, cli_list, cli_reject,
    cli_resolve, cli_rpc, cli_show,
};
pub use liveness::ProcLiveness;
pub use paths::HostPaths;
pub use record::{Caller, Recorded, record_refusal};
use rpc::{Reply, Request};

/// Who is asking, from `SUDO_USER` (set by sudo itself), or `root` when the
/// helper was run directly by root. Anything that is not a plain unix user
/// name is refused rather than recorded.
pub fn caller(sudo_user: Option<&OsStr>) -> Result<String, Refusal> {
    match sudo_user {
        None => Ok("root".to_owned()),
        Some(value) => match value.to_str() {
            Some(name) if crate::control::is_user_name(name) => Ok(name.to_owned()),
            _ => Err(Refusal::new(Code::InvalidCaller, "SUDO_USER is not a plain unix user name.")),
        },
    }
}

/// Opens the controller on checked paths.
pub fn open<E: Engine, C: Clock, L: Liveness>(
    paths: &HostPaths,
    engine: E,
    clock: C,
    liveness: L,
) -> Result<Controller<E, C, L>, Refusal> {
    open_with(paths, paths::load_policy(paths)?, engine, clock, liveness)
}

/// [`open`] with a policy already loaded from `paths`.
fn open_with<E: Engine, C: Clock, L: Liveness>(
    paths: &HostPaths,
    policy: crate::control::policy::Policy,
    engine: E,
    clock: C,
    liveness: L,
) -> Result<Controller<E, C, L>, Refusal> {
    paths::prepare_state(paths)?;
    let mut store = crate::store::Store::open(&paths.database())
        .map_err(|e| crate::store::space::explain(&e, &paths.state_dir))?;
    // The shipped helper copies each row to the host's syslog; a test's
    // own paths never touch the machine's.
    if *paths == HostPaths::fixed() {
        store.send_to_syslog(std::path::Path::new(crate::store::DEV_LOG));
    }
    Ok(Controller::new(policy, store, engine, clock, liveness, paths.apps_dir()))
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

/// One rpc request, after the process-level self-check and guard: load
/// the policy, take a slot, read, open the store, verify, act, reply. The
/// library form of `volce-lab-host rpc`.
///
/// The policy is checked first, so a server without a usable installation
/// gets nothing created under its state directory. The slot comes before
/// the read, so that helpers waiting on a stdin that stays open count too:
/// beyond [`process::RPC_SLOTS`] of them the next is refused at once
/// (`busy`), and each lives at most the read deadline.
pub fn rpc<E: Engine, C: Clock, L: Liveness>(
    paths: &HostPaths,
    engine: E,
    clock: C,
    liveness: L,
    caller: &str,
    input: impl Read,
) -> Reply {
    rpc_reporting(paths, engine, clock, liveness, caller, input, &NoProgress)
}

/// [`rpc()`], reporting the steps of a long execute to `progress` (the
/// shipped helper prints them as progress lines before the reply).
pub fn rpc_reporting<E: Engine, C: Clock, L: Liveness>(
    paths: &HostPaths,
    engine: E,
    clock: C,
    liveness: L,
    caller: &str,
    input: impl Read,
    progress: &dyn Progress,
) -> Reply {
    // Every way out leaves an audit row (`record`): before the store is
    // open, a refusal is recorded on its own; after, through the controller.
    let mut meta = Caller::from(caller).request(AuditOperation::Rpc);
    let early = |meta, refusal| record::refused(paths, clock.now(), meta, for_the_agent(refusal)).into();
    let policy = match paths::load_policy(paths) {
        Ok(policy) => policy,
        Err(refusal) => return early(meta, refusal),
    };
    let _slot = match process::take_slot(paths) {
        Ok(slot) => slot,
        Err(refusal) => return early(meta, refusal),
    };
    let (request, request_id) = match rpc::read_request(input) {
        Ok(read) => read,
        Err(refusal) => return early(meta, refusal),
    };
    meta.operation = request.operation().into();
    meta.request_id = request_id.map(|id| id.as_str().to_owned());
    let now = clock.now();
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
        return record::refused(paths, now, meta, refusal).into();
    }
    let mut controller = match open_with(paths, policy, engine, clock, liveness) {
        Ok(controller) => controller,
        // The store is what failed: there is no trail to write to.
        Err(refusal) => return record::refused(paths, now, meta, for_the_agent(refusal)).into(),
    };
    controller.begin_request(meta);
    let (plan_id, action) = match &request {
        Request::Plan { action, .. } => (None, Action::parse(action).ok()),
        Request::Execute { plan_id } => (PlanId::parse(plan_id).ok(), None),
        _ => (None, None),
    };
    let result = match request {
        Request::GatewayStatus {} => controller.gateway_status().map(Body::GatewayStatus),
        Request::Inventory {} => controller.inventory(caller).map(|body| Body::Inventory(Box::new(body))),
        Request::Plan { action, parameters } => {
            controller.prepare(&action, &parameters, caller).map(|stored| Body::Plan(Box::new(stored.view())))
        }
        Request::Logs { app, container, tail, since_minutes } => {
            controller.logs(&app, &container, &tail, since_minutes.as_ref()).map(Body::Logs)
        }
        // Answered above, before the store was opened; should it get here,
        // it is the same recorded refusal.
        Request::GateRefusal { .. } => Err(gate::recorded_refusal()),
        Request::Execute { plan_id } => match PlanId::parse(&plan_id) {
            Err(refusal) => Err(refusal),
            Ok(id) => match controller.execute_reporting(&id, caller, progress) {
                Ok(Executed::Completed(executed)) => Ok(Body::Execute(executed)),
                // Its claimed and needs_inspection rows were written with
                // the changes, stamped with this request.
                Ok(Executed::NeedsInspection { plan_id, message }) => {
                    return Reply::needs_inspection(plan_id, message);
                }
                Ok(Executed::Failed { refusal, .. }) => Err(refusal),
                Err(refusal) => Err(refusal),
            },
        },
    };
    match controller.answer(result, plan_id.as_ref(), action) {
        Ok(body) => body.into(),
        Err(refusal) => refusal.into(),
    }
}

/// Opens the controller for one operator command, runs `work`, and records
/// the request (`record`): the command's answer is given only once its row
/// is written. A store that cannot be opened is answered unrecorded.
#[allow(clippy::too_many_arguments)]
fn operator_request<E: Engine, C: Clock, L: Liveness, T>(
    paths: &HostPaths,
    engine: E,
    clock: C,
    liveness: L,
    caller: &Caller,
    operation: AuditOperation,
    plan_id: Option<&str>,
    work: impl FnOnce(&mut Controller<E, C, L>) -> Result<T, Refusal>,
) -> Result<T, Refusal> {
    let mut controller = open(paths, engine, clock, liveness)?;
    controller.begin_request(caller.request(operation));
    let result = work(&mut controller);
    let id = plan_id.and_then(|id| PlanId::parse(id).ok());
    controller.answer(result, id.as_ref(), None)
}

/// `show`: the human view (or the stored JSON) of one plan.
pub fn show<E: Engine, C: Clock, L: Liveness>(
    paths: &HostPaths,
    engine: E,
    clock: C,
    liveness: L,
    caller: &str,
    plan_id: &str,
    json: bool,
) -> Result<String, Refusal> {
    let now = clock.now();
    let who = Caller::from(caller);
    operator_request(
        paths,
        engine,
        clock,
        liveness,
        &who,
        AuditOperation::Show,
        Some(plan_id),
        |controller| {
            let id = PlanId::parse(plan_id)?;
            let stored = controller.load(&id, caller)?;
            let stopped = controller.stopped_claimer(&stored);
            if json {
                let mut value = Body::Plan(Box::new(stored.view())).to_json();
                if let (Some(stopped), Some(object)) = (stopped, value.as_object_mut()) {
                    object.insert("claimer_stopped_pid".into(), stopped.pid.into());
                }
                return Ok(json_text(&value));
            }
            let mut text = show::render(&stored, now);
            if let Some(stopped) = stopped {
                text.push('\n');
                text.push_str(&stopped.way_out(&id));
            }
            if stored.state == crate::store::PlanState::NeedsInspection {
                // Read-only, after the store was read: no lock is held.
                text.push('\n');
                text.push_str(&leftovers::render(&id, &controller.leftovers(&id)));
            }
            Ok(text)
        },
    )
}

/// Pretty JSON for a terminal or a script: hidden characters escaped
/// (`crate::text::json_for_terminal`), one trailing newline.
fn json_text(value: &serde_json::Value) -> String {
    // Serializing a `Value` cannot fail (its keys are strings).
    let mut text = crate::text::json_for_terminal(&serde_json::to_string_pretty(value).unwrap_or_default());
    text.push('\n');
    text
}

/// `list`: the plans awaiting an operator and the recorded apps, as text
/// or (`json`) one JSON object.
pub fn list<E: Engine, C: Clock, L: Liveness>(
    paths: &HostPaths,
    engine: E,
    clock: C,
    liveness: L,
    caller: &str,
    json: bool,
) -> Result<String, Refusal> {
    let who = Caller::from(caller);
    operator_request(paths, engine, clock, liveness, &who, AuditOperation::List, None, |controller| {
        let awaiting = controller.awaiting(caller)?;
        Ok(if json { json_text(&list::to_json(&awaiting)) } else { list::render(&awaiting) })
    })
}

/// `reject`: the operator ends a pending plan they do not want.
pub fn reject<E: Engine, C: Clock, L: Liveness>(
    paths: &HostPaths,
    engine: E,
    clock: C,
    liveness: L,
    operator: impl Into<Caller>,
    plan_id: &str,
) -> Result<String, Refusal> {
    let who = operator.into();
    let operator = who.name.as_str();
    let stored =
        operator_request(paths, engine, clock, liveness, &who, AuditOperation::Reject, Some(plan_id), |c| {
            c.reject(&PlanId::parse(plan_id)?, operator)
        })?;
    Ok(format!(
        "Rejected plan {} ({}) as {}; it will never run. The agent is told so when it tries; \
         a new plan is needed for the change.\n",
        stored.plan.id,
        stored.plan.action.as_str(),
        crate::text::for_terminal(operator)
    ))
}

/// What the operator types to confirm an approval: the plan's app name,
/// or the first 8 characters of its digest (a remove_image plan has no app).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmation {
    pub app: Option<String>,
    pub digest_prefix: String,
}

/// The operator's answer to [`Confirmation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Confirmed,
    Declined,
}

impl Confirmation {
    fn of(stored: &crate::store::StoredPlan) -> Confirmation {
        Confirmation {
            app: stored.plan.payload.app().map(str::to_owned),
            digest_prefix: stored.plan.digest.as_str().chars().take(8).collect(),
        }
    }

    /// The question, naming what may be typed but not its value: the
    /// operator reads that in the summary above it.
    pub fn prompt(&self) -> &'static str {
        if self.app.is_some() {
            "To approve, type the app name or the first 8 characters of the digest"
        } else {
            "To approve, type the first 8 characters of the digest"
        }
    }

    /// Whether `typed` (one line, surrounding whitespace ignored) confirms.
    pub fn decide(&self, typed: &str) -> Decision {
        let typed = typed.trim();
        let confirmed =
            !typed.is_empty() && (typed == self.digest_prefix || self.app.as_deref() == Some(typed));
        if confirmed { Decision::Confirmed } else { Decision::Declined }
    }
}

/// `approve`: records the caller's approval of one plan's exact digest.
/// Hands the plan's summary (what `show` prints, escaped) and what would
/// confirm it to `decide` before it records anything, so the operator sees
/// what they approve; records only on [`Decision::Confirmed`]. The CLI asks
/// on the terminal (or `--yes` confirms); tests pass the decision.
///
/// The summary is read before the approving transaction, yet it is what is
/// approved: the body is immutable and sealed by its digest, and the
/// approval is recorded only for that digest (state, expiry and policy are
/// checked again under the write lock).
#[allow(clippy::too_many_arguments)]
pub fn approve<E: Engine, C: Clock, L: Liveness>(
    paths: &HostPaths,
    engine: E,
    clock: C,
    liveness: L,
    approver: impl Into<Caller>,
    plan_id: &str,
    digest: &str,
    decide: impl FnOnce(&str, &Confirmation) -> Decision,
) -> Result<String, Refusal> {
    let who = approver.into();
    let approver = who.name.as_str();
    let now = clock.now();
    let stored = operator_request(
        paths,
        engine,
        clock,
        liveness,
        &who,
        AuditOperation::Approve,
        Some(plan_id),
        |c| {
            let id = PlanId::parse(plan_id)?;
            let digest = Digest::parse(digest)?;
            let before = c.load(&id, approver)?;
            if decide(&show::summary(&before, now), &Confirmation::of(&before)) != Decision::Confirmed {
                return Err(Refusal::new(
                    Code::NotConfirmed,
                    "That is neither the app name nor the digest's first 8 characters; nothing was recorded.",
                ));
            }
            c.approve(&id, &digest, approver)
        },
    )?;
    Ok(format!(
        "\nApproved plan {} ({}) as {approver}; it expires at {} and can be executed once.\n",
        stored.plan.id,
        stored.plan.action.as_str(),
        crate::text::rfc3339_seconds(stored.plan.expires_at)
    ))
}

/// `resolve`: records that the caller inspected the server after a plan
/// that needed inspection, which lets new plans be made again.
pub fn resolve<E: Engine, C: Clock, L: Liveness>(
    paths: &HostPaths,
    engine: E,
    clock: C,
    liveness: L,
    operator: impl Into<Caller>,
    plan_id: &str,
) -> Result<String, Refusal> {
    let who = operator.into();
    let operator = who.name.as_str();
    let Resolved { stored, app, left } = operator_request(
        paths,
        engine,
        clock,
        liveness,
        &who,
        AuditOperation::Resolve,
        Some(plan_id),
        |c| c.resolve(&PlanId::parse(plan_id)?, operator),
    )?;
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

/// The engine the shipped binary uses: the docker CLI with fixed argv.
/// There is deliberately no way to select any other engine here.
pub fn real_engine(paths: &HostPaths) -> impl Engine + use<> {
    crate::docker::cli::DockerCli::new(paths.state_dir.clone())
}

#[cfg(test)]
mod tests {
    use super::entry::ask;
    use super::*;

    #[test]
    fn approve_asks_after_the_summary_and_reads_one_line() {
        let expected = Confirmation { app: Some("web".into()), digest_prefix: "0123abcd".into() };
        let mut out = Vec::new();
        assert_eq!(ask(&b"web\nmore"[..], &mut out, "SUMMARY\n", &expected, false), Decision::Confirmed);
        let out = String::from_utf8(out).unwrap();
        assert!(out.starts_with("SUMMARY\n\nTo approve, type the app name"), "{out}");
        assert!(!out.contains("0123abcd"), "the question does not hand over the answer: {out}");
        let mut out = Vec::new();
        assert_eq!(ask(&b"0123abcd\r\n"[..], &mut out, "", &expected, false), Decision::Confirmed);
        // End of input, a second line's text, an over-long line: declined.
        for typed in [&b""[..], b"\nweb\n", &[b'w'; 300][..]] {
            assert_eq!(ask(typed, Vec::new(), "", &expected, false), Decision::Declined, "{typed:?}");
        }
        // --yes: printed, not asked, nothing read.
        let mut out = Vec::new();
        assert_eq!(ask(&b"nope\n"[..], &mut out, "SUMMARY\n", &expected, true), Decision::Confirmed);
        assert_eq!(out, b"SUMMARY\n");
        let no_app = Confirmation { app: None, digest_prefix: "0123abcd".into() };
        assert_eq!(no_app.decide("web"), Decision::Declined);
        assert!(!no_app.prompt().contains("app name"));
    }

    #[test]
    fn the_caller_is_sudo_user_or_root() {
        assert_eq!(caller(None).unwrap(), "root");
        assert_eq!(caller(Some(OsStr::new("alice"))).unwrap(), "alice");
        assert_eq!(caller(Some(OsStr::new("al ice"))).unwrap_err().code, Code::InvalidCaller);
        assert_eq!(caller(Some(OsStr::new("alice\n"))).unwrap_err().code, Code::InvalidCaller);
    }
}
