//! The controller's part of "every request leaves an audit row": naming
//! the request it serves, and ending it in the trail. Runs as root inside
//! the host helper.
//!
//! Invariant: a request's reply is sent only after its row is committed.
//! Rows of state changes are written in the change's own transaction
//! (stamped with the request, `Store::begin_request`); a request that
//! changed nothing gets its `request` row here, and if that row cannot be
//! written the caller answers `audit_unavailable` instead of the result.

use super::{Controller, Liveness};
use crate::control::Clock;
use crate::docker::Engine;
use crate::store::{AuditOutcome, RequestEnd, RequestMeta};
use crate::vocab::Action;
use crate::vocab::{Code, PlanId, Refusal};

/// The refusal of a request whose audit row could not be written.
pub fn audit_unavailable() -> Refusal {
    Refusal::new(
        Code::AuditUnavailable,
        "The host could not write this request's audit row (its state database is full or read-only); \
         nothing was changed and nothing is answered. The operator should run volce-lab-host doctor.",
    )
}

impl<E: Engine, C: Clock, L: Liveness> Controller<E, C, L> {
    /// Names the request this controller serves (its audit rows carry it).
    pub fn begin_request(&mut self, meta: RequestMeta) {
        self.store.begin_request(meta);
    }

    /// Ends the request being served in the audit trail (see
    /// `Store::end_request`). `Err(audit_unavailable)` when the row could
    /// not be written: the caller must then answer that, not its result.
    pub fn end_request(
        &mut self,
        outcome: AuditOutcome,
        code: Option<Code>,
        plan_id: Option<&PlanId>,
        action: Option<Action>,
    ) -> Result<(), Refusal> {
        let end = RequestEnd {
            at: self.clock.now(),
            outcome,
            code,
            plan_id: plan_id.map(PlanId::as_str),
            action: action.map(Action::as_str),
        };
        self.store.end_request(end).map_err(|error| {
            // Below the free-space floor nothing was written and nothing is
            // answered but the refusal that says what to do (issue 22).
            if crate::store::space::is_below_floor(&error) { error.refusal() } else { audit_unavailable() }
        })
    }

    /// [`Controller::end_request`] for a result: `Ok` is outcome `ok`, a
    /// refusal is `refused` with its code. Returns the result, or the
    /// `audit_unavailable` refusal when the row could not be written.
    pub fn answer<T>(
        &mut self,
        result: Result<T, Refusal>,
        plan_id: Option<&PlanId>,
        action: Option<Action>,
    ) -> Result<T, Refusal> {
        let (outcome, code) = match &result {
            Ok(_) => (AuditOutcome::Ok, None),
            Err(refusal) => (AuditOutcome::Refused, Some(refusal.code)),
        };
        self.end_request(outcome, code, plan_id, action)?;
        result
    }

    /// The audit proof beside this request's reply (`Tx::audit_proof`),
    /// read after its row was written; `None` when the trail cannot be read.
    pub fn audit_proof(
        &mut self,
        witnessed: Option<&crate::wire::witness::Witnessed>,
    ) -> Option<crate::wire::witness::AuditProof> {
        self.store.read(|tx| tx.audit_proof(witnessed)).ok().flatten()
    }
}
