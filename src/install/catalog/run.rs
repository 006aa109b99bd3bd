//! The catalog commands in the shipped binary: root, the fixed paths, the
//! real engine, the question on the terminal, what is printed and the exit
//! code. Runs as root on the operator's terminal.

use super::{Change, PinArgs};
use crate::control::Clock as _;
use crate::exit::Exit;
use crate::host::{Decision, HostPaths, ShippedHost, ask_word, process_check, terminal};
use crate::vocab::{Code, Refusal};

/// `volce-lab-host catalog pin KEY IMAGE [--container-port N]
/// [--health-path P] [--yes]` in the shipped binary: pulls on the real
/// engine, then asks as [`confirm_change`] does.
pub fn run_catalog_pin(args: &PinArgs, yes: bool) -> Exit {
    let host = ShippedHost::shipped();
    let engine = crate::docker::client::DockerClient::new(host.paths.state_dir.clone());
    confirm_change(&host, yes, |paths, now| super::prepare_pin(paths, &engine, args, now))
}

/// `volce-lab-host catalog gateway-image IMAGE [--yes]` in the shipped
/// binary: pulls on the real engine, then asks as [`confirm_change`] does.
pub fn run_catalog_gateway_image(image: &str, yes: bool) -> Exit {
    let host = ShippedHost::shipped();
    let engine = crate::docker::client::DockerClient::new(host.paths.state_dir.clone());
    confirm_change(&host, yes, |paths, now| super::prepare_gateway_image(paths, &engine, image, now))
}

/// `volce-lab-host catalog env-file KEY PATH|--none [--yes]` in the shipped
/// binary (`file` is `None` for `--none`).
pub fn run_catalog_env_file(key: &str, file: Option<&str>, yes: bool) -> Exit {
    let host = ShippedHost::shipped();
    confirm_change(&host, yes, |paths, now| super::prepare_env_file(paths, key, file, now))
}

/// `volce-lab-host catalog remove KEY [--yes]` in the shipped binary.
pub fn run_catalog_remove(key: &str, yes: bool) -> Exit {
    let host = ShippedHost::shipped();
    confirm_change(&host, yes, |paths, now| super::prepare_remove(paths, key, now))
}

/// `volce-lab-host catalog list` in the shipped binary.
pub fn run_catalog_list() -> Exit {
    let host = ShippedHost::shipped();
    terminal(process_check().and_then(|()| super::list(&host.paths)))
}

/// A catalog change: root, a terminal to ask on (or `yes`), the prepared
/// change printed, the operator types its key, then it is written. Every
/// refusal on the way writes nothing.
fn confirm_change(
    host: &ShippedHost,
    yes: bool,
    prepare: impl FnOnce(&HostPaths, i64) -> Result<Change, Refusal>,
) -> Exit {
    use std::io::IsTerminal as _;
    if let Err(refusal) = process_check() {
        return terminal(Err(refusal));
    }
    // Asked before the pull: without a terminal nothing could be confirmed.
    if !yes && !std::io::stdin().is_terminal() {
        return terminal(Err(Refusal::new(
            Code::NotConfirmed,
            "catalog asks for confirmation on a terminal, and stdin is not one; nothing was written. Run it on \
             a terminal, or pass --yes if a script checked what it writes.",
        )));
    }
    let change = match prepare(&host.paths, host.clock.now()) {
        Ok(change) => change,
        Err(refusal) => return terminal(Err(refusal)),
    };
    if change.after.is_none() {
        return terminal(Ok(change.shown));
    }
    let decision = ask_word(
        std::io::stdin().lock(),
        std::io::stdout().lock(),
        &change.shown,
        change.prompt,
        &change.key,
        yes,
    );
    if decision == Decision::Declined {
        let refusal = Refusal::new(
            Code::NotConfirmed,
            format!(
                "`{}` was not typed; nothing was written. Run the command again and type it to write the change.",
                change.key
            ),
        );
        return terminal(Err(refusal));
    }
    terminal(super::write(&host.paths, &change))
}
