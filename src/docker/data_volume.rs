//! An app's data directory on the host: a fixed-size ext4 image under the
//! state directory's `data/`, loop-mounted (nosuid, nodev, noexec) on the
//! app's mount point there, which the app container bind-mounts. Runs as
//! root in the host helper; the programs are fixed paths with argv from
//! validated values, through `crate::exec` (no shell, no raw stderr).
//!
//! Why these choices (docs/data.md):
//! - the kernel enforces the cap: a write past it fails with ENOSPC inside
//!   the app, and nothing outside the image fills;
//! - the image is allocated in full when it is made (`posix_fallocate`,
//!   and `mkfs.ext4 -E nodiscard` so mkfs does not punch it sparse again):
//!   the capacity check counted exactly what the disk gives up, and an app
//!   that fills its data leaves the host's free space where it was;
//! - the mount point is root's with mode 0: while the image is not mounted
//!   (after a reboot, before a plan mounted it again) an app container that
//!   the engine restarts finds a directory it can neither read nor write,
//!   never an empty one on the host's disk that it would fill instead;
//! - every plan that starts an app container mounts its data first
//!   ([`ensure`]), so a start or restart after a reboot brings the data back
//!   before the app runs;
//! - at boot, before docker.service brings the apps back by their restart
//!   policy, `volce-lab-host data mount` (the package's
//!   `volce-lab-data.service`) mounts every recorded app's kept image
//!   ([`mount_kept`]), which never makes one: new, empty data in place of a
//!   lost image must not look like the app's own;
//! - kept data carries a record of the catalog entry and path it was kept
//!   for ([`bind_kept`], `<app>.entry` beside the image, root's 0600), read
//!   by a deploy's validation ([`kept_for`]) so another entry never gets
//!   it (issue 38); deleting the image deletes its record.
//! - a restore never writes into the app's filesystem: it unpacks into a
//!   second image of the same cap ([`stage`]) that is renamed over the
//!   app's ([`switch_to`]), so the data is the old or the restored one,
//!   whole, whatever stops the helper; a staging image left behind is
//!   removed by the next restore and by [`release`];
//! - a backup freezes the mounted filesystem for its copy ([`freeze`],
//!   [`thaw`]; `backup.rs`); a mount that finds the image mounted already
//!   thaws it, so a backup killed in between never leaves the app's writes
//!   waiting past the next plan that starts it or `data mount`.

use std::fs::OpenOptions;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;
use std::time::Duration;

use nix::fcntl::OFlag;

use super::EngineError;
use crate::exec::{ExecutionStatus, ProcessSpec, minimal_env, run_blocking};
use crate::vocab::{Code, DATA_OWNER, DataUse, KeptFor, Refusal};

const MIB: u64 = 1024 * 1024;
const MKFS: &str = "/usr/sbin/mkfs.ext4";
const MOUNT: &str = "/usr/bin/mount";
const UMOUNT: &str = "/usr/bin/umount";
const FSFREEZE: &str = "/usr/sbin/fsfreeze";
const FREEZE_TIMEOUT: Duration = Duration::from_secs(20);
/// mkfs of a large image writes its inode tables lazily; 60 s is ample.
const MKFS_TIMEOUT: Duration = Duration::from_secs(60);
const MOUNT_TIMEOUT: Duration = Duration::from_secs(20);

/// The size in MiB of the data image kept at `image`, if any. Anything at
/// that path but a root-owned regular file is refused: it is not ours.
pub fn kept_mib(image: &Path) -> Result<Option<u32>, Refusal> {
    kept_mib_of(image, 0)
}

/// [`kept_mib`] for an image that must be owned by `owner` (root in the
/// shipped binary; the operator commands' tests pass their own uid).
pub fn kept_mib_of(image: &Path, owner: u32) -> Result<Option<u32>, Refusal> {
    match std::fs::symlink_metadata(image) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Ok(meta) if meta.is_file() && meta.uid() == owner => {
            Ok(Some((meta.len() / MIB).try_into().unwrap_or(u32::MAX)))
        }
        _ => Err(Refusal::new(
            Code::DataInvalid,
            format!(
                "{} is not a data image volce-lab made (not a root-owned regular file): ask the operator to \
                 move it away, then plan again.",
                image.display()
            ),
        )),
    }
}

/// The longest record of what kept data was made for.
const KEPT_FOR_MAX: u64 = 4096;

/// What the data kept at `image` was made for, from the record beside it;
/// `None` when there is none. Anything but a root-owned regular file that
/// only root may write, holding one [`KeptFor`], is refused: not ours.
pub fn kept_for(image: &Path) -> Result<Option<KeptFor>, Refusal> {
    kept_for_of(image, 0)
}

/// [`kept_for`] for a record that must be owned by `owner` (root in the
/// shipped binary; tests pass their own uid).
pub fn kept_for_of(image: &Path, owner: u32) -> Result<Option<KeptFor>, Refusal> {
    let record = KeptFor::beside(image);
    let invalid = || {
        Refusal::new(
            Code::DataInvalid,
            format!(
                "{} is not a record volce-lab wrote (a root-owned regular file that only root may write, \
                 naming one catalog entry and path): ask the operator to move it away, then plan again.",
                record.display()
            ),
        )
    };
    match std::fs::symlink_metadata(&record) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Ok(meta)
            if meta.is_file()
                && meta.uid() == owner
                && meta.mode() & 0o022 == 0
                && meta.len() <= KEPT_FOR_MAX =>
        {
            let text = std::fs::read_to_string(&record).map_err(|_| invalid())?;
            serde_json::from_str(&text).map(Some).map_err(|_| invalid())
        }
        _ => Err(invalid()),
    }
}

/// Records what the data kept at `image` was made for: written whole to a
/// new file (root's 0600), then renamed over any older record.
pub fn bind_kept(image: &Path, kept: &KeptFor) -> Result<(), EngineError> {
    let step = "record the kept data's catalog entry";
    let record = KeptFor::beside(image);
    let fresh = record.with_extension("entry.new");
    let _ = std::fs::remove_file(&fresh);
    let text = serde_json::to_string(kept).map_err(|_| EngineError::Host { step })?;
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(&fresh)
        .and_then(|mut file| {
            std::io::Write::write_all(&mut file, text.as_bytes())?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&fresh, &record));
    if written.is_err() {
        let _ = std::fs::remove_file(&fresh);
    }
    written.map_err(|_| EngineError::Host { step })
}

/// What [`ensure`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ensured {
    /// The image was made by this call (a failed deploy removes it again).
    Made,
    /// The image was there already (kept data, or the app's own).
    Kept,
}

/// Makes the image if it is missing and mounts it if it is not mounted.
pub fn ensure(data: &DataUse) -> Result<Ensured, EngineError> {
    let dir = data.image.parent().ok_or(EngineError::Host { step: "find the data directory" })?;
    own_dir(dir, 0o700, "create the data directory")?;
    let made = match kept_mib(&data.image) {
        Ok(Some(_)) => Ensured::Kept,
        Ok(None) => {
            // A record left beside an image that is gone speaks of other data.
            let _ = std::fs::remove_file(KeptFor::beside(&data.image));
            make_image(data)?;
            Ensured::Made
        }
        Err(_) => return Err(EngineError::Host { step: "check the data image" }),
    };
    mount_image(&data.image, &data.mount)?;
    Ok(made)
}

/// What [`mount_kept`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mounted {
    /// It mounted the image now.
    Now,
    /// The image was mounted already.
    Already,
}

/// Mounts the image kept at `image` on `mount` if it is not mounted, and
/// never makes one: a missing image is an error (`volce-lab-host data
/// mount` after a reboot reports it; only a plan may make new, empty data).
pub fn mount_kept(image: &Path, mount: &Path) -> Result<Mounted, EngineError> {
    match kept_mib(image) {
        Ok(Some(_)) => {}
        Ok(None) => return Err(EngineError::Host { step: "find the data image" }),
        Err(_) => return Err(EngineError::Host { step: "check the data image" }),
    }
    if mounted(mount)? {
        return Ok(Mounted::Already);
    }
    mount_image(image, mount)?;
    Ok(Mounted::Now)
}

/// Mounts `image` on `mount` unless something is mounted there, then
/// checks that it is.
fn mount_image(image: &Path, mount: &Path) -> Result<(), EngineError> {
    // A mounted image's root is the app's, not root's: look at the mount
    // point itself only while nothing is mounted on it.
    if mounted(mount)? {
        // A backup stopped between its freeze and its thaw (its helper
        // killed) would leave the app's writes waiting for ever: every
        // plan that starts the app, and `data mount`, lifts it.
        let _ = thaw(mount);
    } else {
        own_dir(mount, 0o000, "create the data mount point")?;
        let (image, mount_arg) = (image.display().to_string(), mount.display().to_string());
        let args = ["-t", "ext4", "-o", "loop,nosuid,nodev,noexec", &image, &mount_arg];
        run(MOUNT, &args, MOUNT_TIMEOUT, "mount the data image")?;
        if !mounted(mount)? {
            return Err(EngineError::Host { step: "see the data image mounted" });
        }
    }
    Ok(())
}

/// Freezes the filesystem mounted on `mount` (`fsfreeze --freeze`): writes
/// wait from here until [`thaw`], reads go on. For a backup's consistent copy.
pub fn freeze(mount: &Path) -> Result<(), EngineError> {
    let mount = mount.display().to_string();
    run(FSFREEZE, &["--freeze", &mount], FREEZE_TIMEOUT, "freeze the app's data")
}

/// `fsfreeze --unfreeze`; whether it succeeded (it fails, changing nothing,
/// on a filesystem that is not frozen).
pub fn thaw(mount: &Path) -> bool {
    let mount = mount.display().to_string();
    run(FSFREEZE, &["--unfreeze", &mount], FREEZE_TIMEOUT, "thaw the app's data").is_ok()
}

/// Where a restore unpacks a snapshot before it takes the data's place: a
/// new image of the same cap beside the app's (`<app>.ext4.restore`),
/// mounted on its own mount point (`<app>.restore`). App names have no
/// dot, so neither can be another app's.
pub fn staging_of(data: &DataUse) -> DataUse {
    DataUse {
        path: data.path.clone(),
        image: data.image.with_extension("ext4.restore"),
        mount: data.mount.with_extension("restore"),
        max_mib: data.max_mib,
    }
}

/// A new, empty image for a restore to unpack into, mounted on its own
/// mount point ([`staging_of`]); what an earlier restore left there
/// (killed before its switch) goes first.
pub fn stage(data: &DataUse) -> Result<DataUse, EngineError> {
    discard_staging(data)?;
    let staged = staging_of(data);
    make_image(&staged)?;
    mount_image(&staged.image, &staged.mount)?;
    Ok(staged)
}

/// Removes a restore's staging image and its mount point, if there.
pub fn discard_staging(data: &DataUse) -> Result<(), EngineError> {
    let staged = staging_of(data);
    unmount(&staged.mount)?;
    remove_if_present(std::fs::remove_file(&staged.image), "delete the restore's unpacked image")?;
    remove_if_present(std::fs::remove_dir(&staged.mount), "remove the restore's mount point")
}

/// Puts the unpacked `staged` image in the place of the app's `data`, the
/// app stopped: both unmounted, then the staged image renamed over the
/// app's (one atomic step: before it the app's image holds the old data,
/// after it the restored data, never a mix), then mounted where the app's
/// was. A kill anywhere leaves one of the two whole; an unmounted one is
/// mounted again by the next plan that starts the app, or `data mount`.
/// An error before the rename is [`Switch::Untouched`] (the old data is
/// mounted again), one after it [`Switch::Switched`].
pub fn switch_to(staged: &DataUse, data: &DataUse) -> Result<(), Switch> {
    let untouched = |error| Switch::Untouched(error);
    unmount(&staged.mount).map_err(untouched)?;
    unmount(&data.mount).map_err(untouched)?;
    if std::fs::rename(&staged.image, &data.image).is_err() {
        let renamed = EngineError::Host { step: "put the restored image in place" };
        return Err(Switch::Untouched(mount_image(&data.image, &data.mount).err().unwrap_or(renamed)));
    }
    // The rename is done; this only makes it outlive a power cut sooner
    // (before it is on disk, a crash brings back the old data, whole).
    let dir = data.image.parent().unwrap_or(Path::new("/"));
    let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    let _ = std::fs::remove_dir(&staged.mount);
    mount_image(&data.image, &data.mount).map_err(Switch::Switched)
}

/// How a [`switch_to`] failed.
#[derive(Debug)]
pub enum Switch {
    /// Before the rename: the app's image holds the old data.
    Untouched(EngineError),
    /// After it: the app's image holds the restored data.
    Switched(EngineError),
}

/// Unmounts the data if it is mounted; with `purge`, deletes the image and
/// the mount point too. A restore's staging image is never the app's data
/// and goes either way.
pub fn release(data: &DataUse, purge: bool) -> Result<(), EngineError> {
    discard_staging(data)?;
    unmount(&data.mount)?;
    if purge {
        delete(&data.image, &data.mount)?;
    }
    Ok(())
}

/// Unmounts whatever is mounted on `mount`, if anything is.
pub fn unmount(mount: &Path) -> Result<(), EngineError> {
    if mounted(mount)? {
        let mount = mount.display().to_string();
        run(UMOUNT, &[mount.as_str()], MOUNT_TIMEOUT, "unmount the data image")?;
    }
    Ok(())
}

/// Deletes an unmounted image, the records beside it (and an accessory's
/// credentials) and its (empty) mount point; what is not there is not an
/// error.
pub fn delete(image: &Path, mount: &Path) -> Result<(), EngineError> {
    remove_if_present(std::fs::remove_file(image), "delete the data image")?;
    remove_if_present(std::fs::remove_file(KeptFor::beside(image)), "delete the kept data's record")?;
    let backups = crate::vocab::BackupRecord::beside(image);
    remove_if_present(std::fs::remove_file(backups), "delete the data's backup record")?;
    // An accessory's credential opens only this data: it goes with it.
    let secret = crate::vocab::secret_beside(image);
    remove_if_present(std::fs::remove_file(secret), "delete the accessory's credential")?;
    // So does a rotation's new one, left by a helper stopped mid-rotation.
    let pending = crate::vocab::pending_secret_beside(image);
    remove_if_present(std::fs::remove_file(pending), "delete the accessory's new credential")?;
    remove_if_present(std::fs::remove_dir(mount), "remove the data mount point")
}

/// MiB in use on the filesystem mounted on `mount` (its own metadata, the
/// journal among it, included).
pub fn used_mib(mount: &Path) -> Result<u64, EngineError> {
    let stat = nix::sys::statvfs::statvfs(mount)
        .map_err(|_| EngineError::Host { step: "statvfs of the data mount" })?;
    let used = (stat.blocks() as u64).saturating_sub(stat.blocks_free() as u64);
    Ok(used.saturating_mul(stat.fragment_size() as u64) / MIB)
}

fn remove_if_present(result: std::io::Result<()>, step: &'static str) -> Result<(), EngineError> {
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(EngineError::Host { step }),
        _ => Ok(()),
    }
}

/// Whether something is mounted exactly at `mount` (this process's mount
/// namespace: the helper's, which is the host's).
pub fn mounted(mount: &Path) -> Result<bool, EngineError> {
    let table = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|_| EngineError::Host { step: "read the mount table" })?;
    // Field 5 is the mount point, with space, tab, newline and backslash
    // octal-escaped; our paths have none of those.
    let wanted = mount.to_str().unwrap_or("");
    Ok(table.lines().any(|line| line.split(' ').nth(4) == Some(wanted)))
}

/// A directory of root's with exactly `mode`, made if missing; an existing
/// one must be a real directory (never a symlink) owned by root.
fn own_dir(dir: &Path, mode: u32, step: &'static str) -> Result<(), EngineError> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new().mode(mode).create(dir).map_err(|_| EngineError::Host { step })?;
            // The umask may have taken bits; 0 and 0700 have none to take,
            // but say the mode once more rather than rely on it.
            std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(mode))
                .map_err(|_| EngineError::Host { step })
        }
        Ok(meta) if meta.is_dir() && meta.uid() == 0 => Ok(()),
        _ => Err(EngineError::Host { step }),
    }
}

/// A new image of `max_mib`, allocated in full, with an ext4 whose root
/// belongs to the app's user. A half-made image is removed again.
fn make_image(data: &DataUse) -> Result<(), EngineError> {
    let step = "allocate the data image";
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(&data.image)
        .map_err(|_| EngineError::Host { step })?;
    let length = i64::from(data.max_mib) * MIB as i64;
    let made = nix::fcntl::posix_fallocate(&file, 0, length)
        .map_err(|_| EngineError::Host { step })
        .and_then(|()| file.sync_all().map_err(|_| EngineError::Host { step }));
    drop(file);
    let made = made.and_then(|()| {
        let image = data.image.display().to_string();
        let options = format!("root_owner={DATA_OWNER},nodiscard");
        // -m 0: no blocks reserved for root (nothing in the app runs as root).
        let args = ["-q", "-F", "-m", "0", "-E", &options, &image];
        run(MKFS, &args, MKFS_TIMEOUT, "make the data filesystem")
    });
    if made.is_err() {
        let _ = std::fs::remove_file(&data.image);
    }
    made
}

/// Runs one of the fixed programs and insists on exit 0.
fn run(program: &str, args: &[&str], timeout: Duration, step: &'static str) -> Result<(), EngineError> {
    let mut spec = ProcessSpec::new(program, args.iter().copied());
    spec.env = minimal_env();
    spec.timeout = timeout;
    let outcome = run_blocking(&spec);
    if outcome.execution.execution_status == ExecutionStatus::Ok {
        Ok(())
    } else {
        Err(EngineError::Call { step, execution: outcome.execution })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_at_the_path_is_no_kept_data_and_a_directory_there_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(kept_mib(&dir.path().join("shop.ext4")).unwrap(), None);
        let refusal = kept_mib(dir.path()).unwrap_err();
        assert_eq!(refusal.code, Code::DataInvalid);
    }

    #[test]
    fn the_mount_table_names_the_root_and_not_a_made_up_path() {
        assert!(mounted(Path::new("/")).unwrap());
        assert!(!mounted(Path::new("/nonexistent/volce-lab/data/shop")).unwrap());
    }

    /// Issue 38: the record of what kept data was made for is read back as
    /// written, is nothing when absent, and anything not ours is refused.
    #[test]
    fn the_record_of_kept_data_reads_back_and_only_a_private_file_of_ours_counts() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("shop.ext4");
        let me = nix::unistd::geteuid().as_raw();
        assert_eq!(kept_for_of(&image, me), Ok(None));
        let kept = KeptFor { entry: "db".into(), path: crate::vocab::DataPath::parse("/data").unwrap() };
        bind_kept(&image, &kept).unwrap();
        let record = dir.path().join("shop.entry");
        assert_eq!(std::fs::metadata(&record).unwrap().mode() & 0o777, 0o600);
        assert_eq!(kept_for_of(&image, me), Ok(Some(kept.clone())));
        let other = KeptFor { entry: "static".into(), ..kept };
        bind_kept(&image, &other).unwrap();
        assert_eq!(kept_for_of(&image, me), Ok(Some(other)), "a later record replaces the older one");
        std::fs::set_permissions(&record, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(kept_for_of(&image, me).unwrap_err().code, Code::DataInvalid, "writable by others");
        std::fs::write(&record, "{\"entry\":\"db\"}").unwrap();
        std::fs::set_permissions(&record, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(kept_for_of(&image, me).unwrap_err().code, Code::DataInvalid, "no path");
        assert_eq!(kept_for_of(&image, me + 1).unwrap_err().code, Code::DataInvalid, "another owner");
        delete(&image, &dir.path().join("shop")).unwrap();
        assert!(!record.exists(), "deleting the data deletes its record");
    }
}
