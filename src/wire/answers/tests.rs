//! The answer types on their own: each written as version 1's JSON and read
//! back, and read the way the workstation must read them from older and
//! newer helpers. The bodies the helper actually builds are held to golden
//! files by tests/hermetic/wire_answers.rs.

use serde_json::json;
use strum::VariantArray as _;

use super::app_state::{Drift, DriftReason, EngineState};
use super::gateways::{Gateway, GatewayStatus};
use super::*;
use crate::wire::ContainerRole;

/// `value` is written as `golden` and reads back as itself.
fn round_trips<T>(value: &T, golden: Value)
where
    T: Serialize + for<'de> Deserialize<'de> + PartialEq + std::fmt::Debug,
{
    assert_eq!(serde_json::to_value(value).unwrap(), golden);
    assert_eq!(&serde_json::from_value::<T>(golden).unwrap(), value);
}

#[test]
fn words_travel_as_their_names_and_unknown_ones_are_kept() {
    for state in EngineState::VARIANTS {
        round_trips(&Open::Known(*state), json!(state.as_str()));
    }
    for reason in DriftReason::VARIANTS {
        round_trips(&Open::Known(*reason), json!(reason.as_str()));
    }
    for role in ContainerRole::VARIANTS {
        round_trips(role, json!(role.as_str()));
    }
    let other: Open<EngineState> = Open::Other("restarting".into());
    round_trips(&other, json!("restarting"));
    assert_eq!(other.as_str(), "restarting");
}

#[test]
fn a_gateway_is_version_1_json() {
    let status = GatewayStatus {
        gateways: vec![
            Gateway {
                app: "demo".into(),
                name: "vl-demo-gateway".into(),
                state: EngineState::Running.into(),
                container_state: "running".into(),
                stopped_on_purpose: false,
                answers: Some(true),
                drift: None,
            },
            Gateway {
                app: "gone".into(),
                name: "vl-gone-gateway".into(),
                state: EngineState::Drifted.into(),
                container_state: "missing".into(),
                stopped_on_purpose: false,
                answers: None,
                drift: Some(Drift::of(DriftReason::ContainersMissing)),
            },
        ],
    };
    round_trips(
        &status,
        json!({"gateways": [
            {"app": "demo", "name": "vl-demo-gateway", "state": "running", "container_state": "running",
             "stopped_on_purpose": false, "answers": true, "drift": null},
            {"app": "gone", "name": "vl-gone-gateway", "state": "drifted", "container_state": "missing",
             "stopped_on_purpose": false, "answers": null, "drift": {
                "reason": "containers_missing",
                "message": DriftReason::ContainersMissing.sentence(),
                "fix": DriftReason::ContainersMissing.fix(),
             }},
        ]}),
    );
}

/// A helper from before drift sent a name, an app and docker's word; the
/// workstation still reads it, judged by the word alone.
#[test]
fn a_gateway_from_a_helper_before_drift_reads_with_defaults() {
    let old: Gateway =
        serde_json::from_value(json!({"name": "vl-a-gateway", "app": "a", "state": "exited"})).unwrap();
    assert_eq!(old.state, Open::Other("exited".into()));
    assert_eq!((old.app.as_str(), old.name.as_str()), ("a", "vl-a-gateway"));
    assert_eq!((old.stopped_on_purpose, old.answers, old.drift), (false, None, None));
    let bare: Gateway = serde_json::from_value(json!({"state": "running"})).unwrap();
    assert_eq!(bare.state, EngineState::Running.into());
    assert!(bare.app.is_empty() && bare.container_state.is_empty());
}

/// A newer helper may add fields and reasons: neither makes the answer unreadable.
#[test]
fn a_gateway_from_a_newer_helper_keeps_what_this_build_does_not_know() {
    let newer: GatewayStatus = serde_json::from_value(json!({
        "gateways": [{"app": "a", "state": "drifted", "drift": {"reason": "certificate_expired", "message": "m",
                      "fix": "f", "since": 3}, "tls": true}],
        "generated_at": "2027-01-15T08:00:00Z",
    }))
    .unwrap();
    let drift = newer.gateways[0].drift.clone().unwrap();
    assert_eq!(drift.reason, Open::Other("certificate_expired".into()));
    assert_eq!(drift.reason.as_str(), "certificate_expired");
}
