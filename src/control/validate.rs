//! Validation of an agent's plan parameters against the policy, the stored
//! apps and a fresh engine snapshot, and derivation of the payload and the
//! impact summary. Pure: facts about the host come in through [`Probe`].
//!
//! Security invariants enforced here:
//! - parameters are exactly the action's fields, with their exact JSON types
//!   (an integer is never a boolean or a float); anything else is refused;
//! - the agent names a catalog key, never an image reference;
//! - a deploy never adopts anything that exists: an app record, a directory,
//!   a container or network named `vl-<app>...`, or a container labelled
//!   with the app;
//! - nginx_config and stop act only on an app we recorded, whose labelled
//!   container set is exactly the one we recorded (nothing unmanaged can be
//!   slipped in by labelling it);
//! - remove_app acts only on an app we recorded, in any state, and only on
//!   its recorded containers that carry its label (or, for an app left
//!   `needs_inspection` by its failed deploy, those carrying that deploy's
//!   unique plan label), its own two networks and
//!   its directory under the state directory; a container labelled with
//!   the app that we did not record refuses it (never adopted, never
//!   removed); it never names a volume or an image;
//! - start and update (`validate/lifecycle.rs`) likewise act only on an
//!   app we recorded with exactly its recorded container set;
//! - remove_image needs a full id that an app volce-lab deployed has used
//!   (recorded in its app record) and that no container, running or
//!   stopped, uses now: an image volce-lab has no claim on is never removed,
//!   however the request is worded or approved.
//!
//! Over 450 lines on purpose: one derivation per action, each a straight read of
//! the rules it enforces, beside the context checks they share.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::app_record::{AppRecord, AppState};
use super::plan::{Action, ContainerPlan, Impact, Payload};
use super::policy::Policy;
use crate::vocab::{
    AppName, Capacity, Code, Container, ContainerId, DeploySpec, ImageId, ImageRef, LABEL_APP, LABEL_PLAN,
    LABEL_ROLE, PlanId, Refusal, ServerName, Snapshot, refuse,
};

const MIB: u64 = 1024 * 1024;

/// Facts about the host that validation needs and the snapshot lacks.
/// The policy's capacity floors: free memory, and free disk under the state
/// directory. Checked by every prepare (each adds state) and again by a
/// deploy's derivation.
pub fn capacity_floors(policy: &Policy, probe: &dyn Probe) -> Result<(), Refusal> {
    let capacity = probe.capacity()?;
    let floors = policy.capacity;
    if capacity.free_memory_bytes < floors.min_free_memory_mib * MIB
        || capacity.free_disk_bytes < floors.min_free_disk_mib * MIB
    {
        return refuse(
            Code::InsufficientCapacity,
            format!(
                "The host must keep {} MiB of memory and {} MiB of disk free.",
                floors.min_free_memory_mib, floors.min_free_disk_mib
            ),
        );
    }
    Ok(())
}

pub trait Probe {
    /// Whether nothing listens on 127.0.0.1:`port`.
    fn host_port_free(&self, port: u16) -> bool;
    fn capacity(&self) -> Result<Capacity, Refusal>;
    /// Whether anything (file, directory, symlink) exists at the app's directory.
    fn app_dir_exists(&self, app: &str) -> bool;
    /// The `VOLUME` paths the image declares, or `None` when it is not in
    /// the engine yet (the deploy pulls it and checks again).
    fn image_volumes(&self, reference: &ImageRef) -> Result<Option<Vec<String>>, Refusal>;
}

/// Refuses a catalog image (or the gateway image) that declares `VOLUME`s,
/// when the engine already holds it; one that is not there yet is checked
/// by the deploy right after its pull, with the same code.
///
/// Why refuse rather than cover each path with a tmpfs: a declared volume
/// says the image expects data to persist there, and a tmpfs would drop it
/// silently at every restart; an anonymous volume instead is writable, on
/// the host's disk, bounded by nothing, and outlives the container (volce-lab
/// never removes volumes). Neither fits a read-only container whose only
/// writable places are small tmpfs mounts.
pub fn refuse_volumes(what: &str, reference: &ImageRef, probe: &dyn Probe) -> Result<(), Refusal> {
    match probe.image_volumes(reference)? {
        Some(volumes) if !volumes.is_empty() => Err(volumes_refusal(what, &volumes, "Nothing was changed.")),
        _ => Ok(()),
    }
}

/// The `image_declares_volumes` refusal: which image, which paths, the fix.
/// `what` names the image as the reader knows it (a catalog key, or the
/// gateway image); `after` says what happened to the plan.
pub fn volumes_refusal(what: &str, volumes: &[String], after: &str) -> Refusal {
    let paths = crate::text::quoted(&volumes.join(", "), 200);
    Refusal::new(
        Code::ImageDeclaresVolumes,
        format!(
            "{what} declares VOLUME {paths}: volce-lab runs containers with a read-only root and no volumes, \
             so it refuses images that declare any. {after} The operator must rebuild the image without VOLUME \
             (writing only under /tmp) and pin its new digest in the catalog; meanwhile choose another \
             catalog key."
        ),
    )
}

/// Everything validation reads.
pub struct Context<'a> {
    pub policy: &'a Policy,
    pub snapshot: &'a Snapshot,
    pub apps: &'a BTreeMap<String, AppRecord>,
    /// The image claims of removed apps: image id -> app (`remove_image`).
    pub retired: &'a BTreeMap<ImageId, String>,
    /// `<state dir>/apps`.
    pub apps_dir: &'a Path,
    pub plan_id: &'a PlanId,
}

/// Validates `parameters` for `action` and derives what execution will do.
pub fn derive(
    action: Action,
    parameters: &Value,
    ctx: &Context<'_>,
    probe: &dyn Probe,
) -> Result<(Payload, Impact), Refusal> {
    let Some(params) = parameters.as_object() else {
        return refuse(Code::InvalidParameters, "parameters must be a JSON object.");
    };
    match action {
        Action::Deploy => deploy(params, ctx, probe),
        Action::NginxConfig => nginx_config(params, ctx),
        Action::Stop => stop(params, ctx),
        Action::RemoveImage => remove_image(params, ctx),
        Action::RemoveApp => remove_app(params, ctx),
        Action::Start => lifecycle::start(params, ctx, probe),
        Action::Update => lifecycle::update(params, ctx, probe),
    }
}

/// Refuses unless the keys are exactly the action's parameters.
fn exact_keys(params: &Map<String, Value>, action: Action) -> Result<(), Refusal> {
    let expected = action.parameters();
    let mut got: Vec<&str> = params.keys().map(String::as_str).collect();
    got.sort_unstable();
    let mut want = expected.to_vec();
    want.sort_unstable();
    if got != want {
        return refuse(
            Code::InvalidParameters,
            format!("{} takes exactly these parameters: {}.", action.as_str(), expected.join(", ")),
        );
    }
    Ok(())
}

fn string<'a>(params: &'a Map<String, Value>, key: &str) -> Result<&'a str, Refusal> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| Refusal::new(Code::InvalidParameters, format!("{key} must be a string.")))
}

fn app_name(params: &Map<String, Value>) -> Result<AppName, Refusal> {
    AppName::parse(string(params, "app")?)
        .ok_or_else(|| Refusal::new(Code::InvalidAppName, "app must match ^[a-z][a-z0-9-]{0,30}$."))
}

/// An integer in 1024..=65535. JSON booleans and floats are not integers.
fn port(params: &Map<String, Value>, key: &str) -> Result<u16, Refusal> {
    let value = params.get(key).and_then(|v| if v.is_u64() || v.is_i64() { v.as_i64() } else { None });
    match value {
        Some(n) if (1024..=65535).contains(&n) => Ok(n as u16),
        _ => refuse(Code::InvalidPort, format!("{key} must be an integer from 1024 to 65535.")),
    }
}

fn server_name(params: &Map<String, Value>) -> Result<ServerName, Refusal> {
    ServerName::parse(string(params, "server_name")?).ok_or_else(|| {
        Refusal::new(
            Code::InvalidServerName,
            "server_name must be a lowercase DNS name (a-z, 0-9, '-' and '.', at most 253 characters).",
        )
    })
}

fn deploy(
    params: &Map<String, Value>,
    ctx: &Context<'_>,
    probe: &dyn Probe,
) -> Result<(Payload, Impact), Refusal> {
    exact_keys(params, Action::Deploy)?;
    let app = app_name(params)?;
    let image_key = string(params, "image")?;
    let Some(app_image) = ctx.policy.catalog.get(image_key) else {
        return refuse(Code::ImageNotInCatalog, not_in_catalog(ctx.policy));
    };
    let host_port = port(params, "host_port")?;
    let container_port = port(params, "container_port")?;
    let server_name = server_name(params)?;
    let (low, high) = ctx.policy.port_range;
    if !(low..=high).contains(&host_port) {
        return refuse(
            Code::PortOutOfRange,
            format!("host_port must be between {low} and {high}, the operator's port range."),
        );
    }

    // Never adopt what exists, whoever made it: not a record, not a
    // directory, not any Docker object on one of the names the engine will
    // create (all of them, the one-off check container and the edge network
    // included, come from the one list in `AppNames`).
    let names = app.names();
    if ctx.apps.contains_key(app.as_str()) {
        return refuse(
            Code::AppExists,
            format!(
                "The app {app} already exists: choose another name, or free this one with a remove_app plan \
                 for {app} that the operator approves."
            ),
        );
    }
    if probe.app_dir_exists(app.as_str()) {
        return refuse(
            Code::AppExists,
            format!(
                "A directory for {app} already exists on the host but volce-lab has no record of it: choose \
                 another name (only an operator can remove that directory)."
            ),
        );
    }
    let squatted = ctx.snapshot.containers.iter().any(|c| names.claims_container(c))
        || ctx.snapshot.networks.iter().any(|n| names.claims_network(n));
    if squatted {
        return refuse(
            Code::AppExists,
            format!(
                "Docker already has containers or a network for {app} that volce-lab did not record: choose \
                 another name (only an operator can remove them)."
            ),
        );
    }
    if ctx.apps.len() >= ctx.policy.max_apps as usize {
        return refuse(
            Code::AppQuotaReached,
            format!(
                "The operator allows at most {} apps (the policy's max_apps) and all are taken: a remove_app \
                 plan the operator approves frees a slot, or the operator raises max_apps.",
                ctx.policy.max_apps
            ),
        );
    }
    if ctx.snapshot.containers.iter().any(|c| c.ports.iter().any(|p| p.host_port == host_port)) {
        return refuse(
            Code::PortPublished,
            format!(
                "A container already publishes port {host_port}: choose another host_port between {low} and \
                 {high}."
            ),
        );
    }
    if ctx.apps.values().any(|a| a.host_port == host_port) {
        return refuse(Code::PortReserved, format!("Port {host_port} is reserved by another app."));
    }
    if !probe.host_port_free(host_port) {
        return refuse(Code::PortInUse, format!("Something already listens on 127.0.0.1:{host_port}."));
    }
    capacity_floors(ctx.policy, probe)?;
    refuse_volumes(&format!("The catalog image `{image_key}`"), app_image, probe)?;
    refuse_volumes("The gateway image (the policy's nginx_image)", &ctx.policy.nginx_image, probe)?;

    let nginx_config = crate::nginx::render(server_name.as_str(), container_port);
    let labels = |role: &str| {
        BTreeMap::from([
            (LABEL_APP.to_owned(), app.to_string()),
            (LABEL_ROLE.to_owned(), role.to_owned()),
            (LABEL_PLAN.to_owned(), ctx.plan_id.to_string()),
        ])
    };
    let containers = vec![
        ContainerPlan {
            name: names.app_container.clone(),
            role: "app".into(),
            image: app_image.as_str().to_owned(),
            user: "1000:1000".into(),
            publish: None,
            labels: labels("app"),
        },
        ContainerPlan {
            name: names.gateway_container.clone(),
            role: "gateway".into(),
            image: ctx.policy.nginx_image.as_str().to_owned(),
            user: "101:101".into(),
            publish: Some(format!("127.0.0.1:{host_port}:{}", crate::nginx::GATEWAY_LISTEN_PORT)),
            labels: labels("gateway"),
        },
    ];
    let impact = Impact {
        target: format!("new app {app} on 127.0.0.1:{host_port} for {server_name}"),
        containers_touched: vec![
            format!("{} (new)", names.app_container),
            format!("{} (new)", names.gateway_container),
            format!("networks {} and {} (new)", names.network, names.edge_network),
        ],
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback: "On failure the new containers, networks and app directory are removed and their absence \
                   verified: the plan then ends failed (rolled_back) and blocks nothing. If the removal cannot \
                   be verified, what is left stays as evidence for an operator. Nothing that existed before is \
                   touched."
            .into(),
    };
    let spec = DeploySpec {
        plan_id: ctx.plan_id.clone(),
        app_dir: ctx.apps_dir.join(app.as_str()),
        app,
        app_image: app_image.clone(),
        gateway_image: ctx.policy.nginx_image.clone(),
        host_port,
        container_port,
        server_name,
        nginx_config,
        limits: ctx.policy.limits.clone(),
    };
    let network = names.network;
    Ok((Payload::Deploy { image_key: image_key.to_owned(), network, containers, spec }, impact))
}

/// The most catalog keys an `image_not_in_catalog` refusal names: keys are
/// at most 31 characters, and the helper's sentence reaches the agent cut at
/// 300 (`crate::mcp::rpc`).
const KEYS_NAMED: usize = 6;

/// The `image_not_in_catalog` sentence: what `image` must be and which keys
/// the catalog offers. Keys passed the policy's name check
/// (`^[a-z][a-z0-9-]{0,30}$`), so they are quoted as they are; the agent's
/// text is never repeated.
fn not_in_catalog(policy: &Policy) -> String {
    let keys: Vec<String> = policy.catalog.keys().take(KEYS_NAMED).map(|k| format!("`{k}`")).collect();
    let more = policy.catalog.len().saturating_sub(KEYS_NAMED);
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!(
        "image must be a key of the operator's catalog, not an image reference; the catalog offers {}{more}.",
        keys.join(", ")
    )
}

/// The recorded app, running, with exactly its recorded container set.
fn owned_running<'a>(app: &AppName, ctx: &'a Context<'_>) -> Result<&'a AppRecord, Refusal> {
    let record = recorded(app, ctx)?;
    if record.state != AppState::Running {
        return refuse(Code::AppNotRunning, format!("{app} is {}, not running.", record.state.as_str()));
    }
    owned(app, record, ctx)
}

fn recorded<'a>(app: &AppName, ctx: &'a Context<'_>) -> Result<&'a AppRecord, Refusal> {
    ctx.apps.get(app.as_str()).ok_or_else(|| {
        Refusal::new(Code::AppNotFound, format!("{app} is not an app that volce-lab deployed."))
    })
}

/// `record`, whose labelled container set on the engine is exactly the
/// recorded one (nothing unmanaged slipped in, nothing replaced).
fn owned<'a>(app: &AppName, record: &'a AppRecord, ctx: &Context<'_>) -> Result<&'a AppRecord, Refusal> {
    let mut labelled: Vec<&ContainerId> =
        ctx.snapshot.containers.iter().filter(|c| c.app() == Some(app.as_str())).map(|c| &c.id).collect();
    labelled.sort();
    let mut recorded: Vec<&ContainerId> = record.containers.iter().collect();
    recorded.sort();
    if labelled != recorded || recorded.is_empty() {
        return refuse(
            Code::ContainerSetChanged,
            format!("The containers of {app} are not the ones volce-lab recorded; an operator must inspect."),
        );
    }
    Ok(record)
}

fn nginx_config(params: &Map<String, Value>, ctx: &Context<'_>) -> Result<(Payload, Impact), Refusal> {
    exact_keys(params, Action::NginxConfig)?;
    let app = app_name(params)?;
    let server_name = server_name(params)?;
    let record = owned_running(&app, ctx)?;
    let Some(gateway) = record.gateway_container.clone() else {
        return refuse(Code::ContainerSetChanged, format!("{app} has no recorded gateway."));
    };
    let running = ctx.snapshot.containers.iter().any(|c| c.id == gateway && c.state == "running");
    if !running {
        return refuse(Code::AppNotRunning, format!("The gateway of {app} is not running."));
    }
    // To the container the gateway proxies to now (renamed by each update).
    let new_config = crate::nginx::render_for(server_name.as_str(), record.container_port, record.upstream());
    let impact = Impact {
        target: format!("app {app}: server_name {} -> {server_name}", record.server_name),
        containers_touched: vec![format!("{} (config test and reload)", app.names().gateway_container)],
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback: "If the new configuration fails nginx -t or the reload, the previous nginx.conf is \
                   restored, tested and reloaded."
            .into(),
    };
    let payload = Payload::NginxConfig {
        app,
        gateway,
        app_dir: record.app_dir.clone(),
        previous_server_name: record.server_name.to_string(),
        server_name,
        previous_config: record.nginx_config.clone(),
        new_config,
    };
    Ok((payload, impact))
}

fn stop(params: &Map<String, Value>, ctx: &Context<'_>) -> Result<(Payload, Impact), Refusal> {
    exact_keys(params, Action::Stop)?;
    let app = app_name(params)?;
    // A stopped record whose containers run again (an operator started them
    // by hand) can be stopped too: that brings record and engine together.
    let record = recorded(&app, ctx)?;
    if record.state == AppState::NeedsInspection {
        return refuse(
            Code::AppNotRunning,
            format!("{app} needs inspection: after an operator's resolve, a remove_app plan cleans it up."),
        );
    }
    let record = owned(&app, record, ctx)?;
    let any_running =
        ctx.snapshot.containers.iter().any(|c| record.containers.contains(&c.id) && c.state == "running");
    if !any_running {
        return refuse(Code::AppNotRunning, format!("No container of {app} is running."));
    }
    let mut containers = record.containers.clone();
    containers.sort();
    let mut names: Vec<String> = ctx
        .snapshot
        .containers
        .iter()
        .filter(|c| containers.contains(&c.id))
        .map(|c| c.name.clone())
        .collect();
    names.sort();
    let impact = Impact {
        target: format!("app {app}"),
        containers_touched: names.iter().map(|n| format!("{n} (restart=no, graceful stop)")).collect(),
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback: "None automatic: the containers stay stopped with restart policy no; starting them \
                   again is a separate, reviewed change: a start plan for this app, which the operator \
                   approves."
            .into(),
    };
    Ok((Payload::Stop { app, containers, container_names: names }, impact))
}

fn remove_image(params: &Map<String, Value>, ctx: &Context<'_>) -> Result<(Payload, Impact), Refusal> {
    exact_keys(params, Action::RemoveImage)?;
    let raw = string(params, "image_id")?;
    let Some(image_id) = ImageId::parse(raw) else {
        return refuse(Code::InvalidImageId, "image_id must be a full id: sha256: and 64 lowercase hex.");
    };
    if !ctx.snapshot.images.contains(&image_id) {
        return refuse(Code::ImageNotFound, "No local image has this id.");
    }
    let mut used_by: Vec<String> =
        ctx.apps.values().filter(|a| a.image_ids.contains(&image_id)).map(|a| a.app.to_string()).collect();
    // An app removed with remove_app keeps its claim on its images.
    used_by.extend(ctx.retired.get(&image_id).cloned());
    used_by.sort();
    used_by.dedup();
    if used_by.is_empty() {
        return refuse(
            Code::ImageNotManaged,
            "No app that volce-lab deployed has used this image; volce-lab only removes images it pulled for its apps.",
        );
    }
    if ctx.snapshot.containers.iter().any(|c| c.image_id == image_id) {
        return refuse(
            Code::ImageInUse,
            "A container, running or stopped, uses this image; it is not removed.",
        );
    }
    let impact = Impact {
        target: format!("local image {image_id}, used by app {}", used_by.join(", ")),
        containers_touched: vec![],
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback:
            "None: the image comes back only by pulling it again by digest. Registries are not touched."
                .into(),
    };
    Ok((Payload::RemoveImage { image_id, used_by }, impact))
}

fn remove_app(params: &Map<String, Value>, ctx: &Context<'_>) -> Result<(Payload, Impact), Refusal> {
    exact_keys(params, Action::RemoveApp)?;
    let app = app_name(params)?;
    let Some(record) = ctx.apps.get(app.as_str()) else {
        return refuse(Code::AppNotFound, format!("{app} is not an app that volce-lab deployed."));
    };
    let labelled: Vec<_> = ctx.snapshot.containers.iter().filter(|c| c.app() == Some(app.as_str())).collect();
    // Ours: recorded, or left by the failed deploy that made the record
    // (its ids were never reported, but every object it made carries its
    // unique plan id); an operator has resolved that plan before any new
    // plan is accepted.
    let ours = |c: &Container| {
        record.containers.contains(&c.id)
            || (record.state == AppState::NeedsInspection
                && c.labels.get(LABEL_PLAN).map(String::as_str) == Some(record.plan_id.as_str()))
    };
    if labelled.iter().any(|c| !ours(c)) {
        return refuse(
            Code::ContainerSetChanged,
            format!("A container labelled as {app} is not one volce-lab recorded; an operator must inspect."),
        );
    }
    // The directory is always the one under our state directory, whatever
    // the record says.
    let app_dir = ctx.apps_dir.join(app.as_str());
    if record.app_dir != app_dir {
        return refuse(Code::ContainerSetChanged, format!("The record of {app} names another directory."));
    }
    let mut present = labelled;
    present.sort_by(|a, b| a.id.cmp(&b.id));
    let containers: Vec<ContainerId> = present.iter().map(|c| c.id.clone()).collect();
    let running: Vec<ContainerId> = present
        .iter()
        .filter(|c| c.state != "exited" && c.state != "created" && c.state != "dead")
        .map(|c| c.id.clone())
        .collect();
    let container_names: Vec<String> = present.iter().map(|c| c.name.clone()).collect();
    let names = app.names();
    let networks: Vec<String> = [names.network.clone(), names.edge_network.clone()]
        .into_iter()
        .filter(|n| ctx.snapshot.networks.contains(n))
        .collect();
    let mut touched: Vec<String> = present
        .iter()
        .map(|c| {
            let stop = if running.contains(&c.id) { "stopped, then " } else { "" };
            format!("{} ({stop}removed)", c.name)
        })
        .collect();
    touched.extend(networks.iter().map(|n| format!("network {n} (removed)")));
    touched.push(format!("{} (removed)", app_dir.display()));
    let impact = Impact {
        target: format!(
            "app {app} ({}, 127.0.0.1:{}): removed for good, freeing its name, port and quota slot",
            record.state.as_str(),
            record.host_port
        ),
        containers_touched: touched,
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback:
            "None: a removed app comes back only by a new deploy. Its images stay (remove_image) and no \
                   volume is removed."
                .into(),
    };
    Ok((Payload::RemoveApp { app, containers, running, container_names, networks, app_dir }, impact))
}

mod lifecycle;

#[cfg(test)]
mod tests;
