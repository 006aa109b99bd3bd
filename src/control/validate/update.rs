//! Validation of the two actions that move a running app to another
//! version with one switch: `update` (to a catalog key's image) and
//! `rollback` (back to the newest version an update kept). Both derive the
//! same [`UpdateSpec`]: the engine runs one switch for both. Pure, like the
//! rest of `validate`; runs in the root helper at prepare and again at
//! execute.
//!
//! Security invariants enforced here:
//! - both act only on a running app we recorded whose labelled container
//!   set is exactly the recorded one (nothing unmanaged is replaced);
//! - update names a catalog key, never an image reference; rollback names
//!   only the app: its image is one this app ran and the operator approved
//!   then, read from the app's record (the digest pinned when it ran),
//!   never from the agent;
//! - every name either creates is derived from the app and the plan id.

use serde_json::{Map, Value};

use super::lifecycle::deployed_health_path;
use super::{
    Context, HostFacts, MIB, app_name, configuration, exact_keys, not_in_catalog, owned_running, string,
};
use crate::control::app_record::{AppRecord, KeptVersion};
use crate::control::plan::{Impact, Payload};
use crate::vocab::Action;
use crate::vocab::{
    AppName, Code, ContainerId, EnvFileUse, HealthPath, ImageRef, Refusal, ServerName, UpdateSpec, refuse,
};

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
    let record = running(&app, ctx, "updated")?;
    // The same image is an update too when the configuration the new
    // container gets is not the one the app runs with: that is how a
    // rotated secret reaches the app (edit the env file, then update).
    let env_file = configuration(entry, facts)?;
    if entry.image == record.app_image && env_file == record.configuration {
        return refuse(
            Code::ImageUnchanged,
            format!(
                "{app} already runs the image the catalog pins for {image_key}, with the same configuration: \
                 there is nothing to update (a new digest for the key, or a changed env file, comes from the \
                 operator)."
            ),
        );
    }
    super::refuse_volumes(
        &format!("The catalog image `{image_key}`"),
        &entry.image,
        data_path(record),
        facts,
    )?;
    if let Some(port_of_entry) = entry.container_port
        && port_of_entry != record.container_port
    {
        return refuse(
            Code::ContainerPortMismatch,
            format!(
                "The catalog entry `{image_key}` listens on container_port {port_of_entry}, but {app} was \
                 deployed on {}: an update keeps the port, so deploy the entry as a new app instead.",
                record.container_port
            ),
        );
    }
    let target = Target { image: &entry.image, health_path: &entry.health_path, env_file };
    let (spec, mut impact, replaces) = switch(&app, record, &target, ctx, facts)?;
    impact.target = format!(
        "app {app}: image {} -> {image_key} ({}){}",
        record.image_key,
        entry.image,
        configured_now(&spec, record)
    );
    let containers = sorted(record);
    let replaces = Some(replaces);
    Ok((Payload::Update { image_key: image_key.to_owned(), containers, spec, replaces }, impact))
}

/// rollback: an update to the newest kept version. Its image is pulled by
/// the pinned digest as an update pulls (nothing when the host still has
/// it); the catalog need not offer it any more: the point of a rollback is
/// often that the operator re-pinned the key to the version that failed,
/// and the operator approves this plan, which says so.
pub(super) fn rollback(
    params: &Map<String, Value>,
    ctx: &Context<'_>,
    facts: &dyn HostFacts,
) -> Result<(Payload, Impact), Refusal> {
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
    super::refuse_volumes(&format!("The kept image of `{key}`"), &to.app_image, data_path(record), facts)?;
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
    let env_file = match ctx.policy.catalog.get(key).or_else(|| ctx.policy.catalog.get(&record.image_key)) {
        Some(entry) => configuration(entry, facts)?,
        None => None,
    };
    let target = Target { image: &to.app_image, health_path: &to.health_path, env_file };
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
    Ok((Payload::Rollback { image_key: key.clone(), containers, spec, replaces }, impact))
}

/// The record of a running app, with the refusal words of `doing`.
fn running<'a>(app: &AppName, ctx: &'a Context<'_>, doing: &str) -> Result<&'a AppRecord, Refusal> {
    owned_running(app, ctx).map_err(|refusal| match refusal.code {
        Code::AppNotRunning => Refusal::new(
            Code::AppNotRunning,
            format!(
                "{app} is not running: only a running app is {doing} (a start plan starts a stopped one)."
            ),
        ),
        _ => refusal,
    })
}

/// Where the app's data is mounted: an app keeps its data where its
/// deploy put it, whatever entry it moves to.
fn data_path(record: &AppRecord) -> Option<&crate::vocab::DataPath> {
    record.data.as_ref().map(|data| &data.path)
}

fn sorted(record: &AppRecord) -> Vec<ContainerId> {
    let mut containers = record.containers.clone();
    containers.sort();
    containers
}

/// What the impact adds when the new container gets other configuration
/// than the app runs with.
fn configured_now(spec: &UpdateSpec, record: &AppRecord) -> &'static str {
    if spec.env_file != record.configuration {
        ", with the configuration of its env file as it is now"
    } else {
        ""
    }
}

/// The version a switch moves to, and the configuration its container gets.
struct Target<'a> {
    image: &'a ImageRef,
    health_path: &'a HealthPath,
    env_file: Option<EnvFileUse>,
}

/// The switch both actions run: the spec, the impact (its target left to
/// the caller) and the version it replaces, as a rollback would need it.
fn switch(
    app: &AppName,
    record: &AppRecord,
    target: &Target<'_>,
    ctx: &Context<'_>,
    facts: &dyn HostFacts,
) -> Result<(UpdateSpec, Impact, KeptVersion), Refusal> {
    let (Some(old_app), Some(gateway)) = (record.app_container.clone(), record.gateway_container.clone())
    else {
        return refuse(
            Code::ContainerSetChanged,
            format!("{app} has no recorded app and gateway container."),
        );
    };
    let old = ctx.snapshot.containers.iter().find(|c| c.id == old_app);
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
    super::data::still_there(record, facts)?;
    let capacity = facts.capacity()?;
    let floors = ctx.policy.capacity;
    if capacity.free_memory_bytes < floors.min_free_memory_mib * MIB
        || capacity.free_disk_bytes < floors.min_free_disk_mib * MIB
    {
        return refuse(
            Code::InsufficientCapacity,
            format!(
                "The host must keep {} MiB of memory and {} MiB of disk free, and the switch runs a second \
                 app container for a moment.",
                floors.min_free_memory_mib, floors.min_free_disk_mib
            ),
        );
    }
    let names = app.names();
    let plan = ctx.plan_id.as_str();
    let container_name = format!("{}-{}", names.app_container, &plan[..12]);
    let check_name = ServerName::parse(&format!("{plan}.update.volce-lab.invalid"))
        .expect("a plan id is a valid DNS label");
    let port = record.container_port;
    // Every name the app serves now, so an update or a rollback keeps them.
    let served = crate::nginx::names_directive(&record.server_name, &record.also_server_names);
    let server = served.as_str();
    let log = ctx.policy.access_log();
    let spec = UpdateSpec {
        plan_id: ctx.plan_id.clone(),
        app: app.clone(),
        app_image: target.image.clone(),
        previous_image: record.app_image.to_string(),
        old_app,
        gateway,
        host_port: record.host_port,
        container_port: port,
        health_path: target.health_path.clone(),
        server_name: record.server_name.clone(),
        app_dir: record.app_dir.clone(),
        previous_config: record.nginx_config.clone(),
        staged_config: crate::nginx::render_staged(
            server,
            port,
            record.upstream(),
            check_name.as_str(),
            &container_name,
            log,
        ),
        new_config: crate::nginx::render_for(server, port, &container_name, log),
        check_name,
        container_name: container_name.clone(),
        limits: ctx.policy.limits.clone(),
        env_file: target.env_file.clone(),
        data: record.data.clone(),
    };
    let impact = Impact {
        target: String::new(),
        containers_touched: vec![
            format!("{container_name} (new, beside the old one)"),
            format!("{} (config switched to the new container, tested, reloaded)", names.gateway_container),
            format!("{} (removed once the new one answers)", old.map_or("", |c| c.name.as_str())),
        ]
        .into_iter()
        .chain(super::data::kept_line(record))
        .collect(),
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback:
            "The old container keeps serving until the new one has answered through the gateway twice. \
                   On any failure before that, the previous nginx.conf is restored and reloaded and the new \
                   container removed, and that is verified: the plan then ends failed (rolled_back) and \
                   blocks nothing."
                .into(),
    };
    let replaces = KeptVersion {
        image_key: record.image_key.clone(),
        app_image: record.app_image.clone(),
        image_id: old.map(|c| c.image_id.clone()),
        container_port: port,
        health_path: deployed_health_path(record, ctx),
    };
    Ok((spec, impact, replaces))
}
