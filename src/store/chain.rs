//! The audit trail's hash chain: a row's hashed content, appending a row,
//! filling the chain for rows an older schema wrote, reading rows as stored.
//! Walking the chain to find the first row that was changed is `verify.rs`.
//! Runs as root inside the host helper, always within a transaction.
//!
//! Each audit row carries `prev_hash` (the `hash` of the row before it, or
//! [`GENESIS`] for the first) and `hash` = sha256 over the bytes of
//! `prev_hash` (64 lowercase hex characters, as stored) followed by the
//! row's canonical JSON ([`Content`]: `crate::control::canonical`, keys
//! sorted, no whitespace, NULL columns left out). An operator can recompute
//! one off the host: `printf '%s%s' "$prev_hash" "$content" | sha256sum`.
//!
//! Invariants enforced here:
//! - [`append`] is the only place an audit row is inserted: it reads the
//!   last row's hash and writes the new row in the caller's transaction, and
//!   every write is `BEGIN IMMEDIATE`, so two helpers never chain from the
//!   same row;
//! - the row's `seq` is part of its content, so a renumbered or moved row no
//!   longer matches its hash;
//! - NULL columns are left out of the content, so a later migration that
//!   adds a column (NULL on old rows) keeps every existing hash valid;
//! - the chain cannot prove that nothing was cut from its end, nor that the
//!   whole chain was not recomputed by someone with root: only a head hash
//!   kept off the host can (`verify::verify` with `from`).

use rusqlite::{OptionalExtension as _, params};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use super::StoreError;
use super::sql::{self, Sql};

/// What the first row chains from.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The hashed content of one audit row: its columns, except the two hashes.
///
/// Migration 6 made `plan_id` and `action` nullable and added the columns
/// after `actor`. Every row written before it has `plan_id` and `action` and
/// NULL in the new columns, so its content serializes to exactly the bytes
/// it was hashed over; rows written since carry the new columns in their
/// content (a test checks both).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Content<'a> {
    pub seq: i64,
    pub at: i64,
    pub event: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<&'a str>,
    pub outcome: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    pub actor: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sudo_uid: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub login_uid: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate_reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_sha256: Option<&'a str>,
    /// On a `pruned` row of the audit trail's own pruning (migration 10):
    /// the anchor that pruning set, so `verify` can tell that the kept
    /// chain's start is accounted for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchor_seq: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchor_hash: Option<&'a str>,
    /// On a count row of refused commands (migration 16): every distinct
    /// digest its window counted, the first 16 (`fold::MAX_DIGESTS`)
    /// in the order first seen, and how many repeats came beyond them.
    /// Hashed as a JSON array, whatever text stores it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_digests: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commands_beyond: Option<i64>,
    /// On the `approved` row of a signed approval (migration 17): the
    /// signing key's OpenSSH fingerprint and the sha256 of the statement
    /// it signed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statement_sha256: Option<&'a str>,
}

/// sha256(prev_hash || canonical content), lowercase hex. Public (as
/// `store::chain_link`) for benches that fill a trail through the raw
/// connection, and for anyone checking an export.
pub fn link(prev_hash: &str, content: &Content<'_>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev_hash.as_bytes());
    // A struct of strings and integers always serializes.
    hasher.update(crate::control::canonical::to_vec(content).unwrap_or_default());
    crate::text::hex(&hasher.finalize())
}

/// One audit row as stored, hashes included (for verify and export).
/// `Default` is the row with every optional column empty, as rows written
/// before migration 7 are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ChainedEntry {
    pub seq: i64,
    pub at: i64,
    pub event: String,
    pub plan_id: Option<String>,
    pub action: Option<String>,
    pub outcome: String,
    pub exit_code: Option<i64>,
    pub duration_ms: Option<i64>,
    pub actor: String,
    pub operation: Option<String>,
    pub app: Option<String>,
    pub code: Option<String>,
    pub process: Option<String>,
    pub request_id: Option<String>,
    pub count: Option<i64>,
    pub sudo_uid: Option<i64>,
    pub login_uid: Option<i64>,
    pub gate_reason: Option<String>,
    pub command_bytes: Option<i64>,
    pub command_sha256: Option<String>,
    pub anchor_seq: Option<i64>,
    pub anchor_hash: Option<String>,
    pub command_digests: Option<Vec<String>>,
    pub commands_beyond: Option<i64>,
    pub signer_key: Option<String>,
    pub statement_sha256: Option<String>,
    pub prev_hash: Option<String>,
    pub hash: Option<String>,
}

impl ChainedEntry {
    pub fn content(&self) -> Content<'_> {
        Content {
            seq: self.seq,
            at: self.at,
            event: &self.event,
            plan_id: self.plan_id.as_deref(),
            action: self.action.as_deref(),
            outcome: &self.outcome,
            exit_code: self.exit_code,
            duration_ms: self.duration_ms,
            actor: &self.actor,
            operation: self.operation.as_deref(),
            app: self.app.as_deref(),
            code: self.code.as_deref(),
            process: self.process.as_deref(),
            request_id: self.request_id.as_deref(),
            count: self.count,
            sudo_uid: self.sudo_uid,
            login_uid: self.login_uid,
            gate_reason: self.gate_reason.as_deref(),
            command_bytes: self.command_bytes,
            command_sha256: self.command_sha256.as_deref(),
            anchor_seq: self.anchor_seq,
            anchor_hash: self.anchor_hash.as_deref(),
            command_digests: self.command_digests.as_deref(),
            commands_beyond: self.commands_beyond,
            signer_key: self.signer_key.as_deref(),
            statement_sha256: self.statement_sha256.as_deref(),
        }
    }
}

/// One row of `sql::ALL_ROWS` or `sql::ROWS_SINCE`.
pub(super) fn entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<ChainedEntry> {
    Ok(ChainedEntry {
        seq: r.get(0)?,
        at: r.get(1)?,
        event: r.get(2)?,
        plan_id: r.get(3)?,
        action: r.get(4)?,
        outcome: r.get(5)?,
        exit_code: r.get(6)?,
        duration_ms: r.get(7)?,
        actor: r.get(8)?,
        operation: r.get(9)?,
        app: r.get(10)?,
        code: r.get(11)?,
        process: r.get(12)?,
        request_id: r.get(13)?,
        count: r.get(14)?,
        sudo_uid: r.get(15)?,
        login_uid: r.get(16)?,
        gate_reason: r.get(17)?,
        command_bytes: r.get(18)?,
        command_sha256: r.get(19)?,
        anchor_seq: r.get(20)?,
        anchor_hash: r.get(21)?,
        command_digests: r.get::<_, Option<String>>(22)?.map(|text| digests(22, &text)).transpose()?,
        commands_beyond: r.get(23)?,
        signer_key: r.get(24)?,
        statement_sha256: r.get(25)?,
        prev_hash: r.get(26)?,
        hash: r.get(27)?,
    })
}

/// A stored list of digests (a JSON array, as `append` writes it). Its
/// shape is checked by the schema; anything else is a corrupt row.
pub(super) fn digests(column: usize, text: &str) -> rusqlite::Result<Vec<String>> {
    serde_json::from_str(text).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// One row of `sql::V4_ROWS`: the columns of a migration-4 audit table, for
/// the backfill that runs before migration 6 added the rest.
fn v4_entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<ChainedEntry> {
    Ok(ChainedEntry {
        seq: r.get(0)?,
        at: r.get(1)?,
        event: r.get(2)?,
        plan_id: r.get(3)?,
        action: r.get(4)?,
        outcome: r.get(5)?,
        exit_code: r.get(6)?,
        duration_ms: r.get(7)?,
        actor: r.get(8)?,
        ..ChainedEntry::default()
    })
}

/// The last row's seq and hash, `None` for an empty trail.
pub(super) fn last(tx: Sql<'_>) -> Result<Option<(i64, Option<String>)>, StoreError> {
    Ok(tx.prepare(sql::LAST_ROW)?.query_row([], |r| Ok((r.get(0)?, r.get(1)?))).optional()?)
}

/// Appends one row to the chain. `content.seq` is ignored: the row gets the
/// seq after the last one, which is part of what is hashed. A last row
/// without a hash was tampered with; nothing is chained onto it (fail
/// closed: the caller's whole transaction rolls back).
/// Returns the content as hashed (with its seq) and its hash.
pub(super) fn append<'a>(tx: Sql<'_>, content: Content<'a>) -> Result<(Content<'a>, String), StoreError> {
    let (seq, prev) = match last(tx)? {
        None => anchor(tx)?,
        Some((seq, Some(hash))) => (seq + 1, hash),
        Some((_, None)) => return Err(StoreError::Corrupt),
    };
    let content = Content { seq, ..content };
    let hash = link(&prev, &content);
    tx.prepare(sql::INSERT_AUDIT)?.execute(params![
        content.seq,
        content.at,
        content.event,
        content.plan_id,
        content.action,
        content.outcome,
        content.exit_code,
        content.duration_ms,
        content.actor,
        content.operation,
        content.app,
        content.code,
        content.process,
        content.request_id,
        content.count,
        content.sudo_uid,
        content.login_uid,
        content.gate_reason,
        content.command_bytes,
        content.command_sha256,
        content.anchor_seq,
        content.anchor_hash,
        content.command_digests.map(|d| serde_json::Value::from(d.to_vec()).to_string()),
        content.commands_beyond,
        content.signer_key,
        content.statement_sha256,
        prev,
        hash,
    ])?;
    Ok((content, hash))
}

/// Where the kept chain starts: the seq of the first row kept by the last
/// `audit prune` and the hash that row chains from (the last pruned row's);
/// seq 1 and [`GENESIS`] when nothing was ever pruned. Stored in the
/// one-row table `audit_anchor` (migration 6), written only by
/// `retention::prune_chain`.
pub(super) fn anchor(tx: Sql<'_>) -> Result<(i64, String), StoreError> {
    let row: Option<(i64, String)> =
        tx.prepare(sql::ANCHOR)?.query_row([], |r| Ok((r.get(0)?, r.get(1)?))).optional()?;
    Ok(row.unwrap_or((1, GENESIS.to_owned())))
}

/// Migration 4's second half: chains the rows an older schema wrote, oldest
/// first, as they are at the moment of the migration.
pub(super) fn backfill(tx: Sql<'_>) -> Result<(), StoreError> {
    let rows: Vec<ChainedEntry> = {
        let mut statement = tx.prepare(sql::V4_ROWS)?;
        statement.query_map([], v4_entry)?.collect::<Result<_, _>>()?
    };
    let mut update = tx.prepare(sql::BACKFILL)?;
    let mut prev = GENESIS.to_owned();
    for row in &rows {
        let hash = link(&prev, &row.content());
        update.execute(params![row.seq, prev, hash])?;
        prev = hash;
    }
    Ok(())
}

/// Calls `each` with every row whose time is at or after `since`, oldest
/// first, without holding them all in memory.
pub(super) fn for_each_since(
    tx: Sql<'_>,
    since: i64,
    mut each: impl FnMut(ChainedEntry),
) -> Result<(), StoreError> {
    let mut statement = tx.prepare(sql::ROWS_SINCE)?;
    let rows = statement.query_map([since], entry)?;
    for row in rows {
        each(row?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_content_is_canonical_and_leaves_nulls_out() {
        let content = Content {
            seq: 7,
            at: 1000,
            event: "approved",
            plan_id: Some("0123"),
            action: Some("stop"),
            outcome: "ok",
            exit_code: None,
            duration_ms: Some(12),
            actor: "alice",
            ..Content::default()
        };
        assert_eq!(
            crate::control::canonical::to_string(&content).unwrap(),
            r#"{"action":"stop","actor":"alice","at":1000,"duration_ms":12,"event":"approved","outcome":"ok","plan_id":"0123","seq":7}"#
        );
    }

    #[test]
    fn a_link_is_sha256_of_the_previous_hash_then_the_content() {
        // Golden: what `printf '%s%s' "$prev" "$content" | sha256sum` prints.
        let content = Content {
            seq: 1,
            at: 0,
            event: "prepared",
            plan_id: Some("p"),
            action: Some("stop"),
            outcome: "ok",
            exit_code: Some(0),
            duration_ms: None,
            actor: "agent",
            ..Content::default()
        };
        let bytes = format!(
            "{GENESIS}{}",
            r#"{"action":"stop","actor":"agent","at":0,"event":"prepared","exit_code":0,"outcome":"ok","plan_id":"p","seq":1}"#
        );
        assert_eq!(link(GENESIS, &content), crate::text::hex(&Sha256::digest(bytes.as_bytes())));
        assert_eq!(GENESIS.len(), 64);
    }
}
