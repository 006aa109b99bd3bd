//! `service_execute` waits for the operator as a task when the client
//! declared the Tasks extension (issue 24): the call answers a `working`
//! task naming the plan; the server watches the plan on the (stand-in)
//! host; approved -> the plan runs once and the task completes with the
//! normal result; rejected or expired -> the task fails with that code;
//! `tasks/cancel` -> nothing runs; a cancel once the execute is sent or
//! the task ended is an error naming the plan (issue 38). A forged task id reads nothing and runs
//! nothing. The "operator" is a file the test writes; the client is
//! rmcp's, over an in-memory duplex, so the wire is real JSON-RPC.

use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, Implementation, TaskPayload, TaskStatus,
};
use rmcp::service::RunningService;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::support::mcp::arguments;

const PLAN_ID: &str = "0123456789abcdef0123456789abcdef";

/// The stand-in helper. Inventory lists the plan (approved once the file
/// `approved` exists, nothing once `rejected` exists) expiring at
/// `expires_at`. Execute runs (and counts a run) only once `approved`
/// exists; with `rejected` it answers `plan_rejected`; unapproved it
/// answers `approval_required` the first time and `plan_expired` after.
/// While `hiccup` exists, inventory fails (exit 1, no reply) and execute
/// answers `approval_required`. With `slow`, an approved execute writes
/// `executing` and takes 2 s.
fn helper(expires_at: &str) -> String {
    let plan = |approved: bool| {
        json!({"status": "ok", "operation": "inventory", "result": {"plans": [{
            "plan_id": PLAN_ID, "action": "stop", "app": "shop", "state": "pending", "requester": "agent",
            "requested_at": "2026-12-02T05:00:00Z", "expires_at": expires_at,
            "requires_approval": true, "approved": approved}]}})
    };
    let none = json!({"status": "ok", "operation": "inventory", "result": {"plans": []}});
    let answer = |code: &str, message: &str| json!({"status": "rejected", "code": code, "message": message});
    let required =
        answer("approval_required", "An operator must approve this plan on the server first; nothing ran.");
    let rejected = answer("plan_rejected", "The operator rejected this plan; nothing ran.");
    let expired = answer("plan_expired", "The plan expired before it was approved; nothing ran.");
    let done = json!({"status": "ok", "operation": "execute", "result": {"plan_id": PLAN_ID, "outcome": "completed"}});
    format!(
        r#"echo x >> "$DIR/rpc_calls"; cat > "$DIR/request"
if [ -e "$DIR/hiccup" ]; then
  if grep -q '"operation":"execute"' "$DIR/request"; then printf '%s\n' '{required}'; fi; exit 1
elif grep -q '"operation":"execute"' "$DIR/request"; then
  if [ -e "$DIR/approved" ]; then
    if [ -e "$DIR/slow" ]; then : > "$DIR/executing"; sleep 2; fi
    echo x >> "$DIR/executed"; printf '%s\n' '{done}'
  elif [ -e "$DIR/rejected" ]; then printf '%s\n' '{rejected}'; exit 1
  elif [ -e "$DIR/asked" ]; then printf '%s\n' '{expired}'; exit 1
  else : > "$DIR/asked"; printf '%s\n' '{required}'; exit 1; fi
elif [ -e "$DIR/rejected" ]; then printf '%s\n' '{none}'
elif [ -e "$DIR/approved" ]; then printf '%s\n' '{yes}'; else printf '%s\n' '{no}'; fi"#,
        yes = plan(true),
        no = plan(false),
    )
}

#[derive(Clone)]
struct TaskClient {
    tasks: bool,
}

impl ClientHandler for TaskClient {
    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.tasks {
            ClientCapabilities::builder().enable_tasks().build()
        } else {
            Default::default()
        };
        ClientConfig::new(capabilities, Implementation::new("task-client", "1"))
    }
}

struct World {
    client: RunningService<RoleClient, TaskClient>,
    dir: tempfile::TempDir,
}

async fn start(tasks: bool, expires_at: &str) -> World {
    let dir = tempfile::tempdir().unwrap();
    let client_io = crate::support::mcp::serve_in_memory(dir.path(), helper(expires_at));
    let client = TaskClient { tasks }.serve(client_io).await.expect("open the session");
    World { client, dir }
}

impl World {
    /// Opens the gate, then sends the execute once.
    async fn execute(&self) -> CallToolResponse {
        let check =
            CallToolRequestParams::new("cloud_check").with_arguments(arguments(json!({"check": "identity"})));
        self.client.call_tool(check).await.unwrap();
        let params = CallToolRequestParams::new("service_execute")
            .with_arguments(arguments(json!({"plan_id": PLAN_ID})));
        self.client.peer().call_tool_once(params).await.unwrap()
    }

    /// The task's id and its first status message.
    async fn task(&self) -> (String, String) {
        match self.execute().await {
            CallToolResponse::Task(created) => {
                assert_eq!(created.task.status, TaskStatus::Working);
                assert_eq!(created.task.poll_interval_ms, Some(2_000));
                (created.task.task_id, created.task.status_message.expect("a status message"))
            }
            other => panic!("expected a task, got {other:?}"),
        }
    }

    /// Polls `tasks/get` (faster than the suggested 2 s, to time it) until
    /// the task ends, at most `within`.
    async fn until_done(&self, id: &str, within: Duration) -> TaskPayload {
        self.until_ended(id, within).await.0
    }

    /// [`World::until_done`], with the task's last status message.
    async fn until_ended(&self, id: &str, within: Duration) -> (TaskPayload, String) {
        let deadline = Instant::now() + within;
        loop {
            let got = self.client.peer().get_task(GetTaskParams::new(id)).await.unwrap();
            if got.task.status().is_terminal() {
                return (got.task.payload, got.task.task.status_message.unwrap_or_default());
            }
            assert!(Instant::now() < deadline, "the task still works after {within:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn count(&self, name: &str) -> usize {
        std::fs::read_to_string(self.dir.path().join(name)).map(|t| t.lines().count()).unwrap_or(0)
    }

    fn operator(&self, file: &str) {
        std::fs::write(self.dir.path().join(file), "").unwrap();
    }
}

const LATER: &str = "2099-01-01T00:00:00Z";

#[tokio::test]
async fn approve_while_the_task_waits_completes_it_with_the_result_and_runs_once() {
    let world = start(true, LATER).await;
    let (id, message) = world.task().await;
    assert!(
        message.starts_with(&format!("awaiting operator approval of plan {PLAN_ID} on course-demo, ")),
        "{message}"
    );
    assert!(message.contains(" min left"), "{message}");
    // The task looks at the host and keeps waiting: nothing ran.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(world.count("executed"), 0);
    let approved = Instant::now();
    world.operator("approved");
    let (payload, last) = world.until_ended(&id, Duration::from_secs(10)).await;
    let took = approved.elapsed();
    // Issue 37: the message said "awaiting operator approval" to the end.
    assert_eq!(last, format!("plan {PLAN_ID} on course-demo ended: ok; tasks/get has the whole result"));
    eprintln!("task path, stand-in helper: operator approval -> task completed in {took:?}");
    let TaskPayload::Completed { result } = payload else { panic!("completed, got {payload:?}") };
    assert_eq!(result["structuredContent"]["status"], "ok", "{result:?}");
    assert_eq!(world.count("executed"), 1, "exactly one execution");
    // The issue asks for <= 2.5 s; the bound here leaves room for a loaded machine.
    assert!(took < Duration::from_secs(5), "approval -> completion took {took:?}");
}

#[tokio::test]
async fn reject_while_the_task_waits_fails_it_with_plan_rejected_and_runs_nothing() {
    let world = start(true, LATER).await;
    let (id, _) = world.task().await;
    world.operator("rejected");
    let (payload, last) = world.until_ended(&id, Duration::from_secs(10)).await;
    assert_eq!(last, format!("the operator rejected plan {PLAN_ID} on course-demo; nothing ran"));
    let TaskPayload::Failed { error } = payload else { panic!("failed, got {payload:?}") };
    assert_eq!(error["data"]["code"], "plan_rejected", "{error:?}");
    assert_eq!(world.count("executed"), 0);
}

#[tokio::test]
async fn a_plan_that_expires_while_the_task_waits_fails_it_with_plan_expired() {
    let soon = humantime::format_rfc3339_seconds(std::time::SystemTime::now() + Duration::from_secs(3));
    let world = start(true, &soon.to_string()).await;
    let (id, message) = world.task().await;
    assert!(message.contains(" s left"), "{message}");
    let payload = world.until_done(&id, Duration::from_secs(10)).await;
    let TaskPayload::Failed { error } = payload else { panic!("failed, got {payload:?}") };
    assert_eq!(error["data"]["code"], "plan_expired", "{error:?}");
    assert_eq!(world.count("executed"), 0);
}

#[tokio::test]
async fn cancel_stops_the_wait_and_nothing_runs_even_after_approval() {
    let world = start(true, LATER).await;
    let (id, _) = world.task().await;
    world.client.peer().cancel_task(CancelTaskParams::new(&id)).await.unwrap();
    let (payload, last) = world.until_ended(&id, Duration::from_secs(5)).await;
    assert_eq!(payload, TaskPayload::Cancelled);
    assert!(last.starts_with("cancelled: nothing ran"), "{last}");
    let calls = world.count("rpc_calls");
    // The operator approves after the cancel: the cancelled task does not run it.
    world.operator("approved");
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(world.count("executed"), 0, "nothing ran");
    assert_eq!(world.count("rpc_calls"), calls, "the host is not asked again");
}

/// The error of a `tasks/cancel` that should have been refused.
async fn refused_cancel(world: &World, id: &str) -> String {
    match world.client.peer().cancel_task(CancelTaskParams::new(id)).await {
        Err(rmcp::ServiceError::McpError(error)) => error.message.into_owned(),
        other => panic!("a cancel too late must be refused, got {other:?}"),
    }
}

#[tokio::test]
async fn a_cancel_after_the_plan_ran_is_refused_naming_the_plan_as_done() {
    let world = start(true, LATER).await;
    let (id, _) = world.task().await;
    world.operator("approved");
    let payload = world.until_done(&id, Duration::from_secs(10)).await;
    assert!(matches!(payload, TaskPayload::Completed { .. }), "{payload:?}");
    let message = refused_cancel(&world, &id).await;
    assert!(message.contains(&format!("plan {PLAN_ID} is done")), "{message}");
    assert_eq!(world.count("executed"), 1);
}

#[tokio::test]
async fn a_cancel_while_the_plan_executes_is_refused_and_the_task_completes() {
    let world = start(true, LATER).await;
    let (id, _) = world.task().await;
    world.operator("slow");
    world.operator("approved");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !world.dir.path().join("executing").exists() {
        assert!(Instant::now() < deadline, "the execute never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let message = refused_cancel(&world, &id).await;
    assert!(message.contains(&format!("plan {PLAN_ID} is executing")), "{message}");
    let payload = world.until_done(&id, Duration::from_secs(10)).await;
    assert!(matches!(payload, TaskPayload::Completed { .. }), "{payload:?}");
    assert_eq!(world.count("executed"), 1);
}

#[tokio::test]
async fn a_forged_task_id_reads_nothing_cancels_nothing_and_runs_nothing() {
    let world = start(true, LATER).await;
    let (id, _) = world.task().await;
    world.operator("approved");
    // Tried: an unknown id, and the real id with one character changed.
    let mut forged = id.clone().into_bytes();
    forged[0] = if forged[0] == b'a' { b'b' } else { b'a' };
    for bad in ["00000000-0000-0000-0000-000000000000".to_owned(), String::from_utf8(forged).unwrap()] {
        assert!(world.client.peer().get_task(GetTaskParams::new(&bad)).await.is_err(), "{bad}");
        assert!(world.client.peer().cancel_task(CancelTaskParams::new(&bad)).await.is_err(), "{bad}");
    }
    // A forged id of 5,000 characters is quoted short, escaped (issue 38).
    let long = format!("\u{1b}[31m{}", "z".repeat(5_000));
    for error in [
        world.client.peer().get_task(GetTaskParams::new(&long)).await.unwrap_err(),
        world.client.peer().cancel_task(CancelTaskParams::new(&long)).await.unwrap_err(),
    ] {
        let rmcp::ServiceError::McpError(error) = error else { panic!("an MCP error, got {error:?}") };
        assert!(error.message.len() < 100, "{}", error.message);
        assert!(error.message.starts_with("unknown task `"), "{}", error.message);
        assert!(!error.message.contains('\u{1b}'), "{}", error.message);
    }
    // The real task still ends by the host's approval alone, once.
    let payload = world.until_done(&id, Duration::from_secs(10)).await;
    assert!(matches!(payload, TaskPayload::Completed { .. }), "{payload:?}");
    assert_eq!(world.count("executed"), 1);
}

#[tokio::test]
async fn a_failed_look_does_not_end_the_wait() {
    // Tried: the inventory fails for about two looks (the host still says
    // approval_required to the execute each sends), then the operator approves.
    let world = start(true, LATER).await;
    let (id, _) = world.task().await;
    world.operator("hiccup");
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    std::fs::remove_file(world.dir.path().join("hiccup")).unwrap();
    world.operator("approved");
    let payload = world.until_done(&id, Duration::from_secs(10)).await;
    let TaskPayload::Completed { result } = payload else { panic!("completed, got {payload:?}") };
    assert_eq!(result["structuredContent"]["status"], "ok", "{result:?}");
    assert_eq!(world.count("executed"), 1);
}

#[tokio::test]
async fn a_client_without_the_tasks_extension_gets_todays_answer() {
    let world = start(false, LATER).await;
    let CallToolResponse::Complete(result) = world.execute().await else { panic!("a plain result") };
    let value: Value = result.structured_content.unwrap();
    assert_eq!(value["code"], "approval_required", "{value}");
    assert_eq!(world.count("rpc_calls"), 1, "one execute, nothing more");
}
