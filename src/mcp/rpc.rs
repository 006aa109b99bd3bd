//! The client side of the host RPC (wire contract v1): builds the one JSON
//! request the host helper reads on stdin and turns its reply into a status.
//! Pure: the process itself runs through `Inspector::host_rpc`. Runs
//! unprivileged on the workstation.
//!
//! Invariants enforced here:
//! - the request is serialized by serde_json from validated values only, and
//!   travels on stdin as bytes; nothing is ever spliced into a command line;
//! - only a reply that matches the contract exactly counts: exit 0 with
//!   `{"status":"ok","operation":<ours>,"result":{...}}` is `ok`, exit 1 with
//!   `rejected` (and a stable code) or `needs_inspection` passes through, and
//!   anything else (timeout, overflow, unparsable, other exit, a killed
//!   client) is `unknown`, which tells the agent to inspect before any retry;
//! - nothing is retried here or anywhere else.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::config::Mode;
use crate::exec::{ExecutionStatus, Outcome};
use crate::inspect::Status;
use crate::inspect::transport::Limits;

use super::tools::{Action, PlanId};

/// The host helper reads at most this many request bytes.
pub const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// How much reply we read and how long we wait for it. Pulling an image can
/// take minutes, hence the long wait.
pub const RPC_LIMITS: Limits = Limits { output: 128 * 1024, timeout: Duration::from_secs(240) };

/// One management operation, as the helper names it.
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    Inventory,
    Plan { action: Action, parameters: Map<String, Value> },
    Execute { plan_id: PlanId },
}

impl Operation {
    pub fn name(&self) -> &'static str {
        match self {
            Operation::Inventory => "inventory",
            Operation::Plan { .. } => "plan",
            Operation::Execute { .. } => "execute",
        }
    }

    /// The request bytes: one compact JSON object.
    pub fn request(&self) -> Vec<u8> {
        let value = match self {
            Operation::Inventory => json!({"operation": "inventory"}),
            Operation::Plan { action, parameters } => {
                json!({"operation": "plan", "action": action.as_str(), "parameters": parameters})
            }
            Operation::Execute { plan_id } => json!({"operation": "execute", "plan_id": plan_id.as_str()}),
        };
        serde_json::to_vec(&value).unwrap_or_default()
    }
}

/// What a reply means for the agent.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: Status,
    pub code: Option<String>,
    pub message: String,
    pub result: Option<Value>,
    /// A plan id the helper named (a new plan, or the plan to inspect).
    pub plan_id: Option<String>,
}

/// The sentence every `unknown` carries: what went wrong, and that the agent
/// must inspect before any retry.
pub fn unknown(operation: &str, reason: &str) -> Answer {
    let next = match operation {
        "execute" => {
            "the server may have acted. Do not retry: inspect the plan first (service_inventory, \
                      and ask the operator to run `volce-lab-host show <plan_id>` on the server)."
        }
        "plan" => "a plan may have been recorded. Do not retry blindly: inspect first (service_inventory).",
        _ => {
            "nothing is known about the server from this call. Do not retry blindly: inspect first \
              (cloud_check web_status, or ask the operator)."
        }
    };
    Answer {
        status: Status::Unknown,
        code: None,
        message: format!("The outcome is unknown ({reason}); {next}"),
        result: None,
        plan_id: None,
    }
}

/// A stable machine code: `^[a-z][a-z0-9_]{0,63}$`.
fn is_code(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_lowercase()
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
}

/// Text from the server, made safe to hand to a model and a terminal:
/// hidden characters dropped, at most 300 characters.
pub fn sanitize(text: &str) -> String {
    crate::text::for_model(text, 300)
}

fn plan_id_of(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).and_then(PlanId::parse).map(|id| id.as_str().to_owned())
}

/// Maps the helper's process outcome to an answer, by the wire contract.
pub fn interpret(operation: &str, outcome: &Outcome, mode: Mode) -> Answer {
    let execution = &outcome.execution;
    let reply = || -> Option<Map<String, Value>> {
        // One object on one line: trailing whitespace is the only slack.
        match serde_json::from_slice::<Value>(outcome.stdout.trim_ascii_end()) {
            Ok(Value::Object(map)) => Some(map),
            _ => None,
        }
    };
    match execution.execution_status {
        ExecutionStatus::Ok => {
            let Some(mut map) = reply() else {
                return unknown(operation, "the host helper's reply is not one JSON object");
            };
            let matches = map.get("status").and_then(Value::as_str) == Some("ok")
                && map.get("operation").and_then(Value::as_str) == Some(operation)
                && map.get("result").is_some_and(Value::is_object);
            if !matches {
                return unknown(operation, "the host helper's reply does not follow the contract");
            }
            let result = map.remove("result");
            let plan_id = result.as_ref().and_then(|r| plan_id_of(r.get("plan_id").or_else(|| r.get("id"))));
            let message = match operation {
                "plan" => "The plan is stored; nothing changed yet. Check requires_approval: stop and \
                           remove_image need an operator's approval on the server before service_execute."
                    .to_owned(),
                "execute" => "The helper reports the plan executed; see result.".to_owned(),
                _ => "The helper answered; see result.".to_owned(),
            };
            Answer { status: Status::Ok, code: None, message, result, plan_id }
        }
        ExecutionStatus::NonzeroExit if execution.exit_code == Some(1) => {
            let Some(map) = reply() else {
                return unknown(
                    operation,
                    "the host helper exited 1 without a valid reply; sudo may have refused",
                );
            };
            let text = |key: &str| map.get(key).and_then(Value::as_str);
            match (text("status"), text("code"), text("message")) {
                (Some("rejected"), Some(code), Some(message)) if is_code(code) => Answer {
                    status: Status::Rejected,
                    code: Some(code.to_owned()),
                    message: format!(
                        "The host helper refused the request; nothing changed: {}",
                        sanitize(message)
                    ),
                    result: None,
                    plan_id: None,
                },
                (Some("needs_inspection"), Some("needs_inspection"), Some(message)) => Answer {
                    status: Status::NeedsInspection,
                    code: Some("needs_inspection".to_owned()),
                    message: format!(
                        "The change reached Docker and failed or is uncertain. Stop and ask the operator to \
                         inspect the plan on the server; do not retry. Helper: {}",
                        sanitize(message)
                    ),
                    result: None,
                    plan_id: plan_id_of(map.get("plan_id")),
                },
                _ => unknown(operation, "the host helper exited 1 with a reply outside the contract"),
            }
        }
        ExecutionStatus::NonzeroExit => {
            unknown(operation, "the host helper exited with an unexpected status")
        }
        ExecutionStatus::Timeout => {
            unknown(operation, "no reply before the time limit; the request was killed")
        }
        ExecutionStatus::OutputLimit => {
            unknown(operation, "the reply was larger than 128 KiB; the request was killed")
        }
        ExecutionStatus::Signaled => unknown(operation, "the request ended on a signal"),
        ExecutionStatus::SshOrRemote255 => {
            unknown(operation, "ssh exited 255: the connection or the remote side failed")
        }
        // Nothing was started, so nothing can have happened on the server.
        ExecutionStatus::LaunchFailed => {
            let (status, message) = if mode == Mode::Ssh {
                (Status::SshUnavailable, "The ssh client could not be started; nothing was sent.")
            } else {
                (Status::ExecutionFailed, "sudo could not be started; nothing was sent.")
            };
            Answer { status, code: None, message: message.to_owned(), result: None, plan_id: None }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Execution;

    fn outcome(status: ExecutionStatus, exit: Option<i32>, stdout: &str) -> Outcome {
        let mut execution = Execution::not_started(status);
        execution.exit_code = exit;
        Outcome { execution, stdout: stdout.as_bytes().to_vec(), stderr_len: 0 }
    }

    #[test]
    fn requests_are_single_compact_objects() {
        assert_eq!(Operation::Inventory.request(), br#"{"operation":"inventory"}"#);
        let id = PlanId::parse("0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!(
            Operation::Execute { plan_id: id }.request(),
            br#"{"operation":"execute","plan_id":"0123456789abcdef0123456789abcdef"}"#
        );
        let mut parameters = Map::new();
        parameters.insert("app".into(), json!("a\"b\n$(id)"));
        let request = Operation::Plan { action: Action::Stop, parameters }.request();
        let back: Value = serde_json::from_slice(&request).unwrap();
        assert_eq!(back["parameters"]["app"], "a\"b\n$(id)");
        assert!(!request.contains(&b'\n'), "one line");
    }

    #[test]
    #[allow(clippy::type_complexity)]
    fn the_reply_table_follows_the_contract() {
        let ok = r#"{"status":"ok","operation":"plan","result":{"id":"0123456789abcdef0123456789abcdef"}}"#;
        let answer = interpret("plan", &outcome(ExecutionStatus::Ok, Some(0), &format!("{ok}\n")), Mode::Ssh);
        assert_eq!(answer.status, Status::Ok);
        assert_eq!(answer.plan_id.as_deref(), Some("0123456789abcdef0123456789abcdef"));

        let table: &[(ExecutionStatus, Option<i32>, &str, Status, Option<&str>)] = &[
            (ExecutionStatus::Ok, Some(0), ok, Status::Unknown, None), // wrong operation (asked inventory)
            (ExecutionStatus::Ok, Some(0), "", Status::Unknown, None),
            (ExecutionStatus::Ok, Some(0), "not json", Status::Unknown, None),
            (
                ExecutionStatus::Ok,
                Some(0),
                r#"{"status":"ok","operation":"inventory"}"#,
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
                Some("plan_expired"),
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
                Some("needs_inspection"),
            ),
            (ExecutionStatus::NonzeroExit, Some(1), "", Status::Unknown, None),
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
            let answer = interpret("inventory", &outcome(*execution_status, *exit, stdout), Mode::Ssh);
            assert_eq!(answer.status, *status, "{execution_status:?} {exit:?} {stdout}");
            assert_eq!(answer.code.as_deref(), *code, "{stdout}");
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
    fn helper_messages_are_sanitized() {
        let reply = "{\"status\":\"rejected\",\"code\":\"bad\",\"message\":\"a\\u001b[2J\\u202eb\\nc\"}";
        let answer = interpret("plan", &outcome(ExecutionStatus::NonzeroExit, Some(1), reply), Mode::Local);
        assert_eq!(answer.status, Status::Rejected);
        assert!(answer.message.ends_with("a[2Jbc"), "{}", answer.message);
    }
}
