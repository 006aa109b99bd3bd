//! start, restart and update end to end on the fake engine: approval, what
//! the engine is asked, the app record afterwards, failures whose rollback was
//! verified (failed, rolled_back, nothing blocked), bad input (a stable
//! code and nothing changed), and which changes void an approved plan.
//! Hermetic: no root, no Docker.

use crate::support::fake_engine::*;
use crate::support::harness::*;
use serde_json::{Value, json};
use volce_lab::control::app_record::{AppRecord, AppState};
use volce_lab::docker::EngineError;
use volce_lab::host::Executed;
use volce_lab::vocab::{Code, LABEL_APP, PlanId};
use volce_lab::vocab::{PlanOutcome, PlanState};

const AGENT: &str = "agent";
const WEB2: &str = "127.0.0.1:15000/volce-lab/web2@sha256:";

/// A harness whose catalog also offers `web2`.
fn harness() -> Harness {
    let mut h = Harness::new();
    let mut policy = policy_json();
    policy["catalog"]["web2"] = json!(format!("{WEB2}{}", "d".repeat(64)));
    h.write_policy(&policy);
    h
}

fn refusal<T: std::fmt::Debug>(result: Result<T, volce_lab::vocab::Refusal>) -> Code {
    result.expect_err("must be refused").code
}

/// Prepares, approves (if needed) and executes one plan.
fn run(h: &Harness, action: &str, parameters: Value) -> (PlanId, Executed) {
    let mut c = h.controller();
    let plan = c.prepare(action, &parameters, AGENT).unwrap();
    if plan.plan.requires_approval {
        c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    }
    let executed = c.execute(&plan.plan.id, AGENT).unwrap();
    (plan.plan.id, executed)
}

fn completed(h: &Harness, action: &str, parameters: Value) -> PlanId {
    let (id, executed) = run(h, action, parameters);
    assert!(matches!(executed, Executed::Completed(_)), "{action}: {executed:?}");
    id
}

fn record(h: &Harness, app: &str) -> AppRecord {
    h.controller().store_for_tests().read(|tx| tx.apps()).unwrap()[app].clone()
}

fn plan_state(h: &Harness, id: &PlanId) -> (PlanState, Option<PlanOutcome>) {
    let stored = h.controller().store_for_tests().read(|tx| tx.load_plan(id)).unwrap().unwrap();
    (stored.state, stored.outcome)
}

/// `demo` deployed on 18001 and stopped by an approved stop.
fn stopped_demo(h: &Harness) {
    completed(h, "deploy", deploy_params("demo", 18001));
    completed(h, "stop", json!({"app": "demo"}));
    assert_eq!(record(h, "demo").state, AppState::Stopped);
}

// --- start -------------------------------------------------------------------

#[test]
fn the_stop_plan_names_start_as_the_reviewed_way_back() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    let stop = h.controller().prepare("stop", &json!({"app": "demo"}), AGENT).unwrap();
    assert!(stop.plan.impact.rollback.contains("a start plan"), "{}", stop.plan.impact.rollback);
}

#[test]
fn start_needs_approval_starts_app_then_gateway_and_records_the_app_running() {
    let h = harness();
    stopped_demo(&h);
    let before = record(&h, "demo");
    let mut c = h.controller();
    let plan = c.prepare("start", &json!({"app": "demo"}), AGENT).unwrap();
    assert!(plan.plan.requires_approval, "start is in the fixed minimum");
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::ApprovalRequired);
    assert!(h.show(&plan.plan.id).contains("restart policy unless-stopped"));
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    let call = h.engine.mutations().pop().unwrap();
    let (app, gateway) = (before.app_container.unwrap(), before.gateway_container.unwrap());
    assert_eq!(
        call,
        ["start", app.as_str(), gateway.as_str(), "127.0.0.1:18001", "demo.example.com"],
        "the recorded ids, app first, checked through its server name"
    );
    assert_eq!(record(&h, "demo").state, AppState::Running);
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::PlanConsumed, "executes once");
}

#[test]
fn a_start_whose_rollback_was_verified_ends_failed_rolled_back_and_blocks_nothing() {
    let h = harness();
    stopped_demo(&h);
    let mut c = h.controller();
    let plan = c.prepare("start", &json!({"app": "demo"}), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    h.engine.edit(|s| {
        s.fail_next =
            Some(EngineError::RolledBack { cause: Box::new(EngineError::HealthCheckFailed), app_log: None })
    });
    let Executed::Failed { refusal, .. } = c.execute(&plan.plan.id, AGENT).unwrap() else {
        panic!("a verified rollback is failed, not needs_inspection")
    };
    assert_eq!(refusal.code, Code::HealthCheckFailed);
    assert!(refusal.message.contains("stopped again"), "{}", refusal.message);
    assert_eq!(plan_state(&h, &plan.plan.id), (PlanState::Failed, Some(PlanOutcome::RolledBack)));
    assert_eq!(record(&h, "demo").state, AppState::Stopped, "as it was");
    // Nothing blocked: the next plan is accepted at once.
    h.controller().prepare("start", &json!({"app": "demo"}), AGENT).unwrap();
}

#[test]
fn a_start_that_failed_unverified_needs_inspection() {
    let h = harness();
    stopped_demo(&h);
    h.engine.edit(|s| s.fail_next = Some(EngineError::Host { step: "start container" }));
    let (id, executed) = run(&h, "start", json!({"app": "demo"}));
    assert!(matches!(executed, Executed::NeedsInspection { .. }), "{executed:?}");
    assert_eq!(plan_state(&h, &id).0, PlanState::NeedsInspection);
    assert_eq!(record(&h, "demo").state, AppState::NeedsInspection);
}

#[test]
fn start_refuses_bad_input_and_changes_nothing() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    let before = h.engine.mutations().len();
    let mut c = h.controller();
    // Tried: an app nobody deployed, a running app, an extra field, approval
    // smuggled in the parameters, no app, a number for the name, a bad name.
    for (parameters, code) in [
        (json!({"app": "ghost"}), Code::AppNotFound),
        (json!({"app": "demo"}), Code::AppNotStopped),
        (json!({"app": "demo", "image": "web"}), Code::InvalidParameters),
        (json!({"app": "demo", "approved": true}), Code::InvalidParameters),
        (json!({}), Code::InvalidParameters),
        (json!({"app": 7}), Code::InvalidParameters),
        (json!({"app": "Demo!"}), Code::InvalidAppName),
    ] {
        assert_eq!(refusal(c.prepare("start", &parameters, AGENT)), code, "{parameters}");
    }
    // `legacy` is recorded stopped but its containers are gone.
    assert_eq!(refusal(c.prepare("start", &json!({"app": "legacy"}), AGENT)), Code::ContainerSetChanged);
    assert_eq!(h.engine.mutations().len(), before, "nothing changed");
}

#[test]
fn start_refuses_an_app_started_by_hand_or_whose_port_another_container_took() {
    let h = harness();
    stopped_demo(&h);
    let before = h.engine.mutations().len();
    // Tried: an operator started the app container by hand.
    let app = record(&h, "demo").app_container.unwrap();
    h.engine
        .edit(|s| s.snapshot.containers.iter_mut().find(|c| c.id == app).unwrap().state = "running".into());
    assert_eq!(refusal(h.controller().prepare("start", &json!({"app": "demo"}), AGENT)), Code::AppNotStopped);
    h.engine
        .edit(|s| s.snapshot.containers.iter_mut().find(|c| c.id == app).unwrap().state = "exited".into());
    // Tried: something else listens on the app's port now.
    h.engine.edit(|s| s.busy_ports.push(18001));
    assert_eq!(refusal(h.controller().prepare("start", &json!({"app": "demo"}), AGENT)), Code::PortInUse);
    assert_eq!(h.engine.mutations().len(), before, "nothing changed");
}

#[test]
fn stop_works_on_an_app_an_operator_started_by_hand() {
    let h = harness();
    stopped_demo(&h);
    let containers = record(&h, "demo").containers;
    h.engine.edit(|s| {
        for c in s.snapshot.containers.iter_mut().filter(|c| containers.contains(&c.id)) {
            c.state = "running".into();
        }
    });
    completed(&h, "stop", json!({"app": "demo"}));
    assert_eq!(h.engine.mutations().pop().unwrap()[0], "stop");
    assert_eq!(record(&h, "demo").state, AppState::Stopped);
    completed(&h, "start", json!({"app": "demo"}));
}

// --- restart -----------------------------------------------------------------

/// Sets the engine's state of demo's recorded `role` container ("app" or
/// "gateway").
fn set_state(h: &Harness, role: &str, state: &str) {
    let record = record(h, "demo");
    let id = if role == "app" { record.app_container } else { record.gateway_container }.unwrap();
    h.engine.edit(|s| s.snapshot.containers.iter_mut().find(|c| c.id == id).unwrap().state = state.into());
}

/// demo's drift as the inventory reports it: reason and message.
fn demo_drift(h: &Harness) -> Option<(String, String, String)> {
    let inventory = h.controller().inventory(AGENT).unwrap();
    let app = inventory.apps.iter().find(|a| a.app.as_str() == "demo").unwrap();
    let drift = serde_json::to_value(app.drift.as_ref()?).unwrap();
    let text = |k: &str| drift[k].as_str().unwrap().to_owned();
    Some((text("reason"), text("message"), text("fix")))
}

#[test]
fn restart_needs_approval_stops_gateway_then_app_then_starts_both_and_keeps_the_app_running() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    let before = record(&h, "demo");
    let (app, gateway) = (before.app_container.clone().unwrap(), before.gateway_container.clone().unwrap());
    let mut c = h.controller();
    let plan = c.prepare("restart", &json!({"app": "demo"}), AGENT).unwrap();
    assert!(plan.plan.requires_approval, "restart is in the fixed minimum");
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::ApprovalRequired);
    let show = h.show(&plan.plan.id);
    assert!(show.contains("stopped (gateway, then app), then started (app, then gateway)"), "{show}");
    assert!(show.contains("vl-demo-app") && show.contains("vl-demo-gateway"), "{show}");
    let mutations = h.engine.mutations().len();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    assert_eq!(
        h.engine.mutations()[mutations..],
        [
            vec!["stop".to_owned(), gateway.to_string(), app.to_string()],
            ["start", app.as_str(), gateway.as_str(), "127.0.0.1:18001", "demo.example.com"]
                .map(str::to_owned)
                .to_vec(),
        ],
        "stop's step, then start's, on the recorded ids"
    );
    let after = record(&h, "demo");
    assert_eq!(after.state, AppState::Running);
    assert_eq!(after.plan_id, plan.plan.id);
    assert_eq!((after.containers, after.image_key), (before.containers, before.image_key), "nothing else");
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::PlanConsumed, "executes once");
}

#[test]
fn restart_brings_back_an_app_stopped_by_hand_and_the_drift_names_the_container() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    // The app container crashed or was stopped by hand: recorded running.
    set_state(&h, "app", "exited");
    let (reason, message, fix) = demo_drift(&h).expect("drifted");
    assert_eq!(reason, "record_running_but_stopped");
    assert!(message.ends_with(": vl-demo-app (exited)"), "names the container: {message}");
    assert!(fix.contains("restart plan"), "{fix}");
    // Issue 37: start answered "demo is running already" here. It says the
    // container exited and that a restart plan is the way, under its own code.
    let exited = h.controller().prepare("start", &json!({"app": "demo"}), AGENT).unwrap_err();
    assert_eq!(exited.code, Code::AppExited, "{}", exited.message);
    assert!(exited.message.contains("vl-demo-app (exited)"), "names the container: {}", exited.message);
    assert!(exited.message.contains("restart plan"), "{}", exited.message);
    assert!(!exited.message.contains("running already"), "{}", exited.message);
    assert!(Code::AppExited.fix().contains("restart"), "{}", Code::AppExited.fix());
    completed(&h, "restart", json!({"app": "demo"}));
    assert_eq!(record(&h, "demo").state, AppState::Running);
    assert_eq!(demo_drift(&h), None, "record and engine agree again");

    // Started by hand after a stop plan: restart runs it as recorded running.
    completed(&h, "stop", json!({"app": "demo"}));
    set_state(&h, "gateway", "running");
    let (reason, message, _) = demo_drift(&h).expect("drifted");
    assert_eq!(reason, "record_stopped_but_running");
    assert!(message.ends_with(": vl-demo-gateway (running)"), "{message}");
    completed(&h, "restart", json!({"app": "demo"}));
    assert_eq!((record(&h, "demo").state, demo_drift(&h)), (AppState::Running, None));
}

#[test]
fn an_approved_restart_of_an_app_in_a_crash_loop_is_not_voided_by_its_own_containers_flapping() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    set_state(&h, "app", "restarting");
    let mut c = h.controller();
    let plan = c.prepare("restart", &json!({"app": "demo"}), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    // docker's restart policy keeps bringing it up and it keeps exiting.
    set_state(&h, "app", "running");
    set_state(&h, "app", "exited");
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    // Another container on its names is a change to the target: void.
    let plan = c.prepare("restart", &json!({"app": "demo"}), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    h.engine.edit(|s| {
        let mut stray = foreign_container(container_id('e'), "vl-demo-app-stray", used_image(), "running");
        stray.labels.insert(LABEL_APP.into(), "demo".into());
        s.snapshot.containers.push(stray);
    });
    let before = h.engine.mutations().len();
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::SnapshotChanged);
    assert_eq!(h.engine.mutations().len(), before, "nothing acted");
}

#[test]
fn restart_refuses_bad_input_and_changes_nothing() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    completed(&h, "deploy", deploy_params("idle", 18002));
    completed(&h, "stop", json!({"app": "idle"}));
    let before = h.engine.mutations().len();
    let mut c = h.controller();
    // Tried: an app nobody deployed, an app a stop plan stopped (start's),
    // an extra field, approval smuggled in, no app, a number, a bad name.
    for (parameters, code) in [
        (json!({"app": "ghost"}), Code::AppNotFound),
        (json!({"app": "idle"}), Code::AppNotRunning),
        (json!({"app": "demo", "image": "web"}), Code::InvalidParameters),
        (json!({"app": "demo", "approved": true}), Code::InvalidParameters),
        (json!({}), Code::InvalidParameters),
        (json!({"app": 7}), Code::InvalidParameters),
        (json!({"app": "Demo!"}), Code::InvalidAppName),
    ] {
        assert_eq!(refusal(c.prepare("restart", &parameters, AGENT)), code, "{parameters}");
    }
    let ghost = c.prepare("restart", &json!({"app": "ghost"}), AGENT).unwrap_err().message;
    assert!(ghost.contains("ghost is not an app that volce-lab deployed"), "{ghost}");
    let idle = c.prepare("restart", &json!({"app": "idle"}), AGENT).unwrap_err().message;
    assert!(idle.contains("a start plan starts it"), "{idle}");
    // `legacy`'s containers are gone.
    assert_eq!(refusal(c.prepare("restart", &json!({"app": "legacy"}), AGENT)), Code::ContainerSetChanged);
    // Its gateway is down and something else listens on its port now.
    set_state(&h, "gateway", "exited");
    h.engine.edit(|s| s.busy_ports.push(18001));
    assert_eq!(refusal(h.controller().prepare("restart", &json!({"app": "demo"}), AGENT)), Code::PortInUse);
    assert_eq!(h.engine.mutations().len(), before, "nothing changed");
}

#[test]
fn a_restart_whose_start_was_rolled_back_ends_failed_with_the_app_recorded_stopped() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    h.engine.edit(|s| {
        s.fail_at = Some((
            "start",
            EngineError::RolledBack { cause: Box::new(EngineError::HealthCheckFailed), app_log: None },
        ))
    });
    let (id, executed) = run(&h, "restart", json!({"app": "demo"}));
    let Executed::Failed { refusal, .. } = executed else {
        panic!("a verified rollback is failed: {executed:?}")
    };
    assert_eq!(refusal.code, Code::HealthCheckFailed);
    assert!(refusal.message.contains("now stopped and recorded so"), "{}", refusal.message);
    assert!(refusal.message.contains("a start plan brings it back"), "{}", refusal.message);
    assert_eq!(plan_state(&h, &id), (PlanState::Failed, Some(PlanOutcome::RolledBack)));
    assert_eq!(record(&h, "demo").state, AppState::Stopped, "as the rollback left it");
    // Nothing blocked: the start plan is accepted at once.
    completed(&h, "start", json!({"app": "demo"}));
}

#[test]
fn a_restart_whose_first_stop_docker_refused_changed_nothing_and_one_failed_unverified_needs_inspection() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    let before = record(&h, "demo");
    h.engine.edit(|s| s.fail_at = Some(("stop", EngineError::Refused { step: "disable restart" })));
    let (id, executed) = run(&h, "restart", json!({"app": "demo"}));
    let Executed::Failed { refusal, .. } = executed else { panic!("{executed:?}") };
    assert_eq!(refusal.code, Code::EngineRefused);
    assert!(refusal.message.contains("Docker refused the restart"), "{}", refusal.message);
    assert_eq!(plan_state(&h, &id), (PlanState::Failed, Some(PlanOutcome::NotStarted)));
    assert_eq!(record(&h, "demo"), before, "the record is as it was");

    h.engine.edit(|s| s.fail_at = Some(("start", EngineError::Host { step: "start container" })));
    let (id, executed) = run(&h, "restart", json!({"app": "demo"}));
    assert!(matches!(executed, Executed::NeedsInspection { .. }), "{executed:?}");
    assert_eq!(plan_state(&h, &id).0, PlanState::NeedsInspection);
    assert_eq!(record(&h, "demo").state, AppState::NeedsInspection);
}

// --- update ------------------------------------------------------------------

#[test]
fn update_needs_approval_replaces_the_app_container_and_keeps_the_image_history() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    let before = record(&h, "demo");
    let mut c = h.controller();
    let plan = c.prepare("update", &json!({"app": "demo", "image": "web2"}), AGENT).unwrap();
    assert!(plan.plan.requires_approval, "update is in the fixed minimum");
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::ApprovalRequired);
    let show = h.show(&plan.plan.id);
    assert!(show.contains(WEB2) && show.contains(".update.volce-lab.invalid"), "{show}");
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    let call = h.engine.mutations().pop().unwrap();
    let name = format!("vl-demo-app-{}", &plan.plan.id.as_str()[..12]);
    assert_eq!(call[0], "update");
    assert_eq!(call[4..], [before.app_container.clone().unwrap().to_string(), name.clone()]);
    let after = record(&h, "demo");
    assert_eq!(after.state, AppState::Running);
    assert_eq!(after.image_key, "web2");
    assert!(after.app_image.as_str().starts_with(WEB2));
    assert_ne!(after.app_container, before.app_container);
    assert_eq!(after.gateway_container, before.gateway_container);
    assert_eq!(after.containers.len(), 2);
    assert_eq!(after.upstream.as_deref(), Some(name.as_str()));
    assert!(after.nginx_config.contains(&format!("proxy_pass http://{name}:8080;")));
    let keys: Vec<&str> = after.image_history.iter().map(|u| u.image_key.as_str()).collect();
    assert_eq!(keys, ["web", "web2"], "what ran before, then what runs now");
    assert!(after.image_history.iter().all(|u| u.since.is_some()));
    // The claim on the old image stays; the new one is added.
    assert!(after.image_ids.contains(&image('a')) && after.image_ids.contains(&image('e')));
    // And back: an update from an updated app, and a server-name change on it.
    completed(&h, "update", json!({"app": "demo", "image": "web"}));
    assert_eq!(record(&h, "demo").image_history.len(), 3);
    completed(&h, "nginx_config", json!({"app": "demo", "server_name": "new.example.com"}));
    let last = record(&h, "demo");
    assert!(last.nginx_config.contains(&format!("proxy_pass http://{}:8080;", last.upstream.unwrap())));
}

#[test]
fn an_update_whose_rollback_was_verified_ends_failed_rolled_back_and_the_next_plan_is_accepted() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    let before = record(&h, "demo");
    h.engine.edit(|s| {
        s.fail_next =
            Some(EngineError::RolledBack { cause: Box::new(EngineError::HealthCheckFailed), app_log: None })
    });
    let (id, executed) = run(&h, "update", json!({"app": "demo", "image": "web2"}));
    let Executed::Failed { refusal, .. } = executed else { panic!("{executed:?}") };
    assert_eq!(refusal.code, Code::HealthCheckFailed);
    assert!(refusal.message.contains("old container kept serving"), "{}", refusal.message);
    assert_eq!(plan_state(&h, &id), (PlanState::Failed, Some(PlanOutcome::RolledBack)));
    assert_eq!(record(&h, "demo"), before, "the record is as it was");
    h.controller().prepare("update", &json!({"app": "demo", "image": "web2"}), AGENT).unwrap();
}

#[test]
fn update_refuses_bad_input_and_changes_nothing() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    completed(&h, "deploy", deploy_params("idle", 18002));
    completed(&h, "stop", json!({"app": "idle"}));
    let before = h.engine.mutations().len();
    let mut c = h.controller();
    let reference = format!("{WEB2}{}", "d".repeat(64));
    // Tried: an app nobody deployed, a stopped app, a key not in the
    // catalog, an image reference instead of a key, the image it runs
    // already, an extra field, approval smuggled in, a missing image, a
    // number for the image.
    for (parameters, code) in [
        (json!({"app": "ghost", "image": "web2"}), Code::AppNotFound),
        (json!({"app": "idle", "image": "web2"}), Code::AppNotRunning),
        (json!({"app": "demo", "image": "nginx"}), Code::ImageNotInCatalog),
        (json!({"app": "demo", "image": reference}), Code::ImageNotInCatalog),
        (json!({"app": "demo", "image": "web"}), Code::ImageUnchanged),
        (json!({"app": "demo", "image": "web2", "host_port": 18005}), Code::InvalidParameters),
        (json!({"app": "demo", "image": "web2", "approval": "alice"}), Code::InvalidParameters),
        (json!({"app": "demo"}), Code::InvalidParameters),
        (json!({"app": "demo", "image": 2}), Code::InvalidParameters),
    ] {
        assert_eq!(refusal(c.prepare("update", &parameters, AGENT)), code, "{parameters}");
    }
    // Tried: a container labelled as the app that volce-lab did not record.
    h.engine.edit(|s| {
        let mut stray = foreign_container(container_id('e'), "stray", used_image(), "running");
        stray.labels.insert(LABEL_APP.into(), "demo".into());
        s.snapshot.containers.push(stray);
    });
    let code = refusal(c.prepare("update", &json!({"app": "demo", "image": "web2"}), AGENT));
    assert_eq!(code, Code::ContainerSetChanged);
    assert_eq!(h.engine.mutations().len(), before, "nothing changed");
}

// --- rollback (issue 25) ----------------------------------------------------

/// The reference the catalog pins for `web` in every harness.
fn web_reference() -> String {
    policy_json()["catalog"]["web"].as_str().unwrap().to_owned()
}

/// The kept versions of `app` as (key, reference, image id).
fn kept(h: &Harness, app: &str) -> Vec<(String, String, Option<volce_lab::vocab::ImageId>)> {
    let record = record(h, app);
    record
        .kept_versions
        .iter()
        .map(|v| (v.image_key.clone(), v.app_image.to_string(), v.image_id.clone()))
        .collect()
}

/// Tried: deploy web, update to web2 (web is kept), a rollback (always
/// approved, same switch as an update: one `update` call of the engine to
/// web's pinned reference), which keeps web2 in turn; the inventory lists
/// the kept version; a second rollback goes forward to web2 again.
#[test]
fn update_then_rollback_returns_to_the_old_version_and_keeps_the_one_it_left() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    assert!(kept(&h, "demo").is_empty(), "a deploy replaces nothing");
    completed(&h, "update", json!({"app": "demo", "image": "web2"}));
    assert_eq!(kept(&h, "demo"), [("web".to_owned(), web_reference(), Some(image('a')))]);
    let updated = record(&h, "demo");

    let mut c = h.controller();
    let plan = c.prepare("rollback", &json!({"app": "demo"}), AGENT).unwrap();
    assert!(plan.plan.requires_approval, "rollback is in the fixed minimum");
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::ApprovalRequired);
    let target = &plan.plan.impact.target;
    assert!(
        target.contains("still on the host") && target.contains("the catalog still pins it for `web`"),
        "{target}"
    );
    let show = h.show(&plan.plan.id);
    assert!(show.contains("ROLLBACK") && show.contains(&web_reference()), "{show}");
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    let call = h.engine.mutations().pop().unwrap();
    assert_eq!((call[0].as_str(), call[3].as_str()), ("update", web_reference().as_str()));
    assert_eq!(call[4], updated.app_container.clone().unwrap().to_string(), "the container it replaced");

    let after = record(&h, "demo");
    assert_eq!((after.state, after.image_key.as_str()), (AppState::Running, "web"));
    assert_eq!(after.app_image.as_str(), web_reference());
    assert_eq!(after.gateway_container, updated.gateway_container);
    let web2 = format!("{WEB2}{}", "d".repeat(64));
    assert_eq!(kept(&h, "demo"), [("web2".to_owned(), web2.clone(), Some(image('e')))]);
    let keys: Vec<&str> = after.image_history.iter().map(|u| u.image_key.as_str()).collect();
    assert_eq!(keys, ["web", "web2", "web"]);

    let inventory = serde_json::to_value(h.controller().inventory(AGENT).unwrap()).unwrap();
    assert_eq!(
        inventory["apps"][0]["kept_versions"],
        json!([{"key": "web2", "reference": web2, "present": true}])
    );
    completed(&h, "rollback", json!({"app": "demo"}));
    assert_eq!(record(&h, "demo").image_key, "web2");
    assert_eq!(kept(&h, "demo"), [("web".to_owned(), web_reference(), Some(image('a')))]);
}

/// Tried: an app never updated (nothing kept), one nobody deployed, a
/// stopped one, an extra parameter, a missing app: each refused with its
/// code and nothing asked of the engine.
#[test]
fn rollback_with_nothing_kept_or_bad_input_is_refused_and_changes_nothing() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    completed(&h, "deploy", deploy_params("idle", 18002));
    completed(&h, "update", json!({"app": "idle", "image": "web2"}));
    completed(&h, "stop", json!({"app": "idle"}));
    let before = h.engine.mutations().len();
    let mut c = h.controller();
    let nothing = c.prepare("rollback", &json!({"app": "demo"}), AGENT).unwrap_err();
    assert_eq!(nothing.code, Code::NothingKept);
    assert!(nothing.message.contains("demo keeps no earlier version"), "{}", nothing.message);
    assert!(nothing.code.fix().contains("kept_versions"), "{}", nothing.code.fix());
    for (parameters, code) in [
        (json!({"app": "ghost"}), Code::AppNotFound),
        (json!({"app": "idle"}), Code::AppNotRunning),
        (json!({"app": "demo", "image": "web"}), Code::InvalidParameters),
        (json!({}), Code::InvalidParameters),
    ] {
        assert_eq!(refusal(c.prepare("rollback", &parameters, AGENT)), code, "{parameters}");
    }
    assert_eq!(h.engine.mutations().len(), before, "nothing changed");
}

/// Tried: remove_image of the image the kept version names, once no
/// container uses it: refused, naming the app and the way out; once a
/// rollback and an update to a third image push it out beyond
/// keep_versions 1, the same plan is accepted.
#[test]
fn remove_image_refuses_an_image_kept_for_rollback_naming_the_app() {
    let mut h = harness();
    let mut policy = policy_json();
    policy["catalog"]["web2"] = json!(format!("{WEB2}{}", "d".repeat(64)));
    policy["catalog"]["web3"] = json!(format!("127.0.0.1:15000/volce-lab/web3@sha256:{}", "f".repeat(64)));
    policy["keep_versions"] = json!(1);
    h.write_policy(&policy);
    completed(&h, "deploy", deploy_params("demo", 18001));
    completed(&h, "update", json!({"app": "demo", "image": "web2"}));
    assert!(!h.engine.snapshot_now().containers.iter().any(|c| c.image_id == image('a')), "a is unused");
    let mut c = h.controller();
    let refused = c.prepare("remove_image", &json!({"image_id": image('a').as_str()}), AGENT).unwrap_err();
    assert_eq!(refused.code, Code::ImageKeptForRollback);
    assert!(
        refused.message.contains("demo keeps this image for rollback") && refused.message.contains("`web`"),
        "{}",
        refused.message
    );
    assert!(refused.code.fix().contains("rollback"), "{}", refused.code.fix());
    // web3 is image e in the fake, as web2 is: the kept web2 is e too, so
    // take the app to web3 and check that web (a) is no longer kept.
    completed(&h, "update", json!({"app": "demo", "image": "web3"}));
    assert_eq!(kept(&h, "demo").len(), 1, "keep_versions 1");
    assert_eq!(kept(&h, "demo")[0].0, "web2");
    let plan = h.controller().prepare("remove_image", &json!({"image_id": image('a').as_str()}), AGENT);
    assert!(plan.is_ok(), "{plan:?}");
}

/// Tried: the default keep_versions (2) across three updates: the two most
/// recent replaced versions, newest first; a kept image no longer on the
/// host and a catalog that dropped its key are said in the plan, which
/// still rolls back (the image is pulled again by its pinned digest).
#[test]
fn kept_versions_are_bounded_and_a_rollback_to_a_gone_image_pulls_it_by_digest() {
    let mut h = harness();
    let mut policy = policy_json();
    let web3 = format!("127.0.0.1:15000/volce-lab/web3@sha256:{}", "f".repeat(64));
    policy["catalog"]["web2"] = json!(format!("{WEB2}{}", "d".repeat(64)));
    policy["catalog"]["web3"] = json!(web3);
    h.write_policy(&policy);
    completed(&h, "deploy", deploy_params("demo", 18001));
    completed(&h, "update", json!({"app": "demo", "image": "web2"}));
    completed(&h, "update", json!({"app": "demo", "image": "web3"}));
    completed(&h, "update", json!({"app": "demo", "image": "web"}));
    let keys: Vec<String> = kept(&h, "demo").into_iter().map(|(key, ..)| key).collect();
    assert_eq!(keys, ["web3", "web2"], "newest first, at most 2");

    // The operator drops web3 from the catalog and its image is gone.
    policy["catalog"].as_object_mut().unwrap().remove("web3");
    h.write_policy(&policy);
    h.engine.edit(|s| s.snapshot.images.retain(|i| *i != image('e')));
    let inventory = serde_json::to_value(h.controller().inventory(AGENT).unwrap()).unwrap();
    assert_eq!(inventory["apps"][0]["kept_versions"][0]["present"], json!(false));
    let plan = h.controller().prepare("rollback", &json!({"app": "demo"}), AGENT).unwrap();
    let target = &plan.plan.impact.target;
    assert!(
        target.contains("pulled again by its pinned digest")
            && target.contains("no longer has the key `web3`"),
        "{target}"
    );
    completed(&h, "rollback", json!({"app": "demo"}));
    let after = record(&h, "demo");
    assert_eq!((after.image_key.as_str(), after.app_image.as_str()), ("web3", web3.as_str()));
}

/// Tried: an update plan as 0.1.0 sealed it (without what it replaces),
/// approved before the upgrade: it still runs, and the record keeps the
/// version it replaced, read from the app record (no image id).
#[test]
fn an_update_sealed_before_versions_were_kept_still_runs_and_keeps_the_old_version() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    let mut c = h.controller();
    let fresh = c.prepare("update", &json!({"app": "demo", "image": "web2"}), AGENT).unwrap();
    let mut old = fresh.plan.clone();
    let volce_lab::actions::Payload::Update(volce_lab::actions::Update { replaces, .. }) = &mut old.payload
    else {
        panic!()
    };
    assert!(replaces.is_some(), "a plan of this version says what it replaces");
    *replaces = None;
    old.digest = old.compute_digest();
    // The stored body rewritten as 0.1.0 wrote it (same id: its names derive from it).
    let conn = c.store_for_tests().dangerous_connection_for_tests();
    let sql = "UPDATE plans SET body = ?1, digest = ?2 WHERE id = ?3";
    conn.execute(sql, [old.canonical_json(), old.digest.as_str().to_owned(), old.id.as_str().to_owned()])
        .unwrap();
    c.approve(&old.id, &old.digest, "alice").unwrap();
    let executed = c.execute(&old.id, AGENT).unwrap();
    assert!(matches!(executed, Executed::Completed(_)), "{executed:?}");
    assert_eq!(kept(&h, "demo"), [("web".to_owned(), web_reference(), None)]);
}

// --- what voids an approved plan ---------------------------------------------

#[test]
fn a_foreign_container_restarting_voids_no_approved_start_or_update_but_a_change_to_the_target_does() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    completed(&h, "deploy", deploy_params("idle", 18002));
    completed(&h, "stop", json!({"app": "idle"}));
    let mut c = h.controller();
    let update = c.prepare("update", &json!({"app": "demo", "image": "web2"}), AGENT).unwrap();
    let start = c.prepare("start", &json!({"app": "idle"}), AGENT).unwrap();
    for plan in [&update, &start] {
        c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    }
    // The foreign `prod` restarts, and another foreign container comes and goes.
    h.engine.edit(|s| {
        s.snapshot.containers.iter_mut().find(|c| c.id == prod_id()).unwrap().state = "restarting".into();
        s.snapshot.containers.push(foreign_container(container_id('7'), "cron", used_image(), "exited"));
    });
    // The update replaces a container of demo's: that voids no plan about
    // idle (before issue 22 it voided every plan, so start went first).
    assert!(matches!(c.execute(&update.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    assert!(matches!(c.execute(&start.plan.id, AGENT).unwrap(), Executed::Completed(_)));

    // A change to the target: the app's gateway stops behind volce-lab's back.
    let plan = c.prepare("update", &json!({"app": "demo", "image": "web"}), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    let gateway = record(&h, "demo").gateway_container.unwrap();
    h.engine.edit(|s| {
        s.snapshot.containers.iter_mut().find(|c| c.id == gateway).unwrap().state = "exited".into()
    });
    let before = h.engine.mutations().len();
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::SnapshotChanged);
    assert_eq!(h.engine.mutations().len(), before, "nothing acted");
}

#[test]
fn an_approval_free_deploy_of_one_app_voids_no_pending_approval_of_another() {
    // Before issue 22 the pending stop of demo ended snapshot_changed: the
    // digest covered every container and network of ours.
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    let mut c = h.controller();
    let stop = c.prepare("stop", &json!({"app": "demo"}), AGENT).unwrap();
    assert!(stop.plan.requires_approval);
    let deploy = c.prepare("deploy", &deploy_params("shop", 18002), AGENT).unwrap();
    assert!(!deploy.plan.requires_approval, "the test policy lets a deploy run unapproved");
    assert!(matches!(c.execute(&deploy.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    c.approve(&stop.plan.id, &stop.plan.digest, "alice").unwrap();
    assert!(matches!(c.execute(&stop.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    assert_eq!(record(&h, "demo").state, AppState::Stopped);
    assert_eq!(record(&h, "shop").state, AppState::Running);
}

// --- remove_app keeps volce-lab's claim on the app's images ------------------

#[test]
fn after_remove_app_and_a_new_deploy_under_the_name_remove_image_takes_the_first_image() {
    let h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    completed(&h, "update", json!({"app": "demo", "image": "web2"}));
    completed(&h, "remove_app", json!({"app": "demo"}));
    completed(&h, "deploy", deploy_params("demo", 18001));
    // The redeploy runs image a again in the fake; take it off so a is unused.
    h.engine.edit(|s| {
        for c in s.snapshot.containers.iter_mut().filter(|c| c.image_id == image('a')) {
            c.image_id = image('f');
        }
    });
    let mut c = h.controller();
    let plan = c.prepare("remove_image", &json!({"image_id": image('a').as_str()}), AGENT).unwrap();
    assert!(plan.plan.impact.target.contains("demo"), "{:?}", plan.plan.impact);
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    assert!(!h.engine.snapshot_now().images.contains(&image('a')));
    assert!(!c.store_for_tests().read(|tx| tx.retired_claims()).unwrap().contains_key(&image('a')));
}

/// A progress sink that keeps the steps it is told.
#[derive(Default)]
struct Steps(std::cell::RefCell<Vec<volce_lab::vocab::Step>>);

impl volce_lab::docker::ProgressSink for Steps {
    fn step(&self, step: volce_lab::vocab::Step) {
        self.0.borrow_mut().push(step);
    }
}

/// Prepares, approves and executes one plan, reporting its steps.
fn steps_of(h: &Harness, action: &str, parameters: Value) -> Vec<volce_lab::vocab::Step> {
    let mut c = h.controller();
    let plan = c.prepare(action, &parameters, AGENT).unwrap();
    if plan.plan.requires_approval {
        c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    }
    let steps = Steps::default();
    let executed = c.execute_reporting(&plan.plan.id, AGENT, &steps).unwrap();
    assert!(matches!(executed, Executed::Completed(_)), "{action}: {executed:?}");
    steps.0.into_inner()
}

#[test]
fn deploy_start_restart_and_update_report_their_steps_and_stop_reports_none() {
    use volce_lab::vocab::Step::*;
    let h = harness();
    let deploy = steps_of(&h, "deploy", deploy_params("demo", 18001));
    assert_eq!(deploy, [Pulled, Network, AppStarted, GatewayTested, HealthCheck]);
    assert_eq!(steps_of(&h, "stop", json!({"app": "demo"})), []);
    assert_eq!(steps_of(&h, "start", json!({"app": "demo"})), [AppStarted, HealthCheck]);
    assert_eq!(steps_of(&h, "restart", json!({"app": "demo"})), [AppStarted, HealthCheck]);
    let update = steps_of(&h, "update", json!({"app": "demo", "image": "web2"}));
    assert_eq!(update, [Pulled, AppStarted, GatewayTested, HealthCheck, Switched]);
}

// --- catalog entry objects (issue 25) ----------------------------------------

/// Tried: an update to an entry that sets `/ready` and the app's own port
/// (8080): the sealed spec carries the path; an entry that sets another
/// port than the app was deployed on refuses the update, naming both, and
/// a start of the app checks the path of the entry it was deployed by.
#[test]
fn an_update_and_a_start_use_the_catalog_entrys_health_path_and_keep_the_port() {
    use volce_lab::actions::Payload;
    let mut h = harness();
    completed(&h, "deploy", deploy_params("demo", 18001));
    let mut policy = policy_json();
    let web = policy["catalog"]["web"].clone();
    policy["catalog"]["web"] = json!({"image": web, "health_path": "/up"});
    let web2 = format!("{WEB2}{}", "d".repeat(64));
    policy["catalog"]["web2"] = json!({"image": web2, "container_port": 8080, "health_path": "/ready"});
    policy["catalog"]["other"] = json!({"image": web2, "container_port": 9090});
    h.write_policy(&policy);

    let mut c = h.controller();
    let refused = c.prepare("update", &json!({"app": "demo", "image": "other"}), AGENT).unwrap_err();
    assert_eq!(refused.code, Code::ContainerPortMismatch);
    assert!(
        refused.message.contains("container_port 9090, but demo was deployed on 8080"),
        "{}",
        refused.message
    );
    let plan = c.prepare("update", &json!({"app": "demo", "image": "web2"}), AGENT).unwrap();
    let Payload::Update(volce_lab::actions::Update { spec, .. }) = &plan.plan.payload else {
        panic!("an update plan")
    };
    assert_eq!((spec.container_port, spec.health_path.as_str()), (8080, "/ready"));

    completed(&h, "stop", json!({"app": "demo"}));
    let plan = h.controller().prepare("start", &json!({"app": "demo"}), AGENT).unwrap();
    let Payload::Start(volce_lab::actions::Start { spec, .. }) = &plan.plan.payload else {
        panic!("a start plan")
    };
    assert_eq!(spec.health_path.as_str(), "/up", "the entry `web` the app was deployed by");
}
