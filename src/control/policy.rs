//! The operator's policy (`/etc/volce-lab/policy.json`): parsed strictly,
//! validated once, hashed so a plan can prove it was made under the same
//! rules it executes under. Pure: the caller reads the file (see
//! `crate::host::paths` for the ownership checks).
//!
//! Security invariant: the agent never names an image reference. It names a
//! catalog key, and every reference the operator wrote here must be pinned
//! by digest (`name@sha256:<64 hex>`, [`ImageRef`]), so what runs is what
//! was reviewed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::vocab::Action;
use crate::vocab::{
    AccessoryName, AccessorySpec, BackupConfig, ContainerLimits, EdgeConfig, ImageRef, KEEP_MAX, is_name,
    is_user_name,
};

mod accessories;
mod catalog;
pub use catalog::{CatalogEntry, EntryFields};

const MIB: u64 = 1024 * 1024;

/// Free capacity the host must keep before a deploy is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacityFloors {
    #[serde(default = "default_min_free_memory_mib")]
    pub min_free_memory_mib: u64,
    #[serde(default = "default_min_free_disk_mib")]
    pub min_free_disk_mib: u64,
}

fn default_min_free_memory_mib() -> u64 {
    1536
}
fn default_min_free_disk_mib() -> u64 {
    3072
}

impl Default for CapacityFloors {
    fn default() -> Self {
        CapacityFloors {
            min_free_memory_mib: default_min_free_memory_mib(),
            min_free_disk_mib: default_min_free_disk_mib(),
        }
    }
}

/// Limits as the operator writes them (MiB, fractional CPUs).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    #[serde(default = "default_memory_mib")]
    memory_mib: u64,
    #[serde(default = "default_cpus")]
    cpus: f64,
    #[serde(default = "default_pids")]
    pids: u32,
    #[serde(default = "default_log_max_size_mib")]
    log_max_size_mib: u64,
    #[serde(default = "default_log_max_files")]
    log_max_files: u32,
}

fn default_memory_mib() -> u64 {
    256
}
fn default_cpus() -> f64 {
    0.5
}
fn default_pids() -> u32 {
    128
}
fn default_log_max_size_mib() -> u64 {
    10
}
fn default_log_max_files() -> u32 {
    3
}

impl Default for RawLimits {
    fn default() -> Self {
        RawLimits {
            memory_mib: default_memory_mib(),
            cpus: default_cpus(),
            pids: default_pids(),
            log_max_size_mib: default_log_max_size_mib(),
            log_max_files: default_log_max_files(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    catalog: BTreeMap<String, serde_json::Value>,
    nginx_image: String,
    #[serde(default = "default_port_range")]
    port_range: [u64; 2],
    #[serde(default = "default_max_apps")]
    max_apps: u64,
    #[serde(default)]
    capacity: CapacityFloors,
    #[serde(default)]
    limits: RawLimits,
    approvers: Vec<String>,
    #[serde(default = "default_plan_ttl_seconds")]
    plan_ttl_seconds: serde_json::Value,
    #[serde(default)]
    approval_required: Option<serde_json::Value>,
    #[serde(default = "default_retention_days")]
    retention_days: serde_json::Value,
    #[serde(default)]
    gateway_access_log: bool,
    #[serde(default = "default_keep_versions")]
    keep_versions: serde_json::Value,
    #[serde(default)]
    signed_approvals: Option<SignedApprovals>,
    #[serde(default)]
    backup: Option<serde_json::Value>,
    #[serde(default)]
    edge: Option<serde_json::Value>,
    #[serde(default)]
    accessories: BTreeMap<String, serde_json::Value>,
}

/// The policy's `signed_approvals` object (issue 42): present, this host
/// also takes approvals signed on the operator's own device and verified
/// against `/etc/volce-lab/allowed_signers`; absent, it takes approvals at
/// its terminal only. A key held in a file is accepted only where
/// `software_keys` says so: an agent with a shell on the workstation that
/// holds such a key file could read it and sign.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedApprovals {
    #[serde(default)]
    pub software_keys: bool,
}

/// How many versions an update keeps for `rollback`, unless the policy
/// says otherwise (`keep_versions`, within [`KEEP_VERSIONS_RANGE`]).
pub const DEFAULT_KEEP_VERSIONS: u32 = 2;
pub const KEEP_VERSIONS_RANGE: std::ops::RangeInclusive<u32> = 1..=10;

fn default_keep_versions() -> serde_json::Value {
    DEFAULT_KEEP_VERSIONS.into()
}

fn is_default_keep(keep: &u32) -> bool {
    *keep == DEFAULT_KEEP_VERSIONS
}

/// How long finished plans are kept, unless the policy says otherwise
/// (`retention_days`, within [`RETENTION_DAYS_RANGE`]).
pub const DEFAULT_RETENTION_DAYS: u32 = 90;
pub const RETENTION_DAYS_RANGE: std::ops::RangeInclusive<u32> = 1..=3650;

fn default_retention_days() -> serde_json::Value {
    DEFAULT_RETENTION_DAYS.into()
}

/// How long a plan stays usable after it was prepared, unless the policy
/// says otherwise (`plan_ttl_seconds`, within [`PLAN_TTL_RANGE`]).
pub const DEFAULT_PLAN_TTL_SECONDS: u32 = 600;
pub const PLAN_TTL_RANGE: std::ops::RangeInclusive<u32> = 60..=3600;

fn default_plan_ttl_seconds() -> serde_json::Value {
    DEFAULT_PLAN_TTL_SECONDS.into()
}

/// The fixed minimum of `approval_required`, in [`Action::ALL`] order.
fn approval_minimum() -> Vec<Action> {
    Action::ALL.iter().copied().filter(|a| a.always_requires_approval()).collect()
}

fn is_default_ttl(ttl: &u32) -> bool {
    *ttl == DEFAULT_PLAN_TTL_SECONDS
}

fn is_approval_minimum(actions: &[Action]) -> bool {
    actions == approval_minimum()
}

fn default_port_range() -> [u64; 2] {
    [18000, 18999]
}
fn default_max_apps() -> u64 {
    4
}

/// What the policy in force decides for a new plan: which policy it is
/// bound to, whether it needs an approval, and how long it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terms {
    pub policy_hash: String,
    pub requires_approval: bool,
    pub ttl_seconds: i64,
}

/// A policy that passed every rule. Its serialization (canonical JSON) is
/// what [`Policy::hash`] covers, so defaults count the same as written values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// Serialized per [`CatalogEntry`]: an entry that says no more than a
    /// bare reference hashes as one.
    pub catalog: BTreeMap<String, CatalogEntry>,
    pub nginx_image: ImageRef,
    pub port_range: (u16, u16),
    pub max_apps: u32,
    pub capacity: CapacityFloors,
    pub limits: ContainerLimits,
    pub approvers: Vec<String>,
    /// Left out of the serialization (so of the hash) at its default, so a
    /// policy that does not use the key hashes as it did before it existed
    /// and plans made under it stay valid across the upgrade.
    #[serde(skip_serializing_if = "is_default_ttl")]
    pub plan_ttl_seconds: u32,
    /// The actions that need an operator's approval, in [`Action::ALL`]
    /// order: always the fixed minimum, plus what the operator added.
    /// Omitted from the hash when it is the minimum (as `plan_ttl_seconds`).
    #[serde(skip_serializing_if = "is_approval_minimum")]
    pub approval_required: Vec<Action>,
    /// Plans finished (or expired unused) longer ago than this are pruned
    /// (`store::Tx::prune_plans`). Housekeeping, not a rule about what may
    /// run: left out of the hash, so changing it voids no approval.
    #[serde(skip)]
    pub retention_days: u32,
    /// Whether the gateways that later plans configure log each request
    /// (`crate::nginx::AccessLog`). Part of the hash when on, since the
    /// configurations that pending plans rendered differ; left out when
    /// off, as `plan_ttl_seconds` is at its default.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub gateway_access_log: bool,
    /// How many replaced versions an app's record keeps for `rollback`
    /// (each pins the image of one version). Part of the hash, since it
    /// decides what a pending update's outcome records; left out at its
    /// default, as `plan_ttl_seconds` is.
    #[serde(skip_serializing_if = "is_default_keep")]
    pub keep_versions: u32,
    /// Who may approve, and with which keys, is a rule about what may run:
    /// part of the hash when present, left out when absent (as
    /// `plan_ttl_seconds` at its default), so enabling it voids pending plans.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_approvals: Option<SignedApprovals>,
    /// Where `backup` plans copy apps' data (issue 41), its password file
    /// and the retention. Part of the hash when present (a pending backup
    /// plan was made for this repository), left out when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupConfig>,
    /// The HTTPS edge (issue 39): where it answers and the certificate of
    /// each name. Part of the hash when present (an expose plan was made for
    /// these addresses and files), left out when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edge: Option<EdgeConfig>,
    /// The services apps may have beside them (issue 40), by name. Part of
    /// the hash when there are any (a deploy was planned with these
    /// images and variables), left out when there are none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub accessories: BTreeMap<AccessoryName, AccessorySpec>,
}

/// Why a policy was refused, in words for the operator who wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the policy is refused: {0}")]
pub struct PolicyError(pub String);

fn bad<T>(reason: impl Into<String>) -> Result<T, PolicyError> {
    Err(PolicyError(reason.into()))
}

/// `plan_ttl_seconds`: an integer (not a float, a boolean or a string)
/// within [`PLAN_TTL_RANGE`].
fn plan_ttl_seconds(value: &serde_json::Value) -> Result<u32, PolicyError> {
    let (low, high) = (PLAN_TTL_RANGE.start(), PLAN_TTL_RANGE.end());
    match value.as_u64().and_then(|n| u32::try_from(n).ok()) {
        Some(n) if PLAN_TTL_RANGE.contains(&n) => Ok(n),
        _ => bad(format!("plan_ttl_seconds must be an integer from {low} to {high} (seconds), not {value}")),
    }
}

/// `approval_required`: a list of action names, each once; the fixed
/// minimum always applies whether the list names it or not. Absent means
/// the minimum. Leaving a fixed action out is not an error: refusing it
/// would turn every policy written before an action joined the minimum
/// (start and update joined with issue 11) into a refused policy, and the
/// helper into an outage, on upgrade, for a list that can only ever be
/// stricter than it reads. `offer.approval_required` in the inventory and
/// `show` state the effective list.
fn approval_required(value: Option<&serde_json::Value>) -> Result<Vec<Action>, PolicyError> {
    let minimum = approval_minimum();
    let names = |actions: &[Action]| actions.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(", ");
    let Some(value) = value else { return Ok(minimum) };
    let Some(list) = value.as_array() else {
        return bad("approval_required must be a list of action names");
    };
    let mut actions = Vec::new();
    for item in list {
        let Some(action) = item.as_str().and_then(|name| Action::parse(name).ok()) else {
            return bad(format!(
                "approval_required: {item} is not an action (known: {})",
                names(Action::ALL)
            ));
        };
        if actions.contains(&action) {
            return bad(format!("approval_required lists {} twice", action.as_str()));
        }
        actions.push(action);
    }
    Ok(Action::ALL.iter().copied().filter(|a| actions.contains(a) || minimum.contains(a)).collect())
}

/// `backup`: the repository (an absolute path or `sftp:`), the password
/// file (an absolute path; its owner and mode are checked when it is used,
/// as the env files' are) and at least one retention rule.
fn backup_of(value: &serde_json::Value) -> Result<BackupConfig, PolicyError> {
    let config: BackupConfig = serde_json::from_value(value.clone()).map_err(|e| {
        PolicyError(format!(
            "backup must be {{\"repository\": an absolute path or sftp:user@host:/path, \"password_file\": an \
             absolute path, \"keep\": {{\"last\"|\"daily\"|\"weekly\"|\"monthly\": 1 to {KEEP_MAX}}}}}: {e}"
        ))
    })?;
    let file = config.password_file.to_str().unwrap_or_default();
    if !file.starts_with('/') || file.chars().any(char::is_control) || file.split('/').any(|p| p == "..") {
        return bad("backup.password_file must be an absolute path (e.g. /etc/volce-lab/backup.password)");
    }
    if !config.keep.valid() {
        return bad(format!(
            "backup.keep needs at least one of last, daily, weekly, monthly, each from 1 to {KEEP_MAX}"
        ));
    }
    if let Some(ssh_config) = &config.ssh_config {
        let file = ssh_config.to_str().unwrap_or_default();
        let plain = !file.chars().any(|c| c.is_control() || c.is_whitespace());
        if !file.starts_with('/') || !plain || file.split('/').any(|p| p == "..") {
            return bad(
                "backup.ssh_config must be an absolute path without spaces (e.g. /etc/volce-lab/backup.ssh_config)",
            );
        }
        if config.repository.sftp_destination().is_none() {
            return bad(
                "backup.ssh_config needs a repository of the form sftp:user@host:/path (host a Host of that file)",
            );
        }
    }
    Ok(config)
}

/// `edge`: two addresses with ports, the certificate files of each name
/// (absolute paths; their owner and mode are checked when an expose plan
/// is made) and the two switches.
fn edge_of(value: &serde_json::Value) -> Result<EdgeConfig, PolicyError> {
    let config: EdgeConfig = serde_json::from_value(value.clone()).map_err(|e| {
        PolicyError(format!(
            "edge must be {{\"http\": \"ADDRESS:PORT\", \"https\": \"ADDRESS:PORT\", \"certificates\": \
             {{\"NAME\": {{\"cert\": \"/path.pem\", \"key\": \"/path.key\"}}}}, \"redirect_http\": true|false, \
             \"hsts\": true|false}} (addresses as 0.0.0.0:443 or [::]:443, names lowercase): {e}"
        ))
    })?;
    match config.problem() {
        Some(problem) => bad(problem),
        None => Ok(config),
    }
}

impl Policy {
    /// Parses and validates the policy file's bytes.
    pub fn from_json(bytes: &[u8]) -> Result<Policy, PolicyError> {
        let raw: RawPolicy = serde_json::from_slice(bytes).map_err(|e| PolicyError(format!("{e}")))?;
        Policy::validate(raw)
    }

    fn validate(raw: RawPolicy) -> Result<Policy, PolicyError> {
        let catalog = catalog_of(raw.catalog)?;
        let accessories = accessories::accessories_of(&raw.accessories)?;
        for (key, entry) in &catalog {
            if let Some(name) = entry.accessories.keys().find(|name| !accessories.contains_key(*name)) {
                return bad(format!(
                    "catalog entry {key:?} names the accessory {:?}, which the policy's accessories do not \
                     declare",
                    name.as_str()
                ));
            }
        }
        let Some(nginx_image) = ImageRef::parse(&raw.nginx_image) else {
            return bad("nginx_image is not pinned as name@sha256:<64 lowercase hex>");
        };
        let [low, high] = raw.port_range;
        if !(1024..=65535).contains(&low) || !(1024..=65535).contains(&high) || low > high {
            return bad("port_range must be [low, high] with 1024 <= low <= high <= 65535");
        }
        if !(1..=64).contains(&raw.max_apps) {
            return bad("max_apps must be between 1 and 64");
        }
        let limits = limits_of(raw.limits)?;
        let c = raw.capacity;
        if c.min_free_memory_mib > 1 << 30 || c.min_free_disk_mib > 1 << 40 {
            return bad("capacity floors are implausibly large");
        }
        let approvers = approvers_of(raw.approvers)?;
        let plan_ttl_seconds = plan_ttl_seconds(&raw.plan_ttl_seconds)?;
        let approval_required = approval_required(raw.approval_required.as_ref())?;
        let (low_days, high_days) = (RETENTION_DAYS_RANGE.start(), RETENTION_DAYS_RANGE.end());
        let retention_days = match raw.retention_days.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) if RETENTION_DAYS_RANGE.contains(&n) => n,
            _ => {
                return bad(format!(
                    "retention_days must be an integer from {low_days} to {high_days} (days), not {}",
                    raw.retention_days
                ));
            }
        };
        let (low_keep, high_keep) = (KEEP_VERSIONS_RANGE.start(), KEEP_VERSIONS_RANGE.end());
        let keep_versions = match raw.keep_versions.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) if KEEP_VERSIONS_RANGE.contains(&n) => n,
            _ => {
                return bad(format!(
                    "keep_versions must be an integer from {low_keep} to {high_keep} (versions kept for \
                     rollback), not {}",
                    raw.keep_versions
                ));
            }
        };
        Ok(Policy {
            catalog,
            nginx_image,
            port_range: (low as u16, high as u16),
            max_apps: raw.max_apps as u32,
            capacity: c,
            limits,
            approvers,
            plan_ttl_seconds,
            approval_required,
            retention_days,
            gateway_access_log: raw.gateway_access_log,
            keep_versions,
            signed_approvals: raw.signed_approvals,
            backup: raw.backup.as_ref().map(backup_of).transpose()?,
            edge: raw.edge.as_ref().map(edge_of).transpose()?,
            accessories,
        })
    }

    /// Whether a new plan for `action` needs an operator's approval.
    pub fn requires_approval(&self, action: Action) -> bool {
        self.approval_required.contains(&action)
    }

    /// The terms a new plan for `action` is sealed with; `policy_hash` is
    /// [`Policy::hash`], passed in because the controller keeps it.
    pub fn terms(&self, action: Action, policy_hash: &str) -> Terms {
        Terms {
            policy_hash: policy_hash.to_owned(),
            requires_approval: self.requires_approval(action),
            ttl_seconds: i64::from(self.plan_ttl_seconds),
        }
    }

    /// sha256 of the canonical JSON of the validated policy.
    pub fn hash(&self) -> String {
        super::canonical::sha256_hex(self).expect("policy serializes")
    }

    /// How the gateway that a new plan configures logs requests.
    pub fn access_log(&self) -> crate::nginx::AccessLog {
        crate::nginx::AccessLog::of(self.gateway_access_log)
    }

    pub fn is_approver(&self, user: &str) -> bool {
        self.approvers.iter().any(|a| a == user)
    }
}

/// The catalog: each key a name, each entry valid. It may be empty (issue
/// 37): setup's skeleton starts with none, so the operator pins what they
/// reviewed instead of removing placeholders first, and every reader says
/// "the catalog is empty" ([`EMPTY_CATALOG`]) rather than failing oddly.
fn catalog_of(
    raw: BTreeMap<String, serde_json::Value>,
) -> Result<BTreeMap<String, CatalogEntry>, PolicyError> {
    let mut catalog = BTreeMap::new();
    for (key, value) in raw {
        if !is_name(&key, 31) {
            return bad(format!("catalog key {key:?} does not match ^[a-z][a-z0-9-]{{0,30}}$"));
        }
        let entry = catalog::entry(&key, &value).map_err(PolicyError)?;
        catalog.insert(key, entry);
    }
    Ok(catalog)
}

/// What every reader of an empty catalog says: the fact and the next step.
pub const EMPTY_CATALOG: &str =
    "the catalog is empty; pin an image with `sudo volce-lab-host catalog pin KEY IMAGE`";

/// Every container's limits, each in its range.
fn limits_of(l: RawLimits) -> Result<ContainerLimits, PolicyError> {
    if !(6..=1024 * 1024).contains(&l.memory_mib) {
        return bad("limits.memory_mib must be between 6 and 1048576");
    }
    if !l.cpus.is_finite() || !(0.01..=1024.0).contains(&l.cpus) {
        return bad("limits.cpus must be between 0.01 and 1024");
    }
    if !(16..=1_000_000).contains(&l.pids) {
        return bad("limits.pids must be between 16 and 1000000");
    }
    if !(1..=1024).contains(&l.log_max_size_mib) {
        return bad("limits.log_max_size_mib must be between 1 and 1024");
    }
    if !(1..=100).contains(&l.log_max_files) {
        return bad("limits.log_max_files must be between 1 and 100");
    }
    Ok(ContainerLimits {
        memory_bytes: l.memory_mib * MIB,
        millicpus: (l.cpus * 1000.0).round() as u32,
        pids: l.pids,
        log_max_size_bytes: l.log_max_size_mib * MIB,
        log_max_files: l.log_max_files,
    })
}

/// The approvers: unix user names, sorted, none twice.
fn approvers_of(mut approvers: Vec<String>) -> Result<Vec<String>, PolicyError> {
    for name in &approvers {
        if !is_user_name(name) {
            return bad(format!("approver {name:?} is not a unix user name"));
        }
    }
    approvers.sort();
    if approvers.windows(2).any(|w| w[0] == w[1]) {
        return bad("approvers lists a user twice");
    }
    Ok(approvers)
}

#[cfg(test)]
pub(crate) mod tests;
