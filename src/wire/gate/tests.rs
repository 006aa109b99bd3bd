//! The gate contract's parsers and framing, byte for byte.

use super::*;

#[test]
fn every_request_line_parses_back_to_itself() {
    for check in RemoteCommand::VARIANTS {
        let line = request_line(*check, "web-1.example", "vl-agent");
        let parsed = parse_request(Some(line.as_bytes())).unwrap();
        assert_eq!(
            parsed,
            GateRequest::Gated { check: *check, host: "web-1.example".into(), user: "vl-agent".into() }
        );
    }
    assert_eq!(
        request_line(RemoteCommand::Identity, "h", "u"),
        "LC_ALL=C; export LC_ALL; hostname && id -un # volce-lab-gate 1 identity h u"
    );
    assert_eq!(request_line(RemoteCommand::Disk, "h", "u"), "# volce-lab-gate 1 disk h u");
    for (line, check) in [
        (LEGACY_IDENTITY, RemoteCommand::Identity),
        (LEGACY_DISK, RemoteCommand::Disk),
        (LEGACY_RPC, RemoteCommand::Rpc),
    ] {
        assert_eq!(parse_request(Some(line.as_bytes())), Ok(GateRequest::Legacy(check)));
    }
}

/// Tried: what a person or an attacker holding the key types instead.
/// Pins the limit's edge (issue 38, mutation testing): a command of exactly
/// [`MAX_COMMAND_BYTES`] is read (and refused as not fixed, not as too
/// long), one byte more is too long, and the helper's check accepts the
/// record the gate makes of each: a gate and helper that disagree on the
/// edge would lose that refusal from the audit trail.
#[test]
fn a_command_of_exactly_the_limit_is_read_and_its_refusal_record_is_accepted() {
    for (len, reason) in [
        (MAX_COMMAND_BYTES, RefusalReason::NotAFixedRequest),
        (MAX_COMMAND_BYTES + 1, RefusalReason::TooLong),
    ] {
        let command = vec![b'#'; len];
        assert_eq!(parse_request(Some(&command)), Err(reason), "{len} bytes");
        let record = RefusalRecord::of(reason, Some(&command));
        let checked =
            RefusalRecord::checked(record.reason, record.command_bytes, record.command_sha256.as_deref());
        assert_eq!(checked, Ok(record), "{len} bytes");
    }
}

#[test]
fn anything_but_the_fixed_requests_is_refused() {
    assert_eq!(parse_request(None), Err(RefusalReason::NoCommand));
    assert_eq!(parse_request(Some(&[b'#'; 1025])), Err(RefusalReason::TooLong));
    for bad in [
        "",
        "ls /",
        "sh",
        "/bin/bash -i",
        "internal-sftp",
        "sftp-server",
        "scp -t /tmp",
        "sudo -n /usr/local/bin/volce-lab-host rpc extra",
        "sudo -n /usr/local/bin/volce-lab-host rpc; id",
        "LC_ALL=C df -h / /home",
        "LC_ALL=C df -h /\n",
        " LC_ALL=C df -h /",
        "hostname && id -un",
        "# volce-lab-gate 1 disk h",
        "# volce-lab-gate 1 disk h u extra",
        "# volce-lab-gate 2 disk h u",
        "# volce-lab-gate 1 shell h u",
        "# volce-lab-gate 1 identity h u",
        "LC_ALL=C; export LC_ALL; hostname && id -un # volce-lab-gate 1 disk h u",
        "# volce-lab-gate 1 disk $(id) u",
        "# volce-lab-gate 1 disk h u;id",
        "# volce-lab-gate  1 disk h u",
        "#  volce-lab-gate 1 disk h u",
        "# volce-lab-gate 1 disk -h u",
        "# volce-lab-gate 1 Disk h u",
        "cat ~/.ssh/authorized_keys",
    ] {
        assert_eq!(parse_request(Some(bad.as_bytes())), Err(RefusalReason::NotAFixedRequest), "{bad:?}");
    }
    assert_eq!(parse_request(Some(b"LC_ALL=C df -h \xff")), Err(RefusalReason::NotAFixedRequest));
}

#[test]
fn the_header_carries_the_verdict_and_what_was_observed() {
    let header = Header::judge("web-1", "vl-agent", "web-1", "vl-agent");
    assert_eq!(header.line(), "volce-lab-gate 1 match web-1 vl-agent\n");
    let mut reply = header.line().into_bytes();
    reply.extend_from_slice(b"Filesystem ...\n");
    assert_eq!(parse_reply(&reply), Ok((header, &b"Filesystem ...\n"[..])));

    let other = Header::judge("web-2", "vl-agent", "web-1", "vl-agent");
    assert!(!other.matched);
    assert_eq!(parse_reply(other.line().as_bytes()).unwrap().0, other);
    // A name that is no identifier is shown as `?` and never matches.
    let odd = Header::judge("a b", "vl-agent", "a b", "vl-agent");
    assert_eq!(odd.line(), "volce-lab-gate 1 mismatch ? vl-agent\n");
    assert!(!parse_reply(odd.line().as_bytes()).unwrap().0.matched);
}

/// Tried: what a gate of each protocol puts after the identity lines,
/// and lines that only look like a version.
#[test]
fn the_version_line_of_an_identity_answer_is_read_exactly() {
    let helper = HelperVersion { version: "0.2.0".into(), protocol: 2 };
    assert_eq!(version_line(&helper), "volce-lab-host 0.2.0 protocol 2\n");
    let payload = format!("web-1\nvl-agent\n{}", version_line(&helper));
    assert_eq!(parse_version(payload.as_bytes()), Some(helper));
    for bad in [
        &b"web-1\nvl-agent\n"[..],
        b"",
        b"web-1\nvl-agent\nvolce-lab-host 0.2.0 protocol 2",
        b"web-1\nvl-agent\nvolce-lab-host 0.2.0 protocol 0\n",
        b"web-1\nvl-agent\nvolce-lab-host 0.2.0 protocol 02\n",
        b"web-1\nvl-agent\nvolce-lab-host 0.2.0 protocol -2\n",
        b"web-1\nvl-agent\nvolce-lab-host 0.2.0-rc1 protocol 2\n",
        b"web-1\nvl-agent\nvolce-lab-host 0..2 protocol 2\n",
        b"web-1\nvl-agent\nvolce-lab-host 0.2.0 protocol 2 extra\n",
        b"web-1\nvl-agent\nvolce-lab-host  0.2.0 protocol 2\n",
        b"web-1\nvolce-lab-host 0.2.0 protocol 2\n",
        b"web-1\nvl-agent\nvolce-lab-host \xff protocol 2\n",
    ] {
        assert_eq!(parse_version(bad), None, "{:?}", String::from_utf8_lossy(bad));
    }
}

/// Tried: a shell's answer, truncated or forged-looking headers.
#[test]
fn anything_but_an_exact_header_is_not_a_frame() {
    for bad in [
        &b""[..],
        b"web-1\nvl-agent\n",
        b"volce-lab-gate 1 match web-1 vl-agent",
        b"volce-lab-gate 2 match web-1 vl-agent\n",
        b"volce-lab-gate 1 matched web-1 vl-agent\n",
        b"volce-lab-gate 1 match web-1\n",
        b"volce-lab-gate 1 match web-1 vl-agent x\n",
        b" volce-lab-gate 1 match web-1 vl-agent\n",
        b"volce-lab-gate 1 match web 1 vl-agent\n",
        b"volce-lab-gate 1 match -x vl-agent\n",
        b"volce-lab-gate 1 match \xff vl-agent\n",
    ] {
        assert_eq!(parse_reply(bad), Err(NotAFrame), "{:?}", String::from_utf8_lossy(bad));
    }
    let mut long = vec![b'a'; 1100];
    long.push(b'\n');
    assert_eq!(parse_reply(&long), Err(NotAFrame));
}
