//! The one bounded process runner. Every process volce-lab starts, on the
//! workstation (ssh, sudo, hostname) or on the server as root (docker), goes
//! through [`run`]. Runs with whatever privilege its caller has.
//!
//! Invariants enforced here, for every caller:
//! - a fixed absolute program path and argv; no shell is ever involved on our side;
//! - the environment is cleared and replaced by the caller's explicit list;
//! - stdin is closed, or fed from a byte buffer written as is (no parsing, no quoting);
//! - the child leads its own process group, so a timeout or an output overflow
//!   kills everything it started, and we always reap it;
//! - stdout is kept up to a limit, stderr is only counted: raw stderr never
//!   leaves this module, except the last [`STDERR_TAIL`] bytes that
//!   [`run_with_stderr_tail`] hands over in a [`StderrTail`], which cannot be
//!   serialized or printed (for classifying ssh's own failure on the
//!   workstation, never for passing it on);
//! - the caller gets an [`Execution`] record of facts, never a guess.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};

/// How a run ended, as one closed set. Named by serde and, for the
/// published schema's list, by strum; a test holds the two equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum ExecutionStatus {
    Ok,
    NonzeroExit,
    Timeout,
    OutputLimit,
    Signaled,
    LaunchFailed,
    /// ssh exited 255: either ssh itself failed or the remote command exited
    /// 255. Nothing tells the two apart, so it is its own ambiguous status.
    #[serde(rename = "ssh_or_remote_255")]
    #[strum(serialize = "ssh_or_remote_255")]
    SshOrRemote255,
}

impl ExecutionStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Whether we know how the process ended. Named like [`ExecutionStatus`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Completion {
    /// We reaped an exit we understand (or the program never started).
    Confirmed,
    /// We killed it, or the far side's outcome cannot be known. Never retry
    /// such a run blindly: inspect the target first.
    Unconfirmed,
}

impl Completion {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What kind of process this is, which changes what an exit can prove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// The process does the work itself.
    Local,
    /// The process is an ssh client: exit 255 and signals say nothing certain
    /// about the remote command.
    Ssh,
}

/// The structured facts of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Execution {
    pub execution_status: ExecutionStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub output_truncated: bool,
    pub duration_ms: u64,
    pub completion: Completion,
}

impl Execution {
    /// The record of a run that never started (also used for runs we refused
    /// to start, and for demo results that simulate a clean run).
    pub fn not_started(status: ExecutionStatus) -> Execution {
        Execution {
            execution_status: status,
            exit_code: None,
            signal: None,
            timed_out: false,
            output_truncated: false,
            duration_ms: 0,
            completion: Completion::Confirmed,
        }
    }
}

/// One process to run.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub stdin: Option<Vec<u8>>,
    pub stdout_limit: usize,
    pub stderr_limit: usize,
    pub timeout: Duration,
    pub transport: Transport,
    /// The child's stderr goes into the stdout pipe (one pipe, the order the
    /// child wrote in, counted against `stdout_limit`). Only for a program
    /// whose stderr is data rather than its own diagnostics: `docker logs`,
    /// which prints the container's stderr stream there.
    pub stderr_into_stdout: bool,
    /// Sees each chunk of stdout as it arrives (within `stdout_limit`), for
    /// a caller that reports progress before the run ends. It only watches:
    /// the outcome is the same with or without it.
    pub stdout_tap: Option<StdoutTap>,
}

/// What a [`StdoutTap`] calls with each chunk.
pub type TapFn = dyn Fn(&[u8]) + Send + Sync;

/// A watcher of a run's stdout, see [`ProcessSpec::stdout_tap`].
#[derive(Clone)]
pub struct StdoutTap(pub std::sync::Arc<TapFn>);

impl std::fmt::Debug for StdoutTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StdoutTap")
    }
}

/// The output limit for read-only checks.
pub const CHECK_OUTPUT_LIMIT: usize = 8 * 1024;

/// A minimal environment for the programs we run: a fixed PATH (used only by
/// the program itself, we always name ours absolutely) and the C locale, so
/// output is parseable and never localized.
pub fn minimal_env() -> Vec<(OsString, OsString)> {
    vec![
        ("PATH".into(), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()),
        ("LC_ALL".into(), "C".into()),
    ]
}

impl ProcessSpec {
    /// A spec with the minimal environment, no stdin, check-sized limits and
    /// a 12 s timeout; adjust the public fields from there.
    pub fn new(program: impl Into<PathBuf>, args: impl IntoIterator<Item = impl Into<OsString>>) -> Self {
        ProcessSpec {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: minimal_env(),
            stdin: None,
            stdout_limit: CHECK_OUTPUT_LIMIT,
            stderr_limit: CHECK_OUTPUT_LIMIT,
            timeout: Duration::from_secs(12),
            transport: Transport::Local,
            stderr_into_stdout: false,
            stdout_tap: None,
        }
    }
}

/// The record plus what the caller may see of the output.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub execution: Execution,
    /// At most `stdout_limit` bytes; partial when the limit or the timeout hit.
    pub stdout: Vec<u8>,
    /// How many stderr bytes arrived. The bytes themselves are dropped.
    pub stderr_len: u64,
}

impl Outcome {
    fn launch_failed() -> Outcome {
        Outcome {
            execution: Execution::not_started(ExecutionStatus::LaunchFailed),
            stdout: Vec::new(),
            stderr_len: 0,
        }
    }
}

/// How many bytes of stderr [`run_with_stderr_tail`] keeps: the end, where
/// ssh writes why it gave up.
pub const STDERR_TAIL: usize = 2048;

/// The last bytes of a run's stderr. Neither `Serialize` nor `Display`, and
/// its `Debug` shows only the length: a caller can match it against fixed
/// phrases, but it cannot end up in a result, an audit line or a log.
pub struct StderrTail(Vec<u8>);

impl StderrTail {
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for StderrTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StderrTail({} bytes)", self.0.len())
    }
}

/// Kills the whole process group when dropped, unless disarmed. This is what
/// makes cancellation safe: if the future running [`run`] is dropped (an MCP
/// client cancelled the call), the group dies with it.
struct GroupGuard {
    pgid: Option<Pid>,
}

impl GroupGuard {
    fn kill(&self) {
        if let Some(pgid) = self.pgid {
            // ESRCH (group already gone) is the normal case after a clean exit.
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

#[derive(Debug)]
struct Overflow;

/// What [`read_bounded`] keeps of a pipe.
#[derive(Clone, Copy)]
enum Keep {
    /// The first `limit` bytes.
    Head,
    /// The last this many bytes.
    Tail(usize),
}

/// Reads a pipe to its end, keeping what `keep` says; returns `Overflow` as
/// soon as more than `limit` bytes arrive.
async fn read_bounded(
    pipe: Option<impl AsyncRead + Unpin>,
    limit: usize,
    keep: Keep,
    tap: Option<&StdoutTap>,
) -> Result<(Vec<u8>, u64), Overflow> {
    let Some(mut pipe) = pipe else { return Ok((Vec::new(), 0)) };
    let mut kept = Vec::new();
    let mut total: u64 = 0;
    let mut buffer = [0u8; 8192];
    loop {
        let n = match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => return Ok((kept, total)),
            Ok(n) => n,
        };
        total += n as u64;
        match keep {
            Keep::Head => {
                let room = limit.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
                if let Some(tap) = tap {
                    (tap.0)(&buffer[..n.min(room)]);
                }
            }
            Keep::Tail(0) => {}
            Keep::Tail(tail) => {
                kept.extend_from_slice(&buffer[..n]);
                let extra = kept.len().saturating_sub(tail);
                kept.drain(..extra);
            }
        }
        if total > limit as u64 {
            return Err(Overflow);
        }
    }
}

/// Runs one process to completion, timeout or overflow, and reports facts.
pub async fn run(spec: &ProcessSpec) -> Outcome {
    run_keeping(spec, 0).await.0
}

/// [`run`], also keeping the last [`STDERR_TAIL`] bytes of stderr of a run
/// that exited (none after a timeout or an overflow).
pub async fn run_with_stderr_tail(spec: &ProcessSpec) -> (Outcome, StderrTail) {
    let (outcome, tail) = run_keeping(spec, STDERR_TAIL).await;
    (outcome, StderrTail(tail))
}

async fn run_keeping(spec: &ProcessSpec, stderr_tail: usize) -> (Outcome, Vec<u8>) {
    if !spec.program.is_absolute() {
        return (Outcome::launch_failed(), Vec::new());
    }
    let mut command = tokio::process::Command::new(&spec.program);
    command
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir("/")
        .stdin(if spec.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .kill_on_drop(true);
    // One pipe for both streams when asked; its write ends live only in
    // the child once `command` is dropped below, so the read ends with it.
    let merged = if spec.stderr_into_stdout {
        let Ok((reader, writer)) = std::io::pipe() else { return (Outcome::launch_failed(), Vec::new()) };
        let Ok(second) = writer.try_clone() else { return (Outcome::launch_failed(), Vec::new()) };
        command.stdout(writer).stderr(second);
        Some(reader)
    } else {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        None
    };
    // A group of its own: killing it reaches everything the child started.
    command.as_std_mut().process_group(0);

    let started = Instant::now();
    let spawned = command.spawn();
    drop(command);
    let mut child = match spawned {
        Ok(child) => child,
        Err(_) => return (Outcome::launch_failed(), Vec::new()),
    };
    let guard = GroupGuard { pgid: child.id().map(|id| Pid::from_raw(id as i32)) };

    let stdin = child.stdin.take();
    let stdout: Option<Box<dyn AsyncRead + Unpin + Send>> = match merged {
        Some(reader) => match tokio::net::unix::pipe::Receiver::from_owned_fd(reader.into()) {
            Ok(receiver) => Some(Box::new(receiver)),
            // Nothing readable: the run reports no output rather than a guess.
            Err(_) => None,
        },
        None => child.stdout.take().map(|out| Box::new(out) as Box<dyn AsyncRead + Unpin + Send>),
    };
    let stderr = child.stderr.take();
    let input = spec.stdin.clone().unwrap_or_default();
    let feed = async move {
        if let Some(mut stdin) = stdin {
            // A child that exits without reading its input is not our failure
            // to report: its exit status says what happened.
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        }
        Ok::<(), Overflow>(())
    };

    let deadline = tokio::time::Instant::from_std(started + spec.timeout);
    let work = async {
        let (_, (out, _), (err, err_len)) = tokio::try_join!(
            feed,
            read_bounded(stdout, spec.stdout_limit, Keep::Head, spec.stdout_tap.as_ref()),
            read_bounded(stderr, spec.stderr_limit, Keep::Tail(stderr_tail), None),
        )?;
        let status = child.wait().await;
        Ok::<_, Overflow>((out, err, err_len, status))
    };

    enum End {
        Exited(Vec<u8>, u64, std::io::Result<std::process::ExitStatus>),
        Overflow,
        Timeout,
    }
    let mut tail = Vec::new();
    let end = match tokio::time::timeout_at(deadline, work).await {
        Ok(Ok((out, err, err_len, status))) => {
            tail = err;
            End::Exited(out, err_len, status)
        }
        Ok(Err(Overflow)) => End::Overflow,
        Err(_) => End::Timeout,
    };

    // Whatever happened, nothing of this run may outlive it.
    guard.kill();
    // After an overflow or a timeout the caller gets no output at all: a
    // partial answer is too easy to mistake for a whole one.
    let (stdout, stderr_len, status, killed) = match end {
        End::Exited(out, err_len, status) => (out, err_len, status.ok(), None),
        End::Overflow => (Vec::new(), 0, child.wait().await.ok(), Some(ExecutionStatus::OutputLimit)),
        End::Timeout => (Vec::new(), 0, child.wait().await.ok(), Some(ExecutionStatus::Timeout)),
    };
    let duration_ms = started.elapsed().as_millis() as u64;
    let exit_code = status.and_then(|s| s.code());
    let signal = status.and_then(|s| s.signal());

    let (execution_status, completion) = match killed {
        Some(status) => (status, Completion::Unconfirmed),
        None => match (exit_code, signal, spec.transport) {
            (Some(0), _, _) => (ExecutionStatus::Ok, Completion::Confirmed),
            (Some(255), _, Transport::Ssh) => (ExecutionStatus::SshOrRemote255, Completion::Unconfirmed),
            (Some(_), _, _) => (ExecutionStatus::NonzeroExit, Completion::Confirmed),
            (None, Some(_), Transport::Local) => (ExecutionStatus::Signaled, Completion::Confirmed),
            // A killed ssh client proves nothing about the remote command.
            (None, Some(_), Transport::Ssh) => (ExecutionStatus::Signaled, Completion::Unconfirmed),
            (None, None, _) => (ExecutionStatus::Signaled, Completion::Unconfirmed),
        },
    };
    let execution = Execution {
        execution_status,
        exit_code,
        signal,
        timed_out: killed == Some(ExecutionStatus::Timeout),
        output_truncated: killed == Some(ExecutionStatus::OutputLimit),
        duration_ms,
        completion,
    };
    (Outcome { execution, stdout, stderr_len }, tail)
}

/// [`run`] for synchronous callers (the host helper), on a private runtime.
pub fn run_blocking(spec: &ProcessSpec) -> Outcome {
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(run(spec)),
        Err(_) => Outcome::launch_failed(),
    }
}

mod outcome;
pub use outcome::ProcessOutcome;

#[cfg(test)]
mod tests;
