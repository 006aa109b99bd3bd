//! `state restore BACKUP [--for-downgrade]`: a backup put back in place of
//! the state database, while the agent's access is paused. Runs as root on
//! the operator's terminal; see the module header of `state` for the order
//! and why it is safe with an agent still polling.

use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use super::{RestoreFor, backup_database, backup_schema, executing, failed};
use crate::host::request_row::{self, Caller};
use crate::host::{HostPaths, pause};
use crate::store::{AuditOperation, Store};
use crate::vocab::{Code, Refusal};

/// Restores `backup` (a `state backup` directory or a database file) on
/// `paths`. Prints what it did and the next step.
pub fn restore(
    paths: &HostPaths,
    backup: &Path,
    goal: RestoreFor,
    caller: &Caller,
    now: i64,
) -> Result<String, Refusal> {
    if pause::current(paths)?.is_none() {
        return Err(Refusal::new(
            Code::PauseRequired,
            "state restore replaces the database the agent's requests use, so it runs only while they are \
             paused; nothing was restored. Run `sudo volce-lab-host pause --reason restore` first, then this \
             command again.",
        ));
    }
    let database = backup_database(backup);
    let schema = backup_schema(&database)?;
    let supported = Store::supported_version();
    if goal == RestoreFor::Downgrade && schema == supported {
        return Err(Refusal::new(
            Code::InvalidParameters,
            format!(
                "{} is at this version's schema {schema}, which no older package reads, so there is nothing to \
                 hold for a downgrade; nothing was restored. Restore the backup taken before the upgrade, or \
                 this one without --for-downgrade.",
                database.display()
            ),
        ));
    }
    // Before anything is recorded: a database another process holds open
    // (a `list --watch`, say) is refused as it is, with nothing written.
    exclusively(paths, || Ok(()))?;
    record_and_check(paths, caller, now)?;
    put_in_place(paths, &database, goal)?;
    Ok(match goal {
        RestoreFor::Downgrade => format!(
            "Restored {} (schema {schema}) and held it for the downgrade: this version refuses every request \
             and command that would open it (downgrade_pending), and the pause is lifted since the hold does its \
             work. Install the old package now: apt-get install --allow-downgrades ./volce-lab_OLD-1_amd64.deb \
             (its package-check passes: the old version reads schema {schema}). The old version knows no pause \
             and serves the agent as before.\n",
            database.display()
        ),
        RestoreFor::ThisVersion => format!(
            "Restored {} (schema {schema}); the next command migrates it to schema {supported} if it is older. \
             Check it with `volce-lab-host list` and `volce-lab-host doctor`, then `volce-lab-host resume`.\n",
            database.display()
        ),
    })
}

/// On the database about to be replaced: no plan executes, and the
/// restore (with the pause's counted refusals) is recorded there. A
/// database that cannot be opened (damaged, held by an earlier restore)
/// has no executing plan this version could see, nor a trail to extend.
fn record_and_check(paths: &HostPaths, caller: &Caller, now: i64) -> Result<(), Refusal> {
    let Some(mut store) = request_row::open_for_rows(paths)? else { return Ok(()) };
    if let Some((plan, action, _)) = store.read(|tx| tx.executing_plans()).map_err(|e| e.refusal())?.first() {
        return Err(executing(plan, *action, "a restore"));
    }
    let counts = crate::host::counted::take(paths, crate::host::counted::Tally::Paused);
    pause::record(&mut store, caller, AuditOperation::StateRestore, &counts, now)
}

/// Copies the backup beside the database and renames it into place, after
/// the current database gave up its write-ahead log (its lock held until
/// the rename). For a downgrade the
/// hold is left first, so the older database is never seen without it,
/// and the pause is lifted last.
fn put_in_place(paths: &HostPaths, database: &Path, goal: RestoreFor) -> Result<(), Refusal> {
    let target = paths.database();
    let candidate = paths.state_dir.join("state.db.restoring");
    let _ = std::fs::remove_file(&candidate);
    crate::store::copy_database(database, &candidate).map_err(|_| failed("The copy of", database))?;
    std::fs::File::open(&candidate)
        .and_then(|file| file.sync_all())
        .map_err(|_| failed("Syncing", &candidate))?;
    // Under the old file's lock: no helper opens it until the new one is in.
    exclusively(paths, || swap(&candidate, &target, goal)).inspect_err(|_| {
        let _ = std::fs::remove_file(&candidate);
    })?;
    if goal == RestoreFor::Downgrade {
        pause::lift(paths)?;
    }
    Ok(())
}

/// For a downgrade the hold first, so the older database is never there
/// without it; then the rename, made durable.
fn swap(candidate: &Path, target: &Path, goal: RestoreFor) -> Result<(), Refusal> {
    if goal == RestoreFor::Downgrade {
        let hold = crate::store::hold::hold_path(target);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&hold)
            .and_then(|mut file| {
                use std::io::Write as _;
                file.write_all(b"state restore --for-downgrade\n")?;
                file.sync_all()
            });
        written.map_err(|_| failed("Writing", &hold))?;
    }
    std::fs::rename(candidate, target).map_err(|_| failed("Renaming", candidate))?;
    if let Some(dir) = target.parent() {
        let _ = std::fs::File::open(dir).and_then(|dir| dir.sync_all());
    }
    Ok(())
}

/// Runs `work` on the current database released from its write-ahead log
/// and under its exclusive lock (`store::with_log_released`); at once when
/// there is no database yet. Refused `busy` when another process has it
/// open.
fn exclusively<T>(paths: &HostPaths, work: impl FnOnce() -> Result<T, Refusal>) -> Result<T, Refusal> {
    let target = paths.database();
    if !target.exists() {
        return work();
    }
    crate::store::with_log_released(&target, work)?.ok_or_else(|| {
        Refusal::new(
            Code::Busy,
            "Another process has the state database open (a `volce-lab-host list --watch`, a running \
             execute), so it cannot be replaced now; nothing was restored or recorded. End it (`ps -C \
             volce-lab-host`), then run the restore again.",
        )
    })
}
