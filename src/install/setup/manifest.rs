//! What setup made, recorded so that `setup --undo` removes exactly that:
//! the [`Manifest`] under the state directory, the files setup writes
//! through it (each with the sha256 of what it wrote, the sudoers rule only
//! once `visudo -cf` accepted it), and [`undo`]. Runs as root inside
//! `volce-lab-host setup`.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::{STATE_DIR, SUDOERS, SUDOERS_CANDIDATE, SetupError, run, say, step_failed};
use crate::host::HostPaths;

fn manifest_path() -> PathBuf {
    HostPaths::fixed().setup_manifest()
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
    /// The account whose key and sudoers rule setup wrote: the one it
    /// bound to the ssh gate (a later setup for another is refused).
    #[serde(default)]
    pub agent: Option<String>,
    /// An existing account setup changed (`--adopt`), as it was before.
    #[serde(default)]
    pub adopted: Option<super::adopt::Adopted>,
}

impl Manifest {
    /// The account setup bound to the gate: as recorded, or, for a
    /// manifest from before that was recorded, the one its unedited
    /// sudoers rule names.
    pub fn bound_agent(&self) -> Option<String> {
        self.agent.clone().or_else(|| {
            let bytes = fs::read(SUDOERS).ok()?;
            let ours = self.files.iter().any(|f| f.path == Path::new(SUDOERS) && f.sha256 == sha256(&bytes));
            let text = String::from_utf8(bytes).ok().filter(|_| ours)?;
            let user = text.split_whitespace().next()?.to_owned();
            (text.trim() == crate::install::sudoers_rule(&user)).then_some(user)
        })
    }
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct WrittenFile {
    pub path: PathBuf,
    pub sha256: String,
}

pub(super) fn sha256(bytes: &[u8]) -> String {
    crate::text::hex(&Sha256::digest(bytes))
}

pub(super) fn load_manifest() -> Manifest {
    fs::read(manifest_path()).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()).unwrap_or_default()
}

pub(super) fn save_manifest(manifest: &Manifest) -> Result<(), SetupError> {
    let json = serde_json::to_vec_pretty(manifest).map_err(|e| step_failed("manifest", e))?;
    write_file(&manifest_path(), &json, 0o600).map_err(|e| step_failed("manifest", e))
}

/// Writes `bytes` to `path` (mode `mode`, owner root) through a temporary
/// file and a rename, so a reader sees the old file or the new one. Also
/// `catalog pin`'s writer of the policy (`crate::install::catalog`, which
/// holds the policy's lock around it).
///
/// The temporary file is new for each call (`create_new`, a name of the
/// process id and a counter), never one fixed name: two writers sharing
/// one would remove, truncate or rename each other's half-written file.
/// Its name starts with a dot and holds dots, so sudo's `includedir`
/// ignores it beside a sudoers rule.
pub(crate) fn write_file(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (candidate, mut file) = loop {
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let candidate = path.with_file_name(format!(".{name}.{}.{n}.volce-lab-tmp", std::process::id()));
        match fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(&candidate) {
            Ok(file) => break (candidate, file),
            // Left by a process of the same id that died mid-write: next number.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    };
    let written = (|| {
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::set_permissions(&candidate, fs::Permissions::from_mode(mode))?;
        fs::rename(&candidate, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&candidate);
    }
    written
}

/// Writes `content` at `path` unless it is already there; refuses to
/// replace a file setup did not write unless `replace`.
pub(super) fn place_file(
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

pub(super) fn place_sudoers(manifest: &mut Manifest, rule: &[u8], replace: bool) -> Result<(), SetupError> {
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
    if let Some(adopted) = &manifest.adopted {
        super::adopt::restore(adopted)?;
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
