//! The controller's part of the operator's terminal: what awaits an
//! operator (`list`), recording an approval (`approve`), ending a pending
//! plan (`reject`) and attesting an inspection (`resolve`). Also what `show`
//! and `list` add to a stored plan: a stopped claimer, and what carries a
//! plan's label on the engine. Runs as root inside the host helper, for
//! terminal commands only.
//!
//! Security invariant: none of this is reachable from the rpc pipeline (the
//! request enum, `crate::wire::Request`, has no variant for any of it), but
//! for the recording of an approval whose signature the host verified
//! (`signed.rs` beside this file): an approval is recorded only by the
//! terminal `approve` command or with a verified signature.

use std::collections::BTreeMap;

use super::{
    Controller, Liveness, StoppedClaimer, audit, configuration_holds, engine_unavailable, require_approver,
    state_allows_use, terms_hold,
};
use crate::actions::Payload;
use crate::control::Clock;
use crate::control::app_record::{AppRecord, AppState};
use crate::control::clock::check_expiry;
use crate::docker::{Engine, EngineError};
use crate::host::leftovers::{self, Leftovers};
use crate::store::{AuditOutcome, Event, MAX_REASON_CHARS, SignedBy, StoreError, StoredPlan};
use crate::vocab::PlanState;
use crate::vocab::{Code, Digest, PlanId, Refusal, refuse};

/// What awaits an operator, for `volce-lab-host list`, read at `now`.
#[derive(Debug, Clone, PartialEq)]
pub struct Awaiting {
    pub now: i64,
    /// Pending and unexpired, executing, or needing inspection; newest first.
    pub plans: Vec<StoredPlan>,
    /// Pending plans whose time ran out: nothing can approve or run them.
    pub expired_pending: u64,
    /// Every app record, by name, as recorded (the engine is not asked).
    pub apps: BTreeMap<String, AppRecord>,
    /// The executing plans whose claimer is alive but stopped.
    pub stopped: Vec<(PlanId, StoppedClaimer)>,
}

/// What `resolve` did.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub stored: StoredPlan,
    /// For a deploy plan: what became of its app record.
    pub app: Option<AppAfterResolve>,
    /// What carries the plan's label on the engine, asked before the
    /// record changed (or why the engine could not be asked).
    pub left: Result<Leftovers, String>,
}

/// The app record of a resolved deploy plan.
#[derive(Debug, Clone, PartialEq)]
pub enum AppAfterResolve {
    /// No container of it exists: the record is gone, its name, port and
    /// quota slot are free (its directory stays as evidence).
    Forgotten(String),
    /// Kept unchanged; `containers` names what of it still exists.
    Kept { app: String, state: AppState, containers: Vec<String> },
}

impl<E: Engine, C: Clock, L: Liveness> Controller<E, C, L> {
    /// The plans that await an operator and the recorded apps. Reads the
    /// store only, after settling abandoned claims (as `load` does), so it
    /// answers while the container engine is down.
    pub fn awaiting(&mut self, actor: &str) -> Result<Awaiting, Refusal> {
        self.settle_abandoned(actor)?;
        let now = self.clock.now();
        let mut awaiting = self.store.read(|tx| {
            Ok::<_, Refusal>(Awaiting {
                now,
                plans: tx.awaiting_plans(now)?,
                expired_pending: tx.expired_pending(now)?,
                apps: tx.apps()?,
                stopped: Vec::new(),
            })
        })?;
        awaiting.stopped = awaiting
            .plans
            .iter()
            .filter_map(|stored| Some((stored.plan.id.clone(), self.stopped_claimer(stored)?)))
            .collect();
        Ok(awaiting)
    }

    /// The claimer of an executing plan, if it is alive but stopped.
    pub fn stopped_claimer(&self, stored: &StoredPlan) -> Option<StoppedClaimer> {
        let claim = stored.claim.as_ref().filter(|_| stored.state == PlanState::Executing)?;
        self.liveness.stopped(claim)
    }

    /// Why an executing plan cannot be resolved, and what to do: wait for a
    /// running claimer, or continue or kill a stopped one.
    pub(super) fn still_executing(&self, stored: &StoredPlan) -> Refusal {
        let id = &stored.plan.id;
        let claimer = match (self.stopped_claimer(stored), &stored.claim) {
            (Some(stopped), _) => stopped.way_out(id),
            (None, Some(claim)) => format!(
                "Its claimer, process {}, is still running; wait for it to finish (sudo volce-lab-host show {id}).",
                claim.pid
            ),
            (None, None) => String::new(),
        };
        Refusal::new(
            Code::NotAwaitingInspection,
            format!(
                "The plan is executing, not needs_inspection; there is nothing to resolve yet. {claimer}"
            ),
        )
    }

    /// Read-only: what carries the plan's label on the engine.
    pub fn leftovers(&self, id: &PlanId) -> Result<Leftovers, EngineError> {
        leftovers::find(&self.engine, id)
    }

    /// Whether `approver` could approve `stored` with `digest` as it is:
    /// what `approve` checks before it asks the operator to confirm, so
    /// nobody confirms a plan that needs no approval, that they may not
    /// approve, or whose digest they mistyped (issue 37: the question came
    /// first, and a confirmed answer was then refused). Read-only;
    /// [`Controller::approve`] checks it all again under the write lock,
    /// with the checks of state and time that only hold there.
    pub fn approvable(&self, stored: &StoredPlan, digest: &Digest, approver: &str) -> Result<(), Refusal> {
        may_approve(&self.policy, stored, approver)?;
        digest_matches(stored, digest)
    }

    /// Announces a new plan that waits for approval with one syslog line to
    /// `socket` (`host::alert`), and records on the plan whether it went
    /// out. Never fails the plan: it is stored and answered either way.
    pub fn alert_waiting(&mut self, mut stored: StoredPlan, socket: Option<&std::path::Path>) -> StoredPlan {
        let waits = stored.plan.requires_approval && stored.approval.is_none();
        let Some(socket) = socket.filter(|_| waits && stored.state == PlanState::Pending) else {
            return stored;
        };
        let sent =
            crate::host::alert::send(socket, &crate::host::alert::line(&stored, self.clock.now())).is_ok();
        if self.store.write(|tx| tx.record_alert(&stored.plan.id, sent)).is_ok() {
            stored.alerted = Some(sent);
        }
        stored
    }

    /// Records an operator's approval. Only the terminal `approve` command
    /// calls this with no signature; the rpc pipeline reaches it only
    /// through [`Controller::approve_signed`], with a signature the host verified.
    pub fn approve(&mut self, id: &PlanId, digest: &Digest, approver: &str) -> Result<StoredPlan, Refusal> {
        self.record_approval(id, digest, approver, None)
    }

    /// The approval's checks under the write lock, and its transition:
    /// the terminal's (`signed` none) and a signed one's alike.
    pub(super) fn record_approval(
        &mut self,
        id: &PlanId,
        digest: &Digest,
        approver: &str,
        signed: Option<&SignedBy>,
    ) -> Result<StoredPlan, Refusal> {
        let Controller { policy, policy_hash, store, clock, env_dir, .. } = self;
        store.write(|tx| {
            // Under the write lock, so time spent waiting for it counts.
            let now = clock.now();
            let Some(stored) = tx.load_plan(id)? else {
                return refuse(Code::PlanNotFound, "No plan has this id.");
            };
            let plan = &stored.plan;
            may_approve(policy, &stored, approver)?;
            let made = tx.plan_boot(id)?;
            check_expiry(plan.created_at, plan.expires_at, made.as_ref(), now, clock.boot().as_ref())?;
            if plan.policy_hash != *policy_hash {
                return refuse(Code::PolicyChanged, "The policy changed since this plan was made.");
            }
            terms_hold(plan, policy, policy_hash)?;
            // A local file read under the lock, never the engine.
            configuration_holds(env_dir, plan)?;
            digest_matches(&stored, digest)?;
            if stored.approval.is_some() {
                return refuse(Code::AlreadyApproved, "This plan is already approved.");
            }
            let row = audit(now, Event::Approved, AuditOutcome::Ok, approver);
            match signed {
                None => tx.approve(id, plan.action, digest, &row)?,
                Some(signed) => tx.approve_signed(id, plan.action, digest, &row, signed)?,
            }
            Ok(tx.load_plan(id)?.expect("just approved"))
        })
    }

    /// Ends a pending plan the operator does not want: `rejected`, with who
    /// and when, in one conditional transition and its audit row. Only the
    /// terminal `reject` command calls this; the rpc pipeline has no path here.
    ///
    /// Any approver may reject, the plan's requester included, and an
    /// expired plan too: rejecting authorizes nothing, it only makes sure a
    /// plan never runs (and voids any approval it had).
    ///
    /// `reason` (the operator's words, checked by [`check_reason`]) is
    /// recorded with the rejection; the agent reads it marked untrusted.
    pub fn reject(
        &mut self,
        id: &PlanId,
        operator: &str,
        reason: Option<&str>,
    ) -> Result<StoredPlan, Refusal> {
        check_reason(reason)?;
        self.settle_abandoned(operator)?;
        require_approver(&self.policy, operator)?;
        let Controller { store, clock, .. } = self;
        store.write(|tx| {
            let now = clock.now();
            let Some(stored) = tx.load_plan(id)? else {
                return refuse(Code::PlanNotFound, "No plan has this id.");
            };
            // The same code per state as approve and execute give, with a
            // sentence for the operator.
            state_allows_use(&stored).map_err(|refusal| {
                Refusal::new(
                    refusal.code,
                    format!(
                        "The plan is {}, not pending; only a pending plan can be rejected.",
                        stored.state.as_str()
                    ),
                )
            })?;
            tx.reject(
                id,
                stored.plan.action,
                reason,
                &audit(now, Event::Rejected, AuditOutcome::Ok, operator),
            )?;
            Ok(tx.load_plan(id)?.ok_or(StoreError::Corrupt)?)
        })
    }

    /// Marks a plan that needs inspection as `inspected`: the operator
    /// attests they looked at the server. Only the terminal `resolve`
    /// command calls this; the rpc pipeline has no path here.
    ///
    /// Any approver may resolve, the plan's requester included: resolving
    /// authorizes no change on the server (it only lifts the host-wide gate
    /// on new plans, each of which is validated and, where required,
    /// approved by someone else as usual), and the person who must look at
    /// the server is whoever is on call.
    ///
    /// The app record of a failed deploy is dropped (freeing its name, port
    /// and quota slot) when it is still `needs_inspection` from this plan and
    /// a fresh engine snapshot shows no container of that app: nothing of it
    /// is left to manage. Every other app record is kept as it is: if it is
    /// `needs_inspection`, volce-lab will neither reconfigure nor stop it
    /// (both need `running`), because nobody has verified what runs; its
    /// containers hold the name and the port anyway.
    pub fn resolve(&mut self, id: &PlanId, operator: &str) -> Result<Resolved, Refusal> {
        self.settle_abandoned(operator)?;
        require_approver(&self.policy, operator)?;
        // A read-only engine call, made before the write transaction, so
        // the write lock is not held across docker (prepare and execute
        // still do that; see the module header). Nothing of ours can create
        // the app's containers meanwhile: no plan executes while this one
        // needs inspection.
        let stored = self
            .store
            .read(|tx| tx.load_plan(id).map_err(Refusal::from))?
            .ok_or_else(|| Refusal::new(Code::PlanNotFound, "No plan has this id."))?;
        if stored.state == PlanState::Executing {
            // Refused before the write lock: a stopped claimer may hold it.
            return Err(self.still_executing(&stored));
        }
        let left = if stored.state == PlanState::NeedsInspection {
            self.leftovers(id).map_err(|e| e.to_string())
        } else {
            Ok(Default::default())
        };
        let leftovers = match &stored.plan.payload {
            Payload::Deploy(deploy) if stored.state == PlanState::NeedsInspection => {
                let snapshot = self.engine.snapshot().map_err(engine_unavailable)?;
                let names = deploy.spec.app.names();
                let remaining: Vec<String> = snapshot
                    .containers
                    .iter()
                    .filter(|c| names.claims_container(c))
                    .map(|c| c.name.clone())
                    .collect();
                Some((deploy.spec.app.to_string(), remaining))
            }
            _ => None,
        };
        let now = self.clock.now();
        self.store.write(|tx| {
            let Some(stored) = tx.load_plan(id)? else {
                return refuse(Code::PlanNotFound, "No plan has this id.");
            };
            if stored.state != PlanState::NeedsInspection {
                return refuse(
                    Code::NotAwaitingInspection,
                    format!(
                        "The plan is {}, not needs_inspection; there is nothing to resolve.",
                        stored.state.as_str()
                    ),
                );
            }
            tx.resolve(id, stored.plan.action, &audit(now, Event::Inspected, AuditOutcome::Ok, operator))?;
            let mut app = None;
            if let Some((name, remaining)) = &leftovers {
                let record = tx.apps()?.get(name).cloned();
                app = match record {
                    Some(r)
                        if r.state == AppState::NeedsInspection
                            && r.plan_id == *id
                            && remaining.is_empty() =>
                    {
                        tx.delete_app(name)?;
                        Some(AppAfterResolve::Forgotten(name.clone()))
                    }
                    Some(r) => Some(AppAfterResolve::Kept {
                        app: name.clone(),
                        state: r.state,
                        containers: remaining.clone(),
                    }),
                    None => None,
                };
            }
            Ok(Resolved { stored: tx.load_plan(id)?.expect("just resolved"), app, left })
        })
    }
}

/// The checks of an approval that hold whatever is typed: an approver, not
/// the requester, a plan that needs approval, a state that allows it.
pub(super) fn may_approve(
    policy: &crate::control::policy::Policy,
    stored: &StoredPlan,
    approver: &str,
) -> Result<(), Refusal> {
    require_approver(policy, approver)?;
    if approver == stored.plan.requester {
        return refuse(Code::SelfApproval, "The user who requested a plan cannot approve it.");
    }
    if !stored.plan.requires_approval {
        return refuse(
            Code::ApprovalNotRequired,
            "This action does not need an approval; nothing was recorded. The agent can execute it as it is.",
        );
    }
    state_allows_use(stored)
}

/// The typed digest is the plan's: what the operator read in `show`.
fn digest_matches(stored: &StoredPlan, digest: &Digest) -> Result<(), Refusal> {
    if *digest == stored.plan.digest {
        return Ok(());
    }
    refuse(
        Code::DigestMismatch,
        format!(
            "The digest does not match plan {}; nothing was asked or recorded. Read the plan and its \
             digest with `sudo volce-lab-host show {}`, then approve with the digest it prints.",
            stored.plan.id, stored.plan.id
        ),
    )
}

/// A `reject --reason`: absent, or 1 to [`MAX_REASON_CHARS`] characters
/// that are not all blank. Any character is kept (every view escapes it).
pub fn check_reason(reason: Option<&str>) -> Result<(), Refusal> {
    let Some(reason) = reason else { return Ok(()) };
    let chars = reason.chars().count();
    if reason.trim().is_empty() || chars > MAX_REASON_CHARS {
        return refuse(
            Code::InvalidReason,
            format!(
                "The reason is {}; give one of 1 to {MAX_REASON_CHARS} characters, or leave --reason out. \
                 Nothing was recorded.",
                if chars > MAX_REASON_CHARS {
                    format!("{chars} characters long")
                } else {
                    "empty".to_owned()
                }
            ),
        );
    }
    Ok(())
}
