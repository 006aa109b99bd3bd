//! The helper's own process context: what `volce-lab-host rpc` sets up
//! before it reads its request, so that nothing the caller's account did to
//! the process it started (signals relayed through sudo, `ulimit`, an open
//! stdin, many helpers at once) can cut an action between its claim and
//! its record. Runs as root, in the helper only; no unsafe, no shell.
//!
//! Invariants enforced here:
//! - every signal the caller can have sudo relay, and every other one a
//!   handler can take (USR1, USR2, WINCH, the real-time range...), is
//!   caught for the whole rpc process by a handler that does nothing
//!   ([`caught`]: [`CAUGHT`] and [`realtime`], through tokio's signal
//!   registry, which never unregisters its handler): a relayed TERM or USR1
//!   neither ends the helper nor a TSTP stops it, from before the request
//!   is read to after the reply. They are caught, not blocked or ignored,
//!   because the children must not inherit our choice: a blocked mask and
//!   an ignored disposition both survive fork and exec (std's spawn does
//!   not reset the mask: a test in this file pins it), while a caught
//!   signal is reset to its default at exec. So docker still dies on its
//!   own TERM, and the runner's timeout still kills it. PIPE is ignored by
//!   the Rust runtime, and std resets it for children. KILL and STOP remain,
//!   which no process can refuse, and the few [`CAUGHT`] leaves out, each
//!   for its reason. ALRM is caught too, but sudo answers an ALRM sent to
//!   it by ending the command's process group itself (HUP, TERM, then
//!   KILL), which no handler survives;
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

/// The standard signals the helper catches: every one that could end or
/// stop it and that the caller can have sent to it (sudo relays what it
/// receives; the real-time ones are [`realtime`]). Left out, each on
/// purpose:
/// - KILL and STOP, which no process can catch;
/// - CHLD, which the runner's child handling owns (its default is to
///   ignore it, so it can neither end nor stop the helper);
/// - CONT, whose default only continues a stopped process;
/// - PIPE, which the Rust runtime already ignores (a write to a closed
///   pipe fails with EPIPE instead), and std resets for children;
/// - SEGV, BUS, ILL and FPE: raised by a fault in our own code, where a
///   handler that returns re-runs the faulting instruction forever; tokio
///   refuses SEGV, ILL and FPE for that reason. sudo does not relay them.
///
/// SYS is caught too: a seccomp trap returns ENOSYS to the syscall's
/// caller once the handler returns.
pub const CAUGHT: [Signal; 22] = [
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTRAP,
    Signal::SIGABRT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGALRM,
    Signal::SIGTERM,
    Signal::SIGSTKFLT,
    Signal::SIGTSTP,
    Signal::SIGTTIN,
    Signal::SIGTTOU,
    Signal::SIGURG,
    Signal::SIGXCPU,
    Signal::SIGXFSZ,
    Signal::SIGVTALRM,
    Signal::SIGPROF,
    Signal::SIGWINCH,
    Signal::SIGIO,
    Signal::SIGPWR,
    Signal::SIGSYS,
];

/// The real-time signals the helper catches: SIGRTMIN to one below
/// SIGRTMAX, as the C library counts them (it keeps the first two or three
/// above 31 for its own threads, and those must keep their handlers).
/// SIGRTMAX itself is beyond tokio's registry (its table holds signals
/// below SIGRTMAX), and there is no safe way to install a handler without
/// it, so it keeps its default; sudo does not relay real-time signals (a
/// real-time signal sent to sudo ends sudo itself, not the command: the
/// test `sudo_does_not_relay_a_real_time_signal` in tests/real pins it).
pub fn realtime() -> std::ops::Range<i32> {
    nix::libc::SIGRTMIN()..nix::libc::SIGRTMAX()
}

/// Every signal number [`guard`] catches: [`CAUGHT`], then [`realtime`].
pub fn caught() -> Vec<i32> {
    CAUGHT.iter().map(|signal| *signal as i32).chain(realtime()).collect()
}

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
    catch(&caught()).map_err(|_| Refusal::new(Code::StateUnavailable, "The helper cannot catch signals."))?;
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
pub fn catch(signals: &[i32]) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let _context = runtime.enter();
    for signal in signals {
        drop(tokio::signal::unix::signal(tokio::signal::unix::SignalKind::from_raw(*signal))?);
    }
    Ok(())
}

/// The bit mask `/proc/PID/status` prints as `SigBlk` for a set of signals:
/// what the tests read back to see which signals the guard blocks.
#[doc(hidden)]
#[cfg(any(test, feature = "test-hatches"))]
pub fn proc_mask_for_tests(signals: &[i32]) -> u64 {
    signals.iter().fold(0, |mask, signal| mask | 1 << (*signal - 1))
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
mod tests;
