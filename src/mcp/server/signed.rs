//! `service_execute` carrying an approval the operator signed on their own
//! device (issue 42). Runs unprivileged in the MCP server.
//!
//! Security invariant: the server only carries the text. The host verifies
//! the signature against its own `allowed_signers` and its own statement of
//! the plan, and records the approval or refuses it; the execute is sent
//! only after the host said the approval is recorded (or was already), and
//! the host checks the approval again when it claims the plan.

use super::wait::Waiter;
use super::{Handled, Member, VolceLab, Watcher};
use crate::inspect::Status;
use crate::vocab::{Code, PlanId};
use crate::wire::signed::SignedApproval;
use crate::wire::{Operation, Request};

use super::super::envelope;
use super::super::rpc::AnswerCode;
use super::super::tools::ToolName;

impl VolceLab {
    /// Hands `signed` to the host, then executes as a call without it does.
    pub(super) async fn execute_signed(
        &self,
        member: &Member,
        plan_id: PlanId,
        signed: SignedApproval,
        request_id: String,
        progress: Option<Watcher>,
        waiter: Waiter,
    ) -> Handled {
        let request = Request::signed_approval(&plan_id, &signed);
        let (answer, execution) = self.ask(member, &request, &request_id, None).await;
        let recorded =
            answer.status == Status::Ok || answer.code == Some(AnswerCode::Known(Code::AlreadyApproved));
        if !recorded {
            let base = self.base(Some(member), &request_id);
            let facts = envelope::Managed {
                tool: ToolName::ServiceExecute,
                operation: Operation::SignedApproval,
                action: None,
                plan_id: Some(plan_id),
                answer,
                execution,
            };
            return envelope::managed(base, facts, request_id).into();
        }
        self.execute_waiting(member, plan_id, request_id, progress, waiter).await
    }
}
