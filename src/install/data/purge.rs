//! `volce-lab-host data purge APP`, prepared ([`prepare_purge`]: checks
//! and what the operator reads, nothing changed) and done ([`purge`]: the
//! checks again, then unmount, delete). Runs as root on the operator's
//! terminal. Only kept data goes here: no app record holds it and no open
//! plan names its app; a managed app's data goes with its remove_app plan.

use std::path::PathBuf;

use super::{DataMounts, Found, paths_of, step_of, survey};
use crate::docker::EngineError;
use crate::docker::data_volume;
use crate::host::HostPaths;
use crate::vocab::{Code, Refusal};

/// A prepared `data purge APP`: what the operator reads and what goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Purge {
    /// The app name, which the operator types to confirm.
    pub app: String,
    pub image: PathBuf,
    pub mount: PathBuf,
    pub mib: u32,
    /// What will be deleted, for the terminal.
    pub shown: String,
}

/// The question after [`Purge::shown`].
pub const PROMPT: &str = "To delete this data for good, type its name (the app's, or APP@ACCESSORY)";

/// Checks that `app`'s data is kept with no app record holding it and no
/// open plan naming it, and says what a purge deletes. Changes nothing.
pub fn prepare_purge(
    paths: &HostPaths,
    mounts: &dyn DataMounts,
    app: &str,
    now: i64,
) -> Result<Purge, Refusal> {
    if !super::is_data_key(app) {
        return Err(Refusal::new(
            Code::InvalidAppName,
            format!(
                "{} is not an app name (^[a-z][a-z0-9-]{{0,30}}$), nor APP@ACCESSORY for an accessory's data; \
                 nothing was deleted. `volce-lab-host data list` names the data there is.",
                crate::text::quoted(app, 80)
            ),
        ));
    }
    let (image, mount) = paths_of(paths, app);
    let entries = survey(paths)?;
    let entry = entries.get(app);
    let mib = match entry.map(|entry| entry.found) {
        Some(Found::Image(mib)) => mib,
        Some(Found::NotOurs) => {
            return Err(Refusal::new(
                Code::DataInvalid,
                format!(
                    "{} is not a data image volce-lab made (not root's regular file), so data purge leaves it \
                     alone; nothing was deleted. Look at it and move it away by hand.",
                    image.display()
                ),
            ));
        }
        Some(Found::Missing) | None => {
            return Err(Refusal::new(
                Code::DataNotFound,
                format!(
                    "No data of {app} is kept: {} does not exist. Nothing was deleted; `volce-lab-host data \
                     list` shows the data images there are.",
                    image.display()
                ),
            ));
        }
    };
    if let Some(state) = entry.and_then(|entry| entry.holder) {
        return Err(Refusal::new(
            Code::DataHeld,
            format!(
                "The data of {app} belongs to the managed app {} ({}); nothing was deleted. Its data goes \
                 with the app: a remove_app plan with purge_data: true, which you approve as any remove_app.",
                super::app_of(app),
                state.as_str()
            ),
        ));
    }
    refuse_open_plans(paths, super::app_of(app), now)?;
    let mounted = mounts.mounted(&mount).map_err(|e| failed(app, &e))?;
    let mut shown = format!("The data of {app}, kept with no app: {} ({mib} MiB).\n", image.display());
    if mounted {
        let used = mounts.used_mib(&mount).map_or_else(|_| "?".to_owned(), |used| used.to_string());
        shown.push_str(&format!(
            "It is mounted on {} ({used} MiB used): it will be unmounted.\n",
            mount.display()
        ));
    }
    shown.push_str(&format!(
        "Purging deletes the image and its mount point {} for good; keep a copy first if you may need it \
         (data.md).\n",
        mount.display()
    ));
    Ok(Purge { app: app.to_owned(), image, mount, mib, shown })
}

/// No plan that is pending, executing or needing inspection names `app`:
/// it may still use the data.
fn refuse_open_plans(paths: &HostPaths, app: &str, now: i64) -> Result<(), Refusal> {
    let open: Vec<String> = crate::store::read_awaiting(&paths.database(), now)
        .map_err(|e| e.refusal())?
        .iter()
        .filter(|stored| stored.plan.payload.app() == Some(app))
        .map(|stored| {
            format!("{} {} ({})", stored.plan.id, stored.plan.action.as_str(), stored.state.as_str())
        })
        .collect();
    if !open.is_empty() {
        return Err(Refusal::new(
            Code::DataPlanOpen,
            format!(
                "A plan names the app {app} and may still use its data: {}. Nothing was deleted. Reject a \
                 pending one (`volce-lab-host reject PLAN_ID`), let an executing one end, or resolve one that \
                 needs inspection, then purge again.",
                open.join(", ")
            ),
        ));
    }
    Ok(())
}

fn failed(app: &str, error: &EngineError) -> Refusal {
    Refusal::new(
        Code::DataActionFailed,
        format!(
            "The data of {app}: {}. Fix that on the server (a busy mount: fuser -vm on its mount point), then run \
             the command again.",
            step_of(error)
        ),
    )
}

/// Deletes confirmed kept data: the checks of [`prepare_purge`] again (a
/// deploy planned or an app recorded while the operator was asked stops
/// it, nothing deleted), then unmount, delete the image, remove the mount
/// point. Returns what to print.
pub fn purge(
    paths: &HostPaths,
    mounts: &dyn DataMounts,
    confirmed: &Purge,
    now: i64,
) -> Result<String, Refusal> {
    let again = prepare_purge(paths, mounts, &confirmed.app, now)?;
    if (&again.image, &again.mount, again.mib) != (&confirmed.image, &confirmed.mount, confirmed.mib) {
        return Err(Refusal::new(
            Code::DataActionFailed,
            format!(
                "The data of {} changed while you were asked; nothing was deleted. Run the command again.",
                confirmed.app
            ),
        ));
    }
    let app = confirmed.app.as_str();
    let mut out = String::new();
    if mounts.mounted(&confirmed.mount).map_err(|e| failed(app, &e))? {
        mounts.unmount(&confirmed.mount).map_err(|e| failed(app, &e))?;
        out.push_str(&format!("Unmounted {}.\n", confirmed.mount.display()));
    }
    data_volume::delete(&confirmed.image, &confirmed.mount).map_err(|e| failed(app, &e))?;
    out.push_str(&format!(
        "Deleted {} ({} MiB) and the mount point {}.\n",
        confirmed.image.display(),
        confirmed.mib,
        confirmed.mount.display()
    ));
    if let Some(record) = orphaned_backup_record(paths, super::app_of(app)) {
        std::fs::remove_file(&record).map_err(|_| {
            Refusal::new(
                Code::DataActionFailed,
                format!(
                    "The data of {app} was deleted, but its app's backup record {} could not be: delete it by \
                     hand (sudo rm {}).",
                    record.display(),
                    record.display()
                ),
            )
        })?;
        out.push_str(&format!(
            "Deleted the backup record {} (no data of its app is left).\n",
            record.display()
        ));
    }
    Ok(out)
}

/// The backup record of `owner` (`<owner>.backup`, where an app backed up
/// by its dumps only keeps it too) once no data image of that app is left
/// (its own or an accessory's): a later app of the same name must never
/// inherit its backups. `None` when there is none, or data of it is left.
fn orphaned_backup_record(paths: &HostPaths, owner: &str) -> Option<PathBuf> {
    let dir = paths.data_dir();
    let record = crate::vocab::BackupRecord::beside(&dir.join(format!("{owner}.ext4")));
    std::fs::symlink_metadata(&record).ok().filter(|meta| meta.is_file())?;
    let own = format!("{owner}.ext4");
    let accessory = format!("{owner}@");
    let left = std::fs::read_dir(&dir).ok()?.flatten().any(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        name == own || (name.starts_with(&accessory) && name.ends_with(".ext4"))
    });
    (!left).then_some(record)
}
