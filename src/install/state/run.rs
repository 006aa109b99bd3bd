//! The state commands in the shipped binary: root, a person (recorded as
//! approve records one), the fixed paths, what is printed and the exit
//! code. Runs as root on the operator's terminal.

use std::path::Path;

use super::RestoreFor;
use crate::control::Clock as _;
use crate::exit::Exit;
use crate::host::{Caller, ShippedHost, operator_check, terminal};

/// `volce-lab-host state backup [--into DIR]` in the shipped binary.
pub fn run_state_backup(into: Option<&Path>) -> Exit {
    let host = ShippedHost::shipped();
    let into = into.unwrap_or(Path::new(super::BACKUP_DIR));
    terminal(operator_check().and_then(|operator| {
        let done = super::backup(&host.paths, into, &Caller::from(&operator), host.clock.now())?;
        Ok(format!(
            "Backed up the state to {} (the audit head it ends at starts its name; state.db, env/, \
             data-index.txt). Restore it with `volce-lab-host state restore {0}` (server-install.md, Upgrading).\n",
            done.display()
        ))
    }))
}

/// `volce-lab-host state restore BACKUP [--for-downgrade]` in the shipped binary.
pub fn run_state_restore(backup: &Path, for_downgrade: bool) -> Exit {
    let host = ShippedHost::shipped();
    let goal = if for_downgrade { RestoreFor::Downgrade } else { RestoreFor::ThisVersion };
    terminal(operator_check().and_then(|operator| {
        super::restore(&host.paths, backup, goal, &Caller::from(&operator), host.clock.now())
    }))
}
