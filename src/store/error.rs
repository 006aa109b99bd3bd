//! Why the store could not do what was asked ([`StoreError`]), and the
//! stable code and sentence each cause gives the wire. Runs as root inside
//! the host helper; pure.

use crate::vocab::{Code, Refusal};

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the state database failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the state database did not accept `PRAGMA {0}`; refusing to run without it")]
    PragmaNotApplied(&'static str),
    #[error(
        "the state database is at schema version {found}, newer than this program ({supported}); refusing to touch it"
    )]
    TooNew { found: i64, supported: i64 },
    #[error("{0}")]
    Refused(Refusal),
    #[error("a transition of plan {0} found the plan in another state; nothing was changed")]
    Conflict(String),
    #[error("a stored record is unreadable; inspect the state database")]
    Corrupt,
    #[error("the write-ahead log {bytes} bytes long is not a whole number of frames: it was cut short")]
    TornLog { bytes: u64 },
}

impl From<Refusal> for StoreError {
    fn from(refusal: Refusal) -> Self {
        StoreError::Refused(refusal)
    }
}

impl StoreError {
    /// The stable code and sentence for the wire.
    pub fn refusal(&self) -> Refusal {
        match self {
            StoreError::Refused(refusal) => refusal.clone(),
            StoreError::Conflict(_) => Refusal::new(
                Code::PlanConsumed,
                "The plan changed state while this request ran; inspect it before doing anything else.",
            ),
            StoreError::Corrupt => Refusal::new(
                Code::PlanCorrupt,
                "A stored record is unreadable; an operator must inspect the state.",
            ),
            StoreError::TooNew { .. } => Refusal::new(
                Code::StateTooNew,
                "The host's state database was written by a newer volce-lab; nothing was changed. \
                 The operator installs that version again (volce-lab-host doctor says which schema).",
            ),
            StoreError::TornLog { .. } => corrupt_refusal(),
            StoreError::Sqlite(e) if is_corrupt(e) => corrupt_refusal(),
            StoreError::Sqlite(e) if is_full(e) => full_refusal(),
            _ => Refusal::new(
                Code::StateUnavailable,
                "The host's state database is unavailable; nothing was changed.",
            ),
        }
    }
}

fn corrupt_refusal() -> Refusal {
    Refusal::new(
        Code::StateCorrupt,
        "The host's state database is damaged; nothing was changed. The operator runs \
         `volce-lab-host doctor` and restores state.db from the backup (operator.md).",
    )
}

/// SQLite's own words for a damaged file: corrupt, or not a database.
fn is_corrupt(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
    )
}

/// SQLite could not grow a file (SQLITE_FULL), or the write failed for lack
/// of space (an I/O error whose extended code is SQLITE_IOERR_WRITE with
/// ENOSPC underneath is reported as SQLITE_FULL by SQLite's unix VFS).
fn is_full(error: &rusqlite::Error) -> bool {
    matches!(error.sqlite_error_code(), Some(rusqlite::ErrorCode::DiskFull))
}

/// What a write below the floor gets, and also a write SQLite found no
/// room for (SQLITE_FULL): one sentence for one cause.
pub(crate) fn full_refusal() -> Refusal {
    Refusal::new(
        Code::StateFull,
        "The host's state directory has no room left; nothing was changed. The operator frees \
         space on its filesystem (volce-lab-host doctor shows how much is free), then this works again.",
    )
}
