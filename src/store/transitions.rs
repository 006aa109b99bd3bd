//! The operations inside one transaction ([`Tx`]) and the ones that change
//! a plan: insert, the transitions, and the audit row each writes. Runs as
//! root inside the host helper, always within a transaction
//! [`Store::read`](super::Store::read) or [`Store::write`](super::Store::write)
//! opened. The other operations on a `Tx` live beside their tables:
//! `plans.rs` (reading plans), `apps.rs`, `claims.rs`, `plan_boot.rs`,
//! `fold.rs`, `retention.rs`, `trail.rs` (reading the audit trail).
//!
//! Invariants enforced here:
//! - every transition is one `UPDATE ... WHERE id=? AND state=?` that must
//!   change exactly one row, and writes its audit row in the same
//!   transaction: no audit row, no change;
//! - audit rows hold categories and numbers only: never commands, output or
//!   free text an agent wrote;
//! - every audit row is appended to the hash chain by [`chain::append`], the
//!   only insert into `audit`;
//! - every statement a `Tx` runs is one of `sql.rs`'s table, and those a
//!   request runs are served by an index, so their cost does not grow with
//!   the number of stored plans (`tests/statements.rs`).

use rusqlite::params;

use super::StoreError;
use super::chain;
use super::rows::{AuditRow, Claim, RequestMeta, SignedBy};
use super::sql::{self, Sql, Statement};
use crate::actions::plan::Plan;
use crate::vocab::Action;
use crate::vocab::{Digest, PlanId, Refusal};
use crate::vocab::{PlanOutcome, PlanState};

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

    /// Records an approval signed on the operator's own device: as
    /// [`Tx::approve`], with the signing key and the statement's digest on
    /// the `approved` row (migration 17), so the trail says which key
    /// approved what.
    pub fn approve_signed(
        &self,
        id: &PlanId,
        action: Action,
        digest: &Digest,
        audit: &AuditRow,
        signed: &SignedBy,
    ) -> Result<(), StoreError> {
        let changed = self.sql.prepare(sql::APPROVE)?.execute(params![
            id.as_str(),
            audit.actor,
            audit.at,
            digest.as_str()
        ])?;
        self.exactly_one(changed, id)?;
        self.plan_row(id, action, audit, None, Some(signed))
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
        self.settle(id, action, claim, outcome, None, audit)
    }

    /// As [`Tx::finish`] for a plan that failed, with the refusal that says
    /// why (its code and whole sentence), which `show` prints.
    pub fn fail(
        &self,
        id: &PlanId,
        action: Action,
        claim: &Claim,
        outcome: PlanOutcome,
        failure: &Refusal,
        audit: &AuditRow,
    ) -> Result<(), StoreError> {
        self.settle(id, action, claim, outcome, Some(failure), audit)
    }

    /// Keeps a failed plan's app log beside its failure (after
    /// [`Tx::fail`], in the same transaction, whose audit row stands for
    /// both: this is part of that transition, not another). Once: a second
    /// call, or one for a plan that did not fail with a refusal, changes no
    /// row and is a conflict.
    pub fn keep_app_log(&self, id: &PlanId, app_log: &crate::logs::AppLog) -> Result<(), StoreError> {
        let json = serde_json::to_string(app_log).map_err(|_| StoreError::Corrupt)?;
        let changed = self.sql.prepare(sql::KEEP_APP_LOG)?.execute(params![id.as_str(), json])?;
        self.exactly_one(changed, id)
    }

    fn settle(
        &self,
        id: &PlanId,
        action: Action,
        claim: &Claim,
        outcome: PlanOutcome,
        failure: Option<&Refusal>,
        audit: &AuditRow,
    ) -> Result<(), StoreError> {
        // Every message of ours fits the column (MESSAGE_MAX_CHARS); one
        // that did not must not fail the write, which would leave a plan
        // that changed nothing `executing`: it is then recorded without.
        let failure = failure.filter(|f| f.message.chars().count() <= crate::vocab::MESSAGE_MAX_CHARS);
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
                claim.boot_id,
                failure.map(|f| f.code.as_str()),
                failure.map(|f| f.message.as_str())
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
    pub fn reject(
        &self,
        id: &PlanId,
        action: Action,
        reason: Option<&str>,
        audit: &AuditRow,
    ) -> Result<(), StoreError> {
        self.transition(sql::REJECT, params![id.as_str(), audit.actor, audit.at, reason], id, action, audit)
    }

    /// Records whether the syslog alert of a new plan went out (once per
    /// plan; a second call changes nothing). Not a state change: no row.
    pub fn record_alert(&self, id: &PlanId, sent: bool) -> Result<(), StoreError> {
        self.sql.prepare(sql::ALERTED)?.execute(params![id.as_str(), sent])?;
        Ok(())
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
        self.plan_row(id, action, row, app, None)
    }

    /// [`Tx::audit_with_app`], with a signed approval's facts when there are.
    fn plan_row(
        &self,
        id: &PlanId,
        action: Action,
        row: &AuditRow,
        app: Option<&str>,
        signed: Option<&SignedBy>,
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
            signer_key: signed.map(|s| s.key.as_str()),
            statement_sha256: signed.map(|s| s.statement_sha256.as_str()),
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
}
