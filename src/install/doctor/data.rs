//! The apps' data directories (docs/data.md): each recorded
//! app's image is there, root's, and mounted while the app should run; and
//! the programs that make and mount images exist. Findings only; the facts
//! come through [`super::DoctorProbe::data`].

use std::path::Path;

use super::finding::{Finding, fail, ok, warn};
use crate::control::app_record::AppState;

/// One recorded app's data, as the doctor sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFacts {
    /// The data's name: the app's, or `APP@NAME` for an accessory's.
    pub app: String,
    /// The app it belongs to (its backup schedule's key).
    pub owner: String,
    pub image: std::path::PathBuf,
    pub max_mib: u32,
    pub state: AppState,
    /// The image is a root-owned regular file.
    pub image_ok: bool,
    pub mounted: bool,
    /// What the host kept of the app's backups (`<app>.backup`): on the
    /// app's own data, or for an app without any on its first accessory's
    /// (its dumps are its backups); `None` on the others.
    pub backup: Option<crate::vocab::BackupRecord>,
    /// The unpacked image a restore left beside the data when it was
    /// stopped before that image took the data's place (`<app>.ext4.restore`).
    pub staged: Option<std::path::PathBuf>,
}

/// The programs a data directory needs (`crate::docker::data_volume`).
const PROGRAMS: &[&str] = &["/usr/sbin/mkfs.ext4", "/usr/bin/mount", "/usr/bin/umount"];

/// The facts of every recorded app with data, and of every accessory's
/// data (named `APP@NAME`, as `data list` names it), read without changing
/// anything.
pub fn read_data(state_dir: &Path) -> Result<Vec<DataFacts>, String> {
    let apps = crate::store::read_apps(&crate::host::HostPaths::database_in(state_dir))
        .map_err(|e| e.to_string())?;
    // The app's backup record goes on its own data, or for an app without
    // any on its first accessory's (its dumps are its backups).
    let facts = |record: &crate::control::app_record::AppRecord,
                 name: String,
                 data: &crate::vocab::DataUse,
                 holds_record: bool| DataFacts {
        app: name,
        owner: record.app.to_string(),
        image: data.image.clone(),
        max_mib: data.max_mib,
        state: record.state,
        image_ok: matches!(crate::docker::data_volume::kept_mib(&data.image), Ok(Some(_))),
        mounted: crate::docker::data_volume::mounted(&data.mount).unwrap_or(false),
        backup: holds_record.then(|| {
            crate::docker::backup::record(&crate::vocab::BackupRecord::app_image_beside(
                &data.image,
                &record.app,
            ))
        }),
        staged: Some(crate::docker::data_volume::staging_of(data).image).filter(|i| i.exists()),
    };
    Ok(apps
        .values()
        .flat_map(|record| {
            let own = record.data.as_ref().map(|data| facts(record, record.app.to_string(), data, true));
            let accessories = record.accessories.iter().enumerate().map(|(at, a)| {
                let name = crate::vocab::AccessoryUse::data_key(&record.app, &a.name);
                facts(record, name, &a.data, record.data.is_none() && at == 0)
            });
            own.into_iter().chain(accessories).collect::<Vec<_>>()
        })
        .collect())
}

/// With a `backup` in the policy: restic is there and the password file
/// private, and per scheduled app whether its backup is late and whether
/// its last attempt failed.
pub(super) fn check_backups(
    config: &crate::vocab::BackupConfig,
    facts: &[DataFacts],
    now: i64,
    findings: &mut Vec<Finding>,
) {
    if !Path::new(crate::docker::restic::RESTIC).exists() {
        findings.push(fail(
            "backup",
            "the policy names a backup repository but restic is not installed",
            "apt-get install restic",
        ));
    }
    match crate::docker::restic::password_file_ok(&config.password_file, 0) {
        Ok(()) => {
            findings.push(ok("backup", format!("{} is root's, mode 0600", config.password_file.display())))
        }
        Err(why) => findings.push(fail(
            "backup",
            format!("{}: {why}", config.password_file.display()),
            "chown root:root it and chmod 600 it (docs/policy.md#backuppassword_file)",
        )),
    }
    if let Some(file) = &config.ssh_config
        && let Err(why) = crate::docker::restic::ssh_config_ok(file, 0)
    {
        findings.push(fail(
            "backup",
            format!("{}: {why}", file.display()),
            "chown root:root it and chmod 644 it (docs/policy.md#backupssh_config)",
        ));
    }
    for data in facts {
        let Some(kept) = &data.backup else { continue };
        let app = data.owner.as_str();
        let subject = format!("backup of {}", crate::text::for_terminal(app));
        let last = kept
            .last_success
            .as_ref()
            .map_or_else(|| "never".to_owned(), |d| crate::text::rfc3339_seconds(d.at));
        let failed_since =
            kept.last_failure.as_ref().filter(|f| kept.last_success.as_ref().is_none_or(|d| f.at > d.at));
        let every = config.schedule.iter().find(|(name, _)| name.as_str() == app).map(|(_, every)| *every);
        if let Some(missed) = failed_since {
            findings.push(warn(
                subject,
                format!("its last backup failed at step '{}' ({}); last success: {last}", missed.step, crate::text::rfc3339_seconds(missed.at)),
                "fix the step (docs/troubleshooting.md, backup_failed), then `volce-lab-host backup run-due` or a backup plan",
            ));
        } else if let Some(every) = every.filter(|every| kept.late(*every, now)) {
            findings.push(warn(
                subject,
                format!("scheduled {every:?}, its last successful backup is late: {last}"),
                "systemctl enable --now volce-lab-backup.timer (it runs `volce-lab-host backup run-due` hourly), or run it now",
            ));
        } else if every.is_some() || kept.last_success.is_some() {
            findings.push(ok(subject, format!("last successful backup: {last}")));
        }
    }
}

/// One finding per app with data, and one for the programs when any
/// catalog entry or app has data.
pub(super) fn check_data(
    facts: Option<Result<Vec<DataFacts>, String>>,
    needed: bool,
    findings: &mut Vec<Finding>,
) {
    let facts = match facts {
        None => return,
        Some(Err(why)) => {
            findings.push(fail(
                "data",
                format!("the apps' data cannot be read: {why}"),
                "see the state finding",
            ));
            return;
        }
        Some(Ok(facts)) => facts,
    };
    if needed || !facts.is_empty() {
        let missing: Vec<&str> = PROGRAMS.iter().copied().filter(|p| !Path::new(p).exists()).collect();
        if missing.is_empty() {
            findings.push(ok("data", "mkfs.ext4, mount and umount are there for the apps' data directories"));
        } else {
            findings.push(fail(
                "data",
                format!("{} missing: apps with data cannot be deployed or started", missing.join(", ")),
                "apt-get install e2fsprogs mount",
            ));
        }
    }
    for data in facts {
        let subject = format!("data of {}", crate::text::for_terminal(&data.app));
        let image = crate::text::for_terminal(&data.image.display().to_string());
        if let Some(staged) = &data.staged {
            let staged = crate::text::for_terminal(&staged.display().to_string());
            findings.push(warn(
                subject.clone(),
                format!(
                    "{staged} is left by a restore that stopped before it took the data's place (the data is \
                     the one from before that restore); it holds {} MiB of the disk",
                    data.max_mib
                ),
                "the app's next restore plan or its remove_app removes it; or, once no plan is executing, \
                 `umount` its mount point (the same path without .ext4) if mounted and delete it",
            ));
        }
        if !data.image_ok {
            findings.push(fail(
                subject,
                format!("{image} is missing or not a root-owned regular file"),
                "restore it from your backup (data.md) and run `volce-lab-host data mount`, or \
                 remove the app with a remove_app plan",
            ));
        } else if data.mounted {
            findings.push(ok(subject, format!("{image} ({} MiB) is mounted", data.max_mib)));
        } else if data.state == AppState::Running {
            findings.push(warn(
                subject,
                format!("{image} is not mounted although the app should run (after a reboot?)"),
                "run `volce-lab-host data mount` (what volce-lab-data.service does at boot: is it enabled?), or \
                 approve a restart plan of the app: it mounts the data before the app starts",
            ));
        } else {
            findings.push(ok(
                subject,
                format!(
                    "{image} ({} MiB) is kept, not mounted while the app is {}",
                    data.max_mib,
                    data.state.as_str()
                ),
            ));
        }
    }
}
