//! The root helper on the server: `volce-lab-host rpc` (the only command the
//! agent's account may run, through an exact sudoers rule), the operator's
//! `list`, `show PLAN_ID`, `approve PLAN_ID DIGEST`, `reject PLAN_ID` and
//! `resolve PLAN_ID`, `pause [--reason TEXT]` and `resume` (`pause.rs`:
//! the agent's access refused before anything is opened), and the audit trail's `audit verify`, `audit head`,
//! `audit export` and `audit prune` (`audit.rs`). Runs as root; the ssh
//! gate in front of it (`gate.rs`) runs as the agent's account.
//!
//! Where things are: `entry.rs` is the binary's edge (self-checks, what is
//! printed, exit codes); `pipeline.rs` holds [`Host`], the collaborators
//! (paths, engine, clock, liveness) built once per process, and the library
//! form of each command that opens the controller; `controller.rs` acts on
//! the store and the engine; `request_row.rs` writes the rows of requests
//! answered without a controller; `confirm.rs` is the approve question
//! (and the catalog commands', `crate::install::catalog`).
//!
//! Each command is one straight pipeline, readable top to bottom. rpc:
//! the front (`front.rs`: process guard, then the worker in its own
//! session, waited for, unless no process can end the front) -> in the worker: self-check (root, umask, cwd,
//! `SUDO_USER`) -> process guard -> load the
//! policy -> take a slot -> read the bounded request -> open the store ->
//! verify, claim, act (`controller::Controller::execute`) -> record ->
//! reply (`entry::run_rpc_worker`, then [`Host::rpc_reporting`]). The operator's
//! commands: self-check -> load the policy -> open the store -> act ->
//! record -> print.
//!
//! Invariants enforced here:
//! - an answer follows its audit row: a state change's own row in its
//!   transaction, else one `request` row (`request_row.rs`,
//!   `controller/record.rs`); a row that cannot be written turns the answer
//!   into `audit_unavailable`. Answered without a row, because there is no
//!   trail to write to or writing could itself be cut short: `not_root`; a
//!   refused rpc process guard (`entry::run_rpc`); a refusal while the state
//!   database does not exist yet or cannot be opened (damaged, newer, disk
//!   full: `Recorded::NoTrail`); an operator command whose policy or store
//!   cannot be opened; a bad `SUDO_USER` for show, list and audit prune.
//!   `audit verify`, `head` and `export` only read and write no row;
//! - rpc/list/show/approve/reject/resolve/audit refuse unless the effective
//!   uid is 0;
//! - list, show, approve, reject, resolve and audit are terminal commands
//!   only: the rpc request enum has no variant that reaches them;
//! - rpc claims and acts in a worker process of its own session
//!   (`front.rs`), so sudo's KILL of the command's process group (its
//!   answer to an ALRM) ends only the front; in the front's own process
//!   only when sudo exec'd it in place (the documented rule) and its
//!   parent holds no root uid, so no process can end it on a caller's
//!   behalf;
//! - rpc runs in its own process context (`process`: own session, every
//!   catchable signal caught, fixed rlimits, a read deadline, a bounded
//!   number of helpers) set up before it reads its request; its progress
//!   lines never block and its reply is bounded in time (`rpc`), so an
//!   unread stdout cannot hold a plan `executing`;
//! - approve, reject, resolve and audit prune record a person only after
//!   `operator` cross-checked `SUDO_USER` with `SUDO_UID`, the account
//!   database, the session's login uid, and the facts of `session` no
//!   environment carries (the real uid of the sudo that started the
//!   helper, the owner of that sudo's terminal); approve records only what
//!   the operator confirmed (typed on the terminal, or `--yes`);
//! - at start: umask 077 and cwd `/`. The process environment is not
//!   trusted and not used: `SUDO_USER` (and, for the operator's commands,
//!   `SUDO_UID`) is read exactly once (who asked),
//!   and every child process gets an explicit environment built from
//!   `crate::exec::minimal_env` (docker calls add their socket and config
//!   in `crate::docker::program::docker_env`); `crate::exec` clears the rest. We
//!   do not rewrite our own environment because edition 2024 makes
//!   `std::env::set_var` unsafe and the crate forbids unsafe; not reading
//!   it is the stronger guarantee anyway;
//! - the shipped binary uses [`HostPaths::fixed`] only and always the real
//!   engine ([`Host::shipped`]); there is no switch that selects a fake;
//! - raw docker stderr never reaches a reply: engine errors become fixed
//!   sentences with stable codes.

pub mod alert;
pub mod audit;
pub mod audit_rows;
pub mod clock;
mod confirm;
pub mod controller;
pub mod counted;
pub mod drift;
mod entry;
pub mod env_files;
pub mod front;
pub mod gate;
pub mod leftovers;
pub mod list;
pub mod liveness;
pub mod operator;
pub mod output;
pub mod paths;
pub mod pause;
mod pipeline;
pub mod process;
pub mod request_row;
pub mod rpc;
pub mod session;
pub mod show;
pub mod signed;
mod watch;

use std::ffi::OsStr;

use crate::vocab::{Code, Refusal};

pub use confirm::{Confirmation, Decision, ask, ask_word};
pub use controller::{AppAfterResolve, Awaiting, Controller, Executed, Liveness, Resolved, StoppedClaimer};
pub use entry::{
    operator_check, process_check, run_approve, run_audit_export, run_audit_head, run_audit_prune,
    run_audit_verify, run_list, run_pause, run_reject, run_resolve, run_resume, run_rpc, run_rpc_worker,
    run_show, run_watch, terminal,
};
pub use liveness::{Hold, ProcLiveness};
pub use paths::HostPaths;
pub use pipeline::{Host, ShippedHost, real_engine};
pub use request_row::{Caller, Recorded, record_refusal};
pub use watch::{Frame, WATCH_INTERVAL};

/// Who is asking, from `SUDO_USER` (set by sudo itself), or `root` when the
/// helper was run directly by root. Anything that is not a plain unix user
/// name is refused rather than recorded.
pub fn caller(sudo_user: Option<&OsStr>) -> Result<String, Refusal> {
    match sudo_user {
        None => Ok("root".to_owned()),
        Some(value) => match value.to_str() {
            Some(name) if crate::vocab::is_user_name(name) => Ok(name.to_owned()),
            _ => Err(Refusal::new(Code::InvalidCaller, "SUDO_USER is not a plain unix user name.")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caller_is_sudo_user_or_root() {
        assert_eq!(caller(None).unwrap(), "root");
        assert_eq!(caller(Some(OsStr::new("alice"))).unwrap(), "alice");
        assert_eq!(caller(Some(OsStr::new("al ice"))).unwrap_err().code, Code::InvalidCaller);
        assert_eq!(caller(Some(OsStr::new("alice\n"))).unwrap_err().code, Code::InvalidCaller);
    }
}
