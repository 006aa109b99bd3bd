//! `backup` (issue 41): the app's data directory copied into the
//! operator's restic repository while the app serves (its filesystem
//! frozen for the copy: reads go on, writes wait), and each accessory
//! whose policy declares a `dump` dumped by its own tool and streamed
//! into it; every snapshot tagged with the app, its catalog entry, the
//! image it runs and the plan; then the policy's retention. Runs in the
//! root helper (derive at prepare and again at execute; act at execute).
//!
//! Security invariants enforced here:
//! - the agent names an app, never a repository, a path or a password:
//!   all come from the operator's policy and the app's record, sealed in
//!   the plan (a changed policy voids it anyway);
//! - only an app we recorded, with exactly its recorded container set, not
//!   one that needs inspection; nothing of its containers is touched;
//! - approval as the policy says (not in the fixed minimum: a backup
//!   changes nothing the app serves, and its retention forgets only
//!   snapshots of this app that volce-lab made).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange};
use crate::control::app_record::{AppRecord, AppState};
use crate::control::scope::Scope;
use crate::control::validate::{
    Context, HostFacts, accessories, app_name, data, exact_keys, owned, recorded,
};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{
    AccessoryUse, Action, AppName, BACKUP_TIMEOUT, BackupConfig, BackupSpec, Code, ContainerId, DataUse,
    DumpUse, PlanId, Refusal, refuse,
};

/// A backup's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backup {
    /// The recorded container ids, sorted (the scope).
    pub containers: Vec<ContainerId>,
    pub spec: BackupSpec,
}

impl PlanAction for Backup {
    const ACTION: Action = Action::Backup;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        facts: &dyn HostFacts,
    ) -> Result<(Backup, Impact), Refusal> {
        exact_keys(params, Action::Backup)?;
        let app = app_name(params)?;
        let (record, config) = backed_up(&app, ctx)?;
        let (data_use, dumps) = (data_of(record, facts)?, dumps_of(record, ctx)?);
        if data_use.is_none() && dumps.is_empty() {
            return refuse(
                Code::AppHasNoData,
                format!(
                    "{app} keeps no data directory (its catalog entry `{}` declares none) and none of its \
                     accessories declares a dump in the policy, so there is nothing to back up; nothing was \
                     changed.",
                    record.image_key
                ),
            );
        }
        let mut containers = record.containers.clone();
        containers.sort();
        let spec = BackupSpec {
            plan_id: ctx.plan_id.clone(),
            app: app.clone(),
            entry: record.image_key.clone(),
            image: record.app_image.clone(),
            data: data_use,
            dumps,
            config,
            timeout_seconds: BACKUP_TIMEOUT.as_secs() as u32,
        };
        let impact = impact(&spec);
        Ok((Backup { containers, spec }, impact))
    }

    fn app(&self) -> Option<&AppName> {
        Some(&self.spec.app)
    }

    fn scope(&self) -> Scope<'_> {
        Scope::App { names: self.spec.app.names(), recorded: &self.containers, own_states: false }
    }

    fn review(&self, out: &mut String) {
        let spec = &self.spec;
        let _ = writeln!(out, "App      {} (its containers are not touched)", esc(spec.app.as_str()));
        if let Some(data) = &spec.data {
            let _ = writeln!(
                out,
                "Copies   its data {} (seen at {}) while it serves: writes wait while restic reads, at most {} s",
                data.mount.display(),
                data.path,
                spec.timeout_seconds
            );
        }
        for dump in &spec.dumps {
            let _ = writeln!(
                out,
                "Dumps    accessory {} with {} in its container, streamed into the repository as {}",
                dump.accessory.name,
                super::action::argv_line(&dump.dump),
                esc(&dump.file_name(&spec.app))
            );
        }
        let _ = writeln!(out, "Into     {} (the policy's repository)", esc(spec.config.repository.as_str()));
        let _ = writeln!(out, "Tags     {}", esc(&spec.tags().join(" ")));
        let _ = writeln!(
            out,
            "Then     forgets this app's older snapshots beyond: {}",
            spec.config.keep.describe()
        );
    }

    fn act<E: Engine>(&self, engine: &E, _progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        let run = engine.backup(&self.spec)?;
        Ok(Effect { backup: Some(run), ..Effect::default() })
    }

    /// The app's record is the same after a backup.
    fn record(&self, _done: &Done<'_>) -> Vec<RecordChange> {
        Vec::new()
    }

    fn rolled_back(cause: &EngineError, id: &PlanId) -> Refusal {
        super::rolled_back::backup(cause, id)
    }
}

/// The app a backup or a restore is about and the policy's repository: a
/// recorded app of ours, not needing inspection, on a server whose policy
/// names a repository.
pub(super) fn backed_up<'a>(
    app: &AppName,
    ctx: &'a Context<'a>,
) -> Result<(&'a AppRecord, BackupConfig), Refusal> {
    let record = recorded(app, ctx)?;
    if record.state == AppState::NeedsInspection {
        return refuse(
            Code::AppNotRunning,
            format!("{app} needs inspection: no backup or restore runs until an operator has resolved it."),
        );
    }
    let record = owned(app, record, ctx)?;
    let Some(config) = ctx.policy.backup.clone() else {
        return refuse(
            Code::BackupNotConfigured,
            "This server's policy names no backup repository (its `backup` object), so there is nothing to copy \
             to or restore from; nothing was changed.",
        );
    };
    Ok((record, config))
}

/// The app's data, when its entry has some: it must be there.
pub(super) fn data_of(record: &AppRecord, facts: &dyn HostFacts) -> Result<Option<DataUse>, Refusal> {
    data::still_there(record, facts)?;
    Ok(record.data.clone())
}

/// The dumps a backup of `record` streams: one per accessory whose policy
/// declares `dump` (and so `load`), each running (a dump needs its server).
fn dumps_of(record: &AppRecord, ctx: &Context<'_>) -> Result<Vec<DumpUse>, Refusal> {
    let mut dumps = Vec::new();
    for accessory in &record.accessories {
        if let Some(dump) = dump_of(record, accessory, ctx)? {
            dumps.push(dump);
        }
    }
    Ok(dumps)
}

/// What streams `accessory`'s database out and back, as the policy
/// declares it now (`None` without a `dump`); its container must run.
pub(super) fn dump_of(
    record: &AppRecord,
    accessory: &AccessoryUse,
    ctx: &Context<'_>,
) -> Result<Option<DumpUse>, Refusal> {
    let declared = ctx.policy.accessories.get(&accessory.name);
    let Some((dump, load)) = declared.and_then(|spec| Some((spec.dump.clone()?, spec.load.clone()?))) else {
        return Ok(None);
    };
    let container = accessories::running(record, accessory, ctx.snapshot).map_err(|_| {
        Refusal::new(
            Code::AppNotRunning,
            format!(
                "The accessory {} of {} is not running, and a dump or a load of its database needs it: start \
                 the app first (a start or restart plan); nothing was changed.",
                accessory.name, record.app
            ),
        )
    })?;
    Ok(Some(DumpUse { accessory: accessory.clone(), container, app_dir: record.app_dir.clone(), dump, load }))
}

/// What a backup touches, in the operator's words.
fn impact(spec: &BackupSpec) -> Impact {
    let mut touched: Vec<String> = spec
        .data
        .iter()
        .map(|data| {
            format!(
                "none (the data's filesystem {} is frozen while restic reads it: the app's reads go on, its \
                 writes wait)",
                data.mount.display()
            )
        })
        .collect();
    touched.extend(spec.dumps.iter().map(|dump| {
        format!(
            "{} (accessory {}: its dump command runs in it and only reads)",
            dump.container, dump.accessory.name
        )
    }));
    Impact {
        target: format!("app {}: a backup of its data", spec.app),
        containers_touched: touched,
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback: "None needed: the app's data is only read. If the copy fails, the filesystem is thawed and \
                   the plan ends failed with no snapshot recorded. The retention forgets only this app's older \
                   snapshots that volce-lab made."
            .into(),
    }
}
