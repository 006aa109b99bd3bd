//! `volce-lab-host setup --agent NAME --operator NAME --key FILE` and
//! `setup --undo`: the steps of HOST-SETUP.md after the package, done
//! idempotently and shown one line each. Runs as root on the server.
//!
//! What it makes, in order: the agent's account (shell `/bin/sh`, key login
//! only), its home and `~/.ssh` owned by root so the account can neither
//! edit its key line nor plant a login script, the key bound to the ssh
//! gate (`restrict,command="... ssh-gate"`), the one sudoers rule (written
//! beside the drop-in directory's real files under a name sudo ignores,
//! checked with `visudo -cf`, then renamed into place), a policy skeleton
//! when there is none, the state directory and database; then it runs the
//! smoke request as the agent and `doctor`.
//!
//! Invariants:
//! - it never replaces a file it did not write unless `--replace` is given,
//!   and never touches an existing policy at all;
//! - everything it creates is recorded in a manifest under the state
//!   directory, with the sha256 of each file it wrote; `--undo` removes
//!   exactly those, and only files whose content is still what it wrote
//!   (an operator's edit is kept, and said so);
//! - no shell: each program is a fixed absolute path with argv built from
//!   validated names.
//!
//! Somewhat over 450 lines on purpose: the steps read top to bottom as one
//! pipeline, and splitting them would scatter it; the tests are in
//! `setup/tests.rs`.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::exec::{self, ProcessSpec};
use crate::host::HostPaths;

const SUDOERS: &str = HostPaths::SUDOERS;
const SUDOERS_CANDIDATE: &str = HostPaths::SUDOERS_CANDIDATE;
const POLICY: &str = HostPaths::POLICY;
const STATE_DIR: &str = HostPaths::STATE_DIR;

fn manifest_path() -> PathBuf {
    HostPaths::fixed().setup_manifest()
}

/// Why setup stopped. Each message names what to do next.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SetupError {
    #[error("setup must run as root (sudo volce-lab-host setup ...)")]
    NotRoot,
    #[error("{0}")]
    BadArgument(String),
    #[error(
        "{path} exists and was not written by setup; review it, then run again with --replace to overwrite it"
    )]
    WouldReplace { path: String },
    #[error("{step} failed: {why}")]
    Step { step: String, why: String },
}

fn step_failed(step: &str, why: impl std::fmt::Display) -> SetupError {
    SetupError::Step { step: step.to_owned(), why: why.to_string() }
}

/// A Unix account name as setup accepts it: what Debian's `useradd`
/// accepts by default, minus `$`, and never root.
pub fn check_account(role: &str, name: &str) -> Result<(), SetupError> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !first_ok || !rest_ok || name.len() > 32 {
        return Err(SetupError::BadArgument(format!(
            "--{role} {name:?} is not an account name (a lowercase letter or _, then up to 31 of a-z 0-9 _ -)"
        )));
    }
    if name == "root" {
        return Err(SetupError::BadArgument(format!("--{role} cannot be root")));
    }
    Ok(())
}

/// The key types OpenSSH's `authorized_keys` takes without options.
const KEY_TYPES: &[&str] = &[
    "ssh-ed25519",
    "sk-ssh-ed25519@openssh.com",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ecdsa-sha2-nistp256@openssh.com",
    "ssh-rsa",
];

/// One public key, as `ssh-keygen` writes it (`TYPE BASE64 [comment]`).
/// Options in front (`command=...`), a second line or anything but base64
/// in the key are refused: the line setup writes carries only its own
/// options, and the comment is replaced.
pub fn parse_public_key(text: &str) -> Result<(String, String), SetupError> {
    let bad =
        |why: &str| SetupError::BadArgument(format!("--key: {why} (give the .pub file ssh-keygen wrote)"));
    let mut lines = text.lines().filter(|line| !line.trim().is_empty());
    let (Some(line), None) = (lines.next(), lines.next()) else {
        return Err(bad("the file must hold exactly one public key line"));
    };
    let mut fields = line.split_ascii_whitespace();
    let kind = fields.next().unwrap_or_default();
    if !KEY_TYPES.contains(&kind) {
        return Err(bad(
            "the line does not start with a key type such as ssh-ed25519 (options are not accepted)",
        ));
    }
    let blob = fields.next().unwrap_or_default();
    let base64 = |c: char| c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '=';
    if blob.len() < 16 || blob.len() > 16 * 1024 || !blob.chars().all(base64) {
        return Err(bad("the key is not base64"));
    }
    Ok((kind.to_owned(), blob.to_owned()))
}

/// The agent's one `authorized_keys` line: the gate's options
/// ([`super::gate_key_options`]), the key, a fixed comment.
pub fn authorized_keys_line(kind: &str, blob: &str) -> String {
    format!("{} {kind} {blob} volce-lab-agent\n", super::gate_key_options())
}

/// What `setup` made, so that `--undo` removes exactly that.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    /// The agent's account, when setup created it.
    pub created_account: Option<String>,
    /// Its home, which undo removes with it (root owns it after setup, so
    /// `userdel --remove` would leave it behind).
    pub created_home: Option<PathBuf>,
    /// Files setup wrote, with the sha256 of what it wrote.
    pub files: Vec<WrittenFile>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct WrittenFile {
    pub path: PathBuf,
    pub sha256: String,
}

fn sha256(bytes: &[u8]) -> String {
    crate::text::hex(&Sha256::digest(bytes))
}

fn load_manifest() -> Manifest {
    fs::read(manifest_path()).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()).unwrap_or_default()
}

fn save_manifest(manifest: &Manifest) -> Result<(), SetupError> {
    let json = serde_json::to_vec_pretty(manifest).map_err(|e| step_failed("manifest", e))?;
    write_file(&manifest_path(), &json, 0o600).map_err(|e| step_failed("manifest", e))
}

/// Writes `bytes` to `path` (mode `mode`, owner root) through a temporary
/// file and a rename, so a reader sees the old file or the new one.
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let candidate = path.with_extension("volce-lab-setup");
    let _ = fs::remove_file(&candidate);
    let mut file = fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(&candidate)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::set_permissions(&candidate, fs::Permissions::from_mode(mode))?;
    fs::rename(&candidate, path)
}

/// Runs one fixed program; its stderr is not shown (only whether it worked).
fn run(step: &str, program: &str, args: &[&str], stdin: Option<&[u8]>) -> Result<Vec<u8>, SetupError> {
    let mut spec = ProcessSpec::new(program, args.iter().copied());
    spec.stdin = stdin.map(<[u8]>::to_vec);
    spec.timeout = std::time::Duration::from_secs(60);
    spec.stdout_limit = 256 * 1024;
    let outcome = exec::run_blocking(&spec);
    let execution = &outcome.execution;
    if execution.execution_status != exec::ExecutionStatus::Ok {
        return Err(step_failed(step, format!("{program} {args:?} ended {:?}", execution.execution_status)));
    }
    Ok(outcome.stdout)
}

fn say(done: bool, step: &str, detail: impl std::fmt::Display) {
    println!("{} {step}: {detail}", if done { "done" } else { "ok  " });
}

/// Writes `content` at `path` unless it is already there; refuses to
/// replace a file setup did not write unless `replace`.
fn place_file(
    manifest: &mut Manifest,
    step: &str,
    path: &Path,
    content: &[u8],
    mode: u32,
    replace: bool,
) -> Result<(), SetupError> {
    match fs::read(path) {
        Ok(existing) if existing == content => {
            say(false, step, format!("{} already holds it", path.display()));
            return Ok(());
        }
        Ok(existing) => {
            let ours = manifest.files.iter().any(|f| f.path == path && f.sha256 == sha256(&existing));
            if !ours && !replace {
                return Err(SetupError::WouldReplace { path: path.display().to_string() });
            }
        }
        Err(_) => {}
    }
    write_file(path, content, mode).map_err(|e| step_failed(step, e))?;
    manifest.files.retain(|f| f.path != path);
    manifest.files.push(WrittenFile { path: path.to_owned(), sha256: sha256(content) });
    say(true, step, format!("wrote {}", path.display()));
    Ok(())
}

/// The arguments of `setup`.
#[derive(Debug, Clone)]
pub struct Request {
    pub agent: String,
    pub operator: String,
    pub key_file: PathBuf,
    pub replace: bool,
}

/// `setup`: each step in order; stops at the first that fails, with what
/// was done so far recorded in the manifest.
pub fn setup(request: &Request) -> Result<(), SetupError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(SetupError::NotRoot);
    }
    check_account("agent", &request.agent)?;
    check_account("operator", &request.operator)?;
    if request.agent == request.operator {
        return Err(SetupError::BadArgument("--agent and --operator must be different accounts".into()));
    }
    let key_text = fs::read_to_string(&request.key_file).map_err(|e| {
        SetupError::BadArgument(format!(
            "--key {}: cannot read it ({})",
            request.key_file.display(),
            e.kind()
        ))
    })?;
    let (kind, blob) = parse_public_key(&key_text)?;
    if nix::unistd::User::from_name(&request.operator).ok().flatten().is_none() {
        return Err(SetupError::BadArgument(format!(
            "--operator {}: no such account; create the person's account first (adduser {})",
            request.operator, request.operator
        )));
    }

    fs::create_dir_all(STATE_DIR).map_err(|e| step_failed("state directory", e))?;
    fs::set_permissions(STATE_DIR, fs::Permissions::from_mode(0o700))
        .map_err(|e| step_failed("state directory", e))?;
    let mut manifest = load_manifest();
    let result = setup_steps(request, &kind, &blob, &mut manifest);
    save_manifest(&manifest)?;
    result
}

fn setup_steps(request: &Request, kind: &str, blob: &str, manifest: &mut Manifest) -> Result<(), SetupError> {
    let agent = request.agent.as_str();

    // 1. The account: key login only, /bin/sh (bash would read ~/.bashrc
    //    for an ssh command), in no privileged group.
    let user = match nix::unistd::User::from_name(agent).ok().flatten() {
        Some(user) => {
            say(false, "agent account", format!("{agent} exists"));
            user
        }
        None => {
            run(
                "agent account",
                "/usr/sbin/useradd",
                &["--create-home", "--shell", "/bin/sh", "--", agent],
                None,
            )?;
            let user = nix::unistd::User::from_name(agent).ok().flatten().ok_or_else(|| {
                step_failed("agent account", "useradd succeeded but the account is not there")
            })?;
            manifest.created_account = Some(agent.to_owned());
            manifest.created_home = Some(user.dir.clone());
            say(true, "agent account", format!("created {agent}"));
            user
        }
    };
    if user.shell != Path::new("/bin/sh") {
        run("agent shell", "/usr/sbin/usermod", &["--shell", "/bin/sh", "--", agent], None)?;
        say(true, "agent shell", format!("{} -> /bin/sh", user.shell.display()));
    } else {
        say(false, "agent shell", "/bin/sh");
    }
    // `*` (not `!`): a locked password makes sshd refuse key logins too.
    run("agent password", "/usr/sbin/usermod", &["-p", "*", "--", agent], None)?;
    let groups = String::from_utf8_lossy(&run("agent groups", "/usr/bin/id", &["-Gn", "--", agent], None)?)
        .into_owned();
    if let Some(bad) = groups.split_whitespace().find(|g| super::PRIVILEGED_GROUPS.contains(g)) {
        return Err(step_failed(
            "agent groups",
            format!(
                "{agent} is in group {bad}, which bypasses every rule; remove it (gpasswd -d {agent} {bad}) and run again"
            ),
        ));
    }

    // 2. Home, dotfiles and ~/.ssh owned by root: out of the account's reach.
    let home = user.dir.clone();
    if !home.is_absolute() || home == Path::new("/") {
        return Err(step_failed(
            "agent home",
            format!("{} is not a home directory setup can protect", home.display()),
        ));
    }
    protect_home(&home)?;

    // 3. The key, bound to the gate.
    let ssh_dir = home.join(".ssh");
    if !ssh_dir.is_dir() {
        fs::create_dir(&ssh_dir).map_err(|e| step_failed("agent ~/.ssh", e))?;
    }
    nix::unistd::chown(&ssh_dir, Some(nix::unistd::Uid::from_raw(0)), Some(nix::unistd::Gid::from_raw(0)))
        .map_err(|e| step_failed("agent ~/.ssh", e))?;
    fs::set_permissions(&ssh_dir, fs::Permissions::from_mode(0o755))
        .map_err(|e| step_failed("agent ~/.ssh", e))?;
    let line = authorized_keys_line(kind, blob);
    place_file(
        manifest,
        "agent key",
        &ssh_dir.join("authorized_keys"),
        line.as_bytes(),
        0o644,
        request.replace,
    )?;

    // 4. The one sudoers rule, in force only once visudo accepted it.
    let rule = format!("{}\n", super::sudoers_rule(agent));
    place_sudoers(manifest, rule.as_bytes(), request.replace)?;

    // 5. A policy skeleton, never over an existing policy.
    if Path::new(POLICY).exists() {
        say(false, "policy", format!("{POLICY} exists (left as it is)"));
    } else {
        let skeleton = policy_skeleton(&request.operator);
        if let Some(etc) = Path::new(POLICY).parent() {
            fs::create_dir_all(etc).map_err(|e| step_failed("policy", e))?;
        }
        place_file(manifest, "policy", Path::new(POLICY), skeleton.as_bytes(), 0o600, false)?;
        println!("     edit {POLICY}: put your reviewed, digest-pinned images in catalog and nginx_image");
    }

    // 6. The database, so doctor has something to check before any rpc.
    let database = HostPaths::fixed().database();
    crate::store::Store::open(&database).map_err(|e| step_failed("database", e))?;
    say(false, "database", format!("{} is at the current schema", database.display()));

    // 7. The smoke request, as the agent, through the exact sudoers rule.
    let reply = run(
        "smoke request",
        "/usr/sbin/runuser",
        &["-u", agent, "--", "/usr/bin/sudo", "-n", HostPaths::HELPER, "rpc"],
        Some(br#"{"operation":"gateway_status"}"#),
    );
    match reply {
        Ok(reply) => {
            say(false, "smoke request", format!("rpc answered: {}", String::from_utf8_lossy(&reply).trim()))
        }
        Err(why) => {
            println!("FAIL smoke request: {why}\n     fix: run `sudo volce-lab-host doctor` for the reason")
        }
    }
    Ok(())
}

/// The home directory and every dotfile in it become root's and lose group
/// and world write; the account keeps read access to what it had.
fn protect_home(home: &Path) -> Result<(), SetupError> {
    let (root, root_group) = (Some(nix::unistd::Uid::from_raw(0)), Some(nix::unistd::Gid::from_raw(0)));
    nix::unistd::chown(home, root, root_group).map_err(|e| step_failed("agent home", e))?;
    let mode = fs::metadata(home).map_err(|e| step_failed("agent home", e))?.mode() & 0o7777;
    fs::set_permissions(home, fs::Permissions::from_mode((mode & !0o022) | 0o755))
        .map_err(|e| step_failed("agent home", e))?;
    for entry in fs::read_dir(home).map_err(|e| step_failed("agent home", e))?.flatten() {
        if !entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let meta = fs::symlink_metadata(&path).map_err(|e| step_failed("agent dotfiles", e))?;
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            &path,
            root,
            root_group,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(|e| step_failed("agent dotfiles", e))?;
        if !meta.file_type().is_symlink() {
            fs::set_permissions(&path, fs::Permissions::from_mode(meta.mode() & 0o7777 & !0o022))
                .map_err(|e| step_failed("agent dotfiles", e))?;
        }
    }
    say(false, "agent home", format!("{} and its dotfiles are root's", home.display()));
    Ok(())
}

fn place_sudoers(manifest: &mut Manifest, rule: &[u8], replace: bool) -> Result<(), SetupError> {
    let path = Path::new(SUDOERS);
    if let Ok(existing) = fs::read(path) {
        if existing == rule {
            say(false, "sudoers rule", format!("{SUDOERS} already holds it"));
            return Ok(());
        }
        let ours = manifest.files.iter().any(|f| f.path == path && f.sha256 == sha256(&existing));
        if !ours && !replace {
            return Err(SetupError::WouldReplace { path: SUDOERS.to_owned() });
        }
    }
    let candidate = Path::new(SUDOERS_CANDIDATE);
    write_file(candidate, rule, 0o440).map_err(|e| step_failed("sudoers rule", e))?;
    if let Err(why) = run("sudoers rule", "/usr/sbin/visudo", &["-cf", SUDOERS_CANDIDATE], None) {
        let _ = fs::remove_file(candidate);
        return Err(why);
    }
    fs::rename(candidate, path).map_err(|e| step_failed("sudoers rule", e))?;
    manifest.files.retain(|f| f.path != path);
    manifest.files.push(WrittenFile { path: path.to_owned(), sha256: sha256(rule) });
    say(true, "sudoers rule", format!("wrote {SUDOERS} (visudo -cf accepted it)"));
    Ok(())
}

/// The annotated example without its comments, with the operator as the
/// one approver. Its catalog pins placeholder digests the parser accepts
/// and no registry serves, so nothing deploys until the operator puts in
/// the images they reviewed (doctor says so: the images are not present).
pub fn policy_skeleton(operator: &str) -> String {
    let example = include_str!("../../policy/policy.example.jsonc");
    let json: String = example
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .map(|line| format!("{line}\n"))
        .collect();
    let mut policy: serde_json::Value = serde_json::from_str(&json).expect("the example policy is JSON");
    policy["approvers"] = serde_json::json!([operator]);
    let mut text = serde_json::to_string_pretty(&policy).expect("a JSON value serializes");
    text.push('\n');
    text
}

/// `setup --undo`: removes what the manifest says setup made, newest
/// first, each file only while it still holds what setup wrote.
pub fn undo() -> Result<(), SetupError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(SetupError::NotRoot);
    }
    let manifest = load_manifest();
    for file in manifest.files.iter().rev() {
        match fs::read(&file.path) {
            Ok(bytes) if sha256(&bytes) == file.sha256 => {
                fs::remove_file(&file.path).map_err(|e| step_failed("undo", e))?;
                say(true, "undo", format!("removed {}", file.path.display()));
            }
            Ok(_) => println!("kept {}: it changed since setup wrote it (yours now)", file.path.display()),
            Err(_) => say(false, "undo", format!("{} is already gone", file.path.display())),
        }
    }
    if let Some(agent) = &manifest.created_account {
        if nix::unistd::User::from_name(agent).ok().flatten().is_some() {
            // userdel refuses while a process runs as the account: most
            // often the session of a workstation's ssh master.
            run("undo", "/usr/sbin/userdel", &["--", agent], None).map_err(|why| {
                step_failed(
                    "undo",
                    format!(
                        "{why}; a process of {agent} is probably still running (pgrep -u {agent} -a: \
                         a workstation's ssh master, which `ssh -O exit` ends, or an rpc); end it and run \
                         setup --undo again, before you remove {STATE_DIR} (its manifest is there)"
                    ),
                )
            })?;
            say(true, "undo", format!("removed the account {agent}"));
        }
        if let Some(home) =
            manifest.created_home.as_ref().filter(|home| home.starts_with("/home/") && home.exists())
        {
            fs::remove_dir_all(home).map_err(|e| step_failed("undo", e))?;
            say(true, "undo", format!("removed {}", home.display()));
        }
    }
    let _ = fs::remove_file(manifest_path());
    println!("setup is undone; the state directory and any policy you edited are kept");
    Ok(())
}

/// `volce-lab-host setup ...` in the shipped binary: the steps, then
/// doctor's report; exit 0 only when both are content.
pub fn cli(request: Option<Request>) -> crate::exit::Exit {
    use crate::exit::Exit;
    let outcome = match &request {
        Some(request) => setup(request),
        None => undo(),
    };
    match outcome {
        Err(SetupError::NotRoot) => {
            eprintln!("volce-lab-host: {}", SetupError::NotRoot);
            Exit::Usage
        }
        Err(error @ SetupError::BadArgument(_)) => {
            eprintln!("volce-lab-host setup: {error}");
            Exit::Usage
        }
        Err(error) => {
            eprintln!("volce-lab-host setup: {error}");
            Exit::Failure
        }
        Ok(()) if request.is_some() => {
            println!("\nvolce-lab-host doctor:");
            super::doctor::cli()
        }
        Ok(()) => Exit::Ok,
    }
}

#[cfg(test)]
mod tests;
