//! The deploy of one app through the docker CLI, step by step, and the
//! cleanup of a failed one. Runs as root inside the host helper.
//!
//! Security invariants enforced here: nothing is created before the spec's
//! untyped values and the host port are checked; every object is created
//! under a name from [`crate::vocab::AppNames`] and carries this plan's
//! label; a failed deploy removes exactly the containers and networks that
//! carry this plan's label (or whose ids the steps saw), with `rm -f` only
//! for those, and the app directory it created (only nginx.conf, then an
//! empty directory). The rollback is verified by listing the plan's label
//! again: only a clean listing after a step whose outcome is known makes
//! the error [`EngineError::RolledBack`] (the plan ends `failed` and blocks
//! nothing); anything else keeps it `needs_inspection`, with what is left
//! kept as evidence.

use super::argv::{
    accessories_env, app_network, argv, config_mount, data_mount, edge_network, env_file, hardening, labels,
};
use super::parse::{first_line, lines};
use super::{DockerClient, NGINX, NGINX_TEST, PULL, QUICK, Runner};
use crate::docker::accessory_files::remove_secret;
use crate::docker::data_volume::{self, Ensured};
use crate::docker::gateway_file::{remove_new_config, write_new_config};
use crate::docker::host_probe::{http_get, port_free};
use crate::docker::{Deployed, EngineError, ProgressSink};
use crate::nginx::GATEWAY_LISTEN_PORT;
use crate::vocab::{ContainerId, DeploySpec, HealthPath, LABEL_PLAN, PlanId, Step};

impl<R: Runner> DockerClient<R> {
    /// The whole deploy: refuse before the first mutation if a value or the
    /// port is wrong, then the steps under [`super::DEPLOY_BUDGET`], then on
    /// failure remove what this plan created.
    pub(super) fn deploy_within_budget(
        &self,
        spec: &DeploySpec,
        progress: &dyn ProgressSink,
    ) -> Result<Deployed, EngineError> {
        check_untyped_values(spec)?;
        // The controller checked at plan time; a listener may have arrived
        // since. Refusing here creates nothing.
        if !port_free(spec.host_port) {
            return Err(EngineError::PortTaken { port: spec.host_port });
        }
        let mut created = Created::default();
        let deadline = std::time::Instant::now() + self.deploy_budget;
        self.set_deadline(Some(deadline));
        let result = self.deploy_steps(spec, &mut created, progress);
        self.set_deadline(None);
        match result {
            Ok(deployed) => Ok(deployed),
            Err(error) => {
                // Why the app did not answer, read while it still exists,
                // or what its before_start task printed.
                let app_log = self.failed_app_log(&error, created.app.as_ref(), deadline);
                self.remove_created(&spec.plan_id, &created);
                // A step that timed out may still be carried out by the
                // daemon after any listing we make, and a failed file step
                // may have left a directory we cannot tell from someone
                // else's: never call those verified.
                // The directory goes last: while anything is left, it
                // stays as evidence beside it.
                let gone = !error.outcome_unknown()
                    && !matches!(error, EngineError::Host { .. })
                    && self.created_by_plan(&spec.plan_id).is_ok_and(|(c, n)| c.is_empty() && n.is_empty())
                    && (!created.app_dir || remove_new_config(&spec.app_dir, &created.env_files))
                    && release_data(spec, created.data)
                    && release_accessories(&created);
                Err(if gone { EngineError::RolledBack { cause: Box::new(error), app_log } } else { error })
            }
        }
    }

    /// Every container and network that carries this plan's label. Plan ids
    /// are unique and a plan executes once, so these are exactly the objects
    /// this deploy created, even if a call timed out after the engine acted.
    pub(super) fn created_by_plan(
        &self,
        plan_id: &PlanId,
    ) -> Result<(Vec<String>, Vec<String>), EngineError> {
        let filter = format!("label={LABEL_PLAN}={plan_id}");
        let containers = self.call(
            "find plan containers",
            argv(&["ps", "-aq", "--no-trunc", "--filter", &filter]),
            QUICK,
        )?;
        let networks = self.call(
            "find plan networks",
            argv(&["network", "ls", "-q", "--no-trunc", "--filter", &filter]),
            QUICK,
        )?;
        Ok((lines(&containers), lines(&networks)))
    }

    /// Removes what this plan created, best effort: whatever fails here is
    /// found by the verifying listing afterwards.
    pub(super) fn remove_created(&self, plan_id: &PlanId, known: &Created) {
        let (mut containers, mut networks) = self.created_by_plan(plan_id).unwrap_or_default();
        containers.extend(known.containers.iter().map(|id| id.as_str().to_owned()));
        containers.sort();
        containers.dedup();
        networks.extend(known.networks.iter().cloned());
        networks.sort();
        networks.dedup();
        for id in containers.iter().filter(|id| ContainerId::parse(id).is_some()) {
            // `rm -f` of a container this plan created: the only forced
            // removal in this file, and never of anything else.
            let _ = self.call("remove new container", argv(&["rm", "-f", "-v", id]), QUICK);
        }
        for id in networks.iter().filter(|id| crate::text::is_lower_hex(id, 64)) {
            let _ = self.call("remove new network", argv(&["network", "rm", id]), QUICK);
        }
    }

    fn deploy_steps(
        &self,
        spec: &DeploySpec,
        created: &mut Created,
        progress: &dyn ProgressSink,
    ) -> Result<Deployed, EngineError> {
        let app = &spec.app;
        let names = app.names();
        let (network, edge) = (&names.network, &names.edge_network);
        let (app_image, gateway_image) = (spec.app_image.as_str(), spec.gateway_image.as_str());
        self.pull_all(spec)?;
        progress.step(Step::Pulled);

        let role_labels = |role: &str| labels(app, role, &spec.plan_id);
        let id = self.call("create app network", app_network(role_labels("network"), network), QUICK)?;
        created.networks.push(first_line(&id).to_owned());

        let id = self.call("create edge network", edge_network(role_labels("network"), edge), QUICK)?;
        created.networks.push(first_line(&id).to_owned());
        progress.step(Step::Network);

        let config_path = write_new_config(&spec.app_dir, &spec.nginx_config)?;
        created.app_dir = true;
        let mount = config_mount(&config_path);

        if let Some(data) = &spec.data {
            created.data = Some(data_volume::ensure(data)?);
        }
        self.accessories_up(spec, created)?;
        if let Some(task) = &spec.before_start {
            // Its container is gone once this returns, whatever it says.
            self.before_start(task)?;
        }
        // The app: on the internal network only, reachable as `app`, publishes nothing.
        let mut args = argv(&["create", "--name", &names.app_container]);
        args.extend(role_labels("app"));
        args.extend(hardening(&spec.limits, "1000:1000", "unless-stopped"));
        args.extend(env_file(spec.env_file.as_ref()));
        args.extend(accessories_env(spec.accessories_env().as_deref()));
        args.extend(data_mount(spec.data.as_ref()));
        args.extend(argv(&["--network", network, "--network-alias", crate::nginx::APP_ALIAS]));
        args.push(app_image.to_owned());
        let app_id = self.created_container("create app container", args, created)?;
        created.app = Some(app_id.clone());
        self.call("start app container", argv(&["start", app_id.as_str()]), QUICK)?;
        progress.step(Step::AppStarted);

        // nginx -t in a one-off container identical to the gateway but for the
        // port: it must resolve `app`, so it joins the internal network.
        let mut args = argv(&["run", "--rm", "--name", &names.check_container]);
        args.extend(role_labels("check"));
        args.extend(hardening(&spec.limits, "101:101", "no"));
        args.extend(argv(&["--network", network, "--mount", &mount, gateway_image, NGINX, "-t"]));
        self.nginx_test("test nginx config", args, NGINX_TEST)?;
        progress.step(Step::GatewayTested);

        let mut args = argv(&["create", "--name", &names.gateway_container]);
        args.extend(role_labels("gateway"));
        args.extend(hardening(&spec.limits, "101:101", "unless-stopped"));
        let publish = format!("127.0.0.1:{}:{GATEWAY_LISTEN_PORT}", spec.host_port);
        args.extend(argv(&["--network", edge, "--publish", &publish, "--mount", &mount]));
        args.push(gateway_image.to_owned());
        let gateway_id = self.created_container("create gateway container", args, created)?;
        self.call(
            "connect gateway to app network",
            argv(&["network", "connect", network, gateway_id.as_str()]),
            QUICK,
        )?;
        self.call("start gateway container", argv(&["start", gateway_id.as_str()]), QUICK)?;

        if !self.healthy(spec.host_port, spec.server_name.as_str(), &spec.health_path) {
            return Err(EngineError::HealthCheckFailed);
        }
        progress.step(Step::HealthCheck);
        Ok(Deployed {
            app_container: app_id,
            gateway_container: gateway_id,
            accessories: std::mem::take(&mut created.accessories),
        })
    }

    /// Every image the deploy creates a container of, by digest, each
    /// refused if it declares a volume its data does not cover.
    fn pull_all(&self, spec: &DeploySpec) -> Result<(), EngineError> {
        self.call("pull app image", argv(&["pull", "--quiet", spec.app_image.as_str()]), PULL)?;
        self.call("pull gateway image", argv(&["pull", "--quiet", spec.gateway_image.as_str()]), PULL)?;
        for accessory in &spec.accessories {
            let image = accessory.image.as_str();
            self.call("pull accessory image", argv(&["pull", "--quiet", image]), PULL)?;
        }
        self.refuse_volumes(&spec.app_image, spec.data.as_ref().map(|d| &d.path))?;
        self.refuse_volumes(&spec.gateway_image, None)?;
        for accessory in &spec.accessories {
            self.refuse_volumes(&accessory.image, Some(&accessory.data.path))?;
        }
        Ok(())
    }

    fn created_container(
        &self,
        step: &'static str,
        args: Vec<String>,
        created: &mut Created,
    ) -> Result<ContainerId, EngineError> {
        let out = self.call(step, args, QUICK)?;
        let id = ContainerId::parse(first_line(&out)).ok_or(EngineError::Unparsable { step })?;
        created.containers.push(id.clone());
        Ok(id)
    }

    pub(super) fn healthy(&self, port: u16, host: &str, path: &HealthPath) -> bool {
        for attempt in 0..self.health.tries {
            if attempt > 0 {
                std::thread::sleep(self.health.interval);
            }
            if let Some(reply) = http_get(port, host, path, self.health.timeout)
                && (200..400).contains(&reply.status)
            {
                return true;
            }
        }
        false
    }
}

/// A failed deploy's data back as it was: new data deleted, kept data
/// unmounted and whole. Whether that succeeded.
fn release_data(spec: &DeploySpec, ensured: Option<Ensured>) -> bool {
    match (&spec.data, ensured) {
        (Some(data), Some(ensured)) => data_volume::release(data, ensured == Ensured::Made).is_ok(),
        _ => true,
    }
}

/// A failed deploy's accessories' data back as it was (new data deleted,
/// kept data unmounted) and the credentials it made deleted: whether that
/// succeeded. A kept credential stays with its kept data.
fn release_accessories(created: &Created) -> bool {
    let data = created
        .accessory_data
        .iter()
        .all(|(data, ensured)| data_volume::release(data, *ensured == Ensured::Made).is_ok());
    data && created.secrets.iter().all(|path| remove_secret(path))
}

/// What a deploy created so far, by id.
#[derive(Debug, Default)]
pub(super) struct Created {
    pub(super) containers: Vec<ContainerId>,
    pub(super) networks: Vec<String>,
    /// The container among `containers` whose last lines a failed plan
    /// keeps: the app's, or an accessory's while it is not ready yet.
    pub(super) app: Option<ContainerId>,
    /// The accessories' containers among `containers`.
    pub(super) accessories: Vec<ContainerId>,
    /// Each accessory's data as this deploy mounted it, made or kept.
    pub(super) accessory_data: Vec<(crate::vocab::DataUse, Ensured)>,
    /// The credentials this deploy made (kept ones are not listed).
    pub(super) secrets: Vec<std::path::PathBuf>,
    /// The env files it wrote in the app directory.
    pub(super) env_files: Vec<std::path::PathBuf>,
    /// This deploy created the app directory and its nginx.conf (the
    /// controller refuses a deploy whose directory exists).
    app_dir: bool,
    /// This deploy mounted the app's data: made now (removed again by a
    /// failed deploy) or kept from before (only unmounted again).
    data: Option<Ensured>,
}

/// The values of a spec that no type carries. The names, references and
/// the plan id are validated types ([`DeploySpec`]); what is left is the
/// path that goes into a `--mount` list (no separators, quotes or
/// controls) and the numbers.
/// A host path that can stand as a `source=` in docker's comma-separated
/// `--mount` list: absolute, with no separator, quote or control.
pub(super) fn fits_mount_list(path: &std::path::Path) -> bool {
    let text = path.to_str().unwrap_or("");
    path.is_absolute()
        && !text.is_empty()
        && text.bytes().all(|c| c.is_ascii_graphic() && !b",:\"'=".contains(&c))
}

fn check_untyped_values(spec: &DeploySpec) -> Result<(), EngineError> {
    let dir_ok = fits_mount_list(&spec.app_dir);
    // An env file path is one argv element after `--env-file`; absolute,
    // so docker can never read it as an option or relative to its cwd.
    let env_ok = spec.env_file.as_ref().is_none_or(|used| used.path.is_absolute());
    // The mount point goes into the `--mount` list too.
    let data_ok =
        spec.data.as_ref().is_none_or(|data| fits_mount_list(&data.mount) && data.image.is_absolute());
    let accessories_ok = spec
        .accessories
        .iter()
        .all(|a| fits_mount_list(&a.data.mount) && a.data.image.is_absolute() && a.port >= 1024);
    if dir_ok
        && accessories_ok
        && env_ok
        && data_ok
        && spec.host_port >= 1024
        && spec.container_port >= 1
        && spec.limits.millicpus > 0
    {
        Ok(())
    } else {
        Err(EngineError::Host { step: "validate deploy spec" })
    }
}
