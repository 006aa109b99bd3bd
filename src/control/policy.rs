//! The operator's policy (`/etc/volce-lab/policy.json`): parsed strictly,
//! validated once, hashed so a plan can prove it was made under the same
//! rules it executes under. Pure: the caller reads the file (see
//! `crate::host::paths` for the ownership checks).
//!
//! Security invariant: the agent never names an image reference. It names a
//! catalog key, and every reference the operator wrote here must be pinned
//! by digest (`name@sha256:<64 hex>`), so what runs is what was reviewed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::docker::Limits;

const MIB: u64 = 1024 * 1024;

/// A pinned image reference `name@sha256:<64 lowercase hex>`. Its serde
/// form is the plain string, and deserializing validates it (a stored plan
/// with an unpinned reference is refused as corrupt).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ImageRef(String);

impl ImageRef {
    pub fn parse(value: &str) -> Option<ImageRef> {
        let (name, digest) = value.split_once("@sha256:")?;
        let name_ok = !name.is_empty()
            && name.len() <= 255
            && name.as_bytes()[0].is_ascii_alphanumeric()
            && name.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'/' | b':' | b'_' | b'-')
            });
        (name_ok && crate::text::is_lower_hex(digest, 64)).then(|| ImageRef(value.to_owned()))
    }
}

crate::control::canonical::string_form!(
    ImageRef,
    "an image reference must be pinned as name@sha256:<64 lowercase hex>"
);

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
    catalog: BTreeMap<String, String>,
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
}

fn default_port_range() -> [u64; 2] {
    [18000, 18999]
}
fn default_max_apps() -> u64 {
    4
}

/// A policy that passed every rule. Its serialization (canonical JSON) is
/// what [`Policy::hash`] covers, so defaults count the same as written values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    pub catalog: BTreeMap<String, ImageRef>,
    pub nginx_image: ImageRef,
    pub port_range: (u16, u16),
    pub max_apps: u32,
    pub capacity: CapacityFloors,
    pub limits: Limits,
    pub approvers: Vec<String>,
}

/// Why a policy was refused, in words for the operator who wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the policy is refused: {0}")]
pub struct PolicyError(pub String);

fn bad<T>(reason: impl Into<String>) -> Result<T, PolicyError> {
    Err(PolicyError(reason.into()))
}

impl Policy {
    /// Parses and validates the policy file's bytes.
    pub fn from_json(bytes: &[u8]) -> Result<Policy, PolicyError> {
        let raw: RawPolicy = serde_json::from_slice(bytes).map_err(|e| PolicyError(format!("{e}")))?;
        Policy::validate(raw)
    }

    fn validate(raw: RawPolicy) -> Result<Policy, PolicyError> {
        if raw.catalog.is_empty() {
            return bad("catalog is empty: list at least one approved image");
        }
        let mut catalog = BTreeMap::new();
        for (key, reference) in raw.catalog {
            if !super::is_name(&key, 31) {
                return bad(format!("catalog key {key:?} does not match ^[a-z][a-z0-9-]{{0,30}}$"));
            }
            let Some(pinned) = ImageRef::parse(&reference) else {
                return bad(format!("catalog entry {key:?} is not pinned as name@sha256:<64 lowercase hex>"));
            };
            catalog.insert(key, pinned);
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
        let l = raw.limits;
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
        let c = raw.capacity;
        if c.min_free_memory_mib > 1 << 30 || c.min_free_disk_mib > 1 << 40 {
            return bad("capacity floors are implausibly large");
        }
        let mut approvers = raw.approvers;
        for name in &approvers {
            if !super::is_user_name(name) {
                return bad(format!("approver {name:?} is not a unix user name"));
            }
        }
        approvers.sort();
        if approvers.windows(2).any(|w| w[0] == w[1]) {
            return bad("approvers lists a user twice");
        }
        Ok(Policy {
            catalog,
            nginx_image,
            port_range: (low as u16, high as u16),
            max_apps: raw.max_apps as u32,
            capacity: c,
            limits: Limits {
                memory_bytes: l.memory_mib * MIB,
                millicpus: (l.cpus * 1000.0).round() as u32,
                pids: l.pids,
                log_max_size_bytes: l.log_max_size_mib * MIB,
                log_max_files: l.log_max_files,
            },
            approvers,
        })
    }

    /// sha256 of the canonical JSON of the validated policy.
    pub fn hash(&self) -> String {
        super::canonical::sha256_hex(self).expect("policy serializes")
    }

    pub fn is_approver(&self, user: &str) -> bool {
        self.approvers.iter().any(|a| a == user)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::{Value, json};

    pub(crate) fn sample() -> Value {
        json!({
            "catalog": {"web": format!("127.0.0.1:15000/volce-lab/web@sha256:{}", "a".repeat(64))},
            "nginx_image": format!("127.0.0.1:15000/volce-lab/gateway@sha256:{}", "b".repeat(64)),
            "approvers": ["alice"]
        })
    }

    pub(crate) fn sample_policy() -> Policy {
        Policy::from_json(sample().to_string().as_bytes()).unwrap()
    }

    fn with(patch: impl FnOnce(&mut Value)) -> Result<Policy, PolicyError> {
        let mut value = sample();
        patch(&mut value);
        Policy::from_json(value.to_string().as_bytes())
    }

    #[test]
    fn minimal_policy_gets_the_documented_defaults() {
        let policy = sample_policy();
        assert_eq!(policy.port_range, (18000, 18999));
        assert_eq!(policy.max_apps, 4);
        assert_eq!(policy.capacity, CapacityFloors { min_free_memory_mib: 1536, min_free_disk_mib: 3072 });
        assert_eq!(policy.limits.memory_bytes, 256 * MIB);
        assert_eq!(policy.limits.millicpus, 500);
        assert_eq!(policy.limits.pids, 128);
        assert_eq!(policy.limits.log_max_files, 3);
    }

    #[test]
    fn writing_a_default_out_does_not_change_the_hash() {
        let explicit = with(|v| v["max_apps"] = json!(4)).unwrap();
        assert_eq!(explicit.hash(), sample_policy().hash());
        let changed = with(|v| v["max_apps"] = json!(3)).unwrap();
        assert_ne!(changed.hash(), sample_policy().hash());
    }

    #[test]
    fn unknown_fields_are_refused() {
        let error = with(|v| v["allow_everything"] = json!(true)).unwrap_err();
        assert!(error.0.contains("unknown field"), "{error}");
        assert!(with(|v| v["limits"] = json!({"privileged": true})).is_err());
        assert!(with(|v| v["capacity"] = json!({"min_free_cpu": 1})).is_err());
    }

    #[test]
    fn unpinned_references_are_refused() {
        for reference in [
            "nginx:latest".to_owned(),
            "nginx".to_owned(),
            format!("nginx@sha256:{}", "A".repeat(64)),
            format!("nginx@sha256:{}", "a".repeat(63)),
            format!("@sha256:{}", "a".repeat(64)),
            format!("Nginx@sha256:{}", "a".repeat(64)),
            format!("nginx latest@sha256:{}", "a".repeat(64)),
        ] {
            assert!(with(|v| v["catalog"]["web"] = json!(reference)).is_err(), "{reference}");
            assert!(with(|v| v["nginx_image"] = json!(reference)).is_err(), "{reference}");
            assert!(serde_json::from_value::<ImageRef>(json!(reference)).is_err(), "{reference}");
        }
    }

    #[test]
    fn bad_catalog_keys_and_empty_catalog_are_refused() {
        let pinned = format!("x@sha256:{}", "c".repeat(64));
        assert!(with(|v| v["catalog"] = json!({"Web": pinned})).is_err());
        assert!(with(|v| v["catalog"] = json!({"a b": pinned})).is_err());
        assert!(with(|v| v["catalog"] = json!({})).is_err());
    }

    #[test]
    fn bad_numbers_are_refused() {
        assert!(with(|v| v["port_range"] = json!([80, 18999])).is_err());
        assert!(with(|v| v["port_range"] = json!([19000, 18000])).is_err());
        assert!(with(|v| v["port_range"] = json!([18000, 70000])).is_err());
        assert!(with(|v| v["max_apps"] = json!(0)).is_err());
        assert!(with(|v| v["max_apps"] = json!(true)).is_err());
        assert!(with(|v| v["limits"] = json!({"cpus": 0})).is_err());
        assert!(with(|v| v["limits"] = json!({"memory_mib": 1})).is_err());
        assert!(with(|v| v["limits"] = json!({"pids": 0})).is_err());
    }

    #[test]
    fn approvers_must_be_user_names_listed_once() {
        assert!(with(|v| v["approvers"] = json!(["root; rm"])).is_err());
        assert!(with(|v| v["approvers"] = json!(["alice", "alice"])).is_err());
        assert!(
            with(|v| {
                v.as_object_mut().unwrap().remove("approvers");
            })
            .is_err()
        );
        assert!(with(|v| v["approvers"] = json!([])).is_ok());
    }
}
