//! `deploy`: a new app, on a catalog image, on a free port of the
//! operator's range, under names nothing stands on yet; its app container
//! and its gateway, each on the app's own networks. Runs in the root helper
//! (derive at prepare and again at execute; act at execute).
//!
//! Security invariant enforced here: a deploy never adopts anything that
//! exists: an app record, a directory, a container or network named
//! `vl-<app>...`, or a container labelled with the app.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange, config_lines, configuration};
use super::run_task::{RunsIn, before_start, before_start_line, task_line};
use crate::control::app_record::{AppRecord, ImageUse};
use crate::control::policy::CatalogEntry;
use crate::control::scope::Scope;
use crate::control::validate::{
    Context, HostFacts, accessories, also_server_names, app_name, capacity_floors,
    configuration as configured, data, exact_keys, not_in_catalog, port, refuse_volumes, server_name, string,
};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{
    ACCESSORY_ROLE, AccessoryUse, Action, AppName, AppNames, Code, ContainerId, DATA_OWNER, DataUse,
    DeploySpec, EnvFileUse, LABEL_APP, LABEL_PLAN, LABEL_ROLE, Refusal, TaskSpec, refuse, served_names,
};

/// One container a deploy will create, as the operator reviews it. The
/// hardening flags are the engine's fixed template (see `crate::docker`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerPlan {
    pub name: String,
    pub role: String,
    pub image: String,
    pub user: String,
    /// `127.0.0.1:<host_port>:8080` for the gateway, nothing for the app.
    pub publish: Option<String>,
    pub labels: BTreeMap<String, String>,
}

/// A deploy's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deploy {
    /// The catalog key the agent chose; `spec.app_image` is what it maps to.
    pub image_key: String,
    pub network: String,
    pub containers: Vec<ContainerPlan>,
    pub spec: DeploySpec,
}

impl PlanAction for Deploy {
    const ACTION: Action = Action::Deploy;
    const RECORDS_IMAGES: bool = true;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        facts: &dyn HostFacts,
    ) -> Result<(Deploy, Impact), Refusal> {
        exact_keys(params, Action::Deploy)?;
        let app = app_name(params)?;
        let image_key = string(params, "image")?;
        let Some(entry) = ctx.policy.catalog.get(image_key) else {
            return refuse(Code::ImageNotInCatalog, not_in_catalog(ctx.policy));
        };
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
        nothing_there(&app, ctx, facts)?;
        port_free(host_port, ctx, facts)?;
        capacity_floors(ctx.policy, facts)?;
        let (data, accessories) = storage(&app, image_key, entry, ctx, facts)?;
        let env_file = configured(entry, facts)?;
        let app_dir = ctx.apps_dir.join(app.as_str());
        let runs_in = RunsIn {
            image: &entry.image,
            env_file: env_file.clone(),
            data: data.as_ref().map(|d| d.0.clone()),
            accessories_env: (!accessories.is_empty()).then(|| crate::vocab::accessories_env_of(&app_dir)),
        };
        let before_start = before_start(&app, entry, runs_in, ctx);

        let served = crate::nginx::names_directive(&server_name, &also_server_names);
        let names = app.names();
        let impact = impact(
            &app,
            &names,
            host_port,
            &served_names(server_name.as_str(), &also_server_names),
            data.as_ref(),
            before_start.as_ref(),
            &accessories,
        );
        let spec = DeploySpec {
            plan_id: ctx.plan_id.clone(),
            app_dir,
            nginx_config: crate::nginx::render(&served, container_port, ctx.policy.access_log()),
            app,
            app_image: entry.image.clone(),
            gateway_image: ctx.policy.nginx_image.clone(),
            host_port,
            container_port,
            health_path: entry.health_path.clone(),
            server_name,
            also_server_names,
            limits: ctx.policy.limits.clone(),
            env_file,
            data: data.map(|(data, _)| data),
            before_start,
            accessories: accessories.into_iter().map(|(accessory, _)| accessory).collect(),
        };
        let containers = containers(&spec, entry, &names, ctx);
        Ok((Deploy { image_key: image_key.to_owned(), network: names.network, containers, spec }, impact))
    }

    fn app(&self) -> Option<&AppName> {
        Some(&self.spec.app)
    }

    fn env_file(&self) -> Option<&EnvFileUse> {
        self.spec.env_file.as_ref()
    }

    fn scope(&self) -> Scope<'_> {
        Scope::NewApp { names: self.spec.app.names(), host_port: self.spec.host_port }
    }

    fn review(&self, out: &mut String) {
        let Deploy { image_key, network, containers, spec } = self;
        let _ = writeln!(out, "Before   no app {}, no network {}", esc(spec.app.as_str()), esc(network));
        let _ = writeln!(out, "After    app {} from catalog key {}", esc(spec.app.as_str()), esc(image_key));
        for c in containers {
            let publish = c.publish.as_deref().map(|p| format!(", publishes {}", esc(p))).unwrap_or_default();
            let _ = writeln!(
                out,
                "  {} ({}): {} as user {}{publish}",
                esc(&c.name),
                esc(&c.role),
                esc(&c.image),
                esc(&c.user)
            );
        }
        let l = &spec.limits;
        let _ = writeln!(
            out,
            "  limits: memory {} MiB, {} millicpus, {} pids, logs {} MiB x {}",
            l.memory_bytes >> 20,
            l.millicpus,
            l.pids,
            l.log_max_size_bytes >> 20,
            l.log_max_files
        );
        configuration(out, spec.env_file.as_ref());
        for accessory in &spec.accessories {
            accessory_lines(out, accessory);
        }
        if let Some(task) = &spec.before_start {
            let _ = writeln!(out, "  before the app starts, once: task {}", task_line(task));
        }
        let _ =
            writeln!(out, "  nginx.conf at {}:", esc(&spec.app_dir.join("nginx.conf").display().to_string()));
        config_lines(out, &spec.nginx_config);
    }

    fn act<E: Engine>(&self, engine: &E, progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        engine.deploy(&self.spec, progress).map(|d| {
            let mut ids = vec![d.app_container.to_string(), d.gateway_container.to_string()];
            ids.extend(d.accessories.iter().map(ToString::to_string));
            Effect::from(ids)
        })
    }

    fn record(&self, done: &Done<'_>) -> Vec<RecordChange> {
        let Deploy { image_key, spec, .. } = self;
        let ids: Vec<ContainerId> = done
            .result
            .as_ref()
            .map(|effect| effect.containers.iter().filter_map(|i| ContainerId::parse(i)).collect())
            .unwrap_or_default();
        let mut image_ids: Vec<_> = done
            .after
            .map(|s| {
                s.containers.iter().filter(|c| ids.contains(&c.id)).map(|c| c.image_id.clone()).collect()
            })
            .unwrap_or_default();
        image_ids.sort();
        image_ids.dedup();
        vec![RecordChange::Put(Box::new(AppRecord {
            app: spec.app.clone(),
            state: done.running_or_inspect(),
            host_port: spec.host_port,
            container_port: spec.container_port,
            server_name: spec.server_name.clone(),
            also_server_names: spec.also_server_names.clone(),
            image_key: image_key.clone(),
            app_image: spec.app_image.clone(),
            gateway_image: spec.gateway_image.clone(),
            nginx_config: spec.nginx_config.clone(),
            app_dir: spec.app_dir.clone(),
            app_container: ids.first().cloned(),
            gateway_container: ids.get(1).cloned(),
            containers: ids,
            plan_id: done.plan_id.clone(),
            image_ids,
            upstream: None,
            image_history: vec![ImageUse {
                image_key: image_key.clone(),
                app_image: spec.app_image.clone(),
                since: Some(done.now),
            }],
            configuration: spec.env_file.clone(),
            kept_versions: vec![],
            health_path: Some(spec.health_path.clone()),
            data: spec.data.clone(),
            exposed: None,
            accessories: spec.accessories.clone(),
        }))]
    }
}

/// What a deploy mounts and creates beside the app: its data and its
/// accessories, each with whether it was kept from before; refused when
/// the disk lacks room for what is new, or an image declares a volume
/// its data does not cover.
#[allow(clippy::type_complexity)]
fn storage(
    app: &AppName,
    image_key: &str,
    entry: &CatalogEntry,
    ctx: &Context<'_>,
    facts: &dyn HostFacts,
) -> Result<(Option<(DataUse, bool)>, Vec<(AccessoryUse, bool)>), Refusal> {
    let data = data::for_deploy(app, image_key, entry, ctx, facts)?;
    let accessories = accessories::for_deploy(app, entry, ctx, facts)?;
    let new_mib = data
        .iter()
        .map(|(d, kept)| (d, *kept))
        .chain(accessories.iter().map(|(a, kept)| (&a.data, *kept)))
        .filter(|(_, kept)| !kept)
        .map(|(d, _)| u64::from(d.max_mib))
        .sum();
    data::room_for(new_mib, ctx, facts)?;
    let data_path = data.as_ref().map(|(d, _)| &d.path);
    refuse_volumes(&format!("The catalog image `{image_key}`"), &entry.image, data_path, facts)?;
    refuse_volumes("The gateway image (the policy's nginx_image)", &ctx.policy.nginx_image, None, facts)?;
    for (accessory, _) in &accessories {
        let what = format!("The accessory `{}`'s image", accessory.name);
        refuse_volumes(&what, &accessory.image, Some(&accessory.data.path), facts)?;
    }
    Ok((data, accessories))
}

/// An accessory as the operator reviews it: where it listens, its data,
/// its health command, and the variables each side gets (templates: the
/// credential is generated on the host and shown nowhere).
fn accessory_lines(out: &mut String, accessory: &AccessoryUse) {
    let (name, data) = (esc(accessory.name.as_str()), &accessory.data);
    let _ = writeln!(
        out,
        "  accessory {name}: first, on the app's network as {name}:{}, data {} MiB at {}, ready when {} exits 0",
        accessory.port,
        data.max_mib,
        esc(data.path.as_str()),
        super::action::argv_line(&accessory.health)
    );
    let names =
        |template: &crate::vocab::EnvTemplate| template.names().map(esc).collect::<Vec<_>>().join(", ");
    let _ = writeln!(
        out,
        "    its variables: {}; the app's: {} (the credential is generated on the host, never shown)",
        names(&accessory.env),
        names(&accessory.app_env)
    );
}

/// Never adopt what exists, whoever made it: not a record, not a
/// directory, not any Docker object on one of the names the engine will
/// create (all of them, the one-off check container and the edge network
/// included, come from the one list in `AppNames`); and a free app slot.
fn nothing_there(app: &AppName, ctx: &Context<'_>, facts: &dyn HostFacts) -> Result<(), Refusal> {
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
    Ok(())
}

/// The host port is published by no container, reserved by no app and
/// listened on by nothing.
fn port_free(host_port: u16, ctx: &Context<'_>, facts: &dyn HostFacts) -> Result<(), Refusal> {
    let (low, high) = ctx.policy.port_range;
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
    Ok(())
}

/// The two containers the deploy creates, as the operator reviews them.
fn containers(
    spec: &DeploySpec,
    entry: &CatalogEntry,
    names: &AppNames,
    ctx: &Context<'_>,
) -> Vec<ContainerPlan> {
    let labels = |role: &str| {
        BTreeMap::from([
            (LABEL_APP.to_owned(), spec.app.to_string()),
            (LABEL_ROLE.to_owned(), role.to_owned()),
            (LABEL_PLAN.to_owned(), ctx.plan_id.to_string()),
        ])
    };
    let accessories = spec.accessories.iter().map(|accessory| ContainerPlan {
        name: accessory.container_name.clone(),
        role: ACCESSORY_ROLE.into(),
        image: accessory.image.as_str().to_owned(),
        user: DATA_OWNER.into(),
        publish: None,
        labels: labels(ACCESSORY_ROLE),
    });
    let mut plans = vec![
        ContainerPlan {
            name: names.app_container.clone(),
            role: "app".into(),
            image: entry.image.as_str().to_owned(),
            user: "1000:1000".into(),
            publish: None,
            labels: labels("app"),
        },
        ContainerPlan {
            name: names.gateway_container.clone(),
            role: "gateway".into(),
            image: ctx.policy.nginx_image.as_str().to_owned(),
            user: "101:101".into(),
            publish: Some(format!("127.0.0.1:{}:{}", spec.host_port, crate::nginx::GATEWAY_LISTEN_PORT)),
            labels: labels("gateway"),
        },
    ];
    plans.extend(accessories);
    plans
}

/// What a deploy touches, in the operator's words: `served` are the names
/// the gateway answers for; `data` the app's data and whether it was kept.
fn impact(
    app: &AppName,
    names: &AppNames,
    host_port: u16,
    served: &str,
    data: Option<&(DataUse, bool)>,
    before_start: Option<&TaskSpec>,
    accessories: &[(AccessoryUse, bool)],
) -> Impact {
    let mut containers_touched = vec![
        format!("{} (new)", names.app_container),
        format!("{} (new)", names.gateway_container),
        format!("networks {} and {} (new)", names.network, names.edge_network),
    ];
    containers_touched.extend(data.map(|(data, kept)| data::touched(data, *kept)));
    containers_touched.extend(accessories.iter().map(|(a, kept)| accessories::touched(a, *kept)));
    containers_touched.extend(before_start.map(before_start_line));
    Impact {
        target: format!("new app {app} on 127.0.0.1:{host_port} for {served}"),
        containers_touched,
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback: "On failure the new containers, networks and app directory are removed and their absence \
                   verified: the plan then ends failed (rolled_back) and blocks nothing. If the removal cannot \
                   be verified, what is left stays as evidence for an operator. Nothing that existed before is \
                   touched."
            .to_owned()
            + if data.is_some() || !accessories.is_empty() {
                " New data is deleted with the rest; kept data is only unmounted again."
            } else {
                ""
            }
            + if accessories.is_empty() { "" } else { " A new accessory's credential goes with its new data." },
    }
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
