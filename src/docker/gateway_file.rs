//! The gateway's nginx.conf on disk: created once by a deploy, rewritten
//! in place (same inode: the gateway's bind mount follows the inode) by
//! `update_nginx`, with a private backup beside it. File handling only, no
//! docker; runs as root in the host helper, under the state directory.
//!
//! Security invariants enforced here: the app directory is a real
//! directory owned by us that nobody else can write; nginx.conf is never
//! followed through a symlink (O_NOFOLLOW), must be a regular file with one
//! link, is read back with a size bound, and a new deploy never overwrites
//! an existing one (it is an earlier deploy's evidence, or someone else's).

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use nix::fcntl::OFlag;

use super::EngineError;

/// The largest nginx.conf we read back from disk.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Creates the app directory (root-owned, 0755) if needed and creates
/// nginx.conf (0644: uid 101 in the gateway reads it through the mount).
/// An existing directory must be a real directory of ours that nobody else
/// can write; the file is never followed through a symlink.
pub(super) fn write_new_config(app_dir: &Path, contents: &str) -> Result<PathBuf, EngineError> {
    match std::fs::symlink_metadata(app_dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .mode(0o755)
                .create(app_dir)
                .map_err(|_| EngineError::Host { step: "create the app directory" })?;
            std::fs::set_permissions(app_dir, std::fs::Permissions::from_mode(0o755))
                .map_err(|_| EngineError::Host { step: "set the app directory mode" })?;
        }
        Err(_) => return Err(EngineError::Host { step: "inspect the app directory" }),
        Ok(_) => {}
    }
    check_app_dir(app_dir)?;
    let path = app_dir.join("nginx.conf");
    // A new file only: an existing one is an earlier deploy's evidence (or
    // someone else's file), never ours to overwrite.
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(&path)
        .map_err(|_| EngineError::Host { step: "create nginx.conf (it must not exist yet)" })?;
    let meta = file.metadata().map_err(|_| EngineError::Host { step: "stat nginx.conf" })?;
    if !meta.is_file() {
        return Err(EngineError::Host { step: "nginx.conf is not a regular file" });
    }
    file.set_permissions(std::fs::Permissions::from_mode(0o644))
        .and_then(|()| file.write_all(contents.as_bytes()))
        .and_then(|()| file.sync_all())
        .map_err(|_| EngineError::Host { step: "write nginx.conf" })?;
    Ok(path)
}

/// Undoes [`write_new_config`] for a deploy that is being rolled back:
/// removes the nginx.conf it created and the accessories' env files
/// (`env_files`, by name), then the directory, which must then be empty
/// (`rmdir`: anything else in it stays, and the rollback is not called
/// verified). Returns whether the directory is gone.
pub(super) fn remove_new_config(app_dir: &Path, env_files: &[PathBuf]) -> bool {
    if check_app_dir(app_dir).is_err() {
        return false;
    }
    let ours = std::iter::once(app_dir.join("nginx.conf")).chain(env_files.iter().cloned());
    for path in ours {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => return false,
        }
    }
    std::fs::remove_dir(app_dir).is_ok()
}

/// remove_app: removes the app directory and what volce-lab wrote into it
/// (nginx.conf, its `nginx.conf.<stamp>.bak` backups and the accessories'
/// env files, regular files only). Anything else in it refuses the removal before a file goes, so
/// nothing volce-lab did not write is ever deleted. A missing directory is
/// already removed.
pub(super) fn remove_app_dir(app_dir: &Path) -> Result<(), EngineError> {
    match std::fs::symlink_metadata(app_dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(_) => return Err(EngineError::Host { step: "inspect the app directory" }),
        Ok(_) => check_app_dir(app_dir)?,
    }
    let unexpected = EngineError::Host { step: "the app directory holds files volce-lab did not write" };
    let mut ours = Vec::new();
    for entry in
        std::fs::read_dir(app_dir).map_err(|_| EngineError::Host { step: "list the app directory" })?
    {
        let entry = entry.map_err(|_| EngineError::Host { step: "list the app directory" })?;
        let name = entry.file_name();
        let name = name.to_str().ok_or(unexpected.clone())?;
        let written =
            name == "nginx.conf" || backup_stamp(name).is_some() || crate::vocab::is_accessory_env_file(name);
        let regular = entry.file_type().is_ok_and(|t| t.is_file());
        if !(regular && written) {
            return Err(unexpected);
        }
        ours.push(entry.path());
    }
    for path in ours {
        std::fs::remove_file(path)
            .map_err(|_| EngineError::Host { step: "remove a file of the app directory" })?;
    }
    std::fs::remove_dir(app_dir).map_err(|_| EngineError::Host { step: "remove the app directory" })
}

fn check_app_dir(app_dir: &Path) -> Result<(), EngineError> {
    let meta = std::fs::symlink_metadata(app_dir)
        .map_err(|_| EngineError::Host { step: "inspect the app directory" })?;
    let ours = meta.uid() == nix::unistd::geteuid().as_raw();
    if !meta.is_dir() || !ours || meta.mode() & 0o022 != 0 {
        return Err(EngineError::Host { step: "the app directory is not a private directory of ours" });
    }
    Ok(())
}

/// Opens the managed nginx.conf for update: no symlink (O_NOFOLLOW), a
/// regular file, in a directory of ours.
pub(super) fn open_managed_config(app_dir: &Path) -> Result<File, EngineError> {
    check_app_dir(app_dir).map_err(|_| EngineError::ManagedFileChanged)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(app_dir.join("nginx.conf"))
        .map_err(|_| EngineError::ManagedFileChanged)?;
    let meta = file.metadata().map_err(|_| EngineError::ManagedFileChanged)?;
    // A second hard link would make us rewrite a file somewhere else too.
    if !meta.is_file() || meta.nlink() != 1 {
        return Err(EngineError::ManagedFileChanged);
    }
    Ok(file)
}

pub(super) fn read_bounded(file: &mut File) -> Result<Vec<u8>, EngineError> {
    let mut bytes = Vec::new();
    std::io::Read::by_ref(file)
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| EngineError::Host { step: "read nginx.conf" })?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(EngineError::ManagedFileChanged);
    }
    Ok(bytes)
}

/// How many `nginx.conf.<stamp>.bak` backups an app directory keeps: the
/// newest ones; older ones are removed after each new backup, so a loop of
/// nginx_config plans cannot fill the state directory's disk.
pub const KEEP_BACKUPS: usize = 3;

/// The stamp of a backup's file name (`nginx.conf.<digits>.bak`), if it is one.
fn backup_stamp(name: &str) -> Option<u128> {
    let stamp = name.strip_prefix("nginx.conf.")?.strip_suffix(".bak")?;
    if stamp.is_empty() || !stamp.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stamp.parse().ok()
}

/// Removes all but the newest [`KEEP_BACKUPS`] backups (regular files with
/// a backup's name only; nothing else in the directory is looked at).
/// Best effort: a backup that cannot be removed stays, and the next
/// backup tries again; the configuration change does not depend on it.
pub(super) fn prune_backups(app_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(app_dir) else { return };
    let mut backups: Vec<(u128, std::path::PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|entry| Some((backup_stamp(entry.file_name().to_str()?)?, entry.path())))
        .collect();
    backups.sort();
    let excess = backups.len().saturating_sub(KEEP_BACKUPS);
    for (_, path) in backups.into_iter().take(excess) {
        let _ = std::fs::remove_file(path);
    }
}

/// A private copy beside the file, never overwriting an earlier one; then
/// only the newest [`KEEP_BACKUPS`] are kept.
pub(super) fn backup(app_dir: &Path, old_config: &str) -> Result<(), EngineError> {
    let stamp = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(app_dir.join(format!("nginx.conf.{stamp}.bak")))
        .map_err(|_| EngineError::Host { step: "create the nginx.conf backup" })?;
    file.write_all(old_config.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|_| EngineError::Host { step: "write the nginx.conf backup" })?;
    prune_backups(app_dir);
    Ok(())
}

pub(super) fn rewrite(file: &mut File, contents: &str) -> Result<(), EngineError> {
    file.set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)).map(drop))
        .and_then(|()| file.write_all(contents.as_bytes()))
        .and_then(|()| file.sync_all())
        .map_err(|_| EngineError::Host { step: "rewrite nginx.conf in place" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_app_keeps_only_its_newest_three_backups_and_nothing_else_is_touched() {
        let dir = tempfile::tempdir().unwrap();
        let app = dir.path();
        for stamp in [5u128, 100, 20, 7, 1000] {
            std::fs::write(app.join(format!("nginx.conf.{stamp}.bak")), "old").unwrap();
        }
        std::fs::write(app.join("nginx.conf"), "current").unwrap();
        std::fs::write(app.join("nginx.conf.x.bak"), "not ours by name").unwrap();
        std::fs::create_dir(app.join("nginx.conf.1.bak")).ok();
        prune_backups(app);
        let mut names: Vec<String> =
            std::fs::read_dir(app).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "nginx.conf",
                "nginx.conf.1.bak",
                "nginx.conf.100.bak",
                "nginx.conf.1000.bak",
                "nginx.conf.20.bak",
                "nginx.conf.x.bak"
            ]
        );
        // A fourth backup through `backup` drops the oldest of the three.
        backup(app, "older").unwrap();
        let kept = std::fs::read_dir(app)
            .unwrap()
            .filter_map(|e| backup_stamp(e.unwrap().file_name().to_str()?))
            .count();
        // The directory named like a backup has stamp 1 but is not a file.
        assert_eq!(kept, KEEP_BACKUPS + 1);
        assert!(!app.join("nginx.conf.20.bak").exists());
    }
}
