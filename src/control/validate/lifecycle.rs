//! Validation of the actions that bring a managed app back or move it on:
//! `start` (a stopped app), `restart` (an app that should run, whatever
//! its containers do now) and `update` (a running app to another catalog
//! image). Pure, like the rest of `validate`; runs in the root helper at
//! prepare and again at execute.
//!
//! Security invariants enforced here:
//! - all three act only on an app we recorded whose labelled container set
//!   is exactly the recorded one (nothing unmanaged is started or replaced);
//! - start only starts what is stopped, and restart only what is recorded
//!   running or runs again, on the app's recorded port, which nothing else
//!   may publish or listen on;
//! - update names a catalog key, never an image reference, and derives
//!   every name it creates from the app and the plan id.

use serde_json::{Map, Value};

use super::{
    AppState, Context, HostFacts, MIB, app_name, configuration, exact_keys, not_in_catalog, owned,
    owned_running, recorded, string,
};
use crate::control::app_record::AppRecord;
use crate::control::plan::{Action, Impact, Payload};
use crate::vocab::{Code, ContainerId, HealthPath, Refusal, ServerName, StartSpec, UpdateSpec, refuse};

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
            .collect(),
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback: "If a container does not start or the app does not answer through its gateway, both are \
                   stopped again (restart=no) and seen stopped: the plan then ends failed (rolled_back) and \
                   blocks nothing."
            .into(),
    };
    let health_path = deployed_health_path(record, ctx);
    let spec = StartSpec { app_container, gateway, host_port: port, server_name, health_path };
    Ok((Payload::Start { app, containers, container_names, spec }, impact))
}

/// Where the app answers: the entry it was deployed by says so while it
/// still pins the image the app runs; otherwise `/`, as before.
fn deployed_health_path(record: &AppRecord, ctx: &Context<'_>) -> HealthPath {
    ctx.policy
        .catalog
        .get(&record.image_key)
        .filter(|entry| entry.image == record.app_image)
        .map(|entry| entry.health_path.clone())
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
    let (port, server_name) = (record.host_port, record.server_name.clone());
    let mut containers = record.containers.clone();
    containers.sort();
    let impact = Impact {
        target: format!("app {app} on 127.0.0.1:{port} for {server_name}"),
        // Without their states: the plan is not bound to them (scope.rs).
        containers_touched: [app_c, gateway_c]
            .iter()
            .map(|c| format!("{} (stopped, restart=no, then started, restart=unless-stopped)", c.name))
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
    };
    let container_names = vec![app_c.name.clone(), gateway_c.name.clone()];
    Ok((Payload::Restart { app, containers, container_names, spec }, impact))
}

pub(super) fn update(
    params: &Map<String, Value>,
    ctx: &Context<'_>,
    facts: &dyn HostFacts,
) -> Result<(Payload, Impact), Refusal> {
    exact_keys(params, Action::Update)?;
    let app = app_name(params)?;
    let image_key = string(params, "image")?;
    let Some(entry) = ctx.policy.catalog.get(image_key) else {
        return refuse(Code::ImageNotInCatalog, not_in_catalog(ctx.policy));
    };
    let app_image = &entry.image;
    let record = owned_running(&app, ctx).map_err(|refusal| match refusal.code {
        Code::AppNotRunning => Refusal::new(
            Code::AppNotRunning,
            format!(
                "{app} is not running: only a running app is updated (a start plan starts a stopped one)."
            ),
        ),
        _ => refusal,
    })?;
    // The same image is an update too when the configuration the new
    // container gets is not the one the app runs with: that is how a
    // rotated secret reaches the app (edit the env file, then update).
    let env_file = configuration(entry, facts)?;
    if *app_image == record.app_image && env_file == record.configuration {
        return refuse(
            Code::ImageUnchanged,
            format!(
                "{app} already runs the image the catalog pins for {image_key}, with the same configuration: \
                 there is nothing to update (a new digest for the key, or a changed env file, comes from the \
                 operator)."
            ),
        );
    }
    super::refuse_volumes(&format!("The catalog image `{image_key}`"), app_image, facts)?;
    let (Some(old_app), Some(gateway)) = (record.app_container.clone(), record.gateway_container.clone())
    else {
        return refuse(
            Code::ContainerSetChanged,
            format!("{app} has no recorded app and gateway container."),
        );
    };
    let running =
        |id: &ContainerId| ctx.snapshot.containers.iter().any(|c| c.id == *id && c.state == "running");
    if !running(&old_app) || !running(&gateway) {
        return refuse(
            Code::AppNotRunning,
            format!(
                "A container of {app} is not running: stop it with a stop plan, then start it with a start plan."
            ),
        );
    }
    let server_name = record.server_name.clone();
    let capacity = facts.capacity()?;
    let floors = ctx.policy.capacity;
    if capacity.free_memory_bytes < floors.min_free_memory_mib * MIB
        || capacity.free_disk_bytes < floors.min_free_disk_mib * MIB
    {
        return refuse(
            Code::InsufficientCapacity,
            format!(
                "The host must keep {} MiB of memory and {} MiB of disk free, and the update runs a second \
                 app container for a moment.",
                floors.min_free_memory_mib, floors.min_free_disk_mib
            ),
        );
    }
    let names = app.names();
    let old_name = ctx.snapshot.containers.iter().find(|c| c.id == old_app).map_or("", |c| c.name.as_str());
    let plan = ctx.plan_id.as_str();
    let container_name = format!("{}-{}", names.app_container, &plan[..12]);
    let check_name = ServerName::parse(&format!("{plan}.update.volce-lab.invalid"))
        .expect("a plan id is a valid DNS label");
    let port = record.container_port;
    if let Some(port_of_entry) = entry.container_port
        && port_of_entry != port
    {
        return refuse(
            Code::ContainerPortMismatch,
            format!(
                "The catalog entry `{image_key}` listens on container_port {port_of_entry}, but {app} was \
                 deployed on {port}: an update keeps the port, so deploy the entry as a new app instead."
            ),
        );
    }
    let (server, old_upstream) = (server_name.as_str(), record.upstream());
    let spec = UpdateSpec {
        plan_id: ctx.plan_id.clone(),
        app: app.clone(),
        app_image: app_image.clone(),
        previous_image: record.app_image.to_string(),
        old_app: old_app.clone(),
        gateway,
        host_port: record.host_port,
        container_port: port,
        health_path: entry.health_path.clone(),
        server_name: server_name.clone(),
        app_dir: record.app_dir.clone(),
        previous_config: record.nginx_config.clone(),
        staged_config: crate::nginx::render_staged(
            server,
            port,
            old_upstream,
            check_name.as_str(),
            &container_name,
            ctx.policy.access_log(),
        ),
        new_config: crate::nginx::render_for(server, port, &container_name, ctx.policy.access_log()),
        check_name,
        container_name: container_name.clone(),
        limits: ctx.policy.limits.clone(),
        env_file,
    };
    let impact = Impact {
        target: format!(
            "app {app}: image {} -> {image_key} ({app_image}){}",
            record.image_key,
            if spec.env_file != record.configuration {
                ", with the configuration of its env file as it is now"
            } else {
                ""
            }
        ),
        containers_touched: vec![
            format!("{container_name} (new, beside the old one)"),
            format!("{} (config switched to the new container, tested, reloaded)", names.gateway_container),
            format!("{old_name} (removed once the new one answers)"),
        ],
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback:
            "The old container keeps serving until the new one has answered through the gateway twice. \
                   On any failure before that, the previous nginx.conf is restored and reloaded and the new \
                   container removed, and that is verified: the plan then ends failed (rolled_back) and \
                   blocks nothing."
                .into(),
    };
    let mut containers = record.containers.clone();
    containers.sort();
    Ok((Payload::Update { image_key: image_key.to_owned(), containers, spec }, impact))
}
