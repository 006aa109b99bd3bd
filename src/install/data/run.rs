//! The data commands in the shipped binary: root, the fixed paths, the
//! host's mounts, the question on the terminal, what is printed and the
//! exit code. Runs as root on the operator's terminal, and `data mount`
//! also at boot (`volce-lab-data.service`, before docker.service).

use super::HostMounts;
use crate::control::Clock as _;
use crate::exit::Exit;
use crate::host::{Decision, ShippedHost, ask_word, process_check, terminal};
use crate::vocab::{Code, Refusal};

/// `volce-lab-host data list` in the shipped binary.
pub fn run_data_list() -> Exit {
    let host = ShippedHost::shipped();
    terminal(process_check().and_then(|()| super::list(&host.paths, &HostMounts)))
}

/// `volce-lab-host data mount` in the shipped binary: asks nothing (it
/// runs at boot), prints a line per app with data, exits 1 if any failed.
pub fn run_data_mount() -> Exit {
    let host = ShippedHost::shipped();
    let report = match process_check().and_then(|()| super::mount_all(&host.paths, &HostMounts)) {
        Ok(report) => report,
        Err(refusal) => return terminal(Err(refusal)),
    };
    print!("{}", report.text);
    match report.refusal() {
        Some(refusal) => terminal(Err(refusal)),
        None => Exit::Ok,
    }
}

/// `volce-lab-host data purge APP [--yes]` in the shipped binary: root, a
/// terminal to ask on (or `yes`), what goes printed, the operator types the
/// app name, then it is deleted. Every refusal on the way deletes nothing.
pub fn run_data_purge(app: &str, yes: bool) -> Exit {
    use std::io::IsTerminal as _;
    let host = ShippedHost::shipped();
    if let Err(refusal) = process_check() {
        return terminal(Err(refusal));
    }
    if !yes && !std::io::stdin().is_terminal() {
        return terminal(Err(Refusal::new(
            Code::NotConfirmed,
            "data purge asks for confirmation on a terminal, and stdin is not one; nothing was deleted. Run it \
             on a terminal, or pass --yes if a script checked what it deletes.",
        )));
    }
    let prepared = match super::prepare_purge(&host.paths, &HostMounts, app, host.clock.now()) {
        Ok(prepared) => prepared,
        Err(refusal) => return terminal(Err(refusal)),
    };
    let decision = ask_word(
        std::io::stdin().lock(),
        std::io::stdout().lock(),
        &prepared.shown,
        super::PROMPT,
        &prepared.app,
        yes,
    );
    if decision == Decision::Declined {
        return terminal(Err(Refusal::new(
            Code::NotConfirmed,
            "The data's name was not typed; nothing was deleted. Run the command again and type the name it \
             asks for to delete the data.",
        )));
    }
    terminal(super::purge(&host.paths, &HostMounts, &prepared, host.clock.now()))
}
