//! The controller's part of the operator's terminal: what awaits an
//! operator (`list`) and ending a pending plan (`reject`). Runs as root
//! inside the host helper, for terminal commands only. Also what `show`
//! and `list` add to a stored plan: a stopped claimer, and what carries a
//! plan's label on the engine.

use super::*;

// ---------------------------------------------------------------------------
// The operator's terminal: `list` and `reject`. Neither is reachable from the
// rpc request enum (`crate::wire::Request` has no variant for them).
// ---------------------------------------------------------------------------

/// What awaits an operator, for `volce-lab-host list`, read at `now`.
#[derive(Debug, Clone, PartialEq)]
pub struct Awaiting {
    pub now: i64,
    /// Pending and unexpired, executing, or needing inspection; newest first.
    pub plans: Vec<StoredPlan>,
    /// Pending plans whose time ran out: nothing can approve or run them.
    pub expired_pending: u64,
    /// Every app record, by name, as recorded (the engine is not asked).
    pub apps: std::collections::BTreeMap<String, crate::control::app_record::AppRecord>,
    /// The executing plans whose claimer is alive but stopped.
    pub stopped: Vec<(PlanId, StoppedClaimer)>,
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
    pub fn leftovers(&self, id: &PlanId) -> Result<crate::host::leftovers::Leftovers, EngineError> {
        crate::host::leftovers::find(&self.engine, id)
    }

    /// Ends a pending plan the operator does not want: `rejected`, with who
    /// and when, in one conditional transition and its audit row. Only the
    /// terminal `reject` command calls this; the rpc pipeline has no path here.
    ///
    /// Any approver may reject, the plan's requester included, and an
    /// expired plan too: rejecting authorizes nothing, it only makes sure a
    /// plan never runs (and voids any approval it had).
    pub fn reject(&mut self, id: &PlanId, operator: &str) -> Result<StoredPlan, Refusal> {
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
            tx.reject(id, stored.plan.action, &audit(now, Event::Rejected, AuditOutcome::Ok, operator))?;
            Ok(tx.load_plan(id)?.ok_or(StoreError::Corrupt)?)
        })
    }
}
