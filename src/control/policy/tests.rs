//! The policy loader: good policies, and every bad key refused by name.

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
fn plan_ttl_seconds_defaults_to_600_and_is_refused_outside_60_to_3600_naming_the_key() {
    assert_eq!(sample_policy().plan_ttl_seconds, 600);
    assert_eq!(sample_policy().terms(Action::Stop, "h").ttl_seconds, 600);
    assert_eq!(with(|v| v["plan_ttl_seconds"] = json!(60)).unwrap().plan_ttl_seconds, 60);
    assert_eq!(with(|v| v["plan_ttl_seconds"] = json!(3600)).unwrap().plan_ttl_seconds, 3600);
    // Tried: one below, one above, a string, a float, a negative, a boolean, null.
    for bad in [json!(59), json!(3601), json!("600"), json!(600.0), json!(-1), json!(true), Value::Null] {
        let error = with(|v| v["plan_ttl_seconds"] = bad.clone()).unwrap_err();
        assert!(error.0.contains("plan_ttl_seconds") && error.0.contains("60 to 3600"), "{bad}: {error}");
    }
}

#[test]
fn approval_required_keeps_the_fixed_minimum_and_accepts_only_additions() {
    let minimum = sample_policy();
    assert_eq!(
        minimum.approval_required,
        [Action::Stop, Action::RemoveImage, Action::RemoveApp, Action::Start, Action::Update]
    );
    let all = with(|v| {
        v["approval_required"] =
            json!(["nginx_config", "remove_image", "update", "deploy", "stop", "start", "remove_app"])
    })
    .unwrap();
    assert_eq!(all.approval_required, Action::ALL, "kept in one order, whatever was written");
    assert!(all.terms(Action::Deploy, "h").requires_approval);
    assert!(!minimum.terms(Action::Deploy, "h").requires_approval);
    // A list that leaves fixed actions out still requires them: the policy
    // of a helper from before start and update joined the minimum, an empty
    // list, and a list naming only an addition.
    for partial in [
        json!(["stop", "remove_image", "remove_app"]),
        json!([]),
        json!(["deploy"]),
        json!(["remove_image", "remove_app", "start", "update"]),
    ] {
        let policy = with(|v| v["approval_required"] = partial.clone()).unwrap();
        for action in [Action::Stop, Action::RemoveImage, Action::RemoveApp, Action::Start, Action::Update] {
            assert!(policy.terms(action, "h").requires_approval, "{partial}: {action:?}");
        }
        assert_eq!(
            policy.terms(Action::Deploy, "h").requires_approval,
            partial == json!(["deploy"]),
            "{partial}"
        );
    }
    // Tried: an unknown action, a repeat, a string instead of a list, a number.
    for (bad, words) in [
        (
            json!(["stop", "remove_image", "remove_app", "start", "update", "shell"]),
            "\"shell\" is not an action",
        ),
        (json!(["stop", "remove_image", "remove_app", "start", "update", "stop"]), "lists stop twice"),
        (json!("stop"), "must be a list"),
        (json!(["stop", "remove_image", "remove_app", "start", "update", 1]), "1 is not an action"),
    ] {
        let error = with(|v| v["approval_required"] = bad.clone()).unwrap_err();
        assert!(error.0.contains("approval_required") && error.0.contains(words), "{bad}: {error}");
    }
}

#[test]
fn the_new_keys_at_their_defaults_do_not_change_the_hash() {
    let explicit = with(|v| {
        v["plan_ttl_seconds"] = json!(600);
        v["approval_required"] = json!(["update", "remove_app", "start", "remove_image", "stop"]);
    })
    .unwrap();
    assert_eq!(explicit.hash(), sample_policy().hash(), "plans made before the keys existed stay valid");
    assert_ne!(with(|v| v["plan_ttl_seconds"] = json!(601)).unwrap().hash(), sample_policy().hash());
    let deploy = with(|v| {
        v["approval_required"] = json!(["stop", "remove_image", "remove_app", "start", "update", "deploy"])
    })
    .unwrap();
    assert_ne!(deploy.hash(), sample_policy().hash());
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
