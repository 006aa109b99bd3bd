//! The audit trail as the operator reads it: its head, the walk that
//! verifies it, the export, and one plan's state changes. Runs as root
//! inside the host helper (`volce-lab-host audit ...`, the tests), within
//! the caller's transaction; the hashing and the walk are `chain.rs` and
//! `verify.rs`.

use super::StoreError;
use super::chain::{self, ChainedEntry};
use super::rows::AuditEntry;
use super::sql;
use super::transitions::Tx;
use super::verify::{self, Head, Verification};
use crate::vocab::PlanId;
use crate::wire::witness::{AuditProof, MAX_PROOF_BYTES, MAX_PROOF_ROWS, Witnessed};
use rusqlite::{OptionalExtension as _, params};

impl Tx<'_> {
    /// The end of the audit chain (for `audit head`).
    pub fn audit_head(&self) -> Result<Head, StoreError> {
        verify::head(self.sql)
    }

    /// Walks the whole audit chain (for `audit verify`); see `verify::verify`.
    pub fn verify_audit(&self, from: Option<&str>) -> Result<Verification, StoreError> {
        verify::verify(self.sql, from)
    }

    /// Every audit row at or after `since` (unix seconds), oldest first,
    /// hashes included (for `audit export`).
    pub fn audit_since(&self, since: i64, each: impl FnMut(ChainedEntry)) -> Result<(), StoreError> {
        chain::for_each_since(self.sql, since, each)
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

impl Tx<'_> {
    /// The proof a reply carries that the chain extends `witnessed` (the
    /// head the workstation sent, `crate::wire::witness`): the head, and
    /// the canonical contents of the rows after the witnessed one, at most
    /// `MAX_PROOF_ROWS` and `MAX_PROOF_BYTES` (at least one). When the
    /// witnessed row is not kept with that hash (nor is it the last pruned
    /// one, the kept chain's start), the head's own row and the hash it
    /// names as its predecessor: the workstation judges what that means.
    /// Reads only; `None` for an empty trail.
    pub fn audit_proof(&self, witnessed: Option<&Witnessed>) -> Result<Option<AuditProof>, StoreError> {
        let head = verify::head(self.sql)?;
        let Some((seq, _, Some(hash))) = head.last else { return Ok(None) };
        let kept = match witnessed {
            Some(w) if w.seq == head.anchor_seq - 1 => w.hash == head.anchor,
            Some(w) if w.seq >= head.anchor_seq && w.seq <= seq => {
                let stored: Option<Option<String>> =
                    self.sql.prepare(sql::ROW_HASH)?.query_row([w.seq], |r| r.get(0)).optional()?;
                stored.flatten().as_deref() == Some(w.hash.as_str())
            }
            _ => false,
        };
        let (after, from) = match witnessed {
            Some(w) if kept => (Some(w.seq), w.seq + 1),
            _ => (None, seq),
        };
        let mut rows = Vec::new();
        let mut prev = None;
        let mut bytes = 0;
        let mut statement = self.sql.prepare(sql::ROWS_FROM)?;
        for row in statement.query_map(params![from, MAX_PROOF_ROWS - 1], chain::entry)? {
            let row = row?;
            let text = crate::control::canonical::to_string(&row.content()).unwrap_or_default();
            if !rows.is_empty() && bytes + text.len() > MAX_PROOF_BYTES {
                break;
            }
            if rows.is_empty() && after.is_none() {
                prev = row.prev_hash.clone();
            }
            bytes += text.len();
            rows.push(text);
        }
        Ok(Some(AuditProof { seq, hash, anchor_seq: head.anchor_seq, after, prev, rows }))
    }
}
