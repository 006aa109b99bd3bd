//! What volce-lab records about each app it deployed ([`AppRecord`], one
//! row of the store's `apps` table), its life ([`AppState`]) and the
//! images it ran ([`ImageUse`]). Pure data; the controller writes it when a
//! plan ends, validation, drift, the inventory and doctor read it.
//!
//! The names and references are validated types: their serde form is the
//! plain string (a record reads and writes the bytes it always did), and a
//! stored record whose app name, server name or image reference does not
//! parse is refused as corrupt when it is loaded, never re-parsed and
//! skipped at each place that reads it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::vocab::{
    AccessoryUse, AppName, ContainerId, DataUse, EnvFileUse, Exposure, HealthPath, ImageId, ImageRef, PlanId,
    ServerName,
};

/// The life of an app we deployed. One string table (strum); serde's names
/// are the same (tested): the store keeps both, and compares them.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr, strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum AppState {
    Running,
    Stopped,
    NeedsInspection,
}

impl AppState {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What we know about an app we deployed (stored in the `apps` table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppRecord {
    pub app: AppName,
    pub state: AppState,
    pub host_port: u16,
    pub container_port: u16,
    /// The primary name: the health check's Host.
    pub server_name: ServerName,
    /// The other names its gateway serves. Absent when there are none, and
    /// in records written before it existed (one name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_server_names: Vec<ServerName>,
    pub image_key: String,
    pub app_image: ImageRef,
    pub gateway_image: ImageRef,
    pub nginx_config: String,
    pub app_dir: PathBuf,
    /// Empty when a deploy failed before the engine reported ids.
    pub containers: Vec<ContainerId>,
    pub app_container: Option<ContainerId>,
    pub gateway_container: Option<ContainerId>,
    /// The last plan that changed this record.
    pub plan_id: PlanId,
    /// The image ids our containers of this app ran, from the snapshot taken
    /// when its deploy completed: volce-lab's claim on those images, the
    /// only ones remove_image may touch. Absent in records written before
    /// it existed (no claim: refusing is the safe side).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_ids: Vec<ImageId>,
    /// The network alias the gateway proxies to: absent for the `app` alias
    /// deploy gives ([`crate::nginx::APP_ALIAS`]), the container's name
    /// after an update. Absent in older records, which all use `app`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// Every image this app ran, oldest first (deploy, then each completed
    /// update), so inventory can show what ran before. Absent in records
    /// written before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_history: Vec<ImageUse>,
    /// The env file the app container was created with (path and keyed
    /// hash, never a value), so an update can tell rotated configuration
    /// from nothing to do. Absent without one, and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<EnvFileUse>,
    /// The versions completed updates replaced, newest first, at most the
    /// policy's `keep_versions`: what `rollback` returns to, and what
    /// remove_image leaves alone. Absent in records written before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept_versions: Vec<KeptVersion>,
    /// Where the running version answers its health check. Absent in
    /// records written before it existed (the catalog entry says, then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_path: Option<HealthPath>,
    /// The app's data directory, as its containers mount it. Absent
    /// without one, and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataUse>,
    /// Its names the HTTPS edge serves, each with its certificate (issue
    /// 39): set by an expose plan, cleared by unexpose. Absent when it is
    /// not exposed, and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exposed: Option<Exposure>,
    /// The accessories its deploy created beside it (issue 40), as that
    /// plan recorded them; their containers are among `containers`. Absent
    /// without any, and in older records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accessories: Vec<AccessoryUse>,
}

impl AppRecord {
    /// The env file of its accessories' variables, for every new container
    /// of its image (`crate::vocab::accessories_env_of`), when it has any.
    pub fn accessories_env(&self) -> Option<std::path::PathBuf> {
        (!self.accessories.is_empty()).then(|| crate::vocab::accessories_env_of(&self.app_dir))
    }

    /// Its accessories' names as a refusal lists them: `a, b`, or `none`.
    pub fn accessory_names(&self) -> String {
        let names: Vec<&str> = self.accessories.iter().map(|a| a.name.as_str()).collect();
        if names.is_empty() { "none".to_owned() } else { names.join(", ") }
    }

    /// The gateway's upstream host (see [`AppRecord::upstream`]).
    pub fn upstream(&self) -> &str {
        self.upstream.as_deref().unwrap_or(crate::nginx::APP_ALIAS)
    }
}

/// One image an app ran: the catalog key, the pinned reference (its
/// digest), and since when (unix seconds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageUse {
    pub image_key: String,
    pub app_image: ImageRef,
    /// Absent when unknown: the image an older record ran before its first update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<i64>,
}

/// A version an update replaced: enough to run an update back to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeptVersion {
    pub image_key: String,
    /// The pinned reference it ran: pulled by digest again if the image is gone.
    pub app_image: ImageRef,
    /// The local image its container ran, when the engine reported one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<ImageId>,
    pub container_port: u16,
    /// Where its health check asked.
    pub health_path: HealthPath,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored() -> serde_json::Value {
        serde_json::json!({
            "app": "shop", "state": "running", "host_port": 18001, "container_port": 8080,
            "server_name": "shop.example", "image_key": "web",
            "app_image": format!("registry.example/web@sha256:{}", "a".repeat(64)),
            "gateway_image": format!("registry.example/gateway@sha256:{}", "b".repeat(64)),
            "nginx_config": "", "app_dir": "/state/apps/shop", "containers": [],
            "app_container": null, "gateway_container": null, "plan_id": "0".repeat(32),
        })
    }

    #[test]
    fn a_record_reads_and_writes_the_plain_strings_it_always_did() {
        let record: AppRecord = serde_json::from_value(stored()).unwrap();
        assert_eq!(record.app.as_str(), "shop");
        assert_eq!(serde_json::to_value(&record).unwrap(), stored());
    }

    /// Tried: a record without the list (one name, as every older record)
    /// and one with two other names: each reads and writes back unchanged.
    #[test]
    fn a_record_keeps_the_other_server_names_and_one_without_them_serves_one() {
        let record: AppRecord = serde_json::from_value(stored()).unwrap();
        assert!(record.also_server_names.is_empty());
        let mut value = stored();
        value["also_server_names"] = serde_json::json!(["www.shop.example", "old.example"]);
        let record: AppRecord = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(record.also_server_names[1].as_str(), "old.example");
        assert_eq!(serde_json::to_value(&record).unwrap(), value);
        value["also_server_names"] = serde_json::json!(["Bad_Name"]);
        assert!(serde_json::from_value::<AppRecord>(value).is_err(), "refused as corrupt");
    }

    #[test]
    fn a_record_with_an_invalid_name_or_reference_does_not_load() {
        for (key, bad) in [("app", "Shop"), ("server_name", "a b"), ("app_image", "web:latest")] {
            let mut value = stored();
            value[key] = bad.into();
            assert!(serde_json::from_value::<AppRecord>(value).is_err(), "{key} = {bad:?}");
        }
    }
}
