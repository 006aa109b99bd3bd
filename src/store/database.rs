//! One open state database: opening it (pragmas set, then read back), the
//! migration to the current schema, and the read and write transactions
//! every other operation runs in. Runs as root inside the host helper, on
//! `<state dir>/state.db`.
//!
//! Invariants enforced here:
//! - pragmas (WAL, synchronous=FULL, foreign_keys=ON, busy timeout) are set
//!   and read back; a connection where one did not apply is refused, since
//!   SQLite ignores what it does not understand without a word;
//! - a database newer than this code is refused, never touched;
//! - a database older than this code is not migrated while the restore
//!   hold's marker is beside it (`hold.rs`): refused `downgrade_pending`
//!   before any pragma, so it stays as the old package reads it;
//! - a migration never runs under a plan that an older helper is still
//!   executing: a package upgrade replaces the binary, not the running
//!   process, and that process goes on writing the schema it knows. The
//!   migration waits (the open is refused `upgrade_waiting`, nothing
//!   changed) until the claim has ended, checked in the migration's own
//!   write transaction so no claim can slip in between;
//! - every write runs in a `BEGIN IMMEDIATE` transaction ([`Store::write`]),
//!   so two helpers never both decide on stale reads.

use std::path::Path;
use std::time::Duration;

use std::cell::Cell;

use rusqlite::{Connection, OpenFlags, OptionalExtension as _, TransactionBehavior};

use super::error::StoreError;
use super::rows::{AuditOutcome, Claim, RequestEnd, RequestMeta};
use super::schema::{self, MIGRATIONS};
use super::sql::{self, Sql};
use super::transitions::Tx;
use crate::vocab::{Code, Refusal};

/// How long a writer waits for another helper's transaction.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// A migration that waits for a plan an older helper is executing.
fn upgrade_waiting(
    plan: &crate::vocab::PlanId,
    action: crate::vocab::Action,
    found: i64,
    supported: i64,
) -> Refusal {
    Refusal::new(
        Code::UpgradeWaiting,
        format!(
            "volce-lab was upgraded while plan {plan} ({action}) was executing under the previous version, \
             so the state database stays at schema {found} until that plan has finished (this version needs \
             {supported}); nothing was changed. Run the command again once the plan has finished: \
             `volce-lab-host list` shows it (it, `show` and `audit head` answer meanwhile, the database \
             unmigrated), and the running helper is never killed for the upgrade.",
            action = action.as_str()
        ),
    )
}

/// One open state database.
pub struct Store {
    /// `pub(super)` so the store's tests can build a database as an old
    /// version left it.
    pub(super) conn: Connection,
    /// The request this helper serves, stamped on every audit row it writes.
    request: Option<RequestMeta>,
    /// Whether a committed transaction of this request wrote an audit row
    /// (then a refusal-free end needs no `request` row of its own).
    wrote: Cell<bool>,
    /// Where committed rows are copied (`syslog.rs`), if anywhere.
    syslog: Option<std::path::PathBuf>,
    /// The directory whose filesystem every write must leave room on, and
    /// the free bytes it needs (`space.rs`); `None` for a store on a bare
    /// connection (tests).
    floor: Option<(std::path::PathBuf, u64)>,
}

impl Store {
    /// Opens (creating if needed) the database at `path`, applies and checks
    /// the pragmas, and migrates the schema. Counts every executing plan's
    /// claimer as alive (a pending migration waits for all of them); the
    /// host helper, which can tell, uses [`Store::open_settled`].
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Store::open_settled(path, &|_| true)
    }

    /// [`Store::open`], where a pending migration waits only for the
    /// executing plans whose claimer `alive` says still runs (a claimer
    /// that died leaves its plan for the controller to settle, under the
    /// new schema).
    pub fn open_settled(path: &Path, alive: &dyn Fn(&Claim) -> bool) -> Result<Store, StoreError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        // Before SQLite sees the files: opening would fold a torn log into
        // the database (see `super::wal`).
        if let Some(bytes) = super::wal::torn_log(path) {
            return Err(StoreError::TornLog { bytes });
        }
        let conn = Connection::open_with_flags(path, flags)?;
        // Before the pragmas below could rewrite its header (journal_mode).
        check_readable(&conn, path)?;
        let mut store = Store::from_connection(conn);
        store.floor = path.parent().map(|dir| (dir.to_owned(), super::space::MIN_FREE_BYTES));
        store.configure()?;
        store.migrate(alive)?;
        Ok(store)
    }

    /// A store on an open connection, serving no request yet.
    pub(super) fn from_connection(conn: Connection) -> Store {
        Store { conn, request: None, wrote: Cell::new(false), syslog: None, floor: None }
    }

    fn configure(&self) -> Result<(), StoreError> {
        let conn = &self.conn;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        let timeout: i64 = conn.pragma_query_value(None, "busy_timeout", |r| r.get(0))?;
        if timeout != BUSY_TIMEOUT.as_millis() as i64 {
            return Err(StoreError::PragmaNotApplied("busy_timeout"));
        }
        let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
        let mode_now: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") || !mode_now.eq_ignore_ascii_case("wal") {
            return Err(StoreError::PragmaNotApplied("journal_mode"));
        }
        conn.pragma_update(None, "synchronous", "FULL")?;
        let synchronous: i64 = conn.pragma_query_value(None, "synchronous", |r| r.get(0))?;
        if synchronous != 2 {
            return Err(StoreError::PragmaNotApplied("synchronous"));
        }
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let foreign_keys: i64 = conn.pragma_query_value(None, "foreign_keys", |r| r.get(0))?;
        if foreign_keys != 1 {
            return Err(StoreError::PragmaNotApplied("foreign_keys"));
        }
        Ok(())
    }

    /// The schema version this code writes.
    pub fn supported_version() -> i64 {
        schema::supported_version()
    }

    pub(super) fn migrate(&mut self, alive: &dyn Fn(&Claim) -> bool) -> Result<(), StoreError> {
        let supported = Store::supported_version();
        // The common case (up to date) needs no write lock.
        let current: i64 = self.conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if current == supported {
            return Ok(());
        }
        // Rebuilding a table that others reference (step 2) needs foreign
        // keys off: the pragma is a no-op inside a transaction, so it is
        // switched around it, every reference is checked before the commit,
        // and it is switched on again and read back whatever happened.
        self.conn.pragma_update(None, "foreign_keys", "OFF")?;
        let result = self.migrate_steps(supported, alive);
        self.conn.pragma_update(None, "foreign_keys", "ON")?;
        let foreign_keys: i64 = self.conn.pragma_query_value(None, "foreign_keys", |r| r.get(0))?;
        if foreign_keys != 1 {
            return Err(StoreError::PragmaNotApplied("foreign_keys"));
        }
        result
    }

    fn migrate_steps(&mut self, supported: i64, alive: &dyn Fn(&Claim) -> bool) -> Result<(), StoreError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if found > supported {
            return Err(StoreError::TooNew { found, supported });
        }
        // Step 1 made the plans table; before it nothing can be executing.
        if found >= 1 {
            let wrote = Cell::new(false);
            let executing =
                Tx { sql: Sql::new(&tx), request: None, wrote: &wrote, syslog: None }.executing_plans()?;
            if let Some((plan, action, _)) = executing.iter().find(|(_, _, claim)| alive(claim)) {
                return Err(StoreError::Refused(upgrade_waiting(plan, *action, found, supported)));
            }
        }
        for (index, step) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            tx.execute_batch(step)?;
            if index + 1 == schema::CHAIN_STEP {
                super::chain::backfill(Sql::new(&tx))?;
            }
            tx.pragma_update(None, "user_version", index as i64 + 1)?;
        }
        let dangling: Option<String> =
            Sql::new(&tx).prepare(sql::FOREIGN_KEY_CHECK)?.query_row([], |r| r.get(0)).optional()?;
        if dangling.is_some() {
            return Err(StoreError::Corrupt);
        }
        tx.commit()?;
        Ok(())
    }

    /// Runs `work` in one `BEGIN IMMEDIATE` transaction: committed when it
    /// returns Ok, rolled back (nothing changed) when it returns Err.
    ///
    /// Every write first needs the free-space floor (`space.rs`) on the
    /// database's filesystem, not only a prepare (issue 22): a flood of
    /// requests that each leave a row must not fill the filesystem to its
    /// last byte. Below it the write is refused (`state_full`) before
    /// anything is written.
    pub fn write<T, E: From<StoreError>>(
        &mut self,
        work: impl FnOnce(&Tx<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        if let Some((dir, floor)) = &self.floor {
            super::space::require_room_of(dir, *floor).map_err(|full| E::from(StoreError::Refused(full)))?;
        }
        self.transaction(TransactionBehavior::Immediate, work)
    }

    /// Sets the free bytes every write needs (tests: `u64::MAX` makes any
    /// filesystem too full). The shipped helper never calls it.
    #[doc(hidden)]
    #[cfg(any(test, feature = "test-hatches"))]
    pub fn set_free_space_floor_for_tests(&mut self, bytes: u64) {
        if let Some((_, floor)) = &mut self.floor {
            *floor = bytes;
        }
    }

    /// A consistent read (deferred transaction: takes no write lock).
    pub fn read<T, E: From<StoreError>>(
        &mut self,
        work: impl FnOnce(&Tx<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        self.transaction(TransactionBehavior::Deferred, work)
    }

    fn transaction<T, E: From<StoreError>>(
        &mut self,
        behavior: TransactionBehavior,
        work: impl FnOnce(&Tx<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        let tx = self.conn.transaction_with_behavior(behavior).map_err(|e| E::from(StoreError::from(e)))?;
        let wrote = Cell::new(false);
        let lines = std::cell::RefCell::new(Vec::new());
        let syslog = self.syslog.as_ref().map(|_| &lines);
        let value = work(&Tx { sql: Sql::new(&tx), request: self.request.as_ref(), wrote: &wrote, syslog })?;
        tx.commit().map_err(|e| E::from(StoreError::from(e)))?;
        if wrote.get() {
            self.wrote.set(true);
        }
        if let Some(socket) = &self.syslog {
            super::syslog::send(socket, &lines.borrow());
        }
        Ok(value)
    }

    /// Copies every row committed from now on to the syslog socket at
    /// `socket` (`syslog.rs`; the shipped helper passes [`super::DEV_LOG`]).
    pub fn send_to_syslog(&mut self, socket: &Path) {
        self.syslog = Some(socket.to_owned());
    }

    /// Names the request this store serves: every audit row written from
    /// now on carries its operation, request id and uids.
    pub fn begin_request(&mut self, meta: RequestMeta) {
        self.request = Some(meta);
        self.wrote.set(false);
    }

    /// Ends the request in the audit trail: a refusal always gets its
    /// `request` row (folded when it repeats, `fold.rs`); a request that
    /// ended well gets one only if none of its transactions wrote a row
    /// (its state change's row already records it). Its own `BEGIN
    /// IMMEDIATE` transaction; an error means the row was not written, and
    /// the caller must not report success (fail closed).
    pub fn end_request(&mut self, end: RequestEnd<'_>) -> Result<(), StoreError> {
        if end.outcome == AuditOutcome::Ok && self.wrote.get() {
            return Ok(());
        }
        if self.request.is_none() {
            return Ok(());
        }
        self.write(|tx| tx.record_request(&end))?;
        self.wrote.set(true);
        Ok(())
    }

    /// Creates an empty database at `path` as the version whose schema is
    /// `version` left it (WAL mode, `user_version` set, nothing migrated
    /// beyond it): the hermetic tests of the way back to an older package
    /// restore one. Compiled only with `test-hatches`, as below.
    #[cfg(any(test, feature = "test-hatches"))]
    pub fn dangerous_create_at_schema_for_tests(path: &Path, version: usize) -> Result<(), StoreError> {
        let conn = Connection::open(path)?;
        let _: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
        for step in &MIGRATIONS[..version] {
            conn.execute_batch(step)?;
        }
        conn.pragma_update(None, "user_version", version as i64)?;
        Ok(())
    }

    /// The raw connection, bypassing every transition, transaction and audit
    /// row: only for tests and benchmarks that fill history fast or break a
    /// database on purpose. Public because integration tests and benches
    /// cannot see `#[cfg(test)]` items; compiled only with the `test-hatches`
    /// feature, which only the test builds enable (Cargo.toml), so the
    /// shipped helper does not contain it.
    #[cfg(any(test, feature = "test-hatches"))]
    pub fn dangerous_connection_for_tests(&mut self) -> &mut Connection {
        &mut self.conn
    }
}

/// Whether this build may read the database `conn` opened at `path`: a
/// newer schema is refused (`TooNew`), so the file
/// stays byte for byte as the newer program left it, and so is an older one
/// held for a downgrade (`downgrade_pending`), which stays as the old
/// package will read it. Reads only; the caller has written nothing yet.
pub(super) fn check_readable(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let found: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if found > Store::supported_version() {
        return Err(StoreError::TooNew { found, supported: Store::supported_version() });
    }
    if found < Store::supported_version() && super::hold::held(path) {
        return Err(StoreError::Refused(super::hold::downgrade_pending(found, Store::supported_version())));
    }
    Ok(())
}
