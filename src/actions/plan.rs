//! Plans: the sealed body (an action's payload, see `super::Payload`, the
//! parameters it was derived from, the impact summary, the terms) and the
//! digest that binds them (its id and digest types are
//! `crate::vocab::{PlanId, Digest}`). Pure.
//!
//! Security invariant: a plan is immutable once stored. Its `digest` is the
//! sha256 of the canonical JSON of every other field, the operator approves
//! that digest, and execution re-computes it from the stored body, so a
//! changed byte anywhere is refused (`plan_corrupt`), not executed.
//! The mutable life cycle (state, approval, claim) lives beside the body in
//! the store and is deliberately outside the digest.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Payload;
use super::action::Impact;
use crate::control::canonical;
use crate::control::policy::Terms;
use crate::vocab::{Action, Code, Digest, PlanId, Refusal};

/// The version of the plan body format; part of the digest.
pub const PLAN_FORMAT: u32 = 1;

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
    let image =
        crate::vocab::ImageId::parse(&format!("sha256:{}", "c".repeat(64))).expect("a valid image id");
    Plan::seal(
        id,
        serde_json::json!({"image_id": image.as_str()}),
        Payload::RemoveImage(super::RemoveImage { image_id: image, used_by: vec![] }),
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
        assert!(Action::RunTask.always_requires_approval());
        // A backup only reads the app's data: the policy may add it.
        assert!(!Action::Backup.always_requires_approval());
        assert!(Action::Restore.always_requires_approval());
        // Making an app public, and taking it off, is the operator's review.
        assert!(Action::Expose.always_requires_approval());
        assert!(Action::Unexpose.always_requires_approval());
        // A new image may convert an accessory's data, which no rollback undoes.
        assert!(Action::UpdateAccessory.always_requires_approval());
        assert!(Action::RotateCredential.always_requires_approval());
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
                "rollback",
                "run_task",
                "backup",
                "restore",
                "expose",
                "unexpose",
                "update_accessory",
                "rotate_credential"
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
