//! End-to-end: an agent key with a passphrase, unlocked in an ssh-agent.
//! `volce-lab` gives ssh a cleared environment (`crate::exec::minimal_env`),
//! and passes on `SSH_AUTH_SOCK` alone, when it names a socket. The test
//! starts its own ssh-agent, loads a passphrase-protected key into it (the
//! passphrase through SSH_ASKPASS, as a desktop would), binds that key to the
//! gate for the agent account of scripts/e2e-setup, and runs `volce-lab
//! inspect` in ssh mode with an environment like an MCP client's `env` block:
//! without the socket the key cannot be used (`connection_failed`, ssh's
//! BatchMode never prompts), with it identity and disk are ok.
//!
//! Runs as root after scripts/e2e-setup; restores the agent's
//! `authorized_keys` and stops the agent and any ssh master when it ends.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::e2e::*;

const PASSPHRASE: &str = "correct horse battery staple";

/// The test's ssh-agent, stopped (by its pid, which the test started) on drop.
struct SshAgent {
    child: Child,
    socket: PathBuf,
}

impl SshAgent {
    fn start(dir: &Path) -> SshAgent {
        let socket = dir.join("agent.sock");
        // -D: in the foreground, so the test holds its pid.
        let child = Command::new("/usr/bin/ssh-agent")
            .args(["-D", "-a"])
            .arg(&socket)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start ssh-agent (package openssh-client)");
        let started = Instant::now();
        while !socket.exists() {
            assert!(started.elapsed() < Duration::from_secs(5), "ssh-agent made no socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        SshAgent { child, socket }
    }
}

impl Drop for SshAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A workstation ssh_config that offers only the passphrase key: the
/// e2e client's own key (no passphrase) must not be tried, or the test
/// would prove nothing.
fn ssh_config(dir: &Path, key: &Path) -> PathBuf {
    let path = dir.join("ssh_config");
    let known_hosts = Path::new(E2E_DIR).join("client/known_hosts");
    std::fs::write(
        &path,
        format!(
            "Host {ALIAS}\n    HostName 127.0.0.1\n    Port {SSHD_PORT}\n    User {AGENT}\n    \
             IdentityFile {}\n    IdentitiesOnly yes\n    UserKnownHostsFile {}\n    \
             GlobalKnownHostsFile /dev/null\n    StrictHostKeyChecking yes\n    LogLevel ERROR\n",
            key.display(),
            known_hosts.display()
        ),
    )
    .unwrap();
    path
}

/// `volce-lab inspect --json` with an MCP client's kind of environment:
/// the volce-lab variables, a private XDG_RUNTIME_DIR for the ssh master,
/// and `SSH_AUTH_SOCK` when given. Returns each check's status.
fn inspect(config: &Path, host: &str, runtime: &Path, auth_sock: Option<&Path>) -> Vec<String> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_volce-lab"));
    command
        .args(["inspect", "--json"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("XDG_RUNTIME_DIR", runtime)
        .env("VOLCE_LAB_MODE", "ssh")
        .env("VOLCE_LAB_SSH_CONFIG", config)
        .env("VOLCE_LAB_SSH_ALIAS", ALIAS)
        .env("VOLCE_LAB_EXPECTED_HOST", host)
        .env("VOLCE_LAB_EXPECTED_USER", AGENT);
    if let Some(socket) = auth_sock {
        command.env("SSH_AUTH_SOCK", socket);
    }
    let output = command.output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|_| panic!("{text}"));
            format!("{}={}", value["check"].as_str().unwrap(), value["status"].as_str().unwrap())
        })
        .collect()
}

/// Tells every ssh master under `runtime` to exit.
fn exit_masters(runtime: &Path) {
    let dir = runtime.join("volce-lab-ssh");
    for socket in std::fs::read_dir(&dir).into_iter().flatten().flatten().map(|entry| entry.path()) {
        let control = format!("ControlPath={}", socket.display());
        run("/usr/bin/ssh", &["-F", "/dev/null", "-o", &control, "-O", "exit", "--", ALIAS], None);
    }
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn a_passphrase_key_works_through_the_ssh_agent_whose_socket_is_passed_in() {
    let host = require_setup();
    let _serial = serial();
    let temp = private_tempdir();
    let key = temp.path().join("agent_key");
    let made = run(
        "/usr/bin/ssh-keygen",
        &["-q", "-t", "ed25519", "-N", PASSPHRASE, "-C", "e2e-passphrase", "-f", key.to_str().unwrap()],
        None,
    );
    assert!(made.ok(), "{made:?}");
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let _authorized = AgentKeysChange::apply(|keys| {
        format!("{keys}restrict,command=\"exec {HOST_LINK} ssh-gate\" {}\n", public.trim())
    });
    let config = ssh_config(temp.path(), &key);
    let runtime = temp.path().join("run");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    struct Masters<'a>(&'a Path);
    impl Drop for Masters<'_> {
        fn drop(&mut self) {
            exit_masters(self.0);
        }
    }
    let _masters = Masters(&runtime);

    let agent = SshAgent::start(temp.path());
    let not_a_socket = temp.path().join("agent_key.pub");
    // No agent, or a value that is no socket (dropped): ssh cannot open the
    // key, never prompts, and the check fails with the stable code.
    for auth_sock in [None, Some(not_a_socket.as_path())] {
        let statuses = inspect(&config, &host, &runtime, auth_sock);
        assert_eq!(statuses.first().map(String::as_str), Some("identity=connection_failed"), "{auth_sock:?}");
        assert!(!statuses.iter().any(|s| s.ends_with("=ok")), "{auth_sock:?}: {statuses:?}");
    }
    // Even the agent's socket is of no use while the key is not loaded.
    let statuses = inspect(&config, &host, &runtime, Some(&agent.socket));
    assert_eq!(statuses.first().map(String::as_str), Some("identity=connection_failed"), "{statuses:?}");

    // The passphrase goes to ssh-add by SSH_ASKPASS (no terminal here).
    let askpass = temp.path().join("askpass");
    std::fs::write(&askpass, format!("#!/bin/sh\necho '{PASSPHRASE}'\n")).unwrap();
    std::fs::set_permissions(&askpass, std::fs::Permissions::from_mode(0o700)).unwrap();
    let added = Command::new("/usr/bin/ssh-add")
        .arg(&key)
        .env_clear()
        .env("SSH_AUTH_SOCK", &agent.socket)
        .env("SSH_ASKPASS", &askpass)
        .env("SSH_ASKPASS_REQUIRE", "force")
        .env("DISPLAY", "none")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(added.status.success(), "ssh-add: {}", String::from_utf8_lossy(&added.stderr));

    let statuses = inspect(&config, &host, &runtime, Some(&agent.socket));
    assert_eq!(statuses[..2], ["identity=ok", "disk=ok"], "with the agent's socket: {statuses:?}");
}
