//! Validation of the actions that bring a managed app back: `start` (a
//! stopped app) and `restart` (an app that should run, whatever its
//! containers do now); `update.rs` moves one on (update, rollback). Pure,
//! like the rest of `validate`; runs in the root helper at prepare and
//! again at execute.
//!
//! Security invariants enforced here:
//! - both act only on an app we recorded whose labelled container set
//!   is exactly the recorded one (nothing unmanaged is started);
//! - start only starts what is stopped, and restart only what is recorded
//!   running or runs again, on the app's recorded port, which nothing else
//!   may publish or listen on.

use serde_json::{Map, Value};

use super::{AppState, Context, HostFacts, app_name, exact_keys, owned, recorded};
use crate::control::app_record::AppRecord;
use crate::control::plan::{Impact, Payload};
use crate::vocab::Action;
use crate::vocab::{Code, ContainerId, HealthPath, Refusal, StartSpec, refuse};

/// Docker states in which a container is, or is about to be, running.
fn is_up(state: &str) -> bool {
    matches!(state, "running" | "restarting")
}

pub(super) fn start(
    params: &Map<String, Value>,
    ctx: &Context<'_>,
    facts: &dyn HostFacts,
) -> Result<(Payload, Impact), Refusal> {
    exact_keys(params, Action::Start)?;
    let app = app_name(params)?;
    let record = recorded(&app, ctx)?;
    match record.state {
        AppState::Stopped => {}
        AppState::Running => {
            return refuse(
                Code::AppNotStopped,
                format!("{app} is running already; there is nothing to start."),
            );
        }
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
    let mine: Vec<_> = ctx.snapshot.containers.iter().filter(|c| record.containers.contains(&c.id)).collect();
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
    super::data::still_there(record, facts)?;
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
            .chain(super::data::kept_line(record))
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
    let spec = StartSpec { app_container, gateway, host_port: port, server_name, health_path, data };
    Ok((Payload::Start { app, containers, container_names, spec }, impact))
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
fn port_is_the_apps(
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

/// restart: both recorded containers stopped as a stop plan stops them
/// (gateway first), then started and health-checked as a start plan
/// does. For an app recorded running, whatever its containers do now
/// (running, crashed, stopped by hand), and for one recorded stopped whose
/// containers run again (started by hand); a stopped app is a start's.
pub(super) fn restart(
    params: &Map<String, Value>,
    ctx: &Context<'_>,
    facts: &dyn HostFacts,
) -> Result<(Payload, Impact), Refusal> {
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
    super::data::still_there(record, facts)?;
    let (port, server_name) = (record.host_port, record.server_name.clone());
    let mut containers = record.containers.clone();
    containers.sort();
    let impact = Impact {
        target: format!("app {app} on 127.0.0.1:{port} for {server_name}"),
        // Without their states: the plan is not bound to them (scope.rs).
        containers_touched: [app_c, gateway_c]
            .iter()
            .map(|c| format!("{} (stopped, restart=no, then started, restart=unless-stopped)", c.name))
            .chain(super::data::kept_line(record))
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
    };
    let spec = StartSpec {
        app_container: app_c.id.clone(),
        gateway: gateway_c.id.clone(),
        host_port: port,
        server_name,
        health_path: deployed_health_path(record, ctx),
        data: record.data.clone(),
    };
    let container_names = vec![app_c.name.clone(), gateway_c.name.clone()];
    Ok((Payload::Restart { app, containers, container_names, spec }, impact))
}
