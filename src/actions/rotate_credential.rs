//! `rotate_credential` (issue 40): one accessory of a running app given a
//! new credential, generated on the host, and the app a new container of
//! the image it runs whose variables carry it. The change inside the
//! accessory is the operator's `rotate` command (the policy's: how a
//! database changes a password is its own), run in the accessory's
//! container with the current credential and the new one in its
//! environment; then the app switches as an update does, and if it does
//! not answer the command runs again the other way. Runs in the root
//! helper (derive at prepare and again at execute; act at execute).
//!
//! Security invariants enforced here:
//! - the agent names an app and one of its accessories, nothing else: the
//!   credential is made on the host at execute and is in no payload, plan,
//!   review or result; the command is the operator's;
//! - only an app we recorded, running, with exactly its recorded container
//!   set and the accessory's container running;
//! - an operator always approves it (`Action::always_requires_approval`).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange, argv_line};
use super::start::deployed_health_path;
use super::update::{SwitchTo, running, sorted, switch, switch_lines};
use crate::control::app_record::{AppRecord, AppState};
use crate::control::scope::Scope;
use crate::control::validate::{Context, HostFacts, accessories, app_name, exact_keys, string};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{Action, AppName, Code, ContainerId, EnvFileUse, PlanId, Refusal, RotationSpec, refuse};

/// A rotate_credential's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotateCredential {
    /// The recorded container ids, sorted (the scope).
    pub containers: Vec<ContainerId>,
    pub spec: RotationSpec,
}

impl PlanAction for RotateCredential {
    // RECORDS_IMAGES stays false: the new container runs the image the app
    // ran, whose claim the record holds already.
    const ACTION: Action = Action::RotateCredential;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        facts: &dyn HostFacts,
    ) -> Result<(RotateCredential, Impact), Refusal> {
        exact_keys(params, Action::RotateCredential)?;
        let app = app_name(params)?;
        let record = running(&app, ctx, "given a new credential")?;
        let accessory = accessories::named(record, string(params, "accessory")?)?;
        let Some(rotate) = ctx.policy.accessories.get(&accessory.name).and_then(|spec| spec.rotate.clone())
        else {
            return refuse(
                Code::RotationNotDeclared,
                format!(
                    "The policy declares no rotate command for the accessory {} of {app}: how it changes its \
                     credential is the operator's to say (accessories.{}.rotate); nothing was changed.",
                    accessory.name, accessory.name
                ),
            );
        };
        let container = accessories::running(record, accessory, ctx.snapshot)?;
        let health_path = deployed_health_path(record, ctx);
        // The version the app runs, with the configuration it runs with:
        // only the accessories' variables differ in the new container.
        let target = SwitchTo {
            image: &record.app_image,
            health_path: &health_path,
            env_file: record.configuration.clone(),
            before_start: None,
        };
        let (switch, mut impact, _) = switch(&app, record, &target, ctx, facts)?;
        impact.target = format!("app {app}: a new credential for accessory {}", accessory.name);
        impact.containers_touched.insert(
            0,
            format!(
                "{} (runs the policy's rotate command once; not restarted; its data keeps the new credential)",
                accessory.container_name
            ),
        );
        impact.rollback = "If the rotate command fails, nothing changed. If the app's new container does not \
                           answer, it is removed, the old one serves on, and the rotate command runs again to \
                           give the accessory its old credential back."
            .into();
        let spec = RotationSpec {
            accessory: accessory.clone(),
            container,
            rotate,
            accessories: record.accessories.clone(),
            switch,
        };
        Ok((RotateCredential { containers: sorted(record), spec }, impact))
    }

    fn app(&self) -> Option<&AppName> {
        Some(&self.spec.switch.app)
    }

    fn env_file(&self) -> Option<&EnvFileUse> {
        self.spec.switch.env_file.as_ref()
    }

    fn scope(&self) -> Scope<'_> {
        Scope::App { names: self.spec.switch.app.names(), recorded: &self.containers, own_states: true }
    }

    fn review(&self, out: &mut String) {
        let RotationSpec { accessory, container, rotate, switch, .. } = &self.spec;
        let _ = writeln!(out, "App      {}", esc(switch.app.as_str()));
        let _ = writeln!(
            out,
            "Rotate   accessory {} (container {container}): a new credential generated here, then {} (the \
             policy's) run in it once with {} and {} set",
            accessory.name,
            argv_line(rotate),
            crate::vocab::ROTATE_FROM,
            crate::vocab::ROTATE_TO
        );
        let _ = writeln!(
            out,
            "Then     {} runs on in new container {} with the new credential in its variables (image {})",
            esc(switch.app.as_str()),
            esc(&switch.container_name),
            esc(switch.app_image.as_str())
        );
        let _ = writeln!(
            out,
            "  between the two, the app opens no new connection to {} (its old container has the old credential)",
            accessory.name
        );
        switch_lines(out, switch);
    }

    fn act<E: Engine>(&self, engine: &E, progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        let new = engine.rotate_credential(&self.spec, progress)?;
        Ok(Effect::from(vec![new.to_string(), self.spec.switch.gateway.to_string()]))
    }

    fn record(&self, done: &Done<'_>) -> Vec<RecordChange> {
        let Some(old) = done.apps.get(self.spec.switch.app.as_str()) else { return Vec::new() };
        let mut record = old.clone();
        record.plan_id = done.plan_id.clone();
        let new =
            done.result.as_ref().ok().and_then(|e| e.containers.first()).and_then(|i| ContainerId::parse(i));
        match new {
            Some(new) => switched(&mut record, &self.spec, new),
            None => record.state = AppState::NeedsInspection,
        }
        vec![RecordChange::Put(Box::new(record))]
    }

    fn rolled_back(cause: &EngineError, id: &PlanId) -> Refusal {
        super::rolled_back::rotation(cause, id)
    }
}

/// The record once the app runs in its new container: the same version,
/// the new container in the old one's place and the gateway's new config.
fn switched(record: &mut AppRecord, spec: &RotationSpec, new: ContainerId) {
    let switch = &spec.switch;
    for id in &mut record.containers {
        if *id == switch.old_app {
            *id = new.clone();
        }
    }
    record.app_container = Some(new);
    record.state = AppState::Running;
    record.upstream = Some(switch.container_name.clone());
    record.nginx_config = switch.new_config.clone();
}
