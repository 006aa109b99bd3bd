//! The app records volce-lab keeps (table `apps`, one row per app): read
//! all, put one, forget one. Runs as root inside the host helper, within the
//! caller's transaction.
//!
//! Invariant: a record reads back only if its row's name and state are the
//! record's own; anything else is a corrupt row, not an app.

use std::collections::BTreeMap;

use rusqlite::params;

use super::StoreError;
use super::sql;
use super::transitions::Tx;
use crate::control::app_record::AppRecord;

impl Tx<'_> {
    /// Every app we recorded.
    pub fn apps(&self) -> Result<BTreeMap<String, AppRecord>, StoreError> {
        let mut statement = self.sql.prepare(sql::APPS)?;
        let rows = statement.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
        })?;
        let mut apps = BTreeMap::new();
        for row in rows {
            let (name, state, record) = row?;
            let record: AppRecord = serde_json::from_str(&record).map_err(|_| StoreError::Corrupt)?;
            if record.app.as_str() != name || record.state.as_str() != state {
                return Err(StoreError::Corrupt);
            }
            apps.insert(name, record);
        }
        Ok(apps)
    }

    /// Inserts or replaces an app record (inside a finishing transaction).
    pub fn put_app(&self, record: &AppRecord, now: i64) -> Result<(), StoreError> {
        let body = serde_json::to_string(record).map_err(|_| StoreError::Corrupt)?;
        self.sql.prepare(sql::PUT_APP)?.execute(params![
            record.app.as_str(),
            record.state.as_str(),
            record.host_port,
            body,
            record.plan_id.as_str(),
            now
        ])?;
        Ok(())
    }

    /// Forgets an app record (inside a resolving transaction), freeing its
    /// name, port and quota slot. Only the named row; nothing else.
    pub fn delete_app(&self, name: &str) -> Result<(), StoreError> {
        let changed = self.sql.prepare(sql::DELETE_APP)?.execute([name])?;
        if changed == 1 { Ok(()) } else { Err(StoreError::Conflict(name.to_owned())) }
    }
}
