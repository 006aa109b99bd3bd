//! The boot a plan was prepared on and the boot clock then (migration 7),
//! kept beside the plan's row: not part of its body or digest, since it is
//! a clock reference, not something an operator approves. Runs as root in
//! the host helper, inside the prepare, approve and execute transactions.

use rusqlite::{OptionalExtension as _, params};

use super::StoreError;
use super::transitions::Tx;
use crate::control::clock::BootInstant;
use crate::vocab::PlanId;

impl Tx<'_> {
    /// Records when, by the boot clock, a just-inserted plan was made.
    pub fn set_plan_boot(&self, id: &PlanId, boot: &BootInstant) -> Result<(), StoreError> {
        let changed = self.tx.execute(
            "UPDATE plans SET created_boot = ?2, created_boottime_ms = ?3
             WHERE id = ?1 AND created_boot IS NULL AND state = 'pending'",
            params![id.as_str(), boot.boot_id, boot.millis],
        )?;
        if changed != 1 {
            return Err(StoreError::Conflict(id.as_str().to_owned()));
        }
        Ok(())
    }

    /// The boot-clock reading of a plan's prepare, if one was kept.
    pub fn plan_boot(&self, id: &PlanId) -> Result<Option<BootInstant>, StoreError> {
        let row: Option<(Option<String>, Option<i64>)> = self
            .tx
            .query_row(
                "SELECT created_boot, created_boottime_ms FROM plans WHERE id = ?1",
                [id.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        Ok(match row {
            Some((Some(boot_id), Some(millis))) => Some(BootInstant { boot_id, millis }),
            _ => None,
        })
    }
}
