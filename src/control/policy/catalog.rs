//! One catalog entry of the operator's policy: the pinned image, and how the
//! app runs (the port it listens on, the path its health check asks). Pure.
//!
//! A value is either a bare pinned reference (today's meaning: the agent
//! names the container port, the health check asks `/`) or an object
//! `{"image", "container_port", "health_path", "env_file", "data", "tasks"}`
//! with no other key. `tasks` (`{"NAME": ["/argv/0", "arg", ...]}`) declares
//! the commands a `run_task` plan may run (issue 40); `before_start` names
//! the one a deploy or update runs before the new version starts.
//! `accessories` (`{"NAME": {"VARIABLE": "template"}}`) names the policy's
//! accessories the app needs and the variables that tell it where each is
//! (`crate::vocab::EnvTemplate`). `data` (`{"path", "max_mib"}`) gives the app a data directory
//! (`crate::vocab::DataSpec`). `env_file` names the app's configuration: a file directly in
//! `/etc/volce-lab/apps/` (`crate::vocab::EnvFileName`); only its name is
//! part of the policy, its content is hashed into each plan instead
//! (`crate::vocab::EnvFileUse`), so editing it voids only that key's plans. An entry
//! that says no more than a bare reference serializes as one, so a policy
//! that does not use the object form hashes as it did before it existed and
//! plans made under it stay valid across the upgrade.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::vocab::{
    AccessoryName, DATA_MIB_RANGE, DATA_PATH_MAX, DataSpec, ENV_DIR, EnvFileName, EnvTemplate,
    HEALTH_PATH_MAX, HealthPath, ImageRef, MAX_ACCESSORIES, MAX_TASKS, TASK_ARG_MAX_BYTES, TASK_ARGV_MAX,
    TaskArgv, TaskName,
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
    /// The commands a `run_task` plan may run, by name, each with its
    /// fixed argv (issue 40). Empty when the entry declares none.
    pub tasks: BTreeMap<TaskName, TaskArgv>,
    /// The task a deploy or update runs in the new version's image before
    /// its container starts (Kamal's pre-deploy hook); one of `tasks`.
    pub before_start: Option<TaskName>,
    /// The accessories the app needs, each with the variables that tell
    /// the app where it is. Empty when it needs none.
    pub accessories: BTreeMap<AccessoryName, EnvTemplate>,
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
            tasks: BTreeMap::new(),
            before_start: None,
            accessories: BTreeMap::new(),
        }
    }

    fn is_bare(&self) -> bool {
        self.container_port.is_none()
            && self.health_path.is_root()
            && self.env_file.is_none()
            && self.data.is_none()
            && self.tasks.is_empty()
            && self.before_start.is_none()
            && self.accessories.is_empty()
    }
}

/// The object form of an entry, field for field as the policy file holds
/// it: the one serde type that the loader reads ([`entry`] then checks each
/// field, in this order, with its own message), that a [`CatalogEntry`]
/// serializes through (so the policy hash), and that `catalog pin` edits
/// and writes (`crate::install::catalog`). Each field is the JSON as
/// written, `null` included: a wrong type gets the entry's own message
/// rather than serde's, and a key the operator wrote needlessly
/// (`"health_path": "/"`) survives a re-pin as it was.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EntryFields {
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub image: Option<Value>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub container_port: Option<Value>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub health_path: Option<Value>,
    /// As the operator wrote it: the absolute path.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub env_file: Option<Value>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Value>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub before_start: Option<Value>,
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub accessories: Option<Value>,
    /// Keys no entry has: [`entry`] refuses the entry, naming the first.
    #[serde(flatten)]
    pub unknown: Map<String, Value>,
}

/// A key that is there is `Some`, even when its value is `null` (serde's
/// `Option` would read `null` as absent, and accept `"container_port": null`).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl EntryFields {
    /// The fields of an object entry as written (`None` for a bare
    /// reference or anything else that is no object).
    pub fn of(value: &Value) -> Option<EntryFields> {
        value.as_object()?;
        EntryFields::deserialize(value).ok()
    }

    /// The object form of `entry`: only the keys that differ from a bare
    /// reference's meaning.
    fn of_entry(entry: &CatalogEntry) -> Result<EntryFields, serde_json::Error> {
        Ok(EntryFields {
            image: Some(serde_json::to_value(&entry.image)?),
            container_port: entry.container_port.map(Value::from),
            health_path: (!entry.health_path.is_root())
                .then(|| serde_json::to_value(&entry.health_path))
                .transpose()?,
            env_file: entry.env_file.as_ref().map(|name| Value::from(name.policy_path())),
            data: entry.data.as_ref().map(serde_json::to_value).transpose()?,
            tasks: (!entry.tasks.is_empty()).then(|| serde_json::to_value(&entry.tasks)).transpose()?,
            before_start: entry.before_start.as_ref().map(|task| Value::from(task.as_str())),
            accessories: (!entry.accessories.is_empty())
                .then(|| serde_json::to_value(&entry.accessories))
                .transpose()?,
            unknown: Map::new(),
        })
    }
}

impl Serialize for CatalogEntry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.is_bare() {
            return self.image.serialize(serializer);
        }
        EntryFields::of_entry(self).map_err(serde::ser::Error::custom)?.serialize(serializer)
    }
}

/// The keys an entry object may have, in the order messages name them
/// (tested to be [`EntryFields`]'s).
const KEYS: &[&str] =
    &["image", "container_port", "health_path", "env_file", "data", "tasks", "before_start", "accessories"];

/// Parses one catalog value (`key` names it in the messages).
pub(super) fn entry(key: &str, value: &Value) -> Result<CatalogEntry, String> {
    let not_pinned = || format!("catalog entry {key:?} is not pinned as name@sha256:<64 lowercase hex>");
    let fields = match value {
        Value::String(reference) => {
            return ImageRef::parse(reference).map(CatalogEntry::bare).ok_or_else(not_pinned);
        }
        Value::Object(_) => EntryFields::of(value),
        _ => None,
    };
    let Some(fields) = fields else {
        return Err(format!(
            "catalog entry {key:?} must be a pinned reference or an object with {}",
            KEYS.join(", ")
        ));
    };
    if let Some(unknown) = fields.unknown.keys().next() {
        return Err(format!(
            "catalog entry {key:?} has the unknown key {unknown:?} (known: {})",
            KEYS.join(", ")
        ));
    }
    let image =
        fields.image.as_ref().and_then(Value::as_str).and_then(ImageRef::parse).ok_or_else(not_pinned)?;
    let container_port = match &fields.container_port {
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
    let health_path = match &fields.health_path {
        None => HealthPath::default(),
        Some(path) => path.as_str().and_then(HealthPath::parse).ok_or_else(|| {
            format!(
                "catalog entry {key:?}: health_path must be an absolute path of at most {HEALTH_PATH_MAX} bytes \
                 of letters, digits, '/', '-', '.', '_' and '~' (no query, no '..', no '//')"
            )
        })?,
    };
    let env_file = match &fields.env_file {
        None => None,
        Some(path) => Some(path.as_str().and_then(EnvFileName::from_policy_path).ok_or_else(|| {
            format!(
                "catalog entry {key:?}: env_file must be the absolute path of a file directly in {ENV_DIR}/, \
                 named with lowercase letters, digits, '.', '_' and '-' (such as {ENV_DIR}/{key}.env)"
            )
        })?),
    };
    let data = fields.data.as_ref().map(|value| data(key, value)).transpose()?;
    let tasks = fields.tasks.as_ref().map(|value| tasks(key, value)).transpose()?.unwrap_or_default();
    let before_start = match &fields.before_start {
        None => None,
        Some(name) => Some(
            name.as_str().and_then(TaskName::parse).filter(|t| tasks.contains_key(t)).ok_or_else(|| {
                format!("catalog entry {key:?}: before_start must name one of the entry's tasks, not {name}")
            })?,
        ),
    };
    let accessories =
        fields.accessories.as_ref().map(|value| accessories(key, value)).transpose()?.unwrap_or_default();
    Ok(CatalogEntry { image, container_port, health_path, env_file, data, tasks, before_start, accessories })
}

/// An entry's `accessories`: at most [`MAX_ACCESSORIES`] names of the
/// policy's accessories (checked against them once the whole policy is
/// read), each with its [`EnvTemplate`] for the app.
fn accessories(key: &str, value: &Value) -> Result<BTreeMap<AccessoryName, EnvTemplate>, String> {
    let wrong = |what: String| {
        format!(
            "catalog entry {key:?}: accessories must be an object of at most {MAX_ACCESSORIES} accessory names, \
             each with the variables that tell the app where it is (such as {{\"db\": {{\"DATABASE_URL\": \
             \"postgresql://app:{{password}}@{{host}}:{{port}}/app\"}}}}); {what}"
        )
    };
    let Some(object) = value.as_object() else { return Err(wrong("this is no object".to_owned())) };
    if object.len() > MAX_ACCESSORIES {
        return Err(wrong(format!("it names {}", object.len())));
    }
    let mut accessories = BTreeMap::new();
    for (name, template) in object {
        let accessory =
            AccessoryName::parse(name).ok_or_else(|| wrong(format!("{name:?} is no accessory name")))?;
        let variables = serde_json::from_value::<BTreeMap<String, String>>(template.clone())
            .map_err(|_| wrong(format!("the variables of {name:?} are not an object of strings")))?;
        let template = EnvTemplate::parse(variables).map_err(|why| wrong(format!("for {name:?}, {why}")))?;
        accessories.insert(accessory, template);
    }
    Ok(accessories)
}

/// An entry's `tasks`: an object of at most [`MAX_TASKS`] names, each with
/// its argv as a list of strings ([`TaskName`], [`TaskArgv`]).
fn tasks(key: &str, value: &Value) -> Result<BTreeMap<TaskName, TaskArgv>, String> {
    let wrong = |what: String| {
        format!(
            "catalog entry {key:?}: tasks must be an object of at most {MAX_TASKS} tasks, each a name (a lowercase \
             letter, then at most 31 lowercase letters, digits, '-' and '_') with its argv, a list of 1 to \
             {TASK_ARGV_MAX} strings of 1 to {TASK_ARG_MAX_BYTES} bytes without control characters, the first not \
             starting with '-' (such as {{\"migrate\": [\"/app/bin/migrate\"]}}); {what}"
        )
    };
    let Some(object) = value.as_object() else { return Err(wrong("this is no object".to_owned())) };
    if object.len() > MAX_TASKS {
        return Err(wrong(format!("it declares {}", object.len())));
    }
    let mut tasks = BTreeMap::new();
    for (name, argv) in object {
        let task = TaskName::parse(name).ok_or_else(|| wrong(format!("{name:?} is no task name")))?;
        let argv = serde_json::from_value::<Vec<String>>(argv.clone())
            .ok()
            .and_then(TaskArgv::parse)
            .ok_or_else(|| wrong(format!("the argv of {name:?} is not such a list")))?;
        tasks.insert(task, argv);
    }
    Ok(tasks)
}

/// An entry's `data`: exactly `path` and `max_mib` ([`DataSpec`]).
fn data(key: &str, value: &Value) -> Result<DataSpec, String> {
    let (low, high) = (DATA_MIB_RANGE.start(), DATA_MIB_RANGE.end());
    let wrong = || {
        format!(
            "catalog entry {key:?}: data must be an object with exactly path (an absolute path of at most \
             {DATA_PATH_MAX} bytes of letters, digits, '/', '-', '.' and '_', outside /tmp, /proc, /sys, /dev, \
             /etc, /usr, /run and the other system directories) and max_mib (an integer from {low} to {high})"
        )
    };
    // `DataSpec`'s serde form checks the path and the type; the two keys
    // and the range are the catalog's.
    value
        .as_object()
        .filter(|o| o.len() == 2)
        .and_then(|_| DataSpec::deserialize(value).ok())
        .filter(|spec| DATA_MIB_RANGE.contains(&spec.max_mib))
        .ok_or_else(wrong)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_messages_name_are_the_fields_of_the_one_entry_type() {
        let all = EntryFields {
            image: Some(Value::Null),
            container_port: Some(Value::Null),
            health_path: Some(Value::Null),
            env_file: Some(Value::Null),
            data: Some(Value::Null),
            tasks: Some(Value::Null),
            before_start: Some(Value::Null),
            accessories: Some(Value::Null),
            unknown: Map::new(),
        };
        let Value::Object(written) = serde_json::to_value(&all).unwrap() else { panic!("an object") };
        let mut keys: Vec<&str> = written.keys().map(String::as_str).collect();
        let mut known = KEYS.to_vec();
        keys.sort_unstable();
        known.sort_unstable();
        assert_eq!(keys, known);
        // A key written as null is there (and refused), not absent.
        let read = EntryFields::of(&serde_json::json!({"image": "x", "container_port": null})).unwrap();
        assert_eq!(read.container_port, Some(Value::Null));
        assert_eq!(read.health_path, None);
    }
}
