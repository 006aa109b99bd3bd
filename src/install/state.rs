//! `volce-lab-host state backup|restore`: the operator's copies of the
//! state database, and putting one back, including the way back to an
//! older package (docs/server-install.md, Upgrading). Runs as root on the
//! operator's terminal; a layer above `crate::host`, so the agent has no
//! path here.
//!
//! - [`backup`]: one consistent copy by SQLite's online backup API
//!   (`store::backup`), taken when no plan is executing (checked in the copy
//!   itself, so a claim made meanwhile cannot slip in), whose audit chain
//!   verifies; a directory named with the time and the audit head it ends
//!   at, holding `state.db`, the env files (`env/`) and the data images'
//!   index (`data-index.txt`: name and size of each, not the data).
//! - [`restore`]: only while the agent's access is paused (`host::pause`)
//!   and no plan executes; refuses a backup of a newer schema or one that
//!   is damaged. It folds the current database's write-ahead log in and
//!   leaves WAL mode (SQLite grants that only when no one else has it
//!   open), copies the backup beside it and renames it into place.
//!   `--for-downgrade` first leaves the restore hold (`store::hold`), so
//!   this version never migrates the older backup, then lifts the pause:
//!   from then on every open answers `downgrade_pending` until the old
//!   package is installed, which knows neither file and serves as before.
//! - [`diff`] and [`remove_container`] (`differences.rs`): what a restored
//!   record and the engine disagree on, each with the command that ends it.
//!
//! Their audit rows carry no operation (the table's list predates them,
//! `store::AuditOperation`): the backup's is the last row of the backup, so
//! the head in its name is the row of the backup itself; the restore's is
//! written to the database it replaces (and the host's syslog), since the
//! restored one is not this version's to write.

use std::path::{Path, PathBuf};

use crate::host::request_row::{self, Caller};
use crate::host::{HostPaths, pause};
use crate::store::{AuditOperation, Store};
use crate::vocab::{Code, Refusal};

pub mod differences;
mod restore;
mod run;
pub use differences::{diff, remove_container};
pub use restore::restore;
pub use run::{run_state_backup, run_state_diff, run_state_remove_container, run_state_restore};

/// Where `state backup` writes unless told: root's, 0700.
pub const BACKUP_DIR: &str = "/var/backups/volce-lab";

fn failed(what: &str, path: &Path) -> Refusal {
    Refusal::new(
        Code::StateUnavailable,
        format!(
            "{what} {} failed; nothing was restored or kept. Check the disk, then run it again.",
            path.display()
        ),
    )
}

fn executing(plan: &crate::vocab::PlanId, action: crate::vocab::Action, what: &str) -> Refusal {
    Refusal::new(
        Code::PlanExecuting,
        format!(
            "Plan {plan} ({}) is executing, so {what} now could catch it half-way; nothing was {}. Run it again \
             once the plan has finished (`volce-lab-host list` shows it).",
            action.as_str(),
            if what == "a backup" { "kept" } else { "restored" }
        ),
    )
}

/// `state backup [--into DIR]`: the directory it wrote.
pub fn backup(paths: &HostPaths, into: &Path, caller: &Caller, now: i64) -> Result<PathBuf, Refusal> {
    let Some(mut store) = request_row::open_for_rows(paths)? else {
        return Err(Refusal::new(
            Code::StateUnavailable,
            "There is no state database to back up (or it cannot be opened: `volce-lab-host doctor` says why); nothing was written.",
        ));
    };
    if let Some((plan, action, _)) = store.read(|tx| tx.executing_plans()).map_err(|e| e.refusal())?.first() {
        return Err(executing(plan, *action, "a backup"));
    }
    pause::record(&mut store, caller, AuditOperation::StateBackup, &Default::default(), now)?;
    make_private_dir(into)?;
    let partial = into.join(format!(".partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    make_private_dir(&partial)?;
    let copy = HostPaths { state_dir: partial.clone(), ..paths.clone() };
    let written = (|| {
        store.backup_to(&copy.database()).map_err(|_| failed("The copy to", &copy.database()))?;
        drop(store);
        let head = checked_copy(&copy)?;
        copy_env_files(paths, &partial.join("env"))?;
        let index = data_index(&paths.data_dir());
        std::fs::write(partial.join("data-index.txt"), index).map_err(|_| failed("Writing", &partial))?;
        let name = format!("volce-lab-state-{}-{}", stamp(now), &head[..16]);
        let done = into.join(name);
        std::fs::rename(&partial, &done).map_err(|_| failed("Naming", &done))?;
        Ok(done)
    })();
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    written
}

/// The copy at `copy` holds no executing plan and its chain verifies:
/// returns its head.
fn checked_copy(copy: &HostPaths) -> Result<String, Refusal> {
    let mut store = Store::open(&copy.database()).map_err(|e| e.refusal())?;
    if let Some((plan, action, _)) = store.read(|tx| tx.executing_plans()).map_err(|e| e.refusal())?.first() {
        return Err(executing(plan, *action, "a backup"));
    }
    let verified = store.read(|tx| tx.verify_audit(None)).map_err(|e| e.refusal())?;
    match (verified.intact(), verified.head.hash()) {
        (true, Some(hash)) => Ok(hash.to_owned()),
        _ => Err(Refusal::new(
            Code::AuditChainBroken,
            "The copy's audit chain does not verify, so it was not kept; run `volce-lab-host audit verify`.",
        )),
    }
}

/// UTC time as a file name takes it: 20261206T075500Z.
fn stamp(now: i64) -> String {
    crate::text::rfc3339_seconds(now).replace(['-', ':'], "")
}

fn make_private_dir(dir: &Path) -> Result<(), Refusal> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    match std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir) {
        Ok(()) => {}
        Err(_) => return Err(failed("Making", dir)),
    }
    let handle = crate::host::paths::open_dir(dir, nix::unistd::geteuid().as_raw())?;
    let mode = handle.metadata().map_err(|_| failed("Inspecting", dir))?.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(Refusal::new(
            Code::UnsafePath,
            format!(
                "{} has mode {:04o}; a backup holds every plan and the env files, so it must be 0700. Run `chmod 0700 {0}`.",
                dir.display(),
                mode & 0o7777
            ),
        ));
    }
    Ok(())
}

/// The env files (secrets) beside the backup, root's 0600 as they are.
fn copy_env_files(paths: &HostPaths, to: &Path) -> Result<(), Refusal> {
    let from = crate::host::env_files::EnvDir::of(paths).dir;
    make_private_dir(to)?;
    let Ok(entries) = std::fs::read_dir(&from) else { return Ok(()) };
    for entry in entries.flatten() {
        let is_file = entry.file_type().is_ok_and(|kind| kind.is_file());
        if is_file {
            let dest = to.join(entry.file_name());
            std::fs::copy(entry.path(), &dest).map_err(|_| failed("Copying", &entry.path()))?;
        }
    }
    Ok(())
}

/// One line per data image: its file name and size in bytes.
fn data_index(data_dir: &Path) -> String {
    let mut lines: Vec<String> = std::fs::read_dir(data_dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| {
                    let meta = entry.metadata().ok().filter(std::fs::Metadata::is_file)?;
                    Some(format!("{} {}", entry.file_name().to_string_lossy(), meta.len()))
                })
                .collect()
        })
        .unwrap_or_default();
    lines.sort();
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// What `state restore` was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreFor {
    /// Stay on this version: the next open migrates an older backup.
    ThisVersion,
    /// An older package follows: hold the backup unmigrated.
    Downgrade,
}

/// The database a BACKUP argument names: a backup directory's `state.db`,
/// or a database file.
pub fn backup_database(backup: &Path) -> PathBuf {
    if backup.is_dir() { HostPaths::database_in(backup) } else { backup.to_owned() }
}

/// The schema of the backup at `database`, checked: a database, not
/// damaged, not newer than this version.
fn backup_schema(database: &Path) -> Result<i64, Refusal> {
    let unusable = || {
        Refusal::new(
            Code::StateCorrupt,
            format!(
                "{} is not an intact volce-lab state database; nothing was restored.",
                database.display()
            ),
        )
    };
    let schema = crate::store::schema_version_of(database).map_err(|_| unusable())?.ok_or_else(unusable)?;
    if schema > Store::supported_version() {
        return Err(Refusal::new(
            Code::StateTooNew,
            format!(
                "{} is at schema {schema}, newer than this version's {}: it was written by a newer volce-lab; \
                 nothing was restored. Restore it with that version.",
                database.display(),
                Store::supported_version()
            ),
        ));
    }
    let health = crate::store::read_health(database).map_err(|_| unusable())?.ok_or_else(unusable)?;
    if !health.integrity_ok {
        return Err(unusable());
    }
    Ok(schema)
}
