//! The result envelope every tool call gets, and the audit record it
//! leaves: a refused call, one check, a fan-out of checks, a management
//! call. Pure (the server runs the calls; this shapes what they gave).
//! Runs unprivileged inside `volce-lab mcp-serve`.
//!
//! Invariants enforced here: every result carries the fields its tool's
//! output schema requires (`super::tools::schema`), names its target as the
//! fleet does (the table's name, which may differ from the alias dialled),
//! `isError` is true exactly when `status` is not `ok`, and `fix` (the one
//! next step) is null exactly when it is.

use std::time::Instant;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};

use super::audit::Record;
use super::rpc::{self, Answer, AnswerCode};
use super::sentences::{self, message};
use super::tools::ToolName;
use crate::exec::{Execution, ExecutionStatus};
use crate::inspect::{Check, CheckResult, Status, timestamp};
use crate::vocab::Action;
use crate::vocab::{PlanId, Refusal};
use crate::wire::Operation;

/// One call as served: the structured result plus what its audit line needs.
pub(super) struct Served {
    pub(super) value: Value,
    pub(super) status: Status,
    pub(super) request_id: String,
    /// The target's name; `None` for a fan-out or a call refused before
    /// a target was chosen.
    pub(super) target: Option<String>,
    pub(super) check: Option<Check>,
    pub(super) action: Option<&'static str>,
    pub(super) plan_id: Option<PlanId>,
    pub(super) exit_code: Option<i32>,
    pub(super) execution_status: Option<ExecutionStatus>,
}

impl Served {
    /// A call with no result to show (an unknown tool, a cancelled call):
    /// only its audit line.
    pub(super) fn bare(status: Status, request_id: String) -> Served {
        Served {
            value: Value::Null,
            status,
            request_id,
            target: None,
            check: None,
            action: None,
            plan_id: None,
            exit_code: None,
            execution_status: None,
        }
    }

    /// The local audit line of this call (`tool` is `None` for a name
    /// outside the five, recorded as a fixed word, never echoed).
    pub(super) fn record(&self, tool: Option<ToolName>, started: Instant) -> Record {
        Record {
            time: timestamp(),
            request_id: self.request_id.clone(),
            target: self.target.clone(),
            tool: tool.map(ToolName::as_str),
            check: self.check.map(Check::as_str),
            action: self.action,
            plan_id: self.plan_id.clone(),
            status: if tool.is_some() { self.status.as_str() } else { "unknown_tool" },
            exit_code: self.exit_code,
            execution_status: self.execution_status,
            process_outcome: self.execution_status.and_then(crate::exec::ProcessOutcome::of_status),
            duration_ms: started.elapsed().as_millis() as u64,
        }
    }

    /// The MCP result: `structuredContent`, the same JSON as text, and
    /// `isError` exactly when the status is not ok.
    pub(super) fn tool_result(&self) -> CallToolResult {
        let mut result = CallToolResult::success(vec![ContentBlock::text(self.value.to_string())]);
        result.structured_content = Some(self.value.clone());
        result.is_error = Some(self.status != Status::Ok);
        result
    }
}

/// A call refused before anything ran: `invalid_arguments` with the code
/// and sentence of the refusal, and every field of the tool's schema.
pub(super) fn refused(
    mut map: Map<String, Value>,
    tool: ToolName,
    target: Option<String>,
    refusal: Refusal,
    request_id: String,
) -> Served {
    map.insert("status".into(), json!(Status::InvalidArguments));
    map.insert("code".into(), json!(refusal.code));
    map.insert("message".into(), json!(refusal.message));
    map.insert("fix".into(), fix(Status::InvalidArguments, Some(&refusal.code.into())));
    map.insert("exit_code".into(), Value::Null);
    map.insert("execution".into(), Value::Null);
    match tool.operation() {
        None => {
            map.insert("check".into(), Value::Null);
            map.insert("output".into(), json!(""));
            map.insert("results".into(), Value::Null);
            map.insert("summary".into(), Value::Null);
        }
        Some(operation) => {
            map.insert("tool".into(), json!(tool.as_str()));
            map.insert("operation".into(), json!(operation));
            map.insert("action".into(), Value::Null);
            map.insert("plan_id".into(), Value::Null);
            map.insert("result".into(), Value::Null);
            map.insert("app_log".into(), Value::Null);
        }
    }
    Served { value: Value::Object(map), target, ..Served::bare(Status::InvalidArguments, request_id) }
}

/// One check's result as `cloud_check` gives it for target `name`.
pub(super) fn check(name: &str, result: CheckResult) -> Served {
    let mut value = check_value(name, &result);
    if let Value::Object(map) = &mut value {
        map.insert("results".into(), Value::Null);
        map.insert("summary".into(), Value::Null);
    }
    Served {
        value,
        target: Some(name.to_owned()),
        check: Some(result.check),
        exit_code: result.exit_code,
        execution_status: result.execution.as_ref().map(|e| e.execution_status),
        ..Served::bare(result.status, result.request_id.clone())
    }
}

/// A fan-out's result: one entry per target (each as a single check's),
/// the not-ok ones first, and the summary (`super::fan_out::gather`).
pub(super) fn fan_out(
    mut map: Map<String, Value>,
    check: Check,
    results: Vec<(String, CheckResult)>,
    request_id: String,
) -> Served {
    let answers = results
        .iter()
        .map(|(name, result)| (name.clone(), check_value(name, result), result.status))
        .collect();
    let (status, sentence, results, summary) = super::fan_out::gather(check, answers);
    map.insert("status".into(), json!(status));
    map.insert("code".into(), Value::Null);
    map.insert("message".into(), json!(sentence));
    map.insert("fix".into(), if status == Status::Ok { Value::Null } else { json!(sentences::FAN_OUT_FIX) });
    map.insert("exit_code".into(), Value::Null);
    map.insert("execution".into(), Value::Null);
    map.insert("check".into(), json!(check));
    map.insert("output".into(), json!(""));
    map.insert("results".into(), results);
    map.insert("summary".into(), summary);
    Served { value: Value::Object(map), check: Some(check), ..Served::bare(status, request_id) }
}

/// What one management call gave: the facts its result and audit line show.
pub(super) struct Managed {
    pub(super) tool: ToolName,
    pub(super) operation: Operation,
    pub(super) action: Option<Action>,
    /// The plan the call named; the helper's answer may name one instead.
    pub(super) plan_id: Option<PlanId>,
    pub(super) answer: Answer,
    pub(super) execution: Option<Execution>,
}

/// A management call's result for target `name`.
pub(super) fn managed(
    mut map: Map<String, Value>,
    facts: Managed,
    name: String,
    request_id: String,
) -> Served {
    let Managed { tool, operation, action, plan_id, answer, execution } = facts;
    map.insert("app_log".into(), json!(answer.app_log));
    let action = action.map(Action::as_str);
    let plan_id = plan_id.or(answer.plan_id);
    let exit_code = execution.as_ref().and_then(|e| e.exit_code);
    let execution_status = execution.as_ref().map(|e| e.execution_status);
    map.insert("tool".into(), json!(tool.as_str()));
    map.insert("operation".into(), json!(operation));
    map.insert("action".into(), json!(action));
    map.insert("plan_id".into(), json!(plan_id));
    map.insert("status".into(), json!(answer.status));
    map.insert("code".into(), json!(answer.code));
    map.insert("message".into(), json!(answer.message));
    map.insert("fix".into(), fix(answer.status, answer.code.as_ref()));
    map.insert("result".into(), answer.result.unwrap_or(Value::Null));
    map.insert("exit_code".into(), json!(exit_code));
    map.insert("execution".into(), json!(execution));
    Served {
        value: Value::Object(map),
        target: Some(name),
        action,
        plan_id,
        exit_code,
        execution_status,
        ..Served::bare(answer.status, request_id)
    }
}

/// A check's result object for target `name`: the result, named as the
/// fleet names it, with its code and sentence ([`check_words`]).
fn check_value(name: &str, result: &CheckResult) -> Value {
    let mut value = serde_json::to_value(result).unwrap_or_else(|_| json!({}));
    if let Value::Object(map) = &mut value {
        let (code, sentence) = check_words(result);
        map.insert("target".into(), json!(name));
        map.insert("code".into(), json!(code));
        map.insert("fix".into(), fix(result.status, code.as_ref()));
        map.insert("message".into(), json!(sentence));
    }
    value
}

/// The `fix` of a result: null when it is ok; else the one next step of its
/// code (`Code::fix`, the same for every tool), or of its status when it
/// carries no code (`sentences::status_fix`).
fn fix(status: Status, code: Option<&AnswerCode>) -> Value {
    match (status, code) {
        (Status::Ok, _) => Value::Null,
        (_, Some(AnswerCode::Known(code))) => json!(code.fix()),
        (_, Some(AnswerCode::Newer(_))) => json!(sentences::NEWER_CODE_FIX),
        (status, None) => json!(sentences::status_fix(status)),
    }
}

/// The code and sentence of a check's result: the status's sentence,
/// except for a web_status that is ok while apps are stopped on purpose
/// (it names them), or that the helper refused (its code and its whole
/// sentence, as every management tool gives them for the same cause).
fn check_words(result: &CheckResult) -> (Option<AnswerCode>, String) {
    let plain = || message(result.status, result.is_demo).to_owned();
    match (result.check, result.status, result.is_demo) {
        (Check::WebStatus, Status::Ok, false) => {
            (None, crate::inspect::stopped_sentence(&result.output).unwrap_or_else(plain))
        }
        (Check::WebStatus, Status::Rejected, false) => {
            match crate::wire::Reply::parse(result.output.as_bytes()) {
                Ok(crate::wire::Reply::Rejected { refusal, .. }) => {
                    let answer = rpc::rejected(refusal.code.into(), &refusal.message);
                    (answer.code, answer.message)
                }
                _ => (None, plain()),
            }
        }
        _ => (None, plain()),
    }
}
