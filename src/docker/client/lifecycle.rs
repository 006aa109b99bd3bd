//! The start, the restart and the update of a managed app through the
//! docker CLI, and the rollback of a failed one. Runs as root inside the
//! host helper.
//!
//! Security invariants enforced here:
//! - start touches exactly the two recorded ids; a failed start stops
//!   them again (restart=no first) and is called rolled back only once
//!   both are seen stopped; restart is stop's steps on the same two ids,
//!   then start's;
//! - update creates one container, under a name derived from the app and
//!   the plan id and carrying the plan's label, and removes the old one
//!   only after the new one answered through the gateway twice (on a
//!   check name first, then on the app's server name). Until then a
//!   failure restores the previous nginx.conf (tested, reloaded) and
//!   removes what carries the plan's label; it is called rolled back only
//!   when that listing is clean after steps whose outcome is known and
//!   the old app container and the gateway still run;
//! - nginx reloads are graceful, so the old container serves every
//!   request until the switch, and in-flight ones for a moment after it.

use std::time::{Duration, Instant};

use super::argv::{accessories_env, argv, data_mount, env_file, hardening, labels};
use super::deploy::Created;
use super::parse::{first_line, lines};
use super::{DockerClient, PULL, QUICK, Runner};
use crate::docker::gateway_file::{backup, open_managed_config, read_bounded, rewrite};
use crate::docker::{EngineError, ProgressSink, data_volume};
use crate::vocab::{ContainerId, StartSpec, Step, UpdateSpec};

/// How long the old container keeps running after the switch, so that the
/// gateway's old workers finish what they proxy to it.
const DRAIN: Duration = Duration::from_secs(1);

impl<R: Runner> DockerClient<R> {
    pub(super) fn start_app(&self, spec: &StartSpec, progress: &dyn ProgressSink) -> Result<(), EngineError> {
        self.start_until(spec, Instant::now() + self.deploy_budget, progress)
    }

    /// The stop plan's steps (gateway first, the first change verified),
    /// then the start plan's, all within one deploy budget: the agent's
    /// wait for the reply covers the whole restart.
    pub(super) fn restart_app(
        &self,
        spec: &StartSpec,
        progress: &dyn ProgressSink,
    ) -> Result<(), EngineError> {
        let deadline = Instant::now() + self.deploy_budget;
        self.set_deadline(Some(deadline));
        let stopped = self.stop_verifying_first(&[spec.gateway.clone(), spec.app_container.clone()]);
        self.set_deadline(None);
        stopped?;
        self.start_until(spec, deadline, progress)
    }

    fn start_until(
        &self,
        spec: &StartSpec,
        deadline: Instant,
        progress: &dyn ProgressSink,
    ) -> Result<(), EngineError> {
        let ids = [spec.app_container.clone(), spec.gateway.clone()];
        self.set_deadline(Some(deadline));
        let result = self.start_accessories(spec).and_then(|()| self.start_steps(spec, &ids, progress));
        self.set_deadline(None);
        // Why the app did not answer, read before it is stopped again.
        let Err(error) = result else { return Ok(()) };
        let app_log = self.failed_app_log(&error, Some(&spec.app_container), deadline);
        // Back to the recorded state: stopped, restart=no (its accessories
        // too). A step whose outcome is unknown may still be carried out
        // after any look.
        let ids: Vec<ContainerId> =
            ids.iter().cloned().chain(spec.accessories.iter().map(|a| a.container.clone())).collect();
        let stopped = !error.outcome_unknown()
            && self.stop_containers(&ids).is_ok()
            && self.all_in(&ids, &["exited", "created"]);
        Err(if stopped { EngineError::RolledBack { cause: Box::new(error), app_log } } else { error })
    }

    /// A stopped container of ours started again, its restart policy first
    /// back to `unless-stopped` (a stop plan set it to `no`).
    pub(super) fn start_unless_stopped(&self, id: &ContainerId) -> Result<(), EngineError> {
        self.call(
            "restore restart policy",
            argv(&["update", "--restart=unless-stopped", id.as_str()]),
            QUICK,
        )?;
        self.call("start container", argv(&["start", id.as_str()]), QUICK)?;
        Ok(())
    }

    fn start_steps(
        &self,
        spec: &StartSpec,
        ids: &[ContainerId; 2],
        progress: &dyn ProgressSink,
    ) -> Result<(), EngineError> {
        // Its data before the app: after a reboot the image is not mounted
        // until a plan mounts it again (`data_volume`, module header).
        if let Some(data) = &spec.data {
            data_volume::mount_kept(&data.image, &data.mount)?;
        }
        // The app first: the gateway resolves it when it starts.
        for id in ids {
            self.start_unless_stopped(id)?;
        }
        progress.step(Step::AppStarted);
        if !self.healthy(spec.host_port, spec.server_name.as_str(), &spec.health_path) {
            return Err(EngineError::HealthCheckFailed);
        }
        progress.step(Step::HealthCheck);
        Ok(())
    }

    /// Whether every one of `ids` is in one of `states` now.
    fn all_in(&self, ids: &[ContainerId], states: &[&str]) -> bool {
        let mut args = argv(&["inspect", "--type", "container", "--format", "{{.State.Status}}"]);
        args.extend(ids.iter().map(|id| id.as_str().to_owned()));
        match self.call("inspect container states", args, QUICK) {
            Ok(out) => {
                let seen = lines(&out);
                seen.len() == ids.len() && seen.iter().all(|s| states.contains(&s.as_str()))
            }
            Err(_) => false,
        }
    }

    pub(super) fn update_app(
        &self,
        spec: &UpdateSpec,
        progress: &dyn ProgressSink,
    ) -> Result<ContainerId, EngineError> {
        check_update_values(spec)?;
        let mut created = Created::default();
        let mut file_touched = false;
        let deadline = Instant::now() + self.deploy_budget;
        self.set_deadline(Some(deadline));
        let result = self.update_steps(spec, &mut created, &mut file_touched, progress);
        self.set_deadline(None);
        let new = match result {
            Ok(new) => new,
            Err(error) => return Err(self.roll_back_update(spec, &created, file_touched, error, deadline)),
        };
        // Switched and answering: the old container goes. A failure from
        // here on is not rolled back (the new one serves) and needs an operator.
        std::thread::sleep(DRAIN);
        let old = std::slice::from_ref(&spec.old_app);
        self.stop_containers(old)?;
        self.call("remove old app container", argv(&["rm", spec.old_app.as_str()]), QUICK)?;
        Ok(new)
    }

    fn update_steps(
        &self,
        spec: &UpdateSpec,
        created: &mut Created,
        file_touched: &mut bool,
        progress: &dyn ProgressSink,
    ) -> Result<ContainerId, EngineError> {
        let names = spec.app.names();
        let image = spec.app_image.as_str();
        self.call("pull app image", argv(&["pull", "--quiet", image]), PULL)?;
        self.refuse_volumes(&spec.app_image, spec.data.as_ref().map(|d| &d.path))?;
        progress.step(Step::Pulled);
        if let Some(data) = &spec.data {
            data_volume::mount_kept(&data.image, &data.mount)?;
        }
        if let Some(task) = &spec.before_start {
            // In the new image, before its container exists; the old one
            // serves throughout. Its container is gone once this returns.
            self.before_start(task)?;
        }

        let mut args = argv(&["create", "--name", &spec.container_name]);
        args.extend(labels(&spec.app, "app", &spec.plan_id));
        args.extend(hardening(&spec.limits, "1000:1000", "unless-stopped"));
        args.extend(env_file(spec.env_file.as_ref()));
        args.extend(accessories_env(spec.accessories_env.as_deref()));
        args.extend(data_mount(spec.data.as_ref()));
        args.extend(argv(&["--network", &names.network, "--network-alias", &spec.container_name]));
        args.push(image.to_owned());
        let out = self.call("create new app container", args, QUICK)?;
        let step = "create new app container";
        let new = ContainerId::parse(first_line(&out)).ok_or(EngineError::Unparsable { step })?;
        created.containers.push(new.clone());
        created.app = Some(new.clone());
        self.call("start new app container", argv(&["start", new.as_str()]), QUICK)?;
        progress.step(Step::AppStarted);

        let mut file = open_managed_config(&spec.app_dir)?;
        if read_bounded(&mut file)? != spec.previous_config.as_bytes() {
            return Err(EngineError::ManagedFileChanged);
        }
        backup(&spec.app_dir, &spec.previous_config)?;
        // From here on the rollback writes the previous bytes back.
        *file_touched = true;
        rewrite(&mut file, &spec.staged_config)?;
        self.test_and_reload(&spec.gateway)?;
        progress.step(Step::GatewayTested);
        if !self.healthy(spec.host_port, spec.check_name.as_str(), &spec.health_path) {
            return Err(EngineError::HealthCheckFailed);
        }
        progress.step(Step::HealthCheck);
        rewrite(&mut file, &spec.new_config)?;
        self.test_and_reload(&spec.gateway)?;
        if !self.healthy(spec.host_port, spec.server_name.as_str(), &spec.health_path) {
            return Err(EngineError::HealthCheckFailed);
        }
        progress.step(Step::Switched);
        Ok(new)
    }

    /// The previous nginx.conf back (tested, reloaded), the new container
    /// gone, and whether that is verified (see the module's invariants).
    fn roll_back_update(
        &self,
        spec: &UpdateSpec,
        created: &Created,
        file_touched: bool,
        error: EngineError,
        deadline: Instant,
    ) -> EngineError {
        if file_touched {
            let restored = open_managed_config(&spec.app_dir)
                .and_then(|mut file| rewrite(&mut file, &spec.previous_config))
                .map_err(|_| EngineError::Host { step: "restore the previous nginx.conf" })
                .and_then(|()| self.test_and_reload(&spec.gateway));
            if let Err(restore) = restored {
                // The gateway may serve anything now: the restore's own
                // error, for the operator.
                return restore;
            }
        }
        // After the restore, so the old container serves while it is read;
        // before the removal, so the new one is still there to read.
        let app_log = self.failed_app_log(&error, created.app.as_ref(), deadline);
        self.remove_created(&spec.plan_id, created);
        let clean = !error.outcome_unknown()
            && self.created_by_plan(&spec.plan_id).is_ok_and(|(c, n)| c.is_empty() && n.is_empty())
            && self.all_in(&[spec.old_app.clone(), spec.gateway.clone()], &["running"]);
        if clean { EngineError::RolledBack { cause: Box::new(error), app_log } } else { error }
    }
}

/// The values of an update spec that no type carries: the new container's
/// name (ours, derived from the app and the plan id) and the app directory.
fn check_update_values(spec: &UpdateSpec) -> Result<(), EngineError> {
    let prefix = format!("{}-", spec.app.names().app_container);
    let name_ok =
        spec.container_name.strip_prefix(&prefix).is_some_and(|hex| crate::text::is_lower_hex(hex, 12));
    let dir = spec.app_dir.to_str().unwrap_or("");
    let dir_ok = spec.app_dir.is_absolute() && dir.bytes().all(|c| c.is_ascii_graphic());
    if name_ok && dir_ok && spec.host_port >= 1024 && spec.limits.millicpus > 0 {
        Ok(())
    } else {
        Err(EngineError::Host { step: "validate update spec" })
    }
}
