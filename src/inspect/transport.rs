//! How a fixed command reaches the target: directly on this machine (local
//! mode) or through a hardened ssh client (ssh mode). Runs unprivileged on
//! the workstation.
//!
//! The set of commands is closed ([`RemoteCommand`]); neither the agent nor
//! the configuration can add one. Bytes for the host helper travel on stdin,
//! never inside an argv or a remote command string, so nothing parses them
//! on the way.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::exec::{ProcessSpec, Transport as ExecTransport};

/// The absolute path of the host helper on the server. The sudoers rule
/// allows exactly `<this> rpc` and nothing else.
pub const HOST_HELPER: &str = "/usr/local/bin/volce-lab-host";
/// The one command line the agent's account may run through sudo.
pub const REMOTE_RPC: &str = "sudo -n /usr/local/bin/volce-lab-host rpc";

/// Every command volce-lab ever runs against a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteCommand {
    /// `hostname` then `id -un`, one per line.
    Identity,
    /// `df -h /` in the C locale.
    Disk,
    /// `sudo -n /usr/local/bin/volce-lab-host rpc`, request on stdin.
    HostRpc,
}

/// Limits of one invocation, chosen by the caller.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub output: usize,
    pub timeout: Duration,
}

impl Limits {
    /// Gives `spec` these limits (for stdout and stderr alike) and `stdin`:
    /// what every transport, real or stand-in, does to each process it builds.
    pub fn apply(self, mut spec: ProcessSpec, stdin: Option<&[u8]>) -> ProcessSpec {
        spec.stdin = stdin.map(<[u8]>::to_vec);
        spec.stdout_limit = self.output;
        spec.stderr_limit = self.output;
        spec.timeout = self.timeout;
        spec
    }
}

/// Turns a [`RemoteCommand`] into the processes that carry it out. The
/// outputs of the processes are concatenated; the first failure stops.
pub trait Transport: Send + Sync {
    fn specs(&self, command: RemoteCommand, stdin: Option<&[u8]>, limits: Limits) -> Vec<ProcessSpec>;
    /// Forget any connection state (called after an identity mismatch, a
    /// timeout or an unconfirmed run), so the next call starts afresh.
    fn reset(&self) {}
    /// A short name for results and audit lines.
    fn kind(&self) -> &'static str;
}

fn spec(program: &str, args: &[&str], stdin: Option<&[u8]>, limits: Limits) -> ProcessSpec {
    limits.apply(ProcessSpec::new(program, args.iter().copied()), stdin)
}

/// The checks run on this machine itself, as the invoking user.
#[derive(Debug, Default)]
pub struct LocalTransport;

impl Transport for LocalTransport {
    fn specs(&self, command: RemoteCommand, stdin: Option<&[u8]>, limits: Limits) -> Vec<ProcessSpec> {
        match command {
            RemoteCommand::Identity => vec![
                spec("/usr/bin/hostname", &[], None, limits),
                spec("/usr/bin/id", &["-un"], None, limits),
            ],
            RemoteCommand::Disk => vec![spec("/usr/bin/df", &["-h", "/"], None, limits)],
            RemoteCommand::HostRpc => {
                vec![spec("/usr/bin/sudo", &["-n", HOST_HELPER, "rpc"], stdin, limits)]
            }
        }
    }

    fn kind(&self) -> &'static str {
        "local"
    }
}

/// The checks run through `ssh` on one configured alias.
#[derive(Debug, Clone)]
pub struct SshTransport {
    pub alias: String,
    pub config_file: Option<PathBuf>,
    pub connect_timeout: Duration,
}

pub const SSH_PROGRAM: &str = "/usr/bin/ssh";

impl SshTransport {
    /// The hardened ssh argv: never asks for a password, never accepts an
    /// unknown host key, forwards nothing, no tty; the alias comes last but
    /// one (after `--`, so it can never be read as an option) and the fixed
    /// remote command last.
    pub fn argv(&self, remote: &str) -> Vec<OsString> {
        let mut argv: Vec<OsString> = Vec::new();
        if let Some(file) = &self.config_file {
            argv.push("-F".into());
            argv.push(file.clone().into());
        }
        let connect = self.connect_timeout.as_secs().max(1);
        for option in [
            "-T".to_owned(),
            "-o".into(),
            "BatchMode=yes".into(),
            "-o".into(),
            "StrictHostKeyChecking=yes".into(),
            "-o".into(),
            "ClearAllForwardings=yes".into(),
            "-o".into(),
            "ForwardAgent=no".into(),
            "-o".into(),
            "ForwardX11=no".into(),
            "-o".into(),
            "RequestTTY=no".into(),
            "-o".into(),
            "PermitLocalCommand=no".into(),
            "-o".into(),
            format!("ConnectTimeout={connect}"),
            "--".into(),
            self.alias.clone(),
            remote.to_owned(),
        ] {
            argv.push(option.into());
        }
        argv
    }

    /// The remote command string for each check. These are constants; the
    /// remote login shell interprets them, which is why nothing variable
    /// ever goes into them.
    pub fn remote(command: RemoteCommand) -> &'static str {
        match command {
            RemoteCommand::Identity => "LC_ALL=C; export LC_ALL; hostname && id -un",
            RemoteCommand::Disk => "LC_ALL=C df -h /",
            RemoteCommand::HostRpc => REMOTE_RPC,
        }
    }
}

impl Transport for SshTransport {
    fn specs(&self, command: RemoteCommand, stdin: Option<&[u8]>, limits: Limits) -> Vec<ProcessSpec> {
        let mut spec = limits.apply(ProcessSpec::new(SSH_PROGRAM, self.argv(Self::remote(command))), stdin);
        spec.transport = ExecTransport::Ssh;
        vec![spec]
    }

    fn kind(&self) -> &'static str {
        "ssh"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits { output: 8192, timeout: Duration::from_secs(12) }
    }

    #[test]
    fn ssh_argv_is_hardened_and_ends_with_alias_and_fixed_command() {
        let ssh = SshTransport {
            alias: "course-demo".into(),
            config_file: Some("/etc/ssh-test/config".into()),
            connect_timeout: Duration::from_secs(8),
        };
        let specs = ssh.specs(RemoteCommand::HostRpc, Some(b"{}"), limits());
        assert_eq!(specs.len(), 1);
        let spec = &specs[0];
        assert_eq!(spec.program, PathBuf::from("/usr/bin/ssh"));
        let argv: Vec<String> = spec.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(&argv[..2], ["-F", "/etc/ssh-test/config"]);
        for option in [
            "BatchMode=yes",
            "StrictHostKeyChecking=yes",
            "ClearAllForwardings=yes",
            "ForwardAgent=no",
            "ForwardX11=no",
            "RequestTTY=no",
            "ConnectTimeout=8",
        ] {
            let at = argv.iter().position(|a| a == option).unwrap_or_else(|| panic!("{option} missing"));
            assert_eq!(argv[at - 1], "-o");
        }
        assert!(argv.contains(&"-T".to_owned()));
        assert_eq!(argv[argv.len() - 3], "--");
        assert_eq!(argv[argv.len() - 2], "course-demo");
        assert_eq!(argv[argv.len() - 1], "sudo -n /usr/local/bin/volce-lab-host rpc");
        assert_eq!(spec.stdin.as_deref(), Some(&b"{}"[..]));
        assert_eq!(spec.transport, ExecTransport::Ssh);
    }

    #[test]
    fn local_commands_are_fixed_absolute_programs() {
        let local = LocalTransport;
        for command in [RemoteCommand::Identity, RemoteCommand::Disk, RemoteCommand::HostRpc] {
            for spec in local.specs(command, None, limits()) {
                assert!(spec.program.is_absolute());
            }
        }
        let rpc = &local.specs(RemoteCommand::HostRpc, Some(b"x"), limits())[0];
        assert_eq!(rpc.program, PathBuf::from("/usr/bin/sudo"));
        let argv: Vec<String> = rpc.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(argv, ["-n", "/usr/local/bin/volce-lab-host", "rpc"]);
    }
}
