//! The binary edge of the root helper: the shipped `volce-lab-host`
//! commands on the fixed paths and the real engine, their process-level
//! self-checks, the approve question on the terminal, and the mapping of
//! outcomes to what is printed and the exit code. Runs as root.

use std::os::fd::AsFd as _;

use super::confirm::{Confirmation, ask};
use super::output::{Output, REPLY_DEADLINE};
use super::request_row::{self, Caller};
use super::rpc::{LineProgress, Reply};
use super::{ShippedHost, audit, caller, operator, process, session};
use crate::control::Clock as _;
use crate::exit::Exit;
use crate::store::AuditOperation;
use crate::vocab::{Code, Refusal};

/// The process-level part of every host command's self-check: root,
/// umask, cwd (also the catalog commands', `crate::install::catalog`).
pub fn process_check() -> Result<(), Refusal> {
    if !nix::unistd::geteuid().is_root() {
        return Err(Refusal::new(Code::NotRoot, "volce-lab-host must run as root (through sudo)."));
    }
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    std::env::set_current_dir("/")
        .map_err(|_| Refusal::new(Code::StateUnavailable, "Cannot change directory to /."))
}

/// The self-check of rpc, list and show: [`process_check`] and the one
/// environment value they read. Returns the caller.
fn self_check() -> Result<String, Refusal> {
    process_check()?;
    // Read once; nothing else of the inherited environment is ever consulted.
    caller(std::env::var_os("SUDO_USER").as_deref())
}

/// The self-check of approve, reject, resolve and audit prune, which
/// record a person: [`process_check`], then `SUDO_USER` and `SUDO_UID`
/// (each read once) cross-checked with the account database, the
/// session's login uid and the sudo that started us (`operator::verify`).
pub fn operator_check() -> Result<operator::Operator, Refusal> {
    process_check()?;
    let (user, uid) = (std::env::var_os("SUDO_USER"), std::env::var_os("SUDO_UID"));
    let sudo = session::observe(&session::SystemProc, std::process::id());
    let facts = operator::Facts {
        sudo_user: user.as_deref(),
        sudo_uid: uid.as_deref(),
        login_uid: operator::login_uid(),
        sudo: sudo.as_ref(),
    };
    operator::verify(facts, &operator::SystemAccounts)
}

/// Records a command refused before it knew who asked (a bad `SUDO_USER`,
/// `caller_mismatch`): a probe worth an operator's eye. The actor is
/// `unknown`: who asked is exactly what did not check out, and the
/// environment is not read a second time (module header of `host`).
/// `not_root` is never recorded: without root there is no trail to write.
/// Returns the refusal to answer (`audit_unavailable` if unrecorded).
fn refusal_recorded(host: &ShippedHost, operation: AuditOperation, refusal: Refusal) -> Refusal {
    if refusal.code == Code::NotRoot {
        return refusal;
    }
    request_row::refused(&host.paths, host.clock.now(), Caller::from("unknown").request(operation), refusal)
}

/// `volce-lab-host rpc` in the shipped binary: the front (`front.rs`),
/// which starts [`run_rpc_worker`] in its own session and waits for it
/// when its parent could end it (a sudo that waits), else runs it itself
/// (sudo exec'd the helper in its place: one start per request). Not
/// root: answered here, as the worker would (`not_root`).
pub fn run_rpc() -> Exit {
    if nix::unistd::geteuid().is_root() && super::front::needs_worker() {
        // Handed on unread: the worker reads and checks it once.
        if let Ok(exit) = super::front::run(std::env::var_os("SUDO_USER").as_deref()) {
            return exit;
        }
    }
    run_rpc_worker()
}

/// `volce-lab-host rpc-worker` (hidden; started by the front of `rpc`): one
/// request on stdin, one reply line on stdout (after the progress lines of
/// a long execute), on the fixed paths and the real engine.
///
/// Order: self-check -> process guard (own session, signals, rlimits;
/// before any thread) -> then [`Host::rpc_reporting`](super::Host::rpc_reporting):
/// policy -> slot -> request read within the deadline -> store.
pub fn run_rpc_worker() -> Exit {
    let host = ShippedHost::shipped();
    // A refused process guard is answered unrecorded: it means the helper
    // runs under limits it could not lift (a caller's hard `ulimit -f`), in
    // which writing the audit row could itself be cut short by SIGXFSZ, the
    // very split the guard exists to prevent. Nothing was read or changed.
    let checked = self_check().map_err(|refusal| refusal_recorded(&host, AuditOperation::Rpc, refusal));
    let reply = match checked.and_then(|caller| process::guard().map(|()| caller)) {
        Ok(caller) => match std::io::stdin().as_fd().try_clone_to_owned() {
            // Our own handle on fd 0, unbuffered, so poll and read agree.
            Ok(fd) => {
                let input = process::DeadlineReader::new(std::fs::File::from(fd), process::REQUEST_DEADLINE);
                // Progress lines go to stdout before the reply, never
                // waiting for room (`output`).
                match Output::stdout() {
                    Ok(out) => {
                        let progress = LineProgress::new(out);
                        let answered = host.rpc_answered(&caller, input, &progress);
                        return answer(progress.into_inner(), answered);
                    }
                    Err(_) => {
                        Refusal::new(Code::StateUnavailable, "The helper cannot use its stdout.").into()
                    }
                }
            }
            Err(_) => Refusal::new(Code::InvalidRequest, "The request could not be read from stdin.").into(),
        },
        Err(refusal) => Reply::from(refusal),
    };
    // Answered before anything was recorded or done: still bounded in time.
    match Output::stdout() {
        Ok(out) => answer(out, reply.into()),
        Err(_) => reply.exit(),
    }
}

/// Writes the reply line, after its record, waiting for room at most
/// [`REPLY_DEADLINE`]: an unread stdout ends the helper, it does not keep
/// it. The exit code says what the reply says, written or not.
fn answer(mut out: Output, answered: crate::wire::Answered) -> Exit {
    let _ = out.reply(answered.to_line().as_bytes(), REPLY_DEADLINE);
    answered.exit()
}

/// `volce-lab-host show PLAN_ID [--json]` in the shipped binary.
pub fn run_show(plan_id: &str, json: bool) -> Exit {
    let host = ShippedHost::shipped();
    terminal(self_check().and_then(|caller| host.show(&caller, plan_id, json)))
}

/// `volce-lab-host approve PLAN_ID DIGEST [--yes]` in the shipped binary:
/// the summary goes to stdout before anything is recorded; then, unless
/// `yes`, the operator confirms on the terminal by typing the plan's app
/// name or the digest's first 8 characters. Without a terminal on stdin
/// and without `yes` it refuses before it opens anything.
pub fn run_approve(plan_id: &str, digest: &str, yes: bool) -> Exit {
    use std::io::IsTerminal as _;
    let host = ShippedHost::shipped();
    let operator = match operator_check() {
        Ok(operator) => operator,
        Err(refusal) => return terminal(Err(refusal_recorded(&host, AuditOperation::Approve, refusal))),
    };
    if !yes && !std::io::stdin().is_terminal() {
        let refusal = Refusal::new(
            Code::NotConfirmed,
            "approve asks for confirmation on a terminal, and stdin is not one; nothing was recorded. \
             Run it on a terminal, or pass --yes if a script approves a digest it checked.",
        );
        let meta = Caller::from(&operator).request(AuditOperation::Approve);
        return terminal(Err(request_row::refused(&host.paths, host.clock.now(), meta, refusal)));
    }
    let decide = |shown: &str, expected: &Confirmation| {
        ask(std::io::stdin().lock(), std::io::stdout().lock(), shown, expected, yes)
    };
    terminal(host.approve(&operator, plan_id, digest, decide))
}

/// `volce-lab-host list [--json]` (alias `pending`) in the shipped binary.
pub fn run_list(json: bool) -> Exit {
    let host = ShippedHost::shipped();
    terminal(self_check().and_then(|caller| host.list(&caller, json)))
}

/// `volce-lab-host list --watch [--bell]` in the shipped binary: the view,
/// then again whenever it changes, each after a line with the time; the
/// bell (BEL) for each plan that newly waits for approval under `bell`.
/// Runs until interrupted.
pub fn run_watch(bell: bool) -> Exit {
    use std::io::Write as _;
    let host = ShippedHost::shipped();
    let show = |frame: &super::Frame| {
        let mut out = std::io::stdout().lock();
        let ring = if bell && !frame.new_waiting.is_empty() { "\x07" } else { "" };
        let _ = write!(
            out,
            "{ring}--- {} ---\n{}\n",
            crate::text::rfc3339_seconds(super::clock::SystemClock.now()),
            frame.text
        );
        for id in &frame.new_waiting {
            let _ = writeln!(out, "New plan waits for your approval: sudo volce-lab-host show {id}\n");
        }
        match out.flush() {
            // Nobody reads any more (the pipe closed): stop.
            Err(_) => std::ops::ControlFlow::Break(()),
            Ok(()) => std::ops::ControlFlow::Continue(()),
        }
    };
    let pause = || std::thread::sleep(super::WATCH_INTERVAL);
    let watched = self_check().and_then(|caller| host.watch(&caller, show, pause));
    terminal(watched.map(|()| String::new()))
}

/// `volce-lab-host reject PLAN_ID [--reason TEXT]` in the shipped binary.
pub fn run_reject(plan_id: &str, reason: Option<&str>) -> Exit {
    let host = ShippedHost::shipped();
    let checked =
        operator_check().map_err(|refusal| refusal_recorded(&host, AuditOperation::Reject, refusal));
    terminal(checked.and_then(|operator| host.reject(&operator, plan_id, reason)))
}

/// `volce-lab-host resolve PLAN_ID` in the shipped binary.
pub fn run_resolve(plan_id: &str) -> Exit {
    let host = ShippedHost::shipped();
    let checked =
        operator_check().map_err(|refusal| refusal_recorded(&host, AuditOperation::Resolve, refusal));
    terminal(checked.and_then(|operator| host.resolve(&operator, plan_id)))
}

/// `volce-lab-host pause [--reason TEXT]` in the shipped binary: records a
/// person, like approve. A refused caller check is answered unrecorded, as
/// a pause's own refusals are (the pause's file decides, not the store).
pub fn run_pause(reason: Option<&str>) -> Exit {
    let host = ShippedHost::shipped();
    terminal(operator_check().and_then(|operator| {
        super::pause::pause(&host.paths, &Caller::from(&operator), reason, host.clock.now())
    }))
}

/// `volce-lab-host resume` in the shipped binary.
pub fn run_resume() -> Exit {
    let host = ShippedHost::shipped();
    terminal(
        operator_check().and_then(|operator| {
            super::pause::resume(&host.paths, &Caller::from(&operator), host.clock.now())
        }),
    )
}

/// `volce-lab-host audit verify [--from HASH]` in the shipped binary: exit
/// 0 only when the chain is intact (and holds the kept head `from`).
pub fn run_audit_verify(from: Option<&str>) -> Exit {
    let host = ShippedHost::shipped();
    match process_check().and_then(|()| audit::verify(&host.paths, from)) {
        Ok((text, intact)) => {
            print!("{text}");
            if intact { Exit::Ok } else { Exit::Failure }
        }
        Err(refusal) => terminal(Err(refusal)),
    }
}

/// `volce-lab-host audit head` in the shipped binary.
pub fn run_audit_head() -> Exit {
    let host = ShippedHost::shipped();
    terminal(process_check().and_then(|()| audit::head(&host.paths)))
}

/// `volce-lab-host audit export [--since RFC3339] [--json]` in the shipped binary.
pub fn run_audit_export(since: Option<&str>, json: bool) -> Exit {
    let host = ShippedHost::shipped();
    terminal(process_check().and_then(|()| audit::export(&host.paths, since, json)))
}

/// `volce-lab-host audit prune --before RFC3339` in the shipped binary: an
/// operator command (it drops rows), so the caller is cross-checked and
/// both uids are recorded in the pruning's own row.
pub fn run_audit_prune(before: &str) -> Exit {
    let host = ShippedHost::shipped();
    terminal(
        operator_check().and_then(|operator| {
            audit::prune(&host.paths, before, &Caller::from(&operator), host.clock.now())
        }),
    )
}

/// Prints an operator command's text, or its refusal on stderr (also the
/// installation's commands', `crate::install`).
pub fn terminal(result: Result<String, Refusal>) -> Exit {
    match result {
        Ok(text) => {
            print!("{text}");
            Exit::Ok
        }
        Err(refusal) => {
            eprintln!("volce-lab-host: refused ({}): {}", refusal.code, refusal.message);
            Exit::Failure
        }
    }
}
