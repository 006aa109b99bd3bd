//! Backups of an app's data with restic (issue 41): the copy a `backup`
//! plan makes, and the repository commands the operator runs (`backup
//! init|list|check`). Runs as root in the host helper; restic is a fixed
//! path with argv from validated values, through `crate::exec` (no shell,
//! no raw stderr); its password is read by restic from the operator's
//! root-only file and never passes through us.
//!
//! Why restic (docs/data.md#backups): encryption, deduplication, retention
//! (`forget --prune`) and verification (`check`) in one Debian package,
//! with local and `sftp:` repositories and JSON output for every command we
//! read; borg offers the same but its repository over ssh needs borg on the
//! backup host too.
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
//!   read or write, checked before restic runs;
//! - every snapshot carries [`BACKUP_TAG`] and the app's tag, and the
//!   retention and the listing only ever name snapshots with both.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::EngineError;
use super::data_volume;
use crate::exec::{ExecutionStatus, ProcessOutput, ProcessSpec, minimal_env, run_blocking};
use crate::vocab::{
    AppName, BACKUP_TAG, BackupConfig, BackupDone, BackupMissed, BackupRecord, BackupRun, BackupSpec,
    DataUse, RestoreSpec, RetentionApplied, SnapshotFacts, SnapshotId,
};

pub const RESTIC: &str = "/usr/bin/restic";
/// The ssh restic runs for an `sftp:` repository with the policy's
/// `backup.ssh_config` (Debian's OpenSSH client).
const SSH: &str = "/usr/bin/ssh";
/// What one restic command may print on stdout with `--json --quiet`.
const RESTIC_STDOUT: usize = 4 << 20;
/// How long a listing, an init or a check may take.
pub const REPOSITORY_TIMEOUT: Duration = Duration::from_secs(600);

/// The whole backup (see the module's invariants), and what it did kept
/// in the app's backup record ([`record`]).
pub fn run(spec: &BackupSpec) -> Result<BackupRun, EngineError> {
    let result = copy(spec);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64);
    let mut kept = record(&spec.data.image);
    match &result {
        Ok(run) => {
            kept.last_success = Some(BackupDone {
                at: now,
                snapshot: run.snapshot.clone(),
                bytes: run.bytes,
                added_bytes: run.added_bytes,
            });
        }
        Err(EngineError::BackupFailed { step } | EngineError::Host { step }) => {
            kept.last_failure = Some(BackupMissed { at: now, step: (*step).to_owned() });
        }
        Err(_) => kept.last_failure = Some(BackupMissed { at: now, step: "restic".to_owned() }),
    }
    // The record only informs (run-due, inventory, doctor): a write that
    // fails leaves the backup's own result as it is.
    let _ = write_record(&spec.data.image, &kept);
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

/// What a copy or a restore checks before restic runs: the password file
/// is private, restic is there, the app's data is mounted (its empty mount
/// point must never pass for its data).
fn ready(config: &BackupConfig, mount: &Path) -> Result<(), EngineError> {
    let failed = |step| EngineError::BackupFailed { step };
    private_files(config)?;
    if !Path::new(RESTIC).is_file() {
        return Err(failed("find restic"));
    }
    if !data_volume::mounted(mount)? {
        return Err(failed("see the app's data mounted"));
    }
    Ok(())
}

/// The copy itself: checks, freeze, restic, thaw, retention.
fn copy(spec: &BackupSpec) -> Result<BackupRun, EngineError> {
    let failed = |step| EngineError::BackupFailed { step };
    ready(&spec.config, &spec.data.mount)?;
    let started = Instant::now();
    data_volume::freeze(&spec.data.mount).map_err(|_| failed("freeze the app's data"))?;
    let copied = restic(&spec.config, &backup_args(spec), spec.timeout());
    let thawed = data_volume::thaw(&spec.data.mount);
    let writes_paused_ms = started.elapsed().as_millis() as u64;
    if !thawed {
        return Err(EngineError::Host { step: "thaw the app's data" });
    }
    if copied.execution.execution_status != ExecutionStatus::Ok {
        return Err(failed("restic backup"));
    }
    let summary = summary(&copied.stdout).ok_or(failed("read restic's summary"))?;
    let retention = retention(spec);
    Ok(BackupRun {
        snapshot: summary.snapshot_id,
        files: summary.total_files_processed,
        bytes: summary.total_bytes_processed,
        added_bytes: summary.data_added,
        writes_paused_ms,
        retention,
    })
}

/// restic's arguments for one backup of the mounted data.
fn backup_args(spec: &BackupSpec) -> Vec<String> {
    tagged_backup(&spec.tags(), &spec.data.mount)
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

/// The data part of a restore, with the app stopped: a safety snapshot of
/// the data as it is, then the snapshot's data put in its place by
/// [`swap_in`]. Every failure before the switch is
/// [`EngineError::BackupFailed`] with the app's data untouched; one after
/// it is the step that failed (the data is the restored one and needs an
/// operator to see it mounted). Returns the safety snapshot's id.
pub fn restore_data(spec: &RestoreSpec) -> Result<SnapshotId, EngineError> {
    let failed = |step| EngineError::BackupFailed { step };
    ready(&spec.config, &spec.data.mount)?;
    let copied = restic(&spec.config, &tagged_backup(&spec.safety_tags(), &spec.data.mount), spec.timeout());
    let safety = match copied.execution.execution_status {
        ExecutionStatus::Ok => summary(&copied.stdout).ok_or(failed("read the safety snapshot's summary"))?,
        _ => return Err(failed("take the safety snapshot")),
    };
    let path = spec.snapshot.paths.first().map(String::as_str).unwrap_or_default();
    swap_in(&spec.config, &spec.data, &spec.snapshot.id, path)?;
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
    if restic(config, &args, REPOSITORY_TIMEOUT).execution.execution_status != ExecutionStatus::Ok {
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

/// What the repository says of `app`'s snapshot `id` (a prefix of its full
/// id, as `backup list` prints it): `None` when no snapshot of ours of that
/// app has it.
pub fn snapshot_facts(
    config: &BackupConfig,
    app: &AppName,
    id: &SnapshotId,
) -> Result<Option<SnapshotFacts>, EngineError> {
    let listed = list(config, Some(app))?;
    let mut found = listed.into_iter().filter(|s| s.id.starts_with(id.as_str()));
    let (Some(snapshot), None) = (found.next(), found.next()) else { return Ok(None) };
    let full = SnapshotId::parse(&snapshot.id).ok_or(EngineError::Unparsable { step: "restic snapshots" })?;
    let args = ["stats".to_owned(), full.as_str().to_owned()];
    let out = repository_command(config, &args, "restic stats")?;
    let stats: Stats =
        serde_json::from_slice(&out).map_err(|_| EngineError::Unparsable { step: "restic stats" })?;
    Ok(Some(SnapshotFacts {
        id: full,
        time: snapshot.time,
        tags: snapshot.tags,
        paths: snapshot.paths,
        files: stats.total_file_count,
        bytes: stats.total_size,
    }))
}

/// `restic stats --json` (restore size).
#[derive(Deserialize)]
struct Stats {
    total_size: u64,
    total_file_count: u64,
}

/// `forget --prune` of the app's snapshots beyond the retention.
fn retention(spec: &BackupSpec) -> RetentionApplied {
    let mut args = vec!["forget".to_owned(), "--tag".to_owned(), app_filter(&spec.app), "--prune".to_owned()];
    for (option, keep) in spec.config.keep.rules() {
        args.extend([option.to_owned(), keep.to_string()]);
    }
    let spent = spec.timeout().saturating_sub(Duration::from_secs(1));
    match restic(&spec.config, &args, spent).execution.execution_status {
        ExecutionStatus::Ok => RetentionApplied::Applied,
        _ => RetentionApplied::Failed,
    }
}

/// The tag filter that names `app`'s snapshots of ours (restic reads a
/// comma as "both").
fn app_filter(app: &AppName) -> String {
    format!("{BACKUP_TAG},{}", BackupSpec::app_tag(app))
}

/// The fields of restic's backup summary we read.
#[derive(Deserialize)]
struct Summary {
    snapshot_id: SnapshotId,
    total_files_processed: u64,
    total_bytes_processed: u64,
    data_added: u64,
}

/// The summary line of `backup --json --quiet`.
fn summary(stdout: &[u8]) -> Option<Summary> {
    let line = stdout.split(|b| *b == b'\n').rev().find(|line| !line.is_empty())?;
    let value: serde_json::Value = serde_json::from_slice(line).ok()?;
    (value.get("message_type")?.as_str()? == "summary").then_some(())?;
    serde_json::from_value(value).ok()
}

/// One snapshot of ours as `restic snapshots --json` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Listed {
    pub id: String,
    pub short_id: SnapshotId,
    pub time: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub paths: Vec<String>,
}

impl Listed {
    /// The value of the tag `key=...`, if the snapshot has one.
    pub fn tag(&self, key: &str) -> Option<&str> {
        crate::vocab::tag_value(&self.tags, key)
    }
}

/// The snapshots of ours in the repository (of `app`, or of every app),
/// oldest first.
pub fn list(config: &BackupConfig, app: Option<&AppName>) -> Result<Vec<Listed>, EngineError> {
    let filter = app.map_or_else(|| BACKUP_TAG.to_owned(), app_filter);
    let args = ["snapshots".to_owned(), "--tag".to_owned(), filter];
    let out = repository_command(config, &args, "restic snapshots")?;
    serde_json::from_slice::<Option<Vec<Listed>>>(&out)
        .map(Option::unwrap_or_default)
        .map_err(|_| EngineError::Unparsable { step: "restic snapshots" })
}

/// `restic init`: makes the repository with the operator's password.
pub fn init(config: &BackupConfig) -> Result<(), EngineError> {
    repository_command(config, &["init".to_owned()], "restic init").map(drop)
}

/// `restic check`: the repository's structure is sound.
pub fn check(config: &BackupConfig) -> Result<(), EngineError> {
    repository_command(config, &["check".to_owned()], "restic check").map(drop)
}

/// One repository command for the operator, after the password file's check.
fn repository_command(
    config: &BackupConfig,
    args: &[String],
    step: &'static str,
) -> Result<Vec<u8>, EngineError> {
    private_files(config)?;
    let out = restic(config, args, REPOSITORY_TIMEOUT);
    match out.execution.execution_status {
        ExecutionStatus::Ok => Ok(out.stdout),
        _ => Err(EngineError::Call { step, execution: out.execution }),
    }
}

/// restic with the repository, the password file and `args`: no cache
/// (nothing of the repository is kept on the host beside it), JSON, quiet.
fn restic(config: &BackupConfig, args: &[String], timeout: Duration) -> ProcessOutput {
    let mut spec = fixed(RESTIC, restic_argv(config, args), timeout);
    spec.stdout_limit = RESTIC_STDOUT;
    // An sftp repository's ssh reads root's own keys and known hosts
    // unless the policy names its ssh configuration.
    spec.env.push(("HOME".into(), "/root".into()));
    run_blocking(&spec)
}

/// restic's whole argv for `args`: the repository, the password file, no
/// cache, JSON; with the policy's `ssh_config`, the ssh command that reads it.
fn restic_argv(config: &BackupConfig, args: &[String]) -> Vec<String> {
    let mut argv = vec![
        "--repo".to_owned(),
        config.repository.as_str().to_owned(),
        "--password-file".to_owned(),
        config.password_file.display().to_string(),
        "--no-cache".to_owned(),
        "--json".to_owned(),
        "--quiet".to_owned(),
    ];
    if let (Some(file), Some(destination)) = (&config.ssh_config, config.repository.sftp_destination()) {
        // restic splits this at spaces; the policy refused any in both.
        argv.push("--option".to_owned());
        argv.push(format!("sftp.command={SSH} -F {} {destination} -s sftp", file.display()));
    }
    argv.extend(args.iter().cloned());
    argv
}

fn fixed(program: &str, args: impl IntoIterator<Item = String>, timeout: Duration) -> ProcessSpec {
    let mut spec = ProcessSpec::new(program, args);
    spec.env = minimal_env();
    spec.timeout = timeout;
    spec
}

/// The files restic is handed, checked before it runs: the password file
/// is root's alone, and the ssh configuration (which names the key and the
/// pinned host key) is root's and nobody else may change it.
fn private_files(config: &BackupConfig) -> Result<(), EngineError> {
    let failed = |step| EngineError::BackupFailed { step };
    password_file_ok(&config.password_file, 0).map_err(|_| failed("check the backup password file"))?;
    if let Some(file) = &config.ssh_config {
        ssh_config_ok(file, 0).map_err(|_| failed("check the backup ssh configuration"))?;
    }
    Ok(())
}

/// Whether `path` is a regular file owned by `owner` that no one else may
/// change (it says which key ssh offers and which host key it trusts).
pub fn ssh_config_ok(path: &Path, owner: u32) -> Result<(), &'static str> {
    owned_file_ok(path, owner, 0o022, "group or others may write it (chmod 644 or 600 it)")
}

/// Whether `path` is a regular file owned by `owner` that no one else may
/// read or write (the password of the whole repository is in it).
pub fn password_file_ok(path: &Path, owner: u32) -> Result<(), &'static str> {
    owned_file_ok(path, owner, 0o077, "group or others may read or write it (chmod 600 it)")
}

/// Whether `path` is `owner`'s regular file (never a link) with none of
/// the mode bits `forbidden`; `why` says what is wrong when it has one.
fn owned_file_ok(path: &Path, owner: u32, forbidden: u32, why: &'static str) -> Result<(), &'static str> {
    let meta = std::fs::symlink_metadata(path).map_err(|_| "it cannot be read")?;
    if !meta.is_file() || meta.uid() != owner {
        return Err("it is not root's regular file");
    }
    if meta.mode() & forbidden != 0 {
        return Err(why);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tried: a path repository (no ssh command), an sftp one without and
    /// with the policy's ssh configuration.
    #[test]
    fn the_ssh_command_reads_the_policys_configuration_only_when_it_names_one() {
        let mut config = BackupConfig {
            repository: crate::vocab::BackupRepository::parse("/srv/backup").unwrap(),
            password_file: "/etc/volce-lab/backup.password".into(),
            keep: crate::vocab::Retention { last: Some(3), ..Default::default() },
            schedule: Default::default(),
            ssh_config: Some("/etc/volce-lab/backup.ssh_config".into()),
        };
        let snapshots = ["snapshots".to_owned()];
        assert!(!restic_argv(&config, &snapshots).contains(&"--option".to_owned()), "a path needs no ssh");
        config.repository = crate::vocab::BackupRepository::parse("sftp:backup@vault:/srv/restic").unwrap();
        let argv = restic_argv(&config, &snapshots);
        let at = argv.iter().position(|a| a == "--option").unwrap();
        assert_eq!(
            argv[at + 1],
            "sftp.command=/usr/bin/ssh -F /etc/volce-lab/backup.ssh_config backup@vault -s sftp"
        );
        assert_eq!(argv.last().unwrap(), "snapshots");
        config.ssh_config = None;
        assert!(!restic_argv(&config, &snapshots).contains(&"--option".to_owned()), "root's own ssh config");
    }

    #[test]
    fn an_ssh_configuration_others_may_change_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("backup.ssh_config");
        std::fs::write(&file, "Host vault\n").unwrap();
        let me = nix::unistd::geteuid().as_raw();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(ssh_config_ok(&file, me).is_ok());
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o664)).unwrap();
        assert!(ssh_config_ok(&file, me).is_err(), "group-writable");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(ssh_config_ok(&file, me + 1).is_err(), "another owner");
        assert!(ssh_config_ok(&dir.path().join("missing"), me).is_err());
    }

    #[test]
    fn the_summary_is_the_last_line_and_only_a_summary_counts() {
        let out =
            b"{\"message_type\":\"status\"}\n{\"message_type\":\"summary\",\"total_files_processed\":2,\
                    \"total_bytes_processed\":5,\"data_added\":1048,\"snapshot_id\":\"49effc15\"}\n";
        let read = summary(out).unwrap();
        assert_eq!(
            (read.snapshot_id.as_str(), read.total_files_processed, read.data_added),
            ("49effc15", 2, 1048)
        );
        assert!(summary(b"{\"message_type\":\"status\"}\n").is_none());
        assert!(summary(b"{\"message_type\":\"summary\",\"snapshot_id\":\"NOT-HEX\"}").is_none());
        assert!(summary(b"").is_none());
    }

    #[test]
    fn a_listed_snapshot_gives_its_tags_by_key() {
        let listed: Vec<Listed> = serde_json::from_str(
            r#"[{"time":"2026-12-06T16:14:45Z","short_id":"1e4d6c43","id":"x","paths":["/d"],
                 "tags":["volce-lab","app=blog","plan=abc"]}]"#,
        )
        .unwrap();
        assert_eq!(listed[0].tag("app"), Some("blog"));
        assert_eq!(listed[0].tag("plan"), Some("abc"));
        assert_eq!(listed[0].tag("entry"), None);
    }

    #[test]
    fn the_password_file_must_be_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pass");
        std::fs::write(&file, "secret\n").unwrap();
        let me = nix::unistd::geteuid().as_raw();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(password_file_ok(&file, me).is_err());
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(password_file_ok(&file, me).is_ok());
        assert!(password_file_ok(&file, me + 1).is_err());
        assert!(password_file_ok(&dir.path().join("missing"), me).is_err());
    }
}
