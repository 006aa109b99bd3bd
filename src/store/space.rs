//! Room left on the state directory's filesystem, looked at before a
//! prepare writes anything, and before every write transaction of the store
//! (`Store::write`, issue 22). Runs as root in the host helper; one statvfs.
//!
//! Why a floor instead of waiting for SQLITE_FULL: a write that runs out of
//! space in the middle is rolled back by SQLite, but the refusal should
//! come before any write at all, with a sentence the operator can act on.
//! SQLITE_FULL itself still maps to the same code (`state_full`) for the
//! writes that get past the floor and then find the disk full.

use std::path::Path;

use crate::vocab::{Code, Refusal};

/// Free bytes below which a prepare is refused: many times what one plan
/// writes (its row, audit row and their index pages, in the log and then
/// in the database at checkpoint), so the writes that follow it fit too.
pub const MIN_FREE_BYTES: u64 = 1024 * 1024;

/// Free bytes as an unprivileged writer counts them (`f_bavail`): root
/// may use the reserved blocks too, but they are the system's margin.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    let stat = nix::sys::statvfs::statvfs(dir).ok()?;
    Some(stat.blocks_available() as u64 * stat.fragment_size() as u64)
}

/// Refuses (`state_full`) when `dir`'s filesystem has less than
/// [`MIN_FREE_BYTES`] left. A filesystem that cannot be asked is let
/// through: the write itself then says.
pub fn require_room(dir: &Path) -> Result<(), Refusal> {
    require_room_of(dir, MIN_FREE_BYTES)
}

/// [`require_room`] with another floor (`Store::write` takes its own, which
/// tests can raise).
pub fn require_room_of(dir: &Path, floor: u64) -> Result<(), Refusal> {
    match free_bytes(dir) {
        Some(free) if free < floor => Err(super::error::full_refusal()),
        _ => Ok(()),
    }
}

/// Whether `error` is the refusal of a write below the floor: nothing was
/// written, so the request can be answered `state_full`, which says what to
/// do. (A write SQLite found no room for mid-way stays a failure to record:
/// `audit_unavailable`.)
pub fn is_below_floor(error: &super::error::StoreError) -> bool {
    matches!(error, super::error::StoreError::Refused(refusal) if refusal.code == Code::StateFull)
}

/// The refusal for a store that could not be opened in `dir`: SQLite says
/// an I/O error or "cannot open" (not SQLITE_FULL) when the shared-memory
/// file of the log cannot be made on a full filesystem, so an unexplained
/// failure on a filesystem below the floor is `state_full`.
pub fn explain(error: &super::error::StoreError, dir: &Path) -> Refusal {
    let refusal = error.refusal();
    if refusal.code == Code::StateUnavailable
        && let Err(full) = require_room(dir)
    {
        return full;
    }
    refusal
}
