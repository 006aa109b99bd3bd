//! Validation of a deploy: a new app, on a catalog image, on a free port of
//! the operator's range, under names nothing stands on yet. Pure, like the
//! rest of `validate`; runs in the root helper at prepare and again at
//! execute.
//!
//! Security invariant enforced here: a deploy never adopts anything that
//! exists: an app record, a directory, a container or network named
//! `vl-<app>...`, or a container labelled with the app.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{
    Context, HostFacts, also_server_names, app_name, capacity_floors, configuration, exact_keys,
    not_in_catalog, port, refuse_volumes, server_name, string,
};
use crate::control::plan::{ContainerPlan, Impact, Payload};
use crate::vocab::Action;
use crate::vocab::{Code, DeploySpec, LABEL_APP, LABEL_PLAN, LABEL_ROLE, Refusal, refuse, served_names};

pub(super) fn deploy(
    params: &Map<String, Value>,
    ctx: &Context<'_>,
    facts: &dyn HostFacts,
) -> Result<(Payload, Impact), Refusal> {
    exact_keys(params, Action::Deploy)?;
    let app = app_name(params)?;
    let image_key = string(params, "image")?;
    let Some(entry) = ctx.policy.catalog.get(image_key) else {
        return refuse(Code::ImageNotInCatalog, not_in_catalog(ctx.policy));
    };
    let app_image = &entry.image;
    let host_port = port(params, "host_port")?;
    let container_port = container_port(params, image_key, entry.container_port)?;
    let server_name = server_name(params)?;
    let also_server_names = also_server_names(params, &server_name)?;
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
    if facts.app_dir_exists(app.as_str()) {
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
    if !facts.host_port_free(host_port) {
        return refuse(Code::PortInUse, format!("Something already listens on 127.0.0.1:{host_port}."));
    }
    capacity_floors(ctx.policy, facts)?;
    let data = super::data::for_deploy(&app, entry, ctx, facts)?;
    if let Some((data, false)) = &data {
        super::data::room_for(data, ctx, facts)?;
    }
    let data_path = data.as_ref().map(|(d, _)| &d.path);
    refuse_volumes(&format!("The catalog image `{image_key}`"), app_image, data_path, facts)?;
    refuse_volumes("The gateway image (the policy's nginx_image)", &ctx.policy.nginx_image, None, facts)?;
    let env_file = configuration(entry, facts)?;

    let served = crate::nginx::names_directive(&server_name, &also_server_names);
    let nginx_config = crate::nginx::render(&served, container_port, ctx.policy.access_log());
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
    let mut containers_touched = vec![
        format!("{} (new)", names.app_container),
        format!("{} (new)", names.gateway_container),
        format!("networks {} and {} (new)", names.network, names.edge_network),
    ];
    containers_touched.extend(data.as_ref().map(|(data, kept)| super::data::touched(data, *kept)));
    let impact = Impact {
        target: format!(
            "new app {app} on 127.0.0.1:{host_port} for {}",
            served_names(server_name.as_str(), &also_server_names)
        ),
        containers_touched,
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback: "On failure the new containers, networks and app directory are removed and their absence \
                   verified: the plan then ends failed (rolled_back) and blocks nothing. If the removal cannot \
                   be verified, what is left stays as evidence for an operator. Nothing that existed before is \
                   touched."
            .to_owned()
            + if data.is_some() { " New data is deleted with the rest; kept data is only unmounted again." } else { "" },
    };
    let spec = DeploySpec {
        plan_id: ctx.plan_id.clone(),
        app_dir: ctx.apps_dir.join(app.as_str()),
        app,
        app_image: app_image.clone(),
        gateway_image: ctx.policy.nginx_image.clone(),
        host_port,
        container_port,
        health_path: entry.health_path.clone(),
        server_name,
        also_server_names,
        nginx_config,
        limits: ctx.policy.limits.clone(),
        env_file,
        data: data.map(|(data, _)| data),
    };
    let network = names.network;
    Ok((Payload::Deploy { image_key: image_key.to_owned(), network, containers, spec }, impact))
}

/// The port the app listens on: the catalog entry's when it sets one (the
/// agent may leave `container_port` out, and a different value is refused
/// naming the right one), else the agent's, as before catalog objects.
fn container_port(
    params: &Map<String, Value>,
    image_key: &str,
    catalog: Option<u16>,
) -> Result<u16, Refusal> {
    match (catalog, params.contains_key("container_port")) {
        (Some(port_of_entry), false) => Ok(port_of_entry),
        (Some(port_of_entry), true) => {
            let given = port(params, "container_port")?;
            if given != port_of_entry {
                return refuse(
                    Code::ContainerPortMismatch,
                    format!(
                        "The catalog entry `{image_key}` listens on container_port {port_of_entry}, not {given}: \
                         plan again with {port_of_entry}, or leave container_port out."
                    ),
                );
            }
            Ok(given)
        }
        (None, true) => port(params, "container_port"),
        (None, false) => refuse(
            Code::InvalidParameters,
            format!(
                "The catalog entry `{image_key}` does not say which port its app listens on: deploy needs \
                 container_port (an integer from 1024 to 65535)."
            ),
        ),
    }
}
