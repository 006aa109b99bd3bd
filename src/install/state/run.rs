//! The state commands in the shipped binary: root, a person (recorded as
//! approve records one), the fixed paths, what is printed and the exit
//! code. Runs as root on the operator's terminal.

use std::path::Path;

use super::RestoreFor;
use crate::control::Clock as _;
use crate::exit::Exit;
use crate::host::{Caller, ShippedHost, ask_word, operator_check, terminal};
use crate::vocab::{Code, Refusal};

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

/// `volce-lab-host state restore BACKUP [--for-downgrade]` in the shipped
/// binary. A restore for this version is followed by what differs from
/// the engine (`state diff`), each difference with its way out.
pub fn run_state_restore(backup: &Path, for_downgrade: bool) -> Exit {
    let host = ShippedHost::shipped();
    let goal = if for_downgrade { RestoreFor::Downgrade } else { RestoreFor::ThisVersion };
    terminal(operator_check().and_then(|operator| {
        let now = host.clock.now();
        let mut said = super::restore(&host.paths, backup, goal, &Caller::from(&operator), now)?;
        if goal == RestoreFor::ThisVersion {
            said.push('\n');
            match super::diff(&host.paths, &host.engine, now) {
                Ok(differences) => said.push_str(&differences),
                Err(refusal) => said.push_str(&format!(
                    "What differs from the engine could not be read ({}: {}); run sudo volce-lab-host state diff.\n",
                    refusal.code, refusal.message
                )),
            }
        }
        Ok(said)
    }))
}

/// `volce-lab-host state diff` in the shipped binary: read-only.
pub fn run_state_diff() -> Exit {
    let host = ShippedHost::shipped();
    terminal(operator_check().and_then(|_| super::diff(&host.paths, &host.engine, host.clock.now())))
}

/// `volce-lab-host state remove-container CONTAINER [--yes]` in the
/// shipped binary: asks for the container's name unless `--yes`.
pub fn run_state_remove_container(container: &str, yes: bool) -> Exit {
    use std::io::IsTerminal as _;
    let host = ShippedHost::shipped();
    if !yes && !std::io::stdin().is_terminal() {
        return terminal(Err(Refusal::new(
            Code::NotConfirmed,
            "state remove-container asks for confirmation on a terminal, and stdin is not one; nothing was \
             removed. Run it on a terminal, or pass --yes if a script checked what it removes.",
        )));
    }
    terminal(operator_check().and_then(|operator| {
        let decide = |shown: &str, name: &str| {
            let prompt = "Type the container's name to remove it: ";
            ask_word(std::io::stdin().lock(), std::io::stdout().lock(), shown, prompt, name, yes)
        };
        super::remove_container(
            &host.paths,
            &host.engine,
            container,
            &Caller::from(&operator),
            host.clock.now(),
            decide,
        )
    }))
}
