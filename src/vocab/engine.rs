//! What the controller hands the container engine and what the engine
//! reports back: the specs of the long actions (deploy, start, update),
//! the resource limits every container gets, the host's free capacity, and
//! the [`Step`]s a long action reports as it goes. Pure data; the
//! controller derives the specs from validated input and seals them into
//! plans, the docker engine acts on them, the wire carries the steps.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{
    AppName, ContainerId, DataUse, EnvFileUse, HealthPath, ImageRef, PlanId, ServerName, TaskArgv, TaskName,
};

/// Resource limits applied to every container we start (from policy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerLimits {
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
    /// What the health check asks (the catalog entry's `health_path`).
    /// Left out of the plan at `/`, so plans sealed before it existed keep
    /// their digest.
    #[serde(default, skip_serializing_if = "HealthPath::is_root")]
    pub health_path: HealthPath,
    /// The primary name: the health check's Host.
    pub server_name: ServerName,
    /// The other names the gateway serves (at most
    /// [`super::MAX_ALSO_SERVER_NAMES`], none twice, never the primary).
    /// Left out of the plan when there are none, so plans sealed before it
    /// existed keep their digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_server_names: Vec<ServerName>,
    /// The rendered nginx.conf the gateway mounts read-only.
    pub nginx_config: String,
    /// Root-owned directory for this app under the state directory.
    pub app_dir: PathBuf,
    pub limits: ContainerLimits,
    /// The catalog entry's configuration: docker reads it at create
    /// (`--env-file`). Left out of the plan when the entry has none, so
    /// plans sealed before it existed keep their digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_file: Option<EnvFileUse>,
    /// The app's data directory, mounted before the app container is
    /// created. Left out of the plan without one, as `env_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataUse>,
    /// The entry's `before_start` task, run in the app's image once its
    /// network and data are there and before its container is created; a
    /// failure rolls the deploy back. Left out without one, as `env_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_start: Option<TaskSpec>,
    /// The accessories created first, on the app's network, each healthy
    /// before the app starts (issue 40). Left out without any, as `env_file`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accessories: Vec<super::AccessoryUse>,
}

impl DeploySpec {
    /// The env file of its accessories' variables, when it has any
    /// ([`super::accessories_env_of`]).
    pub fn accessories_env(&self) -> Option<PathBuf> {
        (!self.accessories.is_empty()).then(|| super::accessories_env_of(&self.app_dir))
    }
}

/// What a start plan starts (the engine's `start`): the recorded ids of a
/// stopped app, and where its gateway answers for the health check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartSpec {
    pub app_container: ContainerId,
    pub gateway: ContainerId,
    pub host_port: u16,
    pub server_name: ServerName,
    /// What the health check asks (the catalog entry's `health_path`).
    /// Left out of the plan at `/`, so plans sealed before it existed keep
    /// their digest.
    #[serde(default, skip_serializing_if = "HealthPath::is_root")]
    pub health_path: HealthPath,
    /// The app's data directory: mounted again (after a reboot, say)
    /// before the app container starts. Left out without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataUse>,
    /// Its accessories, each with its data mounted, started and ready
    /// before the app starts. Left out without any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accessories: Vec<super::AccessoryStart>,
}

/// Everything an update needs (the engine's `update`), derived by the
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
    /// What the health check asks (the catalog entry's `health_path`).
    /// Left out of the plan at `/`, so plans sealed before it existed keep
    /// their digest.
    #[serde(default, skip_serializing_if = "HealthPath::is_root")]
    pub health_path: HealthPath,
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
    pub limits: ContainerLimits,
    /// The new entry's configuration, as in [`DeploySpec::env_file`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_file: Option<EnvFileUse>,
    /// The app's data, which the new container mounts beside the old one
    /// (both see it during the switch). Left out without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataUse>,
    /// The entry's `before_start` task, run in the new image before the new
    /// container is created; a failure rolls the update back. Left out
    /// without one, so plans sealed before it existed keep their digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_start: Option<TaskSpec>,
    /// The env file of the app's accessories' variables its deploy wrote
    /// (`super::accessories_env_of`), given to the new container after
    /// `env_file`. Left out for an app without accessories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accessories_env: Option<PathBuf>,
}

/// Free capacity on the host, for the policy floors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    pub free_memory_bytes: u64,
    pub free_disk_bytes: u64,
}

/// What a long action (deploy, start, update) has just finished. The
/// helper prints each as a progress line (`crate::wire::progress`); one
/// word of this closed set is all such a line carries.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr, strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Step {
    /// The images are pulled.
    Pulled,
    /// The app's networks exist.
    Network,
    /// The (new) app container runs.
    AppStarted,
    /// `nginx -t` accepted the gateway's configuration.
    GatewayTested,
    /// The app answered through the gateway.
    HealthCheck,
    /// update: the server name now routes to the new container.
    Switched,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What the engine runs for a `run_task` plan: the task's argv in a new
/// container named [`TaskSpec::container_name`], from the image the app runs,
/// with the app's configuration, data and internal network, hardened and
/// limited as the app container is, for at most `timeout_seconds`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    pub plan_id: PlanId,
    pub app: AppName,
    pub task: TaskName,
    pub argv: TaskArgv,
    /// The pinned reference the app's container runs (pulled by its deploy
    /// or update; the task never pulls).
    pub image: ImageRef,
    /// `vl-<app>-task-<first 12 hex of the plan id>`.
    pub container_name: String,
    pub limits: ContainerLimits,
    pub timeout_seconds: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_file: Option<EnvFileUse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataUse>,
    /// As [`UpdateSpec::accessories_env`]: a migration finds its database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accessories_env: Option<PathBuf>,
}

impl TaskSpec {
    /// The container's name for `app` and `plan`.
    pub fn container_name(app: &AppName, plan: &PlanId) -> String {
        format!("{}-task-{}", super::AppNames::of(app).network, &plan.as_str()[..12])
    }
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(u64::from(self.timeout_seconds))
    }
}

/// What an `update_accessory` plan hands the engine (issue 40): the
/// accessory's recorded container to replace, the image it runs now, the
/// accessory as it will run (the policy's new image and health command,
/// everything else as recorded), and how to tell the app still serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessoryUpdateSpec {
    pub plan_id: PlanId,
    pub app: AppName,
    pub app_dir: PathBuf,
    pub limits: ContainerLimits,
    pub old: ContainerId,
    pub previous_image: ImageRef,
    pub previous_health: TaskArgv,
    pub accessory: super::AccessoryUse,
    pub host_port: u16,
    pub server_name: ServerName,
    #[serde(default, skip_serializing_if = "HealthPath::is_root")]
    pub health_path: HealthPath,
}

impl AccessoryUpdateSpec {
    /// The name the old container has while the new one takes its own:
    /// `vl-<app>-<name>.old`, which no container of ours is ever called (no
    /// app or accessory name has a dot).
    pub fn set_aside_name(&self) -> String {
        format!("{}.old", self.accessory.container_name)
    }

    /// The accessory as it ran before: the recorded image and health command.
    pub fn previous(&self) -> super::AccessoryUse {
        super::AccessoryUse {
            image: self.previous_image.clone(),
            health: self.previous_health.clone(),
            ..self.accessory.clone()
        }
    }
}

/// What a `rotate_credential` plan hands the engine (issue 40): the
/// accessory and its running container, the operator's `rotate` command,
/// every accessory of the app (the app's variables name them all), and the
/// switch of the app to a new container of the image it runs, which reads
/// the new variables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotationSpec {
    pub accessory: super::AccessoryUse,
    pub container: ContainerId,
    pub rotate: TaskArgv,
    pub accessories: Vec<super::AccessoryUse>,
    pub switch: UpdateSpec,
}
