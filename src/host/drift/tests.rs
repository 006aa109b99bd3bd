//! Drift derivation on hand-made records and snapshots.

use std::collections::BTreeMap;

use super::*;
use crate::vocab::{AppName, ImageId, ImageRef, LABEL_APP, PlanId, ServerName};

fn id(c: char) -> ContainerId {
    ContainerId::parse(&c.to_string().repeat(64)).unwrap()
}

fn container(c: char, name: &str, app: Option<&str>, state: &str) -> Container {
    let mut labels = BTreeMap::new();
    if let Some(app) = app {
        labels.insert(LABEL_APP.to_owned(), app.to_owned());
    }
    Container {
        id: id(c),
        name: name.into(),
        image_id: ImageId::parse(&format!("sha256:{}", "9".repeat(64))).unwrap(),
        state: state.into(),
        labels,
        ports: vec![],
    }
}

fn record(state: AppState) -> AppRecord {
    AppRecord {
        accessories: Vec::new(),
        app: AppName::parse("demo").unwrap(),
        state,
        host_port: 18001,
        container_port: 8080,
        server_name: ServerName::parse("demo.example.com").unwrap(),
        also_server_names: vec![],
        image_key: "web".into(),
        app_image: ImageRef::parse(&format!("old.example/web@sha256:{}", "1".repeat(64))).unwrap(),
        gateway_image: ImageRef::parse(&format!("old.example/gateway@sha256:{}", "2".repeat(64))).unwrap(),
        nginx_config: String::new(),
        app_dir: "/state/apps/demo".into(),
        containers: vec![id('a'), id('b')],
        app_container: Some(id('a')),
        gateway_container: Some(id('b')),
        plan_id: PlanId::parse(&"0".repeat(32)).unwrap(),
        image_ids: vec![],
        upstream: None,
        image_history: vec![],
        configuration: None,
        kept_versions: vec![],
        health_path: None,
        data: None,
        exposed: None,
    }
}

fn snapshot(app: &str, gateway: &str) -> Snapshot {
    let mut containers = vec![container('f', "someone-elses", None, "running")];
    if !app.is_empty() {
        containers.push(container('a', "vl-demo-app", Some("demo"), app));
    }
    if !gateway.is_empty() {
        containers.push(container('b', "vl-demo-gateway", Some("demo"), gateway));
    }
    Snapshot { containers, images: vec![], networks: vec![] }
}

fn drift(state: AppState, snapshot: &Snapshot) -> (EngineState, Option<DriftReason>) {
    let derived = derive(&record(state), snapshot);
    (derived.state, derived.drift)
}

#[test]
fn record_and_engine_agreeing_is_no_drift() {
    assert_eq!(drift(AppState::Running, &snapshot("running", "running")), (EngineState::Running, None));
    assert_eq!(drift(AppState::Stopped, &snapshot("exited", "exited")), (EngineState::Stopped, None));
}

#[test]
fn each_disagreement_is_drift_with_its_reason() {
    use DriftReason::*;
    let drifted = |reason| (EngineState::Drifted, Some(reason));
    // An operator started a stopped app by hand.
    assert_eq!(drift(AppState::Stopped, &snapshot("running", "exited")), drifted(RecordStoppedButRunning));
    // A container crashed or was stopped by hand.
    assert_eq!(
        drift(AppState::Running, &snapshot("running", "restarting")),
        drifted(RecordRunningButStopped)
    );
    // Removed by hand.
    assert_eq!(drift(AppState::Running, &snapshot("running", "")), drifted(ContainersMissing));
    assert_eq!(drift(AppState::Stopped, &snapshot("", "")), drifted(ContainersMissing));
    // Removed and recreated under the same name: a different id.
    let mut replaced = snapshot("running", "");
    replaced.containers.push(container('c', "vl-demo-gateway", None, "running"));
    assert_eq!(drift(AppState::Running, &replaced), drifted(ContainersMissing));
    let mut extra = snapshot("running", "running");
    extra.containers.push(container('c', "anything", Some("demo"), "running"));
    assert_eq!(drift(AppState::Running, &extra), drifted(ContainersReplaced));
    // Resolved or not, an unverified plan means nobody knows what runs.
    assert_eq!(drift(AppState::NeedsInspection, &snapshot("running", "running")), drifted(NeedsInspection));
}

#[test]
fn containers_are_reported_by_recorded_id_with_missing_ones_named() {
    let derived = derive(&record(AppState::Running), &snapshot("running", ""));
    assert_eq!(
        derived.containers,
        vec![
            ContainerView { role: ContainerRole::App, id: id('a'), state: "running".into() },
            ContainerView { role: ContainerRole::Gateway, id: id('b'), state: "missing".into() },
        ]
    );
}

#[test]
fn a_foreign_container_belongs_to_no_app() {
    let snapshot = snapshot("running", "running");
    let owned: Vec<bool> =
        snapshot.containers.iter().map(|c| belongs_to(&record(AppState::Running), c)).collect();
    assert_eq!(owned, [false, true, true]);
}

#[test]
fn every_reason_names_a_fix() {
    use strum::VariantArray as _;
    for reason in DriftReason::VARIANTS {
        assert!(!reason.sentence().is_empty() && !reason.fix().is_empty());
        assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
    }
    for state in EngineState::VARIANTS {
        assert_eq!(serde_json::to_value(state).unwrap(), state.as_str());
    }
}

#[test]
fn the_drift_message_names_the_container_that_differs() {
    let message = |state: AppState, snapshot: &Snapshot| {
        derive(&record(state), snapshot).drift_view().map(|drift| drift.message)
    };
    let sentence = |reason: DriftReason, named: &str| Some(format!("{}: {named}", reason.sentence()));
    assert_eq!(message(AppState::Running, &snapshot("running", "running")), None);
    assert_eq!(
        message(AppState::Running, &snapshot("exited", "running")),
        sentence(DriftReason::RecordRunningButStopped, "vl-demo-app (exited)")
    );
    assert_eq!(
        message(AppState::Stopped, &snapshot("exited", "running")),
        sentence(DriftReason::RecordStoppedButRunning, "vl-demo-gateway (running)")
    );
    assert_eq!(
        message(AppState::Running, &snapshot("running", "")),
        sentence(
            DriftReason::ContainersMissing,
            &format!("the gateway container {} (missing)", "b".repeat(12))
        )
    );
    let mut extra = snapshot("running", "running");
    extra.containers.push(container('c', "vl-demo-app-x\u{1b}[2J", Some("demo"), "running"));
    assert_eq!(
        message(AppState::Running, &extra),
        sentence(
            DriftReason::ContainersReplaced,
            &format!("vl-demo-app-x2J ({}, not recorded)", "c".repeat(12))
        ),
        "only docker's name alphabet reaches the message"
    );
    let unverified = derive(&record(AppState::NeedsInspection), &snapshot("running", "running"));
    assert_eq!(unverified.drift_view().unwrap().message, DriftReason::NeedsInspection.sentence());
}

/// Issue 40. Tried: an app whose accessory container was stopped by hand,
/// and one whose accessory container is gone: each is drift naming it,
/// while the views still list the app and the gateway only (the roles the
/// contract names); both running is no drift.
#[test]
fn an_accessory_stopped_or_gone_is_the_apps_drift() {
    let accessory: crate::vocab::AccessoryUse = serde_json::from_value(serde_json::json!({
        "name": "db", "image": format!("pg.example/pg@sha256:{}", "3".repeat(64)), "port": 5432,
        "container_name": "vl-demo-db",
        "data": {"path": "/srv/pgdata", "image": "/state/data/demo@db.ext4", "mount": "/state/data/demo@db", "max_mib": 64},
        "health": ["/usr/bin/pg_isready"]
    }))
    .unwrap();
    let mut record = record(AppState::Running);
    record.accessories = vec![accessory];
    record.containers.push(id('c'));
    let mut engine = snapshot("running", "running");
    engine.containers.push(container('c', "vl-demo-db", Some("demo"), "running"));
    assert_eq!(derive(&record, &engine).drift, None);
    engine.containers.last_mut().unwrap().state = "exited".into();
    let derived = derive(&record, &engine);
    assert_eq!(derived.drift, Some(DriftReason::RecordRunningButStopped));
    assert_eq!(derived.differs, ["vl-demo-db (exited)"]);
    assert_eq!(derived.containers.len(), 2, "the views: app and gateway");
    engine.containers.pop();
    let derived = derive(&record, &engine);
    assert_eq!(derived.drift, Some(DriftReason::ContainersMissing));
    assert!(derived.differs[0].starts_with("the accessory container cccccccccccc"), "{:?}", derived.differs);
}
