//! The boot a plan was prepared on and the boot clock then (migration 7),
//! kept beside the plan's row: not part of its body or digest, since it is
//! a clock reference, not something an operator approves. Runs as root in
//! the host helper, inside the prepare, approve and execute transactions.

use rusqlite::{OptionalExtension as _, params};

use super::StoreError;
use super::sql;
use super::transitions::Tx;
use crate::control::clock::BootInstant;
use crate::vocab::PlanId;

impl Tx<'_> {
    /// Records when, by the boot clock, a just-inserted plan was made.
    pub fn set_plan_boot(&self, id: &PlanId, boot: &BootInstant) -> Result<(), StoreError> {
        let changed =
            self.sql.prepare(sql::SET_PLAN_BOOT)?.execute(params![id.as_str(), boot.boot_id, boot.millis])?;
        if changed != 1 {
            return Err(StoreError::Conflict(id.as_str().to_owned()));
        }
        Ok(())
    }

    /// The boot-clock reading of a plan's prepare, if one was kept.
    pub fn plan_boot(&self, id: &PlanId) -> Result<Option<BootInstant>, StoreError> {
        let row: Option<(Option<String>, Option<i64>)> = self
            .sql
            .prepare(sql::PLAN_BOOT)?
            .query_row([id.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        Ok(match row {
            Some((Some(boot_id), Some(millis))) => Some(BootInstant { boot_id, millis }),
            _ => None,
        })
    }
}
