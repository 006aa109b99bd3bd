//! Backups of an app with restic (issue 41): the copy a `backup` plan
//! makes (its data, and its accessories' dumps through `super::dump`), the
//! retention after it, and what a `restore` plan replaces. Runs as root in
//! the host helper; every restic process is `super::restic`'s.
//!
//! Invariants enforced here:
//! - a consistent copy while the app serves: the data's filesystem is
//!   frozen (`fsfreeze`) while restic reads it, so no write lands halfway
//!   through the copy; reads go on, writes wait. It is thawed on every
//!   path out, and a thaw that fails is an error of its own (the plan
//!   needs inspection: the app's writes would wait for ever), never hidden;
//! - nothing is read unless the data is mounted: the empty mount point
//!   must never pass for the app's data;
//! - the password file must be root's regular file that nobody else can
//!   read or write, checked before restic runs (`super::restic`);
//! - every snapshot carries `BACKUP_TAG` and the app's tag, and the
//!   retention only ever forgets snapshots with both.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use super::EngineError;
use super::restic::{app_filter, private_files, restic, summary};
use super::{data_volume, dump};
use crate::exec::ExecutionStatus;
use crate::vocab::{
    BackupConfig, BackupMissed, BackupRecord, BackupRun, BackupSpec, DataUse, Replaced, RestoreSpec,
    RetentionApplied, SnapshotId,
};

/// The whole backup (see the module's invariants), and what it did kept
/// in the app's backup record ([`record`]).
pub fn run(spec: &BackupSpec) -> Result<BackupRun, EngineError> {
    let result = copy(spec);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64);
    let image = spec.record_image();
    let mut kept = record(&image);
    match &result {
        Ok(run) => kept.last_success = run.done_at(now),
        Err(EngineError::BackupFailed { step } | EngineError::Host { step }) => {
            kept.last_failure = Some(BackupMissed { at: now, step: (*step).to_owned() });
        }
        Err(_) => kept.last_failure = Some(BackupMissed { at: now, step: "restic".to_owned() }),
    }
    // The record only informs (run-due, inventory, doctor): a write that
    // fails leaves the backup's own result as it is.
    let _ = write_record(&image, &kept);
    result
}

/// The backup record kept beside the data image `image`: empty when there
/// is none, or when what is there is not root's regular file that parses.
pub fn record(image: &Path) -> BackupRecord {
    let path = BackupRecord::beside(image);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_file() && meta.uid() == 0 && meta.len() <= 4096 => std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default(),
        _ => BackupRecord::default(),
    }
}

/// Writes the record whole (a new 0600 file renamed over the old one).
fn write_record(image: &Path, kept: &BackupRecord) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = BackupRecord::beside(image);
    let fresh = path.with_extension("backup.new");
    let _ = std::fs::remove_file(&fresh);
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&fresh)?;
    file.write_all(&serde_json::to_vec(kept).unwrap_or_default())?;
    file.sync_all()?;
    std::fs::rename(&fresh, &path)
}

/// What every backup and restore checks before restic runs: the password
/// file is private, restic is there.
fn tools_ready(config: &BackupConfig) -> Result<(), EngineError> {
    private_files(config)?;
    if !Path::new(super::restic::RESTIC).is_file() {
        return Err(EngineError::BackupFailed { step: "find restic" });
    }
    Ok(())
}

/// What a copy or a restore of data checks too: the app's data is mounted
/// (its empty mount point must never pass for its data).
fn mounted(mount: &Path) -> Result<(), EngineError> {
    if !data_volume::mounted(mount)? {
        return Err(EngineError::BackupFailed { step: "see the app's data mounted" });
    }
    Ok(())
}

/// The backup itself: the data (frozen while restic reads it), then each
/// accessory's dump, then the retention; one deadline for all of it.
fn copy(spec: &BackupSpec) -> Result<BackupRun, EngineError> {
    tools_ready(&spec.config)?;
    let started = Instant::now();
    let left = || spec.timeout().saturating_sub(started.elapsed());
    super::restic::clear_stale_locks(&spec.config, left());
    let mut run = match &spec.data {
        Some(data) => copy_data(spec, data, left())?,
        None => BackupRun {
            snapshot: None,
            files: 0,
            bytes: 0,
            added_bytes: 0,
            writes_paused_ms: 0,
            dumps: Vec::new(),
            retention: RetentionApplied::Applied,
        },
    };
    for dump in &spec.dumps {
        let mut tags = spec.tags();
        tags.push(dump.tag());
        run.dumps.push(super::dump::stream_out(&spec.config, dump, &spec.app, &tags, left())?);
    }
    run.retention = retention(spec, left());
    Ok(run)
}

/// The app's data: frozen, read by restic, thawed.
fn copy_data(spec: &BackupSpec, data: &DataUse, timeout: Duration) -> Result<BackupRun, EngineError> {
    let failed = |step| EngineError::BackupFailed { step };
    mounted(&data.mount)?;
    let started = Instant::now();
    data_volume::freeze(&data.mount).map_err(|_| failed("freeze the app's data"))?;
    let copied = restic(&spec.config, &tagged_backup(&spec.tags(), &data.mount), timeout);
    let thawed = data_volume::thaw(&data.mount);
    let writes_paused_ms = started.elapsed().as_millis() as u64;
    if !thawed {
        return Err(EngineError::Host { step: "thaw the app's data" });
    }
    if copied.execution.execution_status != ExecutionStatus::Ok {
        return Err(failed("restic backup"));
    }
    let summary = summary(&copied.stdout).ok_or(failed("read restic's summary"))?;
    Ok(BackupRun {
        snapshot: Some(summary.snapshot_id),
        files: summary.total_files_processed,
        bytes: summary.total_bytes_processed,
        added_bytes: summary.data_added,
        writes_paused_ms,
        dumps: Vec::new(),
        retention: RetentionApplied::Applied,
    })
}

/// `backup --tag T... MOUNT`.
fn tagged_backup(tags: &[String], mount: &Path) -> Vec<String> {
    let mut args = vec!["backup".to_owned()];
    for tag in tags {
        args.extend(["--tag".to_owned(), tag.clone()]);
    }
    args.push(mount.display().to_string());
    args
}

/// What a restore replaces, with the app stopped: a safety snapshot of
/// it as it is, then the snapshot's in its place (the data by
/// [`swap_in`], a database by its `load`). Every failure before the switch
/// is [`EngineError::BackupFailed`] with nothing touched; one after it is
/// the step that failed (an operator sees what is in place). Returns the
/// safety snapshot's id.
pub fn restore_replaced(spec: &RestoreSpec) -> Result<SnapshotId, EngineError> {
    tools_ready(&spec.config)?;
    let started = Instant::now();
    let left = || spec.timeout().saturating_sub(started.elapsed());
    super::restic::clear_stale_locks(&spec.config, left());
    match &spec.replaced {
        Replaced::Data(data) => restore_data(spec, data, left()),
        Replaced::Dump(dump) => {
            let safety = dump::stream_out(&spec.config, dump, &spec.app, &spec.safety_tags(), left())
                .map_err(|error| match error {
                    // The dump's own step says what failed, unless it left a
                    // cut dump for the operator to forget.
                    EngineError::BackupFailed { step } if step != dump::CUT_DUMP_KEPT => {
                        EngineError::BackupFailed { step: "take the safety dump" }
                    }
                    other => other,
                })?;
            dump::stream_in(&spec.config, dump, &spec.app, &spec.snapshot.id, left())?;
            Ok(safety.snapshot)
        }
    }
}

/// Puts the safety snapshot `safety` back in place of what a restore put
/// there (the app stopped again), with the restore's whole timeout again:
/// the way back gets its own chance. Any failure needs an operator.
pub fn put_back(spec: &RestoreSpec, safety: &SnapshotId) -> Result<(), EngineError> {
    let back = match &spec.replaced {
        Replaced::Data(data) => swap_in(&spec.config, data, safety, &data.mount.display().to_string()),
        Replaced::Dump(dump) => dump::stream_in(&spec.config, dump, &spec.app, safety, spec.timeout()),
    };
    back.map_err(|_| EngineError::Host { step: "put the safety snapshot back" })
}

/// The data part of a restore: a safety snapshot of the data as it is,
/// then the snapshot's data swapped in.
fn restore_data(spec: &RestoreSpec, data: &DataUse, timeout: Duration) -> Result<SnapshotId, EngineError> {
    let failed = |step| EngineError::BackupFailed { step };
    mounted(&data.mount)?;
    let copied = restic(&spec.config, &tagged_backup(&spec.safety_tags(), &data.mount), timeout);
    let safety = match copied.execution.execution_status {
        ExecutionStatus::Ok => summary(&copied.stdout).ok_or(failed("read the safety snapshot's summary"))?,
        _ => return Err(failed("take the safety snapshot")),
    };
    let path = spec.snapshot.paths.first().map(String::as_str).unwrap_or_default();
    swap_in(&spec.config, data, &spec.snapshot.id, path)?;
    Ok(safety.snapshot_id)
}

/// Puts what `snapshot` holds under `path` in the place of the app's data
/// (the app stopped): unpacked into a new image of the same cap
/// (`data_volume::stage`), which then replaces the app's image in one
/// rename (`data_volume::switch_to`). So the app's data is at every
/// instant the old or the restored one, whole: a restic that fails, a
/// repository that stops answering or a helper killed halfway leaves the
/// old data as it was (and a staging image the next restore or a purge
/// removes). Needs room for one more image of the data's cap on the state
/// directory's disk while it runs. `BackupFailed` means untouched.
pub fn swap_in(
    config: &BackupConfig,
    data: &DataUse,
    snapshot: &SnapshotId,
    path: &str,
) -> Result<(), EngineError> {
    let untouched = |step| EngineError::BackupFailed { step };
    let staged = data_volume::stage(data).map_err(|_| untouched("make the restore's data image"))?;
    if let Err(step) = unpack(config, &staged.mount, snapshot, path) {
        let _ = data_volume::discard_staging(data);
        return Err(untouched(step));
    }
    match data_volume::switch_to(&staged, data) {
        Ok(()) => Ok(()),
        Err(data_volume::Switch::Untouched(_)) => {
            let _ = data_volume::discard_staging(data);
            Err(untouched("put the restored image in place"))
        }
        Err(data_volume::Switch::Switched(_)) => Err(EngineError::Host { step: "mount the restored data" }),
    }
}

/// The directory a restore unpacks into, inside the staging image's own
/// filesystem (so moving its entries to that filesystem's root is a rename).
const STAGING: &str = ".volce-lab-restore";

/// Fills the empty filesystem mounted on `mount` (a restore's staging
/// image) with what `snapshot` holds under `path`.
fn unpack(
    config: &BackupConfig,
    mount: &Path,
    snapshot: &SnapshotId,
    path: &str,
) -> Result<(), &'static str> {
    let staging = mount.join(STAGING);
    clear(mount).map_err(|()| "clear the restore's data image")?;
    let args = [
        "restore".to_owned(),
        snapshot.as_str().to_owned(),
        "--target".to_owned(),
        staging.display().to_string(),
    ];
    if restic(config, &args, super::restic::REPOSITORY_TIMEOUT).execution.execution_status
        != ExecutionStatus::Ok
    {
        return Err("restic restore");
    }
    let unpacked = staging.join(path.trim_start_matches('/'));
    let moved = std::fs::read_dir(&unpacked).and_then(|entries| {
        for entry in entries {
            let entry = entry?;
            if entry.file_name() != "lost+found" {
                std::fs::rename(entry.path(), mount.join(entry.file_name()))?;
            }
        }
        Ok(())
    });
    let removed = std::fs::remove_dir_all(&staging);
    moved.and(removed).map_err(|_| "move the restored files into place")
}

/// Removes every entry of the mounted data but `lost+found` (never
/// following a link: `remove_dir_all` removes a link, not its target).
fn clear(mount: &Path) -> Result<(), ()> {
    let entries = std::fs::read_dir(mount).map_err(drop)?;
    for entry in entries {
        let entry = entry.map_err(drop)?;
        if entry.file_name() == "lost+found" {
            continue;
        }
        let removed = match entry.file_type() {
            Ok(kind) if kind.is_dir() => std::fs::remove_dir_all(entry.path()),
            _ => std::fs::remove_file(entry.path()),
        };
        removed.map_err(drop)?;
    }
    Ok(())
}

/// The least time left in which a retention starts: a `forget --prune`
/// our deadline kills would leave its exclusive lock behind.
const RETENTION_FLOOR: Duration = Duration::from_secs(30);

/// `forget --prune` of the app's snapshots beyond the retention, when
/// there is time for it (else `Failed`: more are kept, never fewer).
fn retention(spec: &BackupSpec, left: Duration) -> RetentionApplied {
    if left < RETENTION_FLOOR {
        return RetentionApplied::Failed;
    }
    let mut args = vec!["forget".to_owned(), "--tag".to_owned(), app_filter(&spec.app), "--prune".to_owned()];
    for (option, keep) in spec.config.keep.rules() {
        args.extend([option.to_owned(), keep.to_string()]);
    }
    match restic(&spec.config, &args, left).execution.execution_status {
        ExecutionStatus::Ok => RetentionApplied::Applied,
        _ => RetentionApplied::Failed,
    }
}
