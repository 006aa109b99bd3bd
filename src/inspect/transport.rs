//! How a fixed command reaches the target: directly on this machine (local
//! mode) or through a hardened ssh client (ssh mode). Runs unprivileged on
//! the workstation.
//!
//! The set of commands is closed (`crate::wire::remote::RemoteCommand`,
//! shared with the ssh gate); neither the agent nor the configuration can
//! add one. Bytes for the host helper travel on stdin,
//! never inside an argv or a remote command string, so nothing parses them
//! on the way.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::exec::{ProcessOutput, ProcessSpec, StderrTail, Transport as ExecTransport};
use crate::wire::remote::RemoteCommand;

/// RunLimits of one invocation, chosen by the caller.
#[derive(Debug, Clone, Copy)]
pub struct RunLimits {
    pub output: usize,
    pub timeout: Duration,
}

impl RunLimits {
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

/// What [`CommandCarrier::run`] returns.
pub type RunFuture<'a> = std::pin::Pin<Box<dyn Future<Output = (ProcessOutput, StderrTail)> + Send + 'a>>;

/// What carries a [`RemoteCommand`] to the target: it turns the command into
/// the processes that run it (local programs, or an ssh client). The
/// outputs of the processes are concatenated; the first failure stops.
/// (`crate::exec::Transport` is something else: which kind of process one
/// spec starts.)
pub trait CommandCarrier: Send + Sync {
    fn specs(&self, command: RemoteCommand, stdin: Option<&[u8]>, limits: RunLimits) -> Vec<ProcessSpec>;
    /// The processes that send one ssh-gate request line
    /// (`crate::wire::gate::request_line`), or `None` when this transport
    /// reaches no ssh gate (local mode, stand-ins): then every check keeps
    /// its separate identity session.
    fn gated(&self, _line: &str, _stdin: Option<&[u8]>, _limits: RunLimits) -> Option<Vec<ProcessSpec>> {
        None
    }
    /// Runs one process that [`CommandCarrier::specs`] or
    /// [`CommandCarrier::gated`] built: by default the bounded runner
    /// starts it; a carrier may carry it another way with the same facts.
    fn run<'a>(&'a self, spec: &'a ProcessSpec) -> RunFuture<'a> {
        Box::pin(crate::exec::run_with_stderr_tail(spec))
    }
    /// Forget any connection state (called after an identity mismatch, a
    /// timeout or an unconfirmed run), so the next call starts afresh.
    fn reset(&self) {}
    /// A short name for results and audit lines.
    fn kind(&self) -> &'static str;
}

fn spec(program: &str, args: &[&str], stdin: Option<&[u8]>, limits: RunLimits) -> ProcessSpec {
    limits.apply(ProcessSpec::new(program, args.iter().copied()), stdin)
}

/// The checks run on this machine itself, as the invoking user.
#[derive(Debug, Default)]
pub struct LocalTransport;

impl CommandCarrier for LocalTransport {
    fn specs(&self, command: RemoteCommand, stdin: Option<&[u8]>, limits: RunLimits) -> Vec<ProcessSpec> {
        match command {
            RemoteCommand::Identity => vec![
                spec("/usr/bin/hostname", &[], None, limits),
                spec("/usr/bin/id", &["-un"], None, limits),
            ],
            RemoteCommand::Disk | RemoteCommand::Rpc => {
                let (program, args) = command.program().expect("disk and rpc run one program");
                vec![spec(program, args, stdin.filter(|_| command == RemoteCommand::Rpc), limits)]
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
    /// The ssh-agent socket handed to ssh as `SSH_AUTH_SOCK`, the one
    /// variable of the caller's environment it gets (`Config::ssh_auth_sock`
    /// validated it): a key with a passphrase is unlocked there, never by a
    /// prompt. Agent forwarding stays off (`ForwardAgent=no`).
    pub auth_sock: Option<PathBuf>,
}

pub const SSH_PROGRAM: &str = "/usr/bin/ssh";

impl SshTransport {
    /// How ssh mode reaches the target `config` names.
    pub fn of(config: &crate::config::Config) -> SshTransport {
        SshTransport {
            alias: config.ssh_alias.clone(),
            config_file: config.ssh_config.clone(),
            connect_timeout: config.timeout.min(Duration::from_secs(8)),
            auth_sock: config.ssh_auth_sock.clone(),
        }
    }

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
        command.legacy_line()
    }
}

/// Why ssh itself gave up, read from the end of its stderr on the
/// workstation. A closed set: the stderr is matched against fixed phrases
/// and never echoed, and only `volce-lab inspect` (a person at a terminal)
/// shows the reason; the MCP results never carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum SshFailure {
    /// The server's key differs from the one in known_hosts.
    HostKeyChanged,
    /// No key for the server in known_hosts (we never accept a new one).
    HostKeyUnknown,
    /// The server refused our key.
    AuthenticationRefused,
    /// The alias is not in ssh_config and does not resolve as a host name.
    UnknownHost,
    ConnectionRefused,
    ConnectionTimedOut,
    NoRouteToHost,
    /// ssh failed for a reason not listed here (or the remote command exited 255).
    Unrecognized,
}

impl SshFailure {
    /// The reason in the words of the phrases ssh writes; the changed key is
    /// matched before the verification failure that follows it.
    pub fn classify(stderr_tail: &[u8]) -> SshFailure {
        let text = String::from_utf8_lossy(stderr_tail);
        let has = |phrase: &str| text.contains(phrase);
        if has("REMOTE HOST IDENTIFICATION HAS CHANGED") {
            SshFailure::HostKeyChanged
        } else if has("Host key verification failed.") {
            SshFailure::HostKeyUnknown
        } else if has("Permission denied (publickey") {
            SshFailure::AuthenticationRefused
        } else if has("Could not resolve hostname") {
            SshFailure::UnknownHost
        } else if has("Connection refused") {
            SshFailure::ConnectionRefused
        } else if has("Connection timed out") {
            SshFailure::ConnectionTimedOut
        } else if has("No route to host") {
            SshFailure::NoRouteToHost
        } else {
            SshFailure::Unrecognized
        }
    }

    /// One line for the person reading `inspect`: what ssh said and what to do.
    pub fn explain(self) -> &'static str {
        match self {
            SshFailure::HostKeyChanged => {
                "ssh: the server's host key CHANGED since known_hosts recorded it; find out why before \
                 trusting it (ssh-keygen -lf on the server)"
            }
            SshFailure::HostKeyUnknown => {
                "ssh: the server's host key is not in known_hosts; compare its fingerprint and connect once \
                 by hand"
            }
            SshFailure::AuthenticationRefused => "ssh: the server refused the key (Permission denied)",
            SshFailure::UnknownHost => {
                "ssh: could not resolve the host name: the alias is not in ssh_config, or DNS fails"
            }
            SshFailure::ConnectionRefused => "ssh: connection refused: nothing listens on the ssh port",
            SshFailure::ConnectionTimedOut => "ssh: connection timed out: host down or filtered",
            SshFailure::NoRouteToHost => "ssh: no route to host",
            SshFailure::Unrecognized => "ssh failed (or the remote command exited 255)",
        }
    }
}

impl SshTransport {
    /// The command a person runs to read ssh's own words, with the
    /// configured `-F` file quoted for a POSIX shell. A path that would not
    /// print as itself (a backslash, a hidden character) is named by its
    /// variable instead, so the line is always safe to print and to paste.
    /// The alias is validated (`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`).
    pub fn command_to_see_for_yourself(&self) -> String {
        let config = match &self.config_file {
            Some(file) => {
                let path = file.to_string_lossy();
                let word = if crate::text::for_terminal(&path) == path {
                    shell_word(&path)
                } else {
                    "\"$VOLCE_LAB_SSH_CONFIG\"".to_owned()
                };
                format!("-F {word} ")
            }
            None => String::new(),
        };
        crate::text::for_terminal(&format!("ssh {config}{} true", self.alias))
    }
}

/// `word` as one POSIX shell word: as it is when it is plainly safe, else in
/// single quotes (a quote inside as `'"'"'`, no backslash needed).
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\"'\"'"))
    }
}

impl SshTransport {
    /// The one ssh process that sends `remote`.
    fn remote_spec(&self, remote: &str, stdin: Option<&[u8]>, limits: RunLimits) -> ProcessSpec {
        let mut spec = limits.apply(ProcessSpec::new(SSH_PROGRAM, self.argv(remote)), stdin);
        spec.transport = ExecTransport::Ssh;
        if let Some(socket) = &self.auth_sock {
            spec.env.push(("SSH_AUTH_SOCK".into(), socket.clone().into()));
        }
        spec
    }
}

impl CommandCarrier for SshTransport {
    fn specs(&self, command: RemoteCommand, stdin: Option<&[u8]>, limits: RunLimits) -> Vec<ProcessSpec> {
        vec![self.remote_spec(Self::remote(command), stdin, limits)]
    }

    /// The gate line goes in the place of the fixed command. It is built
    /// from validated identifiers only, and is a comment (or the identity
    /// command and a comment) for a login shell that is not the gate.
    fn gated(&self, line: &str, stdin: Option<&[u8]>, limits: RunLimits) -> Option<Vec<ProcessSpec>> {
        Some(vec![self.remote_spec(line, stdin, limits)])
    }

    fn kind(&self) -> &'static str {
        "ssh"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> RunLimits {
        RunLimits { output: 8192, timeout: Duration::from_secs(12) }
    }

    #[test]
    fn ssh_argv_is_hardened_and_ends_with_alias_and_fixed_command() {
        let ssh = SshTransport {
            alias: "course-demo".into(),
            config_file: Some("/etc/ssh-test/config".into()),
            connect_timeout: Duration::from_secs(8),
            auth_sock: None,
        };
        let specs = ssh.specs(RemoteCommand::Rpc, Some(b"{}"), limits());
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
        // Without an agent socket ssh gets exactly the minimal environment.
        assert_eq!(spec.env, crate::exec::minimal_env());
    }

    /// The agent's socket is the one variable added, and only when configured.
    #[test]
    fn an_agent_socket_reaches_ssh_as_ssh_auth_sock_and_nothing_else() {
        let ssh = SshTransport {
            alias: "course-demo".into(),
            config_file: None,
            connect_timeout: Duration::from_secs(8),
            auth_sock: Some("/run/user/1000/agent.sock".into()),
        };
        for spec in ssh.specs(RemoteCommand::Identity, None, limits()) {
            let mut expected = crate::exec::minimal_env();
            expected.push(("SSH_AUTH_SOCK".into(), "/run/user/1000/agent.sock".into()));
            assert_eq!(spec.env, expected);
        }
    }

    /// Tried: the stderr real ssh clients print for each failure (OpenSSH 9),
    /// and the remote side's own noise.
    #[test]
    fn ssh_failures_are_told_apart_by_ssh_s_own_words() {
        let changed = "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n\
                       @    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n\
                       @@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n\
                       Host key for [127.0.0.1]:2222 has changed and you have requested strict checking.\n\
                       Host key verification failed.\n";
        for (stderr, reason) in [
            (changed, SshFailure::HostKeyChanged),
            (
                "No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking.\n\
                 Host key verification failed.\n",
                SshFailure::HostKeyUnknown,
            ),
            ("vl-agent@127.0.0.1: Permission denied (publickey).\n", SshFailure::AuthenticationRefused),
            (
                "ssh: Could not resolve hostname course-demo: Name or service not known\n",
                SshFailure::UnknownHost,
            ),
            ("ssh: connect to host 127.0.0.1 port 2222: Connection refused\n", SshFailure::ConnectionRefused),
            ("ssh: connect to host 10.0.0.9 port 22: Connection timed out\n", SshFailure::ConnectionTimedOut),
            ("ssh: connect to host 10.0.0.9 port 22: No route to host\n", SshFailure::NoRouteToHost),
            ("kex_exchange_identification: Connection closed by remote host\n", SshFailure::Unrecognized),
            ("", SshFailure::Unrecognized),
        ] {
            assert_eq!(SshFailure::classify(stderr.as_bytes()), reason, "{stderr}");
        }
        use strum::VariantArray as _;
        for reason in SshFailure::VARIANTS {
            assert!(!reason.explain().is_empty());
        }
    }

    #[test]
    fn the_command_to_see_ssh_s_words_names_the_configured_file_quoted() {
        let mut ssh = SshTransport {
            alias: "course-demo".into(),
            config_file: Some("/etc/ssh-test/config".into()),
            connect_timeout: Duration::from_secs(8),
            auth_sock: None,
        };
        assert_eq!(ssh.command_to_see_for_yourself(), "ssh -F /etc/ssh-test/config course-demo true");
        ssh.config_file = Some("/home/a b/it's".into());
        assert_eq!(ssh.command_to_see_for_yourself(), r#"ssh -F '/home/a b/it'"'"'s' course-demo true"#);
        for odd in ["/tmp/a\\b", "/tmp/\u{202e}x"] {
            ssh.config_file = Some(odd.into());
            assert_eq!(
                ssh.command_to_see_for_yourself(),
                r#"ssh -F "$VOLCE_LAB_SSH_CONFIG" course-demo true"#
            );
        }
        ssh.config_file = None;
        assert_eq!(ssh.command_to_see_for_yourself(), "ssh course-demo true");
    }

    #[test]
    fn local_commands_are_fixed_absolute_programs() {
        let local = LocalTransport;
        for command in [RemoteCommand::Identity, RemoteCommand::Disk, RemoteCommand::Rpc] {
            for spec in local.specs(command, None, limits()) {
                assert!(spec.program.is_absolute());
            }
        }
        let rpc = &local.specs(RemoteCommand::Rpc, Some(b"x"), limits())[0];
        assert_eq!(rpc.program, PathBuf::from("/usr/bin/sudo"));
        let argv: Vec<String> = rpc.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(argv, ["-n", "/usr/local/bin/volce-lab-host", "rpc"]);
    }
}
