//! The helper's own process context: what `volce-lab-host rpc` sets up
//! before it reads its request, so that nothing the caller's account did to
//! the process it started (signals relayed through sudo, `ulimit`, an open
//! stdin, many helpers at once) can cut an action between its claim and
//! its record. Runs as root, in the helper only; no unsafe, no shell.
//!
//! Invariants enforced here:
//! - TERM, INT, HUP, QUIT, TSTP, TTIN and TTOU are caught for the whole rpc
//!   process by a handler that does nothing ([`CAUGHT`], through tokio's
//!   signal registry, which never unregisters its handler): a relayed TERM
//!   neither ends the helper nor a TSTP stops it, from before the request
//!   is read to after the reply. They are caught, not blocked or ignored,
//!   because the children must not inherit our choice: a blocked mask and
//!   an ignored disposition both survive fork and exec (std's spawn does
//!   not reset the mask: a test in this file pins it), while a caught
//!   signal is reset to its default at exec. So docker still dies on its
//!   own TERM, and the runner's timeout still kills it. PIPE is ignored by
//!   the Rust runtime, and std resets it for children. Only KILL and STOP
//!   remain, which no process can refuse;
//! - [`guard`] runs before any other thread exists;
//! - the rlimits of [`LIMITS`] replace whatever the caller set, so
//!   `ulimit -f 64` or `ulimit -n 16` before sudo cannot make a write or an
//!   open fail midway;
//! - the request must arrive within [`REQUEST_DEADLINE`] ([`DeadlineReader`]):
//!   a stdin that never closes ends the helper, it does not keep it;
//! - at most [`RPC_SLOTS`] helpers get past [`take_slot`] at once; the next
//!   is refused at once with `busy`. The slots are `flock`s on files in the
//!   checked state directory, opened close-on-exec so no docker child keeps
//!   one, and released by the kernel when the helper exits, however it exits.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg, OFlag, openat};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::resource::{RLIM_INFINITY, Resource, rlim_t, setrlimit};
use nix::sys::signal::Signal;
use nix::sys::stat::Mode;

use crate::vocab::{Code, Refusal};

use super::paths::{self, HostPaths};

/// How long the helper waits for a complete request on stdin. The
/// workstation writes its request (at most 16 KiB) at once and closes
/// stdin; over ssh that takes milliseconds.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);

/// How many rpc helpers may run at once. Each holds at most one Docker
/// call at a time; eight is more than one agent session uses, and few
/// enough that a flood of helpers cannot crowd the server.
pub const RPC_SLOTS: usize = 8;

/// The signals that could stop or end the helper between a claim and its
/// record, and that the caller can send (through sudo or its own session).
pub const CAUGHT: [Signal; 7] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGTSTP,
    Signal::SIGTTIN,
    Signal::SIGTTOU,
];

const MIB: rlim_t = 1024 * 1024;

/// The limits the helper runs with, (resource, soft, hard), whatever the
/// caller set. The docker children inherit them.
/// - file size and CPU time unlimited: `ulimit -f`/`-t` would kill the
///   helper (SIGXFSZ, SIGXCPU) in the middle of a write;
/// - address space and data unlimited: an allocation failure aborts, and
///   the docker CLI (Go) reserves much more address space than it uses;
/// - open files 4096: enough for SQLite, the runner's pipes and docker;
/// - stack 8 MiB, the usual default;
/// - core 0: a crash of a root process leaves no memory image on disk.
pub const LIMITS: [(Resource, rlim_t, rlim_t); 7] = [
    (Resource::RLIMIT_FSIZE, RLIM_INFINITY, RLIM_INFINITY),
    (Resource::RLIMIT_CPU, RLIM_INFINITY, RLIM_INFINITY),
    (Resource::RLIMIT_AS, RLIM_INFINITY, RLIM_INFINITY),
    (Resource::RLIMIT_DATA, RLIM_INFINITY, RLIM_INFINITY),
    (Resource::RLIMIT_NOFILE, 4096, 4096),
    (Resource::RLIMIT_STACK, 8 * MIB, 8 * MIB),
    (Resource::RLIMIT_CORE, 0, 0),
];

/// Sets up the helper's own process context: its own session, the caught
/// signals, fixed rlimits. Call it first thing in `volce-lab-host rpc`,
/// before any thread starts.
///
/// The nice value is not reset: nix has no safe `setpriority`, and the
/// crate forbids unsafe. A caller's `nice 19` only makes the helper slower;
/// it cannot split an action.
pub fn guard() -> Result<(), Refusal> {
    // Our own session: no controlling terminal, so nothing typed on the
    // caller's terminal (^C, ^Z, a hangup) is delivered to us by the
    // kernel. EPERM means we already lead a process group (our parent made
    // us one): the caught signals below still hold, so we go on.
    match nix::unistd::setsid() {
        Ok(_) | Err(Errno::EPERM) => {}
        Err(_) => {
            return Err(Refusal::new(Code::StateUnavailable, "The helper cannot start its own session."));
        }
    }
    catch(&CAUGHT).map_err(|_| Refusal::new(Code::StateUnavailable, "The helper cannot catch signals."))?;
    for (resource, soft, hard) in LIMITS {
        // Raising a hard limit needs CAP_SYS_RESOURCE, which root has on a
        // normal server (not in every container). Without it, a caller's
        // lower hard limit stays: then refuse before anything is read or
        // changed, rather than run with a limit that can cut a write.
        setrlimit(resource, soft, hard).map_err(|_| {
            Refusal::new(
                Code::StateUnavailable,
                format!(
                    "The helper was started with a {} limit it cannot lift (ulimit before sudo?); \
                     nothing was done.",
                    limit_name(resource)
                ),
            )
        })?;
    }
    Ok(())
}

/// How a refusal names a limit of [`LIMITS`].
pub fn limit_name(resource: Resource) -> &'static str {
    match resource {
        Resource::RLIMIT_FSIZE => "file size",
        Resource::RLIMIT_CPU => "CPU time",
        Resource::RLIMIT_AS => "address space",
        Resource::RLIMIT_DATA => "data size",
        Resource::RLIMIT_NOFILE => "open files",
        Resource::RLIMIT_STACK => "stack size",
        Resource::RLIMIT_CORE => "core file size",
        _ => "resource",
    }
}

/// Installs a do-nothing handler for each signal, for the rest of the
/// process's life (tokio never unregisters it; dropping the runtime and the
/// streams leaves it in place). Syscalls a signal interrupts return EINTR,
/// which the readers here, std and SQLite retry.
pub fn catch(signals: &[Signal]) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let _context = runtime.enter();
    for signal in signals {
        drop(tokio::signal::unix::signal(tokio::signal::unix::SignalKind::from_raw(*signal as i32))?);
    }
    Ok(())
}

/// The bit mask `/proc/PID/status` prints as `SigBlk` for a set of signals:
/// what the tests read back to see which signals the guard blocks.
#[doc(hidden)]
pub fn proc_mask_for_tests(signals: &[Signal]) -> u64 {
    signals.iter().fold(0, |mask, signal| mask | 1 << (*signal as i32 - 1))
}

/// One of the [`RPC_SLOTS`]; held until dropped or the process ends.
#[derive(Debug)]
pub struct Slot {
    _lock: Flock<File>,
    pub index: usize,
}

/// Takes a free rpc slot, or refuses with `busy` at once (no waiting: a
/// waiting helper is exactly what the bound is against).
pub fn take_slot(paths: &HostPaths) -> Result<Slot, Refusal> {
    paths::prepare_state(paths)?;
    let dir = paths::open_dir(&paths.state_dir, paths.owner_uid)?;
    for index in 0..RPC_SLOTS {
        let name = format!("rpc-slot-{index}");
        let fd = openat(
            &dir,
            name.as_str(),
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|_| slot_unusable(paths, &name))?;
        let file = File::from(fd);
        check_slot_file(&file, paths.owner_uid).map_err(|()| slot_unusable(paths, &name))?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(Slot { _lock: lock, index }),
            Err((_, Errno::EWOULDBLOCK)) => continue,
            Err(_) => return Err(slot_unusable(paths, &name)),
        }
    }
    Err(Refusal::new(
        Code::Busy,
        format!(
            "The server is already answering {RPC_SLOTS} volce-lab requests; nothing was done. \
             Tell the user and try again in a minute; do not retry in a loop."
        ),
    ))
}

fn check_slot_file(file: &File, owner: u32) -> Result<(), ()> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = file.metadata().map_err(|_| ())?;
    (meta.is_file() && meta.uid() == owner && meta.mode() & 0o022 == 0).then_some(()).ok_or(())
}

fn slot_unusable(paths: &HostPaths, name: &str) -> Refusal {
    Refusal::new(
        Code::UnsafePath,
        format!("{} is not a usable slot file; refusing to use it.", paths.state_dir.join(name).display()),
    )
}

/// Reads from a file descriptor until an absolute deadline: each read first
/// polls for what is left of the time, and a read that would wait past it
/// fails with `TimedOut`. A caller that sends a byte now and then does not
/// stretch the deadline.
#[derive(Debug)]
pub struct DeadlineReader<R> {
    inner: R,
    deadline: Instant,
}

impl<R: Read + AsFd> DeadlineReader<R> {
    pub fn new(inner: R, within: Duration) -> DeadlineReader<R> {
        DeadlineReader { inner, deadline: Instant::now() + within }
    }
}

impl<R: Read + AsFd> Read for DeadlineReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(std::io::ErrorKind::TimedOut.into());
            }
            // Rounded up to a whole millisecond, so a sub-millisecond
            // remainder does not become a busy zero-timeout poll.
            let millis = left.as_millis().saturating_add(1).min(i32::MAX as u128);
            let timeout = PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX);
            let mut fds = [PollFd::new(self.inner.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, timeout) {
                Ok(0) => continue,
                // Readable, at end of file or hung up: the read says which.
                Ok(_) => return self.inner.read(buf),
                Err(Errno::EINTR) => continue,
                Err(errno) => return Err(errno.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn the_caught_signals_never_include_kill_stop_or_the_childs_own() {
        for never in [Signal::SIGKILL, Signal::SIGSTOP, Signal::SIGCHLD, Signal::SIGCONT] {
            assert!(!CAUGHT.contains(&never), "{never}");
        }
        // TERM is signal 15: bit 14 of SigCgt.
        assert_eq!(proc_mask_for_tests(&[Signal::SIGTERM]), 1 << 14);
    }

    #[test]
    fn the_limits_leave_no_write_size_or_cpu_cap_and_no_core() {
        let find = |wanted: Resource| LIMITS.iter().find(|(r, ..)| *r == wanted).map(|(_, s, h)| (*s, *h));
        assert_eq!(find(Resource::RLIMIT_FSIZE), Some((RLIM_INFINITY, RLIM_INFINITY)));
        assert_eq!(find(Resource::RLIMIT_CPU), Some((RLIM_INFINITY, RLIM_INFINITY)));
        assert_eq!(find(Resource::RLIMIT_AS), Some((RLIM_INFINITY, RLIM_INFINITY)));
        assert_eq!(find(Resource::RLIMIT_CORE), Some((0, 0)));
        let (soft, hard) = find(Resource::RLIMIT_NOFILE).unwrap();
        assert!(soft >= 1024 && soft == hard);
    }

    #[test]
    fn a_complete_request_is_read_and_a_silent_pipe_times_out() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(b"{}").unwrap();
        drop(writer);
        let mut text = String::new();
        DeadlineReader::new(reader, Duration::from_secs(5)).read_to_string(&mut text).unwrap();
        assert_eq!(text, "{}");

        // A writer that keeps the pipe open and sends nothing after a byte.
        let (reader, mut writer) = std::io::pipe().unwrap();
        writer.write_all(b"{").unwrap();
        let started = Instant::now();
        let mut bytes = Vec::new();
        let error =
            DeadlineReader::new(reader, Duration::from_millis(200)).read_to_end(&mut bytes).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(bytes, b"{");
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(200) && took < Duration::from_secs(2), "{took:?}");
        drop(writer);
    }

    /// A state directory of the test's own uid (no policy: slots need none).
    fn temp_paths() -> (tempfile::TempDir, HostPaths) {
        let root = tempfile::tempdir().unwrap();
        let paths = HostPaths {
            policy: root.path().join("policy.json"),
            state_dir: root.path().join("state"),
            owner_uid: nix::unistd::geteuid().as_raw(),
        };
        (root, paths)
    }

    #[test]
    fn slots_are_counted_and_a_full_house_answers_busy() {
        let (_root, paths) = temp_paths();
        let held: Vec<Slot> = (0..RPC_SLOTS).map(|_| take_slot(&paths).unwrap()).collect();
        let indexes: std::collections::BTreeSet<usize> = held.iter().map(|slot| slot.index).collect();
        assert_eq!(indexes.len(), RPC_SLOTS);
        let refusal = take_slot(&paths).unwrap_err();
        assert_eq!(refusal.code, Code::Busy);
        assert!(refusal.message.contains("do not retry in a loop"), "{}", refusal.message);
        drop(held);
        take_slot(&paths).unwrap();
    }

    #[test]
    fn a_symlinked_slot_file_is_refused() {
        let (root, paths) = temp_paths();
        paths::prepare_state(&paths).unwrap();
        std::os::unix::fs::symlink(root.path().join("elsewhere"), paths.state_dir.join("rpc-slot-0"))
            .unwrap();
        assert_eq!(take_slot(&paths).unwrap_err().code, Code::UnsafePath);
        assert!(!root.path().join("elsewhere").exists(), "nothing is created through the link");
    }

    /// Why the helper catches instead of blocking: std's spawn hands a
    /// blocked mask on to the child (seen on Rust 1.95: SigBlk of the child
    /// equal to ours). If this starts failing, std began to reset the mask.
    #[test]
    fn a_blocked_mask_would_reach_the_children() {
        std::thread::spawn(|| {
            // Only this thread's mask changes; the thread ends after.
            let set: nix::sys::signal::SigSet = [Signal::SIGUSR1].into_iter().collect();
            set.thread_block().unwrap();
            let spec = crate::exec::ProcessSpec::new("/bin/cat", ["/proc/self/status"]);
            let status = String::from_utf8(crate::exec::run_blocking(&spec).stdout).unwrap();
            assert_eq!(
                field(&status, "SigBlk") & proc_mask_for_tests(&[Signal::SIGUSR1]),
                proc_mask_for_tests(&[Signal::SIGUSR1])
            );
        })
        .join()
        .unwrap();
    }

    /// The docker children start with the default disposition of a signal
    /// the helper catches, and nothing blocked: a real child spawned
    /// through the runner reports its own SigCgt/SigIgn/SigBlk. SIGUSR2
    /// stands in for [`CAUGHT`] (same code path) so the test binary keeps
    /// its own TERM and INT.
    #[test]
    fn children_spawned_through_the_runner_do_not_inherit_a_caught_signal() {
        catch(&[Signal::SIGUSR2]).unwrap();
        let mine = std::fs::read_to_string("/proc/self/status").unwrap();
        let usr2 = proc_mask_for_tests(&[Signal::SIGUSR2]);
        assert_eq!(field(&mine, "SigCgt") & usr2, usr2, "{mine}");
        let spec = crate::exec::ProcessSpec::new("/bin/cat", ["/proc/self/status"]);
        let status = String::from_utf8(crate::exec::run_blocking(&spec).stdout).unwrap();
        assert_eq!(field(&status, "SigCgt") & usr2, 0, "{status}");
        assert_eq!(field(&status, "SigIgn") & usr2, 0, "{status}");
        assert_eq!(field(&status, "SigBlk") & usr2, 0, "{status}");
    }

    fn field(status: &str, name: &str) -> u64 {
        let line = status.lines().find(|line| line.starts_with(&format!("{name}:"))).unwrap();
        u64::from_str_radix(line[name.len() + 1..].trim(), 16).unwrap()
    }
}
