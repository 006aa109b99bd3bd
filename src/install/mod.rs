//! The server's installation, one concern in one home: `volce-lab-host
//! setup` and `setup --undo` (`setup.rs`), `volce-lab-host doctor`
//! (`doctor.rs`), `volce-lab-host catalog pin|list|remove|gateway-image|env-file`
//! (`catalog.rs`, which edits the policy's catalog and gateway image),
//! `volce-lab-host data list|mount|purge` (`data.rs`, the apps' data images),
//! `volce-lab-host backup init|list|check` (`backup.rs`, the backup repository),
//! `volce-lab-host edge enable|status|disable` (`edge.rs`, the HTTPS edge),
//! `volce-lab-host state backup|restore` (`state.rs`), and the two rules both
//! hold the server to: the agent's
//! one sudoers line ([`sudoers_rule`], in the drop-in [`sudoers_file`]) and the groups it must not be in
//! ([`PRIVILEGED_GROUPS`]). Runs as root on the server's terminal.
//!
//! A layer above `crate::host`: it reads the host's paths
//! (`host::paths::HostPaths`, the one table of installed paths), its drift
//! and leftovers rules and its audit trail, and nothing on the request path
//! (`host`) imports from here: an rpc never runs installation code.

pub mod accessory;
pub mod backup;
pub mod catalog;
pub mod data;
pub mod doctor;
pub mod edge;
pub mod package_check;
pub mod setup;
pub mod state;

use crate::host::HostPaths;

/// The one sudoers line the agent's account may have, for `user`.
pub fn sudoers_rule(user: &str) -> String {
    format!("{user} ALL=(root) NOPASSWD: {} rpc", HostPaths::HELPER)
}

/// The sudoers options for the rpc command alone (whoever runs it): what
/// sudo 1.9 need not do for a call the helper audits itself, so that it
/// execs the helper in its own place instead of forking and waiting
/// (sudoers keeps a process waiting while any of these is on):
/// - `!use_pty`: no pseudo-terminal. It guards a terminal against the
///   command typing into it; the gate's sessions have none (`restrict`)
///   and the helper reads and writes only its pipes;
/// - `!pam_session`, `!pam_setcred`: no PAM session or credentials for
///   root. They set limits (the helper sets its own, `host::process`) and
///   log "session opened/closed" twice per call; sudo's own log line of
///   each call stays.
///
/// Kept: the account check (`pam_acct_mgmt`: a locked or expired agent is
/// refused on every call, even over a master opened before), sudo's syslog
/// line, `env_reset` and `secure_path`. Measured in docs/benchmarks.md.
pub const RPC_DEFAULTS: &str = "!use_pty, !pam_session, !pam_setcred";

/// The alias [`sudoers_file`] names the rpc command by: `Defaults!` takes
/// a command with arguments only through one.
pub const RPC_ALIAS: &str = "VOLCE_LAB_RPC";

/// The whole drop-in setup writes for `user`: the rpc command's options
/// ([`RPC_DEFAULTS`]) and the one rule ([`sudoers_rule`]), which
/// `sudo -l -U USER` still lists alone.
pub fn sudoers_file(user: &str) -> String {
    format!(
        "# volce-lab: the agent may run the helper's rpc only (docs/server-install.md)\n\
         Cmnd_Alias {RPC_ALIAS} = {helper} rpc\n\
         Defaults!{RPC_ALIAS} {RPC_DEFAULTS}\n\
         {rule}\n",
        helper = HostPaths::HELPER,
        rule = sudoers_rule(user)
    )
}

/// The options every key of the agent's account carries, exactly: no pty,
/// no forwarding, no `~/.ssh/rc`, and only the gate runs, whatever the
/// client asks (a shell, a command or a subsystem). sshd hands the forced
/// command to the account's shell as `SHELL -c COMMAND`. Setup makes that
/// shell the gate, which ignores `COMMAND`; under `/bin/sh` (setup's shell
/// before 0.2.0) `exec` makes the shell become the gate instead of forking
/// it and waiting (docs/security.md). The client's words reach the gate
/// only as `SSH_ORIGINAL_COMMAND`.
pub fn gate_key_options() -> String {
    format!("restrict,command=\"exec {} ssh-gate\"", HostPaths::HELPER)
}

/// The options setup wrote before 0.2.0's `exec`: the same gate, as safe,
/// with a shell's fork in every call while the shell is `/bin/sh`. Doctor
/// accepts them with a warning.
pub fn legacy_gate_key_options() -> String {
    format!("restrict,command=\"{} ssh-gate\"", HostPaths::HELPER)
}

/// Groups whose members can become root or reach the Docker socket on a
/// Debian-like system: membership bypasses the sudoers rule entirely.
pub const PRIVILEGED_GROUPS: [&str; 8] =
    ["docker", "sudo", "root", "wheel", "admin", "lxd", "disk", "shadow"];
