//! Waiting for the operator as a task of the Tasks extension
//! (`io.modelcontextprotocol/tasks`, issue 24): when the request declared
//! the extension and the host answered `approval_required`, the call
//! answers a task (`working`, a status message naming the plan, the target
//! and the time left) and the server watches the plan's state on the host
//! (the read-only inventory, over the target's existing connection), once
//! a second at most, until the plan is approved, no longer open, or
//! expired. Runs unprivileged in the MCP server.
//!
//! Security invariant: nothing the client sends approves or executes
//! anything. The task id only names the wait (`tasks/get`), and
//! `tasks/cancel` only stops it; the one execute is sent when the host
//! lists the plan approved (or no longer lists it, so the host says why),
//! and the host checks the approval again when it claims the plan.
//! Approved: the task completes with the normal result, and the execute's
//! progress goes to the call's progress token as it would have without
//! the wait. Rejected or
//! expired: the task fails with that code. Cancelled: nothing runs and the
//! plan still waits on the server.
//!
//! A cancel is honest (issue 38): it answers OK only while the task still
//! waits. Once the watch has claimed the plan for its execute (under the
//! same lock a cancel takes, so the two cannot cross), or the task has
//! ended, `tasks/cancel` is an error naming the plan as executing or done;
//! the rmcp task manager alone would acknowledge any cancel of a known task.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, CreateTaskResult, ErrorCode, TaskStatus};
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use serde::Serialize;
use serde_json::json;

use super::wait::{left_secs, pending};
use super::{Member, VolceLab, Watcher};
use crate::vocab::{Code, PlanId};
use crate::wire::answers::read::ListedPlan;

use super::super::envelope::Served;
use super::super::result::Output;
use super::super::rpc::AnswerCode;
use super::super::tools::{ToolName, shown};

/// How often the client is told to poll `tasks/get`.
pub const POLL_INTERVAL_MS: u64 = 2_000;

/// How often the server looks at the plan on the host: well inside the
/// issue's 2.5 s from approval to execution.
pub const LOOK_EVERY: Duration = Duration::from_millis(1_000);

/// How often a look that found no plan may meet a host that still says
/// `approval_required` (a failed inventory) before the task ends with it.
const HICCUPS: u32 = 3;

/// How long a finished task stays readable beyond the plan's time left.
const TTL_MARGIN_MS: u64 = 120_000;

/// The JSON-RPC error code of a failed task; `data.code` says why.
const TASK_FAILED: ErrorCode = ErrorCode(-32000);

/// Where each task's watch stands, by task id: which plan it waits for,
/// and whether it has claimed the plan for its execute. Entries leave when
/// the task manager has forgotten the task (its retention ended), so the
/// map holds no more than the manager does.
#[derive(Default)]
pub struct Phases(Mutex<HashMap<String, (PlanId, Phase)>>);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    /// Looking at the host; a cancel still stops everything.
    Waiting,
    /// The execute is sent (or about to be): too late for a cancel.
    Claimed,
}

impl Phases {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (PlanId, Phase)>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn watch(&self, task_id: &str, plan_id: &PlanId, tasks: &TaskManager) {
        let mut phases = self.lock();
        phases.retain(|id, _| tasks.get_task(id).is_ok());
        phases.insert(task_id.to_owned(), (plan_id.clone(), Phase::Waiting));
    }

    /// Claims the plan for the execute unless a cancel came first; the
    /// check and the claim happen under the lock `cancel` holds while it
    /// records a cancel, so exactly one of the two wins.
    fn claim(&self, context: &TaskContext) -> bool {
        let mut phases = self.lock();
        if context.is_cancel_requested() {
            return false;
        }
        if let Some((_, phase)) = phases.get_mut(context.task_id()) {
            *phase = Phase::Claimed;
        }
        true
    }

    /// The host answered that the plan still waits (nothing ran): a cancel
    /// may stop the wait again.
    fn unclaim(&self, task_id: &str) {
        if let Some((_, phase)) = self.lock().get_mut(task_id) {
            *phase = Phase::Waiting;
        }
    }

    /// `tasks/cancel`: OK while the task waits (or was already cancelled);
    /// an error naming the plan once it is executing or the task has ended.
    pub fn cancel(&self, task_id: &str, tasks: &TaskManager) -> Result<(), McpError> {
        let phases = self.lock();
        let status = known(task_id, tasks.get_task(task_id))?.task.status;
        let Some((plan_id, phase)) = phases.get(task_id) else {
            return known(task_id, tasks.cancel_task(task_id));
        };
        match (status, phase) {
            (TaskStatus::Cancelled, _) => Ok(()),
            (TaskStatus::Completed | TaskStatus::Failed, _) => Err(too_late(plan_id, "done")),
            (_, Phase::Claimed) => Err(too_late(plan_id, "executing")),
            (_, Phase::Waiting) => known(task_id, tasks.cancel_task(task_id)),
        }
    }
}

/// The task manager's answer for `task_id`, whose only error is an unknown
/// id; that error echoed the whole id the client sent (a forged one of
/// 5,000 characters came back whole, issue 38), so it is replaced by one
/// quoting at most a short, escaped prefix. Ids are random UUIDs.
pub fn known<T>(task_id: &str, answer: Result<T, McpError>) -> Result<T, McpError> {
    answer.map_err(|_| McpError::invalid_params(format!("unknown task {}", shown(task_id)), None))
}

/// The error of a cancel that came too late: nothing was stopped.
fn too_late(plan_id: &PlanId, state: &str) -> McpError {
    let message = match state {
        "executing" => format!(
            "too late to cancel: plan {plan_id} is executing on the host; the task ends with its result \
             (tasks/get)"
        ),
        _ => format!(
            "too late to cancel: the task of plan {plan_id} is done; tasks/get has its result, and what \
             ran stays as it is"
        ),
    };
    McpError::invalid_request(message, Some(json!({"plan_id": plan_id.to_string(), "plan": state})))
}

/// "awaiting operator approval of plan … on web-1, 8 min left".
fn status_message(target: &str, plan_id: &PlanId, left_secs: u64) -> String {
    let left = match left_secs {
        0..60 => format!("{left_secs} s left"),
        _ => format!("{} min left", left_secs.div_ceil(60)),
    };
    format!(
        "awaiting operator approval of plan {plan_id} on {target}, {left}; the operator reviews it with \
         `sudo volce-lab-host show {plan_id}` on the server"
    )
}

/// The status message once the wait is over (issue 37: it said "awaiting
/// operator approval" to the end, even on a completed task).
fn ended_message(target: &str, plan_id: &PlanId, end: End<'_>) -> String {
    match end {
        End::Cancelled => {
            format!("cancelled: nothing ran; plan {plan_id} still waits for the operator on {target}")
        }
        End::Executing => format!("plan {plan_id} on {target} left the wait; executing it now"),
        End::Served(served) => match served.code() {
            Some(&AnswerCode::Known(Code::PlanRejected)) => {
                format!("the operator rejected plan {plan_id} on {target}; nothing ran")
            }
            Some(&AnswerCode::Known(Code::PlanExpired)) => {
                format!("plan {plan_id} on {target} expired before an approval; nothing ran")
            }
            _ => format!(
                "plan {plan_id} on {target} ended: {}; tasks/get has the whole result",
                served.status.as_str()
            ),
        },
    }
}

/// Where a wait ended, for [`ended_message`].
enum End<'a> {
    Cancelled,
    Executing,
    Served(&'a Served),
}

/// Whether the plan still waits: listed, pending, not approved, unexpired.
fn still_waits(open: Option<ListedPlan>) -> Option<u64> {
    let plan = pending(open).filter(|listed| !listed.plan.approved)?;
    Some(left_secs(&plan)).filter(|&left| left > 0)
}

/// A failed task's error `data`: why, and the execute's whole result.
#[derive(Serialize)]
struct Failed<'a> {
    code: Code,
    result: &'a Option<Output>,
}

/// The task's end from the execute's result: rejected or expired fail with
/// that code, anything else completes with the normal result.
fn settle(served: &Served) -> Result<CallToolResult, TaskExit> {
    match served.code() {
        Some(&AnswerCode::Known(code @ (Code::PlanRejected | Code::PlanExpired))) => {
            let message = match served.message() {
                "" => code.as_str().to_owned(),
                message => message.to_owned(),
            };
            let data = serde_json::to_value(Failed { code, result: &served.output }).ok();
            Err(TaskExit::Error(McpError::new(TASK_FAILED, message, data)))
        }
        _ => Ok(served.tool_result()),
    }
}

impl VolceLab {
    /// The task answered instead of `approval_required`, if the plan still
    /// waits (otherwise the caller keeps today's answer).
    pub(super) fn watch_as_task(
        &self,
        member: &Member,
        plan_id: PlanId,
        request_id: String,
        open: Option<ListedPlan>,
        progress: Option<Watcher>,
    ) -> Option<CreateTaskResult> {
        let left = still_waits(open)?;
        let options = TaskOptions::new()
            .with_ttl_ms(left * 1_000 + TTL_MARGIN_MS)
            .with_poll_interval_ms(POLL_INTERVAL_MS)
            .with_status_message(status_message(&member.name, &plan_id, left));
        let (this, member) = (self.clone(), member.clone());
        let task = self.tasks.spawn(options, move |context| {
            // Before the client can know the id: a cancel always finds it.
            this.task_phases.watch(context.task_id(), &plan_id, &this.tasks);
            Box::pin(async move { this.watch(&member, &plan_id, &request_id, progress, &context).await })
        });
        Some(CreateTaskResult::new(task))
    }

    /// The wait of the module header; `Err(Cancelled)` when the client
    /// cancelled it (nothing ran).
    async fn watch(
        &self,
        member: &Member,
        plan_id: &PlanId,
        request_id: &str,
        progress: Option<Watcher>,
        context: &TaskContext,
    ) -> Result<CallToolResult, TaskExit> {
        let mut started = Instant::now();
        let mut hiccups = 0;
        loop {
            let look = async {
                tokio::time::sleep(LOOK_EVERY).await;
                self.open_plan(member, plan_id, request_id).await
            };
            // A cancel drops the look (a read-only inventory), never an execute.
            let cancelled = || {
                context.set_status_message(ended_message(&member.name, plan_id, End::Cancelled));
                Err(TaskExit::Cancelled)
            };
            let open = tokio::select! {
                biased;
                () = context.cancelled() => return cancelled(),
                open = look => open,
            };
            if let Some(left) = still_waits(open) {
                context.set_status_message(status_message(&member.name, plan_id, left));
                continue;
            }
            // Approved, rejected, expired or gone: the host decides and says which.
            // A cancel that came after the look still wins here, never after.
            if !self.task_phases.claim(context) {
                return cancelled();
            }
            context.set_status_message(ended_message(&member.name, plan_id, End::Executing));
            // The call's progress token stays valid for the task's life
            // (the Tasks extension), so the execute reports progress as a
            // call that was never made to wait does.
            let served = self.execute_once(member, plan_id, request_id, progress.clone()).await;
            self.audit(Some(ToolName::ServiceExecute), &served, started);
            // Still waiting: the look failed (the inventory did not answer),
            // not the plan; look again, a few times at most.
            if super::wait::waits_for_approval(&served) && hiccups < HICCUPS {
                hiccups += 1;
                started = Instant::now();
                self.task_phases.unclaim(context.task_id());
                continue;
            }
            context.set_status_message(ended_message(&member.name, plan_id, End::Served(&served)));
            return settle(&served);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_message_names_the_plan_the_target_and_the_time_left() {
        // Tried: minutes rounded up, seconds under a minute.
        let id = PlanId::parse("0123456789abcdef0123456789abcdef").unwrap();
        let message = status_message("web-1", &id, 470);
        assert!(
            message.starts_with(&format!("awaiting operator approval of plan {id} on web-1, 8 min left"))
        );
        assert!(status_message("web-1", &id, 42).contains(", 42 s left"));
    }
}
