//! The controller's view of the container engine: one trait ([`Engine`]),
//! what its operations return and how they fail, and (in `client.rs`) the
//! implementation that runs the docker client with fixed argv. Runs as
//! root inside the host helper. What the engine takes and reports (the
//! snapshot, the specs, the ids and names) is the shared vocabulary in
//! `crate::vocab`, which the controller derives without importing this.
//!
//! Beside it: `gateway_file.rs` (the managed nginx.conf on disk),
//! `data_volume.rs` (an app's loop-mounted data image), `host_probe.rs`
//! (free port, memory and disk, the health check's GET), `program.rs` (the
//! docker program and its environment), `restic.rs` (the backup
//! repository through restic), `backup.rs` (a backup's copy and what a
//! restore replaces) and `dump.rs` (an accessory's database streamed into
//! and out of the repository).
//!
//! The controller never builds docker argv itself; it asks an [`Engine`] for
//! whole operations. Tests of the decision logic pass a fake engine that
//! records what it was asked; the shipped binary only ever builds the real one.

use std::fmt;

pub mod accessory_files;
pub mod acme;
pub mod backup;
pub mod client;
pub mod data_volume;
pub mod dump;
pub mod edge_files;
mod gateway_file;
pub mod host_probe;
pub mod program;
pub mod restic;

use serde::{Deserialize, Serialize};

use crate::vocab::{
    AccessoryUpdateSpec, AppName, BackupRun, BackupSpec, Capacity, Container, ContainerId, DeploySpec,
    EdgeChange, ImageHolds, ImageId, ImageRef, PlanId, RestoreRun, RestoreSpec, RotationSpec, ServerName,
    Snapshot, StartSpec, Step, TaskSpec, UpdateSpec,
};

/// What a remove_app plan removes (see [`Engine::remove_app`]).
#[derive(Debug, Clone, Copy)]
pub struct AppRemoval<'a> {
    pub app: &'a AppName,
    pub containers: &'a [ContainerId],
    pub running: &'a [ContainerId],
    pub networks: &'a [String],
    pub app_dir: &'a std::path::Path,
    /// The app's data: unmounted last, and deleted when `purge_data`.
    pub data: Option<&'a crate::vocab::DataUse>,
    /// Its accessories' data, the same way, each credential deleted with it.
    pub accessory_data: &'a [crate::vocab::DataUse],
    pub purge_data: bool,
}

/// What a successful deploy created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployed {
    pub app_container: ContainerId,
    pub gateway_container: ContainerId,
    /// The accessories' containers, in the spec's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accessories: Vec<ContainerId>,
}

/// What `docker logs` printed of one container: its two streams, each in
/// its own pipe, so `crate::logs` follows a value across lines within one
/// stream while the other stream's lines land between them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogStreams {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Which lines of a container's log to read: the last `tail` (1..=200,
/// checked by the controller), within the last `since_minutes` if given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogWindow {
    pub tail: u16,
    pub since_minutes: Option<u16>,
}

/// Why an engine operation failed. Messages are for the operator's log and
/// the agent; none of them carries docker's raw stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineError {
    /// A docker call did not succeed; `step` names which (e.g. `pull app image`).
    Call { step: &'static str, execution: crate::exec::Execution },
    /// Docker answered with something we could not parse.
    Unparsable { step: &'static str },
    /// The candidate nginx config was rejected by `nginx -t` (deploy's
    /// one-off check; what the deploy created is then removed, best effort).
    NginxRejected,
    /// nginx_config: `nginx -t` rejected the new config, so no reload ran,
    /// and the previous bytes were written back, tested and reloaded. The
    /// server is as it was. Returned only when the whole restore succeeded;
    /// a failed restore is an error naming its own `restore` step.
    NginxRejectedAndRestored,
    /// deploy: something listens on the host port now; refused before the
    /// first mutation, so nothing was pulled, created or written.
    PortTaken { port: u16 },
    /// The new gateway did not answer with 2xx/3xx in time.
    HealthCheckFailed,
    /// deploy: an accessory's health command did not exit 0 in time
    /// (issue 40); the deploy is rolled back as after any failed step.
    AccessoryNotReady { name: crate::vocab::AccessoryName },
    /// The managed file on disk is not what we recorded, or is a symlink.
    ManagedFileChanged,
    /// Anything on the host side (files, directories).
    Host { step: &'static str },
    /// deploy or update: the pulled image declares `VOLUME`s (its config's
    /// paths, sorted); refused before any container was created from it.
    ImageDeclaresVolumes { image: ImageRef, volumes: Vec<String> },
    /// deploy, start, restart or update: a step failed with `cause` after
    /// the first mutation, and the rollback was verified: for deploy and
    /// update no container or network carrying the plan's label is left
    /// (and a deploy's new app directory is gone); update's old containers
    /// still run; start's and restart's containers are stopped again.
    /// Never built for a step whose outcome is unknown (a timeout).
    /// `app_log`: the failed app container's last lines, read (within the
    /// plan's budget) before the rollback removed or stopped it, already
    /// safe (`crate::logs::AppLog`); `None` when the failure came before
    /// there was an app container. Reading it never decides the outcome.
    RolledBack { cause: Box<EngineError>, app_log: Option<crate::logs::AppLog> },
    /// docker refused the action's first mutation (its own verdict, exit 1,
    /// seen to the end) and a fresh look afterwards showed the target as it
    /// was before: nothing changed. Never built from docker's words, which
    /// stay in `exec`; a refusal that cannot be verified stays a [`EngineError::Call`].
    Refused { step: &'static str },
    /// run_task: the task ran to its end with an exit code other than 0,
    /// and its container was removed and seen gone. Built only then.
    TaskFailed { run: crate::logs::TaskRun },
    /// run_task: the task ran out of its time; its container was stopped,
    /// removed and seen gone (`output`: what it printed until then).
    TaskTimedOut { output: crate::logs::AppLog },
    /// backup: a step before or of the copy failed (`step` names it); the
    /// app's data was not changed and, if it was frozen, thawed again and
    /// seen thawed. No snapshot was recorded.
    BackupFailed { step: &'static str },
    /// An address the edge would publish is held by something else
    /// (issue 39): refused before anything was made.
    AddressTaken { address: std::net::SocketAddr },
    /// An expose or unexpose found no running edge: nothing was changed.
    EdgeNotRunning,
    /// The ACME CA gave no certificate (issue 39): asked before the edge
    /// changed, so nothing was changed.
    Acme(crate::vocab::AcmeError),
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::Call { step, execution } => write!(
                f,
                "docker failed at step '{step}' ({:?}, exit code {:?})",
                execution.execution_status, execution.exit_code
            ),
            EngineError::Unparsable { step } => {
                write!(f, "docker gave an unparsable answer at step '{step}'")
            }
            EngineError::NginxRejected => f.write_str("nginx rejected the configuration (nginx -t failed)"),
            EngineError::NginxRejectedAndRestored => f.write_str(
                "nginx rejected the new configuration (nginx -t failed); the previous one was restored, tested and reloaded",
            ),
            EngineError::PortTaken { port } => {
                write!(f, "127.0.0.1:{port} is taken; nothing was created")
            }
            EngineError::AccessoryNotReady { name } => {
                write!(f, "the accessory {name} did not pass its health command in time")
            }
            EngineError::HealthCheckFailed => {
                f.write_str("the new gateway did not answer with 2xx/3xx in time")
            }
            EngineError::ManagedFileChanged => {
                f.write_str("the managed nginx.conf differs from the recorded one or is not a regular file")
            }
            EngineError::Host { step } => write!(f, "host file operation failed at step '{step}'"),
            EngineError::ImageDeclaresVolumes { image, volumes } => write!(
                f,
                "the image {} declares VOLUME {}; no container was created from it",
                image.as_str(),
                crate::text::for_model(&volumes.join(", "), 200)
            ),
            EngineError::RolledBack { cause, .. } => {
                write!(f, "{cause}; the change was rolled back and that was verified")
            }
            EngineError::Refused { step } => {
                write!(f, "docker refused at step '{step}' and its target was seen unchanged afterwards")
            }
            EngineError::TaskFailed { run } => {
                write!(f, "the task {} exited with code {}; its container was removed", run.task, run.exit_code)
            }
            EngineError::TaskTimedOut { .. } => f.write_str(
                "the task ran out of its time and was stopped; its container was removed",
            ),
            EngineError::BackupFailed { step } => {
                write!(f, "the backup failed at step '{step}'; the app's data is as it was")
            }
            EngineError::AddressTaken { address } => {
                write!(f, "{address} is taken by another listener; nothing was created")
            }
            EngineError::EdgeNotRunning => f.write_str("the edge is not running; nothing was changed"),
            EngineError::Acme(error) => write!(f, "no certificate from ACME ({}): {error}", error.code()),
        }
    }
}

impl std::error::Error for EngineError {}

impl EngineError {
    /// Whether the failed operation provably left the server as it found
    /// it: refused before its first mutation, or rolled back and verified.
    /// Everything else may have changed something and needs an operator.
    pub fn changed_nothing(&self) -> bool {
        matches!(
            self,
            EngineError::NginxRejectedAndRestored
                | EngineError::PortTaken { .. }
                | EngineError::RolledBack { .. }
                | EngineError::Refused { .. }
                | EngineError::TaskFailed { .. }
                | EngineError::TaskTimedOut { .. }
                | EngineError::BackupFailed { .. }
                | EngineError::AddressTaken { .. }
                | EngineError::EdgeNotRunning
                | EngineError::Acme(_)
        )
    }

    /// The safe, untrusted lines that explain the failure, when the engine
    /// read some: a rolled-back plan's failed app container's, or what a
    /// failed or timed-out task printed.
    pub fn output(&self) -> Option<&crate::logs::AppLog> {
        match self {
            EngineError::RolledBack { app_log, .. } => app_log.as_ref(),
            EngineError::TaskFailed { run } => Some(&run.output),
            EngineError::TaskTimedOut { output } => Some(output),
            _ => None,
        }
    }

    /// Whether the engine may still act on this step after we stopped
    /// waiting (a docker call that timed out or whose end was not seen):
    /// then no listing afterwards proves anything, and no rollback is
    /// called verified.
    pub fn outcome_unknown(&self) -> bool {
        match self {
            EngineError::Call { execution, .. } => {
                execution.timed_out || execution.completion != crate::exec::Completion::Confirmed
            }
            _ => false,
        }
    }
}

/// Where a long action (deploy, start, update) reports each step it has
/// finished, as it finishes it. The host helper prints them as progress
/// lines (`crate::wire::progress`); tests collect them. A report is only
/// news: it never changes what the engine does next.
pub trait ProgressSink {
    fn step(&self, step: Step);
}

/// Reports nowhere: for callers nobody is watching.
pub struct NoProgress;

impl ProgressSink for NoProgress {
    fn step(&self, _step: Step) {}
}

/// The operations the controller may ask of the engine, and nothing else.
/// Every mutation names exactly the objects it touches.
pub trait Engine {
    /// Containers, images and `vl-*` networks, normalized.
    fn snapshot(&self) -> Result<Snapshot, EngineError>;
    /// Whether nothing listens on 127.0.0.1:`port` right now.
    fn host_port_free(&self, port: u16) -> bool;
    /// Free memory and free disk under the state directory.
    fn capacity(&self) -> Result<Capacity, EngineError>;
    /// Pull, create network and both containers, test nginx, start, health
    /// check. On failure removes only what this call created, then errs.
    fn deploy(&self, spec: &DeploySpec, progress: &dyn ProgressSink) -> Result<Deployed, EngineError>;
    /// Replace the app's nginx.conf in place (same inode), `nginx -t`, reload,
    /// then wait (bounded) until the gateway answers the new server name
    /// on its published port, so `completed` means served;
    /// on a failed test or reload restore `old_config`, test and reload again, then err:
    /// [`EngineError::NginxRejectedAndRestored`] exactly when `nginx -t`
    /// refused the new config and the whole restore succeeded.
    fn update_nginx(
        &self,
        app_dir: &std::path::Path,
        gateway: &ContainerId,
        old_config: &str,
        new_config: &str,
    ) -> Result<(), EngineError>;
    /// `--restart=no`, then a graceful stop, for exactly these containers.
    fn stop(&self, containers: &[ContainerId]) -> Result<(), EngineError>;
    /// `docker image rm --no-prune <id>`; never forced, never pruned. When
    /// docker refuses and the image is then seen with the references it
    /// had before: [`EngineError::Refused`].
    fn remove_image(&self, image: &ImageId) -> Result<(), EngineError>;
    /// Read-only: what keeps docker from removing this image by id without
    /// force besides containers (images built on it, its references), or
    /// `None` when the engine holds no such image.
    fn image_holds(&self, image: &ImageId) -> Result<Option<ImageHolds>, EngineError>;
    /// Removes one app: stops `running` as [`Engine::stop`] does, removes
    /// exactly `containers` (never forced, never their volumes), the
    /// networks among `networks` that carry the app's label, and the app
    /// directory with the files volce-lab wrote into it; then unmounts the
    /// app's data, and deletes it only when the plan purges it. Never an
    /// image.
    fn remove_app(&self, removal: &AppRemoval<'_>) -> Result<(), EngineError>;
    /// Removes exactly this one container, which the operator's `state
    /// remove-container` found carrying volce-lab's label with no app
    /// record holding it: stopped as [`Engine::stop`] stops it, then
    /// removed, never forced and never with its volumes. Never a network,
    /// a directory or data.
    fn remove_container(&self, container: &ContainerId) -> Result<(), EngineError>;
    /// start: restart policy back to `unless-stopped`, then start the app
    /// container and the gateway, then the health check through the gateway
    /// with the server name. On failure both are stopped again as
    /// [`Engine::stop`] does and, once seen stopped,
    /// [`EngineError::RolledBack`] is returned.
    fn start(&self, spec: &StartSpec, progress: &dyn ProgressSink) -> Result<(), EngineError>;
    /// restart: the gateway, then the app, stopped as [`Engine::stop`]
    /// stops them (so a verified refusal of the very first change is
    /// [`EngineError::Refused`]: nothing changed), then both started as
    /// [`Engine::start`] starts them, with its rollback (on failure both
    /// are stopped again and, once seen stopped, [`EngineError::RolledBack`]).
    /// The default is exactly that; the docker client runs both halves
    /// within one deploy budget.
    fn restart(&self, spec: &StartSpec, progress: &dyn ProgressSink) -> Result<(), EngineError> {
        self.stop(&[spec.gateway.clone(), spec.app_container.clone()])?;
        self.start(spec, progress)
    }
    /// update: pull, start the new app container beside the old one, route
    /// `check_name` to it and health-check it, switch the server name to it
    /// and check again, and only then stop and remove the old container.
    /// On a failure before the old one is touched: the previous nginx.conf
    /// is restored and reloaded, the new container removed, and once the
    /// plan's label is seen gone and the old containers running,
    /// [`EngineError::RolledBack`]. Returns the new container's id.
    fn update(&self, spec: &UpdateSpec, progress: &dyn ProgressSink) -> Result<ContainerId, EngineError>;

    /// Moves one accessory of a running app to a new image on the same data
    /// and credential: the old container stopped and set aside, the new one
    /// ready and the app answering, then the old one removed; on a failure
    /// the old one back (`RolledBack` once it is ready and the app answers).
    /// Returns the new container.
    fn update_accessory(
        &self,
        spec: &AccessoryUpdateSpec,
        progress: &dyn ProgressSink,
    ) -> Result<ContainerId, EngineError>;

    /// Gives an accessory a new credential with the operator's `rotate`
    /// command, and the app a new container of its image that has it (the
    /// update's switch); on a failed switch the command runs back and the
    /// old container serves on (`RolledBack` once that held). Returns the
    /// app's new container.
    fn rotate_credential(
        &self,
        spec: &RotationSpec,
        progress: &dyn ProgressSink,
    ) -> Result<ContainerId, EngineError>;
    /// Read-only: the raw log bytes (stdout and stderr, as docker prints
    /// them with timestamps) of exactly this container. The controller
    /// passes only a recorded id of a managed app and makes the bytes safe
    /// (`crate::logs`) before anything leaves the helper.
    fn logs(&self, container: &ContainerId, window: LogWindow) -> Result<LogStreams, EngineError>;
    /// Read-only: the container's environment as docker holds it
    /// (`Config.Env`, `NAME=value`), empty when the container is gone. It
    /// holds the operator's configured secrets: only `service_logs`'
    /// redaction reads it (the values the app still runs with after its env
    /// file was edited), and nothing of it is ever part of a reply.
    fn container_env(&self, container: &ContainerId) -> Result<Vec<String>, EngineError>;
    /// Read-only: exactly this container as the snapshot lists it, or
    /// `None` when the engine holds no container with this id. The default
    /// takes a whole snapshot; the docker client engine asks for the one
    /// container (`service_logs` checks its labels before every read).
    fn container(&self, id: &ContainerId) -> Result<Option<Container>, EngineError> {
        Ok(self.snapshot()?.containers.into_iter().find(|container| &container.id == id))
    }
    /// Read-only: the local image id a pinned catalog reference resolves
    /// to, or `None` when the engine holds no such image (it would be
    /// pulled at deploy).
    fn resolve_image(&self, reference: &ImageRef) -> Result<Option<ImageId>, EngineError>;
    /// Read-only: the `VOLUME` paths a pinned reference's image declares
    /// (sorted, empty for none), or `None` when the engine holds no such
    /// image yet. Validation refuses a plan whose image declares any; deploy
    /// and update check again after their pull.
    fn image_volumes(&self, reference: &ImageRef) -> Result<Option<Vec<String>>, EngineError>;
    /// Read-only: whether the gateway on 127.0.0.1:`port` answers a GET of
    /// `/` for `server_name` with 2xx or 3xx, in one short try.
    fn gateway_answers(&self, port: u16, server_name: &ServerName) -> bool;
    /// Read-only (issue 39): what the edge holds for `name`: the facts of
    /// its certificate copy and the last failed ACME order for it. Files
    /// on the host, not docker; behind the engine so that the controller's
    /// tests fake it as the rest.
    fn edge_name(&self, name: &ServerName) -> crate::vocab::EdgeNameFacts;
    /// Read-only: a GET of `path` for `name` through the edge's HTTPS
    /// address `https`, TLS verified for the name against the certificate
    /// installed for it, in one short try.
    fn edge_answers(
        &self,
        https: std::net::SocketAddr,
        name: &ServerName,
        path: &crate::vocab::HealthPath,
    ) -> crate::vocab::HttpsAnswer;
    /// Read-only: every network carrying the label `io.volce-lab.plan=<plan>`
    /// (the snapshot lists networks by name only). With the snapshot's
    /// containers, what a plan that did not finish may have left.
    fn plan_networks(&self, plan: &PlanId) -> Result<Vec<LabelledNetwork>, EngineError>;
    /// run_task: mount the app's kept data if it is not (never making
    /// one), create the task's container from the app's image with the
    /// app's configuration, data and internal network and the task's argv,
    /// start it, wait at most the spec's timeout, read its last lines made
    /// safe, remove it and see it gone. Exit 0 is `Ok`; another code
    /// [`EngineError::TaskFailed`], a timeout [`EngineError::TaskTimedOut`],
    /// each only once the container is seen gone; a failure before the
    /// start, its container seen gone, [`EngineError::RolledBack`].
    fn run_task(&self, spec: &TaskSpec) -> Result<crate::logs::TaskRun, EngineError>;

    /// backup (issue 41): the app's mounted data copied into the operator's
    /// repository while its filesystem is frozen, then the retention
    /// (`backup.rs`). Nothing of the app's containers is touched.
    fn backup(&self, spec: &BackupSpec) -> Result<BackupRun, EngineError>;

    /// restore (issue 41): the app stopped as a stop plan stops it (if it
    /// runs), a safety snapshot of its data, the data replaced by the
    /// snapshot's, then the app started and health-checked as a start plan
    /// does. A failure after the first change puts the safety snapshot back
    /// and starts the app again: [`EngineError::RolledBack`] once that
    /// worked; anything else needs an operator.
    fn restore(&self, spec: &RestoreSpec, progress: &dyn ProgressSink) -> Result<RestoreRun, EngineError>;

    /// expose and unexpose (issue 39): the running edge's copies of the
    /// change's certificates installed, the app's edge network joined, its
    /// nginx.conf replaced by the change's (tested by the edge's own
    /// `nginx -t`, reloaded), each probed name seen reaching its app
    /// through the edge; then the network left and the copies deleted that
    /// the change takes away. A failure puts the old config back:
    /// [`EngineError::RolledBack`] once it was reloaded.
    fn edge_apply(&self, change: &EdgeChange) -> Result<(), EngineError>;
}

/// A network as the engine lists it: full id and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LabelledNetwork {
    pub id: String,
    pub name: String,
}
