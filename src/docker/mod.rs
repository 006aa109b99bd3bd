//! The controller's view of the container engine: one trait, its snapshot
//! types, and (in `cli.rs`) the implementation that drives the `docker` CLI
//! with fixed argv. Runs as root inside the host helper.
//!
//! Beside it: `names.rs` (the app name and every Docker name derived from
//! it), `gateway_file.rs` (the managed nginx.conf on disk) and
//! `host_probe.rs` (free port, memory and disk, the health check's GET).
//!
//! The controller never builds docker argv itself; it asks an [`Engine`] for
//! whole operations. Tests of the decision logic pass a fake engine that
//! records what it was asked; the shipped binary only ever builds the real one.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

pub mod cli;
mod gateway_file;
mod host_probe;
pub mod names;

pub use names::{AppName, AppNames};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::control::plan::PlanId;
use crate::control::policy::ImageRef;
use crate::nginx::ServerName;

/// Label keys that mark what volce-lab created. Nothing without them is ever touched.
pub const LABEL_APP: &str = "io.volce-lab.app";
pub const LABEL_ROLE: &str = "io.volce-lab.role";
pub const LABEL_PLAN: &str = "io.volce-lab.plan";

/// A full container id: 64 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ContainerId(String);

/// A full local image id: `sha256:` and 64 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ImageId(String);

impl ContainerId {
    pub fn parse(value: &str) -> Option<ContainerId> {
        crate::text::is_lower_hex(value, 64).then(|| ContainerId(value.to_owned()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl ImageId {
    pub fn parse(value: &str) -> Option<ImageId> {
        value
            .strip_prefix("sha256:")
            .filter(|hex| crate::text::is_lower_hex(hex, 64))
            .map(|_| ImageId(value.to_owned()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for ImageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A port a container publishes on the host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PublishedPort {
    pub host_ip: String,
    pub host_port: u16,
    pub container_port: u16,
    pub protocol: String,
}

/// One container as the engine reports it, managed by us or not.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Container {
    pub id: ContainerId,
    pub name: String,
    pub image_id: ImageId,
    /// Docker's state word: `running`, `exited`, `created`, ...
    pub state: String,
    /// Only the `io.volce-lab.*` labels; other labels are none of our business.
    pub labels: BTreeMap<String, String>,
    pub ports: Vec<PublishedPort>,
}

impl Container {
    /// The app this container belongs to, if volce-lab created it.
    pub fn app(&self) -> Option<&str> {
        self.labels.get(LABEL_APP).map(String::as_str)
    }
    pub fn role(&self) -> Option<&str> {
        self.labels.get(LABEL_ROLE).map(String::as_str)
    }
}

/// What the controller sees of the engine, in a stable order, so that two
/// snapshots of an unchanged engine are equal. Each plan digests only its
/// scope of it ([`crate::control::scope`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub containers: Vec<Container>,
    pub images: Vec<ImageId>,
    /// Names of networks called `vl-*` (ours or squatting on our names).
    pub networks: Vec<String>,
}

impl Snapshot {
    /// Sorts every list; call before digesting.
    pub fn normalize(mut self) -> Snapshot {
        for container in &mut self.containers {
            container.ports.sort();
        }
        self.containers.sort();
        self.images.sort();
        self.images.dedup();
        self.networks.sort();
        self.networks.dedup();
        self
    }

    /// sha256 over the JSON of the whole normalized snapshot, as lowercase
    /// hex. Plans are not bound to this (a busy host would void them all)
    /// but to their scope of it: [`crate::control::scope::digest`].
    pub fn digest(&self) -> String {
        let normalized = self.clone().normalize();
        let bytes = serde_json::to_vec(&normalized).expect("snapshot serializes");
        crate::text::hex(&Sha256::digest(&bytes))
    }
}

/// Resource limits applied to every container we start (from policy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Bytes of memory (docker `--memory`).
    pub memory_bytes: u64,
    /// Thousandths of a CPU (docker `--cpus` = millicpus / 1000).
    pub millicpus: u32,
    pub pids: u32,
    pub log_max_size_bytes: u64,
    pub log_max_files: u32,
}

/// Everything a deploy needs, derived by the controller from validated input.
/// The names and references are validated types, also when a stored plan is
/// deserialized, so the engine takes them as they are; their serde form is
/// the plain string, so the sealed plan bytes are what they always were.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploySpec {
    pub plan_id: PlanId,
    pub app: AppName,
    /// Pinned references `name@sha256:<64 hex>` from the operator's catalog.
    pub app_image: ImageRef,
    pub gateway_image: ImageRef,
    pub host_port: u16,
    pub container_port: u16,
    pub server_name: ServerName,
    /// The rendered nginx.conf the gateway mounts read-only.
    pub nginx_config: String,
    /// Root-owned directory for this app under the state directory.
    pub app_dir: PathBuf,
    pub limits: Limits,
}

/// What a start plan starts (see [`Engine::start`]): the recorded ids of a
/// stopped app, and where its gateway answers for the health check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartSpec {
    pub app_container: ContainerId,
    pub gateway: ContainerId,
    pub host_port: u16,
    pub server_name: ServerName,
}

/// Everything an update needs (see [`Engine::update`]), derived by the
/// controller from the app record and the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateSpec {
    pub plan_id: PlanId,
    pub app: AppName,
    /// The pinned reference the app moves to, and the one it runs now.
    pub app_image: ImageRef,
    pub previous_image: String,
    /// The app container that serves now; removed only after the switch.
    pub old_app: ContainerId,
    pub gateway: ContainerId,
    pub host_port: u16,
    pub container_port: u16,
    pub server_name: ServerName,
    pub app_dir: PathBuf,
    /// `vl-<app>-app-<first 12 hex of the plan id>`: the new container's
    /// name and its alias on the app network (the gateway's upstream).
    pub container_name: String,
    /// The Host the gateway routes to the new container while both run, for
    /// the health check before the switch; never the app's server name.
    pub check_name: ServerName,
    /// The managed nginx.conf now, during the check, and after the switch.
    pub previous_config: String,
    pub staged_config: String,
    pub new_config: String,
    pub limits: Limits,
}

/// What a remove_app plan removes (see [`Engine::remove_app`]).
#[derive(Debug, Clone, Copy)]
pub struct AppRemoval<'a> {
    pub app: &'a AppName,
    pub containers: &'a [ContainerId],
    pub running: &'a [ContainerId],
    pub networks: &'a [String],
    pub app_dir: &'a std::path::Path,
}

/// What a successful deploy created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployed {
    pub app_container: ContainerId,
    pub gateway_container: ContainerId,
}

/// Which lines of a container's log to read: the last `tail` (1..=200,
/// checked by the controller), within the last `since_minutes` if given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogWindow {
    pub tail: u16,
    pub since_minutes: Option<u16>,
}

/// Free capacity on the host, for the policy floors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    pub free_memory_bytes: u64,
    pub free_disk_bytes: u64,
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
    /// The managed file on disk is not what we recorded, or is a symlink.
    ManagedFileChanged,
    /// Anything on the host side (files, directories).
    Host { step: &'static str },
    /// deploy or update: the pulled image declares `VOLUME`s (its config's
    /// paths, sorted); refused before any container was created from it.
    ImageDeclaresVolumes { image: ImageRef, volumes: Vec<String> },
    /// deploy, start or update: a step failed with `cause` after the first
    /// mutation, and the rollback was verified: for deploy and update no
    /// container or network carrying the plan's label is left (and a
    /// deploy's new app directory is gone); update's old containers still
    /// run; start's containers are stopped again.
    /// Never built for a step whose outcome is unknown (a timeout).
    RolledBack { cause: Box<EngineError> },
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
            EngineError::RolledBack { cause } => {
                write!(f, "{cause}; the change was rolled back and that was verified")
            }
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
        )
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
pub trait Progress {
    fn step(&self, step: crate::wire::progress::Step);
}

/// Reports nowhere: for callers nobody is watching.
pub struct NoProgress;

impl Progress for NoProgress {
    fn step(&self, _step: crate::wire::progress::Step) {}
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
    fn deploy(&self, spec: &DeploySpec, progress: &dyn Progress) -> Result<Deployed, EngineError>;
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
    /// `docker image rm --no-prune <id>`; never forced, never pruned.
    fn remove_image(&self, image: &ImageId) -> Result<(), EngineError>;
    /// Removes one app: stops `running` as [`Engine::stop`] does, removes
    /// exactly `containers` (never forced, never their volumes), the
    /// networks among `networks` that carry the app's label, and the app
    /// directory with the files volce-lab wrote into it. Never an image.
    fn remove_app(&self, removal: &AppRemoval<'_>) -> Result<(), EngineError>;
    /// start: restart policy back to `unless-stopped`, then start the app
    /// container and the gateway, then the health check through the gateway
    /// with the server name. On failure both are stopped again as
    /// [`Engine::stop`] does and, once seen stopped,
    /// [`EngineError::RolledBack`] is returned.
    fn start(&self, spec: &StartSpec, progress: &dyn Progress) -> Result<(), EngineError>;
    /// update: pull, start the new app container beside the old one, route
    /// `check_name` to it and health-check it, switch the server name to it
    /// and check again, and only then stop and remove the old container.
    /// On a failure before the old one is touched: the previous nginx.conf
    /// is restored and reloaded, the new container removed, and once the
    /// plan's label is seen gone and the old containers running,
    /// [`EngineError::RolledBack`]. Returns the new container's id.
    fn update(&self, spec: &UpdateSpec, progress: &dyn Progress) -> Result<ContainerId, EngineError>;
    /// Read-only: the raw log bytes (stdout and stderr, as docker prints
    /// them with timestamps) of exactly this container. The controller
    /// passes only a recorded id of a managed app and makes the bytes safe
    /// (`crate::logs`) before anything leaves the helper.
    fn logs(&self, container: &ContainerId, window: LogWindow) -> Result<Vec<u8>, EngineError>;
    /// Read-only: exactly this container as the snapshot lists it, or
    /// `None` when the engine holds no container with this id. The default
    /// takes a whole snapshot; the docker CLI engine asks for the one
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
    /// Read-only: every network carrying the label `io.volce-lab.plan=<plan>`
    /// (the snapshot lists networks by name only). With the snapshot's
    /// containers, what a plan that did not finish may have left.
    fn plan_networks(&self, plan: &PlanId) -> Result<Vec<LabelledNetwork>, EngineError>;
}

/// A network as the engine lists it: full id and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LabelledNetwork {
    pub id: String,
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_strict() {
        let hex = "a".repeat(64);
        assert!(ContainerId::parse(&hex).is_some());
        assert!(ContainerId::parse(&"A".repeat(64)).is_none());
        assert!(ContainerId::parse(&hex[..12]).is_none());
        assert!(ImageId::parse(&format!("sha256:{hex}")).is_some());
        assert!(ImageId::parse(&hex).is_none());
        assert!(ImageId::parse(&format!("sha256:{hex}0")).is_none());
    }

    #[test]
    fn snapshot_digest_ignores_order() {
        let image = |c: char| ImageId::parse(&format!("sha256:{}", c.to_string().repeat(64))).unwrap();
        let a = Snapshot { containers: vec![], images: vec![image('a'), image('b')], networks: vec![] };
        let b = Snapshot { containers: vec![], images: vec![image('b'), image('a')], networks: vec![] };
        assert_eq!(a.digest(), b.digest());
        let c = Snapshot { containers: vec![], images: vec![image('a')], networks: vec![] };
        assert_ne!(a.digest(), c.digest());
    }
}
