//! Refusals counted beside the state directory while the store cannot be
//! opened to record them: while the agent is paused (`pause.rs`: opening
//! could migrate) and while a migration waits for a plan the previous
//! version executes (`upgrade_waiting`: the store cannot be opened at this
//! schema). Written to the audit trail, one counted row per caller and
//! operation, when the store opens again. Runs as root inside the host
//! helper.
//!
//! Invariants enforced here:
//! - a count is one line appended (`O_APPEND`) to a root-owned 0600 file
//!   in the checked state directory, never through a symlink, and at most
//!   [`MAX_COUNTED_BYTES`] of them: a flood cannot fill the disk;
//! - counting is best effort: the refusal stands whether or not it was
//!   counted, and nothing else changes;
//! - a count is taken away (renamed first) before its rows are written,
//!   so no line is written twice.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::str::FromStr as _;

use nix::fcntl::OFlag;

use super::paths::{self, HostPaths};
use crate::store::{AuditOperation, Store};
use crate::vocab::Code;

/// Beyond this the refusals are no longer counted one by one (the reply
/// then says "at least").
pub const MAX_COUNTED_BYTES: u64 = 64 * 1024;

/// What the refusals were counted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tally {
    Paused,
    UpgradeWaiting,
}

impl Tally {
    /// The count's file name in the state directory.
    pub fn file(self) -> &'static str {
        match self {
            Tally::Paused => "paused.refused",
            Tally::UpgradeWaiting => "upgrade-waiting.refused",
        }
    }

    pub fn code(self) -> Code {
        match self {
            Tally::Paused => Code::Paused,
            Tally::UpgradeWaiting => Code::UpgradeWaiting,
        }
    }
}

/// How many refusals each (caller, operation) had, and whether the count
/// reached its cap.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    pub by: BTreeMap<(String, AuditOperation), i64>,
    pub capped: bool,
}

impl Counts {
    pub fn total(&self) -> i64 {
        self.by.values().sum()
    }
}

/// Counts one refused request of `caller` for `tally`.
pub fn count(paths: &HostPaths, tally: Tally, caller: &str, operation: AuditOperation) {
    let path = paths.state_dir.join(tally.file());
    let opened = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC).bits())
        .open(&path);
    let Ok(mut file) = opened else { return };
    if paths::check_handle(&file, &path, false, paths.owner_uid).is_err() {
        return;
    }
    if file.metadata().is_ok_and(|meta| meta.len() < MAX_COUNTED_BYTES) {
        let _ = file.write_all(format!("{caller} {}\n", operation.as_str()).as_bytes());
    }
}

/// Takes the counts of `tally` away (renamed, read, removed).
pub fn take(paths: &HostPaths, tally: Tally) -> Counts {
    let path = paths.state_dir.join(tally.file());
    let taken = paths.state_dir.join(format!(".{}.taken", tally.file()));
    let mut counts = Counts::default();
    if std::fs::rename(&path, &taken).is_err() {
        return counts;
    }
    let text = std::fs::read(&taken).unwrap_or_default();
    let _ = std::fs::remove_file(&taken);
    for line in String::from_utf8_lossy(&text).lines() {
        let Some((name, operation)) = line.split_once(' ') else { continue };
        let Ok(operation) = AuditOperation::from_str(operation) else { continue };
        if crate::vocab::is_user_name(name) {
            *counts.by.entry((name.to_owned(), operation)).or_insert(0) += 1;
        }
    }
    counts.capped = text.len() as u64 >= MAX_COUNTED_BYTES;
    counts
}

/// The rows of `counts` in one transaction of `store`, beside what
/// `also` writes.
pub fn write(
    store: &mut Store,
    tally: Tally,
    counts: &Counts,
    now: i64,
    also: impl FnOnce(&crate::store::Tx<'_>) -> Result<(), crate::store::StoreError>,
) -> Result<(), crate::store::StoreError> {
    store.write(|tx| {
        for ((actor, operation), n) in &counts.by {
            tx.record_counted_refusals(now, actor, *operation, tally.code(), *n)?;
        }
        also(tx)
    })
}

/// After a migration that waited: the refusals counted meanwhile, written
/// to the trail (best effort: a count that cannot be written is dropped,
/// the trail stays whole).
pub fn flush_waiting(store: &mut Store, paths: &HostPaths, now: i64) {
    if std::fs::symlink_metadata(paths.state_dir.join(Tally::UpgradeWaiting.file())).is_err() {
        return;
    }
    let counts = take(paths, Tally::UpgradeWaiting);
    let _ = write(store, Tally::UpgradeWaiting, &counts, now, |_| Ok(()));
}
