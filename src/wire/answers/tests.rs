//! The answer types on their own: each written as version 1's JSON and read
//! back, and read the way the workstation must read them from older and
//! newer helpers. The bodies the helper actually builds are held to golden
//! files by tests/hermetic/wire_answers.rs.

use serde_json::json;
use strum::VariantArray as _;

use super::app_state::{Drift, DriftReason, EngineState};
use super::gateways::{Gateway, GatewayStatus};
use super::*;
use crate::vocab::{PlanId, PlanOutcome, PlanState};
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
                stopped_by: None,
                answers: Some(true),
                drift: None,
                https: Vec::new(),
                acme_error: None,
            },
            Gateway {
                app: "gone".into(),
                name: "vl-gone-gateway".into(),
                state: EngineState::Drifted.into(),
                container_state: "missing".into(),
                stopped_on_purpose: false,
                stopped_by: None,
                answers: None,
                drift: Some(Drift::of(DriftReason::ContainersMissing)),
                https: Vec::new(),
                acme_error: None,
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

#[test]
fn an_inventory_is_version_1_json() {
    use super::inventory::*;
    use crate::control::app_record::AppState;
    use crate::vocab::Action;
    use crate::vocab::{AppName, ContainerId, ImageId, PlanId};
    let id = PlanId::parse(&"1".repeat(32)).unwrap();
    let container = ContainerId::parse(&"2".repeat(64)).unwrap();
    let image = ImageId::parse(&format!("sha256:{}", "3".repeat(64))).unwrap();
    let reference = format!("127.0.0.1:15000/web@sha256:{}", "4".repeat(64));
    let inventory = Inventory {
        generated_at: "2027-01-15T08:00:00Z".into(),
        apps: vec![ManagedApp {
            app: AppName::parse("demo").unwrap(),
            state: EngineState::Drifted,
            recorded_state: AppState::Running,
            drift: Some(Drift::of(DriftReason::ContainersMissing)),
            server_name: crate::vocab::ServerName::parse("demo.example.com").unwrap(),
            also_server_names: vec![],
            host_port: 18001,
            container_port: 8080,
            image: AppImage {
                key: "web".into(),
                reference: crate::vocab::ImageRef::parse(&reference).unwrap(),
                digest: Some(format!("sha256:{}", "4".repeat(64))),
                image_ids: vec![image.clone()],
            },
            containers: vec![super::app_state::ContainerView {
                role: ContainerRole::App,
                id: container.clone(),
                state: "missing".into(),
            }],
            last_plan: Some(LastPlan {
                plan_id: id.clone(),
                action: Action::Deploy,
                state: PlanState::Completed.into(),
                outcome: Some(PlanOutcome::Completed.into()),
                requested_at: "2027-01-15T07:00:00Z".into(),
                finished_at: None,
            }),
            kept_versions: vec![],
            data: None,
            acme_error: None,
            exposed: vec![],
            accessories: vec![super::inventory::AccessoryView {
                name: crate::vocab::AccessoryName::parse("db").unwrap(),
                image: crate::vocab::ImageRef::parse(&reference).unwrap(),
                policy_image: None,
                container: None,
                state: "missing".into(),
                data: super::inventory::DataView {
                    path: crate::vocab::DataPath::parse("/srv/pgdata").unwrap(),
                    max_mib: 128,
                    mounted: false,
                    backup: None,
                },
            }],
        }],
        offer: Offer {
            catalog: vec![CatalogImage {
                key: "web".into(),
                reference: crate::vocab::ImageRef::parse(&reference).unwrap(),
                present: true,
                image_id: Some(image.clone()),
                container_port: Some(8080),
                health_path: crate::vocab::HealthPath::parse("/healthz").unwrap(),
                has_configuration: false,
                has_data: false,
                tasks: Vec::new(),
                accessories: vec![crate::vocab::AccessoryName::parse("db").unwrap()],
            }],
            gateway_image: GatewayImage {
                reference: crate::vocab::ImageRef::parse(&reference).unwrap(),
                present: false,
                image_id: None,
            },
            ports: PortOffer {
                first: 18000,
                last: 18002,
                used: vec![PortUse { port: 18001, app: AppName::parse("demo").unwrap() }],
                taken_by_others: 1,
                free_count: 1,
                free: vec![[18000, 18000]],
                free_ranges_truncated: false,
            },
            quota: Quota { used: 1, max: 4 },
            plan_ttl_seconds: 600,
            actions: vec![Action::Deploy, Action::Stop],
            approval_required: vec![Action::Stop],
            gateway_access_log: false,
        },
        plans: vec![OpenPlan {
            plan_id: id.clone(),
            action: Action::RemoveImage,
            app: None,
            state: PlanState::Pending.into(),
            requester: "agent".into(),
            requested_at: "2027-01-15T08:00:00Z".into(),
            expires_at: "2027-01-15T08:10:00Z".into(),
            requires_approval: true,
            approved: false,
        }],
        unsettled_plan: None,
        foreign: ForeignCounts { containers: 3, images: 2, networks: 1 },
        helper: Some(HelperVersion { version: "0.2.0".into(), protocol: 2 }),
    };
    round_trips(
        &inventory,
        json!({
            "generated_at": "2027-01-15T08:00:00Z",
            "apps": [{
                "app": "demo", "state": "drifted", "recorded_state": "running",
                "drift": {"reason": "containers_missing", "message": DriftReason::ContainersMissing.sentence(),
                          "fix": DriftReason::ContainersMissing.fix()},
                "server_name": "demo.example.com", "host_port": 18001, "container_port": 8080,
                "image": {"key": "web", "reference": reference, "digest": format!("sha256:{}", "4".repeat(64)),
                          "image_ids": [image]},
                "containers": [{"role": "app", "id": container, "state": "missing"}],
                "last_plan": {"plan_id": id, "action": "deploy", "state": "completed", "outcome": "completed",
                              "requested_at": "2027-01-15T07:00:00Z", "finished_at": null},
                "kept_versions": [],
                "accessories": [{"name": "db", "image": reference, "container": null, "state": "missing",
                                 "data": {"path": "/srv/pgdata", "max_mib": 128, "mounted": false}}],
            }],
            "offer": {
                "catalog": [{"key": "web", "reference": reference, "present": true, "image_id": image,
                             "container_port": 8080, "health_path": "/healthz",
                             "has_configuration": false, "has_data": false, "accessories": ["db"]}],
                "gateway_image": {"reference": reference, "present": false, "image_id": null},
                "ports": {"first": 18000, "last": 18002, "used": [{"port": 18001, "app": "demo"}],
                          "taken_by_others": 1, "free_count": 1, "free": [[18000, 18000]],
                          "free_ranges_truncated": false},
                "quota": {"used": 1, "max": 4},
                "plan_ttl_seconds": 600,
                "actions": ["deploy", "stop"],
                "approval_required": ["stop"], "gateway_access_log": false,
            },
            "plans": [{"plan_id": id, "action": "remove_image", "app": null, "state": "pending",
                       "requester": "agent", "requested_at": "2027-01-15T08:00:00Z",
                       "expires_at": "2027-01-15T08:10:00Z", "requires_approval": true, "approved": false}],
            "unsettled_plan": null,
            "foreign": {"containers": 3, "images": 2, "networks": 1},
            "helper": {"version": "0.2.0", "protocol": 2},
        }),
    );
}

/// The view names every field of the sealed plan (a field added to the plan
/// reaches `show --json` and the agent), its times in RFC 3339, and the life
/// cycle beside them; never the claim.
#[test]
fn a_plan_view_has_every_field_of_the_sealed_plan_and_its_life_cycle() {
    use super::plan_view::PlanView;
    use crate::actions::plan::test_plan;
    use crate::store::{Approval, Claim, Rejection, StoredPlan};
    use crate::vocab::{PlanOutcome, PlanState};
    let plan = test_plan(PlanId::parse(&"1".repeat(32)).unwrap(), 1_800_000_000);
    let stored = StoredPlan {
        plan: plan.clone(),
        state: PlanState::Completed,
        approval: Some(Approval { by: "alice".into(), at: 1_800_000_060, digest: plan.digest.clone() }),
        claim: Some(Claim { pid: 7, start_time: 1, boot_id: "boot".into() }),
        claimed_at: Some(1_800_000_120),
        finished_at: Some(1_800_000_180),
        outcome: Some(PlanOutcome::Completed),
        resolution: None,
        rejection: Some(Rejection { by: "bob".into(), at: 1_800_000_240, reason: None }),
        failure: Some(crate::vocab::Refusal::new(
            crate::vocab::Code::HealthCheckFailed,
            "It did not answer.",
        )),
        alerted: None,
        app_log: None,
    };
    let view = serde_json::to_value(stored.view()).unwrap();
    let body = serde_json::to_value(&plan).unwrap();
    for (key, value) in body.as_object().unwrap() {
        let expected = match key.as_str() {
            "created_at" | "expires_at" => json!(crate::text::rfc3339_seconds(value.as_i64().unwrap())),
            _ => value.clone(),
        };
        assert_eq!(view[key], expected, "{key}");
    }
    let beside: Vec<&str> =
        view.as_object().unwrap().keys().map(String::as_str).filter(|key| body.get(*key).is_none()).collect();
    assert_eq!(
        beside,
        ["approval", "claimed_at", "failure", "finished_at", "outcome", "rejection", "resolution", "state"]
    );
    assert_eq!(view["created_at"], "2027-01-15T08:00:00Z");
    assert_eq!(view["approval"], json!({"by": "alice", "at": "2027-01-15T08:01:00Z", "digest": plan.digest}));
    assert_eq!(view["claimed_at"], "2027-01-15T08:02:00Z");
    assert_eq!((view["state"].clone(), view["outcome"].clone()), (json!("completed"), json!("completed")));
    assert_eq!(view["resolution"], Value::Null);
    assert_eq!(view["rejection"], json!({"by": "bob", "at": "2027-01-15T08:04:00Z", "reason": null}));
    assert_eq!(view["failure"], json!({"code": "health_check_failed", "message": "It did not answer."}));
    round_trips(&stored.view(), view.clone());
    let _: PlanView = serde_json::from_value(view).unwrap();
}

/// The workstation finds the plan an answer names through the same field
/// names and types the helper writes: an execution's `plan_id`, a plan
/// view's `id`, each read only from its own operation's answer.
#[test]
fn the_plan_an_answer_names_is_read_from_the_types_the_helper_writes() {
    use super::execution::{ExecutedPlan, ExecutionOutcome};
    use super::read::Read;
    use crate::actions::plan::test_plan;
    use crate::store::StoredPlan;
    use crate::vocab::Action;
    use crate::wire::Operation;
    let id = PlanId::parse(&"5".repeat(32)).unwrap();
    let executed = ExecutedPlan {
        plan_id: id.clone(),
        action: Action::Stop,
        outcome: ExecutionOutcome::Completed,
        app: Some("demo".into()),
        containers: vec!["a".into()],
        duration_ms: 12,
        data: None,
        task: None,
        backup: None,
        restore: None,
    };
    round_trips(
        &executed,
        json!({"plan_id": id, "action": "stop", "outcome": "completed", "app": "demo", "containers": ["a"],
               "duration_ms": 12}),
    );
    let executed = serde_json::to_value(&executed).unwrap();
    assert_eq!(Read::of(Operation::Execute, &executed).plan_id(), Some(&id));
    let view =
        serde_json::to_value(StoredPlan::pending(test_plan(id.clone(), 1_800_000_000)).view()).unwrap();
    assert_eq!(Read::of(Operation::Plan, &view).plan_id(), Some(&id));
    // Each operation's own field only; a field that is no plan id names no plan.
    assert_eq!(Read::of(Operation::Plan, &executed), Read::Nothing);
    assert_eq!(Read::of(Operation::Execute, &view), Read::Nothing);
    assert_eq!(Read::of(Operation::Inventory, &view), Read::Nothing);
    let valid = id.as_str().to_owned();
    // A newer helper's fields around it change nothing.
    assert_eq!(Read::of(Operation::Plan, &json!({"id": valid, "n": 1})).plan_id(), Some(&id));
    assert_eq!(Read::of(Operation::Plan, &json!({"id": "not-a-plan"})), Read::Nothing);
    assert_eq!(Read::of(Operation::Execute, &json!({"plan_id": null})), Read::Nothing);
    assert_eq!(Read::of(Operation::Execute, &json!({"plan_id": 5})), Read::Nothing);
    assert_eq!(Read::of(Operation::Logs, &json!({"plan_id": valid})), Read::Nothing);
    assert_eq!(Read::of(Operation::Plan, &json!({})), Read::Nothing);
    assert_eq!(Read::of(Operation::Plan, &json!([])), Read::Nothing);
}

/// The approval wait reads an inventory's open plans through `OpenPlan`,
/// each expiry read as a time once; a list it cannot read lists nothing.
#[test]
fn an_inventorys_open_plans_are_read_with_their_expiry() {
    use super::inventory::OpenPlan;
    use super::read::Read;
    use crate::vocab::Action;
    use crate::wire::Operation;
    let id = PlanId::parse(&"6".repeat(32)).unwrap();
    let plan = OpenPlan {
        plan_id: id.clone(),
        action: Action::Stop,
        app: Some("shop".into()),
        state: PlanState::Pending.into(),
        requester: "agent".into(),
        requested_at: "2026-12-02T05:00:00Z".into(),
        expires_at: "2099-01-01T00:00:00Z".into(),
        requires_approval: true,
        approved: false,
    };
    let inventory = json!({"generated_at": "x", "plans": [plan], "from_a_newer_helper": 1});
    let read = Read::of(Operation::Inventory, &inventory);
    let listed = read.open_plan(&id).expect("listed");
    assert_eq!(listed.plan, plan);
    assert_eq!(listed.expires, Some(humantime::parse_rfc3339("2099-01-01T00:00:00Z").unwrap()));
    let mut bad_time = plan.clone();
    bad_time.expires_at = "soon".into();
    let read = Read::of(Operation::Inventory, &json!({"plans": [bad_time]}));
    assert_eq!(read.open_plan(&id).map(|listed| listed.expires), Some(None));
    // A newer helper's plan with an action this build does not know is
    // left out; the plan beside it is still found.
    let mut newer = serde_json::to_value(&plan).unwrap();
    newer["action"] = json!("an_action_from_a_newer_helper");
    newer["plan_id"] = json!("7".repeat(32));
    let read = Read::of(Operation::Inventory, &json!({"plans": [newer, plan]}));
    assert_eq!(read.open_plan(&id).map(|listed| &listed.plan), Some(&plan));
    assert_eq!(read.open_plan(&PlanId::parse(&"7".repeat(32)).unwrap()), None);
    assert_eq!(Read::of(Operation::Inventory, &json!({"plans": [{"plan_id": id}]})).open_plan(&id), None);
    assert_eq!(Read::of(Operation::Inventory, &json!({"plans": {}})), Read::Nothing);
    assert_eq!(Read::of(Operation::Inventory, &json!({"apps": []})), Read::Nothing);
}

#[test]
fn log_lines_are_version_1_json() {
    use super::log_lines::LogLines;
    use crate::vocab::{AppName, ContainerId};
    let id = ContainerId::parse(&"6".repeat(64)).unwrap();
    let lines = LogLines {
        app: AppName::parse("demo").unwrap(),
        container: ContainerRole::Gateway.into(),
        container_id: id.clone(),
        tail: 50,
        since_minutes: None,
        untrusted: crate::logs::UNTRUSTED.into(),
        lines: vec!["t1 GET / 200".into()],
        truncated: false,
        redactions: 0,
    };
    round_trips(
        &lines,
        json!({"app": "demo", "container": "gateway", "container_id": id, "tail": 50, "since_minutes": null,
               "untrusted": crate::logs::UNTRUSTED, "lines": ["t1 GET / 200"], "truncated": false,
               "redactions": 0}),
    );
}

/// A body travels under its own operation's name, and its reply parses back.
#[test]
fn a_body_names_its_operation_in_its_reply() {
    use crate::wire::Operation;
    let body = Body::GatewayStatus(GatewayStatus { gateways: vec![] });
    assert_eq!(body.operation(), Operation::GatewayStatus);
    let reply = Reply::from(body);
    assert_eq!(reply, Reply::Ok { operation: Operation::GatewayStatus, result: json!({"gateways": []}) });
    assert_eq!(Reply::parse(reply.to_line().as_bytes()).unwrap(), reply);
}

/// Tried: a catalog entry as a helper from before catalog objects writes it
/// (no port, no health path, no configuration or data flags): it reads as
/// an entry the agent names the port for, checked at `/`.
#[test]
fn an_older_helpers_catalog_entry_reads_with_the_defaults() {
    use super::inventory::CatalogImage;
    let reference = format!("r/web@sha256:{}", "a".repeat(64));
    let old = json!({"key": "web", "reference": reference, "present": false, "image_id": null});
    let entry: CatalogImage = serde_json::from_value(old).unwrap();
    assert_eq!(entry.container_port, None);
    assert!(entry.health_path.is_root());
    assert!(!entry.has_configuration && !entry.has_data);
}
