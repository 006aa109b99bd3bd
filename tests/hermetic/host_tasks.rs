//! run_task (issue 40) end to end on the fake engine: the agent names a
//! task, never a command; the operator's argv is what the engine is asked
//! to run and what `show` prints; an operator always approves it; the
//! output comes back redacted and untrusted; a failing task ends the plan
//! `failed` with its output and changes no record; bad input gets a stable
//! code and changes nothing. Hermetic: no root, no Docker.

use crate::support::harness::*;
use serde_json::{Value, json};
use volce_lab::host::Executed;
use volce_lab::vocab::{Code, PlanOutcome, PlanState};

const AGENT: &str = "agent";
const SECRET: &str = "hunter2-configured-token-value";

/// `demo` deployed from `web`, whose entry declares `migrate` and `seed`.
fn deployed() -> Harness {
    let mut h = Harness::new();
    let mut policy = policy_json();
    policy["catalog"]["web"] = json!({
        "image": format!("127.0.0.1:15000/volce-lab/web@sha256:{}", "a".repeat(64)),
        "tasks": {"migrate": ["/app/bin/migrate", "--to", "latest"], "seed": ["/app/bin/seed"]}
    });
    h.write_policy(&policy);
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    h
}

fn engine_calls(h: &Harness) -> Vec<Vec<String>> {
    h.engine.state.lock().unwrap().calls.clone()
}

#[test]
fn a_declared_task_runs_its_argv_once_after_approval_and_answers_its_safe_output() {
    let h = deployed();
    {
        let mut state = h.engine.state.lock().unwrap();
        state.task_output = format!("migrated 3 tables\nusing token {SECRET}\n").into_bytes();
        state.task_env = vec![format!("TOKEN={SECRET}")];
    }
    let before = h.controller().store_for_tests().read(|tx| tx.apps()).unwrap();
    let mut c = h.controller();
    let plan = c.prepare("run_task", &json!({"app": "demo", "task": "migrate"}), AGENT).unwrap();
    assert!(plan.plan.requires_approval, "a task always needs an operator");
    let mut review = String::new();
    plan.plan.payload.review(&mut review);
    assert!(review.contains(r#"argv ["/app/bin/migrate", "--to", "latest"]"#), "{review}");
    // Without the approval nothing runs.
    assert_eq!(c.execute(&plan.plan.id, AGENT).unwrap_err().code, Code::ApprovalRequired);
    assert!(!engine_calls(&h).iter().any(|call| call[0] == "run_task"));
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    let Executed::Completed(done) = c.execute(&plan.plan.id, AGENT).unwrap() else { panic!("completed") };
    let runs: Vec<_> = engine_calls(&h).into_iter().filter(|call| call[0] == "run_task").collect();
    assert_eq!(runs, [["run_task", "demo", "migrate", "/app/bin/migrate", "--to", "latest"]]);
    let task = done.task.expect("the task's run");
    assert_eq!((task.task.as_str(), task.exit_code), ("migrate", 0));
    let answer = serde_json::to_string(&task).unwrap();
    assert!(answer.contains("migrated 3 tables") && !answer.contains(SECRET), "{answer}");
    assert!(task.output.redactions >= 1 && task.output.untrusted.contains("never follow"), "{answer}");
    // The app's record is what it was: a task changes no record.
    assert_eq!(h.controller().store_for_tests().read(|tx| tx.apps()).unwrap(), before);
}

#[test]
fn a_task_that_exits_nonzero_ends_the_plan_failed_with_its_output_and_blocks_nothing() {
    let h = deployed();
    {
        let mut state = h.engine.state.lock().unwrap();
        state.task_exit = 3;
        state.task_output = b"relation \"users\" already exists\n".to_vec();
    }
    let mut c = h.controller();
    let plan = c.prepare("run_task", &json!({"app": "demo", "task": "seed"}), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    let executed = c.execute(&plan.plan.id, AGENT).unwrap();
    let Executed::Failed { refusal, app_log, .. } = executed else { panic!("{executed:?}") };
    assert_eq!(refusal.code, Code::TaskFailed);
    assert!(refusal.message.contains("exited with code 3"), "{}", refusal.message);
    assert!(app_log.expect("its output").lines.iter().any(|l| l.contains("already exists")));
    let stored = c.store_for_tests().read(|tx| tx.load_plan(&plan.plan.id)).unwrap().unwrap();
    assert_eq!((stored.state, stored.outcome), (PlanState::Failed, Some(PlanOutcome::RolledBack)));
    // Nothing is blocked: the next plan prepares.
    c.prepare("run_task", &json!({"app": "demo", "task": "migrate"}), AGENT).unwrap();
}

/// Tried: a task the entry does not declare, a name that is no task name
/// (a shell command), an app that is not deployed, a stray parameter, a
/// missing task: each refused with its code, no plan stored, no engine call.
#[test]
fn only_a_declared_task_of_a_deployed_app_is_planned() {
    let h = deployed();
    let calls = engine_calls(&h).len();
    let mut c = h.controller();
    let awaiting = |c: &mut volce_lab::host::Controller<_, _, _>| {
        c.store_for_tests().read(|tx| tx.awaiting_plans(0)).unwrap().len()
    };
    let plans_before = awaiting(&mut c);
    let refused = |c: &mut volce_lab::host::Controller<_, _, _>, params: Value| {
        c.prepare("run_task", &params, AGENT).expect_err("refused")
    };
    let unknown = refused(&mut c, json!({"app": "demo", "task": "drop-db"}));
    assert_eq!(unknown.code, Code::TaskNotDeclared);
    assert!(unknown.message.contains("migrate, seed"), "{}", unknown.message);
    let shell = refused(&mut c, json!({"app": "demo", "task": "sh -c 'rm -rf /'"}));
    assert_eq!(shell.code, Code::TaskNotDeclared);
    assert_eq!(refused(&mut c, json!({"app": "ghost", "task": "migrate"})).code, Code::AppNotFound);
    let stray = json!({"app": "demo", "task": "migrate", "argv": ["/bin/sh"]});
    assert_eq!(refused(&mut c, stray).code, Code::InvalidParameters);
    assert_eq!(refused(&mut c, json!({"app": "demo"})).code, Code::InvalidParameters);
    assert_eq!(awaiting(&mut c), plans_before, "no plan stored");
    let asked: Vec<String> = engine_calls(&h)[calls..].iter().map(|call| call[0].clone()).collect();
    assert!(asked.iter().all(|kind| kind == "snapshot" || kind == "capacity"), "only reads: {asked:?}");
}

#[test]
fn the_inventory_offers_task_names_never_their_argv() {
    let h = deployed();
    let inventory = serde_json::to_value(h.controller().inventory(AGENT).unwrap()).unwrap();
    let web = inventory["offer"]["catalog"].as_array().unwrap().iter().find(|e| e["key"] == "web").unwrap();
    assert_eq!(web["tasks"], json!(["migrate", "seed"]));
    assert!(!inventory.to_string().contains("/app/bin"), "{inventory}");
}

/// A policy whose `web` and `web2` entries run `migrate` before they start.
fn with_before_start() -> Harness {
    let mut h = Harness::new();
    let mut policy = policy_json();
    let entry = |c: char, name: &str| {
        json!({
            "image": format!("127.0.0.1:15000/volce-lab/{name}@sha256:{}", c.to_string().repeat(64)),
            "tasks": {"migrate": ["/app/bin/migrate"]},
            "before_start": "migrate"
        })
    };
    policy["catalog"]["web"] = entry('a', "web");
    policy["catalog"]["web2"] = entry('d', "web2");
    h.write_policy(&policy);
    h
}

#[test]
fn a_deploy_runs_its_before_start_task_before_the_app_and_show_says_so() {
    let h = with_before_start();
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    let mut review = String::new();
    plan.plan.payload.review(&mut review);
    assert!(
        review.contains(r#"before the app starts, once: task migrate: argv ["/app/bin/migrate"]"#),
        "{review}"
    );
    assert!(plan.plan.impact.containers_touched.iter().any(|line| line.contains("runs task migrate once")));
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    let kinds: Vec<String> = engine_calls(&h).iter().map(|call| call[0].clone()).collect();
    let deploy = kinds.iter().position(|k| k == "deploy").unwrap();
    assert_eq!(kinds[deploy + 1], "run_task", "{kinds:?}");
}

/// Tried: an update whose before_start task exits 3. The plan ends failed
/// with task_failed and the task's output; the app's record (so the version
/// it serves) is the deploy's; the next plan is accepted at once.
#[test]
fn an_update_whose_before_start_fails_keeps_the_old_version_and_blocks_nothing() {
    let h = with_before_start();
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    let before = c.store_for_tests().read(|tx| tx.apps()).unwrap();
    {
        let mut state = h.engine.state.lock().unwrap();
        state.task_exit = 3;
        state.task_output = b"migration 0042 failed: column exists\n".to_vec();
    }
    let update = c.prepare("update", &json!({"app": "demo", "image": "web2"}), AGENT).unwrap();
    c.approve(&update.plan.id, &update.plan.digest, "alice").unwrap();
    let executed = c.execute(&update.plan.id, AGENT).unwrap();
    let Executed::Failed { refusal, app_log, .. } = executed else { panic!("{executed:?}") };
    assert_eq!(refusal.code, Code::TaskFailed, "{}", refusal.message);
    assert!(refusal.message.contains("before_start task migrate exited with code 3"), "{}", refusal.message);
    assert!(app_log.unwrap().lines.iter().any(|l| l.contains("column exists")));
    assert_eq!(c.store_for_tests().read(|tx| tx.apps()).unwrap(), before, "the old version's record");
    c.prepare("restart", &json!({"app": "demo"}), AGENT).unwrap();
}

/// Tried: before_start naming a task the entry does not declare, or no
/// string: the policy is refused with the entry's own message.
#[test]
fn before_start_must_name_a_declared_task() {
    use volce_lab::control::policy::Policy;
    for bad in [json!("seed"), json!(1), json!(["migrate"])] {
        let mut policy = policy_json();
        policy["catalog"]["web"] = json!({
            "image": format!("127.0.0.1:15000/volce-lab/web@sha256:{}", "a".repeat(64)),
            "tasks": {"migrate": ["/app/bin/migrate"]},
            "before_start": bad.clone()
        });
        let error = Policy::from_json(policy.to_string().as_bytes()).unwrap_err().to_string();
        assert!(error.contains("before_start must name one of the entry's tasks"), "{bad}: {error}");
    }
}

/// Tried: a task's container left behind (a helper killed while the task
/// ran leaves it, its plan `needs_inspection` once settled). Every plan of
/// the app is refused `container_set_changed` until it goes; `state diff`
/// names it with its command, and `state remove-container` (paused) removes
/// it; then the app takes plans again. No raw `docker rm` is needed.
#[test]
fn a_task_container_left_behind_is_named_by_state_diff_and_removed_by_its_command() {
    use std::collections::BTreeMap;
    use volce_lab::control::Clock as _;
    use volce_lab::host::{Caller, Decision, pause};
    use volce_lab::install::state;
    use volce_lab::vocab::{Container, ContainerId, LABEL_APP, LABEL_PLAN, LABEL_ROLE};
    let h = deployed();
    let id = ContainerId::parse(&"7".repeat(64)).unwrap();
    let name = format!("vl-demo-task-{}", "4".repeat(12));
    let image_id =
        h.engine.snapshot_now().containers.iter().find(|c| c.name == "vl-demo-app").unwrap().image_id.clone();
    h.engine.state.lock().unwrap().snapshot.containers.push(Container {
        id: id.clone(),
        name: name.clone(),
        image_id,
        state: "running".into(),
        labels: BTreeMap::from([
            (LABEL_APP.to_owned(), "demo".to_owned()),
            (LABEL_ROLE.to_owned(), "task".to_owned()),
            (LABEL_PLAN.to_owned(), "4".repeat(32)),
        ]),
        ports: vec![],
    });
    let params = json!({"app": "demo", "task": "migrate"});
    assert_eq!(
        h.controller().prepare("run_task", &params, AGENT).unwrap_err().code,
        Code::ContainerSetChanged
    );
    let now = h.clock.now();
    let said = state::diff(&h.paths, &h.engine, now).unwrap();
    assert!(said.contains(&format!("state remove-container {id}")), "{said}");
    let alice = Caller::from("alice");
    pause::pause(&h.paths, &alice, Some("cleanup"), now).unwrap();
    let removed =
        state::remove_container(&h.paths, &h.engine, &name, &alice, now, |_, _| Decision::Confirmed);
    assert!(removed.unwrap().contains("Removed container"));
    pause::resume(&h.paths, &alice, now).unwrap();
    h.controller().prepare("run_task", &params, AGENT).unwrap();
}
