//! run_task's docker calls on a scripted runner: the container is made
//! like the app's (hardening, env file, network) with exactly the task's
//! argv, and removed whatever the exit; a non-zero exit is `TaskFailed`
//! with the output made safe; a container still listed after the removal
//! is no verified result.

use super::*;
use crate::vocab::{EnvFileUse, ImageRef, PlanId, TaskArgv, TaskName, TaskSpec};

fn spec() -> TaskSpec {
    let plan_id = PlanId::parse(&"9".repeat(32)).unwrap();
    let app = AppName::parse("shop").unwrap();
    TaskSpec {
        accessories_env: None,
        container_name: TaskSpec::container_name(&app, &plan_id),
        plan_id,
        app,
        task: TaskName::parse("migrate").unwrap(),
        argv: TaskArgv::parse(vec!["/app/bin/migrate".into(), "--to".into(), "latest".into()]).unwrap(),
        image: ImageRef::parse(&format!("registry.example/shop@sha256:{}", hex('a'))).unwrap(),
        limits: limits(),
        timeout_seconds: 150,
        env_file: Some(EnvFileUse { path: "/etc/volce-lab/apps/shop.env".into(), hmac_sha256: hex('e') }),
        data: None,
    }
}

/// A runner where the task exits `exit`, prints [`APP_OUTPUT`] and, when
/// `stays`, is still listed after its removal.
fn engine(exit: &'static str, stays: bool) -> DockerClient<Fake> {
    let fake = Fake::new(move |args| match args[0].as_str() {
        "create" => Ok(format!("{}\n", hex('c'))),
        "start" | "rm" => Ok(String::new()),
        "wait" => Ok(format!("{exit}\n")),
        "logs" => Ok(APP_OUTPUT.to_owned()),
        "inspect" => Ok(APP_ENV.to_owned()),
        "ps" if stays => Ok(format!("{}\n", hex('c'))),
        "ps" | "network" => Ok(String::new()),
        other => panic!("unexpected docker {other}"),
    });
    DockerClient::with_runner(fake, "/nonexistent")
}

#[test]
fn the_task_runs_its_argv_in_a_container_made_like_the_apps_and_is_removed() {
    let engine = engine("0", false);
    let run = engine.run_task(&spec()).unwrap();
    assert_eq!((run.task.as_str(), run.exit_code), ("migrate", 0));
    let text = run.output.lines.join("\n");
    assert!(!text.contains("hunter2-configured-token") && !text.contains("swordfish99"), "{text}");
    let argv = engine.runner.argv();
    let create = &argv[0];
    for part in [
        "create --name vl-shop-task-999999999999 --label io.volce-lab.app=shop --label io.volce-lab.role=task",
        "--user 1000:1000 --init --read-only",
        "--cap-drop ALL --security-opt no-new-privileges",
        "--restart no --pull never --env-file /etc/volce-lab/apps/shop.env",
        "--network vl-shop --entrypoint /app/bin/migrate registry.example/shop@sha256:",
    ] {
        assert!(create.contains(part), "{part}: {create}");
    }
    assert!(create.ends_with(" --to latest"), "the argv's rest after the image: {create}");
    assert!(!create.contains("--publish"), "a task publishes nothing: {create}");
    let id = hex('c');
    let order: Vec<&str> = argv.iter().map(|a| a.split(' ').next().unwrap()).collect();
    assert_eq!(order, ["create", "start", "wait", "logs", "inspect", "rm", "ps"], "{argv:?}");
    assert!(argv.contains(&format!("rm -f -v {id}")), "{argv:?}");
    // Only the plan's task containers are looked for: a deploy's accessories
    // carry the plan's label too while its before_start runs (issue 40).
    let listed = argv.last().unwrap();
    assert!(listed.ends_with("--filter label=io.volce-lab.role=task"), "{listed}");
}

#[test]
fn a_nonzero_exit_is_task_failed_and_a_container_left_is_no_result() {
    let error = engine("3", false).run_task(&spec()).unwrap_err();
    let EngineError::TaskFailed { run } = &error else { panic!("{error:?}") };
    assert_eq!(run.exit_code, 3);
    assert!(error.changed_nothing() && error.output().is_some());
    let error = engine("0", true).run_task(&spec()).unwrap_err();
    assert_eq!(error, EngineError::Host { step: "see the task container gone" });
    assert!(!error.changed_nothing(), "unverified: the plan needs inspection");
}
