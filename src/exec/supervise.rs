//! The part of the runner that watches a run once it started: feeds its
//! stdin, reads its stdout and stderr within their limits, enforces the
//! deadline, stops it on a timeout or an overflow, and turns how it ended
//! into an [`Execution`]. Shared by the child processes of [`super::run`]
//! and by the sessions an ssh master runs for us (`inspect::mux_client`),
//! so both report the same facts by the same rules. Runs with whatever
//! privilege its caller has.

use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

use super::{
    Completion, Execution, ExecutionStatus, ProcessOutput, ProcessSpec, StderrTail, StdoutTap, Transport,
};

/// Our end of a run's stdin.
pub type Writer = Box<dyn AsyncWrite + Unpin + Send>;
/// Our end of a run's stdout or stderr.
pub type Reader = Box<dyn AsyncRead + Unpin + Send>;

/// Our ends of the three streams of a started run (`None`: not connected).
pub struct Streams {
    pub stdin: Option<Writer>,
    pub stdout: Option<Reader>,
    pub stderr: Option<Reader>,
}

/// How the runner learns the end of what it started, and stops it.
pub trait Ending: Send {
    /// Waits for the run's end once its output streams closed: its exit
    /// status as a wait status (`None`: nothing known).
    fn wait(&mut self) -> impl Future<Output = Option<ExitStatus>> + Send;
    /// Stops whatever is left of the run, at once. Called after every run,
    /// clean or not: nothing of a run may outlive it.
    fn stop(&mut self);
    /// What is known of the end after [`Ending::stop`] cut a run short.
    fn reap(&mut self) -> impl Future<Output = Option<ExitStatus>> + Send;
}

/// The wait status of a program that exited with `code` (0-255).
pub fn exited(code: u8) -> ExitStatus {
    ExitStatus::from_raw(i32::from(code) << 8)
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

/// Watches a run that started at `started` until it ends, overflows or
/// passes `spec.timeout`, with `spec`'s limits, stdin and tap; keeps the
/// last `stderr_tail` bytes of stderr of a run that ended by itself.
pub async fn supervise(
    spec: &ProcessSpec,
    started: Instant,
    streams: Streams,
    ending: &mut impl Ending,
    stderr_tail: usize,
) -> (ProcessOutput, StderrTail) {
    let Streams { stdin, stdout, stderr } = streams;
    let input = spec.stdin.clone().unwrap_or_default();
    let feed = async move {
        if let Some(mut stdin) = stdin {
            // A run that ends without reading its input is not our failure
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
        let status = ending.wait().await;
        Ok::<_, Overflow>((out, err, err_len, status))
    };

    enum End {
        Exited(Vec<u8>, u64, Option<ExitStatus>),
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
    ending.stop();
    // After an overflow or a timeout the caller gets no output at all: a
    // partial answer is too easy to mistake for a whole one.
    let (stdout, stderr_len, status, killed) = match end {
        End::Exited(out, err_len, status) => (out, err_len, status, None),
        End::Overflow => (Vec::new(), 0, ending.reap().await, Some(ExecutionStatus::OutputLimit)),
        End::Timeout => (Vec::new(), 0, ending.reap().await, Some(ExecutionStatus::Timeout)),
    };
    let duration_ms = started.elapsed().as_millis() as u64;
    let exit_code = status.and_then(|s| s.code());
    let signal = status.and_then(|s| s.signal());

    let (execution_status, completion) = classify(killed, exit_code, signal, spec.transport);
    let execution = Execution {
        execution_status,
        exit_code,
        signal,
        timed_out: killed == Some(ExecutionStatus::Timeout),
        output_truncated: killed == Some(ExecutionStatus::OutputLimit),
        duration_ms,
        completion,
    };
    (ProcessOutput { execution, stdout, stderr_len, stderr: Vec::new() }, StderrTail(tail))
}

/// What a run's end says: the status we killed it with (`killed`), or else
/// its exit code or signal, read for the kind of process it was; and
/// whether that confirms what happened to the command.
fn classify(
    killed: Option<ExecutionStatus>,
    exit_code: Option<i32>,
    signal: Option<i32>,
    transport: Transport,
) -> (ExecutionStatus, Completion) {
    match killed {
        Some(status) => (status, Completion::Unconfirmed),
        None => match (exit_code, signal, transport) {
            (Some(0), _, _) => (ExecutionStatus::Ok, Completion::Confirmed),
            (Some(255), _, Transport::Ssh) => (ExecutionStatus::SshOrRemote255, Completion::Unconfirmed),
            (Some(_), _, _) => (ExecutionStatus::NonzeroExit, Completion::Confirmed),
            (None, Some(_), Transport::Local) => (ExecutionStatus::Signaled, Completion::Confirmed),
            // A killed ssh client proves nothing about the remote command.
            (None, Some(_), Transport::Ssh) => (ExecutionStatus::Signaled, Completion::Unconfirmed),
            (None, None, _) => (ExecutionStatus::Signaled, Completion::Unconfirmed),
        },
    }
}
