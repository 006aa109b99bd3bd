//! The closed set of commands volce-lab ever runs on a target, written once
//! for both ends: the workstation's transports send them
//! (`crate::inspect::transport`, `crate::inspect::gated`) and the ssh gate
//! accepts and runs them (`crate::wire::gate`, `crate::host::gate`). Each
//! command's program and arguments, and its plain shell line, have their
//! home here, so the two ends cannot drift. Pure: no I/O.
//!
//! Not the same set as the agent's checks (`crate::inspect::results::Check`):
//! the agent's `web_status` is answered by an [`RemoteCommand::Rpc`], and
//! an rpc is no check of its own (the management tools send it too).

/// Where `sudo` is: every path to the root helper goes through this one
/// binary by absolute path, so a `sudo` of the caller's choosing (a shell
/// function, a file earlier in PATH) is never consulted. `HostPaths::SUDO`
/// is this path.
pub const SUDO_PATH: &str = "/usr/bin/sudo";

/// `df` by absolute path.
pub const DF_PATH: &str = "/usr/bin/df";

/// The arguments of `df` for the disk check: the root file system, sizes
/// for a person.
pub const DF_ARGS: &[&str] = &["-h", "/"];

/// The arguments of `sudo` for the one rpc the agent's sudoers rule allows:
/// `sudo -n <helper> rpc`, never asking for a password.
pub const RPC_ARGS: &[&str] = &["-n", super::HELPER_PATH, "rpc"];

/// What a workstation without the gate sends for identity (and what a
/// shell runs for the gated identity request, the comment aside). These
/// three are the plain shell lines: a login shell interprets them, which is
/// why nothing variable ever goes into them.
pub const LEGACY_IDENTITY: &str = "LC_ALL=C; export LC_ALL; hostname && id -un";
/// The shell's form of [`DF_PATH`] [`DF_ARGS`], in the C locale.
pub const LEGACY_DISK: &str = "LC_ALL=C df -h /";
/// The shell's form of [`SUDO_PATH`] [`RPC_ARGS`].
pub const LEGACY_RPC: &str = "sudo -n /usr/local/bin/volce-lab-host rpc";

/// Every command volce-lab ever runs against a target. Closed: neither the
/// agent nor the configuration can add one, and the gate runs nothing else.
/// The strum names are the words of the gate's request lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumString, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum RemoteCommand {
    /// The host name and the account (`hostname` then `id -un`, one per line).
    Identity,
    /// `df -h /` in the C locale.
    Disk,
    /// `sudo -n /usr/local/bin/volce-lab-host rpc`, the request on stdin.
    Rpc,
}

impl RemoteCommand {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The plain shell line that runs this command through a login shell
    /// (ssh without the gate, and what the gate accepts from a workstation
    /// that does not know it).
    pub fn legacy_line(self) -> &'static str {
        match self {
            RemoteCommand::Identity => LEGACY_IDENTITY,
            RemoteCommand::Disk => LEGACY_DISK,
            RemoteCommand::Rpc => LEGACY_RPC,
        }
    }

    /// The one program, by absolute path, and its arguments that run this
    /// command on the target itself, no shell. `None` for identity: the
    /// gate reads it from the kernel, local mode runs two programs.
    pub fn program(self) -> Option<(&'static str, &'static [&'static str])> {
        match self {
            RemoteCommand::Identity => None,
            RemoteCommand::Disk => Some((DF_PATH, DF_ARGS)),
            RemoteCommand::Rpc => Some((SUDO_PATH, RPC_ARGS)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shell_line_runs_the_same_program_as_its_argv() {
        // The shell finds the program on PATH; the argv names it absolutely.
        for command in [RemoteCommand::Disk, RemoteCommand::Rpc] {
            let (program, args) = command.program().unwrap();
            let name = program.rsplit('/').next().unwrap();
            let plain = format!("{name} {}", args.join(" "));
            assert!(command.legacy_line().ends_with(&plain), "{command:?}: {plain}");
        }
        assert_eq!(RemoteCommand::Rpc.as_str(), "rpc");
    }
}
