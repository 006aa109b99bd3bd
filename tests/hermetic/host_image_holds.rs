//! remove_image against what holds an image (issue 28), on the fake
//! engine: refused at plan time with its own code; the same holds appearing
//! between plan and execute end the plan `failed`, and so does a refusal
//! docker gives and the engine verified (for stop and remove_app too);
//! none of them blocks the host.
//! Hermetic: no root, no Docker.

use crate::support::fake_engine::*;
use crate::support::harness::*;
use serde_json::{Value, json};
use volce_lab::docker::EngineError;
use volce_lab::host::Executed;
use volce_lab::vocab::{Code, ImageHolds, PlanId};
use volce_lab::vocab::{PlanOutcome, PlanState};

const AGENT: &str = "agent";

fn remove() -> Value {
    json!({"image_id": unused_image().as_str()})
}

fn child_of_unused() -> ImageHolds {
    ImageHolds { children: vec![image('e')], tags: 0, digests: 1, references_removable: true }
}

fn two_tags() -> ImageHolds {
    ImageHolds { children: vec![], tags: 2, digests: 1, references_removable: false }
}

fn approved(h: &Harness) -> PlanId {
    let mut c = h.controller();
    let plan = c.prepare("remove_image", &remove(), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    plan.plan.id
}

/// The plan is `failed` (not_started), nothing was removed, and the host
/// takes the next plan at once.
fn assert_failed_and_nothing_blocked(h: &Harness, id: &PlanId) {
    let mut c = h.controller();
    let stored = c.load(id, "root").unwrap();
    assert_eq!(stored.state, PlanState::Failed);
    assert_eq!(stored.outcome, Some(PlanOutcome::NotStarted));
    assert!(h.engine.snapshot_now().images.contains(&unused_image()), "the image is still there");
    c.prepare("deploy", &deploy_params("demo", 18001), AGENT).expect("the host is not blocked");
}

#[test]
fn remove_image_of_an_image_other_images_are_built_on_is_refused_at_plan_time() {
    let h = Harness::new();
    h.engine.edit(|s| {
        s.image_holds.insert(unused_image(), child_of_unused());
    });
    let refused = h.controller().prepare("remove_image", &remove(), AGENT).unwrap_err();
    assert_eq!(refused.code, Code::ImageHasChildren);
    assert!(refused.message.contains(image('e').as_str()), "{}", refused.message);
    assert!(h.engine.mutations().is_empty());
}

#[test]
fn remove_image_of_an_image_with_an_extra_tag_is_refused_at_plan_time() {
    let h = Harness::new();
    h.engine.edit(|s| {
        s.image_holds.insert(unused_image(), two_tags());
    });
    let refused = h.controller().prepare("remove_image", &remove(), AGENT).unwrap_err();
    assert_eq!(refused.code, Code::ImageHasReferences);
    assert!(h.engine.mutations().is_empty());
}

#[test]
fn holds_that_appear_between_plan_and_execute_end_the_plan_failed_and_block_nothing() {
    for (hold, code) in [(child_of_unused(), Code::ImageHasChildren), (two_tags(), Code::ImageHasReferences)]
    {
        let h = Harness::new();
        let id = approved(&h);
        h.engine.edit(|s| {
            s.image_holds.insert(unused_image(), hold.clone());
        });
        let refused = h.controller().execute(&id, AGENT).unwrap_err();
        assert_eq!(refused.code, code);
        assert!(h.engine.mutations().is_empty(), "{code}: nothing was asked to change");
        assert_failed_and_nothing_blocked(&h, &id);
    }
}

/// A stopped foreign container changes the plan's scope (every container
/// using the image is in it): still `failed` with image_in_use, not void.
#[test]
fn a_container_using_the_image_since_the_plan_ends_it_failed_with_image_in_use() {
    let h = Harness::new();
    let id = approved(&h);
    h.engine.edit(|s| {
        s.snapshot.containers.push(foreign_container(container_id('7'), "custom", unused_image(), "exited"));
    });
    let refused = h.controller().execute(&id, AGENT).unwrap_err();
    assert_eq!(refused.code, Code::ImageInUse);
    assert!(h.engine.mutations().is_empty());
    assert_failed_and_nothing_blocked(&h, &id);
}

/// What docker refuses after the last check (the engine saw the image
/// unchanged afterwards): `failed` with engine_refused, not
/// needs_inspection.
#[test]
fn a_verified_engine_refusal_at_execute_is_failed_and_blocks_nothing() {
    let h = Harness::new();
    let id = approved(&h);
    h.engine.edit(|s| s.fail_next = Some(EngineError::Refused { step: "remove image" }));
    match h.controller().execute(&id, AGENT).unwrap() {
        Executed::Failed { plan_id, refusal, .. } => {
            assert_eq!(plan_id, id);
            assert_eq!(refusal.code, Code::EngineRefused);
            assert!(refusal.message.contains("nothing changed"), "{}", refusal.message);
            assert!(refusal.message.contains("blocks nothing"), "{}", refusal.message);
        }
        other => panic!("expected failed, got {other:?}"),
    }
    assert_failed_and_nothing_blocked(&h, &id);
}

/// The contrast: a failure that was not verified still needs an operator.
#[test]
fn an_unverified_engine_failure_at_execute_still_needs_inspection() {
    let h = Harness::new();
    let id = approved(&h);
    h.engine.edit(|s| s.fail_next = Some(EngineError::Unparsable { step: "remove image" }));
    assert!(matches!(h.controller().execute(&id, AGENT).unwrap(), Executed::NeedsInspection { .. }));
    let refused = h.controller().prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap_err();
    assert_eq!(refused.code, Code::InspectionRequired);
}

/// The same rule for stop and remove_app: a first change docker refused
/// and the engine verified (`Refused`) ends the plan `failed`, leaves the
/// app's record as it was and blocks nothing.
#[test]
fn a_verified_refusal_of_stop_or_remove_app_is_failed_and_keeps_the_record() {
    use volce_lab::control::app_record::AppState;
    for action in ["stop", "remove_app"] {
        let h = Harness::new();
        let mut c = h.controller();
        let deploy = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
        assert!(matches!(c.execute(&deploy.plan.id, AGENT).unwrap(), Executed::Completed(_)));
        let plan = c.prepare(action, &json!({"app": "demo"}), AGENT).unwrap();
        c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
        h.engine.edit(|s| s.fail_next = Some(EngineError::Refused { step: "disable restart" }));
        let Executed::Failed { refusal, .. } = c.execute(&plan.plan.id, AGENT).unwrap() else {
            panic!("{action}: expected failed");
        };
        assert_eq!(refusal.code, Code::EngineRefused, "{action}");
        assert!(refusal.message.contains(action), "{action}: {}", refusal.message);
        let stored = c.load(&plan.plan.id, "root").unwrap();
        assert_eq!((stored.state, stored.outcome), (PlanState::Failed, Some(PlanOutcome::NotStarted)));
        let inventory = c.inventory(AGENT).unwrap();
        assert_eq!(inventory.apps[0].recorded_state, AppState::Running, "{action}: the record is as it was");
        c.prepare(action, &json!({"app": "demo"}), AGENT).expect("the host is not blocked");
    }
}
