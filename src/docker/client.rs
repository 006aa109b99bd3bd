//! [`DockerClient`]: the [`Engine`] implemented by running the docker
//! client, `/usr/bin/docker`, with fixed argv. Runs as root inside the host
//! helper; every docker process goes through `crate::exec`.
//!
//! Invariants enforced here:
//! - the program is always `/usr/bin/docker`, argv is built from fixed words
//!   and validated values only (each value its own argv element, never a
//!   shell), the environment is fixed (`super::program::docker_env`), each call has a timeout;
//! - docker's stderr never leaves `exec`; errors name the step, not the text;
//! - every container we start carries the hardening in [`hardening`]; only the
//!   gateway publishes, and only on 127.0.0.1;
//! - a failed deploy removes what carries this plan's label (containers,
//!   networks) and nothing else; the app directory stays as evidence;
//! - stop and remove_image touch exactly the ids they are given; never `-f`,
//!   never prune; a refusal by docker is reported as one (nothing changed)
//!   only once a fresh look shows the target as it was.
//!
//! Networks: the app sits alone with the gateway on `vl-<app>`, created
//! `--internal` with no host address on its bridge (`argv::app_network`):
//! `--internal` alone still let an app container reach every host address
//! on Docker 20.10, the option leaves it nothing to reach but the gateway.
//! An internal network cannot publish, so the gateway is created on a
//! second, ordinary bridge `vl-<app>_edge` (no masquerade,
//! `argv::edge_network`) that carries the published port, and then joined
//! to `vl-<app>`. The `_` keeps that name out of the app-name space
//! (`^[a-z][a-z0-9-]*$`), so no app's network can collide with another
//! app's edge network. docs/docker-policy.md says what each container can reach.
//!
//! Layout: this file holds the engine, its docker calls and snapshot, and
//! the [`Engine`] impl; `client/runner.rs` the one way a docker process is
//! run ([`Runner`], [`DockerCall`], the fixed program and environment);
//! `client/deploy.rs` the deploy steps and their cleanup;
//! `client/lifecycle.rs` start, restart and update and their rollback;
//! `client/images.rs` what holds an image and its verified removal;
//! `client/removal.rs` the removal of an app;
//! `client/last_lines.rs` a failed app container's last lines, read before its rollback;
//! `client/restore.rs` restore: the app stopped, its data replaced from a snapshot, started again;
//! `client/task.rs` run_task: one declared task in a container of its own, then removed;
//! `client/verify.rs` when a failed first change is a refusal that changed nothing;
//! `client/pin.rs` the pull and inspect of `catalog pin`;
//! `client/queries.rs` the read-only questions (image ids, declared
//! volumes, network options, whether a gateway answers);
//! `client/argv.rs` argv building (hardening, labels, mount, inspect
//! template); `client/parse.rs` the parsers of docker's output. The managed
//! nginx.conf on disk is `crate::docker::gateway_file`, the host probes
//! `crate::docker::host_probe`: neither is docker.
//!
//! Restart policy `unless-stopped`: the app comes back after a crash or a
//! reboot of the engine, and `stop` first sets `--restart=no`, so a stopped
//! app stays stopped even across engine restarts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::gateway_file::{backup, open_managed_config, read_bounded, rewrite};
use super::host_probe::port_free;
use super::{AppRemoval, Deployed, Engine, EngineError, LogStreams, LogWindow, ProgressSink};
use crate::exec::ExecutionStatus;
use crate::vocab::{
    AccessoryUpdateSpec, Capacity, Container, ContainerId, DeploySpec, ImageHolds, ImageId, ImageRef,
    LABEL_PLAN, NAME_PREFIX, PlanId, RotationSpec, ServerName, Snapshot, StartSpec, TaskSpec, UpdateSpec,
};

mod accessory;
mod argv;
mod deploy;
mod edge;
mod images;
mod last_lines;
mod lifecycle;
mod limits;
pub mod parse;
mod pin;
mod queries;
mod removal;
mod restore;
mod rotation;
mod runner;
mod task;
mod verify;
pub use edge::{EdgeSetup, EdgeState};
pub use pin::{ImageConfig, LocalImage, PIN_TEMPLATE, PullFailure};
pub use queries::NetworkOptions;
pub(crate) use queries::null_as_empty;
use runner::SMALL_OUTPUT;
pub use runner::{DockerCall, DockerProcess, Runner};
use verify::FirstChange;

pub use limits::{DEPLOY_BUDGET, HealthCheck};
use limits::{NGINX_TEST, PULL, QUICK, SNAPSHOT_OUTPUT, STOP, STOP_GRACE_SECONDS};

use argv::argv;
pub use argv::{INHIBIT_IPV4_OPTION, INSPECT_TEMPLATE, NO_MASQUERADE_OPTION, SHM_SIZE, hardening};
pub use images::IMAGE_TEMPLATE;
use parse::{parse_container_ids, parse_images, parse_inspect_rows, parse_networks};

/// Where the gateway finds its configuration (the read-only bind mount).
pub const GATEWAY_CONFIG_PATH: &str = "/etc/nginx/nginx.conf";
const NGINX: &str = "/usr/sbin/nginx";

/// The engine that runs the docker client.
pub struct DockerClient<R: Runner = DockerProcess> {
    runner: R,
    state_dir: PathBuf,
    health: HealthCheck,
    /// Set while a deploy runs: no call may outlive it (see DEPLOY_BUDGET).
    deadline: std::sync::Mutex<Option<std::time::Instant>>,
    deploy_budget: Duration,
}

impl DockerClient<DockerProcess> {
    /// The real engine; `state_dir` is where capacity measures free disk.
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        DockerClient::with_runner(DockerProcess, state_dir)
    }
}

impl<R: Runner> DockerClient<R> {
    pub fn with_runner(runner: R, state_dir: impl Into<PathBuf>) -> Self {
        DockerClient {
            runner,
            state_dir: state_dir.into(),
            health: HealthCheck::default(),
            deadline: std::sync::Mutex::new(None),
            deploy_budget: DEPLOY_BUDGET,
        }
    }

    /// A quicker health check, for the unit tests of the steps around it.
    #[cfg(test)]
    pub fn with_health_check(mut self, health: HealthCheck) -> Self {
        self.health = health;
        self
    }

    /// A shorter deploy budget, for tests of the budget itself.
    #[cfg(test)]
    pub fn with_deploy_budget(mut self, budget: Duration) -> Self {
        self.deploy_budget = budget;
        self
    }

    /// The runner, for tests that read the argv a fake recorded.
    #[cfg(test)]
    pub fn runner(&self) -> &R {
        &self.runner
    }

    fn set_deadline(&self, deadline: Option<std::time::Instant>) {
        *self.deadline.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = deadline;
    }

    /// Runs one call and insists on exit 0.
    fn call(&self, step: &'static str, args: Vec<String>, timeout: Duration) -> Result<Vec<u8>, EngineError> {
        self.call_limited(step, args, timeout, SMALL_OUTPUT)
    }

    fn call_limited(
        &self,
        step: &'static str,
        args: Vec<String>,
        timeout: Duration,
        stdout_limit: usize,
    ) -> Result<Vec<u8>, EngineError> {
        let timeout = match *self.deadline.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) {
            // Out of budget: the call still runs with a token second, fails,
            // and the deploy's cleanup (which runs without the budget) follows.
            Some(deadline) => timeout.min(
                deadline.saturating_duration_since(std::time::Instant::now()).max(Duration::from_secs(1)),
            ),
            None => timeout,
        };
        let outcome = self.runner.run(&DockerCall { args, timeout, stdout_limit, stderr_is_data: false });
        if outcome.execution.execution_status == ExecutionStatus::Ok {
            Ok(outcome.stdout)
        } else {
            Err(EngineError::Call { step, execution: outcome.execution })
        }
    }

    fn snapshot_once(&self) -> Result<Snapshot, EngineError> {
        // Images and networks do not depend on the container list: ask for
        // them while `ps` and `inspect` run, to pay for one round trip less.
        let (containers, images, networks) = std::thread::scope(|scope| {
            let images =
                scope.spawn(|| self.call("list images", argv(&["image", "ls", "-q", "--no-trunc"]), QUICK));
            let networks = scope.spawn(|| {
                // A substring match: parse_networks keeps the real prefix.
                let filter = format!("name={NAME_PREFIX}");
                self.call(
                    "list networks",
                    argv(&["network", "ls", "--no-trunc", "--filter", &filter, "--format", "{{.Name}}"]),
                    QUICK,
                )
            });
            let containers = self.containers();
            let join = |h: std::thread::ScopedJoinHandle<'_, Result<Vec<u8>, EngineError>>, step| {
                h.join().unwrap_or(Err(EngineError::Unparsable { step }))
            };
            (containers, join(images, "list images"), join(networks, "list networks"))
        });
        Ok(Snapshot {
            containers: containers?,
            images: parse_images(&images?)?,
            networks: parse_networks(&networks?)?,
        }
        .normalize())
    }

    fn containers(&self) -> Result<Vec<Container>, EngineError> {
        let ids = self.call("list containers", argv(&["ps", "-aq", "--no-trunc"]), QUICK)?;
        let ids = parse_container_ids(&ids)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut args = argv(&["inspect", "--type", "container", "--format", INSPECT_TEMPLATE]);
        args.extend(ids.iter().map(|id| id.as_str().to_owned()));
        let rows = self.call_limited("inspect containers", args, QUICK, SNAPSHOT_OUTPUT)?;
        parse_inspect_rows(&rows)
    }

    /// Runs an `nginx -t`; exit 1 is nginx's verdict, anything else is docker's.
    /// (`docker exec` also exits 1 when the container is gone or stopped; the
    /// controller only changes running apps, and in `update_nginx` the restore
    /// that follows fails at its own named step in that case.)
    fn nginx_test(
        &self,
        step: &'static str,
        args: Vec<String>,
        timeout: Duration,
    ) -> Result<(), EngineError> {
        match self.call(step, args, timeout) {
            Ok(_) => Ok(()),
            Err(EngineError::Call { execution, .. })
                if execution.execution_status == ExecutionStatus::NonzeroExit
                    && execution.exit_code == Some(1) =>
            {
                Err(EngineError::NginxRejected)
            }
            Err(error) => Err(error),
        }
    }

    /// `--restart=no`, then a graceful stop, for exactly these containers
    /// (first the policy, so the engine cannot bring one back while or
    /// after it stops). A refusal of the very first change, verified, is
    /// [`EngineError::Refused`]; update's own stop of its old container
    /// comes after other changes and uses [`Self::stop_containers`].
    fn stop_verifying_first(&self, containers: &[ContainerId]) -> Result<(), EngineError> {
        const STEP: &str = "disable restart";
        let Some((first, rest)) = containers.split_first() else {
            return Ok(());
        };
        if let Err(error) = self.call(STEP, argv(&["update", "--restart=no", first.as_str()]), QUICK) {
            return Err(self.refused_unless_changed(error, first, FirstChange::DisableRestart, STEP));
        }
        self.call("stop container", argv(&["stop", "--time", STOP_GRACE_SECONDS, first.as_str()]), STOP)?;
        self.stop_containers(rest)
    }

    /// [`Self::stop_verifying_first`] without the verification: every
    /// failure is the call's error.
    fn stop_containers(&self, containers: &[ContainerId]) -> Result<(), EngineError> {
        for id in containers {
            self.call("disable restart", argv(&["update", "--restart=no", id.as_str()]), QUICK)?;
            self.call("stop container", argv(&["stop", "--time", STOP_GRACE_SECONDS, id.as_str()]), STOP)?;
        }
        Ok(())
    }

    fn test_and_reload(&self, gateway: &ContainerId) -> Result<(), EngineError> {
        self.nginx_test("nginx -t in gateway", argv(&["exec", gateway.as_str(), NGINX, "-t"]), NGINX_TEST)?;
        self.call(
            "nginx reload in gateway",
            argv(&["exec", gateway.as_str(), NGINX, "-s", "reload"]),
            NGINX_TEST,
        )?;
        Ok(())
    }
}

impl<R: Runner> Engine for DockerClient<R> {
    fn container_env(&self, id: &ContainerId) -> Result<Vec<String>, EngineError> {
        self.environment_of(id)
    }
    fn container(&self, id: &ContainerId) -> Result<Option<Container>, EngineError> {
        // One inspect instead of a snapshot's four calls. docker fails the
        // same way for a gone container and an unreachable engine; only
        // then does the snapshot tell the two apart.
        let args = argv(&["inspect", "--type", "container", "--format", INSPECT_TEMPLATE, "--", id.as_str()]);
        match self.call("inspect container", args, QUICK) {
            Ok(row) => Ok(parse_inspect_rows(&row)?.into_iter().find(|container| &container.id == id)),
            Err(EngineError::Call { .. }) => {
                Ok(self.snapshot()?.containers.into_iter().find(|c| &c.id == id))
            }
            Err(other) => Err(other),
        }
    }

    fn snapshot(&self) -> Result<Snapshot, EngineError> {
        // A container removed between `ps` and `inspect` makes inspect fail;
        // a fresh attempt sees a consistent list.
        let mut last = None;
        for _ in 0..3 {
            match self.snapshot_once() {
                Ok(snapshot) => return Ok(snapshot),
                Err(error) => last = Some(error),
            }
        }
        Err(last.expect("at least one attempt"))
    }

    fn host_port_free(&self, port: u16) -> bool {
        port_free(port)
    }

    fn capacity(&self) -> Result<Capacity, EngineError> {
        super::host_probe::capacity(&self.state_dir)
    }

    fn deploy(&self, spec: &DeploySpec, progress: &dyn ProgressSink) -> Result<Deployed, EngineError> {
        self.deploy_within_budget(spec, progress)
    }

    fn update_nginx(
        &self,
        app_dir: &Path,
        gateway: &ContainerId,
        old_config: &str,
        new_config: &str,
    ) -> Result<(), EngineError> {
        let mut file = open_managed_config(app_dir)?;
        let current = read_bounded(&mut file)?;
        if current != old_config.as_bytes() {
            return Err(EngineError::ManagedFileChanged);
        }
        backup(app_dir, old_config)?;
        // In place: the gateway's bind mount follows the inode, not the name,
        // so a rename would leave the gateway reading the old file.
        rewrite(&mut file, new_config)?;
        match self.test_and_reload(gateway) {
            Ok(()) => self.wait_until_served(gateway, new_config),
            Err(error) => {
                // Rolling back: every failure from here on names a `restore`
                // step, so the operator can tell "rejected and restored"
                // (the original error) from "restore failed too".
                rewrite(&mut file, old_config)
                    .map_err(|_| EngineError::Host { step: "restore the previous nginx.conf" })?;
                let g = gateway.as_str();
                self.call("restore: nginx -t in gateway", argv(&["exec", g, NGINX, "-t"]), NGINX_TEST)?;
                self.call(
                    "restore: nginx reload in gateway",
                    argv(&["exec", g, NGINX, "-s", "reload"]),
                    NGINX_TEST,
                )?;
                // Only a rejection by `nginx -t` proves that nginx never
                // loaded the new bytes (no reload was sent); a failed or
                // timed-out reload call may have half happened, so it stays
                // an error that needs an operator even after the restore.
                Err(match error {
                    EngineError::NginxRejected => EngineError::NginxRejectedAndRestored,
                    other => other,
                })
            }
        }
    }

    fn stop(&self, containers: &[ContainerId]) -> Result<(), EngineError> {
        self.stop_verifying_first(containers)
    }

    fn remove_container(&self, container: &ContainerId) -> Result<(), EngineError> {
        self.stop_verifying_first(std::slice::from_ref(container))?;
        // Never -f (a container that runs again is refused, not killed),
        // never -v (volumes are not ours to remove).
        self.call("remove container", argv(&["rm", container.as_str()]), QUICK).map(|_| ())
    }

    fn remove_image(&self, image: &ImageId) -> Result<(), EngineError> {
        // Never -f, never prune: if anything still holds the image, docker
        // refuses and that refusal, once verified, is the answer.
        self.remove_image_verified(image)
    }

    fn image_holds(&self, image: &ImageId) -> Result<Option<ImageHolds>, EngineError> {
        self.holds(image)
    }

    fn start(&self, spec: &StartSpec, progress: &dyn ProgressSink) -> Result<(), EngineError> {
        self.start_app(spec, progress)
    }

    fn restart(&self, spec: &StartSpec, progress: &dyn ProgressSink) -> Result<(), EngineError> {
        self.restart_app(spec, progress)
    }

    fn update(&self, spec: &UpdateSpec, progress: &dyn ProgressSink) -> Result<ContainerId, EngineError> {
        self.update_app(spec, progress)
    }

    fn update_accessory(
        &self,
        spec: &AccessoryUpdateSpec,
        progress: &dyn ProgressSink,
    ) -> Result<ContainerId, EngineError> {
        self.update_accessory_steps(spec, progress)
    }

    fn rotate_credential(
        &self,
        spec: &RotationSpec,
        progress: &dyn ProgressSink,
    ) -> Result<ContainerId, EngineError> {
        self.rotate_credential_steps(spec, progress)
    }

    fn logs(&self, container: &ContainerId, window: LogWindow) -> Result<LogStreams, EngineError> {
        self.container_logs(container, window)
    }

    fn remove_app(&self, removal: &AppRemoval<'_>) -> Result<(), EngineError> {
        self.remove_app_steps(removal)
    }

    fn resolve_image(&self, reference: &ImageRef) -> Result<Option<ImageId>, EngineError> {
        self.resolve_image_id(reference)
    }

    fn image_volumes(&self, reference: &ImageRef) -> Result<Option<Vec<String>>, EngineError> {
        self.declared_volumes(reference)
    }

    fn plan_networks(&self, plan: &PlanId) -> Result<Vec<super::LabelledNetwork>, EngineError> {
        let filter = format!("label={LABEL_PLAN}={plan}");
        let listed = self.call(
            "list plan networks",
            argv(&["network", "ls", "--no-trunc", "--filter", &filter, "--format", "{{.ID}} {{.Name}}"]),
            QUICK,
        )?;
        parse::parse_labelled_networks(&listed)
    }

    fn gateway_answers(&self, port: u16, server_name: &ServerName) -> bool {
        self.answers_once(port, server_name)
    }

    fn edge_name(&self, name: &ServerName) -> crate::vocab::EdgeNameFacts {
        self.edge_name_facts(name)
    }

    fn edge_answers(
        &self,
        https: std::net::SocketAddr,
        name: &ServerName,
        path: &crate::vocab::HealthPath,
    ) -> crate::vocab::HttpsAnswer {
        self.edge_https(https, name, path)
    }

    fn run_task(&self, spec: &TaskSpec) -> Result<crate::logs::TaskRun, EngineError> {
        self.run_task_steps(spec)
    }

    /// Not a docker call: restic and fsfreeze on the host (`super::backup`),
    /// behind the engine so the controller's tests fake it as the rest.
    fn backup(&self, spec: &crate::vocab::BackupSpec) -> Result<crate::vocab::BackupRun, EngineError> {
        super::backup::run(spec)
    }

    fn restore(
        &self,
        spec: &crate::vocab::RestoreSpec,
        progress: &dyn ProgressSink,
    ) -> Result<crate::vocab::RestoreRun, EngineError> {
        self.restore_steps(spec, progress)
    }

    fn edge_apply(&self, change: &crate::vocab::EdgeChange) -> Result<(), EngineError> {
        self.edge_apply_steps(change)
    }
}

#[cfg(test)]
mod tests;
