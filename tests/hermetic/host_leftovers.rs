//! What a plan whose claimer died may have left: `show` and `resolve` name
//! every container and network carrying its label `io.volce-lab.plan`, and
//! nothing else, read-only; with the engine down they say so and still
//! answer. Hermetic: the fake engine, a claim by a reaped child process.

use std::collections::BTreeMap;

use crate::support::fake_engine::*;
use crate::support::harness::*;
use volce_lab::store::{AuditOutcome, AuditRow, Claim, Event};
use volce_lab::vocab::Action;
use volce_lab::vocab::{Container, LABEL_APP, LABEL_PLAN, LABEL_ROLE, PlanId};
use volce_lab::vocab::{PlanOutcome, PlanState};

const AGENT: &str = "agent";

/// A deploy of `demo` claimed by a process that is already dead (a relayed
/// TERM killed it midway), with what it created before it died: its app
/// container and its network. Beside them, a container of another plan.
fn died_midway_deploy(h: &Harness) -> PlanId {
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    let id = plan.plan.id.clone();
    let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
    let pid = child.id() as i32;
    child.wait().unwrap();
    let claim = Claim { pid, start_time: 0, boot_id: volce_lab::host::liveness::boot_id().unwrap() };
    let row = AuditRow {
        at: START,
        event: Event::Claimed,
        outcome: AuditOutcome::Ok,
        exit_code: None,
        duration_ms: None,
        actor: AGENT.into(),
        process: None,
    };
    c.store_for_tests().write(|tx| tx.claim(&id, Action::Deploy, &claim, &row)).unwrap();
    let labelled = |plan: &str, name: &str, c: char, state: &str| Container {
        id: container_id(c),
        name: name.into(),
        image_id: image('a'),
        state: state.into(),
        labels: BTreeMap::from([
            (LABEL_APP.to_owned(), "demo".to_owned()),
            (LABEL_ROLE.to_owned(), "app".to_owned()),
            (LABEL_PLAN.to_owned(), plan.to_owned()),
        ]),
        ports: vec![],
    };
    let mut state = h.engine.state.lock().unwrap();
    state.snapshot.containers.push(labelled(id.as_str(), "vl-demo-app", 'd', "created"));
    state.snapshot.containers.push(labelled(&"ee".repeat(16), "vl-other-app", 'e', "running"));
    state.snapshot.networks.push("vl-demo".into());
    state.network_plans.insert("vl-demo".into(), id.to_string());
    id
}

/// Tried: show, then resolve, after a deploy's claimer died leaving a
/// container and a network. Both name each of them (id, name, state), not
/// the other plan's container, and the way to clean up; nothing is changed
/// on the engine.
#[test]
fn show_and_resolve_name_every_object_carrying_the_dead_plans_label() {
    let h = Harness::new();
    let id = died_midway_deploy(&h);
    let shown = h.show(&id);
    assert!(shown.contains("needs_inspection"), "{shown}");
    let container = format!("container {} vl-demo-app (created)", container_id('d'));
    assert!(shown.contains(&container), "{shown}");
    assert!(shown.contains(" vl-demo\n") && shown.contains("network "), "{shown}");
    assert!(shown.contains(&format!("{LABEL_PLAN}={id}")), "{shown}");
    assert!(!shown.contains("vl-other-app"), "another plan's container is not this plan's: {shown}");
    assert!(shown.contains("remove_app") && shown.contains(&format!("resolve {id}")), "{shown}");
    let stored = h.controller().load(&id, "root").unwrap();
    assert_eq!(stored.outcome, Some(PlanOutcome::ClaimerDied));

    let resolved = h.resolve(&id, "alice").unwrap();
    assert!(resolved.contains(&container), "{resolved}");
    assert!(resolved.contains(" vl-demo\n"), "{resolved}");
    assert_eq!(h.controller().load(&id, "root").unwrap().state, PlanState::Inspected);
    assert!(h.engine.mutations().is_empty(), "naming leftovers changes nothing");
}

/// Tried: show with the engine down. The plan is still shown, with the
/// commands that list its objects by hand.
#[test]
fn show_with_the_engine_down_says_it_could_not_ask_and_how_to_look() {
    let h = Harness::new();
    let id = died_midway_deploy(&h);
    h.engine.state.lock().unwrap().snapshot_fails = true;
    let shown = h.show(&id);
    assert!(shown.contains("needs_inspection"), "{shown}");
    assert!(shown.contains(&format!("docker ps -a --filter label={LABEL_PLAN}={id}")), "{shown}");
}
