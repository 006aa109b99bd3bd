//! The one bounded process runner. Every process volce-lab starts, on the
//! workstation (ssh, sudo, hostname) or on the server as root (docker), goes
//! through [`run`]. Runs with whatever privilege its caller has.
//!
//! Invariants enforced here, for every caller:
//! - a fixed absolute program path and argv; no shell is ever involved on our side;
//! - the environment is cleared and replaced by the caller's explicit list;
//! - stdin is closed, or fed from a byte buffer written as is (no parsing, no quoting),
//!   or is the read end of a pipe whose write end is another run's stdout
//!   ([`run_piped`]: a dump streamed into a backup, never through us);
//! - the child leads its own process group, so a timeout or an output overflow
//!   kills everything it started, and we always reap it;
//! - stdout is kept up to a limit, stderr is only counted: raw stderr never
//!   leaves this module, except the last [`STDERR_TAIL`] bytes that
//!   [`run_with_stderr_tail`] hands over in a [`StderrTail`], which cannot be
//!   serialized or printed (for classifying ssh's own failure on the
//!   workstation, never for passing it on), and the stderr of a run whose
//!   spec says it is data ([`ProcessSpec::stderr_is_data`]: `docker logs`,
//!   where it is the container's stream, made safe by `crate::logs` before
//!   anything of it leaves the helper);
//! - the caller gets an [`Execution`] record of facts, never a guess.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

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
    /// The child's stderr is data, not its own diagnostics (`docker logs`,
    /// which prints the container's stderr stream there): kept whole in
    /// [`ProcessOutput::stderr`], within `stderr_limit` (more fails the run as
    /// stdout does). Its own pipe, so the caller knows which stream each
    /// byte came on.
    pub stderr_is_data: bool,
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
            stderr_is_data: false,
            stdout_tap: None,
        }
    }
}

/// What one run of a [`ProcessSpec`] gave: the record plus what the caller
/// may see of the output.
#[derive(Debug, Clone)]
pub struct ProcessOutput {
    pub execution: Execution,
    /// At most `stdout_limit` bytes; partial when the limit or the timeout hit.
    pub stdout: Vec<u8>,
    /// How many stderr bytes arrived. The bytes themselves are dropped,
    /// unless the spec said stderr is data.
    pub stderr_len: u64,
    /// Only with [`ProcessSpec::stderr_is_data`]: the whole stderr of a run
    /// that ended by itself (empty after a timeout or an overflow).
    pub stderr: Vec<u8>,
}

impl ProcessOutput {
    pub(crate) fn launch_failed() -> ProcessOutput {
        ProcessOutput {
            execution: Execution::not_started(ExecutionStatus::LaunchFailed),
            stdout: Vec::new(),
            stderr_len: 0,
            stderr: Vec::new(),
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

/// Runs one process to completion, timeout or overflow, and reports facts.
pub async fn run(spec: &ProcessSpec) -> ProcessOutput {
    run_keeping(spec, 0).await.0
}

/// [`run`], also keeping the last [`STDERR_TAIL`] bytes of stderr of a run
/// that exited (none after a timeout or an overflow).
pub async fn run_with_stderr_tail(spec: &ProcessSpec) -> (ProcessOutput, StderrTail) {
    run_keeping(spec, STDERR_TAIL).await
}

async fn run_keeping(spec: &ProcessSpec, stderr_tail: usize) -> (ProcessOutput, StderrTail) {
    let stdin = if spec.stdin.is_some() { Stdio::piped() } else { Stdio::null() };
    let started = Instant::now();
    let Some((streams, mut ending)) = spawn(spec, stdin, Stdio::piped()) else {
        return (ProcessOutput::launch_failed(), StderrTail(Vec::new()));
    };
    supervised(spec, started, streams, &mut ending, stderr_tail).await
}

/// Starts `spec`'s program with `stdin` and `stdout` as given (our pipes,
/// or one end of a pipe to another run), stderr to us, in a process group
/// of its own; `None` when it could not start.
fn spawn(spec: &ProcessSpec, stdin: Stdio, stdout: Stdio) -> Option<(supervise::Streams, ChildEnding)> {
    if !spec.program.is_absolute() {
        return None;
    }
    let mut command = tokio::process::Command::new(&spec.program);
    command
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir("/")
        .stdin(stdin)
        .kill_on_drop(true);
    command.stdout(stdout).stderr(Stdio::piped());
    // A group of its own: killing it reaches everything the child started.
    command.as_std_mut().process_group(0);
    let spawned = command.spawn();
    // Our copies of a pipe's ends go with the command, so the other run
    // sees the end of input when this one's stdout closes.
    drop(command);
    let mut child = spawned.ok()?;
    let guard = GroupGuard { pgid: child.id().map(|id| Pid::from_raw(id as i32)) };
    let stdin = child.stdin.take().map(|pipe| Box::new(pipe) as supervise::Writer);
    let stdout = child.stdout.take().map(|out| Box::new(out) as supervise::Reader);
    let stderr = child.stderr.take().map(|err| Box::new(err) as supervise::Reader);
    Some((supervise::Streams { stdin, stdout, stderr }, ChildEnding { child, guard }))
}

/// Watches a started run to its end ([`supervise::supervise`]), keeping
/// its stderr whole when the spec says it is data.
async fn supervised(
    spec: &ProcessSpec,
    started: Instant,
    streams: supervise::Streams,
    ending: &mut ChildEnding,
    stderr_tail: usize,
) -> (ProcessOutput, StderrTail) {
    if !spec.stderr_is_data {
        return supervise::supervise(spec, started, streams, ending, stderr_tail).await;
    }
    // Keeping the last `stderr_limit` bytes of a stream that may not pass
    // `stderr_limit` keeps all of it.
    let (mut outcome, tail) = supervise::supervise(spec, started, streams, ending, spec.stderr_limit).await;
    outcome.stderr = tail.0;
    (outcome, StderrTail(Vec::new()))
}

/// Runs `producer` with its stdout going straight into `consumer`'s stdin
/// through a pipe (no shell; the bytes never pass through us, so neither
/// limit nor memory bounds how many there are): both at once, each under
/// its own spec's deadline and stderr limit (the producer's `stdin` and
/// `stdout_limit` and the consumer's `stdin` are not used). A consumer
/// that ends early ends the producer's writes (`EPIPE`, or `SIGPIPE`); a
/// producer that ends early, however, is only the end of the consumer's
/// input, so the caller reads both outcomes before it trusts what the
/// consumer made of it.
pub async fn run_piped(producer: &ProcessSpec, consumer: &ProcessSpec) -> (ProcessOutput, ProcessOutput) {
    let failed = || (ProcessOutput::launch_failed(), ProcessOutput::launch_failed());
    // Close-on-exec: only the two runs get an end, each as its stdin or stdout.
    let Ok((read, write)) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) else { return failed() };
    let started = Instant::now();
    let Some((out_streams, mut out_ending)) = spawn(producer, Stdio::null(), Stdio::from(write)) else {
        return failed();
    };
    let Some((in_streams, mut in_ending)) = spawn(consumer, Stdio::from(read), Stdio::piped()) else {
        // The producer started and is stopped unread: what it did is unknown.
        use supervise::Ending as _;
        out_ending.stop();
        let _ = out_ending.reap().await;
        let mut stopped = ProcessOutput::launch_failed();
        stopped.execution.execution_status = ExecutionStatus::Signaled;
        stopped.execution.completion = Completion::Unconfirmed;
        return (stopped, ProcessOutput::launch_failed());
    };
    let ((out, _), (into, _)) = tokio::join!(
        supervised(producer, started, out_streams, &mut out_ending, 0),
        supervised(consumer, started, in_streams, &mut in_ending, 0),
    );
    (out, into)
}

/// [`run_piped`] for synchronous callers (the host helper), on a private runtime.
pub fn run_piped_blocking(producer: &ProcessSpec, consumer: &ProcessSpec) -> (ProcessOutput, ProcessOutput) {
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(run_piped(producer, consumer)),
        Err(_) => (ProcessOutput::launch_failed(), ProcessOutput::launch_failed()),
    }
}

/// A child process as the runner's [`supervise::Ending`]: it ends when it
/// is reaped; stopping it kills its whole group.
struct ChildEnding {
    child: tokio::process::Child,
    guard: GroupGuard,
}

impl supervise::Ending for ChildEnding {
    async fn wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.wait().await.ok()
    }

    fn stop(&mut self) {
        self.guard.kill();
    }

    async fn reap(&mut self) -> Option<std::process::ExitStatus> {
        self.child.wait().await.ok()
    }
}

/// [`run`] for synchronous callers (the host helper), on a private runtime.
pub fn run_blocking(spec: &ProcessSpec) -> ProcessOutput {
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(run(spec)),
        Err(_) => ProcessOutput::launch_failed(),
    }
}

mod outcome;
pub mod supervise;
pub use outcome::ProcessOutcome;

#[cfg(test)]
mod tests;
