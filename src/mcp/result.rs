//! The typed result of every tool call: [`CheckOutput`] for `cloud_check`
//! (one target, a fan-out, or arguments refused) and [`ManagementOutput`]
//! for the four service tools. Pure data. Runs unprivileged inside
//! `volce-lab mcp-serve`.
//!
//! Each type has every field its tool's output schema requires
//! (`super::tools::schema`, whose tests hold a serialized result of each
//! constructor to the schema): a field with nothing to say is `null`, never
//! missing. `structuredContent` is a `serde_json::Value`, whose maps keep
//! their keys sorted, so the JSON a client reads has the same order whatever
//! order the fields are declared in here.
//!
//! Invariants enforced here: `fix` is null exactly when `status` is `ok`
//! ([`Verdict::new`] is the only way to make one), and `target` always
//! means the configured target as the fleet names it (the table's name,
//! which may differ from the ssh alias a check dialled: see [`TargetCheck`]).

use serde::Serialize;
use serde_json::{Map, Value};

use super::rpc::AnswerCode;
use super::sentences;
use super::tools::ToolName;
use crate::config::Mode;
use crate::exec::Execution;
use crate::inspect::{Check, CheckResult, Status};
use crate::logs::AppLog;
use crate::vocab::{Action, PlanId};
use crate::wire::Operation;

/// The fields every result starts with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Base {
    /// The call's id, also in the local audit line (a check's own, which
    /// the inspector made for it).
    pub request_id: String,
    /// UTC, RFC 3339.
    pub timestamp: String,
    pub is_demo: bool,
    pub mode: Mode,
    /// The configured target's name as the fleet names it; `None` for a
    /// fan-out or a call refused before a target was chosen.
    pub target: Option<String>,
}

/// What a result says of its outcome: its status, the machine code of a
/// refusal, the whole sentence, and the one next step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub status: Status,
    pub code: Option<AnswerCode>,
    pub message: String,
    fix: Option<&'static str>,
}

impl Verdict {
    /// The verdict of `status`, with the `fix` of its code: null when it is
    /// ok; else the one next step of its code (`Code::fix`, the same for
    /// every tool), or of its status when it carries no code
    /// (`sentences::status_fix`).
    pub fn new(status: Status, code: Option<AnswerCode>, message: String) -> Verdict {
        let fix = match (status, &code) {
            (Status::Ok, _) => None,
            (_, Some(AnswerCode::Known(code))) => Some(code.fix()),
            (_, Some(AnswerCode::Newer(_))) => Some(sentences::NEWER_CODE_FIX),
            (status, None) => sentences::status_fix(status),
        };
        Verdict { status, code, message, fix }
    }

    /// This verdict with `fix` as its next step in place of its status's
    /// or code's, when this configuration has its own (`Answer::fix`). An
    /// ok verdict keeps no fix.
    pub fn instead(mut self, fix: Option<&'static str>) -> Verdict {
        if self.fix.is_some() && fix.is_some() {
            self.fix = fix;
        }
        self
    }

    /// A fan-out's verdict: its one next step, when not ok, is to read
    /// each entry that is not.
    pub fn of_fan_out(status: Status, message: String) -> Verdict {
        let fix = (status != Status::Ok).then_some(sentences::FAN_OUT_FIX);
        Verdict { status, code: None, message, fix }
    }
}

/// One target's check as `cloud_check` gives it, and each entry of a
/// fan-out's `results`. `target` is the fleet's name for the target, not
/// the alias the inspector dialled ([`CheckResult::target`], which this
/// type does not carry).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetCheck {
    #[serde(flatten)]
    pub base: Base,
    pub check: Check,
    pub exit_code: Option<i32>,
    /// What the target printed, at most 8 KiB; empty when withheld.
    pub output: String,
    pub execution: Option<Execution>,
    #[serde(flatten)]
    pub verdict: Verdict,
}

impl TargetCheck {
    /// The check `result` of the target the fleet calls `name`, with the
    /// code and sentence its outcome carries.
    pub fn new(name: &str, mode: Mode, result: CheckResult, verdict: Verdict) -> TargetCheck {
        let CheckResult { request_id, timestamp, is_demo, check, exit_code, output, execution, .. } = result;
        let base = Base { request_id, timestamp, is_demo, mode, target: Some(name.to_owned()) };
        TargetCheck { base, check, exit_code, output, execution, verdict }
    }
}

/// How many targets of a fan-out answered ok, and how many did not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub ok: usize,
    pub failed: usize,
}

/// The result of `cloud_check`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckOutput {
    #[serde(flatten)]
    pub base: Base,
    #[serde(flatten)]
    pub verdict: Verdict,
    pub exit_code: Option<i32>,
    pub execution: Option<Execution>,
    /// `None` only when the arguments were refused.
    pub check: Option<Check>,
    pub output: String,
    /// A fan-out: one result per target, the ones that are not ok first.
    pub results: Option<Vec<TargetCheck>>,
    pub summary: Option<Summary>,
}

impl CheckOutput {
    /// One target's check.
    pub fn one(check: TargetCheck) -> CheckOutput {
        let TargetCheck { base, check, exit_code, output, execution, verdict } = check;
        CheckOutput {
            base,
            verdict,
            exit_code,
            execution,
            check: Some(check),
            output,
            results: None,
            summary: None,
        }
    }

    /// A check on several targets: one result each, and the summary.
    pub fn fan_out(
        base: Base,
        check: Check,
        verdict: Verdict,
        results: Vec<TargetCheck>,
        summary: Summary,
    ) -> CheckOutput {
        CheckOutput {
            base,
            verdict,
            exit_code: None,
            execution: None,
            check: Some(check),
            output: String::new(),
            results: Some(results),
            summary: Some(summary),
        }
    }

    /// Arguments refused before anything ran.
    pub fn refused(base: Base, verdict: Verdict) -> CheckOutput {
        CheckOutput {
            base,
            verdict,
            exit_code: None,
            execution: None,
            check: None,
            output: String::new(),
            results: None,
            summary: None,
        }
    }
}

/// The result of a service tool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ManagementOutput {
    #[serde(flatten)]
    pub base: Base,
    pub tool: ToolName,
    pub operation: Operation,
    pub action: Option<Action>,
    /// The plan this call is about, when known: the one every result names
    /// `plan_id` (the call's, or the one the helper's answer names).
    pub plan_id: Option<PlanId>,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The host helper's result object when status is ok, as it printed it
    /// (fields this build does not know included), a plan's id named
    /// `plan_id` (`super::rpc::Returned`); `None` otherwise.
    pub result: Option<Map<String, Value>>,
    pub exit_code: Option<i32>,
    pub execution: Option<Execution>,
    /// A rolled-back plan's failed app container's last lines: untrusted
    /// application output.
    pub app_log: Option<AppLog>,
}

/// A call's result, as the client gets it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Output {
    Check(Box<CheckOutput>),
    Management(Box<ManagementOutput>),
}

impl Output {
    pub fn verdict(&self) -> &Verdict {
        match self {
            Output::Check(output) => &output.verdict,
            Output::Management(output) => &output.verdict,
        }
    }

    pub fn verdict_mut(&mut self) -> &mut Verdict {
        match self {
            Output::Check(output) => &mut output.verdict,
            Output::Management(output) => &mut output.verdict,
        }
    }

    /// The result as JSON: always an object. Every field is a string, a
    /// number, a bool or a string-keyed map, so serializing cannot fail;
    /// were it ever to, the client would get `{}` rather than no answer,
    /// and `isError` still says whether the call succeeded.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| Value::Object(Map::new()))
    }
}
