//! The contract from both ends: golden bytes, the helper's parser, and the
//! reply round trip. How the workstation reads each reply is tested beside
//! `crate::mcp::rpc::interpret`.

use serde_json::json;
use strum::VariantArray as _;

use super::*;

fn code(bytes: &[u8]) -> Code {
    parse_request(bytes).unwrap_err().code
}

fn id() -> PlanId {
    PlanId::parse("0123456789abcdef0123456789abcdef").unwrap()
}

/// One request of every operation, as the workstation builds them.
fn every_request() -> Vec<Request> {
    let mut parameters = Map::new();
    parameters.insert("app".into(), json!("a\"b\n$(id)"));
    parameters.insert("host_port".into(), json!(18001));
    let requests = vec![
        Request::GatewayStatus {},
        Request::Inventory {},
        Request::plan(Action::Stop, parameters),
        Request::execute(&id()),
        Request::logs("web", ContainerRole::Gateway, 200, Some(1440)),
        gate::RefusalRecord::of(gate::RefusalReason::NotAFixedRequest, Some(b"ls /")).request(),
        Request::statement(&id()),
        Request::signed_approval(
            &id(),
            &signed::SignedApproval {
                statement: format!("{}\nplan: x\n", signed::STATEMENT_HEADER),
                signature: format!("{}\nU1NIU0lH\n{}\n", signed::SIGNATURE_BEGIN, signed::SIGNATURE_END),
            },
        ),
    ];
    let operations: Vec<Operation> = requests.iter().map(Request::operation).collect();
    assert_eq!(operations, Operation::VARIANTS, "one request per operation");
    requests
}

#[test]
fn requests_have_the_v1_bytes() {
    assert_eq!(Request::GatewayStatus {}.to_bytes(), br#"{"operation":"gateway_status"}"#);
    assert_eq!(Request::Inventory {}.to_bytes(), br#"{"operation":"inventory"}"#);
    assert_eq!(
        Request::execute(&id()).to_bytes(),
        br#"{"operation":"execute","plan_id":"0123456789abcdef0123456789abcdef"}"#
    );
    let mut parameters = Map::new();
    parameters.insert("app".into(), json!("web"));
    parameters.insert("container_port".into(), json!(8080));
    assert_eq!(
        Request::plan(Action::Deploy, parameters).to_bytes(),
        br#"{"action":"deploy","operation":"plan","parameters":{"app":"web","container_port":8080}}"#
    );
    assert_eq!(
        Request::logs("web", ContainerRole::App, 50, Some(30)).to_bytes(),
        br#"{"app":"web","container":"app","operation":"logs","since_minutes":30,"tail":50}"#
    );
    assert_eq!(
        Request::logs("web", ContainerRole::App, 50, None).to_bytes(),
        br#"{"app":"web","container":"app","operation":"logs","tail":50}"#
    );
    assert_eq!(
        gate::RefusalRecord::of(gate::RefusalReason::NotAFixedRequest, Some(b"ls /")).request().to_bytes(),
        format!(
            "{{\"command_bytes\":4,\"command_sha256\":\"{}\",\"operation\":\"gate_refusal\",\
             \"reason\":\"not_a_fixed_request\"}}",
            crate::text::hex(&<sha2::Sha256 as sha2::Digest>::digest(b"ls /"))
        )
        .as_bytes()
    );
    assert_eq!(
        gate::RefusalRecord::of(gate::RefusalReason::NoCommand, None).request().to_bytes(),
        br#"{"operation":"gate_refusal","reason":"no_command"}"#
    );
    for request in every_request() {
        assert!(!request.to_bytes().contains(&b'\n'), "one line");
    }
}

/// The gate's record is held to what a gate sends: a closed reason, a
/// length and a digest of the right shape, nothing else (no text field).
#[test]
fn a_gate_refusal_carries_a_closed_reason_a_length_and_a_digest_only() {
    use gate::{RefusalReason, RefusalRecord};
    let sha = "a".repeat(64);
    assert_eq!(
        code(br#"{"operation":"gate_refusal","reason":"no_command","command":"ls /"}"#),
        Code::InvalidRequest
    );
    assert_eq!(code(br#"{"operation":"gate_refusal","reason":"because"}"#), Code::InvalidRequest);
    assert_eq!(code(br#"{"operation":"gate_refusal"}"#), Code::InvalidRequest);
    assert_eq!(
        code(br#"{"operation":"gate_refusal","reason":"too_long","command_bytes":"2000"}"#),
        Code::InvalidRequest
    );
    assert_eq!(
        code(br#"{"operation":"gate_refusal","reason":"too_long","command_bytes":-1}"#),
        Code::InvalidRequest
    );
    let checked = |reason, bytes, sha: Option<&str>| RefusalRecord::checked(reason, bytes, sha).is_ok();
    assert!(checked(RefusalReason::NoCommand, None, None));
    assert!(checked(RefusalReason::NotAFixedRequest, Some(0), Some(&sha)));
    assert!(checked(RefusalReason::NotAFixedRequest, Some(1024), Some(&sha)));
    assert!(checked(RefusalReason::TooLong, Some(1025), Some(&sha)));
    for (reason, bytes, digest) in [
        (RefusalReason::NoCommand, Some(3), Some(sha.as_str())),
        (RefusalReason::NoCommand, None, Some(sha.as_str())),
        (RefusalReason::NotAFixedRequest, Some(1025), Some(sha.as_str())),
        (RefusalReason::NotAFixedRequest, Some(3), None),
        (RefusalReason::NotAFixedRequest, None, Some(sha.as_str())),
        (RefusalReason::TooLong, Some(1024), Some(sha.as_str())),
        (RefusalReason::NotAFixedRequest, Some(3), Some("A".repeat(64).as_str())),
        (RefusalReason::NotAFixedRequest, Some(3), Some("rm -rf /")),
        (RefusalReason::NotAFixedRequest, Some(3), Some(&"a".repeat(65))),
    ] {
        assert!(!checked(reason, bytes, digest), "{reason:?} {bytes:?} {digest:?}");
    }
    // What the gate builds always passes the helper's check.
    for command in [None, Some(&b""[..]), Some(b"ls /"), Some(&[b'x'; 5000][..])] {
        let reason = match command {
            None => RefusalReason::NoCommand,
            Some(c) if c.len() > gate::MAX_COMMAND_BYTES => RefusalReason::TooLong,
            Some(_) => RefusalReason::NotAFixedRequest,
        };
        let record = RefusalRecord::of(reason, command);
        let Request::GateRefusal { reason, command_bytes, command_sha256 } =
            parse_request(&record.request().to_bytes()).unwrap()
        else {
            panic!("a gate_refusal request")
        };
        assert_eq!(RefusalRecord::checked(reason, command_bytes, command_sha256.as_deref()), Ok(record));
    }
}

#[test]
fn every_request_the_workstation_sends_parses_back_to_itself() {
    for request in every_request() {
        let bytes = request.to_bytes();
        assert!(bytes.len() <= MAX_REQUEST_BYTES);
        assert_eq!(parse_request(&bytes).unwrap(), request, "{}", String::from_utf8_lossy(&bytes));
        // The tag serde writes is the operation's name in the strum table.
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["operation"], request.operation().as_str());
    }
}

#[test]
fn operation_names_agree_in_serde_and_strum() {
    let names: Vec<&str> = Operation::VARIANTS.iter().map(|o| o.as_str()).collect();
    assert_eq!(
        names,
        [
            "gateway_status",
            "inventory",
            "plan",
            "execute",
            "logs",
            "gate_refusal",
            "statement",
            "signed_approval"
        ]
    );
    for operation in Operation::VARIANTS {
        assert_eq!(serde_json::to_value(operation).unwrap(), operation.as_str());
        assert_eq!(serde_json::from_value::<Operation>(json!(operation.as_str())).unwrap(), *operation);
    }
}

#[test]
fn the_first_four_operations_parse() {
    assert_eq!(parse_request(br#"{"operation":"gateway_status"}"#).unwrap(), Request::GatewayStatus {});
    assert_eq!(parse_request(br#" {"operation":"inventory"} "#).unwrap(), Request::Inventory {});
    assert_eq!(
        parse_request(br#"{"operation":"plan","action":"stop","parameters":{"app":"x"}}"#).unwrap(),
        Request::Plan { action: "stop".into(), parameters: json!({"app": "x"}) }
    );
    assert_eq!(
        parse_request(br#"{"plan_id":"ab","operation":"execute"}"#).unwrap(),
        Request::Execute { plan_id: "ab".into() }
    );
}

#[test]
fn logs_parses_loose_values_for_the_helper_to_judge_and_refuses_extra_fields() {
    assert_eq!(
        parse_request(br#"{"operation":"logs","app":"web","container":"app","tail":"5"}"#).unwrap(),
        Request::Logs { app: "web".into(), container: "app".into(), tail: json!("5"), since_minutes: None }
    );
    assert_eq!(
        parse_request(br#"{"operation":"logs","app":"w","container":"x","tail":0,"since_minutes":null}"#)
            .unwrap(),
        Request::Logs { app: "w".into(), container: "x".into(), tail: json!(0), since_minutes: None }
    );
    for bad in [
        &br#"{"operation":"logs","app":"web","container":"app","tail":5,"name":"prod"}"#[..],
        br#"{"operation":"logs","app":"web","container":"app","tail":5,"container_id":"ab"}"#,
        br#"{"operation":"logs","app":"web","container":"app"}"#,
        br#"{"operation":"logs","app":7,"container":"app","tail":5}"#,
        br#"{"operation":"logs","container":"app","tail":5}"#,
    ] {
        assert_eq!(code(bad), Code::InvalidRequest, "{}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn approval_operations_and_fields_are_refused() {
    assert_eq!(code(br#"{"operation":"approve","plan_id":"a","digest":"b"}"#), Code::InvalidRequest);
    assert_eq!(code(br#"{"operation":"execute","plan_id":"a","approved":true}"#), Code::InvalidRequest);
    assert_eq!(code(br#"{"operation":"execute","plan_id":"a","digest":"b"}"#), Code::InvalidRequest);
    assert_eq!(
        code(br#"{"operation":"plan","action":"stop","parameters":{},"approved_by":"alice"}"#),
        Code::InvalidRequest
    );
}

#[test]
fn extra_or_missing_fields_are_refused() {
    assert_eq!(code(br#"{"operation":"inventory","command":"id"}"#), Code::InvalidRequest);
    assert_eq!(code(br#"{"operation":"gateway_status","host":"x"}"#), Code::InvalidRequest);
    assert_eq!(code(br#"{"operation":"plan","action":"stop"}"#), Code::InvalidRequest);
    assert_eq!(code(br#"{"operation":"execute"}"#), Code::InvalidRequest);
    assert_eq!(code(br#"{"operation":"execute","plan_id":7}"#), Code::InvalidRequest);
}

#[test]
fn the_refusal_names_the_operation_key_and_every_operation_in_one_sentence() {
    for bad in [
        &br#"{}"#[..],
        br#"{"operation":"list"}"#,
        br#"{"operation":"reject","plan_id":"a"}"#,
        br#"{"op":"inventory"}"#,
    ] {
        let refusal = parse_request(bad).unwrap_err();
        assert_eq!(refusal.code, Code::InvalidRequest);
        let message = refusal.message;
        assert!(message.contains("\"operation\" key"), "{message}");
        for operation in Operation::VARIANTS {
            assert!(message.contains(operation.as_str()), "{message} lacks {}", operation.as_str());
        }
        assert_eq!(message.matches(". ").count(), 0, "one sentence: {message}");
        assert!(message.ends_with('.'), "{message}");
    }
}

#[test]
fn duplicate_fields_are_refused() {
    assert_eq!(code(br#"{"operation":"execute","plan_id":"a","plan_id":"b"}"#), Code::InvalidRequest);
}

#[test]
fn non_objects_and_trailing_data_are_refused() {
    for bad in [&b""[..], b"[]", b"\"inventory\"", b"null", b"{", br#"{"operation":"inventory"} {}"#, b"\xff"]
    {
        assert_eq!(code(bad), Code::InvalidRequest, "{:?}", String::from_utf8_lossy(bad));
    }
    assert_eq!(code(br#"{"operation":"shell","command":"rm -rf /"}"#), Code::InvalidRequest);
    assert_eq!(code(br#"{}"#), Code::InvalidRequest);
}

#[test]
fn replies_follow_the_wire_contract() {
    let ok = Reply::Ok { operation: Operation::Inventory, result: json!({}) };
    assert_eq!(ok.to_line(), "{\"operation\":\"inventory\",\"result\":{},\"status\":\"ok\"}\n");
    assert_eq!(ok.exit(), Exit::Ok);
    let rejected = Reply::from(Refusal::new(Code::PlanExpired, "Expired."));
    assert_eq!(
        rejected.to_json(),
        json!({"status": "rejected", "code": "plan_expired", "message": "Expired."})
    );
    assert_eq!(
        rejected.to_line(),
        "{\"code\":\"plan_expired\",\"message\":\"Expired.\",\"status\":\"rejected\"}\n"
    );
    assert_eq!(rejected.exit(), Exit::Failure);
    let inspect = Reply::needs_inspection(id(), "m".into());
    assert_eq!(
        inspect.to_line(),
        "{\"code\":\"needs_inspection\",\"message\":\"m\",\"plan_id\":\"0123456789abcdef0123456789abcdef\",\
         \"status\":\"needs_inspection\"}\n"
    );
    assert_eq!(inspect.exit(), Exit::Failure);
    assert_eq!(
        serde_json::to_value(NeedsInspectionCode::NeedsInspection).unwrap(),
        Code::NeedsInspection.as_str()
    );
}

#[test]
fn every_reply_the_helper_prints_parses_back_to_itself() {
    let mut replies: Vec<Reply> = Operation::VARIANTS
        .iter()
        .map(|&operation| Reply::Ok { operation, result: json!({"id": id(), "nested": {"a": [1, null]}}) })
        .collect();
    replies.extend(Code::VARIANTS.iter().map(|&code| Reply::from(Refusal::new(code, "a \"quoted\"\nline"))));
    replies.push(Reply::needs_inspection(id(), "The container did not start.".into()));
    for reply in replies {
        let line = reply.to_line();
        assert_eq!(line.matches('\n').count(), 1, "{line}");
        assert_eq!(Reply::parse(line.as_bytes()), Ok(reply), "{line}");
    }
}

#[test]
fn what_is_not_one_reply_is_refused() {
    for bad in ["", "not json", "{} {}", "[]", "null", "{\"status\":\"ok\"} x"] {
        assert_eq!(Reply::parse(bad.as_bytes()), Err(NotAReply::NotOneObject), "{bad}");
    }
    for bad in [
        "{}",
        r#"{"status":"ok","operation":"inventory"}"#,
        r#"{"status":"ok","operation":"shell","result":{}}"#,
        r#"{"status":"rejected","code":"Bad Code","message":"m"}"#,
        r#"{"status":"rejected","code":"plan_expired"}"#,
        // Only codes of this build's `Code` table count as a refusal.
        r#"{"status":"rejected","code":"no_such_code","message":"m"}"#,
        r#"{"status":"needs_inspection","code":"plan_expired","plan_id":"0123456789abcdef0123456789abcdef","message":"m"}"#,
        r#"{"status":"approved"}"#,
    ] {
        assert_eq!(Reply::parse(bad.as_bytes()), Err(NotAReply::OutsideTheContract), "{bad}");
    }
    // A repeated key counts once, the last; the id of needs_inspection is dropped when malformed.
    let twice = r#"{"status":"rejected","status":"ok","operation":"plan","result":{}}"#;
    assert_eq!(
        Reply::parse(twice.as_bytes()),
        Ok(Reply::Ok { operation: Operation::Plan, result: json!({}) })
    );
    let no_id = r#"{"status":"needs_inspection","code":"needs_inspection","plan_id":7,"message":"m"}"#;
    assert_eq!(
        Reply::parse(no_id.as_bytes()),
        Ok(Reply::NeedsInspection {
            code: NeedsInspectionCode::NeedsInspection,
            plan_id: None,
            message: "m".into()
        })
    );
}

#[test]
fn a_request_id_travels_beside_the_fields_and_round_trips() {
    let id = RequestId::parse("6f1c3a52-0b7e-4a8e-9a55-3c2d1e0f9b10").unwrap();
    for request in every_request() {
        let bytes = request.to_bytes_with_id(&id);
        assert_eq!(parse_envelope(&bytes).unwrap(), (request.clone(), Some(id.clone())));
        // Without an id: version 1's bytes, and no id.
        assert_eq!(parse_envelope(&request.to_bytes()).unwrap(), (request, None));
    }
    let bytes = Request::Inventory {}.to_bytes_with_id(&id);
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        r#"{"operation":"inventory","request_id":"6f1c3a52-0b7e-4a8e-9a55-3c2d1e0f9b10"}"#
    );
}

#[test]
fn with_a_request_id_extra_repeated_or_approval_fields_are_still_refused() {
    let refused = |bytes: &[u8]| parse_envelope(bytes).unwrap_err().code;
    for bytes in [
        &br#"{"operation":"execute","plan_id":"a","plan_id":"b","request_id":"r1"}"#[..],
        br#"{"operation":"execute","plan_id":"a","request_id":"r1","request_id":"r2"}"#,
        br#"{"operation":"inventory","request_id":"r1","approved":true}"#,
        br#"{"operation":"execute","plan_id":"a","request_id":"r1","approval":"yes"}"#,
        br#"{"operation":"approve","request_id":"r1"}"#,
        br#"{"request_id":"r1"}"#,
        br#"{"operation":"inventory","request_id":"r1"} x"#,
        br#"[{"operation":"inventory","request_id":"r1"}]"#,
    ] {
        assert_eq!(refused(bytes), Code::InvalidRequest, "{}", String::from_utf8_lossy(bytes));
    }
}

#[test]
fn a_request_id_of_the_wrong_shape_refuses_the_request() {
    for id in [r#""""#, r#""has space""#, r#""semi;colon""#, "17", "null", &format!("\"{}\"", "a".repeat(65))]
    {
        let bytes = format!(r#"{{"operation":"inventory","request_id":{id}}}"#);
        let code = parse_envelope(bytes.as_bytes()).map(|_| ()).unwrap_err().code;
        assert_eq!(code, Code::InvalidRequest, "{id}");
    }
    assert!(RequestId::parse(&"a".repeat(64)).is_some());
}

/// Issue 22: `too_long` accepted any length, 99,999,999,999 bytes among
/// them, though no command that long can reach the gate. Fails on the code
/// before it (the length was only held to be over the gate's own limit).
#[test]
fn a_too_long_refusal_is_bounded_by_what_the_gate_can_receive() {
    use gate::{MAX_RECEIVABLE_COMMAND_BYTES, RefusalReason, RefusalRecord};
    let sha = "a".repeat(64);
    let checked =
        |bytes: u64| RefusalRecord::checked(RefusalReason::TooLong, Some(bytes), Some(&sha)).is_ok();
    assert!(checked(gate::MAX_COMMAND_BYTES as u64 + 1));
    assert!(checked(MAX_RECEIVABLE_COMMAND_BYTES as u64));
    assert!(!checked(MAX_RECEIVABLE_COMMAND_BYTES as u64 + 1));
    assert!(!checked(99_999_999_999), "the length the attack sent");
    assert!(!checked(u64::MAX));
}

/// The bound above is the kernel's: a program started with
/// `SSH_ORIGINAL_COMMAND` of exactly [`gate::MAX_RECEIVABLE_COMMAND_BYTES`]
/// bytes runs, one byte more is refused by exec (E2BIG), as sshd's exec of
/// the forced command would be. On 4 KiB pages (`MAX_ARG_STRLEN` is 32 pages).
#[test]
fn the_longest_receivable_command_is_the_longest_exec_accepts_in_the_environment() {
    let run = |len: usize| {
        std::process::Command::new("/bin/true")
            .env_clear()
            .env("SSH_ORIGINAL_COMMAND", "x".repeat(len))
            .status()
            .map(|status| status.success())
    };
    assert!(run(gate::MAX_RECEIVABLE_COMMAND_BYTES).unwrap());
    let refused = run(gate::MAX_RECEIVABLE_COMMAND_BYTES + 1).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(nix::libc::E2BIG), "{refused}");
}

/// Issue 25: a rolled-back execute's refusal carries the failed app's last
/// lines beside it; a reply without them is today's, and one whose
/// `app_log` is not an AppLog (a newer or broken helper) is still the
/// refusal, never `unknown`.
#[test]
fn a_rejection_may_carry_an_app_log_and_a_malformed_one_reads_as_absent() {
    let log = crate::logs::AppLog::render(b"listening on :9090\n", b"", &[]);
    let refusal = Refusal::new(Code::HealthCheckFailed, "It did not answer.");
    let reply = Reply::Rejected { refusal: refusal.clone(), app_log: Some(log.clone()) };
    let value = reply.to_json();
    assert_eq!(value["app_log"]["lines"], json!(["listening on :9090"]));
    assert_eq!(value["app_log"]["untrusted"], json!(crate::logs::UNTRUSTED));
    assert_eq!(Reply::parse(reply.to_line().as_bytes()), Ok(reply));
    let plain = Reply::from(refusal.clone());
    assert!(plain.to_json().get("app_log").is_none(), "absent, as from an older helper");
    let odd = r#"{"status":"rejected","code":"health_check_failed","message":"It did not answer.","app_log":{"lines":7}}"#;
    assert_eq!(Reply::parse(odd.as_bytes()), Ok(Reply::Rejected { refusal, app_log: None }));
}
