//! The checks every plan action shares when it validates an agent's
//! parameters against the policy, the stored apps and a fresh engine
//! snapshot: what validation reads ([`Context`], and the host's facts
//! through [`HostFacts`]), exact parameters and their types, the recorded
//! app and its container set, the capacity floors, declared volumes, an
//! app's data (`data.rs`). Each action's own derivation is in
//! `crate::actions`. Pure; runs in the root helper at prepare and again at
//! execute.
//!
//! Security invariants enforced here:
//! - parameters are exactly the action's fields, with their exact JSON types
//!   (an integer is never a boolean or a float); anything else is refused;
//! - the agent names a catalog key, never an image reference
//!   ([`not_in_catalog`] is the refusal);
//! - [`owned`]: an app we recorded, whose labelled container set is exactly
//!   the one we recorded (nothing unmanaged can be slipped in by labelling
//!   it); every action on an existing app but remove_app checks it.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::app_record::{AppRecord, AppState};
use super::policy::{CatalogEntry, Policy};
use crate::vocab::{ALSO_SERVER_NAMES, Action};
use crate::vocab::{
    AppName, Capacity, Code, ContainerId, DataPath, EnvFileName, EnvFileUse, ImageHolds, ImageId, ImageRef,
    MAX_ALSO_SERVER_NAMES, PlanId, Refusal, ServerName, Snapshot, refuse,
};

pub const MIB: u64 = 1024 * 1024;

/// The policy's capacity floors: free memory, and free disk under the state
/// directory. Checked by every prepare (each adds state) and again by a
/// deploy's derivation.
pub fn capacity_floors(policy: &Policy, facts: &dyn HostFacts) -> Result<(), Refusal> {
    let capacity = facts.capacity()?;
    let floors = policy.capacity;
    if capacity.free_memory_bytes < floors.min_free_memory_mib * MIB
        || capacity.free_disk_bytes < floors.min_free_disk_mib * MIB
    {
        return refuse(
            Code::InsufficientCapacity,
            format!(
                "The host must keep {} MiB of memory and {} MiB of disk free.",
                floors.min_free_memory_mib, floors.min_free_disk_mib
            ),
        );
    }
    Ok(())
}

/// Facts about the host that validation needs and the snapshot lacks: the
/// controller answers them from the engine and the state directory, tests
/// from a fake.
pub trait HostFacts {
    /// Whether nothing listens on 127.0.0.1:`port`.
    fn host_port_free(&self, port: u16) -> bool;
    fn capacity(&self) -> Result<Capacity, Refusal>;
    /// Whether anything (file, directory, symlink) exists at the app's directory.
    fn app_dir_exists(&self, app: &str) -> bool;
    /// The `VOLUME` paths the image declares, or `None` when it is not in
    /// the engine yet (the deploy pulls it and checks again).
    fn image_volumes(&self, reference: &ImageRef) -> Result<Option<Vec<String>>, Refusal>;
    /// What holds a local image besides containers (images built on it,
    /// its references), or `None` when the engine holds no such image.
    fn image_holds(&self, image: &ImageId) -> Result<Option<ImageHolds>, Refusal>;
    /// The env file as it is now: the path docker reads and the sha256 of
    /// its bytes, once its owner, mode and text passed their checks;
    /// `env_file_invalid` otherwise. Never its values.
    fn env_file(&self, name: &EnvFileName) -> Result<EnvFileUse, Refusal>;
    /// The size in MiB of the data image kept at `image`, or `None` when
    /// nothing is there; anything there that is not a root-owned regular
    /// file is `data_invalid`.
    fn kept_data_mib(&self, image: &Path) -> Result<Option<u32>, Refusal>;
    /// What the data kept at `image` was made for ([`crate::vocab::KeptFor`]),
    /// or `None` when no record is beside it; a record that is not root's
    /// own file, or does not parse, is `data_invalid`.
    fn kept_data_for(&self, image: &Path) -> Result<Option<crate::vocab::KeptFor>, Refusal>;
    /// What the backup repository holds of `app`'s snapshot `id` (a prefix
    /// of its full id), or `None` when no snapshot of ours of that app has
    /// it; a repository that does not answer is `backup_failed`.
    fn backup_snapshot(
        &self,
        config: &crate::vocab::BackupConfig,
        app: &crate::vocab::AppName,
        id: &crate::vocab::SnapshotId,
    ) -> Result<Option<crate::vocab::SnapshotFacts>, Refusal>;
    /// The sha256 of the certificate an edge name uses, once its file and
    /// its key's passed their checks (root's, not writable by others, the
    /// key not readable by others, PEM); why not, in the operator's words.
    fn certificate(&self, files: &crate::vocab::CertificateFiles) -> Result<String, String>;
}

/// What a plan records of a catalog entry's configuration, if it has any.
pub fn configuration(entry: &CatalogEntry, facts: &dyn HostFacts) -> Result<Option<EnvFileUse>, Refusal> {
    entry.env_file.as_ref().map(|name| facts.env_file(name)).transpose()
}

/// Refuses a catalog image (or the gateway image) that declares `VOLUME`s,
/// when the engine already holds it; one that is not there yet is checked
/// by the deploy right after its pull, with the same code.
///
/// Why refuse rather than cover each path with a tmpfs: a declared volume
/// says the image expects data to persist there, and a tmpfs would drop it
/// silently at every restart; an anonymous volume instead is writable, on
/// the host's disk, bounded by nothing, and outlives the container (volce-lab
/// never removes volumes). Neither fits a read-only container whose only
/// writable places are small tmpfs mounts.
///
/// A `VOLUME` that is exactly the app's data path is covered by the data
/// directory mounted there (`data`), so it is not refused.
pub fn refuse_volumes(
    what: &str,
    reference: &ImageRef,
    data: Option<&DataPath>,
    facts: &dyn HostFacts,
) -> Result<(), Refusal> {
    match facts.image_volumes(reference)? {
        Some(volumes) => {
            let uncovered = crate::vocab::uncovered_volumes(volumes, data);
            if uncovered.is_empty() {
                Ok(())
            } else {
                Err(volumes_refusal(what, &uncovered, "Nothing was changed."))
            }
        }
        None => Ok(()),
    }
}

/// The `image_declares_volumes` refusal: which image, which paths, the fix.
/// `what` names the image as the reader knows it (a catalog key, or the
/// gateway image); `after` says what happened to the plan.
pub fn volumes_refusal(what: &str, volumes: &[String], after: &str) -> Refusal {
    let paths = crate::text::quoted(&volumes.join(", "), 200);
    Refusal::new(
        Code::ImageDeclaresVolumes,
        format!(
            "{what} declares VOLUME {paths}: volce-lab runs containers with a read-only root and no volumes, \
             so it refuses images that declare any but the catalog entry's data path. {after} The operator must \
             rebuild the image without VOLUME (or give the entry a data directory at that path) and pin it in \
             the catalog; meanwhile choose another catalog key."
        ),
    )
}

/// Everything validation reads.
pub struct Context<'a> {
    pub policy: &'a Policy,
    pub snapshot: &'a Snapshot,
    pub apps: &'a BTreeMap<String, AppRecord>,
    /// The image claims of removed apps: image id -> app (`remove_image`).
    pub retired: &'a BTreeMap<ImageId, String>,
    /// `<state dir>/apps`.
    pub apps_dir: &'a Path,
    /// `<state dir>/data`: the apps' data images and their mount points.
    pub data_dir: &'a Path,
    pub plan_id: &'a PlanId,
}

/// Refuses unless the keys are exactly the action's parameters.
pub fn exact_keys(params: &Map<String, Value>, action: Action) -> Result<(), Refusal> {
    let expected = action.parameters();
    let optional = action.optional_parameters();
    let stray = params.keys().any(|k| !expected.contains(&k.as_str()));
    let missing = expected.iter().any(|k| !params.contains_key(*k) && !optional.contains(k));
    if stray || missing {
        return refuse(
            Code::InvalidParameters,
            format!("{} takes exactly these parameters: {}.", action.as_str(), expected.join(", ")),
        );
    }
    Ok(())
}

pub fn string<'a>(params: &'a Map<String, Value>, key: &str) -> Result<&'a str, Refusal> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| Refusal::new(Code::InvalidParameters, format!("{key} must be a string.")))
}

pub fn app_name(params: &Map<String, Value>) -> Result<AppName, Refusal> {
    AppName::parse(string(params, "app")?)
        .ok_or_else(|| Refusal::new(Code::InvalidAppName, "app must match ^[a-z][a-z0-9-]{0,30}$."))
}

/// An integer in 1024..=65535. JSON booleans and floats are not integers.
pub fn port(params: &Map<String, Value>, key: &str) -> Result<u16, Refusal> {
    let value = params.get(key).and_then(|v| if v.is_u64() || v.is_i64() { v.as_i64() } else { None });
    match value {
        Some(n) if (1024..=65535).contains(&n) => Ok(n as u16),
        _ => refuse(Code::InvalidPort, format!("{key} must be an integer from 1024 to 65535.")),
    }
}

pub fn server_name(params: &Map<String, Value>) -> Result<ServerName, Refusal> {
    ServerName::parse(string(params, "server_name")?).ok_or_else(|| {
        Refusal::new(
            Code::InvalidServerName,
            "server_name must be a lowercase DNS name (a-z, 0-9, '-' and '.', at most 253 characters).",
        )
    })
}

/// The names the gateway serves besides `primary` (the agent's
/// `also_server_names`, none when it is left out): at most
/// [`MAX_ALSO_SERVER_NAMES`] valid names, none twice, never the primary.
/// Each refusal is `invalid_server_name` and quotes only validated names.
pub fn also_server_names(
    params: &Map<String, Value>,
    primary: &ServerName,
) -> Result<Vec<ServerName>, Refusal> {
    let invalid = |message: String| Refusal::new(Code::InvalidServerName, message);
    let Some(value) = params.get(ALSO_SERVER_NAMES) else { return Ok(Vec::new()) };
    let Some(list) = value.as_array() else {
        return refuse(Code::InvalidParameters, format!("{ALSO_SERVER_NAMES} must be a list of strings."));
    };
    if list.len() > MAX_ALSO_SERVER_NAMES {
        return Err(invalid(format!(
            "{ALSO_SERVER_NAMES} holds {} names and an app serves at most {MAX_ALSO_SERVER_NAMES} besides \
             server_name: plan again with at most {MAX_ALSO_SERVER_NAMES}.",
            list.len()
        )));
    }
    let mut names: Vec<ServerName> = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let Some(name) = item.as_str().and_then(ServerName::parse) else {
            return Err(invalid(format!(
                "{ALSO_SERVER_NAMES}[{i}] must be a lowercase DNS name (a-z, 0-9, '-' and '.', at most 253 \
                 characters): plan again with a valid name there, or leave it out."
            )));
        };
        if name == *primary {
            return Err(invalid(format!(
                "{ALSO_SERVER_NAMES} repeats server_name {name}, which is always served: plan again without it."
            )));
        }
        if names.contains(&name) {
            return Err(invalid(format!(
                "{ALSO_SERVER_NAMES} names {name} twice: plan again with each name once."
            )));
        }
        names.push(name);
    }
    Ok(names)
}

/// The most catalog keys an `image_not_in_catalog` refusal names: keys are
/// at most 31 characters, and the helper's sentence reaches the agent cut at
/// 300 (`crate::mcp::rpc`).
const KEYS_NAMED: usize = 6;

/// The `image_not_in_catalog` sentence: what `image` must be and which keys
/// the catalog offers. Keys passed the policy's name check
/// (`^[a-z][a-z0-9-]{0,30}$`), so they are quoted as they are; the agent's
/// text is never repeated.
pub fn not_in_catalog(policy: &Policy) -> String {
    if policy.catalog.is_empty() {
        // Nothing to choose from: the operator's step, not the agent's.
        return "image must be a key of the operator's catalog, and the catalog is empty: nothing can be \
                deployed until the operator pins an image on the server (`sudo volce-lab-host catalog pin KEY IMAGE`)."
            .to_owned();
    }
    let keys: Vec<String> = policy.catalog.keys().take(KEYS_NAMED).map(|k| format!("`{k}`")).collect();
    let more = policy.catalog.len().saturating_sub(KEYS_NAMED);
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!(
        "image must be a key of the operator's catalog, not an image reference; the catalog offers {}{more}.",
        keys.join(", ")
    )
}

/// The recorded app, running, with exactly its recorded container set.
pub fn owned_running<'a>(app: &AppName, ctx: &'a Context<'_>) -> Result<&'a AppRecord, Refusal> {
    let record = recorded(app, ctx)?;
    if record.state != AppState::Running {
        return refuse(Code::AppNotRunning, format!("{app} is {}, not running.", record.state.as_str()));
    }
    owned(app, record, ctx)
}

pub fn recorded<'a>(app: &AppName, ctx: &'a Context<'_>) -> Result<&'a AppRecord, Refusal> {
    ctx.apps.get(app.as_str()).ok_or_else(|| {
        Refusal::new(Code::AppNotFound, format!("{app} is not an app that volce-lab deployed."))
    })
}

/// `record`, whose labelled container set on the engine is exactly the
/// recorded one (nothing unmanaged slipped in, nothing replaced).
pub fn owned<'a>(app: &AppName, record: &'a AppRecord, ctx: &Context<'_>) -> Result<&'a AppRecord, Refusal> {
    let mut labelled: Vec<&ContainerId> =
        ctx.snapshot.containers.iter().filter(|c| c.app() == Some(app.as_str())).map(|c| &c.id).collect();
    labelled.sort();
    let mut recorded: Vec<&ContainerId> = record.containers.iter().collect();
    recorded.sort();
    if labelled != recorded || recorded.is_empty() {
        return refuse(
            Code::ContainerSetChanged,
            format!("The containers of {app} are not the ones volce-lab recorded; an operator must inspect."),
        );
    }
    Ok(record)
}

pub mod accessories;
pub mod data;
