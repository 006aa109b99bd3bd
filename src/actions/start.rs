//! `start`: a managed app that a stop plan left stopped, started again
//! (app, then gateway) with restart policy unless-stopped and checked
//! through its gateway; rolled back to stopped if it does not answer. Runs
//! in the root helper (derive at prepare and again at execute; act at
//! execute). `restart.rs` shares its checks.
//!
//! Security invariants enforced here: it acts only on an app we recorded
//! whose labelled container set is exactly the recorded one (nothing
//! unmanaged is started); it only starts what is stopped, on the app's
//! recorded port, which nothing else may publish or listen on.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange, marked};
use super::rolled_back;
use crate::control::app_record::{AppRecord, AppState};
use crate::control::scope::Scope;
use crate::control::validate::{
    Context, HostFacts, accessories, app_name, data, exact_keys, owned, recorded,
};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{Action, AppName, Code, ContainerId, HealthPath, PlanId, Refusal, StartSpec, refuse};

/// A start's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Start {
    pub app: AppName,
    /// Exactly the recorded container ids, sorted (the scope).
    pub containers: Vec<ContainerId>,
    pub container_names: Vec<String>,
    pub spec: StartSpec,
}

/// Docker states in which a container is, or is about to be, running.
pub(super) fn is_up(state: &str) -> bool {
    matches!(state, "running" | "restarting")
}

/// Why a start of an app recorded running is refused. Its containers up:
/// `app_not_stopped`, there is nothing to start. One of them exited (it
/// crashed, or was stopped by hand): `app_exited`, naming it, since the way
/// back differs (a restart plan; a start is for what a stop plan stopped,
/// and telling the agent "running already" sent it looking elsewhere).
fn recorded_running(app: &AppName, record: &AppRecord, ctx: &Context<'_>) -> Refusal {
    let down: Vec<String> = ctx
        .snapshot
        .containers
        .iter()
        .filter(|c| record.containers.contains(&c.id) && !is_up(&c.state))
        // Engine text reaches a model and a terminal: escaped.
        .map(|c| format!("{} ({})", esc(c.name.trim_start_matches('/')), esc(&c.state)))
        .collect();
    if down.is_empty() {
        return Refusal::new(
            Code::AppNotStopped,
            format!("{app} is running already; there is nothing to start."),
        );
    }
    Refusal::new(
        Code::AppExited,
        format!(
            "{app} should run, but its container exited: {}. A start is only for an app a stop plan \
             stopped; a restart plan starts it again, health-checked.",
            down.join(", ")
        ),
    )
}

impl PlanAction for Start {
    const ACTION: Action = Action::Start;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        facts: &dyn HostFacts,
    ) -> Result<(Start, Impact), Refusal> {
        exact_keys(params, Action::Start)?;
        let app = app_name(params)?;
        let record = recorded(&app, ctx)?;
        match record.state {
            AppState::Stopped => {}
            AppState::Running => return Err(recorded_running(&app, record, ctx)),
            AppState::NeedsInspection => {
                return refuse(
                    Code::AppNotStopped,
                    format!(
                        "{app} needs inspection, not a start: after an operator's resolve, a remove_app plan \
                         cleans it up and a new deploy brings it back."
                    ),
                );
            }
        }
        let record = owned(&app, record, ctx)?;
        let (Some(app_container), Some(gateway)) =
            (record.app_container.clone(), record.gateway_container.clone())
        else {
            return refuse(
                Code::ContainerSetChanged,
                format!("{app} has no recorded app and gateway container."),
            );
        };
        let mine: Vec<_> =
            ctx.snapshot.containers.iter().filter(|c| record.containers.contains(&c.id)).collect();
        if mine.iter().any(|c| is_up(&c.state)) {
            return refuse(
                Code::AppNotStopped,
                format!(
                    "A container of {app} runs although volce-lab stopped it (started outside volce-lab): a stop \
                     plan brings it back to its recorded state, then start it with a start plan."
                ),
            );
        }
        port_is_the_apps(record, false, ctx, facts)?;
        data::still_there(record, facts)?;
        let port = record.host_port;
        let server_name = record.server_name.clone();
        let mut containers = record.containers.clone();
        containers.sort();
        let names = app.names();
        let container_names = vec![names.app_container.clone(), names.gateway_container.clone()];
        let impact = Impact {
            target: format!("app {app} on 127.0.0.1:{port} for {server_name}"),
            containers_touched: mine
                .iter()
                .map(|c| format!("{} (restart=unless-stopped, started)", c.name))
                .chain(data::kept_line(record))
                .collect(),
            data_volumes_deleted: false,
            shared_nginx_changed: false,
            rollback: "If a container does not start or the app does not answer through its gateway, both are \
                       stopped again (restart=no) and seen stopped: the plan then ends failed (rolled_back) and \
                       blocks nothing."
                .into(),
        };
        let health_path = deployed_health_path(record, ctx);
        let data = record.data.clone();
        let accessories = accessories::to_start(record, ctx)?;
        let spec = StartSpec {
            app_container,
            gateway,
            host_port: port,
            server_name,
            health_path,
            data,
            accessories,
        };
        Ok((Start { app, containers, container_names, spec }, impact))
    }

    fn app(&self) -> Option<&AppName> {
        Some(&self.app)
    }

    fn scope(&self) -> Scope<'_> {
        Scope::App { names: self.app.names(), recorded: &self.containers, own_states: true }
    }

    fn review(&self, out: &mut String) {
        let Start { app, containers, container_names, spec } = self;
        let _ = writeln!(out, "Before   app {} stopped, restart policy no:", esc(app.as_str()));
        for (name, id) in container_names.iter().zip([&spec.app_container, &spec.gateway]) {
            let _ = writeln!(out, "  {} {}", esc(name), id);
        }
        let _ = writeln!(
            out,
            "After    started (app, then gateway), restart policy unless-stopped, answering on \
             127.0.0.1:{} for {} ({} containers)",
            spec.host_port,
            esc(spec.server_name.as_str()),
            containers.len()
        );
    }

    fn act<E: Engine>(&self, engine: &E, progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        let spec = &self.spec;
        engine
            .start(spec, progress)
            .map(|()| Effect::from(vec![spec.app_container.to_string(), spec.gateway.to_string()]))
    }

    fn record(&self, done: &Done<'_>) -> Vec<RecordChange> {
        marked(&self.app, done.running_or_inspect())
    }

    fn rolled_back(cause: &EngineError, id: &PlanId) -> Refusal {
        rolled_back::start(cause, id)
    }
}

/// Where the app answers: the entry it was deployed by says so while it
/// still pins the image the app runs (the operator's word now); otherwise
/// where its version was checked when it started running (a rolled-back
/// version the catalog no longer pins); otherwise `/`, as before.
pub(super) fn deployed_health_path(record: &AppRecord, ctx: &Context<'_>) -> HealthPath {
    ctx.policy
        .catalog
        .get(&record.image_key)
        .filter(|entry| entry.image == record.app_image)
        .map(|entry| entry.health_path.clone())
        .or_else(|| record.health_path.clone())
        .unwrap_or_default()
}

/// The app's recorded port, unless a container not of the app publishes
/// it, or (when `ours_listen` is false) something listens on it.
pub(super) fn port_is_the_apps(
    record: &AppRecord,
    ours_listen: bool,
    ctx: &Context<'_>,
    facts: &dyn HostFacts,
) -> Result<(), Refusal> {
    let (app, port) = (&record.app, record.host_port);
    let taken = ctx
        .snapshot
        .containers
        .iter()
        .any(|c| !record.containers.contains(&c.id) && c.ports.iter().any(|p| p.host_port == port));
    if taken {
        return refuse(
            Code::PortPublished,
            format!(
                "Another container publishes port {port}, which {app} needs: it cannot start until that port is free."
            ),
        );
    }
    if !ours_listen && !facts.host_port_free(port) {
        return refuse(
            Code::PortInUse,
            format!(
                "Something listens on 127.0.0.1:{port}, which {app} needs: it cannot start until that port is free."
            ),
        );
    }
    Ok(())
}
