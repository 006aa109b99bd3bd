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
//! When no second process is needed: the documented sudoers rule
//! (`install::sudoers_file`: no pty, no PAM session, no credentials for
//! the rpc) lets sudo exec the helper in its own place, so no sudo process
//! is left to answer an ALRM, and the helper's parent is the caller's own
//! process (under the gate, which the key line `exec`s and which execs
//! sudo: sshd's session process, the account's since sshd dropped root's
//! uids). A process whose real, effective, saved and filesystem uids
//! are all other than root cannot signal the helper, whose are all root;
//! so when the parent is such a process ([`needs_worker`] says no) the
//! front runs the worker's path itself: one start of the binary per
//! request. Any other parent (a sudo that waits, root, one that cannot be
//! read) gets the worker, as before. What the parent could do later (run
//! a set-uid program) it could do to a worker just the same.
//!
//! Invariants enforced here:
//! - a single process only under a parent that cannot signal it, read from
//!   `/proc` after our own parent pid, which is read again afterwards (had
//!   the parent ended meanwhile, its pid free for another, the worker runs);
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

/// Whether the process that started this one could end it on a caller's
/// behalf, so the claim must be held by a worker in its own session: yes
/// unless the parent's four uids (`Uid:` of `/proc/PPID/status`) are all
/// other than root. Unreadable, or a parent that changed meanwhile: yes.
pub fn needs_worker() -> bool {
    let parent = nix::unistd::getppid();
    let status = std::fs::read_to_string(format!("/proc/{parent}/status"));
    // Read after the status: a parent that ended (its pid reused) no
    // longer is ours, and what was read may be another process's.
    let same_parent = nix::unistd::getppid() == parent;
    !(same_parent && status.is_ok_and(|status| cannot_signal_root(&status)))
}

/// Whether a process with this `/proc/PID/status` is denied every signal
/// to a process of root's: the kernel lets a sender signal a process only
/// when the sender's real or effective uid is the target's real or saved
/// uid, or holds CAP_KILL (which would reach a worker just the same: the
/// split never guarded against it).
pub fn cannot_signal_root(status: &str) -> bool {
    let Some(uids) = status.lines().find_map(|line| line.strip_prefix("Uid:")) else {
        return false;
    };
    let uids: Vec<&str> = uids.split_whitespace().collect();
    uids.len() == 4 && uids.iter().all(|uid| uid.parse::<u32>().is_ok_and(|uid| uid != 0))
}

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

#[cfg(test)]
mod tests {
    use super::cannot_signal_root;

    fn status(uids: &str) -> String {
        format!("Name:\tsh\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t{uids}\nGid:\t1000\t1000\t1000\t1000\n")
    }

    #[test]
    fn only_a_parent_with_no_root_uid_is_spared_the_worker() {
        // sshd's session process for the agent: its child (the shell, the
        // gate, then sudo, each exec'ing the next) became the helper.
        assert!(cannot_signal_root(&status("1001\t1001\t1001\t1001")));
        // A sudo that forked and waits: real uid the caller's, the others root.
        assert!(!cannot_signal_root(&status("1001\t0\t0\t0")));
        // A root shell, a set-uid program halfway, a saved root uid.
        assert!(!cannot_signal_root(&status("0\t0\t0\t0")));
        assert!(!cannot_signal_root(&status("1001\t1001\t0\t1001")));
        assert!(!cannot_signal_root(&status("1001\t1001\t1001\t0")));
    }

    #[test]
    fn a_status_without_four_readable_uids_gets_the_worker() {
        assert!(!cannot_signal_root("Name:\tsh\n"));
        assert!(!cannot_signal_root(&status("1001\t1001\t1001")));
        assert!(!cannot_signal_root(&status("1001 1001 1001 x")));
        assert!(!cannot_signal_root(""));
    }
}
