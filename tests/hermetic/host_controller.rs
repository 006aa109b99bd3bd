//! The controller end to end on a fake engine (in one process): plan life
//! cycle, approval rules, exactly-once execution, drift, expiry, failures,
//! the rpc pipeline and the operator's view. Hermetic: no root, no Docker.

use crate::support::fake_engine::*;
use crate::support::harness::*;
use serde_json::{Value, json};
use volce_lab::control::app_record::AppState;
use volce_lab::docker::EngineError;
use volce_lab::host::Executed;
use volce_lab::host::rpc::Reply;
use volce_lab::vocab::PlanState;
use volce_lab::vocab::{Code, Digest, PlanId, PublishedPort};
use volce_lab::wire::answers::Open;
use volce_lab::wire::answers::app_state::{DriftReason, EngineState};
use volce_lab::wire::answers::execution::ExecutionOutcome;
use volce_lab::wire::answers::inventory::{Inventory, ManagedApp};

const AGENT: &str = "agent";

/// Deploys `demo` on 18001 and returns the plan id.
fn deploy_demo(h: &Harness) -> PlanId {
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    assert!(!plan.plan.requires_approval);
    match c.execute(&plan.plan.id, AGENT).unwrap() {
        Executed::Completed(result) => assert_eq!(result.outcome, ExecutionOutcome::Completed),
        other => panic!("deploy should complete: {other:?}"),
    }
    plan.plan.id
}

fn refusal<T: std::fmt::Debug>(result: Result<T, volce_lab::vocab::Refusal>) -> Code {
    result.expect_err("must be refused").code
}

#[test]
fn deploy_executes_once_and_records_the_app() {
    let h = Harness::new();
    let id = deploy_demo(&h);
    let mutations = h.engine.mutations();
    assert_eq!(mutations.len(), 1);
    assert_eq!(mutations[0][0], "deploy");
    assert_eq!(mutations[0][1], "demo");
    assert_eq!(mutations[0][2], id.as_str());
    assert!(mutations[0][3].contains("@sha256:"), "the pinned reference goes to the engine");
    let inventory = h.controller().inventory(AGENT).unwrap();
    assert_eq!(inventory.apps[0].app.as_str(), "demo");
    assert_eq!(inventory.apps[0].state, EngineState::Running);
    assert_eq!(inventory.unsettled_plan, None);
    assert_eq!(refusal(h.controller().execute(&id, AGENT)), Code::PlanConsumed);
}

#[test]
fn deploying_an_existing_app_is_refused() {
    let h = Harness::new();
    deploy_demo(&h);
    let code = refusal(h.controller().prepare("deploy", &deploy_params("demo", 18002), AGENT));
    assert_eq!(code, Code::AppExists);
    assert_eq!(
        refusal(h.controller().prepare("deploy", &deploy_params("other", 18001), AGENT)),
        Code::PortPublished
    );
}

#[test]
fn an_existing_unmanaged_container_is_never_touched() {
    let h = Harness::new();
    let before = h.engine.snapshot_now().containers.into_iter().find(|c| c.id == prod_id()).unwrap();
    deploy_demo(&h);
    assert_eq!(refusal(h.controller().prepare("stop", &json!({"app": "prod"}), AGENT)), Code::AppNotFound);
    let mut c = h.controller();
    let stop = c.prepare("stop", &json!({"app": "demo"}), AGENT).unwrap();
    c.approve(&stop.plan.id, &stop.plan.digest, "alice").unwrap();
    c.execute(&stop.plan.id, AGENT).unwrap();
    for call in h.engine.calls() {
        assert!(!call.iter().any(|arg| arg.contains(prod_id().as_str())), "prod appeared in {call:?}");
    }
    let after = h.engine.snapshot_now().containers.into_iter().find(|c| c.id == prod_id()).unwrap();
    assert_eq!(before, after);
}

#[test]
fn stop_needs_approval_and_executes_exactly_the_recorded_containers() {
    let h = Harness::new();
    deploy_demo(&h);
    let mut c = h.controller();
    let stop = c.prepare("stop", &json!({"app": "demo"}), AGENT).unwrap();
    assert!(stop.plan.requires_approval);
    let refused = c.execute(&stop.plan.id, AGENT).unwrap_err();
    assert_eq!(refused.code, Code::ApprovalRequired);
    // The refusal names the operator's whole next command, and never hands
    // over an approve line (the digest must come from `show` on the server).
    let show = format!("`sudo volce-lab-host show {}`", stop.plan.id);
    assert!(refused.message.contains(&show), "{}", refused.message);
    assert!(
        !refused.message.contains("host approve") && !refused.message.contains(stop.plan.digest.as_str())
    );
    c.approve(&stop.plan.id, &stop.plan.digest, "alice").unwrap();
    assert!(matches!(c.execute(&stop.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    let last = h.engine.mutations().pop().unwrap();
    assert_eq!(last[0], "stop");
    assert_eq!(last.len(), 3, "exactly the two recorded containers: {last:?}");
    assert_eq!(refusal(c.execute(&stop.plan.id, AGENT)), Code::PlanConsumed);
    assert_eq!(h.controller().inventory(AGENT).unwrap().apps[0].state, EngineState::Stopped);
}

#[test]
fn approve_with_a_wrong_digest_is_refused() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    let wrong = Digest::parse(&"0".repeat(64)).unwrap();
    assert_eq!(refusal(c.approve(&plan.plan.id, &wrong, "alice")), Code::DigestMismatch);
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::ApprovalRequired);
}

#[test]
fn approve_twice_is_refused() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    assert_eq!(refusal(c.approve(&plan.plan.id, &plan.plan.digest, "bob")), Code::AlreadyApproved);
}

#[test]
fn approve_after_expiry_is_refused() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    h.clock.advance(601);
    assert_eq!(refusal(c.approve(&plan.plan.id, &plan.plan.digest, "alice")), Code::PlanExpired);
}

#[test]
fn the_plan_lifetime_is_the_policys_plan_ttl_seconds() {
    let mut h = Harness::new();
    let mut policy = policy_json();
    policy["plan_ttl_seconds"] = json!(60);
    h.write_policy(&policy);
    let mut c = h.controller();
    let plan = c.prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    assert_eq!(plan.plan.expires_at - plan.plan.created_at, 60);
    h.clock.advance(61);
    assert_eq!(refusal(c.approve(&plan.plan.id, &plan.plan.digest, "alice")), Code::PlanExpired);
    let deploy = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    h.clock.advance(61);
    assert_eq!(refusal(c.execute(&deploy.plan.id, AGENT)), Code::PlanExpired);
    assert!(h.engine.mutations().is_empty());
}

#[test]
fn deploy_and_nginx_config_need_approval_once_the_operator_adds_them() {
    let mut h = Harness::new();
    deploy_demo(&h);
    let mut policy = policy_json();
    policy["approval_required"] =
        json!(["stop", "remove_image", "remove_app", "start", "update", "deploy", "nginx_config"]);
    h.write_policy(&policy);
    let mut c = h.controller();
    let nginx =
        c.prepare("nginx_config", &json!({"app": "demo", "server_name": "new.example.com"}), AGENT).unwrap();
    let deploy = c.prepare("deploy", &deploy_params("other", 18002), AGENT).unwrap();
    for plan in [&nginx, &deploy] {
        assert!(plan.plan.requires_approval, "{:?}", plan.plan.action);
        assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::ApprovalRequired);
        assert_eq!(refusal(c.approve(&plan.plan.id, &plan.plan.digest, AGENT)), Code::NotAnApprover);
        c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
        assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    }
}

#[test]
fn a_plan_made_before_approval_required_grew_is_void_at_execute() {
    let mut h = Harness::new();
    let deploy = h.controller().prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    assert!(!deploy.plan.requires_approval);
    let mut policy = policy_json();
    policy["approval_required"] = json!(["stop", "remove_image", "remove_app", "start", "update", "deploy"]);
    h.write_policy(&policy);
    // Its policy hash is the old one: void, never executed without approval.
    assert_eq!(refusal(h.controller().execute(&deploy.plan.id, AGENT)), Code::PolicyChanged);
    assert!(h.engine.mutations().is_empty());
}

#[test]
fn a_stored_plan_whose_approval_rule_is_not_its_policys_is_corrupt() {
    let mut h = Harness::new();
    let mut policy = policy_json();
    policy["approval_required"] = json!(["stop", "remove_image", "remove_app", "start", "update", "deploy"]);
    h.write_policy(&policy);
    let mut c = h.controller();
    let honest = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    // The same plan re-sealed as needing no approval, under the same policy
    // hash: the digest matches, only the policy in force can tell.
    let mut forged = honest.plan.clone();
    forged.id = PlanId::parse(&"f0".repeat(16)).unwrap();
    forged.requires_approval = false;
    forged.digest = forged.compute_digest();
    let row = volce_lab::store::AuditRow {
        at: forged.created_at,
        event: volce_lab::store::Event::Prepared,
        outcome: volce_lab::store::AuditOutcome::Ok,
        exit_code: None,
        duration_ms: None,
        actor: AGENT.into(),
        process: None,
    };
    c.store_for_tests().write(|tx| tx.insert_plan(&forged, &row)).unwrap();
    assert_eq!(refusal(c.execute(&forged.id, AGENT)), Code::PlanCorrupt);
    assert!(h.engine.mutations().is_empty());
}

#[test]
fn approve_by_the_requester_is_refused() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("remove_image", &json!({"image_id": unused_image().as_str()}), "alice").unwrap();
    assert_eq!(refusal(c.approve(&plan.plan.id, &plan.plan.digest, "alice")), Code::SelfApproval);
}

#[test]
fn approve_by_a_user_not_in_approvers_is_refused() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    assert_eq!(refusal(c.approve(&plan.plan.id, &plan.plan.digest, "mallory")), Code::NotAnApprover);
    assert_eq!(refusal(c.approve(&plan.plan.id, &plan.plan.digest, "root")), Code::NotAnApprover);
}

#[test]
fn approve_of_a_plan_that_needs_none_is_refused() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    assert_eq!(refusal(c.approve(&plan.plan.id, &plan.plan.digest, "alice")), Code::ApprovalNotRequired);
}

#[test]
fn execute_without_approval_is_refused_and_changes_nothing() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::ApprovalRequired);
    assert!(h.engine.mutations().is_empty());
    let stored = c.load(&plan.plan.id, AGENT).unwrap();
    assert_eq!(stored.state, PlanState::Pending);
}

#[test]
fn execute_twice_is_refused() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    c.execute(&plan.plan.id, AGENT).unwrap();
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::PlanConsumed);
    assert_eq!(refusal(h.controller().execute(&plan.plan.id, AGENT)), Code::PlanConsumed);
    assert_eq!(h.engine.mutations(), vec![vec!["remove_image".to_owned(), unused_image().to_string()]]);
}

#[test]
fn execute_after_expiry_is_refused() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    h.clock.advance(600);
    h.clock.advance(1);
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::PlanExpired);
    assert!(h.engine.mutations().is_empty());
}

#[test]
fn execute_after_a_policy_change_is_refused_and_the_plan_is_void() {
    let mut h = Harness::new();
    let plan = {
        let mut c = h.controller();
        let plan = c.prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
        c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
        plan
    };
    let mut policy = policy_json();
    policy["max_apps"] = json!(2);
    h.write_policy(&policy);
    assert_eq!(refusal(h.controller().execute(&plan.plan.id, AGENT)), Code::PolicyChanged);
    // Restoring the old policy does not revive the approval.
    h.write_policy(&policy_json());
    assert_eq!(refusal(h.controller().execute(&plan.plan.id, AGENT)), Code::PlanInvalidated);
    assert!(h.engine.mutations().is_empty());
}

#[test]
fn execute_after_snapshot_drift_is_refused_and_the_approval_is_void() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    // Someone removed the image by hand: its target changed. (A container
    // now using it ends the plan `failed` instead: host_image_holds.)
    h.engine.edit(|s| s.snapshot.images.retain(|i| *i != unused_image()));
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::SnapshotChanged);
    h.engine.edit(|s| s.snapshot.images.push(unused_image()));
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::PlanInvalidated);
    assert!(h.engine.mutations().is_empty());
    let events: Vec<_> = c
        .store_for_tests()
        .read(|tx| tx.audit_of(&plan.plan.id))
        .unwrap()
        .into_iter()
        .map(|a| a.event)
        .collect();
    // Claimed first (committed), then voided by a conditional transition.
    assert_eq!(events, ["prepared", "approved", "claimed", "invalidated"]);
    assert_eq!(c.inventory(AGENT).unwrap().unsettled_plan, None, "nothing is blocked");
}

/// A foreign container in a restart loop, flipping state between every
/// look of the controller.
fn flip_foreign(h: &Harness) {
    h.engine.edit(|s| {
        let prod = s.snapshot.containers.iter_mut().find(|c| c.id == prod_id()).unwrap();
        prod.state = if prod.state == "running" { "restarting".into() } else { "running".into() };
    });
}

#[test]
fn a_foreign_container_changing_state_voids_no_plan() {
    let h = Harness::new();
    deploy_demo(&h);
    let mut c = h.controller();
    let stop = c.prepare("stop", &json!({"app": "demo"}), AGENT).unwrap();
    let nginx =
        c.prepare("nginx_config", &json!({"app": "demo", "server_name": "new.example.com"}), AGENT).unwrap();
    let deploy = c.prepare("deploy", &deploy_params("other", 18002), AGENT).unwrap();
    flip_foreign(&h);
    c.approve(&stop.plan.id, &stop.plan.digest, "alice").unwrap();
    // Also a foreign container created and one removed.
    h.engine.edit(|s| {
        s.snapshot.containers.push(foreign_container(container_id('f'), "newcomer", used_image(), "created"))
    });
    // (A deploy creates containers of ours, which would void the stop: it goes last.)
    for plan in [&nginx, &stop, &deploy] {
        flip_foreign(&h);
        match c.execute(&plan.plan.id, AGENT).unwrap() {
            Executed::Completed(result) => assert_eq!(result.outcome, ExecutionOutcome::Completed),
            other => panic!("{:?} must complete: {other:?}", plan.plan.action),
        }
    }
    assert_eq!(h.engine.mutations().last().unwrap()[0], "deploy");
}

#[test]
fn a_change_to_the_target_of_an_approved_stop_voids_it_after_the_claim() {
    let h = Harness::new();
    deploy_demo(&h);
    let mut c = h.controller();
    let stop = c.prepare("stop", &json!({"app": "demo"}), AGENT).unwrap();
    c.approve(&stop.plan.id, &stop.plan.digest, "alice").unwrap();
    // Its gateway is restarting now: the app's state is not what was approved.
    h.engine.edit(|s| {
        let gateway = s.snapshot.containers.iter_mut().find(|c| c.name == "vl-demo-gateway").unwrap();
        gateway.state = "restarting".into();
    });
    let before = h.engine.mutations().len();
    assert_eq!(refusal(c.execute(&stop.plan.id, AGENT)), Code::SnapshotChanged);
    assert_eq!(h.engine.mutations().len(), before, "nothing was asked of the engine");
    let stored = c.load(&stop.plan.id, "root").unwrap();
    assert_eq!(stored.state, PlanState::Invalidated);
    assert_eq!(stored.outcome, Some(volce_lab::vocab::PlanOutcome::SnapshotChanged));
    let inventory = c.inventory(AGENT).unwrap();
    let demo = inventory.apps.iter().find(|a| a.app.as_str() == "demo").unwrap();
    assert_eq!(demo.recorded_state, AppState::Running, "the record is untouched");
    // The engine disagrees with the record now, and inventory says so.
    assert_eq!(demo.state, EngineState::Drifted);
    assert_eq!(drift_of(demo), Some(DriftReason::RecordRunningButStopped));
}

#[test]
fn a_foreign_container_taking_the_port_of_a_planned_deploy_voids_it() {
    let h = Harness::new();
    let mut c = h.controller();
    let deploy = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    h.engine.edit(|s| {
        let mut squatter = foreign_container(container_id('f'), "squatter", used_image(), "running");
        squatter.ports = vec![PublishedPort {
            host_ip: "0.0.0.0".into(),
            host_port: 18001,
            container_port: 80,
            protocol: "tcp".into(),
        }];
        s.snapshot.containers.push(squatter)
    });
    assert_eq!(refusal(c.execute(&deploy.plan.id, AGENT)), Code::SnapshotChanged);
    assert!(h.engine.mutations().is_empty());
    assert_eq!(c.load(&deploy.plan.id, "root").unwrap().state, PlanState::Invalidated);
}

#[test]
fn an_engine_outage_after_the_claim_spends_the_plan_changes_nothing_and_blocks_nothing() {
    let h = Harness::new();
    let mut c = h.controller();
    let deploy = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    h.engine.edit(|s| s.snapshot_fails = true);
    assert_eq!(refusal(c.execute(&deploy.plan.id, AGENT)), Code::EngineUnavailable);
    assert!(h.engine.mutations().is_empty());
    let stored = c.load(&deploy.plan.id, "root").unwrap();
    assert_eq!(
        (stored.state, stored.outcome),
        (PlanState::Failed, Some(volce_lab::vocab::PlanOutcome::NotStarted))
    );
    h.engine.edit(|s| s.snapshot_fails = false);
    assert_eq!(refusal(c.execute(&deploy.plan.id, AGENT)), Code::PlanConsumed, "nothing retries");
    c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
}

#[test]
fn unknown_and_malformed_plan_ids_have_their_own_codes() {
    let h = Harness::new();
    let mut c = h.controller();
    assert_eq!(refusal(c.execute(&PlanId::parse(&"a".repeat(32)).unwrap(), AGENT)), Code::PlanNotFound);
    assert_eq!(refusal(PlanId::parse("not-a-plan")), Code::InvalidPlanId);
}

#[test]
fn an_engine_failure_leaves_needs_inspection_and_blocks_new_plans() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    h.engine.edit(|s| s.fail_next = Some(EngineError::HealthCheckFailed));
    match c.execute(&plan.plan.id, AGENT).unwrap() {
        Executed::NeedsInspection { plan_id, message } => {
            assert_eq!(plan_id, plan.plan.id);
            assert!(message.contains("partial"));
        }
        other => panic!("expected needs_inspection, got {other:?}"),
    }
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::PlanConsumed);
    assert_eq!(refusal(c.prepare("deploy", &deploy_params("other", 18002), AGENT)), Code::InspectionRequired);
    assert_eq!(h.engine.mutations().len(), 1, "nothing was retried");
    let inventory = c.inventory(AGENT).unwrap();
    assert_eq!(inventory.apps[0].recorded_state, AppState::NeedsInspection);
    assert_eq!(inventory.apps[0].state, EngineState::Drifted);
    assert_eq!(drift_of(&inventory.apps[0]), Some(DriftReason::NeedsInspection));
    assert_eq!(inventory.unsettled_plan.unwrap().state, Open::Known(PlanState::NeedsInspection));
}

#[test]
fn nginx_config_updates_the_recorded_gateway_and_record() {
    let h = Harness::new();
    deploy_demo(&h);
    let mut c = h.controller();
    let plan =
        c.prepare("nginx_config", &json!({"app": "demo", "server_name": "new.example.com"}), AGENT).unwrap();
    assert!(!plan.plan.requires_approval);
    c.execute(&plan.plan.id, AGENT).unwrap();
    let last = h.engine.mutations().pop().unwrap();
    assert_eq!(last[0], "update_nginx");
    assert!(last[1].ends_with("state/apps/demo"), "{last:?}");
    assert_eq!(c.inventory(AGENT).unwrap().apps[0].server_name.as_str(), "new.example.com");
}

#[test]
fn a_changed_container_set_refuses_nginx_config_and_stop() {
    let h = Harness::new();
    deploy_demo(&h);
    h.engine.edit(|s| {
        let mut intruder = s.snapshot.containers[0].clone();
        intruder.id = container_id('7');
        intruder.name = "intruder".into();
        intruder.labels.insert(volce_lab::vocab::LABEL_APP.into(), "demo".into());
        s.snapshot.containers.push(intruder);
    });
    let mut c = h.controller();
    assert_eq!(refusal(c.prepare("stop", &json!({"app": "demo"}), AGENT)), Code::ContainerSetChanged);
    assert_eq!(
        refusal(c.prepare("nginx_config", &json!({"app": "demo", "server_name": "x.example.com"}), AGENT)),
        Code::ContainerSetChanged
    );
}

#[test]
fn the_audit_trail_has_one_row_per_change_and_no_free_text() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    c.execute(&plan.plan.id, AGENT).unwrap();
    let audit = c.store_for_tests().read(|tx| tx.audit_of(&plan.plan.id)).unwrap();
    let rows: Vec<_> =
        audit.iter().map(|a| (a.event.as_str(), a.outcome.as_str(), a.actor.as_str())).collect();
    assert_eq!(
        rows,
        [
            ("prepared", "ok", "agent"),
            ("approved", "ok", "alice"),
            ("claimed", "ok", "agent"),
            ("completed", "ok", "agent")
        ]
    );
    assert!(audit[3].duration_ms.is_some());
    // The audit table's columns are exactly the categories and numbers,
    // and the two hashes of the chain.
    let columns: Vec<String> = c
        .store_for_tests()
        .dangerous_connection_for_tests()
        .prepare("SELECT name FROM pragma_table_info('audit')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        columns,
        [
            "seq",
            "at",
            "event",
            "plan_id",
            "action",
            "outcome",
            "exit_code",
            "duration_ms",
            "actor",
            "operation",
            "app",
            "code",
            "process",
            "request_id",
            "count",
            "sudo_uid",
            "login_uid",
            "prev_hash",
            "hash",
            // Migration 8 (appended by ALTER TABLE): a gate refusal's
            // reason, the command's length and its sha256, never its text.
            "gate_reason",
            "command_bytes",
            "command_sha256",
            // Migration 10: the anchor an audit prune row set.
            "anchor_seq",
            "anchor_hash",
            // Migration 16: a count row's distinct command digests (a
            // JSON list of sha256s, never text) and the repeats beyond.
            "command_digests",
            "commands_beyond",
            // Migration 17: a signed approval's key fingerprint and the
            // sha256 of the statement it signed.
            "signer_key",
            "statement_sha256"
        ]
    );
}

#[test]
fn a_plan_stores_its_payload_and_digest_immutably() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    let json = serde_json::to_value(plan.view()).unwrap();
    for key in [
        "id",
        "action",
        "digest",
        "requires_approval",
        "expires_at",
        "impact",
        "payload",
        "snapshot_digest",
        "policy_hash",
        "requester",
        "state",
    ] {
        assert!(json.get(key).is_some(), "{key} missing from {json}");
    }
    assert_eq!(json["expires_at"], "2027-01-15T08:10:00Z", "RFC 3339 UTC, START + 600 s");
    assert_eq!(json["created_at"], "2027-01-15T08:00:00Z");
    assert_eq!(json["impact"]["data_volumes_deleted"], false);
    assert_eq!(
        json["payload"]["spec"]["nginx_config"],
        volce_lab::nginx::render("demo.example.com", 8080, volce_lab::nginx::AccessLog::Off)
    );
    assert_eq!(plan.plan.compute_digest(), plan.plan.digest);
    let reread = c.load(&plan.plan.id, AGENT).unwrap();
    assert_eq!(reread.plan, plan.plan);
}

// --- the rpc pipeline (library form of `volce-lab-host rpc`) ---------------

fn rpc(h: &Harness, caller: &str, request: &str) -> Value {
    let reply = h.rpc(caller, request.as_bytes());
    let json = reply.to_json();
    assert_eq!(reply.exit() == volce_lab::exit::Exit::Ok, json["status"] == "ok");
    json
}

#[test]
fn rpc_plans_and_executes_with_the_wire_contract() {
    let h = Harness::new();
    let request =
        json!({"operation": "plan", "action": "deploy", "parameters": deploy_params("demo", 18001)});
    let reply = rpc(&h, AGENT, &request.to_string());
    assert_eq!(reply["status"], "ok");
    assert_eq!(reply["operation"], "plan");
    let id = reply["result"]["id"].as_str().unwrap().to_owned();
    assert_eq!(reply["result"]["state"], "pending");
    let reply = rpc(&h, AGENT, &json!({"operation": "execute", "plan_id": id}).to_string());
    assert_eq!(reply["result"]["outcome"], "completed", "{reply}");
    let reply = rpc(&h, AGENT, &json!({"operation": "execute", "plan_id": id}).to_string());
    assert_eq!(reply, json!({"status": "rejected", "code": "plan_consumed", "message": reply["message"]}));
    let reply = rpc(&h, AGENT, r#"{"operation":"gateway_status"}"#);
    assert_eq!(reply["result"]["gateways"][0]["name"], "vl-demo-gateway");
    assert_eq!(reply["result"]["gateways"][0]["state"], "running");
}

#[test]
fn rpc_refuses_approval_through_any_field_or_operation() {
    let h = Harness::new();
    let plan = rpc(&h, AGENT, &json!({"operation":"plan","action":"remove_image","parameters":{"image_id": unused_image().as_str()}}).to_string());
    let id = plan["result"]["id"].as_str().unwrap();
    let digest = plan["result"]["digest"].as_str().unwrap();
    for request in [
        json!({"operation": "approve", "plan_id": id, "digest": digest}),
        json!({"operation": "execute", "plan_id": id, "approved": true}),
        json!({"operation": "execute", "plan_id": id, "digest": digest}),
        json!({"operation": "execute", "plan_id": id, "approver": "alice"}),
    ] {
        let reply = rpc(&h, AGENT, &request.to_string());
        assert_eq!(reply["code"], "invalid_request", "{request} -> {reply}");
    }
    let reply = rpc(&h, AGENT, &json!({"operation": "execute", "plan_id": id}).to_string());
    assert_eq!(reply["code"], "approval_required");
    assert!(h.engine.mutations().is_empty());
}

#[test]
fn rpc_reports_needs_inspection_without_engine_details() {
    let h = Harness::new();
    let plan = rpc(
        &h,
        AGENT,
        &json!({"operation":"plan","action":"deploy","parameters": deploy_params("demo", 18001)}).to_string(),
    );
    let id = plan["result"]["id"].as_str().unwrap();
    h.engine.edit(|s| {
        s.fail_next = Some(EngineError::Call {
            step: "pull app image",
            execution: volce_lab::exec::Execution::not_started(volce_lab::exec::ExecutionStatus::NonzeroExit),
        })
    });
    let reply = rpc(&h, AGENT, &json!({"operation": "execute", "plan_id": id}).to_string());
    assert_eq!(reply["status"], "needs_inspection");
    assert_eq!(reply["code"], "needs_inspection");
    assert_eq!(reply["plan_id"], id);
    assert!(!reply.to_string().contains("pull"), "engine details stay on the host: {reply}");
}

#[test]
fn rpc_refuses_an_unsafe_policy_before_touching_the_engine() {
    let h = Harness::new();
    std::fs::set_permissions(&h.paths.policy, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let reply = rpc(&h, AGENT, r#"{"operation":"inventory"}"#);
    assert_eq!(reply["code"], "unsafe_path");
    // The agent learns that the installation is broken, not how.
    assert!(reply["message"].as_str().unwrap().contains("doctor"), "{reply}");
    assert!(!reply.to_string().contains("policy.json"), "{reply}");
    assert!(h.engine.calls().is_empty());
}

#[test]
fn rpc_keeps_the_reason_a_policy_is_refused_from_the_agent() {
    let h = Harness::new();
    std::fs::write(&h.paths.policy, br#"{"catalog":{"web":"OPERATOR-SECRET-REGISTRY/web:latest"}}"#).unwrap();
    let reply = rpc(&h, AGENT, r#"{"operation":"inventory"}"#);
    assert_eq!(reply["status"], "rejected");
    assert_eq!(reply["code"], "policy_invalid");
    assert!(!reply.to_string().contains("OPERATOR-SECRET"), "{reply}");
    assert!(h.engine.calls().is_empty());
}

#[test]
fn rpc_maps_an_engine_outage_to_a_fixed_sentence() {
    let h = Harness::new();
    h.engine.edit(|s| s.snapshot_fails = true);
    let reply = rpc(&h, AGENT, r#"{"operation":"inventory"}"#);
    assert_eq!(reply["code"], "engine_unavailable");
    assert_eq!(reply["message"], "The container engine could not be queried; nothing was changed.");
}

#[test]
fn an_oversized_request_is_refused() {
    let h = Harness::new();
    let big =
        format!(r#"{{"operation":"plan","action":"deploy","parameters":{{"app":"{}"}}}}"#, "a".repeat(17000));
    assert_eq!(rpc(&h, AGENT, &big)["code"], "request_too_large");
}

// --- show / approve (library form of the terminal commands) ----------------

#[test]
fn show_prints_the_plan_and_the_exact_approve_command() {
    let h = Harness::new();
    deploy_demo(&h);
    let mut c = h.controller();
    let plan = c.prepare("stop", &json!({"app": "demo"}), AGENT).unwrap();
    drop(c);
    let text = h.show(&plan.plan.id);
    assert!(text.contains("(stop)"), "{text}");
    assert!(text.contains("vl-demo-app"));
    assert!(text.contains("Data volumes deleted: never"));
    assert!(text.contains("10 min 0 s left"), "{text}");
    assert!(text.contains(&format!("sudo volce-lab-host approve {} {}", plan.plan.id, plan.plan.digest)));
    let json = h.show_json(&plan.plan.id);
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["digest"], plan.plan.digest.as_str());
    assert_eq!(json["state"], "pending");
}

#[test]
fn show_escapes_agent_text() {
    let h = Harness::new();
    let mut c = h.controller();
    // The only free text that reaches a stored plan is the requester name,
    // validated upstream; force a hostile one in through the library.
    let plan = c
        .prepare("remove_image", &json!({"image_id": unused_image().as_str()}), "evil\u{202e}\x1b[2J")
        .unwrap();
    drop(c);
    let text = h.show(&plan.plan.id);
    assert!(!text.contains('\u{202e}') && !text.contains('\x1b'), "{text:?}");
    assert!(text.contains("evil\\u{202e}\\u{001b}[2J"));
}

#[test]
fn approve_through_the_library_records_who_and_when() {
    let h = Harness::new();
    let plan =
        h.controller().prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    let text = h.approve(&plan.plan.id, plan.plan.digest.as_str(), "bob").unwrap();
    assert!(text.contains("Approved plan"));
    let stored = h.controller().load(&plan.plan.id, "root").unwrap();
    let approval = stored.approval.unwrap();
    assert_eq!(approval.by, "bob");
    assert_eq!(approval.at, START);
    let bad = h.approve(&plan.plan.id, "xyz", "bob");
    assert_eq!(bad.unwrap_err().code, Code::InvalidDigest);
}

#[test]
fn a_second_controller_sees_the_first_ones_approval() {
    let h = Harness::new();
    let plan =
        h.controller().prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    h.controller().approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    assert!(matches!(h.controller().execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
}

#[test]
fn replies_are_one_line() {
    let reply = Reply::from(volce_lab::vocab::Refusal::new(Code::PlanExpired, "x"));
    assert_eq!(reply.to_line().matches('\n').count(), 1);
}

#[test]
fn a_pending_plan_does_not_execute_while_another_needs_inspection() {
    let h = Harness::new();
    let mut c = h.controller();
    let older = c.prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    c.approve(&older.plan.id, &older.plan.digest, "alice").unwrap();
    let failing = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    h.engine.edit(|s| s.fail_next = Some(EngineError::NginxRejected));
    assert!(matches!(c.execute(&failing.plan.id, AGENT).unwrap(), Executed::NeedsInspection { .. }));
    assert_eq!(refusal(c.execute(&older.plan.id, AGENT)), Code::InspectionRequired);
    assert_eq!(h.engine.mutations().len(), 1);
}

#[test]
fn show_gives_before_and_after_for_deploy_and_nginx_config() {
    let h = Harness::new();
    let deploy = h.controller().prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    let show = |id: &PlanId| h.show(id);
    let text = show(&deploy.plan.id);
    assert!(text.contains("no approval needed"), "{text}");
    assert!(text.contains("vl-demo-gateway (gateway)"), "{text}");
    assert!(text.contains("publishes 127.0.0.1:18001:8080"), "{text}");
    assert!(text.contains("server_name demo.example.com;"), "the rendered config is shown: {text}");
    assert!(!text.contains("approve "), "no approve command for a plan that needs none");
    h.controller().execute(&deploy.plan.id, AGENT).unwrap();
    let nginx = h
        .controller()
        .prepare("nginx_config", &json!({"app": "demo", "server_name": "new.example.com"}), AGENT)
        .unwrap();
    let text = show(&nginx.plan.id);
    assert!(text.contains("Before   server_name demo.example.com"), "{text}");
    assert!(text.contains("After    server_name new.example.com"), "{text}");
    h.clock.advance(700);
    assert!(show(&nginx.plan.id).contains("EXPIRED"));
}

// --- resolve (terminal only) -------------------------------------------------

/// A deploy of `demo` whose health check failed and whose rollback the
/// engine could not verify: needs_inspection.
fn failed_deploy(h: &Harness) -> PlanId {
    failed_deploy_of(h, "demo", 18001)
}

#[test]
fn resolve_reopens_the_host_for_new_plans_and_frees_a_failed_deploy() {
    let h = Harness::new();
    let id = failed_deploy(&h);
    assert_eq!(
        refusal(h.controller().prepare("deploy", &deploy_params("other", 18002), AGENT)),
        Code::InspectionRequired
    );
    assert_eq!(refusal(h.resolve(&id, "mallory")), Code::NotAnApprover);
    let before = h.show(&id);
    assert!(before.contains(&format!("sudo volce-lab-host resolve {id}")), "{before}");
    let text = h.resolve(&id, "alice").unwrap();
    assert!(text.contains("now inspected"), "{text}");
    assert!(text.contains("record is removed"), "{text}");
    let stored = h.controller().load(&id, "root").unwrap();
    assert_eq!(stored.state, PlanState::Inspected);
    assert_eq!(stored.resolution.as_ref().unwrap().by, "alice");
    let audit = h.controller().store_for_tests().read(|tx| tx.audit_of(&id)).unwrap();
    assert_eq!(audit.last().unwrap().event, "inspected");
    // The failed app no longer holds its name, port or quota slot.
    let inventory = h.controller().inventory(AGENT).unwrap();
    assert_eq!(app_names(&inventory), ["legacy"], "demo is gone");
    assert_eq!(inventory.unsettled_plan, None);
    h.controller().prepare("deploy", &deploy_params("other", 18001), AGENT).unwrap();
    assert_eq!(refusal(h.resolve(&id, "alice")), Code::NotAwaitingInspection, "resolve twice");
    let show = h.show(&id);
    assert!(show.contains("State    inspected"), "{show}");
    assert!(show.contains("Resolved inspected by alice"), "{show}");
    assert!(show.contains("Outcome  engine_failed"), "{show}");
    assert!(!show.contains("volce-lab-host resolve"), "no resolve hint once inspected: {show}");
}

#[test]
fn the_requester_may_resolve_but_a_pending_or_unknown_plan_is_not_resolvable() {
    let h = Harness::new();
    let pending = h.controller().prepare("deploy", &deploy_params("demo", 18001), "alice").unwrap();
    assert_eq!(refusal(h.resolve(&pending.plan.id, "alice")), Code::NotAwaitingInspection);
    let unknown = PlanId::parse(&"f".repeat(32)).unwrap();
    assert_eq!(refusal(h.resolve(&unknown, "alice")), Code::PlanNotFound);
    let mut c = h.controller();
    h.engine.edit(|s| s.fail_next = Some(EngineError::HealthCheckFailed));
    c.execute(&pending.plan.id, "alice").unwrap();
    // Resolving authorizes no change, so the requester may attest too.
    h.resolve(&pending.plan.id, "alice").unwrap();
}

#[test]
fn resolve_keeps_the_record_of_an_app_whose_containers_still_exist() {
    let h = Harness::new();
    let id = failed_deploy(&h);
    // The failed deploy's clean-up left a container behind.
    h.engine.edit(|s| {
        s.snapshot.containers.push(foreign_container(container_id('e'), "vl-demo-app", image('a'), "exited"))
    });
    let text = h.resolve(&id, "bob").unwrap();
    assert!(text.contains("is kept (needs_inspection)") && text.contains("vl-demo-app"), "{text}");
    let inventory = h.controller().inventory(AGENT).unwrap();
    assert_eq!(inventory.apps[0].recorded_state, AppState::NeedsInspection);
    assert_eq!(inventory.apps[0].state, EngineState::Drifted);
    assert_eq!(drift_of(&inventory.apps[0]), Some(DriftReason::NeedsInspection));
    assert_eq!(refusal(h.controller().prepare("stop", &json!({"app": "demo"}), AGENT)), Code::AppNotRunning);
    assert_eq!(
        refusal(h.controller().prepare("deploy", &deploy_params("demo", 18002), AGENT)),
        Code::AppExists
    );
}

#[test]
fn resolve_is_refused_through_rpc_as_an_unknown_operation() {
    let h = Harness::new();
    let id = failed_deploy(&h);
    for request in [
        json!({"operation": "resolve", "plan_id": id}),
        json!({"operation": "execute", "plan_id": id, "resolve": true}),
    ] {
        let reply = rpc(&h, AGENT, &request.to_string());
        assert_eq!(reply["code"], "invalid_request", "{request} -> {reply}");
    }
    assert_eq!(h.controller().load(&id, "root").unwrap().state, PlanState::NeedsInspection);
}

// --- failures that provably changed nothing ---------------------------------

#[test]
fn a_rejected_nginx_config_that_was_rolled_back_is_failed_and_blocks_nothing() {
    let h = Harness::new();
    deploy_demo(&h);
    let plan = rpc(
        &h,
        AGENT,
        &json!({"operation":"plan","action":"nginx_config","parameters":{"app":"demo","server_name":"new.example.com"}})
            .to_string(),
    );
    let id = plan["result"]["id"].as_str().unwrap().to_owned();
    h.engine.edit(|s| s.fail_next = Some(EngineError::NginxRejectedAndRestored));
    let reply = rpc(&h, AGENT, &json!({"operation": "execute", "plan_id": id}).to_string());
    assert_eq!(reply["status"], "rejected", "{reply}");
    assert_eq!(reply["code"], "nginx_rejected", "{reply}");
    assert!(reply["message"].as_str().unwrap().contains("old configuration was restored"), "{reply}");
    let id = PlanId::parse(&id).unwrap();
    let stored = h.controller().load(&id, "root").unwrap();
    assert_eq!(stored.state, PlanState::Failed);
    assert_eq!(stored.outcome, Some(volce_lab::vocab::PlanOutcome::RolledBack));
    let audit = h.controller().store_for_tests().read(|tx| tx.audit_of(&id)).unwrap();
    assert_eq!(
        (audit.last().unwrap().event.as_str(), audit.last().unwrap().outcome.as_str()),
        ("failed", "failed")
    );
    // The app keeps running with its old record; the host is not blocked.
    let inventory = h.controller().inventory(AGENT).unwrap();
    assert_eq!(inventory.apps[0].state, EngineState::Running);
    assert_eq!(inventory.apps[0].server_name.as_str(), "demo.example.com");
    assert_eq!(inventory.unsettled_plan, None);
    assert_eq!(refusal(h.controller().execute(&id, AGENT)), Code::PlanConsumed, "nothing retries");
    assert_eq!(refusal(h.resolve(&id, "alice")), Code::NotAwaitingInspection);
    let again = h
        .controller()
        .prepare("nginx_config", &json!({"app": "demo", "server_name": "other.example.com"}), AGENT)
        .unwrap();
    assert!(matches!(h.controller().execute(&again.plan.id, AGENT).unwrap(), Executed::Completed(_)));
}

#[test]
fn a_failed_restore_still_needs_inspection() {
    let h = Harness::new();
    deploy_demo(&h);
    let mut c = h.controller();
    let plan =
        c.prepare("nginx_config", &json!({"app": "demo", "server_name": "new.example.com"}), AGENT).unwrap();
    h.engine.edit(|s| s.fail_next = Some(EngineError::Host { step: "restore the previous nginx.conf" }));
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::NeedsInspection { .. }));
    assert_eq!(c.inventory(AGENT).unwrap().apps[0].recorded_state, AppState::NeedsInspection);
    assert_eq!(refusal(c.prepare("stop", &json!({"app": "demo"}), AGENT)), Code::InspectionRequired);
}

#[test]
fn a_deploy_refused_before_its_first_step_holds_nothing_and_blocks_nothing() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    h.engine.edit(|s| s.fail_next = Some(EngineError::PortTaken { port: 18001 }));
    match c.execute(&plan.plan.id, AGENT).unwrap() {
        Executed::Failed { plan_id, refusal, .. } => {
            assert_eq!(plan_id, plan.plan.id);
            assert_eq!(refusal.code, Code::PortInUse);
        }
        other => panic!("expected failed, got {other:?}"),
    }
    let stored = c.load(&plan.plan.id, "root").unwrap();
    assert_eq!(stored.outcome, Some(volce_lab::vocab::PlanOutcome::NotStarted));
    let inventory = c.inventory(AGENT).unwrap();
    assert_eq!(app_names(&inventory), ["legacy"], "no record holds the name, port or quota slot");
    c.prepare("deploy", &deploy_params("demo", 18002), AGENT).unwrap();
}

#[test]
fn a_failed_health_check_with_a_verified_rollback_is_failed_and_the_next_plan_is_accepted_at_once() {
    let h = Harness::new();
    let plan = rpc(
        &h,
        AGENT,
        &json!({"operation": "plan", "action": "deploy", "parameters": deploy_params("demo", 18001)})
            .to_string(),
    );
    let id = plan["result"]["id"].as_str().unwrap().to_owned();
    // What the docker engine returns once its listing of the plan's label
    // came back empty after the removals.
    h.engine.edit(|s| {
        s.fail_next =
            Some(EngineError::RolledBack { cause: Box::new(EngineError::HealthCheckFailed), app_log: None })
    });
    let reply = rpc(&h, AGENT, &json!({"operation": "execute", "plan_id": id}).to_string());
    assert_eq!(reply["status"], "rejected", "{reply}");
    assert_eq!(reply["code"], "health_check_failed", "{reply}");
    let message = reply["message"].as_str().unwrap();
    for words in
        ["failed and was rolled back", "verified gone", "container_port", "prepare a new deploy plan"]
    {
        assert!(message.contains(words), "{words:?} in {message}");
    }
    let id = PlanId::parse(&id).unwrap();
    let stored = h.controller().load(&id, "root").unwrap();
    assert_eq!(stored.state, PlanState::Failed);
    assert_eq!(stored.outcome, Some(volce_lab::vocab::PlanOutcome::RolledBack));
    let inventory = h.controller().inventory(AGENT).unwrap();
    assert_eq!(app_names(&inventory), ["legacy"], "no record holds the name, port or quota slot");
    assert_eq!(inventory.unsettled_plan, None);
    assert_eq!(refusal(h.controller().execute(&id, AGENT)), Code::PlanConsumed, "nothing retries");
    assert_eq!(refusal(h.resolve(&id, "alice")), Code::NotAwaitingInspection, "nothing to resolve");
    // The corrected plan, same name and port, is accepted and runs at once.
    let again = h.controller().prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    assert!(matches!(h.controller().execute(&again.plan.id, AGENT).unwrap(), Executed::Completed(_)));
}

#[test]
fn a_deploy_step_failure_with_a_verified_rollback_names_the_step_and_no_docker_output() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    let execution = volce_lab::exec::Execution::not_started(volce_lab::exec::ExecutionStatus::NonzeroExit);
    let cause = EngineError::Call { step: "pull app image", execution };
    h.engine.edit(|s| s.fail_next = Some(EngineError::RolledBack { cause: Box::new(cause), app_log: None }));
    match c.execute(&plan.plan.id, AGENT).unwrap() {
        Executed::Failed { refusal, .. } => {
            assert_eq!(refusal.code, Code::DeployFailed);
            assert!(refusal.message.contains("step 'pull app image'"), "{}", refusal.message);
            assert!(!refusal.message.contains("NonzeroExit"), "no Debug dump: {}", refusal.message);
        }
        other => panic!("expected failed, got {other:?}"),
    }
    c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
}

#[test]
fn a_catalog_image_with_volumes_is_refused_at_plan_time_over_rpc_and_nothing_is_recorded() {
    let h = Harness::new();
    let reference = format!("127.0.0.1:15000/volce-lab/web@sha256:{}", "a".repeat(64));
    h.engine.edit(|s| {
        s.image_volumes.insert(reference, vec!["/data".into()]);
    });
    let plan = json!({"operation": "plan", "action": "deploy", "parameters": deploy_params("demo", 18001)});
    let reply = rpc(&h, AGENT, &plan.to_string());
    assert_eq!(reply["status"], "rejected", "{reply}");
    assert_eq!(reply["code"], "image_declares_volumes", "{reply}");
    let message = reply["message"].as_str().unwrap();
    assert!(message.contains("`/data`") && message.contains("rebuild the image without VOLUME"), "{message}");
    assert!(h.engine.calls().iter().all(|c| c[0] != "deploy"), "nothing ran");
    h.engine.edit(|s| s.image_volumes.clear());
    assert!(
        h.controller().prepare("deploy", &deploy_params("demo", 18001), AGENT).is_ok(),
        "no plan held it"
    );
}

#[test]
fn an_image_found_to_declare_volumes_after_the_pull_fails_the_plan_with_the_same_code() {
    let h = Harness::new();
    let mut c = h.controller();
    // Not local at plan time: the deploy pulls it and finds the VOLUME.
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    let image = volce_lab::vocab::ImageRef::parse(&format!(
        "127.0.0.1:15000/volce-lab/web@sha256:{}",
        "a".repeat(64)
    ))
    .unwrap();
    let cause = EngineError::ImageDeclaresVolumes { image, volumes: vec!["/data".into()] };
    h.engine.edit(|s| s.fail_next = Some(EngineError::RolledBack { cause: Box::new(cause), app_log: None }));
    match c.execute(&plan.plan.id, AGENT).unwrap() {
        Executed::Failed { refusal, .. } => {
            assert_eq!(refusal.code, Code::ImageDeclaresVolumes);
            assert!(refusal.message.contains("before any container was created"), "{}", refusal.message);
        }
        other => panic!("expected failed, got {other:?}"),
    }
    let stored = c.load(&plan.plan.id, "root").unwrap();
    assert_eq!(stored.state, PlanState::Failed, "blocks nothing");
}

fn app_names(inventory: &Inventory) -> Vec<String> {
    inventory.apps.iter().map(|a| a.app.to_string()).collect()
}

/// Why the app drifted, when it did.
fn drift_of(app: &ManagedApp) -> Option<DriftReason> {
    match app.drift.as_ref()?.reason {
        Open::Known(reason) => Some(reason),
        Open::Other(_) => None,
    }
}

// --- remove_image only for images volce-lab has a claim on -------------------

#[test]
fn a_completed_deploy_records_the_image_ids_its_containers_run() {
    let h = Harness::new();
    deploy_demo(&h);
    let apps = h.controller().store_for_tests().read(|tx| tx.apps()).unwrap();
    // The fake runs the app on image a and the gateway on image b.
    assert_eq!(apps["demo"].image_ids, [image('a'), image('b')]);
}

#[test]
fn remove_image_of_an_image_no_app_of_ours_used_is_refused_as_not_managed() {
    let h = Harness::new();
    let foreign = image('f');
    h.engine.edit(|s| s.snapshot.images.push(foreign.clone()));
    let reply = rpc(
        &h,
        AGENT,
        &json!({"operation":"plan","action":"remove_image","parameters":{"image_id": foreign.as_str()}})
            .to_string(),
    );
    assert_eq!(reply["status"], "rejected", "{reply}");
    assert_eq!(reply["code"], "image_not_managed", "{reply}");
    assert!(h.engine.mutations().is_empty());
}

#[test]
fn remove_image_of_a_deployed_apps_image_works_once_its_containers_are_gone() {
    let h = Harness::new();
    deploy_demo(&h);
    let mut c = h.controller();
    // In use by demo's running container: refused.
    assert_eq!(
        refusal(c.prepare("remove_image", &json!({"image_id": image('a').as_str()}), AGENT)),
        Code::ImageInUse
    );
    // An operator removed demo's containers by hand: the claim remains.
    h.engine.edit(|s| s.snapshot.containers.retain(|c| c.app() != Some("demo")));
    let plan = c.prepare("remove_image", &json!({"image_id": image('a').as_str()}), AGENT).unwrap();
    let text = h.show(&plan.plan.id);
    assert!(text.contains("used by app(s) volce-lab deployed: demo"), "{text}");
    assert!(text.contains("used by app demo"), "the impact names the app too: {text}");
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    assert_eq!(
        h.engine.mutations().last().unwrap(),
        &vec!["remove_image".to_owned(), image('a').to_string()]
    );
}

// --- the operator's list and reject (terminal only) ---------------------------

fn remove_image_plan(h: &Harness) -> PlanId {
    h.controller()
        .prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT)
        .unwrap()
        .plan
        .id
}

/// The audit events of one plan, oldest first.
fn events(h: &Harness, id: &PlanId) -> Vec<String> {
    h.controller()
        .store_for_tests()
        .read(|tx| tx.audit_of(id))
        .unwrap()
        .into_iter()
        .map(|a| a.event)
        .collect()
}

#[test]
fn list_shows_what_awaits_newest_first_then_the_apps() {
    let h = Harness::new();
    deploy_demo(&h);
    let stop = h.controller().prepare("stop", &json!({"app": "demo"}), AGENT).unwrap().plan.id;
    h.clock.advance(90);
    let nginx = h
        .controller()
        .prepare("nginx_config", &json!({"app": "demo", "server_name": "new.example.com"}), AGENT)
        .unwrap()
        .plan
        .id;
    let text = h.list(false);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("2 plans await you"), "{text}");
    assert!(lines[1].split_whitespace().eq([
        "PLAN",
        "STATE",
        "ACTION",
        "APP",
        "REQUESTER",
        "AGE",
        "LEFT",
        "APPROVED"
    ]));
    let row = |line: &str| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    // Newest first: the nginx_config plan, made 90 s after the stop plan.
    assert_eq!(
        row(lines[2]),
        [
            nginx.as_str(),
            "pending",
            "nginx_config",
            "demo",
            AGENT,
            "0",
            "s",
            "10",
            "min",
            "0",
            "s",
            "not",
            "needed"
        ]
    );
    assert_eq!(
        row(lines[3]),
        [stop.as_str(), "pending", "stop", "demo", AGENT, "1", "min", "8", "min", "30", "s", "NO"]
    );
    assert!(text.contains("sudo volce-lab-host show PLAN_ID"), "{text}");
    assert!(text.contains("sudo volce-lab-host reject PLAN_ID"), "{text}");
    assert!(!text.contains("volce-lab-host approve"), "list never hands out an approve line: {text}");
    // The seeded plan of `legacy` expired long ago: counted, not listed.
    assert!(text.contains("1 expired plan is not shown"), "{text}");
    let apps = &text[text.find("Apps volce-lab manages").expect(&text)..];
    assert!(apps.contains("demo") && apps.contains("running") && apps.contains("18001"), "{apps}");
    assert!(apps.contains("legacy") && apps.contains("stopped"), "{apps}");
    // An approval shows up; expiry drops a plan off the list.
    h.approve(&stop, h.controller().load(&stop, "root").unwrap().plan.digest.as_str(), "alice").unwrap();
    assert!(h.list(false).contains("yes, by alice"));
    h.clock.advance(600 - 90 + 1);
    let text = h.list(false);
    assert!(!text.contains(stop.as_str()) && text.contains(nginx.as_str()), "{text}");
    assert!(text.contains("2 expired plans are not shown"), "{text}");
}

#[test]
fn list_shows_a_plan_that_needs_inspection_and_how_to_resolve_it() {
    let h = Harness::new();
    let id = failed_deploy(&h);
    let text = h.list(false);
    let line = text.lines().find(|l| l.contains(id.as_str())).expect(&text);
    assert!(line.contains("needs_inspection") && line.contains(" - "), "no time left once claimed: {line}");
    assert!(text.contains("sudo volce-lab-host resolve PLAN_ID"), "{text}");
    h.resolve(&id, "alice").unwrap();
    assert!(h.list(false).starts_with("No plan awaits you"), "an inspected plan awaits nothing");
}

#[test]
fn list_json_has_stable_fields_and_rfc3339_times() {
    let h = Harness::new();
    let id = remove_image_plan(&h);
    let json: Value = serde_json::from_str(&h.list(true)).unwrap();
    assert_eq!(json["now"], "2027-01-15T08:00:00Z");
    assert_eq!(json["expired_pending"], 1);
    assert_eq!(
        json["plans"][0],
        json!({
            "plan_id": id.as_str(), "state": "pending", "action": "remove_image", "app": null,
            "requester": AGENT, "created_at": "2027-01-15T08:00:00Z", "expires_at": "2027-01-15T08:10:00Z",
            "age_seconds": 0, "seconds_left": 600, "requires_approval": true, "approved": false,
            "approved_by": null, "approved_at": null, "claimer_stopped_pid": null,
            "claimer_stuck_on_output_pid": null,
        })
    );
    assert_eq!(json["plans"].as_array().unwrap().len(), 1);
    assert_eq!(
        json["apps"],
        json!([{"app": "legacy", "state": "stopped", "host_port": 18990, "server_name": "legacy.example.com",
                "also_server_names": [], "image": "web", "last_plan": "1e".repeat(16)}])
    );
}

#[test]
fn list_when_nothing_awaits_says_so_in_one_line() {
    let h = Harness::new();
    let text = h.list(false);
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("No plan awaits you:") && first.contains("volce-lab-host show PLAN_ID"),
        "{text}"
    );
    assert_eq!(serde_json::from_str::<Value>(&h.list(true)).unwrap()["plans"], json!([]));
}

#[test]
fn list_escapes_agent_text_in_text_and_json() {
    let h = Harness::new();
    h.controller()
        .prepare("remove_image", &json!({"image_id": unused_image().as_str()}), "evil\u{202e}\x1b[2J\u{9b}")
        .unwrap();
    for json in [false, true] {
        let text = h.list(json);
        assert!(!text.contains('\u{202e}') && !text.contains('\x1b') && !text.contains('\u{9b}'), "{text:?}");
        if json {
            let value: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(
                value["plans"][0]["requester"], "evil\u{202e}\x1b[2J\u{9b}",
                "same value, escaped bytes"
            );
        } else {
            assert!(text.contains("evil\\u{202e}\\u{001b}[2J\\u{009b}"), "{text}");
        }
    }
}

#[test]
fn reject_ends_an_approved_plan_and_the_agent_sees_plan_rejected() {
    let h = Harness::new();
    let id = remove_image_plan(&h);
    let digest = h.controller().load(&id, "root").unwrap().plan.digest;
    h.approve(&id, digest.as_str(), "alice").unwrap();
    h.clock.advance(30);
    let text = h.reject(id.as_str(), "bob").unwrap();
    assert!(text.contains(&format!("Rejected plan {id} (remove_image) as bob")), "{text}");
    let stored = h.controller().load(&id, "root").unwrap();
    assert_eq!(stored.state, PlanState::Rejected);
    let rejection = stored.rejection.unwrap();
    assert_eq!((rejection.by.as_str(), rejection.at), ("bob", START + 30));
    assert_eq!(events(&h, &id), ["prepared", "approved", "rejected"]);
    let shown = h.show(&id);
    assert!(shown.contains("State    rejected"), "{shown}");
    assert!(shown.contains("Rejected by bob at 2027-01-15T08:00:30Z"), "{shown}");
    assert!(shown.contains("(no longer matters: the plan is rejected)"), "no time left: {shown}");
    assert!(!shown.contains("volce-lab-host approve") && !shown.contains("volce-lab-host reject"), "{shown}");
    // The agent's execute: refused with its own code, nothing runs.
    let reply = rpc(&h, AGENT, &json!({"operation": "execute", "plan_id": id}).to_string());
    assert_eq!(reply["status"], "rejected", "{reply}");
    assert_eq!(reply["code"], "plan_rejected", "{reply}");
    let message = reply["message"].as_str().unwrap();
    assert!(message.contains("operator rejected") && message.contains("new plan"), "{message}");
    assert!(h.engine.mutations().is_empty());
    // Neither approved again nor listed.
    assert_eq!(refusal(h.approve(&id, digest.as_str(), "bob")), Code::PlanRejected);
    assert!(!h.list(false).contains(id.as_str()));
    assert_eq!(events(&h, &id), ["prepared", "approved", "rejected"], "refusals leave no audit row");
}

#[test]
fn reject_works_on_a_plan_that_needs_no_approval_and_by_its_requester() {
    let h = Harness::new();
    let plan = h.controller().prepare("deploy", &deploy_params("demo", 18001), "alice").unwrap().plan;
    h.reject(plan.id.as_str(), "alice").unwrap();
    assert_eq!(refusal(h.controller().execute(&plan.id, "alice")), Code::PlanRejected);
    assert!(h.engine.mutations().is_empty());
    // A rejected plan blocks nothing: the same deploy can be planned again.
    h.controller().prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    let health = volce_lab::store::read_health(&h.paths.database()).unwrap().unwrap();
    assert!(health.stuck_plans.is_empty(), "doctor counts no rejected plan: {health:?}");
}

#[test]
fn reject_refusals_name_the_problem_and_change_nothing() {
    let h = Harness::new();
    let pending = remove_image_plan(&h);
    let completed = deploy_demo(&h);
    let invalidated = {
        let id = remove_image_plan(&h);
        // The image is gone (removed by hand): the plan's target changed.
        h.engine.edit(|s| s.snapshot.images.retain(|i| *i != unused_image()));
        assert_eq!(refusal(h.controller().execute(&id, AGENT)), Code::ApprovalRequired);
        let digest = h.controller().load(&id, "root").unwrap().plan.digest;
        h.approve(&id, digest.as_str(), "alice").unwrap();
        assert_eq!(refusal(h.controller().execute(&id, AGENT)), Code::SnapshotChanged);
        id
    };
    let stuck = failed_deploy_of(&h, "other", 18002);
    let snapshot = |h: &Harness| {
        let mut c = h.controller();
        let plans: Vec<_> = [&pending, &completed, &invalidated, &stuck]
            .iter()
            .map(|id| (c.load(id, "root").unwrap(), events(h, id).len()))
            .collect();
        plans
    };
    let before = snapshot(&h);
    let unknown = "f".repeat(32);
    let tried: [(&str, &str, Code, &str); 8] = [
        ("not-a-plan", "alice", Code::InvalidPlanId, "a malformed id"),
        (&pending.as_str()[..31], "alice", Code::InvalidPlanId, "an id one digit short"),
        (&unknown, "alice", Code::PlanNotFound, "a well-formed id no plan has"),
        (pending.as_str(), "mallory", Code::NotAnApprover, "a user outside approvers"),
        (pending.as_str(), "root", Code::NotAnApprover, "root without SUDO_USER"),
        (completed.as_str(), "alice", Code::PlanConsumed, "a completed plan"),
        (invalidated.as_str(), "alice", Code::PlanInvalidated, "an invalidated plan"),
        (stuck.as_str(), "alice", Code::PlanConsumed, "a plan that needs inspection"),
    ];
    for (id, operator, code, what) in tried {
        let refused = h.reject(id, operator).expect_err(what);
        assert_eq!(refused.code, code, "{what}: {refused:?}");
        if matches!(code, Code::PlanConsumed | Code::PlanInvalidated) {
            assert!(refused.message.contains("not pending"), "{what}: {}", refused.message);
        }
    }
    let stuck_refusal = h.reject(stuck.as_str(), "alice").unwrap_err().message;
    assert!(stuck_refusal.contains("needs_inspection"), "the state is named: {stuck_refusal}");
    assert_eq!(snapshot(&h), before, "nothing changed, no audit row written");
    // Twice: the second names the state it found.
    h.resolve(&stuck, "alice").unwrap();
    h.reject(pending.as_str(), "alice").unwrap();
    let twice = h.reject(pending.as_str(), "bob").unwrap_err();
    assert_eq!(twice.code, Code::PlanRejected);
    assert!(twice.message.contains("rejected, not pending"), "{}", twice.message);
    assert_eq!(h.controller().load(&pending, "root").unwrap().rejection.unwrap().by, "alice");
}

/// A deploy of `app` whose health check failed: needs_inspection.
fn failed_deploy_of(h: &Harness, app: &str, port: u16) -> PlanId {
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params(app, port), AGENT).unwrap();
    h.engine.edit(|s| s.fail_next = Some(EngineError::HealthCheckFailed));
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::NeedsInspection { .. }));
    plan.plan.id
}

#[test]
fn list_and_reject_are_unreachable_through_rpc() {
    let h = Harness::new();
    let id = remove_image_plan(&h);
    for request in [
        json!({"operation": "list"}),
        json!({"operation": "pending"}),
        json!({"operation": "reject", "plan_id": id}),
        json!({"operation": "execute", "plan_id": id, "reject": true}),
        json!({"operation": "plan", "action": "reject", "parameters": {"plan_id": id}}),
    ] {
        let reply = rpc(&h, AGENT, &request.to_string());
        assert_eq!(reply["status"], "rejected", "{request} -> {reply}");
        assert!(
            matches!(reply["code"].as_str(), Some("invalid_request" | "unknown_action")),
            "{request} -> {reply}"
        );
    }
    assert_eq!(h.controller().load(&id, "root").unwrap().state, PlanState::Pending);
    assert_eq!(events(&h, &id), ["prepared"]);
}

#[test]
fn approve_prints_the_summary_show_prints_before_it_records() {
    let h = Harness::new();
    let id = remove_image_plan(&h);
    let shown_by_show = h.show(&id);
    let digest = h.controller().load(&id, "root").unwrap().plan.digest;
    // A wrong digest is refused before the summary and the question (issue
    // 37); the refusal names `show`, which prints the summary; nothing is recorded.
    let (shown, result) = h.approve_showing(id.as_str(), &"0".repeat(64), "alice");
    let refusal = result.unwrap_err();
    assert_eq!(refusal.code, Code::DigestMismatch);
    assert_eq!(shown, "");
    assert!(refusal.message.contains(&format!("volce-lab-host show {id}")), "{}", refusal.message);
    assert_eq!(events(&h, &id), ["prepared"]);
    let (shown, result) = h.approve_showing(id.as_str(), digest.as_str(), "alice");
    assert!(shown_by_show.starts_with(&shown) && shown.contains(&format!("Digest   {digest}")), "{shown}");
    assert!(!shown.contains("type exactly") && !shown.contains("volce-lab-host"), "no next command: {shown}");
    assert!(result.unwrap().contains("Approved plan"));
    assert_eq!(events(&h, &id), ["prepared", "approved"]);
    // An unknown or malformed id shows nothing.
    let (shown, result) = h.approve_showing(&"f".repeat(32), digest.as_str(), "alice");
    assert_eq!((shown.as_str(), result.unwrap_err().code), ("", Code::PlanNotFound));
}

/// What the operator types at approve's question. Tried: nothing, a
/// wrong word, the app name of a plan without an app, a 7-character digest
/// prefix, the prefix in capitals; each refused with `not_confirmed` and
/// nothing recorded. Then the digest's first 8 characters, and (for a stop
/// plan) the app name, each approve.
#[test]
fn approve_records_only_what_the_operator_confirmed() {
    let h = Harness::new();
    let id = remove_image_plan(&h);
    let digest = h.controller().load(&id, "root").unwrap().plan.digest;
    let prefix = &digest.as_str()[..8];
    let upper = prefix.to_uppercase();
    let mut tried = vec!["", "\n", "yes", "legacy", &prefix[..7]];
    // The prefix in capitals is another answer only when it holds a letter
    // (eight digits, about 2% of random digests, are their own capitals).
    if upper != prefix {
        tried.push(&upper);
    }
    for typed in tried {
        let (shown, result) = h.approve_typing(id.as_str(), digest.as_str(), "alice", Some(typed));
        let refusal = result.unwrap_err();
        assert_eq!(refusal.code, Code::NotConfirmed, "{typed:?}");
        assert!(refusal.message.contains("nothing was recorded"), "{}", refusal.message);
        assert!(shown.contains(&format!("Digest   {digest}")), "the summary came first: {shown}");
        assert_eq!(events(&h, &id), ["prepared"], "{typed:?}");
    }
    let (_, result) = h.approve_typing(id.as_str(), digest.as_str(), "alice", Some(&format!("  {prefix}\n")));
    assert!(result.unwrap().contains("Approved plan"));
    assert_eq!(events(&h, &id), ["prepared", "approved"]);

    deploy_demo(&h);
    let stop = h.controller().prepare("stop", &json!({"app": "demo"}), AGENT).unwrap().plan;
    let (_, result) = h.approve_typing(stop.id.as_str(), stop.digest.as_str(), "alice", Some("dem"));
    assert_eq!(result.unwrap_err().code, Code::NotConfirmed);
    let (_, result) = h.approve_typing(stop.id.as_str(), stop.digest.as_str(), "alice", Some("demo\n"));
    assert!(result.unwrap().contains("Approved plan"));
}

#[test]
fn approve_prints_agent_text_escaped() {
    let h = Harness::new();
    let plan = h
        .controller()
        .prepare("remove_image", &json!({"image_id": unused_image().as_str()}), "evil\u{202e}\x1b[2J")
        .unwrap()
        .plan;
    let text = h.approve(&plan.id, plan.digest.as_str(), "alice").unwrap();
    assert!(!text.contains('\u{202e}') && !text.contains('\x1b'), "{text:?}");
    assert!(text.contains("evil\\u{202e}\\u{001b}[2J"), "{text}");
}

// --- remove_app ---------------------------------------------------------------

#[test]
fn remove_app_needs_approval_stops_then_removes_exactly_the_app_and_frees_its_name_and_port() {
    let h = Harness::new();
    deploy_demo(&h);
    let mut c = h.controller();
    let plan = c.prepare("remove_app", &json!({"app": "demo"}), AGENT).unwrap();
    assert!(plan.plan.requires_approval);
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::ApprovalRequired);
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    let show = h.show(&plan.plan.id);
    assert!(show.contains("running: stopped first") && show.contains("no volume, no image"), "{show}");
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    let call = h.engine.mutations().pop().unwrap();
    assert_eq!(call[0], "remove_app");
    assert_eq!(call[1], "demo");
    assert_eq!(call.len(), 7, "two containers, running=2, one network, the directory: {call:?}");
    assert_eq!(call[4], "running=2");
    assert_eq!(call[5], "vl-demo");
    assert!(call[6].ends_with("/state/apps/demo"), "{call:?}");
    // The prod container and every image are untouched.
    let world = h.engine.snapshot_now();
    assert!(world.containers.iter().any(|c| c.id == prod_id()));
    assert!(world.images.contains(&image('a')) && world.images.contains(&used_image()));
    let inventory = c.inventory(AGENT).unwrap();
    assert_eq!(app_names(&inventory), ["legacy"], "the record is gone");
    assert_eq!(refusal(c.execute(&plan.plan.id, AGENT)), Code::PlanConsumed, "executes once");
    // Name, port and quota slot are free again.
    let again = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    assert!(matches!(c.execute(&again.plan.id, AGENT).unwrap(), Executed::Completed(_)));
}

#[test]
fn remove_app_works_on_a_stopped_app_whose_containers_are_gone() {
    let h = Harness::new();
    let mut c = h.controller();
    // `legacy` is recorded stopped, with no container left on the engine.
    let plan = c.prepare("remove_app", &json!({"app": "legacy"}), AGENT).unwrap();
    assert!(plan.plan.impact.target.contains("stopped"), "{:?}", plan.plan.impact);
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    let call = h.engine.mutations().pop().unwrap();
    assert_eq!(call[..3], ["remove_app", "legacy", "running=0"], "no container, no network: {call:?}");
    assert!(app_names(&c.inventory(AGENT).unwrap()).is_empty());
}

#[test]
fn remove_app_refuses_bad_input_and_changes_nothing() {
    let h = Harness::new();
    deploy_demo(&h);
    let before = h.engine.mutations().len();
    let mut c = h.controller();
    // Tried: an app nobody deployed, a bad name, an extra field, approval
    // smuggled in the parameters, a missing app, a number for the name.
    for (parameters, code) in [
        (json!({"app": "ghost"}), Code::AppNotFound),
        (json!({"app": "Demo!"}), Code::InvalidAppName),
        (json!({"app": "demo", "volumes": true}), Code::InvalidParameters),
        (json!({"app": "demo", "approved": true}), Code::InvalidParameters),
        (json!({}), Code::InvalidParameters),
        (json!({"app": 7}), Code::InvalidParameters),
    ] {
        assert_eq!(refusal(c.prepare("remove_app", &parameters, AGENT)), code, "{parameters}");
    }
    // A container labelled as the app that volce-lab did not record.
    h.engine.edit(|s| {
        let mut stray = foreign_container(container_id('e'), "stray", used_image(), "running");
        stray.labels.insert(volce_lab::vocab::LABEL_APP.into(), "demo".into());
        s.snapshot.containers.push(stray);
    });
    assert_eq!(refusal(c.prepare("remove_app", &json!({"app": "demo"}), AGENT)), Code::ContainerSetChanged);
    assert_eq!(h.engine.mutations().len(), before, "nothing changed");
    assert_eq!(app_names(&c.inventory(AGENT).unwrap()), ["demo", "legacy"]);
}

#[test]
fn a_failed_remove_app_needs_inspection_and_keeps_the_record() {
    let h = Harness::new();
    deploy_demo(&h);
    let mut c = h.controller();
    let plan = c.prepare("remove_app", &json!({"app": "demo"}), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    h.engine.edit(|s| s.fail_next = Some(EngineError::Host { step: "remove the app directory" }));
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::NeedsInspection { .. }));
    let inventory = c.inventory(AGENT).unwrap();
    let demo = inventory.apps.iter().find(|a| a.app.as_str() == "demo").unwrap();
    assert_eq!(demo.recorded_state, AppState::NeedsInspection);
    assert_eq!(demo.state, EngineState::Drifted);
}

#[test]
fn after_resolve_remove_app_cleans_up_what_a_failed_deploy_left() {
    let h = Harness::new();
    let id = failed_deploy(&h);
    // The unverified rollback left the app container, labelled with the plan.
    h.engine.edit(|s| {
        let mut left = foreign_container(container_id('e'), "vl-demo-app", image('a'), "running");
        left.labels.insert(volce_lab::vocab::LABEL_APP.into(), "demo".into());
        left.labels.insert(volce_lab::vocab::LABEL_PLAN.into(), id.to_string());
        s.snapshot.containers.push(left);
    });
    assert_eq!(
        refusal(h.controller().prepare("remove_app", &json!({"app": "demo"}), AGENT)),
        Code::InspectionRequired,
        "not before the operator looked"
    );
    assert!(h.resolve(&id, "bob").unwrap().contains("is kept (needs_inspection)"));
    let mut c = h.controller();
    let plan = c.prepare("remove_app", &json!({"app": "demo"}), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    let call = h.engine.mutations().pop().unwrap();
    assert_eq!(call[..4], ["remove_app".to_owned(), "demo".into(), "e".repeat(64), "running=1".into()]);
    assert_eq!(app_names(&c.inventory(AGENT).unwrap()), ["legacy"]);
    c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
}

/// The policy of [`policy_json`] with `web` as an object entry.
fn policy_with_web_entry(container_port: u16, health_path: &str) -> Value {
    let mut policy = policy_json();
    let image = policy["catalog"]["web"].clone();
    policy["catalog"]["web"] =
        json!({"image": image, "container_port": container_port, "health_path": health_path});
    policy
}

/// Tried: a deploy that leaves container_port out under an entry that sets
/// 3000 and `/healthz`: the sealed plan carries both, the engine is handed
/// them, and a wrong agent port is refused before anything is stored.
#[test]
fn a_deploy_takes_its_port_and_health_path_from_the_catalog_entry() {
    use volce_lab::actions::Payload;
    let mut h = Harness::new();
    h.write_policy(&policy_with_web_entry(3000, "/healthz"));
    let mut params = deploy_params("demo", 18001);
    params.as_object_mut().unwrap().remove("container_port");
    let mut c = h.controller();
    let plan = c.prepare("deploy", &params, AGENT).unwrap();
    let Payload::Deploy(volce_lab::actions::Deploy { spec, .. }) = &plan.plan.payload else {
        panic!("a deploy plan")
    };
    assert_eq!((spec.container_port, spec.health_path.as_str()), (3000, "/healthz"));
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    let wrong = c.prepare("deploy", &deploy_params("other", 18002), AGENT);
    assert_eq!(refusal(wrong), Code::ContainerPortMismatch);
}

/// Tried: the operator changes only the entry's health path while a deploy
/// plan waits: its policy hash no longer matches, so it is void at execute.
#[test]
fn changing_a_catalog_entrys_health_path_voids_its_pending_plans() {
    let mut h = Harness::new();
    h.write_policy(&policy_with_web_entry(8080, "/healthz"));
    let deploy = h.controller().prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    h.write_policy(&policy_with_web_entry(8080, "/ready"));
    assert_eq!(refusal(h.controller().execute(&deploy.plan.id, AGENT)), Code::PolicyChanged);
    assert!(h.engine.mutations().is_empty());
}
