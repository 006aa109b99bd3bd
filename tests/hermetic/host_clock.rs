//! A wrong wall clock between prepare and execute (or approve): stepped back
//! or forward by an hour. Expiry follows the boot clock on one boot, and a
//! wall clock that disagrees with it is refused (`clock_skew`); nothing
//! reaches the engine. Hermetic: the controller on the fake engine with the
//! harness's two clocks (`TestClock::step_wall` moves the wall clock only).

use serde_json::json;
use volce_lab::vocab::Code;

use crate::support::fake_engine::unused_image;
use crate::support::harness::*;

const AGENT: &str = "agent";

fn code<T: std::fmt::Debug>(result: Result<T, volce_lab::vocab::Refusal>) -> Code {
    result.expect_err("must be refused").code
}

#[test]
fn wall_clock_stepped_back_an_hour_does_not_extend_a_plans_life() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    h.clock.advance(601);
    h.clock.step_wall(-3600);
    assert_eq!(code(c.execute(&plan.plan.id, AGENT)), Code::PlanExpired);
    assert!(h.engine.mutations().is_empty());
}

#[test]
fn wall_clock_stepped_back_an_hour_within_the_ttl_is_clock_skew() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    h.clock.advance(30);
    h.clock.step_wall(-3600);
    assert_eq!(code(c.execute(&plan.plan.id, AGENT)), Code::ClockSkew);
    assert!(h.engine.mutations().is_empty());
}

#[test]
fn wall_clock_stepped_forward_an_hour_is_refused_at_approve_and_execute() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    h.clock.advance(30);
    h.clock.step_wall(3600);
    // The wall clock alone says expired; the boot clock says 30 s. Either
    // way the plan is refused, never run.
    assert_eq!(code(c.approve(&plan.plan.id, &plan.plan.digest, "alice")), Code::ClockSkew);
    let deploy = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    h.clock.step_wall(3600);
    assert_eq!(code(c.execute(&deploy.plan.id, AGENT)), Code::ClockSkew);
    assert!(h.engine.mutations().is_empty());
}

#[test]
fn a_clock_step_inside_the_tolerance_still_executes() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    h.clock.advance(30);
    h.clock.step_wall(-60);
    assert!(c.execute(&plan.plan.id, AGENT).is_ok());
    assert_eq!(h.engine.mutations().len(), 1);
}

#[test]
fn the_rpc_reply_for_a_stepped_clock_names_the_code() {
    let h = Harness::new();
    let plan = h.controller().prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    h.clock.step_wall(3600);
    let request = json!({"operation": "execute", "plan_id": plan.plan.id.as_str()}).to_string();
    let reply = serde_json::to_value(h.rpc(AGENT, request.as_bytes())).unwrap();
    assert_eq!(reply["code"], "clock_skew", "{reply}");
    assert!(reply["message"].as_str().unwrap().contains("prepare a new plan"), "{reply}");
}
