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
