//! Shared by the end-to-end tests (tests/real/e2e_*.rs): where scripts/e2e-setup
//! put things, and how a test acts as the agent (through the real sshd), as
//! the operator (through the operator's sudo rule) and as root. Runs as root.
//!
//! Tests use `std::process::Command` here on purpose: they play people and
//! attackers typing commands, not the product (which goes through
//! `volce_lab::exec`).
#![allow(dead_code)]

use std::ffi::OsString;
use std::io::Write as _;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use volce_lab::config::Config;

pub const E2E_DIR: &str = "/var/tmp/volce-lab-e2e";
pub const SSH_CONFIG: &str = "/var/tmp/volce-lab-e2e/client/ssh_config";
pub const SSHD_PORT: u16 = 2222;
pub const ALIAS: &str = "vl-e2e";
pub const AGENT: &str = "vl-agent";
pub const OTHER: &str = "vl-other";
pub const OPERATOR: &str = "vl-operator";
pub const HOST_LINK: &str = "/usr/local/bin/volce-lab-host";
/// Where the package puts the executable (the symlink's target).
pub const INSTALLED: &str = "/usr/lib/volce-lab/volce-lab";
pub const LIB_DIR: &str = "/usr/lib/volce-lab";
pub const POLICY: &str = "/etc/volce-lab/policy.json";
pub const STATE_DIR: &str = "/var/lib/volce-lab";
pub const DOCKER: &str = "/usr/local/bin/docker";

/// Fails loudly unless scripts/e2e-setup has built the installation and its
/// sshd answers, and the installed package holds the binary under test;
/// returns the host name the server reports.
pub fn require_setup() -> String {
    let host = require_installation();
    install_binary_under_test();
    host
}

/// [`require_setup`] whatever package is installed: for the upgrade suite,
/// which starts on the previous release's.
pub fn require_installation() -> String {
    assert!(
        nix::unistd::geteuid().is_root(),
        "the end-to-end tests run as root (they act as the agent over ssh and as the operator through sudo); \
         run them through scripts/test"
    );
    let ready = Path::new(E2E_DIR).join("ready");
    assert!(
        ready.is_file(),
        "scripts/e2e-setup has not run ({} is missing): as root, run {REINSTALL}",
        ready.display()
    );
    assert!(
        TcpStream::connect_timeout(&([127, 0, 0, 1], SSHD_PORT).into(), Duration::from_secs(2)).is_ok(),
        "the e2e sshd does not answer on 127.0.0.1:{SSHD_PORT}: run scripts/e2e-setup again"
    );
    let host = std::fs::read_to_string(Path::new(E2E_DIR).join("expected_host")).expect("expected_host");
    host.trim().to_owned()
}

/// How to (re)build the installation around the binary under test.
const REINSTALL: &str =
    "`./scripts/package --debug` then `scripts/e2e-setup target/debian-debug/volce-lab_*.deb`";

/// The server side must run the code under test, installed the way a server
/// gets it: the .deb `scripts/package --debug` wraps around the binary
/// `cargo test` builds, installed by scripts/e2e-setup with dpkg and
/// `volce-lab-host setup`. An older package fails here, loudly, instead of
/// being patched over: a copied-in binary would no longer be the
/// packaged installation the suites are meant to prove (and building a
/// package from inside `cargo test` would wait on cargo's own lock).
fn install_binary_under_test() {
    static DONE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let under_test = env!("CARGO_BIN_EXE_volce-lab");
        let packaged = run("/usr/bin/dpkg", &["-S", INSTALLED], None);
        assert!(
            packaged.ok() && packaged.stdout.starts_with("volce-lab: "),
            "{INSTALLED} is not the volce-lab package's ({packaged:?}): as root, run {REINSTALL}"
        );
        assert!(
            Path::new(INSTALLED).is_file() && sha256_file(INSTALLED) == sha256_file(under_test),
            "the installed package holds another build than the binary under test ({under_test}): \
             as root, run {REINSTALL}"
        );
    });
}

/// The e2e tests change shared things (sshd accounts, sudoers, policy):
/// they run one at a time (one lock for every e2e suite in the crate).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a command did.
#[derive(Debug)]
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
}

/// Runs `program` with `args`, feeding `stdin`, in a fixed environment.
pub fn run(program: &str, args: &[&str], stdin: Option<&[u8]>) -> Ran {
    let mut child = Command::new(program)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .env("LC_ALL", "C")
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        let _ = pipe.write_all(bytes);
    }
    let output = child.wait_with_output().expect("wait");
    Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `remote` through the real sshd with the agent's key: exactly what
/// anyone holding the key could type. With the ssh gate installed only
/// volce-lab's fixed requests run this way.
pub fn over_ssh(remote: &str, stdin: Option<&[u8]>) -> Ran {
    run(
        "/usr/bin/ssh",
        &["-F", SSH_CONFIG, "-T", "-o", "ControlMaster=no", "-o", "ConnectTimeout=10", "--", ALIAS, remote],
        stdin,
    )
}

/// Runs `script` in a shell of the agent's account on the server (as
/// root's `runuser`, no login): what the account itself can do, whatever
/// its key is allowed. The key gets no shell through the ssh gate; these
/// tests prove the account's limits as the stronger attacker.
pub fn as_agent(script: &str, stdin: Option<&[u8]>) -> Ran {
    run("/usr/sbin/runuser", &["-u", AGENT, "--", "/bin/sh", "-c", script], stdin)
}

/// The operator at the server's terminal: `sudo volce-lab-host ARGS` as
/// vl-operator at a terminal of vl-operator's, so the helper sees
/// SUDO_USER=vl-operator, a sudo run by vl-operator, and that sudo's
/// terminal owned by vl-operator (`host::operator`).
pub fn as_operator(args: &[&str]) -> Ran {
    let mut argv = vec!["/usr/bin/sudo", "-n", HOST_LINK];
    argv.extend_from_slice(args);
    at_terminal(OPERATOR, OPERATOR, &argv)
}

/// Runs `argv` as `user` (root's `runuser`, no login) in a session of its
/// own whose controlling terminal is a fresh pty owned by `owner`, the way
/// sshd or login hands a terminal to the account that logged in. stdin is
/// the terminal; stdout and stderr are pipes, returned. Nothing is typed:
/// what needs an answer gets end of input. `setsid --ctty` (util-linux)
/// makes the pty the session's controlling terminal, so no `unsafe`
/// `pre_exec` is needed here.
pub fn at_terminal(owner: &str, user: &str, argv: &[&str]) -> Ran {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let uid =
        nix::unistd::User::from_name(owner).unwrap().unwrap_or_else(|| panic!("no account {owner}")).uid;
    nix::unistd::fchown(&pty.slave, Some(uid), None).expect("chown the pty to its owner");
    let mut args = vec!["--ctty", "/usr/sbin/runuser", "-u", user, "--"];
    args.extend_from_slice(argv);
    let child = Command::new("/usr/bin/setsid")
        .args(&args)
        .env_clear()
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .env("LC_ALL", "C")
        .stdin(Stdio::from(pty.slave))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {argv:?} at a terminal: {e}"));
    // Drain the terminal's output (sudo relays to it) so that nothing blocks
    // on a full pty; it ends with EIO once the session's last holder closed it.
    let mut master = std::fs::File::from(pty.master);
    let drain = std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut master, &mut sink);
    });
    let output = child.wait_with_output().expect("wait");
    let _ = drain.join();
    Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Fails loudly while the installed binary has no host controller yet.
pub fn require_host_helper() {
    let probe = run(HOST_LINK, &["show", &"0".repeat(32)], None);
    let said = format!("{}{}", probe.stdout, probe.stderr);
    assert!(
        !said.contains("not yet available"),
        "the installed {HOST_LINK} has no host controller yet (it says: {}); \
         these tests need the host helper and the docker engine merged",
        said.trim()
    );
}

/// The Docker parts the scenario needs: the engine, the test images and
/// their policy from scripts/test-images.
pub fn require_docker_and_policy() {
    let version = run(DOCKER, &["version", "--format", "{{.Server.Version}}"], None);
    assert!(version.ok(), "the Docker engine does not answer: {}", version.stderr.trim());
    assert!(
        Path::new(POLICY).is_file(),
        "{POLICY} is missing: run scripts/test-images, then scripts/e2e-setup again"
    );
}

pub fn sha256_file(path: &str) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    volce_lab::text::hex(&Sha256::digest(&bytes))
}

/// A private copy of the client ssh_config that a test may change, with
/// the alias pointing at `user` (vl-agent as installed).
pub fn ssh_config_copy(dir: &Path, user: &str) -> PathBuf {
    let path = dir.join("ssh_config");
    write_ssh_config(&path, user, "");
    path
}

/// Rewrites a copy made by [`ssh_config_copy`]: the alias now logs in as
/// `user`, with `extra` lines added to the alias's block.
pub fn write_ssh_config(path: &Path, user: &str, extra: &str) {
    let original = std::fs::read_to_string(SSH_CONFIG).expect("client ssh_config");
    let needle = format!("Host {ALIAS}\n    User {AGENT}\n");
    assert!(original.contains(&needle), "unexpected ssh_config layout");
    let replaced = original.replacen(&needle, &format!("Host {ALIAS}\n    User {user}\n{extra}"), 1);
    // Write beside and rename: ssh never reads half a file.
    let temp = path.with_extension("new");
    std::fs::write(&temp, replaced).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

/// The environment an agent client gives `volce-lab` for the e2e target:
/// PATH and HOME, `state` as its state directory (audit log, masters), the
/// ssh-mode variables and management on. For `Command::env_clear().envs(..)`.
pub fn workstation_env(host: &str, state: &Path) -> Vec<(&'static str, OsString)> {
    vec![
        ("PATH", "/usr/bin:/bin".into()),
        ("HOME", "/root".into()),
        ("XDG_STATE_HOME", state.as_os_str().to_owned()),
        ("VOLCE_LAB_MODE", "ssh".into()),
        ("VOLCE_LAB_SSH_CONFIG", SSH_CONFIG.into()),
        ("VOLCE_LAB_SSH_ALIAS", ALIAS.into()),
        ("VOLCE_LAB_EXPECTED_HOST", host.into()),
        ("VOLCE_LAB_EXPECTED_USER", AGENT.into()),
        ("VOLCE_LAB_MANAGEMENT", "enabled".into()),
        ("VOLCE_LAB_TIMEOUT", "30".into()),
    ]
}

/// The workstation configuration for ssh mode, as the variables would give it.
pub fn ssh_mode(ssh_config: &Path, alias: &str, host: &str, user: &str, extra: &[(&str, &str)]) -> Config {
    let mut table: Vec<(String, OsString)> = vec![
        ("VOLCE_LAB_MODE".into(), "ssh".into()),
        ("VOLCE_LAB_SSH_CONFIG".into(), ssh_config.as_os_str().to_owned()),
        ("VOLCE_LAB_SSH_ALIAS".into(), alias.into()),
        ("VOLCE_LAB_EXPECTED_HOST".into(), host.into()),
        ("VOLCE_LAB_EXPECTED_USER".into(), user.into()),
    ];
    for (key, value) in extra {
        table.push(((*key).into(), (*value).into()));
    }
    Config::from_lookup(|name| table.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
        .expect("valid e2e configuration")
}

/// The pid of the ssh master on `socket`, if one answers.
pub fn master_pid(socket: &Path) -> Option<u32> {
    let control = format!("ControlPath={}", socket.display());
    let check = run("/usr/bin/ssh", &["-F", "/dev/null", "-o", &control, "-O", "check", "--", ALIAS], None);
    let text = check.stderr;
    let start = text.find("(pid=")? + 5;
    let end = start + text[start..].find(')')?;
    text[start..end].parse().ok()
}

pub fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}

/// A temporary directory mode 0700 (for control sockets and config copies).
pub fn private_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    let temp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    temp
}

// ---- the server's state, owned by these tests on this machine ---------------------

/// Removes what an earlier run of `apps` left (containers, networks) and
/// starts the helper's state afresh, so a test can run again and again on
/// one machine. The e2e installation belongs to these tests alone.
pub fn fresh_host_state(apps: &[&str]) {
    remove_apps(apps);
    // setup's manifest stays: e2e-teardown's `setup --undo` reads it.
    let manifest = Path::new(STATE_DIR).join("setup.json");
    let kept = std::fs::read(&manifest).ok();
    if Path::new(STATE_DIR).exists() {
        std::fs::remove_dir_all(STATE_DIR).expect("remove the helper's state");
    }
    let made = run("/usr/bin/install", &["-d", "-o", "root", "-g", "root", "-m", "0700", STATE_DIR], None);
    assert!(made.ok(), "{made:?}");
    if let Some(bytes) = kept {
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&manifest).unwrap();
        file.write_all(&bytes).unwrap();
    }
}

/// Docker objects of `apps`: containers, then networks, by our label.
pub fn remove_apps(apps: &[&str]) {
    for app in apps {
        let filter = format!("label=io.volce-lab.app={app}");
        let ids = run(DOCKER, &["ps", "-aq", "--filter", &filter], None);
        for id in ids.stdout.split_whitespace() {
            run(DOCKER, &["rm", "-f", id], None);
        }
        let networks = run(DOCKER, &["network", "ls", "-q", "--filter", &filter], None);
        for id in networks.stdout.split_whitespace() {
            run(DOCKER, &["network", "rm", id], None);
        }
    }
}

/// A port inside the policy's range that nothing listens on.
pub fn free_port() -> u16 {
    (18500..18999)
        .find(|port| std::net::TcpListener::bind(("127.0.0.1", *port)).is_ok())
        .expect("a free port in 18500..18999")
}

/// One HTTP/1.0 GET to 127.0.0.1:`port` with a Host header: (status, body).
pub fn http_get(port: u16, host: &str) -> Option<(u16, String)> {
    use std::io::Read as _;
    let mut stream =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(3)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET / HTTP/1.0\r\nHost: {host}\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Some((status, body))
}

/// A sudoers drop-in installed for one test (checked with `visudo -cf`
/// first) and removed when the guard drops, passed or failed.
pub struct SudoersDropIn(PathBuf);

impl SudoersDropIn {
    pub fn install(name: &str, rule: &str) -> SudoersDropIn {
        let path = Path::new("/etc/sudoers.d").join(name);
        let temp = Path::new("/etc/sudoers.d").join(format!(".{name}.new"));
        std::fs::write(&temp, format!("{rule}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o440)).unwrap();
        let check = run("/usr/sbin/visudo", &["-cqf", temp.to_str().unwrap()], None);
        if !check.ok() {
            let _ = std::fs::remove_file(&temp);
            panic!("visudo refuses {rule:?}: {check:?}");
        }
        std::fs::rename(&temp, &path).unwrap();
        SudoersDropIn(path)
    }
}

impl Drop for SudoersDropIn {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The agent's key file (setup's, in its root-owned `~/.ssh`) with a
/// change, restored byte for byte on drop. Root's 0644, written beside
/// and renamed: sshd never reads half a file.
pub struct AgentKeysChange(Vec<u8>);

impl AgentKeysChange {
    pub fn apply(change: impl FnOnce(&str) -> String) -> AgentKeysChange {
        let path = agent_keys_path();
        let original = std::fs::read(&path).expect("the agent's authorized_keys (setup wrote it)");
        let text = String::from_utf8(original.clone()).expect("the key file is text");
        write_agent_keys(change(&text).as_bytes());
        AgentKeysChange(original)
    }
}

impl Drop for AgentKeysChange {
    fn drop(&mut self) {
        write_agent_keys(&self.0);
    }
}

fn agent_keys_path() -> PathBuf {
    PathBuf::from(format!("/home/{AGENT}/.ssh/authorized_keys"))
}

fn write_agent_keys(bytes: &[u8]) {
    use std::os::unix::fs::PermissionsExt as _;
    let path = agent_keys_path();
    let temp = path.with_extension("e2e-new");
    std::fs::write(&temp, bytes).unwrap();
    std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::rename(&temp, &path).unwrap();
}

/// The installed policy with a change, restored byte for byte on drop.
pub struct PolicyChange(Vec<u8>);

impl PolicyChange {
    pub fn apply(change: impl FnOnce(&mut serde_json::Value)) -> PolicyChange {
        let original = std::fs::read(POLICY).unwrap_or_else(|e| panic!("read {POLICY}: {e}"));
        let mut policy: serde_json::Value = serde_json::from_slice(&original).expect("policy is JSON");
        change(&mut policy);
        write_policy(serde_json::to_vec_pretty(&policy).unwrap().as_slice());
        PolicyChange(original)
    }
}

impl Drop for PolicyChange {
    fn drop(&mut self) {
        write_policy(&self.0);
    }
}

/// Root 0600, written beside and renamed, as the helper requires.
fn write_policy(bytes: &[u8]) {
    use std::os::unix::fs::OpenOptionsExt as _;
    let temp = Path::new("/etc/volce-lab/.policy.json.new");
    let mut file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(temp).unwrap();
    file.write_all(bytes).unwrap();
    file.sync_all().unwrap();
    std::fs::rename(temp, POLICY).unwrap();
}

/// The agent's rpc through ssh and the exact sudoers rule: (exit code, reply).
pub fn agent_rpc(request: &serde_json::Value) -> (Option<i32>, serde_json::Value) {
    let bytes = serde_json::to_vec(request).unwrap();
    let ran = over_ssh("sudo -n /usr/local/bin/volce-lab-host rpc", Some(&bytes));
    // deploy, start and update print their progress lines first; the
    // reply is what follows them, read as the workstation reads it.
    let reply = serde_json::from_slice(volce_lab::wire::progress::reply_bytes(ran.stdout.as_bytes()))
        .unwrap_or_else(|_| panic!("the helper's reply is not one JSON object: {ran:?}"));
    (ran.code, reply)
}

/// The stored plan as the operator sees it with `show --json`, read as root.
pub fn stored_plan(plan_id: &str) -> serde_json::Value {
    let shown = run(HOST_LINK, &["show", "--json", plan_id], None);
    assert!(shown.ok(), "show --json {plan_id}: {shown:?}");
    serde_json::from_str(shown.stdout.trim()).expect("show --json prints JSON")
}

/// The first value named `key` anywhere in `value` (depth first).
pub fn find<'a>(value: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map.get(key).or_else(|| map.values().find_map(|v| find(v, key))),
        serde_json::Value::Array(items) => items.iter().find_map(|v| find(v, key)),
        _ => None,
    }
}

pub fn find_str<'a>(value: &'a serde_json::Value, key: &str) -> &'a str {
    find(value, key).and_then(|v| v.as_str()).unwrap_or_else(|| panic!("no string {key:?} in {value}"))
}

/// The multiplexed transport with the `ssh` client as its only way to run
/// (the default `CommandCarrier::run`): today's client-process path over
/// the same master, to compare the in-process one with.
pub struct ClientOnly(pub std::sync::Arc<volce_lab::inspect::ssh_mux::MultiplexedSsh>);

impl volce_lab::inspect::transport::CommandCarrier for ClientOnly {
    fn specs(
        &self,
        command: volce_lab::wire::remote::RemoteCommand,
        stdin: Option<&[u8]>,
        limits: volce_lab::inspect::transport::RunLimits,
    ) -> Vec<volce_lab::exec::ProcessSpec> {
        self.0.specs(command, stdin, limits)
    }
    fn gated(
        &self,
        line: &str,
        stdin: Option<&[u8]>,
        limits: volce_lab::inspect::transport::RunLimits,
    ) -> Option<Vec<volce_lab::exec::ProcessSpec>> {
        self.0.gated(line, stdin, limits)
    }
    fn reset(&self) {
        self.0.reset();
    }
    fn kind(&self) -> &'static str {
        "ssh"
    }
}
