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
use super::chain::{GENESIS, anchor, entry, link};
use super::rows::{AuditOperation, Event};
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
    /// The seq the kept chain starts at: 1, or after `audit prune` the
    /// first kept row's. With `anchor`, what an operator keeps beside the
    /// head hash (`audit head` prints both).
    pub anchor_seq: i64,
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
    let (anchor_seq, anchor) = anchor(tx)?;
    Ok(Head { rows: rows.max(0) as u64, last, anchor, anchor_seq })
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
    /// The kept chain starts after seq 1 (from an anchor), and no row of
    /// the audit trail's own pruning on it names that anchor: rows
    /// `missing_from..=missing_to` were deleted from the start and the
    /// anchor set to hide it. `seq`/`at`: the first kept row (the anchor's
    /// seq and 0 when no row is left).
    Unaccounted { seq: i64, at: i64, missing_from: i64, missing_to: i64 },
}

impl Break {
    /// The seq and time of the row where the break shows.
    pub fn row(&self) -> (i64, i64) {
        match *self {
            Break::Unhashed { seq, at }
            | Break::Altered { seq, at }
            | Break::Deleted { seq, at, .. }
            | Break::Unlinked { seq, at, .. }
            | Break::NotFromGenesis { seq, at }
            | Break::Unaccounted { seq, at, .. } => (seq, at),
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
    // The doctor reads older databases too (held for a downgrade, or
    // waiting for a migration): their rows have no digest columns.
    let version: i64 = tx.prepare(sql::SCHEMA_VERSION)?.query_row([], |r| r.get(0))?;
    let all = if version >= super::schema::SIGNERS_STEP {
        sql::ALL_ROWS
    } else if version >= super::schema::DIGESTS_STEP {
        sql::ALL_ROWS_BEFORE_SIGNERS
    } else {
        sql::ALL_ROWS_BEFORE_DIGESTS
    };
    let mut statement = tx.prepare(all)?;
    let rows = statement.query_map([], entry)?;
    let mut prev: Option<(i64, String)> = None;
    let mut count = 0u64;
    let mut broken = None;
    let mut from_found = from.map(|from| from == anchor_hash);
    let mut first: Option<(i64, i64)> = None;
    let mut last_prune: Option<(i64, Option<i64>, Option<String>)> = None;
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
        if first.is_none() {
            first = Some((row.seq, row.at));
        }
        if row.event == Event::Pruned.as_str()
            && row.operation.as_deref() == Some(AuditOperation::AuditPrune.as_str())
        {
            last_prune = Some((row.seq, row.anchor_seq, row.anchor_hash.clone()));
        }
        prev = Some((row.seq, hash.clone()));
    }
    drop(statement);
    if broken.is_none() {
        broken = unaccounted_start((anchor_seq, &anchor_hash), first, last_prune.as_ref());
    }
    let head = head(tx)?;
    Ok(Verification { rows: if broken.is_none() { count } else { head.rows }, head, broken, from_found })
}

/// Whether the kept chain's start is accounted for (issue 22). A start
/// other than seq 1 and [`GENESIS`] is only ever set by a pruning of the
/// trail (`retention::prune_chain`), which appends, after the rows it kept,
/// a chained `pruned` row that names the anchor it set. The newest such row
/// must name the anchor in force: rows deleted from the start and the
/// anchor table edited to match (root can) leave no such row, or one that
/// names an older anchor, and a chained row cannot be added without
/// breaking the chain after it (or, recomputed whole, the kept head).
/// A `pruned` row written before migration 10 names no anchor; it is taken
/// as accounting for the start (it cannot be checked, docs/reliability.md).
fn unaccounted_start(
    (anchor_seq, anchor_hash): (i64, &str),
    first: Option<(i64, i64)>,
    last_prune: Option<&(i64, Option<i64>, Option<String>)>,
) -> Option<Break> {
    if anchor_seq == 1 && anchor_hash == GENESIS {
        return None;
    }
    let (seq, at) = first.unwrap_or((anchor_seq, 0));
    let missing_from = match last_prune {
        Some((_, None, None)) => return None,
        Some((_, Some(named), Some(hash))) if *named == anchor_seq && hash == anchor_hash => return None,
        // An older pruning set an earlier start: what lies between it and
        // this one is what no pruning accounts for.
        Some((_, Some(named), _)) if *named < anchor_seq => *named,
        _ => 1,
    };
    Some(Break::Unaccounted { seq, at, missing_from, missing_to: (anchor_seq - 1).max(missing_from) })
}
