//! Whole-database copies: `state backup` (SQLite's online backup API, so
//! the copy is one consistent snapshot however busy the database is), the
//! copy `state restore` puts in place, the copy in memory that `list` and
//! `show` read while a migration waits ([`Store::open_migrated_copy`]),
//! and the hand-over of a database from its write-ahead log before it is
//! replaced. Runs as root inside the host helper.
//!
//! Invariants enforced here:
//! - a copy is made page by page by SQLite itself, never by copying files
//!   (a file copy of a WAL database misses what the log still holds);
//! - a database is replaced only after [`with_log_released`] folded its log into
//!   it and left rollback-journal mode, which SQLite grants only while no
//!   other connection has it open: a leftover `-wal` or `-shm` file would
//!   otherwise be read as the log of the database put in its place.

use std::path::Path;

use rusqlite::backup::Backup;
use rusqlite::{Connection, MAIN_DB, OpenFlags, TransactionBehavior};

use super::Store;
use super::error::StoreError;

/// Pages copied per step of the online backup.
const PAGES_PER_STEP: std::ffi::c_int = 256;

impl Store {
    /// Copies this database into a new file at `dest` with the online
    /// backup API (one consistent snapshot, whatever else writes).
    pub fn backup_to(&self, dest: &Path) -> Result<(), StoreError> {
        copy(&self.conn, dest)
    }

    /// A copy of the database at `path` in memory, migrated there to this
    /// schema: what `list` and `show` read while the file's own migration
    /// waits for a plan the previous version executes (`upgrade_waiting`).
    /// The file is opened read-only and never migrated; the copy migrates
    /// without waiting for that plan, since nothing of it is ever written
    /// back, and it is gone when the store is dropped. A newer schema or a
    /// held restore is refused as [`Store::open`] refuses them.
    pub fn open_migrated_copy(path: &Path) -> Result<Store, StoreError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let source = Connection::open_with_flags(path, flags)?;
        super::database::check_readable(&source, path)?;
        let mut conn = Connection::open_in_memory()?;
        Backup::new_with_names(&source, MAIN_DB, &mut conn, MAIN_DB)?.run_to_completion(
            PAGES_PER_STEP,
            std::time::Duration::from_millis(10),
            None,
        )?;
        drop(source);
        let mut copy = Store::from_connection(conn);
        copy.migrate(&|_| false)?;
        Ok(copy)
    }
}

/// Copies the database at `source`, opened read-only, into a new file at
/// `dest` (`state restore` puts it in place afterwards).
pub fn copy_database(source: &Path, dest: &Path) -> Result<(), StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    copy(&Connection::open_with_flags(source, flags)?, dest)
}

fn copy(from: &Connection, dest: &Path) -> Result<(), StoreError> {
    let mut to = Connection::open(dest)?;
    Backup::new_with_names(from, MAIN_DB, &mut to, MAIN_DB)?.run_to_completion(
        PAGES_PER_STEP,
        std::time::Duration::from_millis(10),
        None,
    )?;
    Ok(())
}

/// Folds the write-ahead log of the database at `path` into it, leaves
/// WAL mode, and runs `work` under its exclusive lock, so that no `-wal`
/// or `-shm` file is left to pair with a file `work` puts in its place and
/// no helper opens the old file meanwhile (nothing is written under the
/// lock; it is released after `work`). `Ok(None)` when another connection
/// has it open (SQLite then keeps WAL mode, or the lock): nothing may
/// replace it now, and `work` did not run.
pub fn with_log_released<T, E: From<StoreError>>(
    path: &Path,
    work: impl FnOnce() -> Result<T, E>,
) -> Result<Option<T>, E> {
    let flags =
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NOFOLLOW | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags).map_err(StoreError::from)?;
    conn.busy_timeout(std::time::Duration::from_secs(2)).map_err(StoreError::from)?;
    let busy = |e: &rusqlite::Error| {
        matches!(e, rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
    };
    let mode: String = match conn.pragma_update_and_check(None, "journal_mode", "DELETE", |r| r.get(0)) {
        Ok(mode) => mode,
        Err(e) if busy(&e) => return Ok(None),
        Err(e) => return Err(StoreError::from(e).into()),
    };
    if !mode.eq_ignore_ascii_case("delete") {
        return Ok(None);
    }
    let locked = match conn.transaction_with_behavior(TransactionBehavior::Exclusive) {
        Ok(locked) => locked,
        Err(e) if busy(&e) => return Ok(None),
        Err(e) => return Err(StoreError::from(e).into()),
    };
    let done = work()?;
    // Rolled back: nothing was written under the lock.
    drop(locked);
    Ok(Some(done))
}
