//! The controller across real OS processes: 16 helpers racing to execute
//! one approved plan, a helper killed between its claim and the engine, a
//! helper stopped there (SIGSTOP) and then continued or killed, and
//! approvals seen by another process. Each child is this test binary
//! re-executed with `VL_CHILD_ROLE` set, running the `child` test below
//! (`host_processes::child` in the hermetic crate).
//! Hermetic: no root, no Docker (the fake engine logs to a shared file).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::fake_engine::*;
use crate::support::harness::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use volce_lab::host::{Executed, Host, ProcLiveness};
use volce_lab::vocab::{Code, Digest, PlanId};
use volce_lab::vocab::{PlanOutcome, PlanState};
use volce_lab::wire::answers::Open;

const AGENT: &str = "agent";

/// The child side. A no-op unless started by `spawn_child`.
#[test]
fn child() {
    let Ok(role) = std::env::var("VL_CHILD_ROLE") else { return };
    let dir = PathBuf::from(std::env::var("VL_CHILD_DIR").unwrap());
    let plan = PlanId::parse(&std::env::var("VL_CHILD_PLAN").unwrap()).unwrap();
    let mut engine = FakeEngine::new().with_log(&dir.join("mutations.log"));
    if let Ok(marker) = std::env::var("VL_CHILD_BLOCK") {
        let secs = std::env::var("VL_CHILD_BLOCK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(120);
        engine = engine.with_block(Path::new(&marker), Duration::from_secs(secs));
    }
    // Race for real: everyone waits for the same starting signal.
    let go = dir.join("go");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !go.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let h = Harness::at(&dir);
    let mut controller = Host::new(h.paths.clone(), engine, h.clock.clone(), ProcLiveness).open().unwrap();
    let result = match role.as_str() {
        "execute" => match controller.execute(&plan, AGENT) {
            Ok(Executed::Completed(_)) => "completed".to_owned(),
            Ok(Executed::NeedsInspection { .. }) => "needs_inspection".to_owned(),
            Ok(Executed::Failed { .. }) => "failed".to_owned(),
            Err(refusal) => refusal.code.as_str().to_owned(),
        },
        "approve" => {
            let digest = Digest::parse(&std::env::var("VL_CHILD_DIGEST").unwrap()).unwrap();
            match controller.approve(&plan, &digest, "alice") {
                Ok(_) => "approved".to_owned(),
                Err(refusal) => refusal.code.as_str().to_owned(),
            }
        }
        other => panic!("unknown child role {other}"),
    };
    println!("RESULT:{result}");
}

fn spawn_child(dir: &Path, role: &str, plan: &PlanId, extra: &[(&str, String)]) -> Child {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["host_processes::child", "--exact", "--nocapture", "--test-threads=1"])
        .env("VL_CHILD_ROLE", role)
        .env("VL_CHILD_DIR", dir)
        .env("VL_CHILD_PLAN", plan.as_str())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (key, value) in extra {
        command.env(key, value);
    }
    command.spawn().unwrap()
}

fn result_of(child: Child) -> String {
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .split("RESULT:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("child gave no result (status {:?}): {stdout}", output.status))
        .to_owned()
}

fn approved_remove_image(h: &Harness) -> PlanId {
    let mut c = h.controller();
    let plan = c.prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    plan.plan.id
}

#[test]
fn sixteen_processes_executing_one_approved_plan_make_exactly_one_mutation() {
    let h = Harness::new();
    let id = approved_remove_image(&h);
    let children: Vec<Child> = (0..16).map(|_| spawn_child(&h.root, "execute", &id, &[])).collect();
    std::fs::write(h.root.join("go"), b"").unwrap();
    let mut results: Vec<String> = children.into_iter().map(result_of).collect();
    results.sort();
    let completed = results.iter().filter(|r| *r == "completed").count();
    assert_eq!(completed, 1, "exactly one helper may act: {results:?}");
    assert!(
        results.iter().all(|r| r == "completed" || r == "plan_consumed" || r == "plan_executing"),
        "the others are refused as consumed or executing: {results:?}"
    );
    let log = logged_mutations(&h.root.join("mutations.log"));
    assert_eq!(log.len(), 1, "exactly one engine mutation: {log:?}");
    assert!(log[0].ends_with(&format!("remove_image {}", unused_image())));
    let stored = h.controller().load(&id, "root").unwrap();
    assert_eq!(stored.state, PlanState::Completed);
}

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "the child never reached the engine");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_process_killed_between_claim_and_engine_leaves_needs_inspection_and_no_second_execution() {
    let h = Harness::new();
    let id = approved_remove_image(&h);
    let marker = h.root.join("reached-engine");
    let mut child = spawn_child(&h.root, "execute", &id, &[("VL_CHILD_BLOCK", marker.display().to_string())]);
    std::fs::write(h.root.join("go"), b"").unwrap();
    wait_for(&marker);

    // A live execution is never disturbed.
    let mut c = h.controller();
    assert_eq!(c.execute(&id, AGENT).unwrap_err().code, Code::PlanExecuting);
    assert_eq!(
        c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap_err().code,
        Code::InspectionRequired
    );
    assert_eq!(c.load(&id, "root").unwrap().state, PlanState::Executing);

    child.kill().unwrap();
    child.wait().unwrap();

    // The next helper reports and stores the dead claim as needs_inspection.
    assert_eq!(c.execute(&id, AGENT).unwrap_err().code, Code::PlanConsumed);
    let stored = c.load(&id, "root").unwrap();
    assert_eq!(stored.state, PlanState::NeedsInspection);
    assert_eq!(stored.outcome, Some(PlanOutcome::ClaimerDied));
    let inventory = c.inventory(AGENT).unwrap();
    assert_eq!(inventory.unsettled_plan.unwrap().state, Open::Known(PlanState::NeedsInspection));
    assert_eq!(
        c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap_err().code,
        Code::InspectionRequired
    );
    let events: Vec<_> =
        c.store_for_tests().read(|tx| tx.audit_of(&id)).unwrap().into_iter().map(|a| a.event).collect();
    assert_eq!(events, ["prepared", "approved", "claimed", "claim_abandoned"]);
    assert!(logged_mutations(&h.root.join("mutations.log")).is_empty(), "no engine mutation happened");
}

#[test]
fn a_second_controller_process_sees_approvals_made_by_the_first() {
    let h = Harness::new();
    let plan =
        h.controller().prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    std::fs::write(h.root.join("go"), b"").unwrap();
    let approver =
        spawn_child(&h.root, "approve", &plan.plan.id, &[("VL_CHILD_DIGEST", plan.plan.digest.to_string())]);
    assert_eq!(result_of(approver), "approved");
    let executor = spawn_child(&h.root, "execute", &plan.plan.id, &[]);
    assert_eq!(result_of(executor), "completed");
    assert_eq!(logged_mutations(&h.root.join("mutations.log")).len(), 1);
}

/// Sends `signal` to the child and waits until its claim is seen stopped
/// (or, for SIGCONT, no longer stopped) through /proc.
fn signal_and_wait(c: &mut TestController, id: &PlanId, pid: i32, signal: Signal, stopped: bool) {
    kill(Pid::from_raw(pid), signal).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stored = c.load(id, "root").unwrap();
        if c.stopped_claimer(&stored).is_some() == stopped {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the claimer never became {}",
            if stopped { "stopped" } else { "running" }
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Tried: the claimer stopped (SIGSTOP) inside the engine, as a relayed TSTP
/// once did; then the operator's way out with `kill -KILL` and `resolve`.
/// `list` and `show` name the stopped pid and both ways out; `resolve`
/// while it is stopped refuses and says the same; after the kill the plan is
/// needs_inspection (claimer_died), then inspected, and nothing ever runs
/// the action: the engine saw no mutation, a later execute is refused.
#[test]
fn a_stopped_claimer_is_shown_with_its_pid_and_killing_it_then_resolving_never_runs_the_action() {
    let h = Harness::new();
    let id = approved_remove_image(&h);
    let marker = h.root.join("reached-engine");
    let mut child = spawn_child(&h.root, "execute", &id, &[("VL_CHILD_BLOCK", marker.display().to_string())]);
    std::fs::write(h.root.join("go"), b"").unwrap();
    wait_for(&marker);
    let pid = child.id() as i32;
    let mut c = h.controller();
    signal_and_wait(&mut c, &id, pid, Signal::SIGSTOP, true);
    assert_eq!(c.load(&id, "root").unwrap().claim.unwrap().pid, pid);

    let listed = h.list(false);
    assert!(listed.contains(&format!("executing, claimer {pid} STOPPED")), "{listed}");
    assert!(listed.contains("kill -CONT"), "{listed}");
    let json: serde_json::Value = serde_json::from_str(&h.list(true)).unwrap();
    assert_eq!(json["plans"][0]["claimer_stopped_pid"], pid);
    let shown = h.show(&id);
    assert!(shown.contains(&format!("sudo kill -CONT {pid}")), "{shown}");
    assert!(
        shown.contains(&format!("sudo kill -KILL -- -{pid}"))
            || shown.contains(&format!("sudo kill -KILL {pid}"))
    );
    // doctor names it too, from the database read-only and /proc.
    use volce_lab::install::doctor::DoctorProbe as _;
    let probe = volce_lab::install::doctor::SystemProbe {
        policy: volce_lab::install::doctor::load_policy_facts,
        store: volce_lab::install::doctor::read_store_health,
    };
    assert_eq!(probe.stopped_claimer(&h.paths.state_dir, id.as_str()).map(|s| s.pid), Some(pid));
    let refusal = h.resolve(&id, "alice").unwrap_err();
    assert_eq!(refusal.code, Code::NotAwaitingInspection);
    assert!(refusal.message.contains(&format!("kill -CONT {pid}")), "{}", refusal.message);
    assert_eq!(c.execute(&id, AGENT).unwrap_err().code, Code::PlanExecuting);
    assert_eq!(
        c.load(&id, "root").unwrap().state,
        PlanState::Executing,
        "a stopped claimer is never abandoned"
    );

    // The way out: kill it (it is stopped, so it never reached the mutation).
    child.kill().unwrap();
    child.wait().unwrap();
    let resolved = h.resolve(&id, "alice").unwrap();
    assert!(resolved.contains("now inspected"), "{resolved}");
    assert!(resolved.contains("Nothing on the engine carries its label"), "{resolved}");
    let stored = c.load(&id, "root").unwrap();
    assert_eq!(stored.state, PlanState::Inspected);
    assert_eq!(probe.stopped_claimer(&h.paths.state_dir, id.as_str()), None);
    assert_eq!(stored.outcome, Some(PlanOutcome::ClaimerDied));
    assert_eq!(c.execute(&id, AGENT).unwrap_err().code, Code::PlanConsumed);
    assert!(logged_mutations(&h.root.join("mutations.log")).is_empty(), "the action never ran");
}

/// Tried: the other way out, `kill -CONT`: the stopped claimer finishes
/// its one action and records it; nothing else ran it meanwhile.
#[test]
fn a_stopped_claimer_continued_finishes_its_action_exactly_once() {
    let h = Harness::new();
    let id = approved_remove_image(&h);
    let marker = h.root.join("reached-engine");
    let child = spawn_child(
        &h.root,
        "execute",
        &id,
        &[("VL_CHILD_BLOCK", marker.display().to_string()), ("VL_CHILD_BLOCK_SECS", "1".into())],
    );
    std::fs::write(h.root.join("go"), b"").unwrap();
    wait_for(&marker);
    let pid = child.id() as i32;
    let mut c = h.controller();
    signal_and_wait(&mut c, &id, pid, Signal::SIGSTOP, true);
    // Longer than the block: only the stop holds it.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(c.execute(&id, AGENT).unwrap_err().code, Code::PlanExecuting);
    assert!(logged_mutations(&h.root.join("mutations.log")).is_empty());
    signal_and_wait(&mut c, &id, pid, Signal::SIGCONT, false);
    assert_eq!(result_of(child), "completed");
    assert_eq!(logged_mutations(&h.root.join("mutations.log")).len(), 1, "exactly one engine mutation");
    assert_eq!(c.load(&id, "root").unwrap().state, PlanState::Completed);
}
