//! The audit trail witnessed off the host (issue 45): the head the
//! workstation last saw of a host's hash chain, sent with each request
//! ([`Witnessed`], the request's `witness` field), the proof each reply
//! carries that the host's chain still extends it ([`AuditProof`], the
//! reply's `audit` field), and the check the workstation runs on it
//! ([`check`]). Written once for both ends; pure, no I/O.
//!
//! A row's hash is sha256 over its `prev_hash` (64 lowercase hex
//! characters) followed by its canonical content (`crate::store::chain`),
//! so a proof is the rows' contents, exactly as hashed, after the witnessed
//! row: the workstation recomputes every hash from the one it holds. A host
//! cannot make rows that chain from a witnessed hash without the witnessed
//! row (sha256), so a chain that was rewritten up to it, rolled back behind
//! it (an old `state.db` restored) or cut at its start past it cannot give
//! the proof, and [`check`] names the witnessed seq.
//!
//! What it cannot see: rows written and rewritten between two calls (never
//! witnessed), and a chain cut legitimately by retention after the
//! workstation stopped calling for [`RETENTION_SECS`]: a witnessed row older
//! than that may be gone, and the workstation then takes the host's head
//! as new (docs/security.md, The trail witnessed off the host).
//!
//! Both fields travel only between this build's ends: the workstation adds
//! `witness` only for a server of protocol 2 or later
//! (`Feature::WitnessField`), and the helper adds `audit` only when the
//! request said protocol 2 or later, so a 0.1.0 helper and workstation
//! see exactly the bytes they always did ("not witnessed").

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The most rows one proof carries, and the most bytes of their content
/// (at least one row always goes): a reply stays far below the
/// workstation's 128 KiB limit. A host further ahead than that is
/// witnessed in steps, one per call.
pub const MAX_PROOF_ROWS: i64 = 64;
pub const MAX_PROOF_BYTES: usize = 32 * 1024;

/// The host's audit retention (`crate::store::AUDIT_RETENTION_DAYS`, held
/// equal by a test there): a witnessed row older than this may have been
/// dropped by retention, one younger may not.
pub const RETENTION_SECS: i64 = 180 * 86_400;

/// The head the workstation witnessed: the request's `witness` field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Witnessed {
    pub seq: i64,
    pub hash: String,
}

impl Witnessed {
    /// Whether it has the shape of a row's seq and hash; the helper refuses
    /// any other (`invalid_request`).
    pub fn is_shaped(&self) -> bool {
        self.seq >= 1 && crate::text::is_lower_hex(&self.hash, 64)
    }
}

/// The reply's `audit` field: the host's head after this request, and the
/// rows that prove it extends the witnessed one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditProof {
    /// The last row's seq and hash, after this request's own row.
    pub seq: i64,
    pub hash: String,
    /// The seq the kept chain starts at (1, or after a pruning the first
    /// kept row's).
    pub anchor_seq: i64,
    /// The witnessed seq the rows follow, when the host still keeps that
    /// row with the witnessed hash (or it is the last pruned one, whose
    /// hash the kept chain starts from); absent when it does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<i64>,
    /// Without `after`: the hash the first row names as its predecessor
    /// (the host's word: nothing witnessed proves it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<String>,
    /// Consecutive rows' canonical contents, exactly the bytes hashed,
    /// oldest first: after `after`, or from the head's row without it.
    pub rows: Vec<String>,
}

/// How far apart two [`Mark`]s are at least, and the most a head keeps:
/// one per 6 hours covers the retention (720), with room to spare.
pub const MARK_SPACING_SECS: i64 = 6 * 3600;
pub const MAX_MARKS: usize = 800;

/// A row the workstation witnessed earlier, by seq and time: a chain whose
/// start moved past one younger than the retention was cut beyond it, even
/// when the newest witnessed row is still kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    pub seq: i64,
    pub at: i64,
}

/// What a workstation holds of one target's chain after a check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub seq: i64,
    pub hash: String,
    /// The row's own time (unix seconds), from its hashed content.
    pub at: i64,
    /// The host's head when the proof stopped short of it (more rows than
    /// one proof carries): checked when a later proof passes that seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed: Option<Witnessed>,
    /// Earlier witnessed rows younger than the retention, oldest first,
    /// at least [`MARK_SPACING_SECS`] apart (the head itself is one too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marks: Vec<Mark>,
}

impl Head {
    /// A head with no claim and no marks (the operator's accepted one).
    pub fn new(seq: i64, hash: String, at: i64) -> Head {
        Head { seq, hash, at, claimed: None, marks: Vec::new() }
    }

    /// The newest witnessed row, younger than the retention at `now`, that
    /// a chain starting at `anchor_seq` no longer keeps.
    fn cut_by(&self, anchor_seq: i64, now: i64) -> Option<i64> {
        let young = |at: i64| at >= now.saturating_sub(RETENTION_SECS);
        let head = Mark { seq: self.seq, at: self.at };
        self.marks.iter().chain([&head]).filter(|m| m.seq < anchor_seq && young(m.at)).map(|m| m.seq).max()
    }

    /// The marks a head that follows this one keeps at `now`.
    fn marks_after(&self, now: i64) -> Vec<Mark> {
        let mut marks: Vec<Mark> =
            self.marks.iter().copied().filter(|m| m.at >= now.saturating_sub(RETENTION_SECS)).collect();
        let young = self.at >= now.saturating_sub(RETENTION_SECS);
        if young && marks.last().is_none_or(|last| self.at >= last.at + MARK_SPACING_SECS) {
            marks.push(Mark { seq: self.seq, at: self.at });
        }
        let over = marks.len().saturating_sub(MAX_MARKS);
        marks.drain(..over);
        marks
    }
}

/// How a host's answer failed the witness; every one names the witnessed
/// seq it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Mismatch {
    /// The host's head is behind the witnessed seq: an older state
    /// restored, or rows cut from the end.
    RolledBack { seq: i64, host_seq: i64 },
    /// The host keeps that seq but not with the witnessed hash, or its
    /// rows do not hash to what it names: the chain was rewritten.
    Rewritten { seq: i64 },
    /// The host's kept chain starts after a witnessed row (`seq`, the
    /// newest such) that is younger than its retention: rows were cut
    /// from the start.
    FrontCut { seq: i64, anchor_seq: i64 },
    /// An `ok` answer of a helper whose protocol carries its head came
    /// without one (or the helper now says protocol 1).
    Withheld { seq: i64 },
}

impl Mismatch {
    pub fn seq(&self) -> i64 {
        match *self {
            Mismatch::RolledBack { seq, .. }
            | Mismatch::Rewritten { seq }
            | Mismatch::FrontCut { seq, .. }
            | Mismatch::Withheld { seq } => seq,
        }
    }

    /// One clause: what the host's chain did to the witnessed row.
    pub fn describe(&self) -> String {
        match *self {
            Mismatch::RolledBack { seq, host_seq } => format!(
                "the host's audit head is seq {host_seq}, behind seq {seq} that this workstation witnessed \
                 (an older state.db restored, or rows cut from the end)"
            ),
            Mismatch::Rewritten { seq } => format!(
                "the host's audit chain no longer extends the hash this workstation witnessed at seq {seq} \
                 (rows rewritten)"
            ),
            Mismatch::FrontCut { seq, anchor_seq } => format!(
                "the host's audit chain now starts at seq {anchor_seq}, past seq {seq}, a row this workstation \
                 witnessed that is less than 180 days old (rows cut beyond the retention)"
            ),
            Mismatch::Withheld { seq } => format!(
                "the host answered without its audit head, which it carried before (witnessed up to seq {seq})"
            ),
        }
    }
}

/// The proof a reply's line carries beside its status (`audit`), if it
/// carries one of the right shape; the reply itself is read as before
/// (`super::Reply::parse`), which ignores it.
pub fn carried(stdout: &[u8]) -> Option<AuditProof> {
    #[derive(Deserialize)]
    struct Beside {
        audit: Option<AuditProof>,
    }
    serde_json::from_slice::<Beside>(stdout.trim_ascii_end()).ok()?.audit
}

/// The seq and time of a row, read from its content.
#[derive(Deserialize)]
struct RowTime {
    seq: i64,
    at: i64,
}

/// The chain's link: sha256 over `prev` then `content` (`store::chain::link`).
pub fn link(prev: &str, content: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev.as_bytes());
    hasher.update(content);
    crate::text::hex(&hasher.finalize())
}

/// Checks `proof` against what the workstation holds (`held`, `None` for a
/// target never witnessed) at `now` (unix seconds): the new head to hold,
/// or the mismatch. `Ok(None)`: nothing to witness yet (an empty trail).
pub fn check(held: Option<&Head>, proof: &AuditProof, now: i64) -> Result<Option<Head>, Mismatch> {
    // A head restored from an older state is named as that, whatever its start.
    if let Some(head) = held
        && proof.seq >= head.seq
        && let Some(seq) = head.cut_by(proof.anchor_seq, now)
    {
        return Err(Mismatch::FrontCut { seq, anchor_seq: proof.anchor_seq });
    }
    let start = match (held, proof.after) {
        (Some(head), Some(after)) if after == head.seq => Start::Witnessed(head),
        // Rows after a seq we did not send: not a proof of ours.
        (Some(head), Some(_)) => return Err(Mismatch::Rewritten { seq: head.seq }),
        (None, Some(_)) => Start::Taken,
        (Some(head), None) => judge_lost(head, proof)?,
        (None, None) => Start::Taken,
    };
    let (mut hash, mut expected) = match start {
        Start::Witnessed(head) => (head.hash.clone(), Some(head.seq + 1)),
        Start::Taken => match &proof.prev {
            Some(prev) => (prev.clone(), None),
            None if proof.rows.is_empty() => return Ok(held.cloned()),
            None => return Err(Mismatch::Rewritten { seq: held.map_or(0, |h| h.seq) }),
        },
    };
    let witnessed = match start {
        Start::Witnessed(head) => Some(head),
        Start::Taken => None,
    };
    let bad = || Mismatch::Rewritten { seq: witnessed.map_or(proof.seq, |h| h.seq) };
    let mut last: Option<(i64, i64)> = None;
    for text in &proof.rows {
        let row: RowTime = serde_json::from_str(text).map_err(|_| bad())?;
        if expected.is_some_and(|seq| seq != row.seq) {
            return Err(bad());
        }
        hash = link(&hash, text.as_bytes());
        if let Some(claimed) = witnessed.and_then(|h| h.claimed.as_ref())
            && claimed.seq == row.seq
            && claimed.hash != hash
        {
            return Err(Mismatch::Rewritten { seq: claimed.seq });
        }
        expected = Some(row.seq + 1);
        last = Some((row.seq, row.at));
    }
    let Some((seq, at)) = last else {
        // No rows: the host's head must be the witnessed one itself.
        return match witnessed {
            Some(head) if proof.seq == head.seq && proof.hash == head.hash => Ok(Some(head.clone())),
            _ => Err(bad()),
        };
    };
    let claimed = match seq.cmp(&proof.seq) {
        std::cmp::Ordering::Equal if hash == proof.hash => None,
        std::cmp::Ordering::Less => Some(Witnessed { seq: proof.seq, hash: proof.hash.clone() }),
        _ => return Err(bad()),
    };
    let marks = held.map(|head| head.marks_after(now)).unwrap_or_default();
    Ok(Some(Head { seq, hash, at, claimed, marks }))
}

/// Where a proof's rows start from.
enum Start<'a> {
    /// The witnessed hash: the rows prove the extension.
    Witnessed(&'a Head),
    /// The host's word (`prev`): a first witness, or one re-anchored after
    /// retention.
    Taken,
}

/// The host no longer chains from the witnessed head: allowed only when
/// retention may have dropped it, else the mismatch that says how it went.
fn judge_lost<'a>(head: &Head, proof: &AuditProof) -> Result<Start<'a>, Mismatch> {
    // Retention may have dropped it: `check` refused a cut of a younger row.
    if proof.anchor_seq > head.seq && proof.seq >= head.seq {
        return Ok(Start::Taken);
    }
    if proof.seq < head.seq {
        return Err(Mismatch::RolledBack { seq: head.seq, host_seq: proof.seq });
    }
    Err(Mismatch::Rewritten { seq: head.seq })
}

#[cfg(test)]
mod tests;
