//! Every request of this build against helpers of the protocols around
//! this one, built from the same source (`Helper` is the switch), and the
//! helper's rule for older and newer workstations.

use serde_json::json;

use super::{
    ALSO_SERVER_NAMES, Action, Code, Feature, Helper, HelperVersion, PROTOCOL_VERSION, RELEASES, Request,
    RequestId, ServerVersion, admit, features, first_release, may_send,
};
use crate::wire::{ContainerRole, parse_envelope, parse_envelope_as};

/// One request of every kind the workstation sends: each operation, each
/// action with all its parameters, logs with and without since_minutes.
fn every_request() -> Vec<Request> {
    let mut all = vec![Request::GatewayStatus {}, Request::Inventory {}];
    for action in Action::ALL {
        let parameters = action.parameters().iter().map(|name| (name.to_string(), json!("x"))).collect();
        all.push(Request::plan(*action, parameters));
    }
    all.push(Request::Execute { plan_id: "0".repeat(32) });
    all.push(Request::logs("web", ContainerRole::App, 5, None));
    all.push(Request::logs("web", ContainerRole::Gateway, 5, Some(30)));
    all.push(Request::logs("web", crate::wire::LogContainer::parse("db").unwrap(), 5, None));
    all
}

fn server(protocol: u32) -> ServerVersion {
    ServerVersion::Known(HelperVersion { version: format!("9.{protocol}.0"), protocol })
}

fn helper(protocol: u32) -> Helper {
    Helper { protocol, oldest_client: 1 }
}

/// Tried: every request against a helper one protocol older and one newer
/// than what it needs, and every protocol up to one past this build's, with
/// and without a request id. What the workstation may send, that helper
/// reads as the same request; what it may not, `may_send` refuses.
#[test]
fn every_request_meets_the_helpers_of_the_protocols_around_it() {
    let id = RequestId::parse("req-1").unwrap();
    for request in every_request() {
        for protocol in 1..=PROTOCOL_VERSION + 1 {
            for id in [None, Some(&id)] {
                let server = server(protocol);
                if may_send(request.needs(), &server, "web-1").is_err() {
                    assert!(request.needs() > protocol, "{request:?} refused for protocol {protocol}");
                    continue;
                }
                let bytes = request.to_bytes_for(id, &server);
                let (read, read_id) = parse_envelope_as(&bytes, helper(protocol))
                    .unwrap_or_else(|r| panic!("protocol {protocol} misread {request:?}: {r:?}"));
                assert_eq!((read, read_id.as_ref()), (request.clone(), id));
                let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                assert_eq!(value.get("protocol").is_some(), protocol >= 2, "{value}");
            }
        }
        // A feature switched on one protocol later than it came: the helper
        // before it refuses what it would not know, the workstation never
        // sends it there.
        for feature in features(&request) {
            assert!(Helper { protocol: feature.since(), oldest_client: 1 }.knows(feature).is_ok());
            assert!(Helper { protocol: feature.since() - 1, oldest_client: 1 }.knows(feature).is_err());
            let older = server(feature.since() - 1);
            assert_eq!(may_send(feature.since(), &older, "web-1").unwrap_err().code, Code::ServerTooOld);
        }
    }
}

/// Tried: the bytes for a protocol-2 server read by a protocol-1 helper
/// (0.1.0 refused unknown fields): why a server that named no protocol is
/// sent exactly protocol 1's bytes.
#[test]
fn a_helper_of_protocol_1_refuses_the_protocol_field_as_0_1_0_did() {
    let bytes = Request::Inventory {}.to_bytes_for(None, &server(2));
    assert_eq!(bytes, br#"{"operation":"inventory","protocol":2}"#);
    assert_eq!(parse_envelope_as(&bytes, helper(1)).unwrap_err().code, Code::InvalidRequest);
    assert_eq!(parse_envelope(&bytes).unwrap().0, Request::Inventory {});
    for unknown in [ServerVersion::Unknown, ServerVersion::NoGate, ServerVersion::Before020] {
        assert_eq!(Request::Inventory {}.to_bytes_for(None, &unknown), br#"{"operation":"inventory"}"#);
    }
}

/// Tried: an older workstation (no protocol field) and a newer one against
/// this helper, and against a newer one that retired protocol 1.
#[test]
fn a_newer_helper_answers_the_old_protocol_or_refuses_client_too_old() {
    assert_eq!(admit(None, Helper::THIS), Ok(1));
    assert_eq!(admit(Some(PROTOCOL_VERSION), Helper::THIS), Ok(PROTOCOL_VERSION));
    let newer = parse_envelope(
        format!(r#"{{"operation":"inventory","protocol":{}}}"#, PROTOCOL_VERSION + 1).as_bytes(),
    )
    .unwrap_err();
    assert_eq!(newer.code, Code::ServerTooOld);
    assert!(newer.message.contains(env!("CARGO_PKG_VERSION")), "{}", newer.message);
    // A helper one protocol newer still answers every request of this one.
    for request in every_request() {
        let bytes = request.to_bytes_for(None, &server(PROTOCOL_VERSION + 1));
        assert_eq!(parse_envelope_as(&bytes, helper(PROTOCOL_VERSION + 1)).unwrap().0, request);
    }
    // One that retired this protocol refuses it, the request's shape aside.
    let retired = Helper { protocol: PROTOCOL_VERSION + 1, oldest_client: PROTOCOL_VERSION + 1 };
    for bytes in [
        &br#"{"operation":"inventory"}"#[..],
        &Request::Inventory {}.to_bytes_for(None, &server(PROTOCOL_VERSION)),
    ] {
        let old = parse_envelope_as(bytes, retired).unwrap_err();
        assert_eq!(old.code, Code::ClientTooOld);
        assert!(old.message.contains("Upgrade the workstation's volce-lab"), "{}", old.message);
    }
    assert_eq!(first_release(1), "0.1.0");
    assert_eq!(RELEASES.last().unwrap(), &(PROTOCOL_VERSION, env!("CARGO_PKG_VERSION")));
}

/// Tried: the protocols a forged request named in the attack of issue 38
/// (0, 3 and 999): no message names an upgrade that would not help.
#[test]
fn a_protocol_no_release_speaks_is_refused_without_a_false_upgrade() {
    for future in [PROTOCOL_VERSION + 1, 999] {
        let refusal = admit(Some(future), Helper::THIS).unwrap_err();
        assert_eq!(refusal.code, Code::ServerTooOld);
        assert!(
            refusal.message.contains(&format!("the request is protocol {future};")),
            "{}",
            refusal.message
        );
        assert!(refusal.message.contains("No release this server knows of speaks it"), "{}", refusal.message);
        let release = format!("to volce-lab {} or later", env!("CARGO_PKG_VERSION"));
        assert!(!refusal.message.contains(&release), "{}", refusal.message);
    }
    let zero = admit(Some(0), Helper::THIS).unwrap_err();
    assert_eq!(zero.code, Code::ClientTooOld);
    assert!(zero.message.contains("protocol 0, which no volce-lab ever spoke"), "{}", zero.message);
    assert!(!zero.message.contains("Upgrade"), "{}", zero.message);
    // A known protocol still names the release that speaks it.
    let old = Helper { protocol: 1, oldest_client: 1 };
    let refusal = admit(Some(2), old).unwrap_err();
    assert!(
        refusal.message.contains("Upgrade the server's package to volce-lab 0.2.0 or later"),
        "{}",
        refusal.message
    );
}

/// Tried: a deploy and an nginx_config with `also_server_names`
/// (issue 25), against a protocol-1 server (`server_too_old`, nothing
/// sent) and helper (`invalid_parameters`: it never serves one name
/// where the plan asked for more), and both without the list.
#[test]
fn more_server_names_need_protocol_2_and_one_name_needs_protocol_1() {
    let plan = |action: Action, keys: &[&str]| {
        let parameters: serde_json::Map<String, serde_json::Value> =
            keys.iter().map(|k| (k.to_string(), serde_json::json!(8080))).collect();
        Request::plan(action, parameters)
    };
    let old = Helper { protocol: 1, oldest_client: 1 };
    for (action, keys) in [
        (Action::Deploy, &["app", "image", "host_port", "container_port", "server_name"][..]),
        (Action::NginxConfig, &["app", "server_name"][..]),
    ] {
        assert_eq!(plan(action, keys).needs(), 1, "{action:?} with one name");
        let with = plan(action, &[keys, &[ALSO_SERVER_NAMES]].concat());
        assert_eq!(with.needs(), 2, "{action:?}");
        let refusal = may_send(with.needs(), &ServerVersion::Before020, "web-1").unwrap_err();
        assert_eq!(refusal.code, Code::ServerTooOld);
        assert_eq!(old.knows(Feature::Parameter(action, ALSO_SERVER_NAMES)), Err(Code::InvalidParameters));
        assert!(may_send(with.needs(), &server(2), "web-1").is_ok());
    }
}
