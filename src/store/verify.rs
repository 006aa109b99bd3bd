//! Walking the audit trail's hash chain (`chain.rs`) to find the first row
//! that does not hold, and its head: for `volce-lab-host audit verify` and
//! `audit head`, for the doctor, and before `audit prune` drops anything.
//! Runs as root inside the host helper, always within a transaction; reads
//! only.
//!
//! What a walk can name: a row without a hash, an edited or moved row, rows
//! deleted from the middle, an inserted or reordered row, rows cut from the
//! start. What it cannot: a cut tail, or a chain recomputed whole by someone
//! with root; only a head hash kept off the host can (`from`).

use rusqlite::OptionalExtension as _;

use super::StoreError;
use super::chain::{anchor, entry, link};
use super::sql::{self, Sql};

/// The end of the chain: how many rows, and the last one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub rows: u64,
    /// seq, time and hash of the last row; `None` for an empty trail.
    pub last: Option<(i64, i64, Option<String>)>,
    /// What the first row chains from: [`GENESIS`](super::GENESIS), or after `audit prune`
    /// the last dropped row's hash.
    pub anchor: String,
}

impl Head {
    /// The hash a new row would chain from.
    pub fn hash(&self) -> Option<&str> {
        match &self.last {
            None => Some(&self.anchor),
            Some((_, _, hash)) => hash.as_deref(),
        }
    }
}

pub(super) fn head(tx: Sql<'_>) -> Result<Head, StoreError> {
    let rows: i64 = tx.prepare(sql::COUNT_ROWS)?.query_row([], |r| r.get(0))?;
    let last =
        tx.prepare(sql::HEAD_ROW)?.query_row([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional()?;
    let (_, anchor) = anchor(tx)?;
    Ok(Head { rows: rows.max(0) as u64, last, anchor })
}

/// The first place the chain does not hold, named by the row where it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Break {
    /// The row has no hash, or one of the wrong shape.
    Unhashed { seq: i64, at: i64 },
    /// The row's content (or its seq) is not what its hash was computed
    /// over: the row was edited, or moved to another seq.
    Altered { seq: i64, at: i64 },
    /// The row is intact but does not follow the row before it, and seqs
    /// are missing between them: rows `missing_from..=missing_to` were
    /// deleted.
    Deleted { seq: i64, at: i64, missing_from: i64, missing_to: i64 },
    /// The row is intact and its seq follows on, but it does not chain from
    /// the row before it: it was inserted, or rows were reordered.
    Unlinked { seq: i64, at: i64, after: i64 },
    /// The first row does not chain from the genesis value: the rows before
    /// it were deleted (or it was inserted there).
    NotFromGenesis { seq: i64, at: i64 },
}

impl Break {
    /// The seq and time of the row where the break shows.
    pub fn row(&self) -> (i64, i64) {
        match *self {
            Break::Unhashed { seq, at }
            | Break::Altered { seq, at }
            | Break::Deleted { seq, at, .. }
            | Break::Unlinked { seq, at, .. }
            | Break::NotFromGenesis { seq, at } => (seq, at),
        }
    }
}

/// What walking the chain found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    pub rows: u64,
    pub head: Head,
    /// The first break, if any (the walk stops there).
    pub broken: Option<Break>,
    /// With `from`: whether that hash is some row's hash on the intact
    /// part of the chain (or the genesis value).
    pub from_found: Option<bool>,
}

impl Verification {
    pub fn intact(&self) -> bool {
        self.broken.is_none() && self.from_found != Some(false)
    }
}

/// Walks the whole chain in seq order, recomputing every hash; stops at the
/// first break. With `from`, also whether that hash is on the chain before
/// the break (a kept head that is missing means the tail was cut or the
/// chain rewritten).
pub(super) fn verify(tx: Sql<'_>, from: Option<&str>) -> Result<Verification, StoreError> {
    let (anchor_seq, anchor_hash) = anchor(tx)?;
    let mut statement = tx.prepare(sql::ALL_ROWS)?;
    let rows = statement.query_map([], entry)?;
    let mut prev: Option<(i64, String)> = None;
    let mut count = 0u64;
    let mut broken = None;
    let mut from_found = from.map(|from| from == anchor_hash);
    for row in rows {
        let row = row?;
        count += 1;
        let (Some(prev_hash), Some(hash)) = (&row.prev_hash, &row.hash) else {
            broken = Some(Break::Unhashed { seq: row.seq, at: row.at });
            break;
        };
        if !crate::text::is_lower_hex(prev_hash, 64) || !crate::text::is_lower_hex(hash, 64) {
            broken = Some(Break::Unhashed { seq: row.seq, at: row.at });
            break;
        }
        if link(prev_hash, &row.content()) != *hash {
            broken = Some(Break::Altered { seq: row.seq, at: row.at });
            break;
        }
        match &prev {
            None if *prev_hash != anchor_hash || row.seq != anchor_seq => {
                broken = Some(Break::NotFromGenesis { seq: row.seq, at: row.at });
                break;
            }
            Some((prev_seq, expected)) if prev_hash != expected => {
                broken = Some(if row.seq > prev_seq + 1 {
                    Break::Deleted {
                        seq: row.seq,
                        at: row.at,
                        missing_from: prev_seq + 1,
                        missing_to: row.seq - 1,
                    }
                } else {
                    Break::Unlinked { seq: row.seq, at: row.at, after: *prev_seq }
                });
                break;
            }
            _ => {}
        }
        if from == Some(hash.as_str()) {
            from_found = Some(true);
        }
        prev = Some((row.seq, hash.clone()));
    }
    drop(statement);
    let head = head(tx)?;
    Ok(Verification { rows: if broken.is_none() { count } else { head.rows }, head, broken, from_found })
}
