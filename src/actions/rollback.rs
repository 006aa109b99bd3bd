//! `rollback`: a running app moved back to the newest version an update
//! kept, with update's switch, health check and rollback (`update.rs`);
//! the version it leaves joins the kept list in turn. Runs in the root
//! helper (derive at prepare and again at execute; act at execute).
//!
//! Security invariant enforced here: rollback names only the app: its
//! image is one this app ran and the operator approved then, read from the
//! app's record (the digest pinned when it ran), never from the agent. Its
//! image is pulled by the pinned digest as an update pulls (nothing when
//! the host still has it); the catalog need not offer it any more: the
//! point of a rollback is often that the operator re-pinned the key to the
//! version that failed, and the operator approves this plan, which says so.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange};
use super::rolled_back;
use super::update::{
    SwitchTo, configured_now, data_path, running, sorted, switch, switch_before, switch_lines, switch_on,
    switched,
};
use crate::control::app_record::KeptVersion;
use crate::control::scope::Scope;
use crate::control::validate::{
    Context, HostFacts, app_name, configuration as configured, exact_keys, refuse_volumes,
};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{Action, AppName, Code, ContainerId, EnvFileUse, PlanId, Refusal, UpdateSpec, refuse};

/// A rollback's payload: an update back to the newest kept version
/// (`spec.app_image`), which leaves the kept list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rollback {
    /// The kept version's catalog key, as it was when it ran.
    pub image_key: String,
    /// The recorded container ids, sorted (the scope).
    pub containers: Vec<ContainerId>,
    pub spec: UpdateSpec,
    pub replaces: KeptVersion,
}

impl PlanAction for Rollback {
    const ACTION: Action = Action::Rollback;
    const RECORDS_IMAGES: bool = true;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        facts: &dyn HostFacts,
    ) -> Result<(Rollback, Impact), Refusal> {
        exact_keys(params, Action::Rollback)?;
        let app = app_name(params)?;
        let record = running(&app, ctx, "rolled back")?;
        let Some(to) = record.kept_versions.first() else {
            return refuse(
                Code::NothingKept,
                format!(
                    "{app} keeps no earlier version to roll back to: only a completed update keeps the version \
                     it replaced (one made before volce-lab kept versions kept none)."
                ),
            );
        };
        let key = &to.image_key;
        refuse_volumes(&format!("The kept image of `{key}`"), &to.app_image, data_path(record), facts)?;
        if to.container_port != record.container_port {
            return refuse(
                Code::ContainerPortMismatch,
                format!(
                    "The kept version of {app} listened on container_port {}, but {app} runs on {}: a rollback \
                     keeps the port, so deploy that version as a new app instead.",
                    to.container_port, record.container_port
                ),
            );
        }
        // Configuration is the operator's and never kept with a version (no
        // value is stored): the kept key's env file as it is now, or, when the
        // catalog no longer has that key, the running key's.
        let env_file = match ctx.policy.catalog.get(key).or_else(|| ctx.policy.catalog.get(&record.image_key))
        {
            Some(entry) => configured(entry, facts)?,
            None => None,
        };
        let target =
            SwitchTo { image: &to.app_image, health_path: &to.health_path, env_file, before_start: None };
        let (spec, mut impact, replaces) = switch(&app, record, &target, ctx, facts)?;
        let present = to.image_id.as_ref().is_some_and(|id| ctx.snapshot.images.contains(id));
        let source = if present {
            "its image is still on the host"
        } else {
            "its image is no longer on the host: it is pulled again by its pinned digest"
        };
        let offered = match ctx.policy.catalog.get(key) {
            Some(entry) if entry.image == to.app_image => format!("the catalog still pins it for `{key}`"),
            Some(_) => format!("the catalog now pins another image for `{key}`"),
            None => format!("the catalog no longer has the key `{key}`"),
        };
        impact.target = format!(
            "app {app}: rollback {} ({}) -> kept {key} ({}); {source}; {offered}{}",
            record.image_key,
            record.app_image,
            to.app_image,
            configured_now(&spec, record)
        );
        let containers = sorted(record);
        Ok((Rollback { image_key: key.clone(), containers, spec, replaces }, impact))
    }

    fn app(&self) -> Option<&AppName> {
        Some(&self.spec.app)
    }

    fn env_file(&self) -> Option<&EnvFileUse> {
        self.spec.env_file.as_ref()
    }

    fn scope(&self) -> Scope<'_> {
        Scope::App { names: self.spec.app.names(), recorded: &self.containers, own_states: true }
    }

    fn review(&self, out: &mut String) {
        let spec = &self.spec;
        switch_before(out, spec);
        let _ = writeln!(
            out,
            "After    ROLLBACK to the kept {} (catalog key {} when it ran) in new container {}",
            esc(spec.app_image.as_str()),
            esc(&self.image_key),
            esc(&spec.container_name)
        );
        let _ = writeln!(
            out,
            "  pulled by that digest if the host no longer has it; {} is kept for rollback in turn",
            esc(self.replaces.app_image.as_str())
        );
        switch_lines(out, spec);
    }

    fn act<E: Engine>(&self, engine: &E, progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        switch_on(engine, &self.spec, progress)
    }

    fn record(&self, done: &Done<'_>) -> Vec<RecordChange> {
        switched(done, &self.image_key, &self.spec, Some(&self.replaces))
    }

    fn rolled_back(cause: &EngineError, id: &PlanId) -> Refusal {
        rolled_back::update(cause, id)
    }
}
