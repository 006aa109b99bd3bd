//! The `request` rows of requests that changed nothing, and the folding of
//! identical ones. Runs as root inside the host helper, within the write
//! transaction `Store::end_request` opens.
//!
//! Why folding works this way: a chained row is final the moment it is
//! appended (its hash covers its content, and the next row's hash covers
//! its hash), so a count cannot be raised in place without breaking the
//! chain. Instead:
//! - the first request of a kind is appended at once, as its own row, so an
//!   operator sees it immediately. A kind is the caller, the operation, the
//!   outcome and for a refusal its code and, for the ssh gate's, its reason:
//!   a successful read (a request that changed nothing and was answered
//!   `ok`) folds with the same caller's reads of the same operation, a
//!   refusal with the same refusal. State changes are never folded (they
//!   are rows of their own, `transitions.rs`);
//! - repeats of it within [`WINDOW_SECS`] of that first one only raise a
//!   counter in `audit_folds`, a small unchained table (at most one entry
//!   per kind), which also keeps the length and digest of the latest
//!   refused command of the kind and every distinct digest it counted (the
//!   first [`MAX_DIGESTS`], then only how many repeats came beyond them);
//! - once the window has closed, the next request of any kind appends the
//!   counter as one chained row (`count` = the repeats, `at` = the last
//!   one, the latest command's length and digest, `command_digests` and
//!   `commands_beyond`) and drops the entry; `audit export` and `audit
//!   head` flush too.
//!
//! So a flood of identical requests adds at most two chained rows per kind
//! and window, and nothing chained is ever rewritten. What the window holds
//! before its flush is not yet tamper-evident: at most one window's count.
//!
//! Why the reason and the latest digest (issue 22): the agent's account can
//! send `gate_refusal` itself. Folded by code alone, a forged refusal
//! opened the window for every reason, and a real refused command right
//! after it was only a count: its digest never reached the trail. Now a
//! forged refusal opens the window of its own reason only, and a real one
//! after it in that window is the latest, whose digest the count row keeps.
//!
//! Why every distinct digest (issue 38): the latest alone could be replaced
//! by a forgery sent right after the real command, which then left no
//! trace in the trail. A window now keeps each distinct digest it counts,
//! so a forgery can only add digests, never remove one; bounded at
//! [`MAX_DIGESTS`] so a flood of distinct forgeries costs a fixed size
//! (the repeats beyond are counted in `commands_beyond`, and the real one
//! could hide only after 16 distinct forgeries that the count row shows).
//! The system log keeps every one.

use super::StoreError;
use super::chain::Content;
use super::rows::{AuditOutcome, Event, RequestEnd};
use super::sql;
use super::transitions::{Tx, stamp};
use crate::wire::gate::RefusalRecord;

/// How long repeats of one refusal are counted before they are appended.
pub const WINDOW_SECS: i64 = 60;

/// How many distinct command digests one window keeps; repeats beyond
/// them are only counted (the schema holds the list to this, step 16).
pub const MAX_DIGESTS: i64 = 16;

/// The folding key of a request that changed nothing, `None` for one that
/// is never folded: outcome, code (`""` for a read) and gate reason (`""`
/// when the request is not the gate's).
fn kind<'a>(
    end: &RequestEnd<'_>,
    gate: Option<&'a RefusalRecord>,
) -> Option<(AuditOutcome, &'static str, &'a str)> {
    let reason = gate.map_or("", |g| g.reason.as_str());
    match (end.outcome, end.code) {
        (AuditOutcome::Refused, Some(code)) => Some((AuditOutcome::Refused, code.as_str(), reason)),
        (AuditOutcome::Ok, None) => Some((AuditOutcome::Ok, "", reason)),
        _ => None,
    }
}

impl Tx<'_> {
    /// The row of an operator's command on the helper's own state (pause,
    /// resume, state backup, restore, remove-container): a `request` row
    /// with outcome `ok`, its operation the request's (`AuditOperation::Pause`,
    /// ...), stamped with the request's caller and uids.
    pub fn record_state_command(&self, at: i64) -> Result<(), StoreError> {
        let Some(meta) = self.request else { return Ok(()) };
        self.append(Content {
            at,
            event: Event::Request.as_str(),
            outcome: AuditOutcome::Ok.as_str(),
            duration_ms: Some(meta.elapsed_ms()),
            actor: &meta.actor,
            // The app the command was about (`state remove-container`'s).
            app: meta.app.as_deref(),
            ..stamp(Some(meta))
        })
    }

    /// Requests refused while the store could not be opened to record
    /// them (`paused`, `upgrade_waiting`), counted beside it and written
    /// once it opens: one row for `actor`'s `operation`, outcome
    /// `refused`, the code, with how many there were.
    pub fn record_counted_refusals(
        &self,
        at: i64,
        actor: &str,
        operation: super::rows::AuditOperation,
        code: crate::vocab::Code,
        count: i64,
    ) -> Result<(), StoreError> {
        self.append(Content {
            at,
            event: Event::Request.as_str(),
            outcome: AuditOutcome::Refused.as_str(),
            actor,
            operation: Some(operation.as_str()),
            code: Some(code.as_str()),
            count: Some(count.max(1)),
            ..Content::default()
        })
    }

    /// Appends the `request` row of the request being served (or counts it
    /// as a repeat of its kind in its window), after flushing the closed
    /// windows. Nothing without a request set.
    pub fn record_request(&self, end: &RequestEnd<'_>) -> Result<(), StoreError> {
        self.flush_folds(end.at)?;
        let Some(meta) = self.request else { return Ok(()) };
        // The trail's own retention rides on the request rows, so a flood
        // of them cannot outgrow it (one indexed read when nothing is due).
        self.retain_audit(end.at, &meta.actor)?;
        let operation = meta.operation.as_str();
        if let Some((outcome, code, reason)) = kind(end, meta.gate.as_ref()) {
            let stamped = stamp(Some(meta));
            let counted = self.sql.prepare(sql::FOLD_COUNT)?.execute(rusqlite::params![
                meta.actor,
                operation,
                outcome.as_str(),
                code,
                reason,
                end.at,
                stamped.command_bytes,
                stamped.command_sha256,
                MAX_DIGESTS,
            ])?;
            if counted == 1 {
                return Ok(());
            }
            self.sql.prepare(sql::FOLD_OPEN)?.execute(rusqlite::params![
                meta.actor,
                operation,
                outcome.as_str(),
                code,
                reason,
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
        let closed: Vec<Closed> = {
            let mut statement = self.sql.prepare(sql::FOLDS_CLOSED)?;
            statement
                .query_map(rusqlite::params![WINDOW_SECS, now], |r| {
                    Ok(Closed {
                        actor: r.get(0)?,
                        operation: r.get(1)?,
                        outcome: r.get(2)?,
                        code: r.get(3)?,
                        reason: r.get(4)?,
                        last_at: r.get(5)?,
                        count: r.get(6)?,
                        command_bytes: r.get(7)?,
                        command_sha256: r.get(8)?,
                        digests: super::chain::digests(9, &r.get::<_, String>(9)?)?,
                        beyond: r.get(10)?,
                    })
                })?
                .collect::<Result<_, _>>()?
        };
        for fold in &closed {
            if fold.count > 0 {
                let text = |t: &'_ str| Some(t).filter(|t| !t.is_empty()).map(str::to_owned);
                let (code, reason) = (text(&fold.code), text(&fold.reason));
                self.append(Content {
                    at: fold.last_at,
                    event: Event::Request.as_str(),
                    outcome: &fold.outcome,
                    actor: &fold.actor,
                    operation: Some(&fold.operation),
                    code: code.as_deref(),
                    count: Some(fold.count),
                    gate_reason: reason.as_deref(),
                    command_bytes: fold.command_bytes,
                    command_sha256: fold.command_sha256.as_deref(),
                    command_digests: Some(fold.digests.as_slice()).filter(|d| !d.is_empty()),
                    commands_beyond: Some(fold.beyond).filter(|b| *b > 0),
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

/// One closed window, as `sql::FOLDS_CLOSED` reads it.
struct Closed {
    actor: String,
    operation: String,
    outcome: String,
    code: String,
    reason: String,
    last_at: i64,
    count: i64,
    command_bytes: Option<i64>,
    command_sha256: Option<String>,
    digests: Vec<String>,
    beyond: i64,
}
