//! The passenger client against a scripted stand-in master on a real unix
//! socket: the hello, the request, the three descriptors (received with
//! SCM_RIGHTS and used as the master uses them), and each way a session
//! can end. No ssh anywhere.

use super::*;
use std::io::{IoSliceMut, Read as _, Write as _};
use std::os::fd::RawFd;
use std::os::unix::net::UnixListener;

use nix::sys::socket::{ControlMessageOwned, recvmsg};

use crate::exec::{Completion, ExecutionStatus, Transport};

/// What the stand-in master does once it has the request.
#[derive(Clone)]
enum Script {
    /// Answers the hello with this version, then reads nothing more.
    Version(u32),
    /// Takes the descriptors and refuses the session.
    Refuse,
    /// Opens the session: echoes stdin to stdout after `stdout`, writes
    /// `stderr`, closes the streams, then sends the exit value (or none).
    Run { stdout: Vec<u8>, stderr: Vec<u8>, exit: Option<u32> },
    /// Opens the session and then never answers again.
    Hang,
}

/// What the stand-in saw: the command asked for.
struct Seen {
    command: Option<String>,
}

fn framed(fields: &[Result<u32, &[u8]>]) -> Vec<u8> {
    let mut body = Vec::new();
    for field in fields {
        match field {
            Ok(value) => body.extend_from_slice(&value.to_be_bytes()),
            Err(bytes) => {
                body.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
                body.extend_from_slice(bytes);
            }
        }
    }
    let mut packet = (body.len() as u32).to_be_bytes().to_vec();
    packet.extend_from_slice(&body);
    packet
}

fn read_body(conn: &mut std::os::unix::net::UnixStream) -> Vec<u8> {
    let mut header = [0u8; 4];
    conn.read_exact(&mut header).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(header) as usize];
    conn.read_exact(&mut body).unwrap();
    body
}

/// One descriptor as mux.c's `mm_receive_fd` takes it, reopened through
/// /proc (a pipe reopens as itself) so no raw descriptor is owned unsafely.
fn receive_fd(conn: &std::os::unix::net::UnixStream, write: bool) -> std::fs::File {
    let mut byte = [0u8; 1];
    let mut data = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let message = recvmsg::<()>(conn.as_raw_fd(), &mut data, Some(&mut space), MsgFlags::empty()).unwrap();
    let raw = message
        .cmsgs()
        .unwrap()
        .find_map(|c| match c {
            ControlMessageOwned::ScmRights(fds) => fds.first().copied(),
            _ => None,
        })
        .expect("one descriptor per message");
    let file =
        std::fs::OpenOptions::new().read(!write).write(write).open(format!("/proc/self/fd/{raw}")).unwrap();
    nix::unistd::close(raw).unwrap();
    file
}

fn stand_in(socket: &Path, script: Script) -> std::thread::JoinHandle<Seen> {
    let listener = UnixListener::bind(socket).unwrap();
    std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let version = if let Script::Version(v) = script { v } else { 4 };
        conn.write_all(&framed(&[Ok(packet::MUX_MSG_HELLO), Ok(version), Err(b"info"), Err(b"0")])).unwrap();
        assert_eq!(read_body(&mut conn), packet::hello()[4..], "the client's hello");
        if let Script::Version(_) = script {
            return Seen { command: None };
        }
        let request = read_body(&mut conn);
        let rid = u32::from_be_bytes(request[4..8].try_into().unwrap());
        let command = String::from_utf8(request[8 + 4 + 16 + 4 + 4 + 4..].to_vec()).unwrap();
        let mut stdin = receive_fd(&conn, false);
        let mut stdout = receive_fd(&conn, true);
        let mut stderr = receive_fd(&conn, true);
        match script {
            Script::Version(_) => unreachable!(),
            Script::Refuse => {
                drop((stdin, stdout, stderr));
                conn.write_all(&framed(&[Ok(packet::MUX_S_FAILURE), Ok(rid), Err(b"refused by peer")]))
                    .unwrap();
            }
            Script::Run { stdout: out, stderr: err, exit } => {
                conn.write_all(&framed(&[Ok(packet::MUX_S_SESSION_OPENED), Ok(rid), Ok(5)])).unwrap();
                let mut input = Vec::new();
                stdin.read_to_end(&mut input).unwrap();
                let _ = stdout.write_all(&out);
                let _ = stdout.write_all(&input);
                let _ = stderr.write_all(&err);
                drop((stdin, stdout, stderr));
                if let Some(value) = exit {
                    conn.write_all(&framed(&[Ok(packet::MUX_S_TTY_ALLOC_FAIL), Ok(5)])).unwrap();
                    conn.write_all(&framed(&[Ok(packet::MUX_S_EXIT_MESSAGE), Ok(5), Ok(value)])).unwrap();
                }
            }
            Script::Hang => {
                conn.write_all(&framed(&[Ok(packet::MUX_S_SESSION_OPENED), Ok(rid), Ok(5)])).unwrap();
                // Until the client gives up and closes the connection.
                let mut rest = Vec::new();
                let _ = conn.read_to_end(&mut rest);
                drop((stdin, stdout, stderr));
            }
        }
        Seen { command: Some(command) }
    })
}

fn spec(stdin: Option<&[u8]>, timeout: Duration) -> ProcessSpec {
    let mut spec = ProcessSpec::new("/usr/bin/ssh", ["--", "course-demo", "df -h /"]);
    spec.transport = Transport::Ssh;
    spec.stdin = stdin.map(<[u8]>::to_vec);
    spec.timeout = timeout;
    spec
}

fn session(script: Script, spec: &ProcessSpec) -> (Attempt, Seen) {
    let temp = tempfile::tempdir().unwrap();
    let socket = temp.path().join("master");
    let master = stand_in(&socket, script);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let attempt = runtime.block_on(run(&socket, "df -h /", spec));
    (attempt, master.join().unwrap())
}

fn ran(attempt: Attempt) -> (ProcessOutput, StderrTail) {
    match attempt {
        Attempt::Ran(outcome, tail) => (outcome, tail),
        Attempt::Declined(why) => panic!("declined: {why}"),
    }
}

#[test]
fn a_session_carries_the_command_stdin_and_both_streams_and_the_exit_value() {
    let script = Script::Run { stdout: b"Filesystem\n".to_vec(), stderr: b"warn\n".to_vec(), exit: Some(0) };
    let (attempt, seen) = session(script, &spec(Some(b"request"), Duration::from_secs(5)));
    assert_eq!(seen.command.as_deref(), Some("df -h /"));
    let (outcome, tail) = ran(attempt);
    assert_eq!(outcome.stdout, b"Filesystem\nrequest");
    assert_eq!(outcome.stderr_len, 5);
    assert_eq!(tail.bytes(), b"warn\n");
    let execution = outcome.execution;
    assert_eq!(execution.execution_status, ExecutionStatus::Ok);
    assert_eq!((execution.exit_code, execution.signal), (Some(0), None));
    assert_eq!(execution.completion, Completion::Confirmed);
    assert!(!execution.timed_out && !execution.output_truncated);
}

/// The same classification as an ssh client process: 1 is the command's,
/// 255 could be ssh's, and no exit message at all is what the client
/// reports as 255.
#[test]
fn exit_values_are_classified_as_the_ssh_client_s_would_be() {
    for (exit, status, code, completion) in [
        (Some(1), ExecutionStatus::NonzeroExit, 1, Completion::Confirmed),
        (Some(255), ExecutionStatus::SshOrRemote255, 255, Completion::Unconfirmed),
        (None, ExecutionStatus::SshOrRemote255, 255, Completion::Unconfirmed),
    ] {
        let script = Script::Run { stdout: Vec::new(), stderr: Vec::new(), exit };
        let (outcome, _) = ran(session(script, &spec(None, Duration::from_secs(5))).0);
        assert_eq!(outcome.execution.execution_status, status, "{exit:?}");
        assert_eq!(outcome.execution.exit_code, Some(code));
        assert_eq!(outcome.execution.completion, completion);
    }
}

#[test]
fn output_over_the_limit_is_cut_off_and_unconfirmed() {
    let script = Script::Run { stdout: vec![b'x'; 9000], stderr: Vec::new(), exit: Some(0) };
    let (outcome, _) = ran(session(script, &spec(None, Duration::from_secs(5))).0);
    assert_eq!(outcome.execution.execution_status, ExecutionStatus::OutputLimit);
    assert!(outcome.execution.output_truncated);
    assert_eq!(outcome.execution.completion, Completion::Unconfirmed);
    assert!(outcome.stdout.is_empty(), "no partial output");
}

#[test]
fn a_session_that_never_ends_times_out_unconfirmed_and_closes_the_connection() {
    let started = Instant::now();
    let (attempt, seen) = session(Script::Hang, &spec(None, Duration::from_millis(300)));
    let (outcome, _) = ran(attempt);
    assert!(seen.command.is_some(), "the stand-in saw the connection close");
    assert_eq!(outcome.execution.execution_status, ExecutionStatus::Timeout);
    assert!(outcome.execution.timed_out);
    assert_eq!(outcome.execution.completion, Completion::Unconfirmed);
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

#[test]
fn another_protocol_version_or_a_refusal_declines_before_anything_ran() {
    let (attempt, _) = session(Script::Version(3), &spec(None, Duration::from_secs(5)));
    assert!(matches!(attempt, Attempt::Declined(Declined::Version(3))), "{attempt:?}");
    let (attempt, seen) = session(Script::Refuse, &spec(None, Duration::from_secs(5)));
    assert!(matches!(attempt, Attempt::Declined(Declined::Refused)), "{attempt:?}");
    assert_eq!(seen.command.as_deref(), Some("df -h /"));
}

#[test]
fn no_master_on_the_socket_declines_at_once() {
    let temp = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let spec = spec(None, Duration::from_secs(5));
    let missing = runtime.block_on(run(&temp.path().join("none"), "true", &spec));
    assert!(matches!(missing, Attempt::Declined(Declined::Connect(io::ErrorKind::NotFound))), "{missing:?}");
    // A socket file nobody listens on: a master killed outright leaves one.
    let stale = temp.path().join("stale");
    drop(UnixListener::bind(&stale).unwrap());
    let refused = runtime.block_on(run(&stale, "true", &spec));
    assert!(matches!(refused, Attempt::Declined(Declined::Connect(_))), "{refused:?}");
}

/// A master that accepts but never says hello delays a check by the
/// handshake deadline at most, and nothing ran.
#[test]
fn a_silent_master_declines_after_the_handshake_deadline() {
    let temp = tempfile::tempdir().unwrap();
    let socket = temp.path().join("silent");
    let listener = UnixListener::bind(&socket).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let started = Instant::now();
    let attempt = runtime.block_on(run(&socket, "true", &spec(None, Duration::from_millis(400))));
    assert!(matches!(attempt, Attempt::Declined(Declined::HandshakeTimeout)), "{attempt:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
    drop(listener);
}
