//! The store's own account of its health, for `volce-lab-host doctor`:
//! integrity, schema version, plans that block the host (and their claims),
//! the audit chain. Runs as root inside the host helper's doctor.
//!
//! Read-only by construction: the file is opened `SQLITE_OPEN_READ_ONLY`,
//! no pragma is set and nothing is migrated, so the doctor is never the
//! thing that upgrades or repairs a database.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::schema;
use super::sql::Sql;
use super::verify::{self, Break};
use crate::vocab::PlanId;
use crate::vocab::PlanState;

/// What the store says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreHealth {
    pub integrity_ok: bool,
    pub schema_version: i64,
    pub expected_schema_version: i64,
    /// Ids and states of plans in `executing` or `needs_inspection`.
    pub stuck_plans: Vec<(PlanId, PlanState)>,
    /// How many audit rows there are, and the first break of their hash
    /// chain (`None`: intact, or a schema before the chain).
    pub audit_rows: u64,
    pub audit_break: Option<Break>,
}

/// Reads the database at `path` without changing it; `None` when no
/// database exists yet (a fresh installation).
pub fn read_health(path: &Path) -> Result<Option<StoreHealth>, rusqlite::Error> {
    if !path.exists() {
        return Ok(None);
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    // One read-only deferred transaction: one consistent snapshot, nothing
    // written.
    let tx = conn.unchecked_transaction()?;
    let sql = Sql::new(&tx);
    let integrity: String = sql.prepare(super::sql::INTEGRITY_CHECK)?.query_row([], |row| row.get(0))?;
    let schema_version: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
    let mut stuck_plans = Vec::new();
    // Before step 1 there is no plans table to ask.
    if schema_version >= 1 {
        let mut statement = sql.prepare(super::sql::UNSETTLED_ALL)?;
        let rows = statement.query_map([], |row| {
            let (id, state): (String, String) = (row.get(0)?, row.get(1)?);
            // CHECK constraints hold both columns to their lists, so a value
            // that does not parse is a damaged file, said as such.
            let id = PlanId::parse(&id).map_err(|_| unreadable(0))?;
            Ok((id, super::rows::parse_stored::<PlanState>(&state).map_err(|_| unreadable(1))?))
        })?;
        for row in rows {
            stuck_plans.push(row?);
        }
    }
    // Before step 4 there is no chain to walk.
    let (mut audit_rows, mut audit_break) = (0, None);
    if schema_version >= schema::CHAIN_STEP as i64 {
        let checked = verify::verify(sql, None).map_err(|e| match e {
            super::StoreError::Sqlite(e) => e,
            _ => rusqlite::Error::InvalidQuery,
        })?;
        audit_rows = checked.rows;
        audit_break = checked.broken;
    }
    Ok(Some(StoreHealth {
        integrity_ok: integrity == "ok",
        schema_version,
        expected_schema_version: schema::supported_version(),
        stuck_plans,
        audit_rows,
        audit_break,
    }))
}

/// The schema version of the database at `path`, read on a read-only
/// connection (nothing migrated, no pragma set); `None` when no database,
/// or an empty one, exists yet. For `volce-lab-host package-check`.
pub fn schema_version_of(path: &Path) -> Result<Option<i64>, rusqlite::Error> {
    if !path.exists() {
        return Ok(None);
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    Ok((version >= 1).then_some(version))
}

/// The error of a stored value that is not what its column holds.
fn unreadable(column: usize) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, "not a stored name".into())
}

/// Every app record, read as `read_health` reads: a read-only connection,
/// nothing migrated. For the doctor's drift finding; empty when no
/// database exists yet.
pub fn read_apps(
    path: &Path,
) -> Result<std::collections::BTreeMap<String, crate::control::app_record::AppRecord>, super::StoreError> {
    read_only(path, |tx| tx.apps())
}

/// Runs `read` in a transaction on a read-only connection (nothing
/// migrated, no request, no audit row, no syslog copy); the empty answer
/// when no database, or an empty one, exists yet.
fn read_only<T: Default>(
    path: &Path,
    read: impl FnOnce(&super::transitions::Tx<'_>) -> Result<T, super::StoreError>,
) -> Result<T, super::StoreError> {
    if !path.exists() {
        return Ok(T::default());
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if version < 1 {
        return Ok(T::default());
    }
    let tx = conn.unchecked_transaction()?;
    let wrote = std::cell::Cell::new(false);
    read(&super::transitions::Tx { sql: Sql::new(&tx), request: None, wrote: &wrote, syslog: None })
}

/// The plans awaiting an operator at `now` (`Tx::awaiting_plans`), read as
/// `read_apps` reads: for `catalog pin`, which names the pending plans a
/// policy change voids. Empty when no database exists yet.
pub fn read_awaiting(path: &Path, now: i64) -> Result<Vec<super::StoredPlan>, super::StoreError> {
    read_only(path, |tx| tx.awaiting_plans(now))
}

/// The audit trail's head, read as `read_apps` reads (nothing migrated):
/// for `audit head` while a migration waits (`upgrade_waiting`). `None`
/// when there is no database yet.
pub fn read_head(path: &Path) -> Result<Option<super::Head>, super::StoreError> {
    read_only(path, |tx| tx.audit_head().map(Some))
}

/// The claims of every executing plan, read as `read_apps` reads: for the
/// doctor, which names a claimer that is stopped. Empty when no database
/// exists yet.
pub fn read_claims(
    path: &Path,
) -> Result<Vec<(crate::vocab::PlanId, crate::vocab::Action, super::Claim)>, super::StoreError> {
    read_only(path, |tx| tx.executing_plans())
}
