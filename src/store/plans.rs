//! Reading plans inside a transaction: the new-plan gate, the claimed
//! plans, one plan checked against its digest, and the operator's list.
//! Runs as root inside the host helper, within the caller's transaction.
//!
//! Invariant: each read is one statement of `sql.rs` served by an index (the
//! partial indexes `plans_unsettled` and `plans_pending`, or the plan id),
//! so it costs the same however many plans are stored.

use rusqlite::OptionalExtension as _;

use super::StoreError;
use super::rows::{Approval, Claim, Rejection, Resolution, StoredPlan, parse_stored};
use super::sql;
use super::transitions::Tx;
use crate::actions::plan::Plan;
use crate::vocab::Action;
use crate::vocab::{Digest, PlanId, Refusal};
use crate::vocab::{PlanOutcome, PlanState};

impl Tx<'_> {
    /// Whether any plan is executing or needs inspection (the new-plan gate).
    pub fn unsettled_plan(&self) -> Result<Option<(PlanId, PlanState)>, StoreError> {
        let row: Option<(String, String)> =
            self.sql.prepare(sql::UNSETTLED)?.query_row([], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
        row.map(|(id, state)| {
            Ok((PlanId::parse(&id).map_err(|_| StoreError::Corrupt)?, parse_stored::<PlanState>(&state)?))
        })
        .transpose()
    }

    /// Every plan currently claimed for execution, with its claimer.
    pub fn executing_plans(&self) -> Result<Vec<(PlanId, Action, Claim)>, StoreError> {
        let mut statement = self.sql.prepare(sql::EXECUTING)?;
        let rows = statement.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i32>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, String>(4)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, action, pid, start, boot) = row?;
            let id = PlanId::parse(&id).map_err(|_| StoreError::Corrupt)?;
            let action = Action::parse(&action).map_err(|_| StoreError::Corrupt)?;
            out.push((id, action, Claim { pid, start_time: start as u64, boot_id: boot }));
        }
        Ok(out)
    }

    /// Reads a plan and checks its body against its digest.
    pub fn load_plan(&self, id: &PlanId) -> Result<Option<StoredPlan>, StoreError> {
        let mut statement = self.sql.prepare(sql::LOAD_PLAN)?;
        let row = statement.query_row([id.as_str()], PlanRow::read).optional()?;
        row.map(|row| row.into_stored(id)).transpose()
    }

    /// The plans awaiting an operator at `now`, newest first: pending and
    /// unexpired, executing, or needing inspection (for `list`).
    pub fn awaiting_plans(&self, now: i64) -> Result<Vec<StoredPlan>, StoreError> {
        let mut statement = self.sql.prepare(sql::AWAITING)?;
        let ids = statement.query_map([now], |r| r.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()?;
        let mut plans = Vec::with_capacity(ids.len());
        for id in ids {
            let id = PlanId::parse(&id).map_err(|_| StoreError::Corrupt)?;
            plans.push(self.load_plan(&id)?.ok_or(StoreError::Corrupt)?);
        }
        // Newest first; the id breaks ties so the order is stable.
        plans.sort_by(|a, b| {
            (b.plan.created_at, b.plan.id.as_str()).cmp(&(a.plan.created_at, a.plan.id.as_str()))
        });
        Ok(plans)
    }

    /// How many pending plans expired before `now` (`sql::EXPIRED_PENDING`).
    pub fn expired_pending(&self, now: i64) -> Result<u64, StoreError> {
        let count: i64 = self.sql.prepare(sql::EXPIRED_PENDING)?.query_row([now], |r| r.get(0))?;
        Ok(count.max(0) as u64)
    }
}

/// One row of `sql::LOAD_PLAN` as SQLite gives it, before it is checked.
struct PlanRow {
    body: String,
    state: String,
    approved_by: Option<String>,
    approved_at: Option<i64>,
    approved_digest: Option<String>,
    pid: Option<i32>,
    start: Option<i64>,
    boot: Option<String>,
    claimed_at: Option<i64>,
    finished_at: Option<i64>,
    outcome: Option<String>,
    resolved_by: Option<String>,
    resolved_at: Option<i64>,
    rejected_by: Option<String>,
    rejected_at: Option<i64>,
    failure: (Option<String>, Option<String>),
    rejected_reason: Option<String>,
    alerted: Option<bool>,
    app_log: Option<String>,
}

impl PlanRow {
    /// The columns in `sql::LOAD_PLAN`'s order.
    fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<PlanRow> {
        Ok(PlanRow {
            body: r.get(0)?,
            state: r.get(1)?,
            approved_by: r.get(2)?,
            approved_at: r.get(3)?,
            approved_digest: r.get(4)?,
            pid: r.get(5)?,
            start: r.get(6)?,
            boot: r.get(7)?,
            claimed_at: r.get(8)?,
            finished_at: r.get(9)?,
            outcome: r.get(10)?,
            resolved_by: r.get(11)?,
            resolved_at: r.get(12)?,
            rejected_by: r.get(13)?,
            rejected_at: r.get(14)?,
            failure: (r.get(15)?, r.get(16)?),
            rejected_reason: r.get(17)?,
            alerted: r.get(18)?,
            app_log: r.get(19)?,
        })
    }

    /// The stored plan, once its body matches its digest and its id, and
    /// every name and stamp in the row is one the code knows.
    fn into_stored(self, id: &PlanId) -> Result<StoredPlan, StoreError> {
        let plan = Plan::from_stored(&self.body)?;
        if plan.id != *id {
            return Err(StoreError::Corrupt);
        }
        let approval = match (self.approved_by, self.approved_at, self.approved_digest) {
            (Some(by), Some(at), Some(digest)) => {
                Some(Approval { by, at, digest: Digest::parse(&digest).map_err(|_| StoreError::Corrupt)? })
            }
            _ => None,
        };
        let claim = match (self.pid, self.start, self.boot) {
            (Some(pid), Some(start), Some(boot_id)) => Some(Claim { pid, start_time: start as u64, boot_id }),
            _ => None,
        };
        Ok(StoredPlan {
            plan,
            state: parse_stored::<PlanState>(&self.state)?,
            approval,
            claim,
            claimed_at: self.claimed_at,
            finished_at: self.finished_at,
            outcome: self.outcome.as_deref().map(parse_stored::<PlanOutcome>).transpose()?,
            resolution: match (self.resolved_by, self.resolved_at) {
                (Some(by), Some(at)) => Some(Resolution { by, at }),
                _ => None,
            },
            rejection: match (self.rejected_by, self.rejected_at) {
                (Some(by), Some(at)) => Some(Rejection { by, at, reason: self.rejected_reason }),
                _ => None,
            },
            failure: match self.failure {
                (Some(code), Some(message)) => {
                    Some(Refusal { code: code.parse().map_err(|_| StoreError::Corrupt)?, message })
                }
                _ => None,
            },
            alerted: self.alerted,
            app_log: self
                .app_log
                .map(|json| serde_json::from_str(&json).map_err(|_| StoreError::Corrupt))
                .transpose()?,
        })
    }
}
