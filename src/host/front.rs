//! The front of `volce-lab-host rpc`: the process sudo started. It starts
//! the worker (`volce-lab-host rpc-worker`, hidden) that reads the request,
//! claims, acts, records and replies on the same stdin and stdout, waits
//! for it, and exits with its code. Runs as root; no unsafe, no shell.
//!
//! Why two processes: sudo answers a SIGALRM sent to it (by the caller's
//! own account: sudo runs as that user's process for signalling purposes)
//! by ending the command itself: HUP and TERM to the command's process
//! group, then KILL. No handler survives KILL, so the process that holds a
//! claim must not be the one sudo started, nor in its group: the worker
//! starts its own session (`process::guard` calls setsid, which a child
//! that leads no group may), so sudo's kill reaches only this front. The
//! worker then goes on, records, and writes its reply to the stdout it
//! inherited; a KILL of the front, by sudo or anyone, neither leaves a plan
//! unrecorded nor cuts an action in the middle.
//!
//! Invariants enforced here:
//! - the worker is this same executable (the path `/proc/self/exe` names:
//!   the file sudo ran, in a directory only root writes), started with a
//!   fixed argv, an empty environment but for the
//!   `SUDO_USER` sudo set (passed on unread: the worker reads and checks it
//!   once, as the helper always did), and the front's stdin, stdout and
//!   stderr: the front never reads or writes them;
//! - the front catches every signal it can ([`process::guard`]) before it
//!   starts the worker, and waits for the worker whatever it receives;
//! - the worker's exit code is the front's: 0 for an `ok` reply, else 1.

use std::ffi::OsStr;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};

use crate::exit::Exit;

use super::process;

/// The hidden subcommand the front starts: `volce-lab-host rpc-worker`.
pub const WORKER: &str = "rpc-worker";

/// The name that puts the executable in host mode as `argv[0]` (the CLI's
/// own, which a test in `cli` holds equal; `host` cannot use `cli`).
pub const HOST_NAME: &str = "volce-lab-host";

/// The front could not start a worker (no guard, no executable, no
/// process). The front answers nothing itself: the worker path, run in
/// this process instead, answers and records exactly as before the split
/// (without the protection from sudo's ALRM, which only a second process
/// gives). Once a worker started, the front never falls back: two readers
/// of one request.
#[derive(Debug)]
pub struct NoWorker;

/// Starts the worker with `sudo_user` and waits for it; its exit code.
pub fn run(sudo_user: Option<&OsStr>) -> Result<Exit, NoWorker> {
    process::guard().map_err(|_| NoWorker)?;
    let exe = std::env::current_exe().map_err(|_| NoWorker)?;
    let mut command = Command::new(exe);
    // argv[0] picks host mode (`cli::is_host_name`), whatever the file is
    // called on disk.
    command
        .arg0(HOST_NAME)
        .arg(WORKER)
        .env_clear()
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    if let Some(user) = sudo_user {
        command.env("SUDO_USER", user);
    }
    let mut worker = command.spawn().map_err(|_| NoWorker)?;
    // std retries a wait a caught signal interrupts.
    Ok(match worker.wait() {
        Ok(status) if status.success() => Exit::Ok,
        _ => Exit::Failure,
    })
}
