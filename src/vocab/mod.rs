//! The vocabulary the controller, the engine, the store, the wire and the
//! gateway renderer share: refusal codes, validated ids and names, pinned
//! image references, the engine's snapshot and the specs it acts on. Pure
//! data and its validation; runs wherever it is called, with no privilege.
//!
//! A leaf: nothing here imports another module of the crate but
//! `crate::text` (the layer test in tests/hermetic/layers.rs holds it to
//! that), so every module above can take these types without reaching
//! into, or circling through, another.
//!
//! - `refusal.rs`: [`Code`] (the stable machine codes) and [`Refusal`];
//! - `action.rs`: [`Action`], the closed set of changes a plan can make;
//! - `plan_state.rs`: a plan's [`PlanState`] and [`PlanOutcome`];
//! - `fix.rs`: [`Code::fix`], the one next step of each code, and
//!   [`FIX_MAX_CHARS`];
//! - `ids.rs`: [`PlanId`], [`Digest`], [`ContainerId`], [`ImageId`],
//!   [`ImageRef`], [`HealthPath`];
//! - `names.rs`: the name validators, [`AppName`] and the Docker names
//!   derived from it ([`AppNames`]), [`ServerName`];
//! - `snapshot.rs`: the engine's [`Snapshot`], an image's [`ImageHolds`] and
//!   the `io.volce-lab.*` labels;
//! - `env_file.rs`: an app's configuration: [`EnvFileName`], what a plan
//!   records of it ([`EnvFileUse`]) and the `NAME=value` parser
//!   ([`Configuration`]);
//! - `data.rs`: an app's data directory: [`DataPath`], the catalog's
//!   [`DataSpec`] and what a plan records of it ([`DataUse`]);
//! - `engine.rs`: the specs the engine acts on ([`DeploySpec`],
//!   [`StartSpec`], [`UpdateSpec`], [`TaskSpec`], [`ContainerLimits`]), [`Capacity`], and
//!   the progress [`Step`]s it reports;
//! - `backup.rs`: backups of an app's data: the policy's [`BackupConfig`],
//!   what the engine backs up ([`BackupSpec`]) and what it left ([`BackupRun`]);
//! - `edge.rs`: the HTTPS edge: the policy's [`EdgeConfig`] and what an
//!   app's [`Exposure`] records;
//! - `accessory.rs`: accessories beside an app: the policy's
//!   [`AccessorySpec`], the [`EnvTemplate`] that tells each side where the
//!   other is, the generated [`Secret`] and what a plan records ([`AccessoryUse`]);
//! - `task.rs`: operator-declared tasks: [`TaskName`] and [`TaskArgv`]
//!   (what the engine runs for one, [`TaskSpec`], is in `engine.rs`).
//!
//! Each type has one path: `crate::vocab::<Name>` (the files are private).

mod accessory;
mod acme;
mod action;
mod backup;
mod data;
mod edge;
mod engine;
mod env_file;
mod fix;
mod ids;
mod names;
mod plan_state;
mod refusal;
mod snapshot;
mod string_form;
mod task;

pub use accessory::{
    ACCESSORY_ROLE, AccessoryName, AccessorySpec, AccessoryStart, AccessoryUse, CREDENTIAL, EnvTemplate,
    MAX_ACCESSORIES, PLACEHOLDERS, ROTATE_FROM, ROTATE_TO, Secret, TEMPLATE_MAX_VARIABLES,
    TEMPLATE_VALUE_MAX_BYTES, accessories_env_of, accessory_name_ok, is_accessory_env_file,
    pending_secret_beside, secret_beside,
};
pub use acme::{
    ACME_CONTACT_MAX, ACME_DIRECTORY_MAX, ACME_NAMES_MAX, AcmeContact, AcmeDirectory, AcmeError, AcmeFailure,
    AcmeFiles, AcmeSpec, CertFingerprint, CertName, CertSerial, Certificate, CertificateFacts, IssuerName,
    LETS_ENCRYPT, RENEW_DAYS_MAX, Renewal,
};
pub use action::{ALSO_SERVER_NAMES, Action};
pub use backup::{
    ACCESSORY_TAG, BACKUP_TAG, BACKUP_TIMEOUT, BackupConfig, BackupDone, BackupEvery, BackupMissed,
    BackupRecord, BackupRepository, BackupRun, BackupSpec, DumpDone, DumpUse, KEEP_MAX, Replaced, RestoreRun,
    RestoreSpec, Retention, RetentionApplied, SnapshotFacts, SnapshotId, tag_value,
};
pub use data::{
    DATA_MIB_RANGE, DATA_OWNER, DATA_PATH_MAX, DataAfter, DataPath, DataSpec, DataUse, KeptFor,
    uncovered_volumes,
};
pub use edge::{
    AcmeConfig, AcmeOrder, CertKind, CertSource, CertificateFiles, EDGE_CONTAINER, EDGE_HTTP_PORT,
    EDGE_HTTPS_PORT, EDGE_NETWORK, EDGE_PROBE_PORT, EDGE_ROLE, EDGE_UID, EdgeChange, EdgeConfig,
    EdgeNameFacts, ExposedName, Exposure, HttpsAnswer,
};
pub use engine::{
    AccessoryUpdateSpec, Capacity, ContainerLimits, DeploySpec, RotationSpec, StartSpec, Step, TaskSpec,
    UpdateSpec,
};
pub use env_file::{
    Configuration, ENV_DIR, ENV_FILE_MAX_BYTES, ENV_FILE_MAX_VARIABLES, ENV_NAME_MAX, EnvFileError,
    EnvFileName, EnvFileUse, HashKey, env_file_hmac,
};
pub use fix::FIX_MAX_CHARS;
pub use ids::{ContainerId, Digest, HEALTH_PATH_MAX, HealthPath, ImageId, ImageRef, PlanId, RolloutId};
pub(crate) use names::is_name;
pub use names::{
    AppName, AppNames, MAX_ALSO_SERVER_NAMES, NAME_PREFIX, ServerName, is_app_name, is_server_name,
    is_user_name, served_names,
};
pub use plan_state::{PlanOutcome, PlanState};
pub use refusal::{Code, MESSAGE_MAX_CHARS, Refusal, refuse};
pub use snapshot::{Container, ImageHolds, LABEL_APP, LABEL_PLAN, LABEL_ROLE, PublishedPort, Snapshot};
pub use task::{MAX_TASKS, TASK_ARG_MAX_BYTES, TASK_ARGV_MAX, TASK_TIMEOUT, TaskArgv, TaskName};
