//! Backups of an app's data (issue 41): the operator's repository
//! ([`BackupRepository`]) and retention ([`Retention`]) as the policy's
//! `backup` object gives them ([`BackupConfig`]), what a `backup` plan asks
//! the engine ([`BackupSpec`]) and what it left ([`BackupRun`]), and a
//! snapshot's id ([`SnapshotId`]). Pure data and its validation.
//!
//! Why the repository string is validated so narrowly: it is the
//! operator's, but it reaches restic's argv (one element, never a shell)
//! and the operator's `show`; a control character could hide part of it,
//! and a leading `-` would be read as an option.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::string_form::string_form;
use super::{AppName, ContainerId, DataUse, ImageRef, PlanId, StartSpec};

/// How long one backup may take (the copy, the dumps, then the retention),
/// and a restore's safety copy and replacement: inside the 240 s the MCP
/// client waits for the helper's reply, as a deploy is. A restore of data
/// unpacks within restic's own repository timeout, and a restore's way
/// back gets this much again.
pub const BACKUP_TIMEOUT: Duration = Duration::from_secs(180);
/// The tag every snapshot volce-lab makes carries, so `backup list` and the
/// retention never count a snapshot someone else put in the repository.
pub const BACKUP_TAG: &str = "volce-lab";
/// The most snapshots of each kind a retention rule keeps.
pub const KEEP_MAX: u32 = 1000;

/// Where backups go: an absolute path (another disk) or restic's `sftp:`
/// form (`sftp:user@host:/path`), at most 512 bytes, no whitespace or
/// control character, no leading `-`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BackupRepository(String);

impl BackupRepository {
    pub fn parse(value: &str) -> Option<BackupRepository> {
        let plain = !value.is_empty()
            && value.len() <= 512
            && !value.chars().any(|c| c.is_control() || c.is_whitespace());
        let path_ok = value.starts_with('/') && !value.split('/').any(|part| part == "..");
        let sftp_ok =
            value.strip_prefix("sftp:").is_some_and(|rest| !rest.is_empty() && !rest.starts_with('-'));
        (plain && (path_ok || sftp_ok)).then(|| BackupRepository(value.to_owned()))
    }

    /// `user@host` (or `host`) of a repository in the form
    /// `sftp:user@host:/path`, the destination ssh is given when the policy
    /// names the ssh configuration; `None` for a path or restic's
    /// `sftp://` URL form.
    pub fn sftp_destination(&self) -> Option<&str> {
        let rest = self.0.strip_prefix("sftp:")?;
        let (destination, path) = rest.split_once(':')?;
        let ok = !destination.is_empty() && !destination.starts_with('-') && !destination.contains('/');
        (ok && path.starts_with('/')).then_some(destination)
    }
}

string_form!(BackupRepository, "not a backup repository (an absolute path, or sftp:user@host:/path)");

/// How many snapshots of one app the repository keeps after each backup
/// (restic's `forget --keep-*`): at least one rule, each 1 to [`KEEP_MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retention {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weekly: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monthly: Option<u32>,
}

impl Retention {
    /// Each rule with restic's option for it, in a fixed order.
    pub fn rules(&self) -> Vec<(&'static str, u32)> {
        [("--keep-last", self.last), ("--keep-daily", self.daily), ("--keep-weekly", self.weekly)]
            .into_iter()
            .chain([("--keep-monthly", self.monthly)])
            .filter_map(|(option, keep)| keep.map(|keep| (option, keep)))
            .collect()
    }

    /// Whether the rule set is one the policy accepts.
    pub fn valid(&self) -> bool {
        let rules = self.rules();
        !rules.is_empty() && rules.iter().all(|(_, keep)| (1..=KEEP_MAX).contains(keep))
    }

    /// The rules in the operator's words (`last 7, daily 14`).
    pub fn describe(&self) -> String {
        let words = self.rules().into_iter().map(|(option, keep)| format!("{} {keep}", &option[7..]));
        words.collect::<Vec<_>>().join(", ")
    }
}

/// The policy's `backup` object: the operator's repository, the root-only
/// file holding its password, the retention, and the apps backed up on a
/// schedule (`volce-lab-host backup run-due`, the package's timer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupConfig {
    pub repository: BackupRepository,
    pub password_file: PathBuf,
    pub keep: Retention,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub schedule: std::collections::BTreeMap<AppName, BackupEvery>,
    /// The ssh configuration restic's ssh reads for an `sftp:` repository
    /// (`ssh -F`), so the backup host's key, address and pinned host key
    /// live beside the policy rather than in root's own `~/.ssh`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_config: Option<PathBuf>,
}

/// How often a scheduled app is backed up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackupEvery {
    Hourly,
    Daily,
    Weekly,
}

impl BackupEvery {
    pub fn seconds(self) -> i64 {
        match self {
            BackupEvery::Hourly => 3600,
            BackupEvery::Daily => 86_400,
            BackupEvery::Weekly => 7 * 86_400,
        }
    }
}

/// What the host keeps of an app's backups, beside its data image
/// (`<app>.backup`, root's 0600): the last one that recorded a snapshot and
/// the last one that failed, for `run-due`, the inventory and the doctor.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_success: Option<BackupDone>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<BackupMissed>,
}

/// A backup that recorded a snapshot: when (Unix seconds), which, how big.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupDone {
    pub at: i64,
    pub snapshot: SnapshotId,
    pub bytes: u64,
    pub added_bytes: u64,
}

/// A backup that failed: when, and the step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupMissed {
    pub at: i64,
    pub step: String,
}

impl BackupRecord {
    /// Where it is kept: beside the app's data image.
    pub fn beside(image: &std::path::Path) -> PathBuf {
        image.with_extension("backup")
    }

    /// The app's data image (`<app>.ext4`) in the directory of one of its
    /// accessories' images, whether or not the app has data of its own: an
    /// app backed up by its dumps only keeps its record beside it too.
    pub fn app_image_beside(accessory_image: &std::path::Path, app: &AppName) -> PathBuf {
        accessory_image.with_file_name(format!("{}.ext4", app.as_str()))
    }

    /// Whether a backup every `every` is due at `now`: none yet, or the
    /// last success is that old.
    pub fn due(&self, every: BackupEvery, now: i64) -> bool {
        self.last_success.as_ref().is_none_or(|done| now - done.at >= every.seconds())
    }
    /// Whether a scheduled backup is late at `now`: none yet, or no
    /// success within two of its periods (one missed run is tolerated).
    pub fn late(&self, every: BackupEvery, now: i64) -> bool {
        self.last_success.as_ref().is_none_or(|done| now - done.at > 2 * every.seconds())
    }
}

/// A restic snapshot's id as an operator or the agent names it: 8 (the
/// short form restic prints) to 64 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SnapshotId(String);

impl SnapshotId {
    pub fn parse(value: &str) -> Option<SnapshotId> {
        let hex = value.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        (hex && (8..=64).contains(&value.len())).then(|| SnapshotId(value.to_owned()))
    }
}

string_form!(SnapshotId, "not a snapshot id (8 to 64 lowercase hex characters)");

/// What the engine backs up for a `backup` plan: the app's data directory
/// as mounted (when it has one) and a dump of each accessory whose policy
/// declares one, into the operator's repository, each a snapshot tagged so
/// it names the app, its catalog entry, the image it ran and the plan (a
/// dump also its accessory). A plan made before dumps existed reads as
/// one with data and no dumps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupSpec {
    pub plan_id: PlanId,
    pub app: AppName,
    pub entry: String,
    pub image: ImageRef,
    pub data: Option<DataUse>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dumps: Vec<DumpUse>,
    pub config: BackupConfig,
    pub timeout_seconds: u32,
}

/// One accessory's database as a backup streams it out and a restore
/// streams it back: its recorded use (container, credential file), the
/// app's directory where the command's env file lives while it runs, and
/// the policy's `dump` and `load` argv, sealed in the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumpUse {
    pub accessory: super::AccessoryUse,
    /// Its running container as the plan saw it (the command runs there).
    pub container: ContainerId,
    pub app_dir: PathBuf,
    pub dump: super::TaskArgv,
    pub load: super::TaskArgv,
}

impl DumpUse {
    /// The tag that says which accessory a dump's snapshot holds.
    pub fn tag(&self) -> String {
        format!("{ACCESSORY_TAG}={}", self.accessory.name)
    }

    /// The one file its snapshot holds (`restic backup --stdin-filename`):
    /// `<app>@<name>.dump`, as its data's files are called.
    pub fn file_name(&self, app: &AppName) -> String {
        format!("{}.dump", super::AccessoryUse::data_key(app, &self.accessory.name))
    }

    /// The path restic records for that file (the root of its snapshot).
    pub fn snapshot_path(&self, app: &AppName) -> String {
        format!("/{}", self.file_name(app))
    }
}

/// The tag key of the accessory a dump's snapshot holds.
pub const ACCESSORY_TAG: &str = "accessory";

/// The tags a snapshot of `app` made by `plan` carries: [`BACKUP_TAG`] and
/// one `key=value` per fact.
fn snapshot_tags(plan: &PlanId, app: &AppName, entry: &str, image: &ImageRef) -> Vec<String> {
    vec![
        BACKUP_TAG.to_owned(),
        BackupSpec::app_tag(app),
        format!("entry={entry}"),
        format!("image={}", image.as_str().rsplit_once('@').map_or("", |(_, digest)| digest)),
        format!("plan={}", plan.as_str()),
    ]
}

impl BackupSpec {
    /// The snapshot's tags: [`BACKUP_TAG`] and one `key=value` per fact.
    pub fn tags(&self) -> Vec<String> {
        snapshot_tags(&self.plan_id, &self.app, &self.entry, &self.image)
    }

    /// The image the app's backup record is kept beside: its data's, or
    /// for an app with dumps only, where its data image would be (the
    /// record is `<app>.backup` in the data directory either way, where
    /// `backup run-due` looks for it).
    pub fn record_image(&self) -> PathBuf {
        match (&self.data, self.dumps.first()) {
            (Some(data), _) => data.image.clone(),
            (None, Some(dump)) => {
                dump.accessory.data.image.with_file_name(format!("{}.ext4", self.app.as_str()))
            }
            (None, None) => PathBuf::new(),
        }
    }
    /// The tag every snapshot of `app` carries.
    pub fn app_tag(app: &AppName) -> String {
        format!("app={}", app.as_str())
    }
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(u64::from(self.timeout_seconds))
    }
}

/// Whether the retention ran after a backup (a failure there leaves the
/// new snapshot in place and only keeps more old ones than the rule says).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetentionApplied {
    Applied,
    Failed,
}

/// What one backup left, as the agent and the operator read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupRun {
    /// The snapshot of the app's data; absent for an app without data
    /// (its accessories' dumps only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotId>,
    /// Files and bytes the data's snapshot holds, and the bytes it added to
    /// the repository (after deduplication and compression); 0 without data.
    pub files: u64,
    pub bytes: u64,
    pub added_bytes: u64,
    /// How long the app's writes waited: its data's filesystem was frozen
    /// while restic read it (reads go on).
    pub writes_paused_ms: u64,
    /// One snapshot per accessory whose database was dumped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dumps: Vec<DumpDone>,
    pub retention: RetentionApplied,
}

impl BackupRun {
    /// The snapshot the app's backup record names: the data's, or the first
    /// dump's; with the bytes all of them hold and added.
    pub fn done_at(&self, at: i64) -> Option<BackupDone> {
        let snapshot = self.snapshot.clone().or_else(|| self.dumps.first().map(|d| d.snapshot.clone()))?;
        Some(BackupDone {
            at,
            snapshot,
            bytes: self.bytes + self.dumps.iter().map(|d| d.bytes).sum::<u64>(),
            added_bytes: self.added_bytes + self.dumps.iter().map(|d| d.added_bytes).sum::<u64>(),
        })
    }
}

/// One accessory's dump a backup recorded: its snapshot, the dump's size
/// and what it added to the repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DumpDone {
    pub accessory: super::AccessoryName,
    pub snapshot: SnapshotId,
    pub bytes: u64,
    pub added_bytes: u64,
}

/// One snapshot of an app's data as a `restore` plan shows it, read from
/// the repository at prepare (and again at execute, so a snapshot that
/// changed or went voids the plan).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotFacts {
    /// The full id (64 hex), whatever prefix was asked.
    pub id: SnapshotId,
    /// When it was taken (RFC 3339, as restic records it).
    pub time: String,
    /// Its tags: the app, catalog entry, image and plan that made it.
    pub tags: Vec<String>,
    /// The one path it holds (the app's data mount when volce-lab made it).
    pub paths: Vec<String>,
    pub files: u64,
    pub bytes: u64,
}

impl SnapshotFacts {
    /// The value of the tag `key=...`, if it has one.
    pub fn tag(&self, key: &str) -> Option<&str> {
        tag_value(&self.tags, key)
    }
}

/// The value of the tag `key=...` among a snapshot's `tags`, if any.
pub fn tag_value<'a>(tags: &'a [String], key: &str) -> Option<&'a str> {
    tags.iter().find_map(|tag| tag.strip_prefix(key)?.strip_prefix('='))
}

/// What the engine does for a `restore` plan: stop the app if it runs,
/// take a safety snapshot of what the snapshot replaces (the app's data,
/// or one accessory's database as a dump), put the snapshot's in its
/// place, and start the app again and check its health; a failure after
/// the data was touched puts the safety snapshot back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RestoreSpecForm")]
pub struct RestoreSpec {
    pub plan_id: PlanId,
    pub app: AppName,
    pub entry: String,
    pub image: ImageRef,
    /// `"data": {...}` or `"dump": {...}`: a plan made before dumps
    /// existed reads as one of data.
    #[serde(flatten)]
    pub replaced: Replaced,
    pub config: BackupConfig,
    pub snapshot: SnapshotFacts,
    /// The gateway's and the app's containers, stopped first (in that
    /// order) when the app runs; empty for a stopped app.
    pub stop: Vec<ContainerId>,
    /// How the app is started again afterwards; `None` for an app that was
    /// stopped (it stays stopped).
    pub start: Option<StartSpec>,
    pub timeout_seconds: u32,
}

/// How a sealed [`RestoreSpec`] is read: every field known (a closed set,
/// as every sealed plan's), and exactly one of `data` and `dump`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RestoreSpecForm {
    plan_id: PlanId,
    app: AppName,
    entry: String,
    image: ImageRef,
    #[serde(default)]
    data: Option<DataUse>,
    #[serde(default)]
    dump: Option<Box<DumpUse>>,
    config: BackupConfig,
    snapshot: SnapshotFacts,
    stop: Vec<ContainerId>,
    start: Option<StartSpec>,
    timeout_seconds: u32,
}

impl TryFrom<RestoreSpecForm> for RestoreSpec {
    type Error = &'static str;
    fn try_from(form: RestoreSpecForm) -> Result<RestoreSpec, &'static str> {
        let replaced = match (form.data, form.dump) {
            (Some(data), None) => Replaced::Data(data),
            (None, Some(dump)) => Replaced::Dump(dump),
            _ => return Err("a restore replaces exactly one of data and dump"),
        };
        Ok(RestoreSpec {
            plan_id: form.plan_id,
            app: form.app,
            entry: form.entry,
            image: form.image,
            replaced,
            config: form.config,
            snapshot: form.snapshot,
            stop: form.stop,
            start: form.start,
            timeout_seconds: form.timeout_seconds,
        })
    }
}

/// What a restore replaces: the app's data directory, or the database of
/// one of its accessories (loaded from a dump, the accessory running).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Replaced {
    Data(DataUse),
    Dump(Box<DumpUse>),
}

impl RestoreSpec {
    /// The safety snapshot's tags: a backup's of the same kind, and `safety`.
    pub fn safety_tags(&self) -> Vec<String> {
        let mut tags = snapshot_tags(&self.plan_id, &self.app, &self.entry, &self.image);
        if let Replaced::Dump(dump) = &self.replaced {
            tags.push(dump.tag());
        }
        tags.push("safety".to_owned());
        tags
    }
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(u64::from(self.timeout_seconds))
    }
}

/// What a restore left: the snapshot it put in place and the safety
/// snapshot of the data it replaced (the way back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreRun {
    pub restored: SnapshotId,
    pub safety: SnapshotId,
    /// Whether the app was started again and answered its health check
    /// (false: it was stopped before the restore and stays so).
    pub started: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ssh_destination_is_only_read_from_the_sftp_user_at_host_form() {
        let destination =
            |repo: &str| BackupRepository::parse(repo).unwrap().sftp_destination().map(str::to_owned);
        assert_eq!(destination("sftp:backup@vault:/srv/restic").as_deref(), Some("backup@vault"));
        assert_eq!(destination("sftp:vault:/srv/restic").as_deref(), Some("vault"));
        for none in
            ["/srv/backup", "sftp://backup@vault:2222//srv/restic", "sftp:vault", "sftp:vault:relative"]
        {
            assert_eq!(destination(none), None, "{none}");
        }
    }

    #[test]
    fn a_repository_is_an_absolute_path_or_sftp_and_nothing_that_reads_as_an_option() {
        for good in ["/srv/backup/volce-lab", "sftp:backup@vault:/srv/restic", "/mnt/usb"] {
            assert!(BackupRepository::parse(good).is_some(), "{good}");
        }
        let long = format!("/{}", "a".repeat(512));
        for bad in
            ["", "relative/dir", "-r", "/srv/../etc", "/srv/a b", "/srv/a\nb", "sftp:", "sftp:-oProxy", &long]
        {
            assert!(BackupRepository::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn retention_needs_a_rule_within_bounds_and_names_restic_options_in_order() {
        assert!(!Retention::default().valid());
        assert!(!Retention { daily: Some(0), ..Retention::default() }.valid());
        assert!(!Retention { last: Some(KEEP_MAX + 1), ..Retention::default() }.valid());
        let keep = Retention { monthly: Some(6), last: Some(3), ..Retention::default() };
        assert!(keep.valid());
        assert_eq!(keep.rules(), vec![("--keep-last", 3), ("--keep-monthly", 6)]);
        assert_eq!(keep.describe(), "last 3, monthly 6");
    }

    #[test]
    fn a_backup_is_due_after_its_period_and_late_after_two() {
        let done = |at| BackupRecord {
            last_success: Some(BackupDone {
                at,
                snapshot: SnapshotId::parse("0123abcd").unwrap(),
                bytes: 1,
                added_bytes: 1,
            }),
            last_failure: None,
        };
        assert!(BackupRecord::default().due(BackupEvery::Daily, 0), "never backed up");
        assert!(!done(1000).due(BackupEvery::Hourly, 1000 + 3599));
        assert!(done(1000).due(BackupEvery::Hourly, 1000 + 3600));
        assert!(!done(0).late(BackupEvery::Daily, 2 * 86_400), "one missed run is tolerated");
        assert!(done(0).late(BackupEvery::Daily, 2 * 86_400 + 1));
        assert!(BackupRecord::default().late(BackupEvery::Hourly, 0), "a scheduled app never backed up");
    }

    /// A restore plan sealed before dumps existed (`"data": {...}` beside
    /// the other fields) reads as one of data, and writes back the same;
    /// one with an unknown field, or with neither data nor dump, is refused.
    #[test]
    fn a_restore_plan_of_data_keeps_its_sealed_form() {
        let sealed = serde_json::json!({
            "plan_id": "f".repeat(32), "app": "blog", "entry": "web",
            "image": format!("registry.example/web@sha256:{}", "1".repeat(64)),
            "data": {"path": "/data", "image": "/state/data/blog.ext4", "mount": "/state/data/blog", "max_mib": 64},
            "config": {"repository": "/srv/backup", "password_file": "/etc/volce-lab/backup.password",
                       "keep": {"last": 3}},
            "snapshot": {"id": "0123abcd", "time": "2026-12-06T16:14:45Z", "tags": [], "paths": ["/state/data/blog"],
                         "files": 1, "bytes": 1},
            "stop": [], "start": null, "timeout_seconds": 180
        });
        let spec: RestoreSpec = serde_json::from_value(sealed.clone()).unwrap();
        assert!(matches!(&spec.replaced, Replaced::Data(data) if data.max_mib == 64));
        assert_eq!(serde_json::to_value(&spec).unwrap()["data"], sealed["data"]);
        assert!(serde_json::to_value(&spec).unwrap().get("replaced").is_none());
        // A closed set: an unknown field, or data and dump both, is refused.
        let mut stray = sealed.clone();
        stray["repository"] = serde_json::json!("/tmp/mine");
        assert!(serde_json::from_value::<RestoreSpec>(stray).is_err());
        let mut neither = sealed;
        neither.as_object_mut().unwrap().remove("data");
        assert!(serde_json::from_value::<RestoreSpec>(neither).is_err());
    }

    #[test]
    fn a_snapshot_id_is_short_or_full_lowercase_hex() {
        assert!(SnapshotId::parse("49effc15").is_some());
        assert!(SnapshotId::parse(&"a".repeat(64)).is_some());
        for bad in ["49effc1", "49EFFC15", "latest", "49effc15:/data", &"a".repeat(65)] {
            assert!(SnapshotId::parse(bad).is_none(), "{bad}");
        }
    }
}
