//! Fuzz target: the framing of the ssh gate (`volce_lab::wire::gate` and
//! `volce_lab::host::gate::decide`). The gate is the forced command of the
//! agent's key: `parse_request` reads whatever the key's holder asked sshd to
//! run, and the workstation's `parse_reply` reads whatever came back. The
//! first byte picks the part:
//!
//! - 0: the remote command. No input panics. An accepted command is one of
//!   the three legacy lines or, byte for byte, `request_line` of its check
//!   and two identifiers (so it holds no newline, no `;`/`$`/backquote in a
//!   gated word, nothing a shell would run beyond the legacy identity
//!   command). `decide` on it runs only `df -h /` or the helper's rpc, by
//!   absolute path with fixed arguments, and a gated check runs only when
//!   the observed identity is the one it names; otherwise it answers one
//!   mismatch header and nothing runs. A refusal is `too_long` exactly for
//!   input past 1024 bytes, otherwise `not_a_fixed_request`.
//! - 1: a gate's reply. No input panics; an accepted frame starts with
//!   exactly its header's line and the payload is the rest, unchanged.
//! - 2: the gate's own header for an observed and an expected identity (four
//!   newline-separated names). It always parses back as a frame with the
//!   same verdict, and it is a match only for equal identifier names.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volce_lab::config::is_identifier;
use volce_lab::host::HostPaths;
use volce_lab::host::gate::{GateStep, Observed, decide};
use volce_lab::wire::gate::{
    GateRequest, Header, LEGACY_DISK, LEGACY_IDENTITY, LEGACY_RPC, MAX_COMMAND_BYTES,
    RefusalReason, parse_reply, parse_request, request_line,
};
use volce_lab::wire::remote::{RemoteCommand, SUDO_PATH};

/// What `decide` may run for `check`: nothing else, ever. The disk check
/// runs no program (issue 44: read in-process).
fn assert_fixed_run(step: &GateStep, check: RemoteCommand) {
    if check == RemoteCommand::Disk {
        assert!(matches!(step, GateStep::Disk { .. }), "disk starts no program: {step:?}");
        return;
    }
    let GateStep::Run { program, args, stdin, .. } = step else { return };
    match check {
        RemoteCommand::Disk => unreachable!("answered above"),
        RemoteCommand::Rpc => {
            assert_eq!((*program, *args, *stdin), (SUDO_PATH, &["-n", HostPaths::HELPER, "rpc"][..], true))
        }
        RemoteCommand::Identity => panic!("identity is answered, never run: {step:?}"),
    }
}

fn command(data: &[u8]) {
    let request = match parse_request(Some(data)) {
        Ok(request) => request,
        Err(reason) => {
            let expected = if data.len() > MAX_COMMAND_BYTES {
                RefusalReason::TooLong
            } else {
                RefusalReason::NotAFixedRequest
            };
            assert_eq!(reason, expected);
            return;
        }
    };
    let text = std::str::from_utf8(data).expect("an accepted command is UTF-8");
    assert!(!text.contains(['\n', '\r', '\0']), "an accepted command is one line: {text:?}");
    let strangers = Observed { host: "gate-fuzz-other".into(), user: "nobody-else".into() };
    match &request {
        GateRequest::Legacy(check) => {
            let line = match check {
                RemoteCommand::Identity => LEGACY_IDENTITY,
                RemoteCommand::Disk => LEGACY_DISK,
                RemoteCommand::Rpc => LEGACY_RPC,
            };
            assert_eq!(text, line);
            // A legacy line carries no identity to check: its step is fixed.
            let step = decide(&request, &strangers);
            assert_fixed_run(&step, *check);
            if *check == RemoteCommand::Identity {
                assert!(matches!(step, GateStep::Reply { .. }), "{step:?}");
            }
        }
        GateRequest::Gated { check, host, user } => {
            assert!(is_identifier(host) && is_identifier(user), "{host:?} {user:?}");
            assert_eq!(request_line(*check, host, user), text, "accepted only byte for byte");
            // Everything after the legacy identity command is one shell comment.
            let comment = text.strip_prefix(LEGACY_IDENTITY).unwrap_or(text);
            assert!(comment.trim_start().starts_with('#'), "{text:?}");
            assert_eq!(comment.starts_with(' '), *check == RemoteCommand::Identity);

            // The expected identity observed: the check runs (or is answered).
            let expected = Observed { host: host.clone(), user: user.clone() };
            let step = decide(&request, &expected);
            assert_fixed_run(&step, *check);
            let header = format!("volce-lab-gate 1 match {host} {user}\n");
            match &step {
                GateStep::Run { header: Some(line), .. } | GateStep::Disk { header: Some(line) } => {
                    assert_eq!(line, &header)
                }
                GateStep::Reply { stdout, .. } => {
                    assert_eq!(*check, RemoteCommand::Identity);
                    // Since protocol 2 the helper's version line follows the identity.
                    let version = volce_lab::wire::gate::version_line(&volce_lab::wire::versions::HelperVersion::this());
                    assert_eq!(stdout, &format!("{header}{host}\n{user}\n{version}").into_bytes());
                }
                other => panic!("a gated check always sends its header: {other:?}"),
            }

            // Any other identity: one mismatch header, nothing runs.
            if host != &strangers.host || user != &strangers.user {
                let GateStep::Reply { stdout, exit } = decide(&request, &strangers) else {
                    panic!("nothing may run on a mismatch: {request:?}");
                };
                assert_eq!(exit, volce_lab::exit::Exit::Failure);
                assert_eq!(stdout, b"volce-lab-gate 1 mismatch gate-fuzz-other nobody-else\n");
            }
        }
    }
}

fn reply(data: &[u8]) {
    let Ok((header, payload)) = parse_reply(data) else { return };
    let line = header.line();
    assert!(data.starts_with(line.as_bytes()), "the frame starts with its exact header");
    assert_eq!(&data[line.len()..], payload, "the payload is the rest, unchanged");
    assert_eq!(parse_reply(line.as_bytes()), Ok((header, &b""[..])));
}

fn header(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let names: Vec<&str> = text.splitn(4, '\n').collect();
    let [observed_host, observed_user, host, user] = names[..] else { return };
    let header = Header::judge(observed_host, observed_user, host, user);
    let line = header.line();
    let (parsed, payload) = parse_reply(line.as_bytes()).expect("the gate's header is a frame");
    assert_eq!((&parsed, payload), (&header, &b""[..]));
    let same = observed_host == host && observed_user == user && is_identifier(host) && is_identifier(user);
    assert_eq!(header.matched, same, "{names:?}");
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        assert_eq!(parse_request(None), Err(RefusalReason::NoCommand));
        return;
    };
    match which % 3 {
        0 => command(rest),
        1 => reply(rest),
        _ => header(rest),
    }
});
