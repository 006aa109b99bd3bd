//! `restart`: both recorded containers of an app stopped as a stop plan
//! stops them (gateway first), then started and health-checked as a start
//! plan does. For an app recorded running, whatever its containers do now
//! (running, crashed, stopped by hand), and for one recorded stopped whose
//! containers run again (started by hand); a stopped app is a start's.
//! Runs in the root helper (derive at prepare and again at execute; act at
//! execute).
//!
//! Security invariants enforced here: as `start.rs`'s (only an app we
//! recorded with exactly its recorded container set, on its recorded port);
//! its scope leaves out the states of the app's own containers, which it
//! does not depend on, so a crash-looping app can still be restarted.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange, marked};
use super::rolled_back;
use super::start::{deployed_health_path, is_up, port_is_the_apps};
use crate::control::app_record::{AppRecord, AppState};
use crate::control::scope::Scope;
use crate::control::validate::{
    Context, HostFacts, accessories, app_name, data, exact_keys, owned, recorded,
};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{Action, AppName, Code, Container, ContainerId, PlanId, Refusal, StartSpec, refuse};

/// A restart's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Restart {
    pub app: AppName,
    /// Exactly the recorded container ids, sorted (the scope).
    pub containers: Vec<ContainerId>,
    /// The app's and the gateway's names as the engine shows them now,
    /// in that order, for the operator.
    pub container_names: Vec<String>,
    pub spec: StartSpec,
}

impl PlanAction for Restart {
    const ACTION: Action = Action::Restart;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        facts: &dyn HostFacts,
    ) -> Result<(Restart, Impact), Refusal> {
        exact_keys(params, Action::Restart)?;
        let app = app_name(params)?;
        let record = recorded(&app, ctx)?;
        if record.state == AppState::NeedsInspection {
            return refuse(
                Code::AppNotRunning,
                format!(
                    "{app} needs inspection, not a restart: after an operator's resolve, a remove_app plan cleans \
                     it up and a new deploy brings it back."
                ),
            );
        }
        let record = owned(&app, record, ctx)?;
        let find = |id: &Option<ContainerId>| {
            id.as_ref().and_then(|id| ctx.snapshot.containers.iter().find(|c| c.id == *id))
        };
        let (Some(app_c), Some(gateway_c)) = (find(&record.app_container), find(&record.gateway_container))
        else {
            return refuse(
                Code::ContainerSetChanged,
                format!("{app} has no recorded app and gateway container on the engine."),
            );
        };
        if record.state == AppState::Stopped && !is_up(&app_c.state) && !is_up(&gateway_c.state) {
            return refuse(
                Code::AppNotRunning,
                format!(
                    "{app} is stopped, as a stop plan left it: a start plan starts it (restart is for an app that \
                     should run, or whose containers were started by hand)."
                ),
            );
        }
        // Our own gateway holds the port while it is up.
        port_is_the_apps(record, is_up(&gateway_c.state), ctx, facts)?;
        data::still_there(record, facts)?;
        let (port, server_name) = (record.host_port, record.server_name.clone());
        let mut containers = record.containers.clone();
        containers.sort();
        let impact = impact(&app, record, [app_c, gateway_c]);
        let spec = StartSpec {
            app_container: app_c.id.clone(),
            gateway: gateway_c.id.clone(),
            host_port: port,
            server_name,
            health_path: deployed_health_path(record, ctx),
            data: record.data.clone(),
            accessories: accessories::to_start(record, ctx)?,
        };
        let container_names = vec![app_c.name.clone(), gateway_c.name.clone()];
        Ok((Restart { app, containers, container_names, spec }, impact))
    }

    fn app(&self) -> Option<&AppName> {
        Some(&self.app)
    }

    fn scope(&self) -> Scope<'_> {
        Scope::App { names: self.app.names(), recorded: &self.containers, own_states: false }
    }

    fn review(&self, out: &mut String) {
        let Restart { app, containers, container_names, spec } = self;
        let _ = writeln!(
            out,
            "Before   app {}, whatever its containers do now (running, crashed, stopped or started by hand):",
            esc(app.as_str())
        );
        for (name, id) in container_names.iter().zip([&spec.app_container, &spec.gateway]) {
            let _ = writeln!(out, "  {} {}", esc(name), id);
        }
        let _ = writeln!(
            out,
            "After    stopped (gateway, then app), then started (app, then gateway), restart policy \
             unless-stopped, answering on 127.0.0.1:{} for {} ({} containers)",
            spec.host_port,
            esc(spec.server_name.as_str()),
            containers.len()
        );
    }

    fn act<E: Engine>(&self, engine: &E, progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        let spec = &self.spec;
        engine
            .restart(spec, progress)
            .map(|()| Effect::from(vec![spec.app_container.to_string(), spec.gateway.to_string()]))
    }

    fn record(&self, done: &Done<'_>) -> Vec<RecordChange> {
        marked(&self.app, done.running_or_inspect())
    }

    /// A restart rolled back did change something: the app it found
    /// (running, or crashed) is now stopped with restart=no, verified, as a
    /// stop plan leaves it; the record says so, and a start plan is its way
    /// back.
    fn record_unchanged(&self, done: &Done<'_>) -> Vec<RecordChange> {
        match done.result {
            Err(EngineError::RolledBack { .. }) => marked(&self.app, AppState::Stopped),
            _ => Vec::new(),
        }
    }

    fn rolled_back(cause: &EngineError, id: &PlanId) -> Refusal {
        rolled_back::restart(cause, id)
    }
}

/// What a restart touches, in the operator's words: both containers
/// without their states (the plan is not bound to them, see its scope).
fn impact(app: &AppName, record: &AppRecord, both: [&Container; 2]) -> Impact {
    let (port, server_name) = (record.host_port, &record.server_name);
    Impact {
        target: format!("app {app} on 127.0.0.1:{port} for {server_name}"),
        containers_touched: both
            .iter()
            .map(|c| format!("{} (stopped, restart=no, then started, restart=unless-stopped)", c.name))
            .chain(data::kept_line(record))
            .collect(),
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback: "The gateway, then the app, are stopped as a stop plan stops them (if docker refuses the \
                   first of these and nothing changed, the plan ends failed and changes nothing). If a \
                   container then does not start or the app does not answer through its gateway, both are \
                   stopped again (restart=no) and seen stopped: the plan ends failed (rolled_back), the app \
                   is recorded stopped and blocks nothing; a start plan brings it back once the cause is \
                   fixed."
            .into(),
    }
}
