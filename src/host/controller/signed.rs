//! The controller's part of approvals signed on the operator's own device
//! (issue 42): the statement the agent fetches for the operator to sign,
//! and the approval the agent carries back. Runs as root inside the host
//! helper's rpc pipeline.
//!
//! Security invariant: [`Controller::approve_signed`] records an approval
//! only for a signature the host verified (`crate::host::signed`) over the
//! statement this host renders, byte for byte, from its own record of the
//! plan; then every check of the terminal's `approve` applies to the
//! signer as it would to an operator at the terminal (an approver, not the
//! requester, a pending plan in time, under the same policy).

use sha2::{Digest as _, Sha256};

use super::operator::may_approve;
use super::{Controller, Liveness, state_allows_use};
use crate::control::{Clock, canonical};
use crate::docker::Engine;
use crate::host::signed::statement::{self, HostIdentity};
use crate::host::signed::{Signer, Verifier};
use crate::store::StoredPlan;
use crate::vocab::{Code, PlanId, Refusal, refuse};
use crate::wire::answers::statement::ApprovalStatement;
use crate::wire::rollout::RolloutStatement;
use crate::wire::signed::{NAMESPACE, SignedApproval, statement_field};

impl<E: Engine, C: Clock, L: Liveness> Controller<E, C, L> {
    /// The statement of one of `caller`'s plans that waits for approval.
    pub fn statement(
        &mut self,
        id: &PlanId,
        caller: &str,
        host: &HostIdentity,
    ) -> Result<ApprovalStatement, Refusal> {
        let stored = self.load(id, caller)?;
        if stored.plan.requester != caller {
            return refuse(Code::PlanNotFound, "No plan of yours has this id.");
        }
        if !stored.plan.requires_approval {
            return refuse(
                Code::ApprovalNotRequired,
                "This plan needs no approval, so it has no statement to sign; execute it as it is.",
            );
        }
        state_allows_use(&stored)?;
        if stored.approval.is_some() {
            return refuse(Code::AlreadyApproved, "This plan is already approved; execute it.");
        }
        Ok(ApprovalStatement {
            plan_id: id.clone(),
            namespace: NAMESPACE.to_owned(),
            text: statement::render(host, &stored),
            host: host.line(),
        })
    }

    /// Records the approval `approval` carries for plan `id`, if its
    /// signature verifies and it signs this host's statement of that plan.
    /// The checks, in order, each refusal with its own code: the text's
    /// shape; the signature (`Verifier::verify`); the statement's host,
    /// then its plan; the plan; the whole statement; then the terminal's.
    pub fn approve_signed(
        &mut self,
        id: &PlanId,
        caller: &str,
        approval: &str,
        verifier: &Verifier,
    ) -> Result<StoredPlan, Refusal> {
        let signed = SignedApproval::parse(approval)?;
        let signer = verifier.verify(&self.policy, &signed)?;
        if signed.is_rollout() {
            return self.approve_rollout(id, caller, &signed, &signer, &verifier.identity);
        }
        let ours = verifier.identity.line();
        if statement_field(&signed.statement, "host") != Some(ours.as_str()) {
            return refuse(
                Code::ApprovalForAnotherHost,
                format!(
                    "{} signed a statement of another host, not of this one ({}); nothing was recorded. An \
                     approval counts only on the host whose statement was signed.",
                    signer.principal,
                    crate::text::for_terminal(&ours)
                ),
            );
        }
        if statement_field(&signed.statement, "plan") != Some(id.as_str()) {
            return refuse(
                Code::ApprovalForAnotherPlan,
                format!(
                    "{} signed the statement of another plan, not of plan {id}; nothing was recorded. An \
                     approval counts only for the plan whose statement was signed.",
                    signer.principal
                ),
            );
        }
        let stored = self.load(id, caller)?;
        if signed.statement != statement::render(&verifier.identity, &stored) {
            return Err(mismatch(&signer, id));
        }
        may_approve(&self.policy, &stored, &signer.principal).map_err(nothing_recorded)?;
        self.record_approval(id, &stored.plan.digest, &signer.principal, Some(&signer.signed_by()))
            .map_err(nothing_recorded)
    }
}

impl<E: Engine, C: Clock, L: Liveness> Controller<E, C, L> {
    /// The rest of [`Controller::approve_signed`] for a rollout's statement
    /// (issue 43), whose signature verified: this host's own line, its
    /// plan, then that plan's whole statement by its hash, and the action
    /// and parameters the operator read at the top, then the terminal's
    /// checks. The approval row keeps the rollout statement's hash, the
    /// same on every host of the rollout.
    fn approve_rollout(
        &mut self,
        id: &PlanId,
        caller: &str,
        signed: &SignedApproval,
        signer: &Signer,
        host: &HostIdentity,
    ) -> Result<StoredPlan, Refusal> {
        let rollout = RolloutStatement::parse(&signed.statement)?;
        let ours = host.line();
        let Some(entry) = rollout.entry_for(&ours) else {
            return refuse(
                Code::ApprovalForAnotherHost,
                format!(
                    "{} signed rollout {} for other hosts; it names no line for this one ({}). Nothing was \
                     recorded: a rollout approves a plan only on the hosts it lists. Plan a rollout that names this \
                     server, or approve this plan at its terminal.",
                    signer.principal,
                    rollout.rollout_id,
                    crate::text::for_terminal(&ours)
                ),
            );
        };
        if entry.plan_id != *id {
            return refuse(
                Code::ApprovalForAnotherPlan,
                format!(
                    "{} signed rollout {} for plan {} on this host, not for plan {id}; nothing was recorded. Run \
                     the rollout whose line names this plan (service_execute with its `rollout`).",
                    signer.principal, rollout.rollout_id, entry.plan_id
                ),
            );
        }
        let stored = self.load(id, caller)?;
        let own = statement::render(host, &stored);
        // Parameters that do not serialize could never equal what was signed.
        let parameters = canonical::to_string(&stored.plan.parameters).ok();
        if crate::text::hex(&Sha256::digest(own.as_bytes())) != entry.statement_sha256
            || rollout.action != stored.plan.action
            || parameters.as_deref() != Some(rollout.parameters.as_str())
        {
            return Err(Refusal::new(
                Code::StatementMismatch,
                format!(
                    "{} signed rollout {} whose line for plan {id} does not match this host's statement of it (the \
                     action, a parameter, the requester, a time or the digest differs): what was signed is not \
                     what would run. Nothing was recorded; the operator signs what `volce-lab approve --rollout` \
                     prints after it checked each server.",
                    signer.principal, rollout.rollout_id
                ),
            ));
        }
        may_approve(&self.policy, &stored, &signer.principal).map_err(nothing_recorded)?;
        self.record_approval(id, &stored.plan.digest, &signer.principal, Some(&signer.signed_by()))
            .map_err(nothing_recorded)
    }
}

/// The terminal's refusals say what is wrong with the plan or the
/// approver; the agent carrying a signature is also told that it counted
/// for nothing.
fn nothing_recorded(refusal: Refusal) -> Refusal {
    if refusal.message.contains("othing was") {
        return refusal;
    }
    Refusal::new(refusal.code, format!("{} The signed approval was not recorded.", refusal.message))
}

fn mismatch(signer: &Signer, id: &PlanId) -> Refusal {
    Refusal::new(
        Code::StatementMismatch,
        format!(
            "{} signed a statement of plan {id} that differs from this host's (a parameter, the requester, \
             a time or the digest is not what the host recorded): what was signed is not what would run. \
             Nothing was recorded; the operator reads and signs the statement `volce-lab approve` fetches \
             from this host.",
            signer.principal
        ),
    )
}
