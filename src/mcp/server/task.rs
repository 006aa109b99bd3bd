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

use std::time::{Duration, Instant};

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, CreateTaskResult, ErrorCode};
use rmcp::task_manager::{TaskContext, TaskExit, TaskOptions};
use serde::Serialize;

use super::wait::{left_secs, pending};
use super::{Member, VolceLab, Watcher};
use crate::vocab::{Code, PlanId};
use crate::wire::answers::read::ListedPlan;

use super::super::envelope::Served;
use super::super::result::Output;
use super::super::rpc::AnswerCode;
use super::super::tools::ToolName;

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
            let open = tokio::select! {
                biased;
                () = context.cancelled() => return Err(TaskExit::Cancelled),
                open = look => open,
            };
            if let Some(left) = still_waits(open) {
                context.set_status_message(status_message(&member.name, plan_id, left));
                continue;
            }
            // Approved, rejected, expired or gone: the host decides and says which.
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
                continue;
            }
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
