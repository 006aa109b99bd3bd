//! The operator's backup repository through restic (issue 41): one
//! process per command, with the repository, the password file and the ssh
//! command the policy names; the commands the operator runs (`backup
//! init|list|check`), what restic says of a snapshot, and the pieces
//! `super::backup` and `super::dump` build on. Runs as root in the host
//! helper; restic is a fixed path with argv from validated values, through
//! `crate::exec` (no shell, no raw stderr); its password is read by restic
//! from the operator's root-only file and never passes through us.
//!
//! Why restic (docs/data.md#backups): encryption, deduplication, retention
//! (`forget --prune`) and verification (`check`) in one Debian package,
//! with local and `sftp:` repositories, a backup read from stdin (a
//! database's dump) and JSON output for every command we read; borg offers
//! the same but its repository over ssh needs borg on the backup host too.
//!
//! Invariants enforced here:
//! - the password file must be root's regular file that nobody else can
//!   read or write, and the ssh configuration root's that nobody else may
//!   change, checked before restic runs;
//! - the listing only ever names snapshots with [`BACKUP_TAG`].

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::EngineError;
use crate::exec::{ExecutionStatus, ProcessOutput, ProcessSpec, minimal_env, run_blocking};
use crate::vocab::{AppName, BACKUP_TAG, BackupConfig, BackupSpec, SnapshotFacts, SnapshotId};

pub const RESTIC: &str = "/usr/bin/restic";
/// The ssh restic runs for an `sftp:` repository with the policy's
/// `backup.ssh_config` (Debian's OpenSSH client).
const SSH: &str = "/usr/bin/ssh";
/// What one restic command may print on stdout with `--json --quiet`.
const RESTIC_STDOUT: usize = 4 << 20;
/// How long a listing, an init or a check may take.
pub const REPOSITORY_TIMEOUT: Duration = Duration::from_secs(600);

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

/// The tag filter that names `app`'s snapshots of ours (restic reads a
/// comma as "both").
pub(super) fn app_filter(app: &AppName) -> String {
    format!("{BACKUP_TAG},{}", BackupSpec::app_tag(app))
}

/// The fields of restic's backup summary we read.
#[derive(Deserialize)]
pub(super) struct Summary {
    pub snapshot_id: SnapshotId,
    pub total_files_processed: u64,
    pub total_bytes_processed: u64,
    pub data_added: u64,
}

/// The summary line of `backup --json --quiet`.
pub(super) fn summary(stdout: &[u8]) -> Option<Summary> {
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
    clear_stale_locks(config, REPOSITORY_TIMEOUT);
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
    clear_stale_locks(config, REPOSITORY_TIMEOUT);
    repository_command(config, &["check".to_owned()], "restic check").map(drop)
}

/// One repository command for the operator, after the password file's check.
fn repository_command(
    config: &BackupConfig,
    args: &[String],
    step: &'static str,
) -> Result<Vec<u8>, EngineError> {
    command_within(config, args, step, REPOSITORY_TIMEOUT)
}

/// [`repository_command`] within `timeout`.
fn command_within(
    config: &BackupConfig,
    args: &[String],
    step: &'static str,
    timeout: Duration,
) -> Result<Vec<u8>, EngineError> {
    private_files(config)?;
    let out = restic(config, args, timeout);
    match out.execution.execution_status {
        ExecutionStatus::Ok => Ok(out.stdout),
        _ => Err(EngineError::Call { step, execution: out.execution }),
    }
}

/// restic with the repository, the password file and `args`: no cache
/// (nothing of the repository is kept on the host beside it), JSON, quiet.
pub(super) fn restic(config: &BackupConfig, args: &[String], timeout: Duration) -> ProcessOutput {
    run_blocking(&restic_spec(config, args, timeout))
}

/// The process [`restic`] runs, for a caller that pipes it (`super::dump`).
pub(super) fn restic_spec(config: &BackupConfig, args: &[String], timeout: Duration) -> ProcessSpec {
    let mut spec = fixed(RESTIC, restic_argv(config, args), timeout);
    spec.stdout_limit = RESTIC_STDOUT;
    // An sftp repository's ssh reads root's own keys and known hosts
    // unless the policy names its ssh configuration.
    spec.env.push(("HOME".into(), "/root".into()));
    spec
}

/// `restic forget` of every snapshot that has all of `tags` (one plan's
/// cut dump of one accessory): none is fine. Within `timeout`.
pub(super) fn forget_tagged(
    config: &BackupConfig,
    tags: &[String],
    timeout: Duration,
) -> Result<(), EngineError> {
    clear_stale_locks(config, timeout);
    let args = ["snapshots".to_owned(), "--tag".to_owned(), tags.join(",")];
    let out = command_within(config, &args, "restic snapshots", timeout)?;
    let listed: Vec<Listed> = serde_json::from_slice::<Option<Vec<Listed>>>(&out)
        .map(Option::unwrap_or_default)
        .map_err(|_| EngineError::Unparsable { step: "restic snapshots" })?;
    if listed.is_empty() {
        return Ok(());
    }
    let mut args = vec!["forget".to_owned()];
    args.extend(listed.into_iter().map(|snapshot| snapshot.id));
    command_within(config, &args, "restic forget", timeout).map(drop)
}

/// `restic unlock`: removes the locks of restic processes of this host
/// that are gone (never a live one, nor another host's younger than
/// restic's 30 minutes). Debian's restic 0.14 keeps the lock of a process
/// that was killed (a `restic dump` whose reader went away dies of
/// SIGPIPE; a helper killed mid-backup takes its restic along, or our own
/// deadline kills a `forget --prune`), and such a lock refuses every later
/// `forget` for ever, and an exclusive one every command. Run once at the
/// start of each backup, restore and listing; what it answers changes
/// nothing here (the command after it says whether the repository was free).
pub(super) fn clear_stale_locks(config: &BackupConfig, timeout: Duration) {
    if private_files(config).is_ok() {
        let _ = restic(config, &["unlock".to_owned()], timeout);
    }
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
pub(super) fn private_files(config: &BackupConfig) -> Result<(), EngineError> {
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
