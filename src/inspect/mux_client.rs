//! A passenger client of OpenSSH's multiplexing protocol (PROTOCOL.mux),
//! spoken in-process over an ssh master's control socket, so a check over
//! an open master starts no `ssh` client process. Runs unprivileged on the
//! workstation. The master stays OpenSSH, started by the `ssh` client with
//! every hardening option ([`super::ssh_mux`]): ssh_config, known_hosts,
//! agents and ProxyJump keep their meaning, because this client never
//! connects anywhere but to that socket.
//!
//! Invariants enforced here:
//! - a session asks for nothing but its command: no tty, no X11 or agent
//!   forwarding, no subsystem, no escape character, no environment, no port
//!   forwarding (the same as the client's `-T`, `ForwardX11=no`,
//!   `ForwardAgent=no`, `ClearAllForwardings=yes`);
//! - its three streams are pipes of our own, passed to the master one per
//!   `sendmsg` with `SCM_RIGHTS` (as OpenSSH's own mux client does); our
//!   copies of the master's ends are closed at once, so the streams end
//!   when the master closes them;
//! - the run is watched by the runner's own supervision
//!   ([`crate::exec::supervise`]): the same limits, the same timeout, the
//!   same facts and the same classification as an ssh client process
//!   (exit 255, or a session the master ended without an exit message, is
//!   `ssh_or_remote_255`, unconfirmed: the master never reports a signal);
//! - [`Attempt::Declined`] only when the command cannot have run: no socket,
//!   no hello of version 4, the request or the descriptors not sent, or the
//!   master refusing the session. The caller then runs the `ssh` client.
//!   Once the descriptors are passed, whatever happens (a timeout, the
//!   master gone) is reported as it is, never retried;
//! - the handshake has its own short deadline inside the run's own
//!   timeout: a master that does not answer cannot make a check hang.

use std::io::{self, IoSlice};
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd};
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, Interest};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;

use crate::exec::supervise::{self, Ending, Streams};
use crate::exec::{ProcessOutput, ProcessSpec, STDERR_TAIL, StderrTail};

pub mod packet;
use packet::Message;

/// The longest the hello and the session request may take before we give
/// up on the master and run the `ssh` client instead (within the run's own
/// timeout). A master on this machine answers in well under a millisecond.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a session was not run in-process (the caller runs the `ssh` client).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Declined {
    #[error("no master listens on the control socket ({0:?})")]
    Connect(io::ErrorKind),
    #[error("the master did not answer the hello in time")]
    HandshakeTimeout,
    #[error("the master's hello is not one we understand: {0}")]
    Hello(packet::PacketError),
    #[error("the master speaks multiplexing protocol version {0}, not 4")]
    Version(u32),
    #[error("the master answered something else than a hello")]
    NoHello,
    #[error("the session request could not be sent ({0:?})")]
    Send(io::ErrorKind),
    #[error("the master refused the session")]
    Refused,
}

/// What became of one session.
#[derive(Debug)]
pub enum Attempt {
    /// The master ran it (or may have): the facts, as the runner reports them.
    Ran(ProcessOutput, StderrTail),
    /// Nothing ran; run the `ssh` client instead.
    Declined(Declined),
}

/// Request ids are only compared within one connection; distinct ones make
/// a confused reply easy to spot.
static REQUEST_ID: AtomicU32 = AtomicU32::new(1);

/// Runs `command` as one session of the master listening on `socket`, with
/// `spec`'s stdin, limits, timeout and tap. The caller has checked that the
/// socket lies in our private directory.
pub async fn run(socket: &Path, command: &str, spec: &ProcessSpec) -> Attempt {
    let started = Instant::now();
    let handshake = tokio::time::Instant::from_std(started + HANDSHAKE_TIMEOUT.min(spec.timeout));
    let request_id = REQUEST_ID.fetch_add(1, Ordering::Relaxed);
    let opened = tokio::time::timeout_at(handshake, open(socket, command, request_id)).await;
    let (stream, streams) = match opened {
        Ok(Ok(open)) => open,
        Ok(Err(declined)) => return Attempt::Declined(declined),
        Err(_) => return Attempt::Declined(Declined::HandshakeTimeout),
    };
    // From here on the master holds the descriptors and may run the command.
    let mut ending = Session { stream: Some(stream), request_id, session_id: None, refused: false };
    let (outcome, tail) = supervise::supervise(spec, started, streams, &mut ending, STDERR_TAIL).await;
    if ending.refused {
        // The master closed the descriptors without opening a channel.
        return Attempt::Declined(Declined::Refused);
    }
    Attempt::Ran(outcome, tail)
}

/// Connects, exchanges hellos, sends the session request and the three
/// descriptors: our ends of the streams, and the connection to wait on.
async fn open(socket: &Path, command: &str, request_id: u32) -> Result<(UnixStream, Streams), Declined> {
    let mut stream = UnixStream::connect(socket).await.map_err(|e| Declined::Connect(e.kind()))?;
    let send = |e: io::Error| Declined::Send(e.kind());
    stream.write_all(&packet::hello()).await.map_err(send)?;
    match read_packet(&mut stream).await {
        Ok(Message::Hello { version: packet::VERSION }) => {}
        Ok(Message::Hello { version }) => return Err(Declined::Version(version)),
        Ok(_) => return Err(Declined::NoHello),
        Err(PacketRead::Io(kind)) => return Err(Declined::Connect(kind)),
        Err(PacketRead::Bad(why)) => return Err(Declined::Hello(why)),
    }
    let (stdin_theirs, stdin_ours) = io::pipe().map_err(send)?;
    let (stdout_ours, stdout_theirs) = io::pipe().map_err(send)?;
    let (stderr_ours, stderr_theirs) = io::pipe().map_err(send)?;
    stream.write_all(&packet::new_session(request_id, command)).await.map_err(send)?;
    for fd in [stdin_theirs.as_fd(), stdout_theirs.as_fd(), stderr_theirs.as_fd()] {
        send_fd(&stream, fd).await.map_err(send)?;
    }
    // The master has its own copies now; ours would keep the streams open.
    drop((stdin_theirs, stdout_theirs, stderr_theirs));
    let stdin = pipe::Sender::from_owned_fd(stdin_ours.into()).map_err(send)?;
    let stdout = pipe::Receiver::from_owned_fd(stdout_ours.into()).map_err(send)?;
    let stderr = pipe::Receiver::from_owned_fd(stderr_ours.into()).map_err(send)?;
    let streams = Streams {
        stdin: Some(Box::new(stdin)),
        stdout: Some(Box::new(stdout)),
        stderr: Some(Box::new(stderr)),
    };
    Ok((stream, streams))
}

/// One descriptor, with the one byte of data it rides on (mux.c's
/// `mm_send_fd`).
async fn send_fd(stream: &UnixStream, fd: BorrowedFd<'_>) -> io::Result<()> {
    let fds = [fd.as_raw_fd()];
    let byte = [0u8];
    let sent = stream
        .async_io(Interest::WRITABLE, || {
            let data = [IoSlice::new(&byte)];
            let rights = [ControlMessage::ScmRights(&fds)];
            sendmsg::<()>(stream.as_raw_fd(), &data, &rights, MsgFlags::MSG_NOSIGNAL, None)
                .map_err(io::Error::from)
        })
        .await?;
    if sent != 1 {
        return Err(io::ErrorKind::WriteZero.into());
    }
    Ok(())
}

/// Why no packet could be read.
#[derive(Debug)]
enum PacketRead {
    Io(io::ErrorKind),
    Bad(packet::PacketError),
}

async fn read_packet(stream: &mut UnixStream) -> Result<Message, PacketRead> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).await.map_err(|e| PacketRead::Io(e.kind()))?;
    let length = packet::body_length(header).map_err(PacketRead::Bad)?;
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.map_err(|e| PacketRead::Io(e.kind()))?;
    packet::parse(&body).map_err(PacketRead::Bad)
}

/// The control connection of a passenger session, as the runner's
/// [`Ending`]: the session ends when the master closes the connection,
/// after its exit message (mux.c's client waits for both the same way).
struct Session {
    stream: Option<UnixStream>,
    request_id: u32,
    session_id: Option<u32>,
    /// The master refused the session: nothing ran.
    refused: bool,
}

impl Ending for Session {
    async fn wait(&mut self) -> Option<ExitStatus> {
        let stream = self.stream.as_mut()?;
        let mut exit_value = None;
        loop {
            match (read_packet(stream).await, self.session_id) {
                (Ok(Message::SessionOpened { request_id, session_id }), None)
                    if request_id == self.request_id =>
                {
                    self.session_id = Some(session_id);
                }
                (Ok(Message::Failure { request_id } | Message::PermissionDenied { request_id }), None)
                    if request_id == self.request_id =>
                {
                    self.refused = true;
                    return None;
                }
                (Ok(Message::TtyAllocFail { .. }), Some(_)) => {}
                (Ok(Message::ExitMessage { session_id, exit_value: value }), Some(ours))
                    if session_id == ours && exit_value.is_none() =>
                {
                    exit_value = Some(value);
                }
                // The connection closed (normally after the exit message),
                // or the master said something a session does not expect:
                // as OpenSSH's client, stop there.
                _ => break,
            }
        }
        // No exit message: the master ended the session without one (the
        // remote command was killed by a signal, or the connection broke),
        // which OpenSSH's client reports as 255.
        Some(supervise::exited(exit_value.map_or(255, |value| u8::try_from(value).unwrap_or(255))))
    }

    /// Closing the connection makes the master close the session's channel.
    fn stop(&mut self) {
        self.stream = None;
    }

    /// Nothing more is known of a session we cut short.
    async fn reap(&mut self) -> Option<ExitStatus> {
        None
    }
}

#[cfg(test)]
mod tests;
