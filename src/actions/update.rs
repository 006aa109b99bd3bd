//! `update`: a running app moved to the image a catalog key pins now (or
//! to its own image with the configuration of its env file as it is now),
//! with one switch: a new container beside the old one, checked through
//! the gateway under a one-off name, then the gateway switched to it and
//! the old one removed. `rollback.rs` runs the same switch back to a kept
//! version; the switch, its checks and its record effect live here. Runs in
//! the root helper (derive at prepare and again at execute; act at execute).
//!
//! Security invariants enforced here:
//! - both act only on a running app we recorded whose labelled container
//!   set is exactly the recorded one (nothing unmanaged is replaced);
//! - update names a catalog key, never an image reference;
//! - every name either creates is derived from the app and the plan id.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange, config_lines, configuration};
use super::rolled_back;
use super::run_task::{RunsIn, before_start, before_start_line, task_line};
use super::start::deployed_health_path;
use crate::control::app_record::{AppRecord, AppState, ImageUse, KeptVersion};
use crate::control::scope::Scope;
use crate::control::validate::{
    Context, HostFacts, MIB, accessories, app_name, configuration as configured, data, exact_keys,
    not_in_catalog, owned_running, refuse_volumes, string,
};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{
    Action, AppName, Code, ContainerId, EnvFileUse, HealthPath, ImageRef, PlanId, Refusal, ServerName,
    TaskSpec, UpdateSpec, refuse,
};

/// An update's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Update {
    /// The catalog key the agent chose; `spec.app_image` is what it maps to.
    pub image_key: String,
    /// The recorded container ids, sorted (the scope).
    pub containers: Vec<ContainerId>,
    pub spec: UpdateSpec,
    /// The version it replaces, kept for rollback once it completes.
    /// Omitted when absent, so plans stored before it still match their digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<KeptVersion>,
}

impl PlanAction for Update {
    const ACTION: Action = Action::Update;
    const RECORDS_IMAGES: bool = true;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        facts: &dyn HostFacts,
    ) -> Result<(Update, Impact), Refusal> {
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
        let env_file = configured(entry, facts)?;
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
        refuse_volumes(&format!("The catalog image `{image_key}`"), &entry.image, data_path(record), facts)?;
        accessories::unchanged(record, image_key, entry)?;
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
        let target = SwitchTo {
            image: &entry.image,
            health_path: &entry.health_path,
            env_file,
            before_start: Some(entry),
        };
        let (spec, mut impact, replaces) = switch(&app, record, &target, ctx, facts)?;
        impact.target = format!(
            "app {app}: image {} -> {image_key} ({}){}",
            record.image_key,
            entry.image,
            configured_now(&spec, record)
        );
        let containers = sorted(record);
        let replaces = Some(replaces);
        Ok((Update { image_key: image_key.to_owned(), containers, spec, replaces }, impact))
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
            "After    {} (catalog key {}) in new container {}",
            esc(spec.app_image.as_str()),
            esc(&self.image_key),
            esc(&spec.container_name)
        );
        configuration(out, spec.env_file.as_ref());
        if let Some(task) = &spec.before_start {
            let _ = writeln!(out, "  before the new container starts, once: task {}", task_line(task));
        }
        switch_lines(out, spec);
    }

    fn act<E: Engine>(&self, engine: &E, progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        switch_on(engine, &self.spec, progress)
    }

    fn record(&self, done: &Done<'_>) -> Vec<RecordChange> {
        switched(done, &self.image_key, &self.spec, self.replaces.as_ref())
    }

    fn rolled_back(cause: &EngineError, id: &PlanId) -> Refusal {
        rolled_back::update(cause, id)
    }

    /// An update sealed before updates recorded what they replace (0.1.0)
    /// still runs after the upgrade, and its record keeps the version from
    /// the app record instead (without its image id). Any other difference
    /// still voids the plan.
    fn into_sealed_form(mut self, sealed: &Update) -> Update {
        if sealed.replaces.is_none() {
            self.replaces = None;
        }
        self
    }
}

/// The lines both switches start with in `show`: the app, and the version
/// that runs now in which container.
pub(super) fn switch_before(out: &mut String, spec: &UpdateSpec) {
    let _ = writeln!(out, "App      {}", esc(spec.app.as_str()));
    let _ = writeln!(out, "Before   {} in container {}", esc(&spec.previous_image), spec.old_app);
}

/// The lines both switches end with in `show`: where the new container is
/// checked first, and the gateway's configuration after.
pub(super) fn switch_lines(out: &mut String, spec: &UpdateSpec) {
    let _ = writeln!(out, "  checked first on Host {}, then on {}", spec.check_name, spec.server_name);
    let _ = writeln!(out, "  nginx.conf after the switch:");
    config_lines(out, &spec.new_config);
}

/// The engine's switch, and the containers it leaves serving.
pub(super) fn switch_on<E: Engine>(
    engine: &E,
    spec: &UpdateSpec,
    progress: &dyn ProgressSink,
) -> Result<Effect, EngineError> {
    engine.update(spec, progress).map(|new| Effect::from(vec![new.to_string(), spec.gateway.to_string()]))
}

/// The record of a running app, with the refusal words of `doing`.
pub(super) fn running<'a>(
    app: &AppName,
    ctx: &'a Context<'_>,
    doing: &str,
) -> Result<&'a AppRecord, Refusal> {
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
pub(super) fn data_path(record: &AppRecord) -> Option<&crate::vocab::DataPath> {
    record.data.as_ref().map(|data| &data.path)
}

pub(super) fn sorted(record: &AppRecord) -> Vec<ContainerId> {
    let mut containers = record.containers.clone();
    containers.sort();
    containers
}

/// What the impact adds when the new container gets other configuration
/// than the app runs with.
pub(super) fn configured_now(spec: &UpdateSpec, record: &AppRecord) -> &'static str {
    if spec.env_file != record.configuration {
        ", with the configuration of its env file as it is now"
    } else {
        ""
    }
}

/// The version a switch moves to, and the configuration its container gets.
pub(super) struct SwitchTo<'a> {
    pub image: &'a ImageRef,
    pub health_path: &'a HealthPath,
    pub env_file: Option<EnvFileUse>,
    /// The entry's `before_start` task (an update's; a rollback runs none:
    /// the older version meets the data as the newer one left it).
    pub before_start: Option<&'a crate::control::policy::CatalogEntry>,
}

/// The `before_start` task of the entry an update moves to, in its image,
/// with its configuration and the app's data; none for a rollback.
fn switch_task(
    app: &AppName,
    record: &AppRecord,
    target: &SwitchTo<'_>,
    ctx: &Context<'_>,
) -> Option<TaskSpec> {
    let entry = target.before_start?;
    let runs_in = RunsIn {
        image: target.image,
        env_file: target.env_file.clone(),
        data: record.data.clone(),
        accessories_env: record.accessories_env(),
    };
    before_start(app, entry, runs_in, ctx)
}

/// The switch both actions run: the spec, the impact (its target left to
/// the caller) and the version it replaces, as a rollback would need it.
pub(super) fn switch(
    app: &AppName,
    record: &AppRecord,
    target: &SwitchTo<'_>,
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
    data::still_there(record, facts)?;
    room_to_switch(ctx, facts)?;
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
        before_start: switch_task(app, record, target, ctx),
        accessories_env: record.accessories_env(),
    };
    let mut impact =
        switch_impact(record, &names.gateway_container, &container_name, old.map_or("", |c| c.name.as_str()));
    impact.containers_touched.extend(spec.before_start.as_ref().map(before_start_line));
    let replaces = KeptVersion {
        image_key: record.image_key.clone(),
        app_image: record.app_image.clone(),
        image_id: old.map(|c| c.image_id.clone()),
        container_port: port,
        health_path: deployed_health_path(record, ctx),
    };
    Ok((spec, impact, replaces))
}

/// The capacity floors, said for a switch, which runs a second app
/// container for a moment.
fn room_to_switch(ctx: &Context<'_>, facts: &dyn HostFacts) -> Result<(), Refusal> {
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
    Ok(())
}

/// What a switch touches, in the operator's words (its target left to the
/// caller): the new container beside `old_name`, the gateway named
/// `gateway_name`, the data.
fn switch_impact(record: &AppRecord, gateway_name: &str, container_name: &str, old_name: &str) -> Impact {
    Impact {
        target: String::new(),
        containers_touched: vec![
            format!("{container_name} (new, beside the old one)"),
            format!("{} (config switched to the new container, tested, reloaded)", gateway_name),
            format!("{} (removed once the new one answers)", old_name),
        ]
        .into_iter()
        .chain(data::kept_line(record))
        .collect(),
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback:
            "The old container keeps serving until the new one has answered through the gateway twice. \
                   On any failure before that, the previous nginx.conf is restored and reloaded and the new \
                   container removed, and that is verified: the plan then ends failed (rolled_back) and \
                   blocks nothing."
                .into(),
    }
}

/// The record after an update or a rollback (one switch): switched, or
/// `needs_inspection` when the engine failed.
pub(super) fn switched(
    done: &Done<'_>,
    image_key: &str,
    spec: &UpdateSpec,
    replaces: Option<&KeptVersion>,
) -> Vec<RecordChange> {
    let Some(old) = done.apps.get(spec.app.as_str()) else { return Vec::new() };
    let mut record = old.clone();
    record.plan_id = done.plan_id.clone();
    match done
        .result
        .as_ref()
        .ok()
        .and_then(|effect| effect.containers.first())
        .and_then(|i| ContainerId::parse(i))
    {
        Some(new) => {
            // An update planned before versions were kept: the record says
            // what it replaced, but not its image id or health path.
            let replaced = replaces.cloned().unwrap_or_else(|| KeptVersion {
                image_key: record.image_key.clone(),
                app_image: record.app_image.clone(),
                image_id: None,
                container_port: record.container_port,
                health_path: record.health_path.clone().unwrap_or_default(),
            });
            updated(&mut record, image_key, spec, new, done.after, done.now);
            record.kept_versions = kept(&record.kept_versions, replaced, &spec.app_image, done.keep);
        }
        None => record.state = AppState::NeedsInspection,
    }
    vec![RecordChange::Put(Box::new(record))]
}

/// The kept versions once `running` runs and `replaced` was left: the one
/// left first, then the earlier ones, never the one that runs (a rollback
/// takes its version out of the list) nor one twice, at most `keep`.
pub fn kept(
    earlier: &[KeptVersion],
    replaced: KeptVersion,
    running: &ImageRef,
    keep: usize,
) -> Vec<KeptVersion> {
    let mut list = vec![replaced];
    for version in earlier {
        if !list.iter().any(|v| v.app_image == version.app_image) {
            list.push(version.clone());
        }
    }
    list.retain(|v| v.app_image != *running);
    list.truncate(keep);
    list
}

/// The record of an app whose update completed: the new container in the
/// old one's place, the new image and config, and the image history.
fn updated(
    record: &mut AppRecord,
    image_key: &str,
    spec: &UpdateSpec,
    new: ContainerId,
    after: Option<&crate::vocab::Snapshot>,
    now: i64,
) {
    if record.image_history.is_empty() {
        // A record from before the history: what ran, since when unknown.
        record.image_history.push(ImageUse {
            image_key: record.image_key.clone(),
            app_image: record.app_image.clone(),
            since: None,
        });
    }
    record.image_history.push(ImageUse {
        image_key: image_key.to_owned(),
        app_image: spec.app_image.clone(),
        since: Some(now),
    });
    record.containers.retain(|c| *c != spec.old_app);
    record.containers.insert(0, new.clone());
    // The claim on the old image stays (remove_image may take it once no
    // container uses it); the new one is added.
    if let Some(image) =
        after.and_then(|s| s.containers.iter().find(|c| c.id == new)).map(|c| c.image_id.clone())
    {
        record.image_ids.push(image);
        record.image_ids.sort();
        record.image_ids.dedup();
    }
    record.app_container = Some(new);
    record.state = AppState::Running;
    record.image_key = image_key.to_owned();
    record.app_image = spec.app_image.clone();
    record.nginx_config = spec.new_config.clone();
    record.upstream = Some(spec.container_name.clone());
    record.configuration = spec.env_file.clone();
    record.health_path = Some(spec.health_path.clone());
    record.data = spec.data.clone();
}

#[cfg(test)]
mod kept_tests {
    use super::*;

    fn version(n: char) -> KeptVersion {
        KeptVersion {
            image_key: format!("web{n}"),
            app_image: ImageRef::parse(&format!("registry.example/web@sha256:{}", n.to_string().repeat(64)))
                .unwrap(),
            image_id: None,
            container_port: 8080,
            health_path: Default::default(),
        }
    }

    /// Tried: updates a -> b -> c -> d with keep 2, then a rollback to c
    /// (d is kept in turn), and an update back to a kept version.
    #[test]
    fn the_kept_list_is_newest_first_bounded_and_never_the_running_one() {
        let (a, b, c, d) = (version('a'), version('b'), version('c'), version('d'));
        let mut list = kept(&[], a.clone(), &b.app_image, 2);
        assert_eq!(list, std::slice::from_ref(&a));
        list = kept(&list, b.clone(), &c.app_image, 2);
        assert_eq!(list, [b.clone(), a.clone()]);
        list = kept(&list, c.clone(), &d.app_image, 2);
        assert_eq!(list, [c.clone(), b.clone()], "a falls out beyond keep_versions");
        // rollback: d runs c again, so c leaves the list and d joins it.
        list = kept(&list, d.clone(), &c.app_image, 2);
        assert_eq!(list, [d.clone(), b.clone()]);
        // An update (not a rollback) to b: b is not kept while it runs.
        list = kept(&list, c.clone(), &b.app_image, 10);
        assert_eq!(list, [c, d]);
    }
}
