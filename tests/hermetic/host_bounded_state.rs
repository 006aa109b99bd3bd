//! Bounded state (issue 14): retention prunes old plans on prepare, the
//! per-requester cap on pending plans, capacity floors on every prepare.
//! Hermetic: the fake engine and an adjustable clock.

use serde_json::json;
use volce_lab::vocab::Code;

use crate::support::fake_engine::unused_image;
use crate::support::harness::{Harness, policy_json};

const AGENT: &str = "agent";

fn remove_image() -> serde_json::Value {
    json!({"image_id": unused_image().as_str()})
}

fn plans(h: &Harness) -> i64 {
    h.controller()
        .store_for_tests()
        .dangerous_connection_for_tests()
        .query_row("SELECT count(*) FROM plans", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn the_33rd_unexpired_pending_plan_of_a_requester_is_refused_with_a_way_out() {
    let h = Harness::new();
    let mut c = h.controller();
    for _ in 0..volce_lab::store::MAX_PENDING_PER_REQUESTER {
        c.prepare("remove_image", &remove_image(), AGENT).unwrap();
    }
    let refused = c.prepare("remove_image", &remove_image(), AGENT).unwrap_err();
    assert_eq!(refused.code, Code::PendingPlansLimit);
    assert!(refused.message.contains("reject"), "{}", refused.message);
    // Another requester is not held up; and once they expire, room again.
    c.prepare("remove_image", &remove_image(), "other").unwrap();
    h.clock.advance(601);
    c.prepare("remove_image", &remove_image(), AGENT).unwrap();
}

#[test]
fn prepare_prunes_plans_past_retention_and_records_it() {
    let mut h = Harness::new();
    let mut policy = policy_json();
    policy["retention_days"] = json!(1);
    h.write_policy(&policy);
    let mut c = h.controller();
    for _ in 0..5 {
        c.prepare("remove_image", &remove_image(), AGENT).unwrap();
    }
    let before = plans(&h);
    // Expired ten minutes after they were made; a day later they are due.
    h.clock.advance(86_400 + 601);
    h.controller().prepare("remove_image", &remove_image(), AGENT).unwrap();
    assert_eq!(plans(&h), before - 5 + 1);
    let rows = volce_lab::host::audit::export(&h.paths, None, true).unwrap();
    let pruned: Vec<serde_json::Value> = rows
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r["event"] == "pruned")
        .collect();
    assert_eq!(pruned.len(), 1, "{rows}");
    assert_eq!((pruned[0]["count"].as_i64(), pruned[0]["operation"].as_str()), (Some(5), Some("retention")));
    assert!(volce_lab::host::audit::verify(&h.paths, None).unwrap().1);
}

#[test]
fn a_retention_outside_its_range_refuses_the_policy() {
    for bad in [json!(0), json!(3651), json!(1.5), json!("90")] {
        let mut policy = policy_json();
        policy["retention_days"] = bad.clone();
        let bytes = serde_json::to_vec(&policy).unwrap();
        let error = volce_lab::control::policy::Policy::from_json(&bytes).unwrap_err();
        assert!(error.0.contains("retention_days"), "{bad}: {error}");
    }
}

#[test]
fn every_prepare_not_only_deploy_is_refused_below_the_capacity_floors() {
    let h = Harness::new();
    h.engine.edit(|state| state.capacity.free_disk_bytes = 1 << 20);
    let before = plans(&h);
    let refused = h.controller().prepare("remove_image", &remove_image(), AGENT).unwrap_err();
    assert_eq!(refused.code, Code::InsufficientCapacity);
    assert_eq!(plans(&h), before, "nothing stored");
}
