//! Bounded state: pruning old plans, the per-requester count of pending
//! plans, and dropping archived audit rows. Runs as root inside the host
//! helper, within a write transaction.
//!
//! Invariants enforced here:
//! - only plans that can never be used again are pruned: a terminal state
//!   (completed, invalidated, inspected, failed, rejected) finished before
//!   the cutoff, or pending and expired before it; never a plan an app
//!   record still names, never one executing or needing inspection;
//! - every pruning appends one `pruned` row with the count, in the same
//!   transaction; the audit rows of pruned plans stay (they are small);
//! - each run prunes at most [`PRUNE_BATCH`] plans, so its cost per request
//!   is bounded however much is due (the rest goes in the next runs);
//! - audit rows are dropped by `prune_audit` (the operator's `audit
//!   prune`) and by `retain_audit` (rows older than
//!   [`AUDIT_RETENTION_DAYS`], at most [`AUDIT_PRUNE_BATCH`] per request,
//!   issue 22), each leaving the chain verifiable from its new anchor and
//!   recording itself in a chained `pruned` row that names that anchor;
//!   neither drops a row that does not verify.

use rusqlite::{OptionalExtension as _, params};

use super::StoreError;
use super::chain::{self, Content};
use super::rows::{AuditOperation, AuditOutcome, Event};
use super::sql::{self, Sql};
use super::transitions::{Tx, stamp};

/// The most plans one run of [`Tx::prune_plans`] removes.
pub const PRUNE_BATCH: i64 = 256;

/// The most unexpired pending plans one requester may hold.
pub const MAX_PENDING_PER_REQUESTER: u64 = 32;

/// How long audit rows are kept before retention drops them: twice the
/// default plan retention (so a pruned plan's rows outlive it), long enough
/// for an operator's periodic export (docs/operator.md), and bounded, so that
/// the trail's size is bounded by its rate of rows (which folding bounds
/// to two per kind and minute, `fold.rs`) times this.
pub const AUDIT_RETENTION_DAYS: i64 = 180;

/// The most audit rows one request's retention drops.
pub const AUDIT_PRUNE_BATCH: i64 = 1024;

/// Drops every row before `before` (unix seconds), keeping the chain
/// verifiable: the first kept row's seq and prev_hash become the anchor, so
/// `verify` starts there instead of at `GENESIS`. Refuses (changes
/// nothing) if the kept part does not verify first: pruning must never hide
/// a break. Returns how many rows were dropped.
fn prune_chain(tx: Sql<'_>, before: i64) -> Result<Pruned, StoreError> {
    if !super::verify::verify(tx, None)?.intact() {
        return Err(StoreError::Refused(crate::vocab::Refusal::new(
            crate::vocab::Code::AuditChainBroken,
            "The audit chain does not verify; nothing was dropped. Run volce-lab-host audit verify and \
             keep an export of the trail as it is before anything else.",
        )));
    }
    let first_kept: Option<(i64, Option<String>)> =
        tx.prepare(sql::FIRST_KEPT)?.query_row([before], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
    let (seq, prev) = match first_kept {
        Some((seq, Some(prev))) => (seq, prev),
        Some((_, None)) => return Err(StoreError::Corrupt),
        // Every row is older: the next row will chain from the last one.
        None => match chain::last(tx)? {
            None => return Ok(Pruned { dropped: 0, anchor: None }),
            Some((seq, Some(hash))) => (seq + 1, hash),
            Some((_, None)) => return Err(StoreError::Corrupt),
        },
    };
    let dropped = tx.prepare(sql::DROP_AUDIT_BEFORE)?.execute([seq])?;
    if dropped == 0 {
        return Ok(Pruned { dropped: 0, anchor: None });
    }
    tx.prepare(sql::SET_ANCHOR)?.execute(params![seq, prev])?;
    Ok(Pruned { dropped: dropped as u64, anchor: Some((seq, prev)) })
}

/// What one pruning of the trail did: how many rows it dropped, and the
/// anchor it set (`None` when it dropped nothing and changed no anchor).
struct Pruned {
    dropped: u64,
    anchor: Option<(i64, String)>,
}

/// Audit retention's part of [`prune_chain`] with a bounded cost: the
/// rows from the anchor on that are older than `cutoff`, at most
/// [`AUDIT_PRUNE_BATCH`], each checked to chain from the one before (and
/// the first kept from the last dropped). Drops nothing when a row there
/// does not verify (the break stays for `verify` and the doctor to name).
fn retain_chain(tx: Sql<'_>, cutoff: i64) -> Result<Pruned, StoreError> {
    let nothing = Pruned { dropped: 0, anchor: None };
    let oldest: Option<i64> = tx.prepare(sql::FIRST_ROW_AT)?.query_row([], |r| r.get(0)).optional()?;
    if oldest.is_none_or(|at| at >= cutoff) {
        return Ok(nothing);
    }
    let (mut seq, mut prev) = chain::anchor(tx)?;
    let rows: Vec<chain::ChainedEntry> = {
        let mut statement = tx.prepare(sql::ROWS_FROM)?;
        statement.query_map(params![seq, AUDIT_PRUNE_BATCH], chain::entry)?.collect::<Result<_, _>>()?
    };
    let holds = |row: &chain::ChainedEntry, seq: i64, prev: &str| {
        row.seq == seq
            && row.prev_hash.as_deref() == Some(prev)
            && row.hash.as_deref() == Some(chain::link(prev, &row.content()).as_str())
    };
    let mut dropped = 0u64;
    for row in &rows {
        if !holds(row, seq, &prev) {
            return Ok(nothing);
        }
        if row.at >= cutoff || dropped as i64 == AUDIT_PRUNE_BATCH {
            break;
        }
        dropped += 1;
        seq += 1;
        prev = row.hash.clone().unwrap_or_default();
    }
    if dropped == 0 {
        return Ok(nothing);
    }
    tx.prepare(sql::DROP_AUDIT_BEFORE)?.execute([seq])?;
    tx.prepare(sql::SET_ANCHOR)?.execute(params![seq, prev])?;
    Ok(Pruned { dropped, anchor: Some((seq, prev)) })
}

impl Tx<'_> {
    /// Audit retention: drops up to [`AUDIT_PRUNE_BATCH`] rows older than
    /// [`AUDIT_RETENTION_DAYS`] at `now`, and records it in one chained
    /// `pruned` row (operation `audit_prune`, by `actor`, naming the new
    /// anchor). Run with every request row (`fold.rs`) and before each
    /// prepare; one indexed read when nothing is due.
    pub fn retain_audit(&self, now: i64, actor: &str) -> Result<u64, StoreError> {
        let pruned = retain_chain(self.sql, now.saturating_sub(AUDIT_RETENTION_DAYS * 86_400))?;
        if let Some((seq, hash)) = &pruned.anchor {
            self.append(Content {
                at: now,
                event: Event::Pruned.as_str(),
                outcome: AuditOutcome::Ok.as_str(),
                actor,
                count: Some(pruned.dropped as i64),
                operation: Some(AuditOperation::AuditPrune.as_str()),
                anchor_seq: Some(*seq),
                anchor_hash: Some(hash),
                // The request's id and uids, not a gate refusal's detail.
                gate_reason: None,
                command_bytes: None,
                command_sha256: None,
                ..stamp(self.request)
            })?;
        }
        Ok(pruned.dropped)
    }

    /// Removes up to [`PRUNE_BATCH`] plans that ended (or expired) before
    /// `cutoff`, and records how many in one `pruned` row at `now` by
    /// `actor`. Returns the count; no row when nothing was due.
    pub fn prune_plans(&self, cutoff: i64, now: i64, actor: &str) -> Result<u64, StoreError> {
        let mut removed = 0usize;
        for statement in [sql::PRUNE_FINISHED, sql::PRUNE_EXPIRED] {
            let left = PRUNE_BATCH - removed as i64;
            if left <= 0 {
                break;
            }
            removed += self.sql.prepare(statement)?.execute(rusqlite::params![cutoff, left])?;
        }
        if removed > 0 {
            let meta = self.request;
            self.append(Content {
                at: now,
                event: Event::Pruned.as_str(),
                outcome: AuditOutcome::Ok.as_str(),
                actor,
                count: Some(removed as i64),
                operation: Some(AuditOperation::Retention.as_str()),
                ..stamp(meta)
            })?;
        }
        Ok(removed as u64)
    }

    /// How many unexpired pending plans `requester` holds at `now`
    /// (served by the partial index `plans_pending_requester`).
    pub fn pending_of(&self, requester: &str, now: i64) -> Result<u64, StoreError> {
        let count: i64 =
            self.sql.prepare(sql::PENDING_OF)?.query_row(rusqlite::params![requester, now], |r| r.get(0))?;
        Ok(count.max(0) as u64)
    }

    /// The operator's `audit prune --before`: drops the audit rows older
    /// than `before`, keeps the chain verifiable from the first kept row
    /// (`prune_chain`), and records the pruning as a row of its own at
    /// `now`. Returns how many rows were dropped.
    pub fn prune_audit(&self, before: i64, now: i64, actor: &str) -> Result<u64, StoreError> {
        self.flush_folds(now)?;
        let pruned = prune_chain(self.sql, before)?;
        let meta = self.request;
        // Nothing older: the request still leaves its row, as a plain
        // `request` (a count is at least 1).
        let (event, count) = match pruned.dropped {
            0 => (Event::Request, None),
            n => (Event::Pruned, Some(n as i64)),
        };
        self.append(Content {
            at: now,
            event: event.as_str(),
            outcome: AuditOutcome::Ok.as_str(),
            actor,
            count,
            operation: Some(AuditOperation::AuditPrune.as_str()),
            // The row that accounts for the new start (`verify::unaccounted_start`).
            anchor_seq: pruned.anchor.as_ref().map(|(seq, _)| *seq),
            anchor_hash: pruned.anchor.as_ref().map(|(_, hash)| hash.as_str()),
            ..stamp(meta)
        })?;
        Ok(pruned.dropped)
    }
}

#[cfg(test)]
mod tests;
