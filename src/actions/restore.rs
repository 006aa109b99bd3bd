//! `restore` (issue 41): an app's data, or one accessory's database,
//! replaced by one of its snapshots in the operator's repository (a dump's
//! snapshot replaces the database, through the policy's `load`). A running
//! app is stopped first, a safety snapshot of what is replaced is recorded,
//! it is replaced, and the app is started and health-checked; a failure
//! puts the safety snapshot back and starts the app again. Runs in the root
//! helper (derive at prepare and again at execute; act at execute).
//!
//! Security invariants enforced here:
//! - an operator always approves it (`Action::always_requires_approval`):
//!   it replaces everything the app wrote since the snapshot;
//! - the agent names an app and a snapshot id, never a repository, a path,
//!   a command or a password; the snapshot must be one volce-lab made of
//!   this app, of its data mount or of one of its accessories' dumps, under
//!   the catalog entry the app runs now (kept data stays bound to its
//!   entry, issue 38); the plan seals what the repository said of it, so a
//!   snapshot that changed or went voids it;
//! - only an app we recorded, with exactly its recorded container set, not
//!   one that needs inspection.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange, marked};
use super::start::deployed_health_path;
use crate::control::app_record::{AppRecord, AppState};
use crate::control::scope::Scope;
use crate::control::validate::{Context, HostFacts, app_name, exact_keys, string};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{
    ACCESSORY_TAG, Action, AppName, BACKUP_TIMEOUT, BackupConfig, Code, ContainerId, PlanId, Refusal,
    Replaced, RestoreSpec, SnapshotFacts, SnapshotId, StartSpec, refuse,
};

/// A restore's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Restore {
    /// The recorded container ids, sorted (the scope).
    pub containers: Vec<ContainerId>,
    pub spec: RestoreSpec,
}

impl PlanAction for Restore {
    const ACTION: Action = Action::Restore;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        facts: &dyn HostFacts,
    ) -> Result<(Restore, Impact), Refusal> {
        exact_keys(params, Action::Restore)?;
        let app = app_name(params)?;
        let (record, config) = super::backup::backed_up(&app, ctx)?;
        let snapshot = snapshot_of(record, &config, string(params, "snapshot")?, facts)?;
        let replaced = replaced_by(record, &snapshot, ctx, facts)?;
        let running = record.state == AppState::Running;
        let (stop, start) = match (running, &record.app_container, &record.gateway_container) {
            (true, Some(app_c), Some(gateway)) => (
                vec![gateway.clone(), app_c.clone()],
                Some(StartSpec {
                    app_container: app_c.clone(),
                    gateway: gateway.clone(),
                    host_port: record.host_port,
                    server_name: record.server_name.clone(),
                    health_path: deployed_health_path(record, ctx),
                    data: record.data.clone(),
                    // Running with the app, they are not stopped by a restore.
                    accessories: Vec::new(),
                }),
            ),
            _ => (Vec::new(), None),
        };
        let mut containers = record.containers.clone();
        containers.sort();
        let spec = RestoreSpec {
            plan_id: ctx.plan_id.clone(),
            app: app.clone(),
            entry: record.image_key.clone(),
            image: record.app_image.clone(),
            replaced,
            config,
            snapshot,
            stop,
            start,
            timeout_seconds: BACKUP_TIMEOUT.as_secs() as u32,
        };
        let impact = impact(&spec);
        Ok((Restore { containers, spec }, impact))
    }

    fn app(&self) -> Option<&AppName> {
        Some(&self.spec.app)
    }

    fn scope(&self) -> Scope<'_> {
        Scope::App { names: self.spec.app.names(), recorded: &self.containers, own_states: false }
    }

    fn review(&self, out: &mut String) {
        let spec = &self.spec;
        let snapshot = &spec.snapshot;
        let _ = writeln!(out, "App      {}", esc(spec.app.as_str()));
        let _ = writeln!(
            out,
            "Restores snapshot {} taken {} ({} files, {} bytes; made by plan {}, image {})",
            &snapshot.id.as_str()[..8],
            esc(&snapshot.time),
            snapshot.files,
            snapshot.bytes,
            esc(snapshot.tag("plan").unwrap_or("-")),
            esc(snapshot.tag("image").unwrap_or("-"))
        );
        match &spec.replaced {
            Replaced::Data(data) => {
                let _ = writeln!(
                    out,
                    "REPLACES everything in its data {} (seen at {}): what the app wrote since is kept only in \
                     the safety snapshot this plan takes first",
                    data.mount.display(),
                    data.path
                );
            }
            Replaced::Dump(dump) => {
                let _ = writeln!(
                    out,
                    "REPLACES the database of accessory {} (container {}, which keeps running): its {} reads \
                     the dump; what was written since is kept only in the safety dump this plan takes first \
                     with {}",
                    dump.accessory.name,
                    dump.container,
                    super::action::argv_line(&dump.load),
                    super::action::argv_line(&dump.dump)
                );
            }
        }
        let around = if spec.start.is_some() {
            "stopped first (gateway, then app), started and health-checked after"
        } else {
            "stopped, and stays stopped"
        };
        let _ = writeln!(out, "The app  {around}");
        if let Replaced::Data(data) = &spec.replaced {
            let _ = writeln!(
                out,
                "Room     one more data image of {} MiB on the server's disk while it runs: the snapshot is \
                 unpacked beside the data and takes its place in one step",
                data.max_mib
            );
        }
        let _ = writeln!(out, "From     {} (the policy's repository)", esc(spec.config.repository.as_str()));
    }

    fn act<E: Engine>(&self, engine: &E, progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        let run = engine.restore(&self.spec, progress)?;
        let containers = self.spec.stop.iter().map(ContainerId::to_string).collect();
        Ok(Effect { containers, restore: Some(run), ..Effect::default() })
    }

    /// The record is the same after a restore that completed; one that
    /// failed on its way back leaves an app nobody can vouch for.
    fn record(&self, done: &Done<'_>) -> Vec<RecordChange> {
        if done.ok() { Vec::new() } else { marked(&self.spec.app, AppState::NeedsInspection) }
    }

    fn rolled_back(cause: &EngineError, id: &PlanId) -> Refusal {
        super::rolled_back::restore(cause, id)
    }
}

/// The snapshot the agent named, as the repository has it: one volce-lab
/// made of this app, under the entry the app runs now.
fn snapshot_of(
    record: &AppRecord,
    config: &BackupConfig,
    asked: &str,
    facts: &dyn HostFacts,
) -> Result<SnapshotFacts, Refusal> {
    let app = &record.app;
    let Some(id) = SnapshotId::parse(asked) else {
        return refuse(
            Code::InvalidParameters,
            "snapshot must be a snapshot id: 8 to 64 lowercase hex characters, as a backup's result or \
             `volce-lab-host backup list` gives it.",
        );
    };
    let Some(snapshot) = facts.backup_snapshot(config, app, &id)? else {
        return refuse(
            Code::SnapshotNotFound,
            format!(
                "No snapshot of {app} that volce-lab made has the id {id} (or more than one starts with it); \
                 nothing was changed. The operator lists them with `volce-lab-host backup list {app}`."
            ),
        );
    };
    if snapshot.tag("entry") != Some(record.image_key.as_str()) {
        return Err(elsewhere(record, &snapshot));
    }
    Ok(snapshot)
}

/// What `snapshot` replaces in the app: its data, when the snapshot holds
/// the app's data mount; or an accessory's database, when it is a dump of
/// an accessory the app has whose policy entry says how to load it.
fn replaced_by(
    record: &AppRecord,
    snapshot: &SnapshotFacts,
    ctx: &Context<'_>,
    facts: &dyn HostFacts,
) -> Result<Replaced, Refusal> {
    let Some(name) = snapshot.tag(ACCESSORY_TAG) else {
        let data = super::backup::data_of(record, facts)?;
        return match data {
            Some(data) if snapshot.paths == [data.mount.display().to_string()] => Ok(Replaced::Data(data)),
            _ => Err(elsewhere(record, snapshot)),
        };
    };
    let Some(accessory) = record.accessories.iter().find(|a| a.name.as_str() == name) else {
        return Err(elsewhere(record, snapshot));
    };
    let Some(dump) = super::backup::dump_of(record, accessory, ctx)? else {
        return refuse(
            Code::DumpNotDeclared,
            format!(
                "Snapshot {} is a dump of the accessory {name} of {}, whose policy entry declares no `dump` and \
                 `load` now: nothing says how to put it back; nothing was changed.",
                &snapshot.id.as_str()[..8],
                record.app
            ),
        );
    };
    if snapshot.paths != [dump.snapshot_path(&record.app)] {
        return Err(elsewhere(record, snapshot));
    }
    Ok(Replaced::Dump(Box::new(dump)))
}

/// The refusal of a snapshot of this app that holds something else than
/// what the app has now (another entry's data, another place).
fn elsewhere(record: &AppRecord, snapshot: &SnapshotFacts) -> Refusal {
    Refusal::new(
        Code::DataEntryMismatch,
        format!(
            "Snapshot {} holds data of catalog entry `{}` at another place than {}'s data or accessories now \
             (entry `{}`): it is not restored into it; nothing was changed.",
            &snapshot.id.as_str()[..8],
            esc(snapshot.tag("entry").unwrap_or("-")),
            record.app,
            record.image_key
        ),
    )
}

/// What a restore touches, in the operator's words.
fn impact(spec: &RestoreSpec) -> Impact {
    let around = match spec.start {
        Some(_) => " (stopped, then started again)",
        None => " (stopped; stays stopped)",
    };
    let what = match &spec.replaced {
        Replaced::Data(_) => "its data".to_owned(),
        Replaced::Dump(dump) => format!("the database of its accessory {}", dump.accessory.name),
    };
    Impact {
        target: format!("app {}: {what} replaced by snapshot {}", spec.app, &spec.snapshot.id.as_str()[..8]),
        containers_touched: spec
            .stop
            .iter()
            .map(|c| format!("{c}{around}"))
            .chain([match &spec.replaced {
                Replaced::Data(data) => format!("its data {}: everything replaced", data.mount.display()),
                Replaced::Dump(dump) => format!(
                    "{} (accessory {}, keeps running): its database replaced by the dump",
                    dump.container, dump.accessory.name
                ),
            }])
            .collect(),
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback: format!(
            "A safety snapshot of {what} as it is when the app has stopped is taken first. If the restore \
             fails, or the app does not answer its health check on what was restored, the safety snapshot is \
             put back and the app started again: the plan ends failed with the app as it was. A step of that \
             way back that fails needs an operator."
        ),
    }
}
