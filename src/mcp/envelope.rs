//! The result envelope every tool call gets, and the audit record it
//! leaves: a refused call, one check, a fan-out of checks, a management
//! call. Pure (the server runs the calls; this shapes what they gave).
//! Runs unprivileged inside `volce-lab mcp-serve`.
//!
//! Invariants enforced here: every result is one of the typed results of
//! `super::result` (which carry the fields the output schemas require,
//! name the target as the fleet does, and give `fix` exactly when the
//! status is not `ok`), and `isError` is true exactly when `status` is not
//! `ok`.

use std::time::Instant;

use rmcp::model::{CallToolResult, ContentBlock};

use super::audit::Record;
use super::fan_out::SharedIdentity;
use super::result::{Base, CheckOutput, ManagementOutput, Output, Summary, TargetCheck, Verdict};
use super::rpc::{self, Answer, AnswerCode};
use super::sentences::{self, message};
use super::tools::ToolName;
use crate::config::Mode;
use crate::exec::{Execution, ExecutionStatus};
use crate::inspect::{Check, CheckResult, Status, WebReply, timestamp};
use crate::vocab::Action;
use crate::vocab::{PlanId, Refusal};
use crate::wire::Operation;

/// One call as served: the typed result plus what its audit line needs.
pub(super) struct Served {
    /// `None` for a call with no result to show (an unknown tool, a
    /// cancelled call).
    pub(super) output: Option<Output>,
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
            output: None,
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

    /// The code the result carries, if any.
    pub(super) fn code(&self) -> Option<&AnswerCode> {
        self.output.as_ref().and_then(|output| output.verdict().code.as_ref())
    }

    /// The result's sentence (empty for a call with no result).
    pub(super) fn message(&self) -> &str {
        self.output.as_ref().map_or("", |output| output.verdict().message.as_str())
    }

    /// The same result with another sentence (the approval wait says why
    /// it kept the helper's answer).
    pub(super) fn with_message(mut self, message: String) -> Served {
        if let Some(output) = &mut self.output {
            output.verdict_mut().message = message;
        }
        self
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
        let value = self.output.as_ref().map_or(serde_json::Value::Null, Output::to_json);
        let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
        result.structured_content = Some(value);
        result.is_error = Some(self.status != Status::Ok);
        result
    }
}

/// A call refused before anything ran: `invalid_arguments` with the code
/// and sentence of the refusal, and every field of the tool's schema.
pub(super) fn refused(base: Base, tool: ToolName, refusal: Refusal, request_id: String) -> Served {
    let verdict = Verdict::new(Status::InvalidArguments, Some(refusal.code.into()), refusal.message);
    let target = base.target.clone();
    let output = match tool.operation() {
        None => Output::Check(Box::new(CheckOutput::refused(base, verdict))),
        Some(operation) => Output::Management(Box::new(ManagementOutput {
            base,
            tool,
            operation,
            action: None,
            plan_id: None,
            verdict,
            result: None,
            exit_code: None,
            execution: None,
            app_log: None,
        })),
    };
    Served { output: Some(output), target, ..Served::bare(Status::InvalidArguments, request_id) }
}

/// One check's result as `cloud_check` gives it for target `name`.
/// `note`: a sentence the target's result carries besides its own (the
/// witness's, `super::witness`, while the target's trail failed it).
pub(super) fn check(name: &str, mode: Mode, result: CheckResult, note: Option<String>) -> Served {
    let (check, status, exit_code) = (result.check, result.status, result.exit_code);
    let execution_status = result.execution.as_ref().map(|e| e.execution_status);
    let target = noted(target_check(name, mode, result), note);
    let request_id = target.base.request_id.clone();
    Served {
        output: Some(Output::Check(Box::new(CheckOutput::one(target)))),
        target: Some(name.to_owned()),
        check: Some(check),
        exit_code,
        execution_status,
        ..Served::bare(status, request_id)
    }
}

/// A fan-out's result: one entry per target (each as a single check's),
/// the not-ok ones first, and the summary (`super::fan_out::gather`).
pub(super) fn fan_out(
    base: Base,
    check: Check,
    results: Vec<(String, CheckResult)>,
    shared: &[SharedIdentity],
    request_id: String,
    note: impl Fn(&str) -> Option<String>,
) -> Served {
    let mode = base.mode;
    let answers = results
        .into_iter()
        .map(|(name, result)| noted(target_check(&name, mode, result), note(&name)))
        .collect();
    let (verdict, results, summary): (Verdict, Vec<TargetCheck>, Summary) =
        super::fan_out::gather(check, answers, shared);
    let status = verdict.status;
    let output = CheckOutput::fan_out(base, check, verdict, results, summary);
    Served {
        output: Some(Output::Check(Box::new(output))),
        check: Some(check),
        ..Served::bare(status, request_id)
    }
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

/// A management call's result for the target `base` names.
pub(super) fn managed(base: Base, facts: Managed, request_id: String) -> Served {
    let Managed { tool, operation, action, plan_id, answer, execution } = facts;
    let Answer { status, code, message, result, plan_id: named, app_log, fix } = answer;
    let plan_id = plan_id.or(named);
    let exit_code = execution.as_ref().and_then(|e| e.exit_code);
    let execution_status = execution.as_ref().map(|e| e.execution_status);
    let target = base.target.clone();
    let output = ManagementOutput {
        base,
        tool,
        operation,
        action,
        plan_id: plan_id.clone(),
        verdict: Verdict::new(status, code, message).instead(fix),
        result: result.map(|returned| returned.object),
        exit_code,
        execution,
        app_log,
    };
    Served {
        output: Some(Output::Management(Box::new(output))),
        target,
        action: action.map(Action::as_str),
        plan_id,
        exit_code,
        execution_status,
        ..Served::bare(status, request_id)
    }
}

/// A check's result for target `name`: the result, named as the fleet
/// names it, with its code and sentence ([`check_words`]).
/// `target` with `note` after its sentence.
fn noted(mut target: TargetCheck, note: Option<String>) -> TargetCheck {
    if let Some(note) = note {
        target.verdict.message = format!("{} {note}", target.verdict.message);
    }
    target
}

fn target_check(name: &str, mode: Mode, result: CheckResult) -> TargetCheck {
    let verdict = if no_gateway_yet(&result) {
        // Not unhealthy, and not healthy either: status stays check_failed
        // (nothing serves), but the words say why and what would change it.
        Verdict::new(result.status, None, sentences::NO_GATEWAY_YET.into())
            .instead(Some(sentences::NO_GATEWAY_YET_FIX))
    } else {
        let (code, sentence) = check_words(&result);
        Verdict::new(result.status, code, sentence)
    };
    TargetCheck::new(name, mode, result, verdict)
}

/// A web_status whose helper answered with no gateway at all: a server
/// volce-lab has deployed nothing on yet.
fn no_gateway_yet(result: &CheckResult) -> bool {
    matches!(
        (result.check, result.status, result.is_demo, &result.reply),
        (Check::WebStatus, Status::CheckFailed, false, Some(WebReply::Gateways(gateways))) if gateways.is_empty()
    )
}

/// The code and sentence of a check's result: the status's sentence,
/// except for a web_status that is ok while apps are stopped on purpose
/// (it names them), or that the helper refused (its code and its whole
/// sentence, as every management tool gives them for the same cause).
fn check_words(result: &CheckResult) -> (Option<AnswerCode>, String) {
    let plain = || message(result.status, result.is_demo).to_owned();
    // The reply as web_status read it: never parsed again here.
    match (result.check, result.status, result.is_demo, &result.reply) {
        (Check::WebStatus, Status::Ok, false, Some(WebReply::Gateways(gateways))) => {
            (None, crate::inspect::stopped_sentence_of(gateways).unwrap_or_else(plain))
        }
        (Check::WebStatus, Status::CheckFailed, false, Some(WebReply::Gateways(gateways))) => {
            (None, crate::inspect::https_sentence_of(gateways).unwrap_or_else(plain))
        }
        (Check::WebStatus, Status::Rejected, false, Some(WebReply::Refused(refusal))) => {
            let answer = rpc::rejected(refusal.code.into(), &refusal.message);
            (answer.code, answer.message)
        }
        _ => (None, plain()),
    }
}
