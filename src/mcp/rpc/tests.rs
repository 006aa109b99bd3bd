//! The workstation's reading of the helper's replies, case by case.

use serde_json::json;
use strum::VariantArray as _;

use super::*;
use crate::exec::Execution;
use crate::vocab::Refusal;

fn outcome(status: ExecutionStatus, exit: Option<i32>, stdout: &str) -> ProcessOutput {
    let mut execution = Execution::not_started(status);
    execution.exit_code = exit;
    ProcessOutput { execution, stdout: stdout.as_bytes().to_vec(), stderr_len: 0, stderr: Vec::new() }
}

/// What the helper prints, read back as the workstation reads it: with
/// the exit code the helper gives it, every reply means what it says.
#[test]
fn every_reply_the_helper_prints_is_read_as_intended() {
    let id = PlanId::parse("0123456789abcdef0123456789abcdef").unwrap();
    let exited = |reply: &Reply| {
        let (status, exit) = match reply.exit() {
            crate::exit::Exit::Ok => (ExecutionStatus::Ok, 0),
            _ => (ExecutionStatus::NonzeroExit, 1),
        };
        outcome(status, Some(exit), &reply.to_line())
    };
    for operation in Operation::VARIANTS.iter().copied() {
        // Each operation names its plan in its own field (a plan view's
        // `id`, an execution's `plan_id`); the others name none.
        let (printed, named) = match operation {
            Operation::Plan | Operation::SignedApproval => (json!({"id": id.as_str(), "n": 1}), Some(&id)),
            Operation::Execute => (json!({"plan_id": id.as_str(), "n": 1}), Some(&id)),
            _ => (json!({"id": id.as_str(), "n": 1}), None),
        };
        let ok = Reply::Ok { operation, result: printed.clone() };
        let answer = interpret(operation, &exited(&ok), Mode::Ssh);
        assert_eq!(answer.status, Status::Ok, "{operation:?}");
        assert_eq!(answer.plan_id.as_ref(), named, "{operation:?}");
        // The agent gets the object as printed, unknown fields included;
        // a plan view's id is named plan_id, as every result names a plan.
        let object = Value::Object(answer.result.expect("a body").object);
        match operation {
            Operation::Plan | Operation::SignedApproval => {
                assert_eq!(object, json!({"plan_id": id.as_str(), "n": 1}))
            }
            _ => assert_eq!(object, printed, "{operation:?}"),
        }
        // The same reply answers another operation's request: unknown.
        for other in Operation::VARIANTS.iter().copied().filter(|o| *o != operation) {
            assert_eq!(interpret(other, &exited(&ok), Mode::Ssh).status, Status::Unknown);
        }
        for code in Code::VARIANTS.iter().copied() {
            let rejected = Reply::from(Refusal::new(code, "No."));
            let answer = interpret(operation, &exited(&rejected), Mode::Ssh);
            assert_eq!((answer.status, answer.code), (Status::Rejected, Some(code.into())));
            // A plan that ran and was rolled back says so; a refusal says nothing ran.
            let rolled_back = [
                Code::NginxRejected,
                Code::HealthCheckFailed,
                Code::DeployFailed,
                Code::StartFailed,
                Code::UpdateFailed,
            ];
            let ending = if rolled_back.contains(&code) {
                "rolled its changes back and verified it, and nothing is blocked: No."
            } else if code == Code::EngineRefused {
                "verified that nothing changed, and nothing is blocked: No."
            } else {
                "refused the request; nothing ran and nothing changed: No."
            };
            assert!(answer.message.ends_with(ending), "{code}: {}", answer.message);
        }
        let inspect = Reply::needs_inspection(id.clone(), "Half done.".into());
        let answer = interpret(operation, &exited(&inspect), Mode::Ssh);
        assert_eq!(
            (answer.status, answer.code),
            (Status::NeedsInspection, Some(Code::NeedsInspection.into()))
        );
        assert_eq!(answer.plan_id.as_ref(), Some(&id));
        assert!(answer.message.ends_with("Helper: Half done."), "{}", answer.message);
    }
}

#[test]
#[allow(clippy::type_complexity)]
fn the_reply_table_follows_the_contract() {
    let ok = r#"{"status":"ok","operation":"plan","result":{"id":"0123456789abcdef0123456789abcdef"}}"#;
    let answer =
        interpret(Operation::Plan, &outcome(ExecutionStatus::Ok, Some(0), &format!("{ok}\n")), Mode::Ssh);
    assert_eq!(answer.status, Status::Ok);
    assert_eq!(answer.plan_id.as_ref().map(PlanId::as_str), Some("0123456789abcdef0123456789abcdef"));

    let table: &[(ExecutionStatus, Option<i32>, &str, Status, Option<Code>)] = &[
        (ExecutionStatus::Ok, Some(0), ok, Status::Unknown, None), // wrong operation (asked inventory)
        (ExecutionStatus::Ok, Some(0), "", Status::Unknown, None),
        (ExecutionStatus::Ok, Some(0), "not json", Status::Unknown, None),
        (ExecutionStatus::Ok, Some(0), r#"{"status":"ok","operation":"inventory"}"#, Status::Unknown, None),
        (
            ExecutionStatus::Ok,
            Some(0),
            r#"{"status":"ok","operation":"inventory","result":[]}"#,
            Status::Unknown,
            None,
        ),
        (
            ExecutionStatus::Ok,
            Some(0),
            r#"{"status":"rejected","code":"x","message":"m"}"#,
            Status::Unknown,
            None,
        ),
        (ExecutionStatus::Ok, Some(0), "{} {}", Status::Unknown, None),
        (
            ExecutionStatus::NonzeroExit,
            Some(1),
            r#"{"status":"rejected","code":"plan_expired","message":"The plan expired."}"#,
            Status::Rejected,
            Some(Code::PlanExpired),
        ),
        (
            ExecutionStatus::NonzeroExit,
            Some(1),
            r#"{"status":"rejected","code":"Bad Code","message":"m"}"#,
            Status::Unknown,
            None,
        ),
        (
            ExecutionStatus::NonzeroExit,
            Some(1),
            r#"{"status":"needs_inspection","code":"needs_inspection","plan_id":"0123456789abcdef0123456789abcdef","message":"m"}"#,
            Status::NeedsInspection,
            Some(Code::NeedsInspection),
        ),
        (
            ExecutionStatus::NonzeroExit,
            Some(1),
            r#"{"status":"ok","operation":"inventory","result":{}}"#,
            Status::Unknown,
            None,
        ),
        (ExecutionStatus::NonzeroExit, Some(1), "", Status::HelperUnavailable, None),
        (
            ExecutionStatus::NonzeroExit,
            Some(2),
            r#"{"status":"rejected","code":"x","message":"m"}"#,
            Status::Unknown,
            None,
        ),
        (ExecutionStatus::Timeout, None, "", Status::Unknown, None),
        (ExecutionStatus::OutputLimit, None, "", Status::Unknown, None),
        (ExecutionStatus::Signaled, None, "", Status::Unknown, None),
        (ExecutionStatus::SshOrRemote255, Some(255), "", Status::Unknown, None),
        (ExecutionStatus::LaunchFailed, None, "", Status::SshUnavailable, None),
    ];
    for (execution_status, exit, stdout, status, code) in table {
        let answer = interpret(Operation::Inventory, &outcome(*execution_status, *exit, stdout), Mode::Ssh);
        assert_eq!(answer.status, *status, "{execution_status:?} {exit:?} {stdout}");
        assert_eq!(answer.code, code.map(AnswerCode::from), "{stdout}");
        if *status == Status::Unknown {
            assert!(
                answer.message.contains("Do not retry") && answer.message.contains("inspect"),
                "{}",
                answer.message
            );
        }
    }
}

#[test]
fn unknown_says_why() {
    let read = |stdout: &str, exit: i32| {
        let status = if exit == 0 { ExecutionStatus::Ok } else { ExecutionStatus::NonzeroExit };
        interpret(Operation::Execute, &outcome(status, Some(exit), stdout), Mode::Ssh).message
    };
    assert!(read("", 0).contains("not one JSON object"));
    assert!(read("{}", 0).contains("does not follow the contract"));
    assert!(read("", 1).contains("without a valid reply; sudo may have refused"));
    assert!(read("{}", 1).contains("outside the contract"));
    assert!(read("{}", 1).contains("the server may have acted"));
}

#[test]
fn a_sudo_refusal_is_helper_unavailable_on_a_read_only_call_and_unknown_on_a_change() {
    // Tried: what `sudo -n` does without a matching rule (exit 1, nothing
    // on stdout, "sudo: a password is required" on stderr, which the
    // runner never passes on), and a helper that died printing half a line.
    for stdout in ["", "{\"status\":\"ok\""] {
        let refused = outcome(ExecutionStatus::NonzeroExit, Some(1), stdout);
        for operation in Operation::VARIANTS.iter().copied() {
            let answer = interpret(operation, &refused, Mode::Ssh);
            if may_change(operation) {
                assert_eq!(answer.status, Status::Unknown, "{operation:?}");
                assert!(answer.message.contains("sudo may have refused"), "{}", answer.message);
            } else {
                assert_eq!((answer.status, answer.code.clone()), (Status::HelperUnavailable, None));
                assert!(answer.message.contains("sudo refuses"), "{}", answer.message);
                assert!(answer.message.contains("nothing was read or changed"), "{}", answer.message);
                assert!(answer.message.contains("volce-lab-host doctor"), "{}", answer.message);
            }
        }
    }
    assert!(
        !may_change(Operation::Inventory)
            && !may_change(Operation::GatewayStatus)
            && !may_change(Operation::Logs)
    );
    assert!(may_change(Operation::Plan) && may_change(Operation::Execute));
}

/// Before issue 26 a message was cut at 300 characters, mid-sentence and
/// often right where the next step was.
#[test]
fn a_long_message_of_the_helper_is_shown_whole() {
    let sentence = "A failed deploy rolled back; check container_port. ".repeat(30);
    let refusal = Reply::from(Refusal::new(Code::DeployFailed, sentence.trim_end()));
    let answer = interpret(
        Operation::Execute,
        &outcome(ExecutionStatus::NonzeroExit, Some(1), &refusal.to_line()),
        Mode::Ssh,
    );
    assert!(answer.message.ends_with(sentence.trim_end()), "{}", answer.message);
    assert!(!answer.message.ends_with("..."));
}

#[test]
fn a_refusal_with_a_code_from_a_newer_helper_is_still_a_refusal() {
    let run =
        |status, exit, stdout: &str| interpret(Operation::Plan, &outcome(status, exit, stdout), Mode::Ssh);
    let newer = r#"{"status":"rejected","code":"app_frozen_since_v9","message":"Frozen.\u001b[2J"}"#;
    let answer = run(ExecutionStatus::NonzeroExit, Some(1), newer);
    assert_eq!(answer.status, Status::Rejected);
    assert_eq!(answer.code, Some(AnswerCode::Newer("app_frozen_since_v9".into())));
    assert!(answer.message.ends_with("nothing changed: Frozen.[2J"), "{}", answer.message);
    assert_eq!(serde_json::to_value(&answer.code).unwrap(), json!("app_frozen_since_v9"));
    assert_eq!(
        serde_json::to_value(Some(AnswerCode::from(Code::PlanExpired))).unwrap(),
        json!("plan_expired")
    );
    // Tried: the same reply with exit 0, another exit code, a code of
    // the wrong shape, an extra field, a missing message: none of them
    // is a refusal, so each is unknown.
    for (status, exit, stdout) in [
        (ExecutionStatus::Ok, Some(0), newer.to_owned()),
        (ExecutionStatus::NonzeroExit, Some(2), newer.to_owned()),
        (ExecutionStatus::NonzeroExit, Some(1), newer.replace("app_frozen_since_v9", "App Frozen")),
        (ExecutionStatus::NonzeroExit, Some(1), newer.replace("\"status\"", "\"approved\":true,\"status\"")),
        (ExecutionStatus::NonzeroExit, Some(1), r#"{"status":"rejected","code":"app_frozen"}"#.to_owned()),
    ] {
        assert_eq!(run(status, exit, &stdout).status, Status::Unknown, "{stdout}");
    }
}

#[test]
fn helper_messages_are_sanitized() {
    let reply =
        "{\"status\":\"rejected\",\"code\":\"app_not_found\",\"message\":\"a\\u001b[2J\\u202eb\\nc\"}";
    let answer =
        interpret(Operation::Plan, &outcome(ExecutionStatus::NonzeroExit, Some(1), reply), Mode::Local);
    assert_eq!(answer.status, Status::Rejected);
    assert!(answer.message.ends_with("a[2Jbc"), "{}", answer.message);
}

/// A long execute prints progress lines before its reply: every reply
/// still means what it says after them, and a helper that prints none (an
/// older one) is read exactly as before.
#[test]
fn progress_lines_before_the_reply_never_count_as_the_reply() {
    use crate::vocab::Step;
    use crate::wire::progress::Progress;
    let id = PlanId::parse("0123456789abcdef0123456789abcdef").unwrap();
    let lines: String = Step::VARIANTS.iter().map(|s| Progress { progress: *s }.to_line()).collect();
    let ok = Reply::Ok { operation: Operation::Execute, result: json!({"plan_id": id.as_str()}) }.to_line();
    let inspect = Reply::needs_inspection(id.clone(), "Half done.".into()).to_line();
    let rejected = Reply::from(Refusal::new(Code::PlanExpired, "No.")).to_line();
    let newer = "{\"code\":\"from_the_future\",\"message\":\"No.\",\"status\":\"rejected\"}\n";
    for (exit, reply, status) in [
        (0, ok.as_str(), Status::Ok),
        (1, inspect.as_str(), Status::NeedsInspection),
        (1, rejected.as_str(), Status::Rejected),
        (1, newer, Status::Rejected),
    ] {
        let execution = if exit == 0 { ExecutionStatus::Ok } else { ExecutionStatus::NonzeroExit };
        let old = interpret(Operation::Execute, &outcome(execution, Some(exit), reply), Mode::Ssh);
        let new = format!("{lines}{reply}");
        let with = interpret(Operation::Execute, &outcome(execution, Some(exit), &new), Mode::Ssh);
        assert_eq!(old.status, status, "{reply}");
        assert_eq!(with, old, "progress lines change nothing about {reply}");
    }
    // Only progress lines and no reply: the helper died mid-way.
    let died =
        interpret(Operation::Execute, &outcome(ExecutionStatus::NonzeroExit, Some(1), &lines), Mode::Ssh);
    assert_eq!(died.status, Status::Unknown);
    // A malformed progress line in front of the reply: outside the contract, unknown.
    let bad = format!("{{\"progress\":\"rebooted\"}}\n{ok}");
    let answer = interpret(Operation::Execute, &outcome(ExecutionStatus::Ok, Some(0), &bad), Mode::Ssh);
    assert_eq!(answer.status, Status::Unknown);
    // A progress line after the reply: the reply is no longer the last line.
    let after = format!("{ok}{}", Progress { progress: Step::Pulled }.to_line());
    let answer = interpret(Operation::Execute, &outcome(ExecutionStatus::Ok, Some(0), &after), Mode::Ssh);
    assert_eq!(answer.status, Status::Unknown);
}

/// Issue 25: service_execute of a rolled-back plan answers the failed app's
/// last lines beside the refusal, and says they are untrusted.
#[test]
fn a_rolled_back_execute_answers_its_app_log_as_untrusted() {
    let log = crate::logs::AppLog::render(b"listening on :9090\n", b"", &[]);
    let reply = Reply::Rejected {
        refusal: Refusal::new(Code::HealthCheckFailed, "It did not answer."),
        app_log: Some(log.clone()),
    };
    let answer = interpret(
        Operation::Execute,
        &outcome(ExecutionStatus::NonzeroExit, Some(1), &reply.to_line()),
        Mode::Ssh,
    );
    assert_eq!((answer.status, answer.app_log), (Status::Rejected, Some(log)));
    assert!(answer.message.contains("untrusted application output"), "{}", answer.message);
    // A newer helper's unknown code with an app log is still a refusal.
    let newer = r#"{"status":"rejected","code":"app_frozen","message":"Frozen.","app_log":{"read":false}}"#;
    let answer =
        interpret(Operation::Execute, &outcome(ExecutionStatus::NonzeroExit, Some(1), newer), Mode::Ssh);
    assert_eq!(answer.status, Status::Rejected);
}

/// Issue 44: only service_execute's output schema admits an `app_log`, so
/// one in any other operation's refusal is dropped, message and all.
#[test]
fn an_app_log_outside_execute_is_dropped() {
    let log = crate::logs::AppLog::render(b"listening on :9090\n", b"", &[]);
    let reply = Reply::Rejected {
        refusal: Refusal::new(Code::HealthCheckFailed, "It did not answer."),
        app_log: Some(log),
    };
    for operation in [Operation::Plan, Operation::Inventory, Operation::Logs] {
        let outcome = outcome(ExecutionStatus::NonzeroExit, Some(1), &reply.to_line());
        let answer = interpret(operation, &outcome, Mode::Ssh);
        assert_eq!((answer.status, answer.app_log), (Status::Rejected, None), "{operation:?}");
        assert!(!answer.message.contains("app_log"), "{}", answer.message);
    }
}
