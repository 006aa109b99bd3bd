//! `restore` (issue 41): an app's data replaced by one of its snapshots in
//! the operator's repository. A running app is stopped first, a safety
//! snapshot of its data as it is then is recorded, the data is replaced,
//! and the app is started and health-checked; a failure puts the safety
//! snapshot back and starts the app again. Runs in the root helper (derive
//! at prepare and again at execute; act at execute).
//!
//! Security invariants enforced here:
//! - an operator always approves it (`Action::always_requires_approval`):
//!   it replaces everything the app wrote since the snapshot;
//! - the agent names an app and a snapshot id, never a repository, a path
//!   or a password; the snapshot must be one volce-lab made of this app,
//!   of its data mount, under the catalog entry the app runs now (kept data
//!   stays bound to its entry, issue 38); the plan seals what the
//!   repository said of it, so a snapshot that changed or went voids it;
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
    Action, AppName, BACKUP_TIMEOUT, BackupConfig, Code, ContainerId, DataUse, PlanId, Refusal, RestoreSpec,
    SnapshotFacts, SnapshotId, StartSpec, refuse,
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
        let (record, config, data_use) = super::backup::backed_up(&app, ctx, facts)?;
        let snapshot = snapshot_of(record, &config, &data_use, string(params, "snapshot")?, facts)?;
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
            data: data_use,
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
        let _ = writeln!(
            out,
            "REPLACES everything in its data {} (seen at {}): what the app wrote since is kept only in the \
             safety snapshot this plan takes first",
            spec.data.mount.display(),
            spec.data.path
        );
        let around = if spec.start.is_some() {
            "stopped first (gateway, then app), started and health-checked after"
        } else {
            "stopped, and stays stopped"
        };
        let _ = writeln!(out, "The app  {around}");
        let _ = writeln!(
            out,
            "Room     one more data image of {} MiB on the server's disk while it runs: the snapshot is \
             unpacked beside the data and takes its place in one step",
            spec.data.max_mib
        );
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
/// made of this app's data, under the entry the app runs now.
fn snapshot_of(
    record: &AppRecord,
    config: &BackupConfig,
    data_use: &DataUse,
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
    let own_path = snapshot.paths == [data_use.mount.display().to_string()];
    if !own_path || snapshot.tag("entry") != Some(record.image_key.as_str()) {
        return refuse(
            Code::DataEntryMismatch,
            format!(
                "Snapshot {id} holds data of catalog entry `{}` at another place than {app}'s data now (entry \
                 `{}`): it is not restored into it; nothing was changed.",
                esc(snapshot.tag("entry").unwrap_or("-")),
                record.image_key
            ),
        );
    }
    Ok(snapshot)
}

/// What a restore touches, in the operator's words.
fn impact(spec: &RestoreSpec) -> Impact {
    let around = match spec.start {
        Some(_) => " (stopped, then started again)",
        None => " (stopped; stays stopped)",
    };
    Impact {
        target: format!(
            "app {}: its data replaced by snapshot {}",
            spec.app,
            &spec.snapshot.id.as_str()[..8]
        ),
        containers_touched: spec
            .stop
            .iter()
            .map(|c| format!("{c}{around}"))
            .chain([format!("its data {}: everything replaced", spec.data.mount.display())])
            .collect(),
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback: "A safety snapshot of the data as it is when the app has stopped is taken first. If the \
                   restore fails, or the app does not answer its health check on the restored data, the \
                   safety snapshot is put back and the app started again: the plan ends failed with the app \
                   as it was. A step of that way back that fails needs an operator."
            .into(),
    }
}
