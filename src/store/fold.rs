//! The `request` rows of requests that changed nothing, and the folding of
//! identical refusals. Runs as root inside the host helper, within the
//! write transaction `Store::end_request` opens.
//!
//! Why folding works this way: a chained row is final the moment it is
//! appended (its hash covers its content, and the next row's hash covers
//! its hash), so a count cannot be raised in place without breaking the
//! chain. Instead:
//! - the first refusal of a kind (same caller, operation and code) is
//!   appended at once, as its own row, so an operator sees it immediately;
//! - repeats of it within [`WINDOW_SECS`] of that first one only raise a
//!   counter in `audit_folds`, a small unchained table (at most one entry
//!   per kind of refusal);
//! - once the window has closed, the next request of any kind appends the
//!   counter as one chained row (`count` = the repeats, `at` = the last
//!   one) and drops the entry; `audit export` and `audit head` flush too.
//!
//! So a flood of identical refusals adds at most two chained rows per
//! window, and nothing chained is ever rewritten. What the window holds
//! before its flush is not yet tamper-evident: at most one window's count.

use super::StoreError;
use super::chain::Content;
use super::rows::{AuditOutcome, Event, RequestEnd};
use super::sql;
use super::transitions::{Tx, stamp};

/// How long repeats of one refusal are counted before they are appended.
pub const WINDOW_SECS: i64 = 60;

impl Tx<'_> {
    /// Appends the `request` row of the request being served (or counts it
    /// as a repeat of a refusal in its window), after flushing the closed
    /// windows. Nothing without a request set.
    pub fn record_request(&self, end: &RequestEnd<'_>) -> Result<(), StoreError> {
        self.flush_folds(end.at)?;
        let Some(meta) = self.request else { return Ok(()) };
        let operation = meta.operation.as_str();
        if let (AuditOutcome::Refused, Some(code)) = (end.outcome, end.code) {
            let counted = self.sql.prepare(sql::FOLD_COUNT)?.execute(rusqlite::params![
                meta.actor,
                operation,
                code.as_str(),
                end.at
            ])?;
            if counted == 1 {
                return Ok(());
            }
            self.sql.prepare(sql::FOLD_OPEN)?.execute(rusqlite::params![
                meta.actor,
                operation,
                code.as_str(),
                end.at
            ])?;
        }
        self.append(Content {
            at: end.at,
            event: Event::Request.as_str(),
            plan_id: end.plan_id,
            action: end.action,
            outcome: end.outcome.as_str(),
            duration_ms: Some(meta.elapsed_ms()),
            actor: &meta.actor,
            app: meta.app.as_deref(),
            code: end.code.map(crate::vocab::Code::as_str),
            ..stamp(Some(meta))
        })
    }

    /// Appends one row for every window closed by `now` that counted
    /// repeats, and forgets every closed window.
    pub fn flush_folds(&self, now: i64) -> Result<(), StoreError> {
        let closed: Vec<(String, String, String, i64, i64)> = {
            let mut statement = self.sql.prepare(sql::FOLDS_CLOSED)?;
            statement
                .query_map(rusqlite::params![WINDOW_SECS, now], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })?
                .collect::<Result<_, _>>()?
        };
        for (actor, operation, code, last_at, count) in &closed {
            if *count > 0 {
                self.append(Content {
                    at: *last_at,
                    event: Event::Request.as_str(),
                    outcome: AuditOutcome::Refused.as_str(),
                    actor,
                    operation: Some(operation),
                    code: Some(code),
                    count: Some(*count),
                    ..Content::default()
                })?;
            }
        }
        if !closed.is_empty() {
            self.sql.prepare(sql::FOLDS_DROP)?.execute(rusqlite::params![WINDOW_SECS, now])?;
        }
        Ok(())
    }
}
