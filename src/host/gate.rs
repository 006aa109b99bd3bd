//! `volce-lab-host ssh-gate`: the forced command of the agent's ssh key
//! (`restrict,command="exec /usr/local/bin/volce-lab-host ssh-gate"` in a
//! root-owned authorized_keys, docs/server-install.md). Runs as the agent's account,
//! unprivileged: it is started by sshd for every session of that key,
//! whatever the client asked for, and reads what was asked from
//! `SSH_ORIGINAL_COMMAND`. It is also the account's login shell (setup,
//! issue 44), so sshd's `volce-lab-host -c FORCED_COMMAND` starts it with no
//! shell between (`cli::per_request`), and a session without the forced
//! command reaches it too and is refused. The contract is `crate::wire::gate`.
//!
//! Invariants enforced here:
//! - only the fixed requests of `wire::gate::parse_request` run; the one
//!   program the gate starts is `/usr/bin/sudo -n
//!   /usr/local/bin/volce-lab-host rpc`, by absolute path with a cleared
//!   environment and no shell; the identity is read from the kernel and the
//!   account database (`gethostname`, the passwd entry of our uid), and the
//!   disk check from `statvfs` and `/proc/self/mounts` ([`disk`], what
//!   `df -h /` prints), not by running programs;
//! - anything else (an interactive login, `ls /`, scp and sftp, extra
//!   arguments) is refused with one stable line on stderr and exit 1, and
//!   nothing runs;
//! - a gated request runs only after the observed host and account equal
//!   the expected ones it names; the reply's header names what was observed,
//!   so the workstation compares again before it uses the payload;
//! - nothing of the inherited environment but `SSH_ORIGINAL_COMMAND` is read,
//!   and children get `crate::exec::minimal_env` only.
//!
//! A refusal is recorded as metadata only (why, how many bytes, their
//! sha256; never the text the caller chose), twice:
//! - in the host audit trail: after refusing, and without running anything
//!   the caller asked for, the gate runs the one command the agent's sudoers
//!   rule allows, `/usr/bin/sudo -n /usr/local/bin/volce-lab-host rpc`, with
//!   the fixed, closed `gate_refusal` request on stdin
//!   ([`wire::gate::RefusalRecord`]); the root helper checks it and appends
//!   a folded refusal row (operation `ssh_gate`, code `gate_refused`,
//!   `store::fold`). The gate cannot write root's database itself, and the
//!   privilege model stays as it was: the agent's account gains no command;
//! - in the system log (facility authpriv, tag `volce-lab-gate`), through
//!   `/dev/log` as any unprivileged program may, first: it holds every
//!   attempt (the trail folds repeats into a count), and it is there even
//!   when sudo or the helper cannot be reached.
//!
//! What a compromised agent account can do with `gate_refusal` (it can run
//! the rpc through sudo without the gate, with any request it likes):
//! - forge gate refusals: rows that say `ssh_gate`/`gate_refused` though no
//!   gate refused anything. They carry the actor sudo named (`SUDO_USER`,
//!   which the rule does not let the caller set), so they can only accuse
//!   the agent's account itself; it could already leave refused rows of
//!   its own with any malformed rpc request;
//! - choose what the row holds, within a closed shape: one of three reasons,
//!   a length consistent with it, and 64 hex characters. That is 32 bytes
//!   of its choosing on the first row of a fold window, shown as hex:
//!   nothing a terminal interprets, no text, no path, no field the helper
//!   acts on. The helper refuses any other shape (`invalid_parameters`,
//!   recorded likewise) and reads nothing else of the request;
//! - flood: each request costs a sudo and a helper process, helpers are
//!   bounded (`process::RPC_SLOTS`, beyond them `busy`), and identical
//!   refusals fold (same actor, operation, code and reason: at most two
//!   chained rows per reason and window, `store::fold::WINDOW_SECS`), so
//!   the trail grows by a bounded amount whatever the rate. A forged
//!   refusal opens the window of its own reason only, and the count row
//!   keeps the length and digest of the latest refused command of that
//!   reason (issue 22), so a real refusal right after a forged one reaches
//!   the trail; a forgery sent after it can replace that digest inside a
//!   count: the syslog line of each real one is still there. A length is
//!   held to what can reach the gate at all
//!   (`wire::gate::MAX_RECEIVABLE_COMMAND_BYTES`);
//! - change anything else: no. The request reaches neither the store's
//!   plans nor the engine; it is answered `gate_refused` after its row.
//!
//! And what the gate's own recording cannot promise: a process of the
//! agent's account (not a key holder, whom the gate confines) can kill the
//! gate before it records. The key holder cannot run such a process (the
//! gate is the only program the key runs); it can hang up, and the gate
//! records before it answers, so hanging up early does not skip the row
//! (not tested against every way sshd may end a session).

use std::ffi::OsStr;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};

use serde::Serialize;

pub mod disk;

use crate::exit::Exit;
use crate::vocab::{Code, Refusal};
use crate::wire::gate::{self, GateRequest, Header, RefusalReason, RefusalRecord, version_line};
use crate::wire::remote::{RPC_ARGS, RemoteCommand, SUDO_PATH};
use crate::wire::versions::HelperVersion;

/// The line every refusal prints on stderr, the same whatever was asked.
pub const REFUSAL_LINE: &str = "volce-lab-gate: refused (gate_refused): this key runs only volce-lab's fixed \
                                requests; nothing ran (server-install.md, the ssh gate).";

/// The host and account this gate runs as, as `hostname` and `id -un`
/// would print them (`?` when they cannot be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub host: String,
    pub user: String,
}

impl Observed {
    /// Read from the kernel (the node name) and the account database.
    pub fn now() -> Observed {
        let host = nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok());
        let user = nix::unistd::User::from_uid(nix::unistd::geteuid()).ok().flatten().map(|u| u.name);
        Observed { host: host.unwrap_or_else(|| "?".into()), user: user.unwrap_or_else(|| "?".into()) }
    }
}

/// What the gate does for one accepted request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateStep {
    /// Print these bytes and exit: an identity answer, or a mismatch
    /// header (then nothing ran).
    Reply { stdout: Vec<u8>, exit: Exit },
    /// Print `header` (if any), then what `df -h /` prints, read
    /// in-process ([`disk::df_h`]).
    Disk { header: Option<String> },
    /// Print `header` (if any), then become `program args`: its output and
    /// exit status are the reply's. `stdin`: the child reads ours (the
    /// helper's request); else it gets /dev/null.
    Run { header: Option<String>, program: &'static str, args: &'static [&'static str], stdin: bool },
}

/// The step that runs `command` by its one argv (`RemoteCommand::program`);
/// only the helper's rpc reads the caller's stdin.
fn run_step(command: RemoteCommand, header: Option<String>) -> GateStep {
    let Some((program, args)) = command.program() else { unreachable!("identity is answered, not run") };
    GateStep::Run { header, program, args, stdin: command == RemoteCommand::Rpc }
}

/// The step for `request` on a host and account observed as `observed`.
/// Pure: the decision the gate makes, for tests.
pub fn decide(request: &GateRequest, observed: &Observed) -> GateStep {
    let identity = || format!("{}\n{}\n", observed.host, observed.user).into_bytes();
    match request {
        GateRequest::Legacy(RemoteCommand::Identity) => {
            GateStep::Reply { stdout: identity(), exit: Exit::Ok }
        }
        GateRequest::Legacy(RemoteCommand::Disk) => GateStep::Disk { header: None },
        GateRequest::Legacy(check) => run_step(*check, None),
        GateRequest::Gated { check, host, user } => {
            let header = Header::judge(&observed.host, &observed.user, host, user);
            if !header.matched {
                return GateStep::Reply { stdout: header.line().into_bytes(), exit: Exit::Failure };
            }
            match check {
                RemoteCommand::Identity => {
                    let mut stdout = header.line().into_bytes();
                    stdout.extend_from_slice(&identity());
                    stdout.extend_from_slice(version_line(&HelperVersion::this()).as_bytes());
                    GateStep::Reply { stdout, exit: Exit::Ok }
                }
                RemoteCommand::Disk => GateStep::Disk { header: Some(header.line()) },
                check => run_step(*check, Some(header.line())),
            }
        }
    }
}

/// The record of one refusal: metadata only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusalNotice {
    pub code: &'static str,
    pub reason: &'static str,
    /// Length of the remote command in bytes (absent: none was given).
    pub command_bytes: Option<u64>,
    /// sha256 of the remote command, lowercase hex: lets the operator tell
    /// repeated attempts apart without the log holding the caller's text.
    pub command_sha256: Option<String>,
}

impl RefusalNotice {
    /// The notice as one JSON object (field names stable).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// Builds the metadata of the refusal of `command` for `reason`.
pub fn refusal_notice(reason: RefusalReason, command: Option<&OsStr>) -> RefusalNotice {
    let record = RefusalRecord::of(reason, command.map(OsStr::as_bytes));
    RefusalNotice {
        code: Code::GateRefused.as_str(),
        reason: reason.as_str(),
        command_bytes: record.command_bytes,
        command_sha256: record.command_sha256,
    }
}

/// Sends `notice` to the system log (authpriv.warning), best effort and
/// without blocking: a server without a log daemon loses the line, and the
/// refusal itself stands either way.
pub fn syslog_refusal(notice: &RefusalNotice) {
    const AUTHPRIV_WARNING: u8 = 10 * 8 + 4;
    let line = format!(
        "<{AUTHPRIV_WARNING}>volce-lab-gate[{}]: {}",
        std::process::id(),
        serde_json::to_string(&notice.to_json()).unwrap_or_default()
    );
    if let Ok(socket) = std::os::unix::net::UnixDatagram::unbound() {
        let _ = socket.set_nonblocking(true);
        let _ = socket.send_to(line.as_bytes(), "/dev/log");
    }
}

/// How long the gate waits for the helper to record a refusal. The helper
/// answers in milliseconds; a stuck sudo must not keep a refused session
/// open (the refusal stands either way, and syslog has it).
pub const RECORD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The argv that records a refusal in the host audit: exactly the rpc of
/// the agent's one sudoers rule, by absolute paths.
pub fn record_argv() -> (&'static str, &'static [&'static str]) {
    (SUDO_PATH, RPC_ARGS)
}

/// Asks the root helper to append the audit row of `record` (the
/// `gate_refusal` request on stdin, [`record_argv`]). Whether it was
/// written is the helper's to say in its reply, which the gate does not
/// relay: the caller gets the one refusal line whatever happened here.
/// Returns the helper's reply code, for tests and the gate's own exit path.
pub fn record_in_audit(record: &RefusalRecord) -> Option<Code> {
    let (program, args) = record_argv();
    let mut spec = crate::exec::ProcessSpec::new(program, args);
    spec.stdin = Some(record.request().to_bytes());
    spec.timeout = RECORD_TIMEOUT;
    spec.stdout_limit = 4096;
    spec.stderr_limit = 4096;
    let outcome = crate::exec::run_blocking(&spec);
    match crate::wire::Reply::parse(&outcome.stdout) {
        Ok(crate::wire::Reply::Rejected { refusal, .. }) => Some(refusal.code),
        _ => None,
    }
}

/// The helper's side of `gate_refusal`: the request's fields checked
/// against what a gate sends ([`RefusalRecord::checked`]). Anything else is
/// `invalid_parameters` (and that refusal is recorded instead).
pub fn gate_refusal(
    reason: RefusalReason,
    command_bytes: Option<u64>,
    command_sha256: Option<&str>,
) -> Result<RefusalRecord, Refusal> {
    RefusalRecord::checked(reason, command_bytes, command_sha256).map_err(|_| {
        Refusal::new(
            Code::InvalidParameters,
            "gate_refusal takes a reason, and for a command that was given its length and its sha256 \
             (64 lowercase hex characters) as the ssh gate sends them; nothing was recorded as a gate refusal.",
        )
    })
}

/// What the helper answers a well-formed `gate_refusal`, once its row is
/// written: the gate's refusal, as the caller of the gate saw it.
pub fn recorded_refusal() -> Refusal {
    Refusal::new(Code::GateRefused, "The ssh gate refused a remote command; the refusal is recorded.")
}

/// `volce-lab-host ssh-gate` in the shipped binary.
pub fn run_ssh_gate() -> Exit {
    // Read once; nothing else of the environment sshd built is consulted.
    let command = std::env::var_os("SSH_ORIGINAL_COMMAND");
    let request = match gate::parse_request(command.as_deref().map(OsStr::as_bytes)) {
        Ok(request) => request,
        Err(reason) => {
            // Nothing the caller asked for runs: syslog first, then the
            // host audit through the one sudo rule, then the one line.
            let bytes = command.as_deref().map(OsStr::as_bytes);
            syslog_refusal(&refusal_notice(reason, command.as_deref()));
            record_in_audit(&RefusalRecord::of(reason, bytes));
            eprintln!("{REFUSAL_LINE}");
            return Exit::Failure;
        }
    };
    let mut stdout = std::io::stdout().lock();
    match decide(&request, &Observed::now()) {
        GateStep::Reply { stdout: bytes, exit } => {
            let _ = stdout.write_all(&bytes).and_then(|()| stdout.flush());
            exit
        }
        GateStep::Disk { header } => {
            // df's failure shape: a sentence on stderr, exit 1, nothing more
            // on stdout than the header.
            let (text, exit) = match disk::df_h("/") {
                Ok(text) => (text, Exit::Ok),
                Err(error) => {
                    eprintln!("volce-lab-gate: df: {error}");
                    (String::new(), Exit::Failure)
                }
            };
            let written = stdout.write_all(format!("{}{text}", header.unwrap_or_default()).as_bytes());
            if written.and_then(|()| stdout.flush()).is_err() { Exit::Failure } else { exit }
        }
        GateStep::Run { header, program, args, stdin } => {
            if let Some(header) = header
                && stdout.write_all(header.as_bytes()).and_then(|()| stdout.flush()).is_err()
            {
                return Exit::Failure;
            }
            drop(stdout);
            // exec, not spawn: the child is the session's process (the gate
            // is the account's shell, so no shell waits above it either), and
            // its exit status, its signals and the workstation's timeout act
            // on it directly. A helper ended by a signal reaches the
            // workstation as sshd's exit-signal, which is exit 255 there:
            // unconfirmed, never mistaken for a clean refusal.
            let error = Command::new(program)
                .args(args)
                .env_clear()
                .envs(crate::exec::minimal_env())
                .stdin(if stdin { Stdio::inherit() } else { Stdio::null() })
                .exec();
            let _ = error;
            eprintln!("volce-lab-gate: {program} could not be started; nothing ran.");
            Exit::Failure
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed() -> Observed {
        Observed { host: "web-1".into(), user: "vl-agent".into() }
    }

    fn gated(check: RemoteCommand, host: &str, user: &str) -> GateRequest {
        GateRequest::Gated { check, host: host.into(), user: user.into() }
    }

    #[test]
    fn a_gated_check_runs_by_absolute_path_only_on_the_expected_identity() {
        let step = decide(&gated(RemoteCommand::Rpc, "web-1", "vl-agent"), &observed());
        assert_eq!(
            step,
            GateStep::Run {
                header: Some("volce-lab-gate 1 match web-1 vl-agent\n".into()),
                program: "/usr/bin/sudo",
                args: &["-n", "/usr/local/bin/volce-lab-host", "rpc"],
                stdin: true,
            }
        );
        // Issue 44: the disk check starts no program, gated or legacy.
        assert_eq!(
            decide(&gated(RemoteCommand::Disk, "web-1", "vl-agent"), &observed()),
            GateStep::Disk { header: Some("volce-lab-gate 1 match web-1 vl-agent\n".into()) }
        );
        assert_eq!(
            decide(&GateRequest::Legacy(RemoteCommand::Disk), &observed()),
            GateStep::Disk { header: None }
        );
        for (host, user) in [("web-2", "vl-agent"), ("web-1", "vl-other"), ("x", "y")] {
            for check in [RemoteCommand::Identity, RemoteCommand::Disk, RemoteCommand::Rpc] {
                let GateStep::Reply { stdout, exit } = decide(&gated(check, host, user), &observed()) else {
                    panic!("{host}/{user}: nothing may run on a mismatch");
                };
                assert_eq!(exit, Exit::Failure);
                assert_eq!(stdout, b"volce-lab-gate 1 mismatch web-1 vl-agent\n");
            }
        }
    }

    #[test]
    fn identity_is_answered_from_what_was_observed() {
        assert_eq!(
            decide(&gated(RemoteCommand::Identity, "web-1", "vl-agent"), &observed()),
            GateStep::Reply {
                stdout: format!(
                    "volce-lab-gate 1 match web-1 vl-agent\nweb-1\nvl-agent\nvolce-lab-host {} protocol {}\n",
                    env!("CARGO_PKG_VERSION"),
                    crate::wire::PROTOCOL_VERSION
                )
                .into_bytes(),
                exit: Exit::Ok
            }
        );
        assert_eq!(
            decide(&GateRequest::Legacy(RemoteCommand::Identity), &observed()),
            GateStep::Reply { stdout: b"web-1\nvl-agent\n".to_vec(), exit: Exit::Ok }
        );
        let GateStep::Run { header: None, program: "/usr/bin/sudo", .. } =
            decide(&GateRequest::Legacy(RemoteCommand::Rpc), &observed())
        else {
            panic!("the legacy rpc line runs the helper without a header")
        };
    }

    #[test]
    fn a_refusal_records_metadata_only() {
        let notice = refusal_notice(RefusalReason::NotAFixedRequest, Some(OsStr::new("cat /etc/shadow")));
        let json = notice.to_json();
        assert_eq!(json["code"], "gate_refused");
        assert_eq!(json["reason"], "not_a_fixed_request");
        assert_eq!(json["command_bytes"], 15);
        assert_eq!(json["command_sha256"].as_str().unwrap().len(), 64);
        assert!(!json.to_string().contains("shadow"), "the caller's text is never recorded: {json}");
        let none = refusal_notice(RefusalReason::NoCommand, None);
        assert_eq!(none.to_json()["command_bytes"], serde_json::Value::Null);
    }

    #[test]
    fn a_refusal_is_recorded_through_exactly_the_agents_one_sudo_rule() {
        // The same argv as the rpc the gate runs for a gated request: the
        // account needs no second rule for its refusals to be recorded.
        let GateStep::Run { program, args, .. } =
            decide(&GateRequest::Legacy(RemoteCommand::Rpc), &observed())
        else {
            panic!("rpc runs")
        };
        assert_eq!(record_argv(), (program, args));
        let bytes =
            RefusalRecord::of(RefusalReason::NotAFixedRequest, Some(b"cat /etc/shadow")).request().to_bytes();
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.contains("\"operation\":\"gate_refusal\"") && !text.contains("shadow"), "{text}");
        // The helper's checks accept exactly what the gate sends, and answer gate_refused.
        let record = gate_refusal(RefusalReason::NoCommand, None, None).unwrap();
        assert_eq!(record, RefusalRecord::of(RefusalReason::NoCommand, None));
        assert_eq!(recorded_refusal().code, Code::GateRefused);
        assert_eq!(
            gate_refusal(RefusalReason::NoCommand, Some(1), None).unwrap_err().code,
            Code::InvalidParameters
        );
    }
}
