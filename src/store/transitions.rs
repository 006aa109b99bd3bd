//! The operations inside one transaction: the plan transitions, the app
//! records and the audit rows. Runs as root inside the host helper, always
//! within a transaction [`Store::read`](super::Store::read) or
//! [`Store::write`](super::Store::write) opened.
//!
//! Invariants enforced here:
//! - every transition is one `UPDATE ... WHERE id=? AND state=?` that must
//!   change exactly one row, and writes its audit row in the same
//!   transaction: no audit row, no change;
//! - audit rows hold categories and numbers only: never commands, output or
//!   free text an agent wrote;
//! - every audit row is appended to the hash chain by [`chain::append`], the
//!   only insert into `audit`;
//! - every query that runs per request is served by an index, so its cost
//!   does not grow with the number of stored plans.
//!
//! A little over 450 lines: one short function per transition, each one
//! conditional UPDATE and its audit row; splitting them would only scatter them.

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension as _, params};

use super::StoreError;
use super::chain;
use super::rows::{
    Approval, AuditEntry, AuditRow, Claim, PlanOutcome, PlanState, Rejection, RequestMeta, Resolution,
    StoredPlan,
};
use super::sql::{self, Sql, Statement};
use crate::control::plan::{Action, Digest, Plan, PlanId};
use crate::control::validate::AppRecord;

/// The operations available inside a transaction.
pub struct Tx<'a> {
    /// The transaction, which runs only the statements of `sql.rs`.
    pub(super) sql: Sql<'a>,
    /// The request being served (`Store::begin_request`), if any.
    pub(super) request: Option<&'a RequestMeta>,
    /// Set when this transaction appended an audit row.
    pub(super) wrote: &'a std::cell::Cell<bool>,
    /// The syslog messages of the rows appended, sent once it commits
    /// (`None`: no syslog copy).
    pub(super) syslog: Option<&'a std::cell::RefCell<Vec<String>>>,
}

/// The request's part of a row: operation, request id, uids.
pub(super) fn stamp(meta: Option<&RequestMeta>) -> chain::Content<'_> {
    let Some(meta) = meta else { return chain::Content::default() };
    chain::Content {
        operation: Some(meta.operation.as_str()),
        request_id: meta.request_id.as_deref(),
        sudo_uid: meta.sudo_uid.map(i64::from),
        login_uid: meta.login_uid.map(i64::from),
        gate_reason: meta.gate.as_ref().map(|g| g.reason.as_str()),
        command_bytes: meta
            .gate
            .as_ref()
            .and_then(|g| g.command_bytes)
            .map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
        command_sha256: meta.gate.as_ref().and_then(|g| g.command_sha256.as_deref()),
        ..chain::Content::default()
    }
}

impl Tx<'_> {
    /// Whether any plan is executing or needs inspection (the new-plan gate).
    pub fn unsettled_plan(&self) -> Result<Option<(PlanId, PlanState)>, StoreError> {
        let row: Option<(String, String)> =
            self.sql.prepare(sql::UNSETTLED)?.query_row([], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
        row.map(|(id, state)| {
            Ok((PlanId::parse(&id).map_err(|_| StoreError::Corrupt)?, PlanState::parse(&state)?))
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

    /// Stores a freshly sealed plan as pending, with its audit row.
    pub fn insert_plan(&self, plan: &Plan, audit: &AuditRow) -> Result<(), StoreError> {
        self.sql.prepare(sql::INSERT_PLAN)?.execute(params![
            plan.id.as_str(),
            plan.action.as_str(),
            plan.canonical_json(),
            plan.digest.as_str(),
            plan.requires_approval,
            plan.requester,
            plan.created_at,
            plan.expires_at,
        ])?;
        self.audit_with_app(&plan.id, plan.action, audit, plan.payload.app())
    }

    /// Reads a plan and checks its body against its digest.
    pub fn load_plan(&self, id: &PlanId) -> Result<Option<StoredPlan>, StoreError> {
        let mut statement = self.sql.prepare(sql::LOAD_PLAN)?;
        let row = statement
            .query_row([id.as_str()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, Option<i32>>(5)?,
                    r.get::<_, Option<i64>>(6)?,
                    r.get::<_, Option<String>>(7)?,
                    r.get::<_, Option<i64>>(8)?,
                    r.get::<_, Option<i64>>(9)?,
                    r.get::<_, Option<String>>(10)?,
                    r.get::<_, Option<String>>(11)?,
                    r.get::<_, Option<i64>>(12)?,
                    r.get::<_, Option<String>>(13)?,
                    r.get::<_, Option<i64>>(14)?,
                ))
            })
            .optional()?;
        let Some((
            body,
            state,
            by,
            at,
            approved_digest,
            pid,
            start,
            boot,
            claimed_at,
            finished_at,
            outcome,
            resolved_by,
            resolved_at,
            rejected_by,
            rejected_at,
        )) = row
        else {
            return Ok(None);
        };
        let plan = Plan::from_stored(&body)?;
        if plan.id != *id {
            return Err(StoreError::Corrupt);
        }
        let approval = match (by, at, approved_digest) {
            (Some(by), Some(at), Some(digest)) => {
                Some(Approval { by, at, digest: Digest::parse(&digest).map_err(|_| StoreError::Corrupt)? })
            }
            _ => None,
        };
        let claim = match (pid, start, boot) {
            (Some(pid), Some(start), Some(boot_id)) => Some(Claim { pid, start_time: start as u64, boot_id }),
            _ => None,
        };
        Ok(Some(StoredPlan {
            plan,
            state: PlanState::parse(&state)?,
            approval,
            claim,
            claimed_at,
            finished_at,
            outcome: outcome.as_deref().map(PlanOutcome::parse).transpose()?,
            resolution: match (resolved_by, resolved_at) {
                (Some(by), Some(at)) => Some(Resolution { by, at }),
                _ => None,
            },
            rejection: match (rejected_by, rejected_at) {
                (Some(by), Some(at)) => Some(Rejection { by, at }),
                _ => None,
            },
        }))
    }

    /// Records an approval on a pending, not yet approved plan.
    pub fn approve(
        &self,
        id: &PlanId,
        action: Action,
        digest: &Digest,
        audit: &AuditRow,
    ) -> Result<(), StoreError> {
        self.transition(
            sql::APPROVE,
            params![id.as_str(), audit.actor, audit.at, digest.as_str()],
            id,
            action,
            audit,
        )
    }

    /// pending -> executing, recording the claimer.
    pub fn claim(
        &self,
        id: &PlanId,
        action: Action,
        claim: &Claim,
        audit: &AuditRow,
    ) -> Result<(), StoreError> {
        self.transition(
            sql::CLAIM,
            params![id.as_str(), claim.pid, claim.start_time as i64, claim.boot_id, audit.at],
            id,
            action,
            audit,
        )
    }

    /// executing -> completed, failed (outcome rolled_back or not_started:
    /// nothing changed) or needs_inspection, only by the same claimer.
    pub fn finish(
        &self,
        id: &PlanId,
        action: Action,
        claim: &Claim,
        outcome: PlanOutcome,
        audit: &AuditRow,
    ) -> Result<(), StoreError> {
        let state = match outcome {
            PlanOutcome::Completed => PlanState::Completed,
            PlanOutcome::RolledBack | PlanOutcome::NotStarted => PlanState::Failed,
            _ => PlanState::NeedsInspection,
        };
        self.transition(
            sql::FINISH,
            params![
                id.as_str(),
                state.as_str(),
                outcome.as_str(),
                audit.at,
                claim.pid,
                claim.start_time as i64,
                claim.boot_id
            ],
            id,
            action,
            audit,
        )
    }

    /// executing -> needs_inspection for a claim whose process is gone.
    pub fn abandon(
        &self,
        id: &PlanId,
        action: Action,
        claim: &Claim,
        audit: &AuditRow,
    ) -> Result<(), StoreError> {
        self.finish(id, action, claim, PlanOutcome::ClaimerDied, audit)
    }

    /// pending -> invalidated: the policy or the server changed under the
    /// plan, so its approval must never count again.
    pub fn invalidate(
        &self,
        id: &PlanId,
        action: Action,
        why: PlanOutcome,
        audit: &AuditRow,
    ) -> Result<(), StoreError> {
        self.transition(sql::INVALIDATE, params![id.as_str(), why.as_str(), audit.at], id, action, audit)
    }

    /// executing -> invalidated, only by the same claimer: a claimed plan
    /// whose fresh snapshot or re-derivation no longer matches, voided
    /// before the engine was asked to change anything.
    pub fn void_claimed(
        &self,
        id: &PlanId,
        action: Action,
        claim: &Claim,
        why: PlanOutcome,
        audit: &AuditRow,
    ) -> Result<(), StoreError> {
        self.transition(
            sql::VOID_CLAIMED,
            params![id.as_str(), why.as_str(), audit.at, claim.pid, claim.start_time as i64, claim.boot_id],
            id,
            action,
            audit,
        )
    }

    /// needs_inspection -> inspected: an operator attests they looked at the
    /// server. Records who and when; the outcome column keeps why the plan
    /// needed inspection.
    pub fn resolve(&self, id: &PlanId, action: Action, audit: &AuditRow) -> Result<(), StoreError> {
        self.transition(sql::RESOLVE, params![id.as_str(), audit.actor, audit.at], id, action, audit)
    }

    /// pending -> rejected: an operator ended a plan they do not want.
    /// Records who and when; the plan was never claimed, so it never ran.
    pub fn reject(&self, id: &PlanId, action: Action, audit: &AuditRow) -> Result<(), StoreError> {
        self.transition(sql::REJECT, params![id.as_str(), audit.actor, audit.at], id, action, audit)
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

    /// How many pending plans expired before `now` (see [`sql::EXPIRED_PENDING`]).
    pub fn expired_pending(&self, now: i64) -> Result<u64, StoreError> {
        let count: i64 = self.sql.prepare(sql::EXPIRED_PENDING)?.query_row([now], |r| r.get(0))?;
        Ok(count.max(0) as u64)
    }

    /// Forgets an app record (inside a resolving transaction), freeing its
    /// name, port and quota slot. Only the named row; nothing else.
    pub fn delete_app(&self, name: &str) -> Result<(), StoreError> {
        let changed = self.sql.prepare(sql::DELETE_APP)?.execute([name])?;
        if changed == 1 { Ok(()) } else { Err(StoreError::Conflict(name.to_owned())) }
    }

    /// The one shape of every plan transition: a conditional UPDATE that must
    /// change exactly one row (else it fails with `Conflict` and the write
    /// rolls back), then its audit row in the same transaction.
    fn transition(
        &self,
        statement: Statement,
        params: impl rusqlite::Params,
        id: &PlanId,
        action: Action,
        audit: &AuditRow,
    ) -> Result<(), StoreError> {
        let changed = self.sql.prepare(statement)?.execute(params)?;
        self.exactly_one(changed, id)?;
        self.audit(id, action, audit)
    }

    fn exactly_one(&self, changed: usize, id: &PlanId) -> Result<(), StoreError> {
        if changed == 1 { Ok(()) } else { Err(StoreError::Conflict(id.as_str().to_owned())) }
    }

    /// The one place an audit row is written: appended to the hash chain
    /// (`chain::append` reads the previous hash in this same transaction).
    fn audit(&self, id: &PlanId, action: Action, row: &AuditRow) -> Result<(), StoreError> {
        self.audit_with_app(id, action, row, None)
    }

    /// A transition's row, stamped with the request it serves (operation,
    /// request id, uids; the app when the plan or the request names one).
    fn audit_with_app(
        &self,
        id: &PlanId,
        action: Action,
        row: &AuditRow,
        app: Option<&str>,
    ) -> Result<(), StoreError> {
        let meta = self.request;
        self.append(chain::Content {
            seq: 0,
            at: row.at,
            event: row.event.as_str(),
            plan_id: Some(id.as_str()),
            action: Some(action.as_str()),
            outcome: row.outcome.as_str(),
            exit_code: row.exit_code.map(i64::from),
            duration_ms: row.duration_ms.map(|d| d as i64),
            actor: &row.actor,
            app: app.or(meta.and_then(|m| m.app.as_deref())),
            process: row.process.map(crate::exec::ProcessOutcome::as_str),
            ..stamp(meta)
        })
    }

    /// Every audit row goes through here: onto the chain, and noted.
    pub(super) fn append(&self, content: chain::Content<'_>) -> Result<(), StoreError> {
        let (content, hash) = chain::append(self.sql, content)?;
        if let Some(lines) = self.syslog {
            lines.borrow_mut().push(super::syslog::message(&content, &hash));
        }
        self.wrote.set(true);
        Ok(())
    }

    /// The end of the audit chain (for `audit head`).
    pub fn audit_head(&self) -> Result<chain::Head, StoreError> {
        chain::head(self.sql)
    }

    /// Walks the whole audit chain (for `audit verify`); see `chain::verify`.
    pub fn verify_audit(&self, from: Option<&str>) -> Result<chain::Verification, StoreError> {
        chain::verify(self.sql, from)
    }

    /// Every audit row at or after `since` (unix seconds), oldest first,
    /// hashes included (for `audit export`).
    pub fn audit_since(&self, since: i64, each: impl FnMut(chain::ChainedEntry)) -> Result<(), StoreError> {
        chain::for_each_since(self.sql, since, each)
    }

    /// Every app we recorded.
    pub fn apps(&self) -> Result<BTreeMap<String, AppRecord>, StoreError> {
        let mut statement = self.sql.prepare(sql::APPS)?;
        let rows = statement.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
        })?;
        let mut apps = BTreeMap::new();
        for row in rows {
            let (name, state, record) = row?;
            let record: AppRecord = serde_json::from_str(&record).map_err(|_| StoreError::Corrupt)?;
            if record.app != name || record.state.as_str() != state {
                return Err(StoreError::Corrupt);
            }
            apps.insert(name, record);
        }
        Ok(apps)
    }

    /// Inserts or replaces an app record (inside a finishing transaction).
    pub fn put_app(&self, record: &AppRecord, now: i64) -> Result<(), StoreError> {
        let body = serde_json::to_string(record).map_err(|_| StoreError::Corrupt)?;
        self.sql.prepare(sql::PUT_APP)?.execute(params![
            record.app,
            record.state.as_str(),
            record.host_port,
            body,
            record.plan_id.as_str(),
            now
        ])?;
        Ok(())
    }

    /// The state changes of one plan in the audit trail, oldest first (not
    /// the `request` rows of reads and refusals that named it).
    pub fn audit_of(&self, id: &PlanId) -> Result<Vec<AuditEntry>, StoreError> {
        let mut statement = self.sql.prepare(sql::AUDIT_OF)?;
        let rows = statement.query_map([id.as_str()], |r| {
            Ok(AuditEntry {
                at: r.get(0)?,
                event: r.get(1)?,
                plan_id: r.get(2)?,
                action: r.get(3)?,
                outcome: r.get(4)?,
                exit_code: r.get(5)?,
                duration_ms: r.get(6)?,
                actor: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
