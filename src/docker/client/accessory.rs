//! A deploy's accessories through the docker CLI (issue 40): each one's
//! data, credential and env file, then its container on the app's private
//! network, started and waited for until its health command succeeds; then
//! the app's env file of their variables. A start's or restart's
//! accessories, started and ready before the app. An update_accessory's
//! switch of one accessory to a new image, and its way back. Runs as root
//! inside the host helper, within the deploy's budget; the deploy's
//! rollback removes what these steps noted in [`Created`].
//!
//! Security invariants enforced here: an accessory publishes nothing (no
//! `--publish`), carries the same hardening and labels as the app's
//! containers, and gets its credential only through a 0600 env file named
//! in argv by path, never by value.

use std::path::Path;
use std::time::{Duration, Instant};

use super::argv::{argv, data_mount, hardening, labels};
use super::deploy::Created;
use super::parse::first_line;
use super::{DockerClient, PULL, QUICK, Runner, STOP};
use crate::docker::accessory_files::{ensure_secret, write_env};
use crate::docker::{EngineError, ProgressSink, data_volume};
use crate::vocab::{
    ACCESSORY_ROLE, AccessoryUpdateSpec, AccessoryUse, AppName, ContainerId, ContainerLimits, DATA_OWNER,
    DeploySpec, PlanId, StartSpec, Step, accessories_env_of,
};

/// How long an accessory may take to pass its health command after it
/// starts (a database's first start initializes its data), and how often
/// it is asked. Within the deploy's budget, which bounds every call.
const READY_WITHIN: Duration = Duration::from_secs(90);
const READY_INTERVAL: Duration = Duration::from_millis(500);

impl<R: Runner> DockerClient<R> {
    /// Every accessory of `spec`, in order, each ready before the next;
    /// then the app's env file of their variables. Nothing for an app
    /// without accessories.
    pub(super) fn accessories_up(&self, spec: &DeploySpec, created: &mut Created) -> Result<(), EngineError> {
        if spec.accessories.is_empty() {
            return Ok(());
        }
        let mut app_env = String::new();
        for accessory in &spec.accessories {
            let secret = self.accessory_up(spec, accessory, created)?;
            app_env.push_str(&accessory.app_env.render(&secret, &accessory.name, accessory.port));
        }
        let path = accessories_env_of(&spec.app_dir);
        created.env_files.push(path.clone());
        write_env(&path, &app_env)
    }

    /// One accessory: its data and credential (kept ones re-attached), its
    /// env file, its container created, started and ready. Returns the
    /// credential, for the app's variables.
    fn accessory_up(
        &self,
        spec: &DeploySpec,
        accessory: &AccessoryUse,
        created: &mut Created,
    ) -> Result<crate::vocab::Secret, EngineError> {
        let ensured = data_volume::ensure(&accessory.data)?;
        created.accessory_data.push((accessory.data.clone(), ensured));
        let (secret, made) = ensure_secret(&accessory.secret_of())?;
        if made {
            created.secrets.push(accessory.secret_of());
        }
        let env_path = accessory.env_file_of(&spec.app_dir);
        created.env_files.push(env_path.clone());
        write_env(&env_path, &accessory.env.render(&secret, &accessory.name, accessory.port))?;

        let id = self.create_accessory(&spec.app, &spec.plan_id, &spec.limits, accessory, &spec.app_dir)?;
        created.containers.push(id.clone());
        created.accessories.push(id.clone());
        // Until it is ready, its last lines are what a failure keeps.
        created.app = Some(id.clone());
        self.call("start accessory container", argv(&["start", id.as_str()]), QUICK)?;
        self.wait_ready(accessory, &id)?;
        created.app = None;
        Ok(secret)
    }

    /// The accessory's container, created (not started) under its name on
    /// the app's network, with its env file already in the app's directory.
    fn create_accessory(
        &self,
        app: &AppName,
        plan_id: &PlanId,
        limits: &ContainerLimits,
        accessory: &AccessoryUse,
        app_dir: &Path,
    ) -> Result<ContainerId, EngineError> {
        let mut args = argv(&["create", "--name", &accessory.container_name]);
        args.extend(labels(app, ACCESSORY_ROLE, plan_id));
        args.extend(hardening(limits, DATA_OWNER, "unless-stopped"));
        args.extend(argv(&["--env-file", &accessory.env_file_of(app_dir).display().to_string()]));
        args.extend(data_mount(Some(&accessory.data)));
        let network = app.names().network;
        args.extend(argv(&["--network", &network, "--network-alias", accessory.name.as_str()]));
        args.push(accessory.image.as_str().to_owned());
        let step = "create accessory container";
        let out = self.call(step, args, QUICK)?;
        ContainerId::parse(first_line(&out)).ok_or(EngineError::Unparsable { step })
    }

    /// An update_accessory's steps, within the deploy's budget: the new
    /// image pulled (refused if it declares a volume its data does not
    /// cover); the old container stopped (they share the data, which
    /// one database at a time may open) and set aside under another name;
    /// the new one created in its place, started, ready, and the app
    /// answering through its gateway; then the old one removed. A failure
    /// before that removes the new one and starts the old one again, and
    /// is `RolledBack` only when the old one is ready and the app answers.
    pub(super) fn update_accessory_steps(
        &self,
        spec: &AccessoryUpdateSpec,
        progress: &dyn ProgressSink,
    ) -> Result<ContainerId, EngineError> {
        let deadline = Instant::now() + self.deploy_budget;
        self.set_deadline(Some(deadline));
        let mut done = Switch::default();
        let result = self.switch_accessory(spec, &mut done, progress);
        self.set_deadline(None);
        match result {
            Ok(id) => {
                // The new one is ready and the app answers: the old one goes.
                // A failure here is not rolled back (the new one serves).
                self.call("remove old accessory container", argv(&["rm", spec.old.as_str()]), QUICK)?;
                Ok(id)
            }
            Err(error) => Err(self.put_accessory_back(spec, &done, error, deadline)),
        }
    }

    fn switch_accessory(
        &self,
        spec: &AccessoryUpdateSpec,
        done: &mut Switch,
        progress: &dyn ProgressSink,
    ) -> Result<ContainerId, EngineError> {
        let image = spec.accessory.image.as_str();
        self.call("pull accessory image", argv(&["pull", "--quiet", image]), PULL)?;
        self.refuse_volumes(&spec.accessory.image, Some(&spec.accessory.data.path))?;
        progress.step(Step::Pulled);
        data_volume::mount_kept(&spec.accessory.data.image, &spec.accessory.data.mount)?;
        self.stop_containers(std::slice::from_ref(&spec.old))?;
        let aside = argv(&["rename", spec.old.as_str(), &spec.set_aside_name()]);
        self.call("set the old accessory aside", aside, QUICK)?;
        done.set_aside = true;
        let id =
            self.create_accessory(&spec.app, &spec.plan_id, &spec.limits, &spec.accessory, &spec.app_dir)?;
        done.new = Some(id.clone());
        self.call("start accessory container", argv(&["start", id.as_str()]), QUICK)?;
        self.wait_ready(&spec.accessory, &id)?;
        if !self.healthy(spec.host_port, spec.server_name.as_str(), &spec.health_path) {
            return Err(EngineError::HealthCheckFailed);
        }
        progress.step(Step::HealthCheck);
        Ok(id)
    }

    /// After a failed switch: the new container's last lines kept, the new
    /// container removed, the old one back under its name, started and
    /// ready, and the app answering; then `RolledBack`, else the first error
    /// that stood in the way (the plan needs an operator).
    fn put_accessory_back(
        &self,
        spec: &AccessoryUpdateSpec,
        done: &Switch,
        error: EngineError,
        deadline: Instant,
    ) -> EngineError {
        let app_log = self.failed_app_log(&error, done.new.as_ref(), deadline);
        let back = || -> Result<(), EngineError> {
            if let Some(id) = &done.new {
                // A graceful stop first, when it takes: the new image may be
                // writing the data the old one is to open again. One that
                // keeps crashing is restarting, which docker stops only by
                // force: the forced removal is what must succeed.
                let _ = self.stop_containers(std::slice::from_ref(id));
                self.call("remove the new accessory container", argv(&["rm", "--force", id.as_str()]), STOP)?;
            }
            if done.set_aside {
                let name = &spec.accessory.container_name;
                self.call("put the old accessory back", argv(&["rename", spec.old.as_str(), name]), QUICK)?;
            }
            self.start_unless_stopped(&spec.old)?;
            self.wait_ready(&spec.previous(), &spec.old)
        };
        match back() {
            Ok(())
                if !error.outcome_unknown()
                    && self.healthy(spec.host_port, spec.server_name.as_str(), &spec.health_path) =>
            {
                EngineError::RolledBack { cause: Box::new(error), app_log }
            }
            Ok(()) => error,
            Err(undo) => undo,
        }
    }

    /// A start's or restart's accessories, before the app: each one's data
    /// mounted (never made), its restart policy back, started (a no-op
    /// when it runs) and ready.
    pub(super) fn start_accessories(&self, spec: &StartSpec) -> Result<(), EngineError> {
        for started in &spec.accessories {
            let (id, accessory) = (&started.container, &started.accessory);
            data_volume::mount_kept(&accessory.data.image, &accessory.data.mount)?;
            self.start_unless_stopped(id)?;
            self.wait_ready(accessory, id)?;
        }
        Ok(())
    }

    /// Runs the accessory's health command in it (`docker exec`, as its
    /// user) until it exits 0, for at most [`READY_WITHIN`], or until the
    /// container has exited or been restarted (its process ended: waiting
    /// longer would only wait for the deadline).
    fn wait_ready(&self, accessory: &AccessoryUse, id: &ContainerId) -> Result<(), EngineError> {
        let until = Instant::now() + READY_WITHIN;
        let mut args = argv(&["exec", id.as_str()]);
        args.extend(accessory.health.all().iter().cloned());
        let not_ready = || EngineError::AccessoryNotReady { name: accessory.name.clone() };
        loop {
            match self.call("check accessory health", args.clone(), QUICK) {
                Ok(_) => return Ok(()),
                // A refused or failing check is "not yet", while it runs.
                Err(EngineError::Call { .. }) if self.ended(id) || Instant::now() >= until => {
                    return Err(not_ready());
                }
                Err(EngineError::Call { .. }) => std::thread::sleep(READY_INTERVAL),
                Err(other) => return Err(other),
            }
        }
    }

    /// Whether the container's process ended since it started: exited,
    /// dead, or restarted by its restart policy. Unknown reads as no.
    fn ended(&self, id: &ContainerId) -> bool {
        let format = "{{.State.Status}} {{.RestartCount}}";
        let args = argv(&["inspect", "--type", "container", "--format", format, id.as_str()]);
        let Ok(out) = self.call("inspect accessory state", args, QUICK) else { return false };
        match first_line(&out).split_once(' ') {
            Some((status, restarts)) => matches!(status, "exited" | "dead") || restarts != "0",
            None => false,
        }
    }
}

/// How far a switch got, for its rollback.
#[derive(Default)]
struct Switch {
    set_aside: bool,
    new: Option<ContainerId>,
}
