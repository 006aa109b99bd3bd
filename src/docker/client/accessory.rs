//! A deploy's accessories through the docker CLI (issue 40): each one's
//! data, credential and env file, then its container on the app's private
//! network, started and waited for until its health command succeeds; then
//! the app's env file of their variables. A start's or restart's
//! accessories, started and ready before the app. Runs as root inside the host
//! helper, within the deploy's budget; the deploy's rollback removes what
//! these steps noted in [`Created`].
//!
//! Security invariants enforced here: an accessory publishes nothing (no
//! `--publish`), carries the same hardening and labels as the app's
//! containers, and gets its credential only through a 0600 env file named
//! in argv by path, never by value.

use std::time::{Duration, Instant};

use super::argv::{argv, data_mount, hardening, labels};
use super::deploy::Created;
use super::parse::first_line;
use super::{DockerClient, QUICK, Runner};
use crate::docker::accessory_files::{ensure_secret, write_env};
use crate::docker::{EngineError, data_volume};
use crate::vocab::{
    ACCESSORY_ROLE, AccessoryUse, ContainerId, DATA_OWNER, DeploySpec, StartSpec, accessories_env_of,
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

        let mut args = argv(&["create", "--name", &accessory.container_name]);
        args.extend(labels(&spec.app, ACCESSORY_ROLE, &spec.plan_id));
        args.extend(hardening(&spec.limits, DATA_OWNER, "unless-stopped"));
        args.extend(argv(&["--env-file", &env_path.display().to_string()]));
        args.extend(data_mount(Some(&accessory.data)));
        let network = spec.app.names().network;
        args.extend(argv(&["--network", &network, "--network-alias", accessory.name.as_str()]));
        args.push(accessory.image.as_str().to_owned());
        let out = self.call("create accessory container", args, QUICK)?;
        let step = "create accessory container";
        let id = ContainerId::parse(first_line(&out)).ok_or(EngineError::Unparsable { step })?;
        created.containers.push(id.clone());
        created.accessories.push(id.clone());
        // Until it is ready, its last lines are what a failure keeps.
        created.app = Some(id.clone());
        self.call("start accessory container", argv(&["start", id.as_str()]), QUICK)?;
        self.wait_ready(accessory, &id)?;
        created.app = None;
        Ok(secret)
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
    /// user) until it exits 0, for at most [`READY_WITHIN`].
    fn wait_ready(&self, accessory: &AccessoryUse, id: &ContainerId) -> Result<(), EngineError> {
        let until = Instant::now() + READY_WITHIN;
        let mut args = argv(&["exec", id.as_str()]);
        args.extend(accessory.health.all().iter().cloned());
        loop {
            match self.call("check accessory health", args.clone(), QUICK) {
                Ok(_) => return Ok(()),
                // A refused or failing check is "not yet"; only the deadline ends the wait.
                Err(EngineError::Call { .. }) if Instant::now() < until => std::thread::sleep(READY_INTERVAL),
                Err(EngineError::Call { .. }) => {
                    return Err(EngineError::AccessoryNotReady { name: accessory.name.clone() });
                }
                Err(other) => return Err(other),
            }
        }
    }
}
