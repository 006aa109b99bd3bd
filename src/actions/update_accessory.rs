//! `update_accessory` (issue 40): one accessory of a running app moved to
//! the image the operator's policy pins for it now, on the same data and
//! credential; the app keeps its own container, variables and version. The
//! old container stops (the two share the data, which one database opens at
//! a time), the new one must pass the accessory's health command and the
//! app must answer through its gateway; otherwise the old one runs again.
//! Runs in the root helper (derive at prepare and again at execute; act at
//! execute).
//!
//! Security invariants enforced here:
//! - the agent names an app and one of its accessories, never an image: the
//!   image and health command are the policy's, and only they may differ
//!   from the deploy's record (its port, data and variables stay as the app
//!   was told them; any other change is `accessories_changed`);
//! - only an app we recorded, running, with exactly its recorded container
//!   set; the accessory's container is the one recorded under its name;
//! - an operator always approves it (`Action::always_requires_approval`):
//!   a new database image may convert the data on its first start, which no
//!   rollback undoes.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange, argv_line};
use super::start::deployed_health_path;
use super::update::{running, sorted};
use crate::control::app_record::{AppRecord, AppState};
use crate::control::scope::Scope;
use crate::control::validate::{
    Context, HostFacts, accessories, app_name, data, exact_keys, refuse_volumes, string,
};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{
    AccessoryUpdateSpec, AccessoryUse, Action, AppName, Code, ContainerId, PlanId, Refusal, refuse,
};

/// An update_accessory's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateAccessory {
    /// The recorded container ids, sorted (the scope).
    pub containers: Vec<ContainerId>,
    pub spec: AccessoryUpdateSpec,
}

impl PlanAction for UpdateAccessory {
    const ACTION: Action = Action::UpdateAccessory;
    const RECORDS_IMAGES: bool = true;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        facts: &dyn HostFacts,
    ) -> Result<(UpdateAccessory, Impact), Refusal> {
        exact_keys(params, Action::UpdateAccessory)?;
        let app = app_name(params)?;
        let record = running(&app, ctx, "given a new accessory image")?;
        let recorded = accessories::named(record, string(params, "accessory")?)?;
        let accessory = pinned_now(record, recorded, ctx)?;
        let old = accessories::running(record, recorded, ctx.snapshot)?;
        refuse_volumes(
            &format!("The image of accessory {}", accessory.name),
            &accessory.image,
            Some(&accessory.data.path),
            facts,
        )?;
        data::still_there(record, facts)?;
        let containers = sorted(record);
        let spec = AccessoryUpdateSpec {
            plan_id: ctx.plan_id.clone(),
            app: app.clone(),
            app_dir: record.app_dir.clone(),
            limits: ctx.policy.limits.clone(),
            old,
            previous_image: recorded.image.clone(),
            previous_health: recorded.health.clone(),
            accessory,
            host_port: record.host_port,
            server_name: record.server_name.clone(),
            health_path: deployed_health_path(record, ctx),
        };
        let impact = impact(&spec);
        Ok((UpdateAccessory { containers, spec }, impact))
    }

    fn app(&self) -> Option<&AppName> {
        Some(&self.spec.app)
    }

    fn scope(&self) -> Scope<'_> {
        Scope::App { names: self.spec.app.names(), recorded: &self.containers, own_states: true }
    }

    fn review(&self, out: &mut String) {
        let spec = &self.spec;
        let accessory = &spec.accessory;
        let _ = writeln!(out, "App      {} (its own containers are not touched)", esc(spec.app.as_str()));
        let _ = writeln!(
            out,
            "Before   accessory {} runs {} in container {}",
            accessory.name,
            esc(spec.previous_image.as_str()),
            spec.old
        );
        let _ = writeln!(
            out,
            "After    it runs {} (the policy's) in a new container {}, on the same data ({} MiB at {}) and \
             credential",
            esc(accessory.image.as_str()),
            esc(&accessory.container_name),
            accessory.data.max_mib,
            accessory.data.path
        );
        if spec.previous_health != accessory.health {
            let _ =
                writeln!(out, "  its health command becomes {} (the policy's)", argv_line(&accessory.health));
        }
        let _ = writeln!(
            out,
            "  the app cannot reach {} while the old container stops and the new one starts; then the app \
             must answer on {} again",
            accessory.name,
            esc(spec.server_name.as_str())
        );
    }

    fn act<E: Engine>(&self, engine: &E, progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        engine.update_accessory(&self.spec, progress).map(|new| Effect::from(vec![new.to_string()]))
    }

    fn record(&self, done: &Done<'_>) -> Vec<RecordChange> {
        let Some(old) = done.apps.get(self.spec.app.as_str()) else { return Vec::new() };
        let mut record = old.clone();
        record.plan_id = done.plan_id.clone();
        let new =
            done.result.as_ref().ok().and_then(|e| e.containers.first()).and_then(|i| ContainerId::parse(i));
        match new {
            Some(new) => switched(&mut record, &self.spec, new, done.after),
            None => record.state = AppState::NeedsInspection,
        }
        vec![RecordChange::Put(Box::new(record))]
    }

    fn rolled_back(cause: &EngineError, id: &PlanId) -> Refusal {
        super::rolled_back::accessory(cause, id)
    }

    fn refused_because() -> &'static str {
        "one of the app's containers or its accessory started, stopped or being removed by hand"
    }
}

/// The accessory as it will run: the policy's image and health command,
/// everything else as recorded. Refused `image_unchanged` when the policy
/// pins the image it runs, and `accessories_changed` when the policy no
/// longer declares it or changed what the app was told (its port, data
/// or variables).
fn pinned_now(
    record: &AppRecord,
    recorded: &AccessoryUse,
    ctx: &Context<'_>,
) -> Result<AccessoryUse, Refusal> {
    let (app, name) = (&record.app, &recorded.name);
    let Some(spec) = ctx.policy.accessories.get(name) else {
        return refuse(
            Code::AccessoriesChanged,
            format!(
                "The policy no longer declares the accessory {name} that {app} runs beside it, so there is no image \
                 to move it to; nothing was changed. The operator declares it again, or a remove_app plan (its \
                 data is kept) ends it."
            ),
        );
    };
    if spec.image == recorded.image {
        return refuse(
            Code::ImageUnchanged,
            format!(
                "The accessory {name} of {app} already runs the image the policy pins for it: there is nothing to \
                 update (a new digest comes from the operator, in the policy's accessories.{name}.image)."
            ),
        );
    }
    let same = spec.port == recorded.port && spec.data.path == recorded.data.path && spec.env == recorded.env;
    if !same {
        return refuse(
            Code::AccessoriesChanged,
            format!(
                "The policy's accessories.{name} changed its port, data path or variables since {app} was deployed; \
                 update_accessory moves it to a new image and health command only, since the app was told the \
                 rest. Nothing was changed: the operator puts them back, or a remove_app plan (its data is kept) \
                 and a new deploy take the new ones."
            ),
        );
    }
    Ok(AccessoryUse { image: spec.image.clone(), health: spec.health.clone(), ..recorded.clone() })
}

/// What an update_accessory touches, in the operator's words.
fn impact(spec: &AccessoryUpdateSpec) -> Impact {
    let accessory = &spec.accessory;
    Impact {
        target: format!("app {}: accessory {} to {}", spec.app, accessory.name, accessory.image.as_str()),
        containers_touched: vec![
            format!("{} (stopped, set aside as {}, removed once the new one is ready)", spec.old, spec.set_aside_name()),
            format!(
                "{} (new, image {}, on the same data {} and credential)",
                accessory.container_name,
                accessory.image.as_str(),
                accessory.data.image.display()
            ),
        ],
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback: "If the new container does not pass the health command, or the app stops answering, it is \
                   removed and the old one starts again on the same data. A new image that converts the data on \
                   its first start may leave data the old one cannot read: back it up first (a backup plan)."
            .into(),
    }
}

/// The record once the new container runs: it in the old one's place,
/// the image it runs claimed, and the accessory's new image and health.
fn switched(
    record: &mut AppRecord,
    spec: &AccessoryUpdateSpec,
    new: ContainerId,
    after: Option<&crate::vocab::Snapshot>,
) {
    for id in &mut record.containers {
        if *id == spec.old {
            *id = new.clone();
        }
    }
    // The claim on the old image stays (remove_image may take it once no
    // container uses it), as an update's does.
    if let Some(image) =
        after.and_then(|s| s.containers.iter().find(|c| c.id == new)).map(|c| c.image_id.clone())
    {
        record.image_ids.push(image);
        record.image_ids.sort();
        record.image_ids.dedup();
    }
    if let Some(accessory) = record.accessories.iter_mut().find(|a| a.name == spec.accessory.name) {
        *accessory = spec.accessory.clone();
    }
}
