//! One catalog entry of the operator's policy: the pinned image, and how the
//! app runs (the port it listens on, the path its health check asks). Pure.
//!
//! A value is either a bare pinned reference (today's meaning: the agent
//! names the container port, the health check asks `/`) or an object
//! `{"image", "container_port", "health_path", "env_file", "data"}` with no
//! other key. `data` (`{"path", "max_mib"}`) gives the app a data directory
//! (`crate::vocab::DataSpec`). `env_file` names the app's configuration: a file directly in
//! `/etc/volce-lab/apps/` (`crate::vocab::EnvFileName`); only its name is
//! part of the policy, its content is hashed into each plan instead
//! (`crate::vocab::EnvFileUse`), so editing it voids only that key's plans. An entry
//! that says no more than a bare reference serializes as one, so a policy
//! that does not use the object form hashes as it did before it existed and
//! plans made under it stay valid across the upgrade.

use serde::{Serialize, Serializer};

use crate::vocab::{
    DATA_MIB_RANGE, DATA_PATH_MAX, DataPath, DataSpec, ENV_DIR, EnvFileName, HEALTH_PATH_MAX, HealthPath,
    ImageRef,
};

/// A validated catalog entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    pub image: ImageRef,
    /// The port the app listens on, when the operator says it; then the
    /// agent may omit `container_port` and a different value is refused.
    pub container_port: Option<u16>,
    /// `/` unless the operator says otherwise.
    pub health_path: HealthPath,
    /// The app's configuration, given to its container at create.
    pub env_file: Option<EnvFileName>,
    /// The app's data directory: where it is mounted and its size cap.
    pub data: Option<DataSpec>,
}

impl CatalogEntry {
    /// A bare pinned reference: today's meaning.
    pub fn bare(image: ImageRef) -> CatalogEntry {
        CatalogEntry {
            image,
            container_port: None,
            health_path: HealthPath::default(),
            env_file: None,
            data: None,
        }
    }

    fn is_bare(&self) -> bool {
        self.container_port.is_none()
            && self.health_path.is_root()
            && self.env_file.is_none()
            && self.data.is_none()
    }
}

/// The object form, as it is hashed (only the keys that differ from a bare
/// reference's meaning).
#[derive(Serialize)]
struct EntryObject<'a> {
    image: &'a ImageRef,
    #[serde(skip_serializing_if = "Option::is_none")]
    container_port: Option<u16>,
    #[serde(skip_serializing_if = "is_root")]
    health_path: &'a HealthPath,
    /// As the operator wrote it: the absolute path.
    #[serde(skip_serializing_if = "Option::is_none")]
    env_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a DataSpec>,
}

fn is_root(path: &&HealthPath) -> bool {
    path.is_root()
}

impl Serialize for CatalogEntry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.is_bare() {
            return self.image.serialize(serializer);
        }
        EntryObject {
            image: &self.image,
            container_port: self.container_port,
            health_path: &self.health_path,
            env_file: self.env_file.as_ref().map(EnvFileName::policy_path),
            data: self.data.as_ref(),
        }
        .serialize(serializer)
    }
}

/// The keys an entry object may have, in the order messages name them.
const KEYS: &[&str] = &["image", "container_port", "health_path", "env_file", "data"];

/// Parses one catalog value (`key` names it in the messages).
pub(super) fn entry(key: &str, value: &serde_json::Value) -> Result<CatalogEntry, String> {
    let not_pinned = || format!("catalog entry {key:?} is not pinned as name@sha256:<64 lowercase hex>");
    let object = match value {
        serde_json::Value::String(reference) => {
            return ImageRef::parse(reference).map(CatalogEntry::bare).ok_or_else(not_pinned);
        }
        serde_json::Value::Object(object) => object,
        _ => {
            return Err(format!(
                "catalog entry {key:?} must be a pinned reference or an object with {}",
                KEYS.join(", ")
            ));
        }
    };
    if let Some(unknown) = object.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!(
            "catalog entry {key:?} has the unknown key {unknown:?} (known: {})",
            KEYS.join(", ")
        ));
    }
    let image = object
        .get("image")
        .and_then(serde_json::Value::as_str)
        .and_then(ImageRef::parse)
        .ok_or_else(not_pinned)?;
    let container_port = match object.get("container_port") {
        None => None,
        Some(port) => match port.as_u64() {
            Some(n) if port.is_u64() && (1024..=65535).contains(&n) => Some(n as u16),
            _ => {
                return Err(format!(
                    "catalog entry {key:?}: container_port must be an integer from 1024 to 65535"
                ));
            }
        },
    };
    let health_path = match object.get("health_path") {
        None => HealthPath::default(),
        Some(path) => path.as_str().and_then(HealthPath::parse).ok_or_else(|| {
            format!(
                "catalog entry {key:?}: health_path must be an absolute path of at most {HEALTH_PATH_MAX} bytes \
                 of letters, digits, '/', '-', '.', '_' and '~' (no query, no '..', no '//')"
            )
        })?,
    };
    let env_file = match object.get("env_file") {
        None => None,
        Some(path) => Some(path.as_str().and_then(EnvFileName::from_policy_path).ok_or_else(|| {
            format!(
                "catalog entry {key:?}: env_file must be the absolute path of a file directly in {ENV_DIR}/, \
                 named with lowercase letters, digits, '.', '_' and '-' (such as {ENV_DIR}/{key}.env)"
            )
        })?),
    };
    let data = object.get("data").map(|value| data(key, value)).transpose()?;
    Ok(CatalogEntry { image, container_port, health_path, env_file, data })
}

/// An entry's `data`: exactly `path` and `max_mib`.
fn data(key: &str, value: &serde_json::Value) -> Result<DataSpec, String> {
    let (low, high) = (DATA_MIB_RANGE.start(), DATA_MIB_RANGE.end());
    let wrong = || {
        format!(
            "catalog entry {key:?}: data must be an object with exactly path (an absolute path of at most \
             {DATA_PATH_MAX} bytes of letters, digits, '/', '-', '.' and '_', outside /tmp, /proc, /sys, /dev, \
             /etc, /usr, /run and the other system directories) and max_mib (an integer from {low} to {high})"
        )
    };
    let object = value.as_object().filter(|o| o.len() == 2).ok_or_else(wrong)?;
    let path = object.get("path").and_then(serde_json::Value::as_str).and_then(DataPath::parse);
    let max_mib = object
        .get("max_mib")
        .filter(|n| n.is_u64())
        .and_then(serde_json::Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| DATA_MIB_RANGE.contains(n));
    match (path, max_mib) {
        (Some(path), Some(max_mib)) => Ok(DataSpec { path, max_mib }),
        _ => Err(wrong()),
    }
}
