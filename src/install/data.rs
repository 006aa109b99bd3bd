//! `volce-lab-host data list|mount|purge`: the operator's commands for the
//! apps' data images (`crate::docker::data_volume`; docs/docker-policy.md,
//! "Data"). Runs as root on the operator's terminal and, for `data mount`,
//! once at boot from the package's `volce-lab-data.service`
//! (`run.rs`: the shipped commands); a layer above `crate::host`, so the
//! agent has no path here (the rpc request enum has no variant for it, and
//! host imports nothing from `install`).
//!
//! Why they exist: `remove_app` keeps an app's data unless its plan says
//! `purge_data`, and kept data with no app left had no way to be seen or
//! deleted; after a reboot nothing mounted the images until a start or
//! restart plan, so Docker's restart policy brought apps back onto their
//! empty, root-owned mount points.
//!
//! - [`list`]: every image in the state directory's `data/`, with its size,
//!   whether it is mounted (and what it uses then), and whether an app
//!   record holds it, plus every record whose image is missing.
//! - [`mount_all`]: mounts the image of every app record with data, and
//!   never makes one: a missing image is reported (new, empty data must not
//!   pass for the app's own; only a deploy makes data).
//! - [`prepare_purge`] then [`purge`]: deletes kept data that no app record
//!   holds and no open plan names; a record's data goes only with its
//!   remove_app plan (`purge_data: true`), which the operator approves as
//!   any plan. [`purge`] checks again after the confirmation, so a deploy
//!   planned meanwhile is not robbed of the data its plan re-attaches.
//!
//! No audit row: the audit table's `operation` CHECK list has no data
//! operation, and these commands do not add a schema step (the catalog
//! commands have none either). What they did is printed instead.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use crate::control::app_record::{AppRecord, AppState};
use crate::docker::EngineError;
use crate::docker::data_volume::{self, Mounted};
use crate::host::HostPaths;
use crate::text::for_terminal as esc;
use crate::vocab::{AccessoryName, AccessoryUse, AppName, Code, Refusal};

mod purge;
mod run;
pub use purge::{PROMPT, Purge, prepare_purge, purge};
pub use run::{run_data_list, run_data_mount, run_data_purge};

/// What the data commands need of the host's mounts: `data_volume` in the
/// shipped binary ([`HostMounts`]), a fake in tests (mounting needs root).
pub trait DataMounts {
    fn mounted(&self, mount: &Path) -> Result<bool, EngineError>;
    /// MiB in use on the filesystem mounted on `mount`.
    fn used_mib(&self, mount: &Path) -> Result<u64, EngineError>;
    /// Mounts the kept `image` on `mount`; never makes an image.
    fn mount_kept(&self, image: &Path, mount: &Path) -> Result<Mounted, EngineError>;
    fn unmount(&self, mount: &Path) -> Result<(), EngineError>;
}

/// The host's own mounts, through `crate::docker::data_volume`.
pub struct HostMounts;

impl DataMounts for HostMounts {
    fn mounted(&self, mount: &Path) -> Result<bool, EngineError> {
        data_volume::mounted(mount)
    }
    fn used_mib(&self, mount: &Path) -> Result<u64, EngineError> {
        data_volume::used_mib(mount)
    }
    fn mount_kept(&self, image: &Path, mount: &Path) -> Result<Mounted, EngineError> {
        data_volume::mount_kept(image, mount)
    }
    fn unmount(&self, mount: &Path) -> Result<(), EngineError> {
        data_volume::unmount(mount)
    }
}

/// What is at an app's image path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// A data image of this many MiB.
    Image(u32),
    /// Nothing (a record names it: its image is missing).
    Missing,
    /// Something that is not a data image volce-lab made.
    NotOurs,
}

/// One app name's data: where it is, what is there, who holds it.
#[derive(Debug, Clone)]
struct Entry {
    image: PathBuf,
    mount: PathBuf,
    found: Found,
    /// The state of the app record that holds this image, if one does.
    holder: Option<AppState>,
    /// An app record of this name exists but uses no data.
    record_without_data: bool,
    /// Kept data (no record holds it): the catalog entry and path its
    /// record beside the image names (issue 38), `Ok(None)` when there is
    /// no record, `Err` when the record is not one volce-lab wrote.
    kept_for: Result<Option<crate::vocab::KeptFor>, ()>,
}

/// The image and mount point of `app`'s data, as the deploy derives them
/// (`control::validate::data`).
/// A name a data image can have: an app's (`<app>.ext4`) or one of its
/// accessories' (`<app>@<accessory>.ext4`, `crate::vocab::AccessoryUse::data_paths`).
fn is_data_key(key: &str) -> bool {
    match key.split_once('@') {
        Some((app, accessory)) => AppName::parse(app).is_some() && AccessoryName::parse(accessory).is_some(),
        None => AppName::parse(key).is_some(),
    }
}

/// The app a data key belongs to.
fn app_of(key: &str) -> &str {
    key.split_once('@').map_or(key, |(app, _)| app)
}

fn paths_of(paths: &HostPaths, app: &str) -> (PathBuf, PathBuf) {
    let dir = paths.data_dir();
    (dir.join(format!("{app}.ext4")), dir.join(app))
}

fn found_at(image: &Path, owner: u32) -> Found {
    match data_volume::kept_mib_of(image, owner) {
        Ok(Some(mib)) => Found::Image(mib),
        Ok(None) => Found::Missing,
        Err(_) => Found::NotOurs,
    }
}

fn unsafe_dir(dir: &Path) -> Refusal {
    Refusal::new(
        Code::UnsafePath,
        format!(
            "{} is not a directory of root's (or is a symlink); nothing was read or changed. Run \
             volce-lab-host doctor, and move it away if volce-lab did not make it.",
            dir.display()
        ),
    )
}

/// The app names that have an image in `data/`. A missing directory is
/// none (no deploy with data ran yet); one that is not root's own real
/// directory is refused: nothing in it is trusted, let alone deleted.
fn image_names(paths: &HostPaths) -> Result<Vec<String>, Refusal> {
    let dir = paths.data_dir();
    match std::fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Ok(meta) if meta.is_dir() && meta.uid() == paths.owner_uid => {}
        _ => return Err(unsafe_dir(&dir)),
    }
    let entries = std::fs::read_dir(&dir).map_err(|_| unsafe_dir(&dir))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|_| unsafe_dir(&dir))?;
        let name = entry.file_name();
        let Some(app) = name.to_str().and_then(|name| name.strip_suffix(".ext4")) else { continue };
        // Only names a deploy could have made; anything else is not ours.
        if is_data_key(app) {
            names.push(app.to_owned());
        }
    }
    Ok(names)
}

fn read_apps(paths: &HostPaths) -> Result<BTreeMap<String, AppRecord>, Refusal> {
    crate::store::read_apps(&paths.database()).map_err(|e| e.refusal())
}

/// Every app name with an image in `data/` or a record with data.
fn survey(paths: &HostPaths) -> Result<BTreeMap<String, Entry>, Refusal> {
    let apps = read_apps(paths)?;
    let mut names = image_names(paths)?;
    names.extend(apps.values().filter(|record| record.data.is_some()).map(|r| r.app.as_str().to_owned()));
    for record in apps.values() {
        names.extend(record.accessories.iter().map(|a| AccessoryUse::data_key(&record.app, &a.name)));
    }
    let mut entries = BTreeMap::new();
    for app in names {
        let (image, mount) = paths_of(paths, &app);
        let record = apps.get(app_of(&app));
        let holds = |record: &&AppRecord| {
            let accessory = record.accessories.iter().any(|a| a.data.image == image);
            accessory || record.data.as_ref().is_some_and(|data| data.image == image)
        };
        let entry = Entry {
            found: found_at(&image, paths.owner_uid),
            holder: record.filter(holds).map(|record| record.state),
            record_without_data: record.is_some_and(|record| !holds(&record)),
            kept_for: data_volume::kept_for_of(&image, paths.owner_uid).map_err(|_| ()),
            image,
            mount,
        };
        entries.insert(app, entry);
    }
    Ok(entries)
}

/// Whom kept data belongs to, as `data list` says it: a deploy re-attaches
/// it only under that catalog entry and path (`data_entry_mismatch`).
fn kept_for(kept: &Result<Option<crate::vocab::KeptFor>, ()>) -> String {
    match kept {
        Ok(Some(kept)) => format!(", for catalog entry {} at {}", esc(&kept.entry), kept.path.as_str()),
        Ok(None) => ", no record of its catalog entry (no deploy re-attaches it)".to_owned(),
        Err(()) => ", its entry record is not one volce-lab wrote".to_owned(),
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The step an [`EngineError`] of `data_volume` names, as a sentence part:
/// never a program's raw output.
fn step_of(error: &EngineError) -> String {
    match error {
        EngineError::Host { step } => format!("could not {step}"),
        EngineError::Call { step, execution } => match execution.exit_code {
            Some(code) => format!("could not {step} (it exited with code {code})"),
            None => format!("could not {step} (it did not finish)"),
        },
        other => format!("failed: {other}"),
    }
}

/// `data list`: one line per app name, images first by name.
pub fn list(paths: &HostPaths, mounts: &dyn DataMounts) -> Result<String, Refusal> {
    let entries = survey(paths)?;
    let images = entries.values().filter(|entry| entry.found != Found::Missing).count();
    let dir = paths.data_dir();
    let mut out = if images == 0 {
        format!("No data images in {}.\n", dir.display())
    } else {
        format!("{} in {}:\n", plural(images, "data image", "data images"), dir.display())
    };
    let mut rows = Vec::with_capacity(entries.len());
    for (app, entry) in &entries {
        let size = match entry.found {
            Found::Image(mib) => format!("{mib} MiB"),
            Found::Missing => "image missing".to_owned(),
            Found::NotOurs => "not ours".to_owned(),
        };
        let mounted = match mounts.mounted(&entry.mount) {
            Ok(true) => match mounts.used_mib(&entry.mount) {
                Ok(used) => format!("mounted, {used} MiB used"),
                Err(_) => "mounted".to_owned(),
            },
            Ok(false) => "not mounted".to_owned(),
            Err(_) => "mount state unknown".to_owned(),
        };
        // The app that holds it: an accessory's data is its app's.
        let holder = app_of(app);
        let held = match (entry.holder, entry.found) {
            (Some(state), Found::Missing) => format!(
                "app {holder} ({}): restore its image from a backup, then run `volce-lab-host data mount`",
                state.as_str()
            ),
            (Some(state), Found::NotOurs) => format!(
                "app {holder} ({}): its image is not a data image volce-lab made (not root's regular file)",
                state.as_str()
            ),
            (Some(state), Found::Image(_)) => format!("app {holder} ({})", state.as_str()),
            (None, Found::NotOurs) => {
                "not a data image volce-lab made (not root's regular file): move it away by hand".to_owned()
            }
            (None, _) if entry.record_without_data => {
                format!(
                    "kept{}; the app {app} runs without data: `volce-lab-host data purge {app}` deletes it",
                    kept_for(&entry.kept_for)
                )
            }
            (None, _) => format!(
                "kept, no app{}: `volce-lab-host data purge {app}` deletes it",
                kept_for(&entry.kept_for)
            ),
        };
        rows.push([app.clone(), size, mounted, held]);
    }
    // Aligned columns; the last one is as long as it is.
    let width = |column: usize| rows.iter().map(|row| row[column].len()).max().unwrap_or(0);
    let (app_w, size_w, mounted_w) = (width(0), width(1), width(2));
    for [app, size, mounted, held] in &rows {
        out.push_str(&format!("  {app:<app_w$}  {size:<size_w$}  {mounted:<mounted_w$}  {held}\n"));
    }
    Ok(out)
}

/// What [`mount_all`] did: one line per app with data, and how many failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountReport {
    pub text: String,
    pub failed: usize,
}

impl MountReport {
    /// The refusal the command ends with when something failed.
    pub fn refusal(&self) -> Option<Refusal> {
        (self.failed > 0).then(|| {
            Refusal::new(
                Code::DataActionFailed,
                format!(
                    "The data of {} could not be mounted (each line above says why); its app sees an empty \
                     directory it cannot read or write until it is. Fix what the line says, then run \
                     `volce-lab-host data mount` again.",
                    plural(self.failed, "app", "apps")
                ),
            )
        })
    }
}

/// `data mount`: mounts the kept image of every app record with data that
/// is not mounted. Never makes an image, and kept data with no app stays
/// unmounted (nothing would use it).
pub fn mount_all(paths: &HostPaths, mounts: &dyn DataMounts) -> Result<MountReport, Refusal> {
    let entries = survey(paths)?;
    let mut report = MountReport { text: String::new(), failed: 0 };
    let (mut now, mut already) = (0, 0);
    for (app, entry) in entries.iter().filter(|(_, entry)| entry.holder.is_some()) {
        let (image, mount) = (entry.image.display(), entry.mount.display());
        let line = match entry.found {
            Found::Missing => Err(format!(
                "its image {image} is missing; nothing was made in its place (no plan makes one for a recorded \
                 app either: its start or restart is refused data_not_found). Restore the image from your \
                 backup, then run this again"
            )),
            Found::NotOurs => Err(format!(
                "{image} is not a data image volce-lab made (not root's regular file); move it away"
            )),
            Found::Image(_) => match mounts.mount_kept(&entry.image, &entry.mount) {
                Ok(Mounted::Now) => {
                    now += 1;
                    Ok(format!("mounted {image} on {mount}"))
                }
                Ok(Mounted::Already) => {
                    already += 1;
                    Ok(format!("already mounted on {mount}"))
                }
                Err(error) => Err(format!("{} ({image} on {mount})", step_of(&error))),
            },
        };
        match line {
            Ok(text) => report.text.push_str(&format!("{app}: {text}.\n")),
            Err(text) => {
                report.failed += 1;
                report.text.push_str(&format!("{app}: NOT MOUNTED: {text}.\n"));
            }
        }
    }
    report.text.push_str(&if now + already + report.failed == 0 {
        "No app has data: nothing to mount.\n".to_owned()
    } else {
        format!("Mounted {now}, already mounted {already}, failed {}.\n", report.failed)
    });
    Ok(report)
}
