//! The restore hold: a marker file beside the database that `state restore
//! --for-downgrade` leaves, and the refusal every open of an older
//! database gives while it is there. Runs as root inside the host helper.
//!
//! Invariant enforced here (by [`Store::open_settled`](super::Store::open_settled),
//! before any pragma or migration): while the marker exists, a database
//! whose schema is older than this code's is never migrated, so the
//! restored backup stays readable by the old package the operator is about
//! to install. A database at this code's schema is not held (nothing to
//! migrate). A file rather than a schema step: the database being held is
//! exactly the one this code must not write. The package's postinst
//! removes the marker, since installing this version again means staying
//! on it (docs/server-install.md, Upgrading).

use std::path::{Path, PathBuf};

use crate::vocab::{Code, Refusal};

/// The marker's file name in the state directory.
pub const HOLD_FILE: &str = "restore-hold";

/// The marker beside the database at `database`.
pub fn hold_path(database: &Path) -> PathBuf {
    database.with_file_name(HOLD_FILE)
}

/// Whether the marker is there (a symlink counts: anything at that name
/// holds, since holding only ever refuses).
pub fn held(database: &Path) -> bool {
    std::fs::symlink_metadata(hold_path(database)).is_ok()
}

/// The refusal of an open of a held database at schema `found`.
pub fn downgrade_pending(found: i64, supported: i64) -> Refusal {
    Refusal::new(
        Code::DowngradePending,
        format!(
            "The state database was restored from a backup at schema {found} for a downgrade \
             (`volce-lab-host state restore --for-downgrade`), and this version (schema {supported}) \
             must not migrate it; nothing was opened or changed. Install the old package now: \
             apt-get install --allow-downgrades ./volce-lab_OLD-1_amd64.deb (server-install.md, \
             Upgrading). To stay on this version instead, install this package again: that lifts the hold."
        ),
    )
}
