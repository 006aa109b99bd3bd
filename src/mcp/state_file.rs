//! The workstation's own state files beside the audit log
//! (`$XDG_STATE_HOME/volce-lab/`): a private directory, and files written
//! whole, 0600, never through a symlink. Used by the witness
//! (`super::witness`) and the rollouts (`super::rollout`). Runs
//! unprivileged.

use std::fs::{DirBuilder, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::Path;

/// `dir` made 0700 when missing (its parent as the process may).
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    if let Some(base) = dir.parent() {
        std::fs::create_dir_all(base)?;
    }
    match DirBuilder::new().mode(0o700).create(dir) {
        Err(error) if error.kind() != std::io::ErrorKind::AlreadyExists => Err(error),
        _ => Ok(()),
    }
}

/// Opens `path` for writing as a new 0600 file: fails when it exists.
fn create_new(path: &Path) -> std::io::Result<std::fs::File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_CLOEXEC.bits())
        .open(path)
}

/// `bytes` in a fresh, synced 0600 file beside `path`.
fn temporary(path: &Path, bytes: &[u8]) -> std::io::Result<std::path::PathBuf> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    let mut file = create_new(&temporary)?;
    file.write_all(bytes).and_then(|()| file.sync_all())?;
    Ok(temporary)
}

/// Writes `bytes` as the new file `path`, whole or not at all (a hard link
/// of a finished file: a crash never leaves half of it under its name);
/// `AlreadyExists` when it is there: what is written once is never replaced.
pub fn write_once(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temporary = temporary(path, bytes)?;
    let linked = std::fs::hard_link(&temporary, path);
    let _ = std::fs::remove_file(&temporary);
    linked
}

/// Writes `bytes` to a fresh file beside `path` and renames it over
/// `path`: a reader sees the old file or the new, never half.
pub fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temporary = temporary(path, bytes)?;
    std::fs::rename(&temporary, path)
}
