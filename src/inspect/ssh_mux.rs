//! Multiplexed ssh for ssh mode: one master connection per target, reused by
//! every check. Runs unprivileged on the workstation.
//!
//! A fresh ssh connection costs a key exchange and an authentication, a few
//! hundred milliseconds per command even on loopback, and the identity gate
//! runs two commands per check. Sessions over an existing master cost a few
//! milliseconds. Nothing about what runs changes: the same hardened argv, the
//! same fixed remote commands, the identity check before every check (the
//! [`Inspector`](super::Inspector) does that, each check on its own session).
//!
//! Invariants enforced here:
//! - control sockets live only in a private directory: owned by us, mode 0700,
//!   not a symlink, inside a parent nobody else can write; checked before each
//!   use. When no such directory can be had, or the socket path would not fit
//!   a unix socket address, there is no multiplexing at all: fresh
//!   connections with `ControlMaster=no` and `ControlPath=none`, never a
//!   fallback to a shared path nor to the ControlPath of the user's
//!   ssh_config (a socket planted there would carry our sessions);
//! - a master is keyed by everything that decides where and how it connects:
//!   our uid, the alias, the ssh_config path and its bytes, the connect
//!   timeout. A changed configuration gets a new master and the old one is
//!   told to exit before the next check runs;
//! - a master lives at most [`CONTROL_PERSIST_SECS`] after its last session
//!   (ssh's ControlPersist) and at most [`MASTER_MAX_AGE`] after our first use
//!   of it, so host key and authentication are checked afresh regularly;
//! - [`CommandCarrier::reset`] (identity mismatch, failure, timeout, unconfirmed
//!   run) tells the master to exit, so the next check authenticates afresh;
//! - the first check starts the master itself (`ControlMaster=auto`). OpenSSH
//!   detaches a ControlPersist master into its own session with its standard
//!   streams on /dev/null, so it neither holds the check's pipes open (the
//!   runner would wait for their end) nor dies with the check's process group
//!   (both proven against a real sshd in tests/real/e2e_ssh.rs). Two processes that
//!   race to be master are safe: the loser runs its command over a connection
//!   of its own and exits, leaving nothing behind;
//! - with a master up, a check starts no `ssh` client: it speaks the
//!   master's protocol in-process ([`super::mux_client`]) over the socket,
//!   only after the directory checks above passed again and the socket is
//!   ours. When that is declined before anything could have run (no
//!   master yet, a stale socket, another protocol version, a refusal), the
//!   same check runs through the `ssh` client as before, within what is
//!   left of its timeout; a session that did start is never run again.

use std::ffi::OsString;
use std::fs::{self, DirBuilder};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{DirBuilderExt as _, FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

use super::mux_client::{self, Attempt};
use super::transport::{CommandCarrier, RunFuture, RunLimits, SSH_PROGRAM, SshTransport};
use crate::exec::{self, ProcessSpec};
use crate::wire::remote::RemoteCommand;

/// Idle seconds a master stays up after its last session.
pub const CONTROL_PERSIST_SECS: u64 = 60;
/// The longest we keep using one master, however busy it is.
pub const MASTER_MAX_AGE: Duration = Duration::from_secs(600);
/// `sun_path` holds 108 bytes with the final NUL; ssh first binds
/// `<path>.<16 random characters>` and then links it to `<path>`.
const SOCKET_PATH_MAX: usize = 107 - 17;
/// How long we wait for a master to acknowledge `-O exit`.
const EXIT_TIMEOUT: Duration = Duration::from_secs(3);
/// The options of a run without a private control directory: ssh neither
/// becomes a master nor uses any control socket, whatever its config says.
const NO_MULTIPLEXING: [&str; 4] = ["-o", "ControlMaster=no", "-o", "ControlPath=none"];

/// Why checks run over fresh connections instead of a master.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MuxUnavailable {
    #[error("no private directory for ssh control sockets: {0}")]
    NoDirectory(String),
    #[error("the control socket path {0} is too long for a unix socket address")]
    PathTooLong(String),
}

/// The master we last used.
#[derive(Debug)]
struct Master {
    path: PathBuf,
    key: String,
    since: Instant,
}

/// [`SshTransport`] with one ssh master connection per target.
#[derive(Debug)]
pub struct MultiplexedSsh {
    ssh: SshTransport,
    dir: Result<PathBuf, MuxUnavailable>,
    master: Mutex<Option<Master>>,
    in_process: AtomicU64,
    by_client: AtomicU64,
}

/// How many runs went each way since the transport was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Carried {
    /// Sessions spoken in-process over the master's socket.
    pub in_process: u64,
    /// Runs of the `ssh` client (no master yet, declined, no multiplexing).
    pub by_client: u64,
}

impl MultiplexedSsh {
    /// Control sockets go to `$XDG_RUNTIME_DIR/volce-lab-ssh` when that
    /// runtime directory is ours and private, else to
    /// `~/.cache/volce-lab/ssh` (home from the password database, as ssh
    /// itself does).
    pub fn new(ssh: SshTransport) -> MultiplexedSsh {
        MultiplexedSsh::with_dir_result(ssh, default_control_dir())
    }

    /// Control sockets go to `dir` (created 0700 if missing, and refused if
    /// it is not private to us).
    pub fn with_dir(ssh: SshTransport, dir: PathBuf) -> MultiplexedSsh {
        let dir = private_dir(&dir).map(|()| dir);
        MultiplexedSsh::with_dir_result(ssh, dir)
    }

    fn with_dir_result(ssh: SshTransport, dir: Result<PathBuf, MuxUnavailable>) -> MultiplexedSsh {
        MultiplexedSsh {
            ssh,
            dir,
            master: Mutex::new(None),
            in_process: AtomicU64::new(0),
            by_client: AtomicU64::new(0),
        }
    }

    pub fn ssh(&self) -> &SshTransport {
        &self.ssh
    }

    /// How many runs went in-process and how many through the `ssh` client.
    pub fn carried(&self) -> Carried {
        Carried {
            in_process: self.in_process.load(Ordering::Relaxed),
            by_client: self.by_client.load(Ordering::Relaxed),
        }
    }

    /// Why there is no multiplexing, if there is none.
    pub fn unavailable(&self) -> Option<MuxUnavailable> {
        self.control_path().err()
    }

    /// Whether a master's control socket for this configuration exists
    /// (an MCP server of this user has one up); `None` without multiplexing.
    pub fn master_socket_present(&self) -> Option<bool> {
        self.control_path().ok().map(|path| is_socket(&path))
    }

    /// The control socket the next check would use.
    pub fn control_path(&self) -> Result<PathBuf, MuxUnavailable> {
        self.keyed_path().map(|(path, _)| path)
    }

    /// The control socket for the current configuration, and its key.
    fn keyed_path(&self) -> Result<(PathBuf, String), MuxUnavailable> {
        let dir = self.dir.clone()?;
        // Checked on every use: the directory could have been replaced since.
        private_dir(&dir)?;
        let key = self.key();
        let path = dir.join(&key[..20]);
        if path.as_os_str().len() > SOCKET_PATH_MAX {
            return Err(MuxUnavailable::PathTooLong(path.display().to_string()));
        }
        Ok((path, key))
    }

    /// Everything that decides where and how the master connects. The config
    /// file is read each time: an edit means a new master.
    fn key(&self) -> String {
        let mut hash = Sha256::new();
        hash.update(b"volce-lab ssh master v1\0");
        hash.update(nix::unistd::geteuid().as_raw().to_le_bytes());
        hash.update(self.ssh.alias.as_bytes());
        hash.update(b"\0");
        match &self.ssh.config_file {
            Some(file) => {
                hash.update(file.as_os_str().as_encoded_bytes());
                hash.update(b"\0");
                match fs::read(file) {
                    Ok(bytes) => hash.update(&bytes),
                    // An unreadable file makes ssh itself fail; keep it apart.
                    Err(_) => hash.update(b"\0unreadable\0"),
                }
            }
            None => hash.update(b"\0no config file\0"),
        }
        hash.update(self.ssh.connect_timeout.as_millis().to_le_bytes());
        crate::text::hex(&hash.finalize())
    }

    /// The master to use now; tells an outdated one to exit first.
    fn current(&self, path: PathBuf, key: String) -> PathBuf {
        let mut master = self.master.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match master.take() {
            Some(old) if old.key == key && old.path == path && old.since.elapsed() < MASTER_MAX_AGE => {
                *master = Some(old);
            }
            Some(old) => {
                exit_master(&self.ssh.alias, &old.path);
                *master = Some(Master { path, key, since: Instant::now() });
            }
            None => *master = Some(Master { path, key, since: Instant::now() }),
        }
        master.as_ref().map(|m| m.path.clone()).expect("just set")
    }
}

impl MultiplexedSsh {
    /// `specs` (the plain transport's processes) over the current master,
    /// or, when there is no multiplexing, with multiplexing switched off.
    fn over_master(&self, mut specs: Vec<ProcessSpec>) -> Vec<ProcessSpec> {
        let options = match self.keyed_path() {
            Ok((path, key)) => {
                let mut control_path = OsString::from("ControlPath=");
                control_path.push(self.current(path, key).as_os_str());
                vec![
                    "-o".into(),
                    "ControlMaster=auto".into(),
                    "-o".into(),
                    control_path,
                    "-o".into(),
                    format!("ControlPersist={CONTROL_PERSIST_SECS}").into(),
                ]
            }
            // Not the plain argv: ssh would still honour a ControlPath of the
            // user's ssh_config, and a socket another local user planted
            // there would carry our session (issue 38). Command-line options
            // win over the file: no master, no socket of anyone's.
            Err(_) => NO_MULTIPLEXING.iter().map(OsString::from).collect(),
        };
        for spec in &mut specs {
            spec.args = with_options(&spec.args, &options);
        }
        specs
    }
}

impl CommandCarrier for MultiplexedSsh {
    fn specs(&self, command: RemoteCommand, stdin: Option<&[u8]>, limits: RunLimits) -> Vec<ProcessSpec> {
        self.over_master(self.ssh.specs(command, stdin, limits))
    }

    fn gated(&self, line: &str, stdin: Option<&[u8]>, limits: RunLimits) -> Option<Vec<ProcessSpec>> {
        self.ssh.gated(line, stdin, limits).map(|specs| self.over_master(specs))
    }

    fn run<'a>(&'a self, spec: &'a ProcessSpec) -> RunFuture<'a> {
        Box::pin(async move {
            let started = Instant::now();
            let mut client = std::borrow::Cow::Borrowed(spec);
            if let Some((socket, command)) = self.session_of(spec) {
                match mux_client::run(&socket, &command, spec).await {
                    Attempt::Ran(outcome, tail) => {
                        self.in_process.fetch_add(1, Ordering::Relaxed);
                        return (outcome, tail);
                    }
                    // Nothing ran: the client runs it, within what is left.
                    Attempt::Declined(_) => {
                        client.to_mut().timeout = spec.timeout.saturating_sub(started.elapsed());
                    }
                }
            }
            self.by_client.fetch_add(1, Ordering::Relaxed);
            exec::run_with_stderr_tail(&client).await
        })
    }

    fn reset(&self) {
        let old = self.master.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        if let Some(old) = old {
            exit_master(&self.ssh.alias, &old.path);
        }
    }

    fn kind(&self) -> &'static str {
        "ssh"
    }
}

impl MultiplexedSsh {
    /// The control socket and remote command of `spec` when it is one of
    /// ours over a master that may be spoken to in-process: our ssh argv
    /// (`--`, the alias, one command), its `ControlPath` a socket of ours
    /// directly in the control directory, which passes its checks again.
    fn session_of(&self, spec: &ProcessSpec) -> Option<(PathBuf, String)> {
        let dir = self.dir.as_ref().ok()?;
        if spec.program != Path::new(SSH_PROGRAM) || private_dir(dir).is_err() {
            return None;
        }
        let end = spec.args.iter().position(|a| a == "--")?;
        let [alias, command] = &spec.args[end + 1..] else { return None };
        if *alias != *self.ssh.alias {
            return None;
        }
        let socket = spec.args[..end].iter().find_map(|a| {
            let path = a.as_encoded_bytes().strip_prefix(b"ControlPath=")?;
            Some(PathBuf::from(std::ffi::OsStr::from_bytes(path)))
        })?;
        let meta = fs::symlink_metadata(&socket).ok()?;
        let ours = meta.file_type().is_socket() && meta.uid() == nix::unistd::geteuid().as_raw();
        if !ours || socket.parent() != Some(dir.as_path()) {
            return None;
        }
        Some((socket, command.to_str()?.to_owned()))
    }
}

/// `args` with `options` inserted just before the `--` that ends ssh's
/// options (command-line options win over the config file).
fn with_options(args: &[OsString], options: &[OsString]) -> Vec<OsString> {
    let at = args.iter().position(|a| a == "--").unwrap_or(0);
    let mut out = Vec::with_capacity(args.len() + options.len());
    out.extend_from_slice(&args[..at]);
    out.extend_from_slice(options);
    out.extend_from_slice(&args[at..]);
    out
}

/// The argv that tells the master on `path` to exit. `-F /dev/null`: no
/// configuration file can change what this does.
pub fn exit_argv(alias: &str, path: &Path) -> Vec<OsString> {
    let mut control_path = OsString::from("ControlPath=");
    control_path.push(path.as_os_str());
    vec![
        "-F".into(),
        "/dev/null".into(),
        "-o".into(),
        control_path,
        "-O".into(),
        "exit".into(),
        "--".into(),
        alias.into(),
    ]
}

/// Tells the master on `path` to exit and removes its socket. Blocks for at
/// most [`EXIT_TIMEOUT`]; runs on a thread of its own so it works from inside
/// an async runtime too (the runner builds a private one).
fn exit_master(alias: &str, path: &Path) {
    if !is_socket(path) {
        return;
    }
    let mut spec = ProcessSpec::new(SSH_PROGRAM, exit_argv(alias, path));
    spec.timeout = EXIT_TIMEOUT;
    std::thread::scope(|scope| {
        let _ = scope.spawn(|| exec::run_blocking(&spec)).join();
    });
    // A master that did not answer can no longer be reached by anyone.
    if is_socket(path) {
        let _ = fs::remove_file(path);
    }
}

fn is_socket(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// `$XDG_RUNTIME_DIR/volce-lab-ssh` when the runtime directory is ours,
/// else `~/.cache/volce-lab/ssh`.
fn default_control_dir() -> Result<PathBuf, MuxUnavailable> {
    let uid = nix::unistd::geteuid().as_raw();
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        let ours = fs::symlink_metadata(&runtime)
            .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o077 == 0);
        if runtime.is_absolute() && ours {
            let dir = runtime.join("volce-lab-ssh");
            if private_dir(&dir).is_ok() {
                return Ok(dir);
            }
        }
    }
    let home = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten()
        .map(|user| user.dir)
        .filter(|home| home.is_absolute())
        .ok_or_else(|| MuxUnavailable::NoDirectory("no home directory in the password database".into()))?;
    let dir = home.join(".cache/volce-lab/ssh");
    private_dir(&dir)?;
    Ok(dir)
}

/// Makes sure `dir` exists and only we can use it: created 0700 when
/// missing; an existing one must be a real directory (not a symlink), owned
/// by us, mode 0700 or stricter, in a parent owned by us or root that no one
/// else can write. Anything else is refused, never repaired.
pub fn private_dir(dir: &Path) -> Result<(), MuxUnavailable> {
    let refuse = |why: &str| MuxUnavailable::NoDirectory(format!("{}: {why}", dir.display()));
    if !dir.is_absolute() {
        return Err(refuse("not an absolute path"));
    }
    let uid = nix::unistd::geteuid().as_raw();
    if fs::symlink_metadata(dir).is_err() {
        if let Some(parent) = dir.parent() {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|e| refuse(&format!("cannot create its parent ({e})")))?;
        }
        match DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(refuse(&format!("cannot create it ({e})"))),
        }
    }
    let meta = fs::symlink_metadata(dir).map_err(|e| refuse(&format!("cannot read it ({e})")))?;
    if !meta.file_type().is_dir() {
        return Err(refuse("not a directory (or a symlink)"));
    }
    if meta.uid() != uid {
        return Err(refuse("owned by another user"));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(refuse(&format!("mode {:o} lets others in; it must be 0700", meta.mode() & 0o777)));
    }
    let parent = dir.parent().ok_or_else(|| refuse("has no parent"))?;
    let parent_meta = fs::metadata(parent).map_err(|e| refuse(&format!("cannot read its parent ({e})")))?;
    if !(parent_meta.uid() == uid || parent_meta.uid() == 0) || parent_meta.mode() & 0o022 != 0 {
        return Err(refuse("its parent can be written by others, who could replace it"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
