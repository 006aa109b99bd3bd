//! The server's installation, one concern in one home: `volce-lab-host
//! setup` and `setup --undo` (`setup.rs`), `volce-lab-host doctor`
//! (`doctor.rs`), `volce-lab-host catalog pin|list|remove|gateway-image|env-file`
//! (`catalog.rs`, which edits the policy's catalog and gateway image),
//! `volce-lab-host data list|mount|purge` (`data.rs`, the apps' data images),
//! `volce-lab-host state backup|restore` (`state.rs`), and the two rules both
//! hold the server to: the agent's
//! one sudoers line ([`sudoers_rule`]) and the groups it must not be in
//! ([`PRIVILEGED_GROUPS`]). Runs as root on the server's terminal.
//!
//! A layer above `crate::host`: it reads the host's paths
//! (`host::paths::HostPaths`, the one table of installed paths), its drift
//! and leftovers rules and its audit trail, and nothing on the request path
//! (`host`) imports from here: an rpc never runs installation code.

pub mod catalog;
pub mod data;
pub mod doctor;
pub mod package_check;
pub mod setup;
pub mod state;

use crate::host::HostPaths;

/// The one sudoers line the agent's account may have, for `user`.
pub fn sudoers_rule(user: &str) -> String {
    format!("{user} ALL=(root) NOPASSWD: {} rpc", HostPaths::HELPER)
}

/// The options every key of the agent's account carries, exactly: no pty,
/// no forwarding, no `~/.ssh/rc`, and only the gate runs, whatever the
/// client asks.
pub fn gate_key_options() -> String {
    format!("restrict,command=\"{} ssh-gate\"", HostPaths::HELPER)
}

/// Groups whose members can become root or reach the Docker socket on a
/// Debian-like system: membership bypasses the sudoers rule entirely.
pub const PRIVILEGED_GROUPS: [&str; 8] =
    ["docker", "sudo", "root", "wheel", "admin", "lxd", "disk", "shadow"];
