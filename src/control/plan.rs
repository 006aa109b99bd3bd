//! Plans: the closed set of actions, the payload the controller derives
//! from validated parameters, the impact summary, and the digest that binds
//! them (its id and digest types are `crate::vocab::{PlanId, Digest}`).
//! Pure.
//!
//! Security invariant: a plan is immutable once stored. Its `digest` is the
//! sha256 of the canonical JSON of every other field, the operator approves
//! that digest, and execution re-computes it from the stored body, so a
//! changed byte anywhere is refused (`plan_corrupt`), not executed.
//! The mutable life cycle (state, approval, claim) lives beside the body in
//! the store and is deliberately outside the digest.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::app_record::KeptVersion;
use super::canonical;
use crate::vocab::{
    Action, AppName, Code, ContainerId, DataUse, DeploySpec, Digest, EnvFileUse, ImageId, PlanId, Refusal,
    ServerName, StartSpec, UpdateSpec,
};

/// The version of the plan body format; part of the digest.
pub const PLAN_FORMAT: u32 = 1;

/// One container a deploy will create, as the operator reviews it. The
/// hardening flags are the engine's fixed template (see `crate::docker`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerPlan {
    pub name: String,
    pub role: String,
    pub image: String,
    pub user: String,
    /// `127.0.0.1:<host_port>:8080` for the gateway, nothing for the app.
    pub publish: Option<String>,
    pub labels: BTreeMap<String, String>,
}

/// What `execute` hands the engine, derived by us from validated input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Payload {
    Deploy {
        /// The catalog key the agent chose; `spec.app_image` is what it maps to.
        image_key: String,
        network: String,
        containers: Vec<ContainerPlan>,
        spec: DeploySpec,
    },
    NginxConfig {
        app: AppName,
        gateway: ContainerId,
        app_dir: PathBuf,
        /// As recorded in the app record (validated when it was deployed).
        previous_server_name: String,
        /// The other names it served, as recorded. Left out when there
        /// were none, so plans stored before it still match their digest.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        previous_also_server_names: Vec<ServerName>,
        server_name: ServerName,
        /// The other names it serves after (as in [`DeploySpec`]'s).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        also_server_names: Vec<ServerName>,
        previous_config: String,
        new_config: String,
    },
    Stop {
        app: AppName,
        /// Exactly the recorded container ids, sorted.
        containers: Vec<ContainerId>,
        container_names: Vec<String>,
    },
    RemoveImage {
        image_id: ImageId,
        /// The apps volce-lab deployed whose containers used this image (its
        /// claim on it), sorted; never empty for a plan made by this version.
        /// Omitted when empty, so plans stored before it still match their digest.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        used_by: Vec<String>,
    },
    RemoveApp {
        app: AppName,
        /// Exactly the recorded container ids that exist now, sorted.
        containers: Vec<ContainerId>,
        /// Those of them running now: stopped first (restart=no, graceful).
        running: Vec<ContainerId>,
        /// Their names, for the operator.
        container_names: Vec<String>,
        /// The app's two network names, those that exist now.
        networks: Vec<String>,
        /// The app's directory under the state directory.
        app_dir: PathBuf,
        /// The app's data: unmounted and kept, or (with `purge_data`)
        /// deleted. Omitted without data, so older plans keep their digest.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<DataUse>,
        /// The agent asked to delete the data for good; omitted when false.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        purge_data: bool,
    },
    Start {
        app: AppName,
        /// Exactly the recorded container ids, sorted (the scope).
        containers: Vec<ContainerId>,
        container_names: Vec<String>,
        spec: StartSpec,
    },
    Update {
        /// The catalog key the agent chose; `spec.app_image` is what it maps to.
        image_key: String,
        /// The recorded container ids, sorted (the scope).
        containers: Vec<ContainerId>,
        spec: UpdateSpec,
        /// The version it replaces, kept for rollback once it completes.
        /// Omitted when absent, so plans stored before it still match their digest.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replaces: Option<KeptVersion>,
    },
    /// Both recorded containers stopped (gateway first) as a stop plan
    /// stops them, then started and health-checked as a start plan does.
    Restart {
        app: AppName,
        /// Exactly the recorded container ids, sorted (the scope).
        containers: Vec<ContainerId>,
        /// The app's and the gateway's names as the engine shows them now,
        /// in that order, for the operator.
        container_names: Vec<String>,
        spec: StartSpec,
    },
    /// An update back to the newest kept version (`spec.app_image`), which
    /// leaves the kept list; the version it replaces joins it.
    Rollback {
        /// The kept version's catalog key, as it was when it ran.
        image_key: String,
        /// The recorded container ids, sorted (the scope).
        containers: Vec<ContainerId>,
        spec: UpdateSpec,
        replaces: KeptVersion,
    },
}

impl Payload {
    pub fn action(&self) -> Action {
        match self {
            Payload::Deploy { .. } => Action::Deploy,
            Payload::NginxConfig { .. } => Action::NginxConfig,
            Payload::Stop { .. } => Action::Stop,
            Payload::RemoveImage { .. } => Action::RemoveImage,
            Payload::RemoveApp { .. } => Action::RemoveApp,
            Payload::Start { .. } => Action::Start,
            Payload::Update { .. } => Action::Update,
            Payload::Restart { .. } => Action::Restart,
            Payload::Rollback { .. } => Action::Rollback,
        }
    }
    /// The app a plan is about, if any.
    pub fn app(&self) -> Option<&str> {
        match self {
            Payload::Deploy { spec, .. } => Some(spec.app.as_str()),
            Payload::NginxConfig { app, .. }
            | Payload::Stop { app, .. }
            | Payload::RemoveApp { app, .. }
            | Payload::Start { app, .. }
            | Payload::Restart { app, .. } => Some(app.as_str()),
            Payload::Update { spec, .. } | Payload::Rollback { spec, .. } => Some(spec.app.as_str()),
            Payload::RemoveImage { .. } => None,
        }
    }
    /// The env file the plan creates a container with, if any: its hash
    /// must still be the file's when the plan is approved and executed.
    pub fn env_file(&self) -> Option<&EnvFileUse> {
        match self {
            Payload::Deploy { spec, .. } => spec.env_file.as_ref(),
            Payload::Update { spec, .. } => spec.env_file.as_ref(),
            _ => None,
        }
    }
}

/// What a plan will touch, in the words the operator reviews.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Impact {
    pub target: String,
    pub containers_touched: Vec<String>,
    /// Always false: no action of ours deletes a volume.
    pub data_volumes_deleted: bool,
    /// Always false: the host's own nginx is never touched, only per-app gateways.
    pub shared_nginx_changed: bool,
    pub rollback: String,
}

/// What the policy in force decides for a new plan: which policy it is
/// bound to, whether it needs an approval, and how long it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terms {
    pub policy_hash: String,
    pub requires_approval: bool,
    pub ttl_seconds: i64,
}

/// A stored plan: the immutable body and its digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub format: u32,
    pub id: PlanId,
    pub action: Action,
    /// The parameters as the agent sent them (already validated).
    pub parameters: Value,
    pub payload: Payload,
    pub impact: Impact,
    pub snapshot_digest: String,
    pub policy_hash: String,
    pub requester: String,
    pub requires_approval: bool,
    /// Unix seconds.
    pub created_at: i64,
    pub expires_at: i64,
    pub digest: Digest,
}

impl Plan {
    /// Builds a plan and seals it with its digest.
    #[allow(clippy::too_many_arguments)]
    pub fn seal(
        id: PlanId,
        parameters: Value,
        payload: Payload,
        impact: Impact,
        snapshot_digest: String,
        terms: Terms,
        requester: String,
        now: i64,
    ) -> Plan {
        let action = payload.action();
        let mut plan = Plan {
            format: PLAN_FORMAT,
            id,
            action,
            parameters,
            payload,
            impact,
            snapshot_digest,
            policy_hash: terms.policy_hash,
            requester,
            requires_approval: terms.requires_approval,
            created_at: now,
            expires_at: now + terms.ttl_seconds,
            // A placeholder: `compute_digest` leaves this field out.
            digest: Digest::sha256(&[]),
        };
        plan.digest = plan.compute_digest();
        plan
    }

    /// sha256 over the canonical JSON of every field except `digest`.
    pub fn compute_digest(&self) -> Digest {
        let mut value = serde_json::to_value(self).expect("plan serializes");
        value.as_object_mut().expect("plan is an object").remove("digest");
        Digest::sha256(&canonical::to_vec(&value).expect("value serializes"))
    }

    /// The terms this plan was sealed with.
    pub fn terms(&self) -> Terms {
        Terms {
            policy_hash: self.policy_hash.clone(),
            requires_approval: self.requires_approval,
            ttl_seconds: self.expires_at - self.created_at,
        }
    }

    /// Parses a stored body and proves it is intact and self-consistent:
    /// its digest, its action, its format, and that an action of the fixed
    /// minimum requires approval. It cannot know the policy in force: the
    /// controller checks [`Plan::terms`] against it before approve and
    /// execute.
    pub fn from_stored(body: &str) -> Result<Plan, Refusal> {
        let corrupt = || {
            Refusal::new(
                Code::PlanCorrupt,
                "The stored plan does not match its digest; inspect the state database.",
            )
        };
        let plan: Plan = serde_json::from_str(body).map_err(|_| corrupt())?;
        if plan.compute_digest() != plan.digest
            || plan.payload.action() != plan.action
            || (plan.action.always_requires_approval() && !plan.requires_approval)
            || plan.format != PLAN_FORMAT
        {
            return Err(corrupt());
        }
        Ok(plan)
    }

    pub fn canonical_json(&self) -> String {
        canonical::to_string(self).expect("plan serializes")
    }
}

/// A small sealed `remove_image` plan, for the tests of this module and of
/// the store (one definition, so both test the same shape).
#[cfg(test)]
pub(crate) fn test_plan(id: PlanId, created_at: i64) -> Plan {
    let image = ImageId::parse(&format!("sha256:{}", "c".repeat(64))).expect("a valid image id");
    Plan::seal(
        id,
        serde_json::json!({"image_id": image.as_str()}),
        Payload::RemoveImage { image_id: image, used_by: vec![] },
        Impact {
            target: "image".into(),
            containers_touched: vec![],
            data_volumes_deleted: false,
            shared_nginx_changed: false,
            rollback: "none".into(),
        },
        "d".repeat(64),
        Terms { policy_hash: "e".repeat(64), requires_approval: true, ttl_seconds: 600 },
        "agent".into(),
        created_at,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Plan {
        test_plan(PlanId::parse(&"1".repeat(32)).unwrap(), 1_000)
    }

    #[test]
    fn digest_covers_every_field_but_itself() {
        let plan = sample();
        assert_eq!(plan.compute_digest(), plan.digest);
        assert_eq!(plan.expires_at, 1_600);
        assert!(plan.requires_approval);
        let mut changed = plan.clone();
        changed.requester = "root".into();
        assert_ne!(changed.compute_digest(), plan.digest);
        let mut changed = plan.clone();
        changed.expires_at += 1;
        assert_ne!(changed.compute_digest(), plan.digest);
    }

    #[test]
    fn stored_body_roundtrips_and_tampering_is_caught() {
        let plan = sample();
        let body = plan.canonical_json();
        assert_eq!(Plan::from_stored(&body).unwrap(), plan);
        let tampered = body.replace("\"agent\"", "\"alice\"");
        assert_eq!(Plan::from_stored(&tampered).unwrap_err().code, Code::PlanCorrupt);
        let extra = body.replacen('{', "{\"approved\":true,", 1);
        assert_eq!(Plan::from_stored(&extra).unwrap_err().code, Code::PlanCorrupt);
        // A remove_image that claims to need no approval, re-sealed so the
        // digest matches: the fixed minimum is checked on every load.
        let mut unapproved = plan.clone();
        unapproved.requires_approval = false;
        unapproved.digest = unapproved.compute_digest();
        assert_eq!(Plan::from_stored(&unapproved.canonical_json()).unwrap_err().code, Code::PlanCorrupt);
    }

    #[test]
    fn stop_and_remove_image_always_need_approval() {
        assert!(!Action::Deploy.always_requires_approval());
        assert!(!Action::NginxConfig.always_requires_approval());
        assert!(Action::Stop.always_requires_approval());
        assert!(Action::RemoveImage.always_requires_approval());
        assert!(Action::RemoveApp.always_requires_approval());
        assert!(Action::Start.always_requires_approval());
        assert!(Action::Update.always_requires_approval());
        assert!(Action::Restart.always_requires_approval());
        assert!(Action::Rollback.always_requires_approval());
        assert_eq!(Action::parse("shell").unwrap_err().code, Code::UnknownAction);
        assert_eq!(Action::parse("nginx_config").unwrap(), Action::NginxConfig);
    }

    #[test]
    fn action_strings_are_the_shipped_ones_and_serde_agrees() {
        let strings: Vec<&str> = Action::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(
            strings,
            [
                "deploy",
                "nginx_config",
                "stop",
                "remove_image",
                "remove_app",
                "start",
                "update",
                "restart",
                "rollback"
            ]
        );
        for &action in Action::ALL {
            assert_eq!(serde_json::to_value(action).unwrap(), action.as_str());
            assert_eq!(serde_json::from_value::<Action>(action.as_str().into()).unwrap(), action);
            assert_eq!(Action::parse(action.as_str()).unwrap(), action);
        }
        assert!(Action::parse("Deploy").is_err() && Action::parse("nginx-config").is_err());
    }
}
