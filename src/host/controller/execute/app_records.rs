//! What an execution leaves in the app records: the changes the plan's
//! action asks for (`crate::actions::PlanAction::record`), applied to the
//! store. Runs as root inside the host helper, within the transaction that
//! records the outcome (no engine call here).

use crate::actions::RecordChange;
use crate::store::Tx;
use crate::vocab::{PlanId, Refusal};

use super::super::mark_app;

/// Applies `changes`, made by plan `plan` at `now`, in the order given.
pub(super) fn apply(tx: &Tx<'_>, changes: &[RecordChange], plan: &PlanId, now: i64) -> Result<(), Refusal> {
    for change in changes {
        match change {
            RecordChange::Put(record) => tx.put_app(record, now)?,
            RecordChange::Mark { app, state } => mark_app(tx, app.as_str(), *state, plan, now)?,
            RecordChange::Forget { app, image_ids } => {
                tx.retire_claims(app.as_str(), image_ids, plan, now)?;
                tx.delete_app(app.as_str())?;
            }
            RecordChange::DropClaim(image) => tx.drop_claim(image)?,
        }
    }
    Ok(())
}
