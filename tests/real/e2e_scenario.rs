//! End-to-end: the whole product as a user deploys it, on one machine with
//! real parts. An MCP client (rmcp) starts `volce-lab mcp-serve` in ssh mode
//! with management enabled; every tool call crosses the loopback sshd to the
//! agent account, the exact sudoers rule, the installed `volce-lab-host` and
//! the Docker engine. The operator's steps run `volce-lab-host show/approve`
//! through the operator's own sudo rule, as on the server's terminal.
//!
//! Runs as root (the workstation user in CI). Needs scripts/test-images and
//! scripts/e2e-setup; cleans up its app before and after, so it can run
//! twice in a row.

use std::time::{Duration, Instant};

use crate::support::e2e::*;
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{ConfigureCommandExt as _, TokioChildProcess};
use serde_json::{Value, json};

const APP: &str = "e2e-web";
const SERVER_NAME: &str = "web.e2e.test";

/// What one tool call answered: its structured result and whether the
/// server marked it as an error.
struct Answer {
    structured: Value,
    is_error: bool,
}

impl Answer {
    fn status(&self) -> &str {
        self.structured["status"].as_str().unwrap_or_else(|| panic!("no status in {}", self.structured))
    }
}

struct Agent {
    client: RunningService<RoleClient, ()>,
}

impl Agent {
    /// The agent's client starts the MCP server exactly as a user's
    /// configuration would: the binary and a handful of variables.
    async fn start(host: &str, state: &std::path::Path) -> Agent {
        let command = tokio::process::Command::new(env!("CARGO_BIN_EXE_volce-lab")).configure(|cmd| {
            cmd.arg("mcp-serve")
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .env("HOME", "/root")
                .env("XDG_STATE_HOME", state)
                .env("VOLCE_LAB_MODE", "ssh")
                .env("VOLCE_LAB_SSH_CONFIG", SSH_CONFIG)
                .env("VOLCE_LAB_SSH_ALIAS", ALIAS)
                .env("VOLCE_LAB_EXPECTED_HOST", host)
                .env("VOLCE_LAB_EXPECTED_USER", AGENT)
                .env("VOLCE_LAB_MANAGEMENT", "enabled")
                .env("VOLCE_LAB_TIMEOUT", "30");
        });
        let transport = TokioChildProcess::new(command).expect("start volce-lab mcp-serve");
        let client = ().serve(transport).await.expect("MCP initialize with volce-lab mcp-serve");
        Agent { client }
    }

    async fn call(&self, tool: &'static str, arguments: Value) -> Answer {
        let Value::Object(arguments) = arguments else { panic!("arguments must be an object") };
        let result = self
            .client
            .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
            .await
            .unwrap_or_else(|e| panic!("{tool}: {e}"));
        let structured =
            result.structured_content.clone().unwrap_or_else(|| panic!("{tool}: no structuredContent"));
        let is_error = result.is_error.unwrap_or(false);
        // The contract of every tool: isError exactly when status is not ok.
        let answer = Answer { structured, is_error };
        assert_eq!(answer.is_error, answer.status() != "ok", "{tool}: {}", answer.structured);
        answer
    }

    async fn check(&self, check: &str) -> Answer {
        self.call("cloud_check", json!({"check": check})).await
    }

    async fn plan(&self, action: &str, parameters: Value) -> Answer {
        self.call("service_plan", json!({"action": action, "parameters": parameters})).await
    }

    async fn execute(&self, plan_id: &str) -> Answer {
        self.call("service_execute", json!({"plan_id": plan_id})).await
    }
}

/// The plan id in a service_plan answer.
fn plan_id(answer: &Answer) -> String {
    find(&answer.structured, "plan_id")
        .or_else(|| find(&answer.structured, "id"))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no plan id in {}", answer.structured))
        .to_owned()
}

/// The operator at the terminal: reads the plan with `show`, takes the
/// digest from it and approves.
fn operator_approves(plan_id: &str) {
    let shown = as_operator(&["show", plan_id]);
    assert!(shown.ok(), "operator show: {shown:?}");
    let as_json = as_operator(&["show", "--json", plan_id]);
    assert!(as_json.ok(), "operator show --json: {as_json:?}");
    let plan: Value = serde_json::from_str(as_json.stdout.trim()).expect("show --json prints JSON");
    let digest = find_str(&plan, "digest").to_owned();
    assert!(shown.stdout.contains(&digest), "show must print the digest to approve:\n{}", shown.stdout);
    assert!(shown.stdout.contains("approve"), "show must print the approve command:\n{}", shown.stdout);
    let approved = as_operator(&["approve", plan_id, &digest, "--yes"]);
    assert!(approved.ok(), "operator approve: {approved:?}");
}

fn container_state(name: &str) -> Option<(String, bool)> {
    let inspect = run(DOCKER, &["inspect", "-f", "{{.Image}} {{.State.Running}}", name], None);
    if !inspect.ok() {
        return None;
    }
    let mut words = inspect.stdout.split_whitespace();
    Some((words.next()?.to_owned(), words.next()? == "true"))
}

/// Other Docker activity on a shared machine voids a plan between planning
/// and execution (`snapshot_changed`: nothing was changed). An agent's right
/// move is a new plan; the scenario makes one, at most three times, and says
/// so. On a quiet machine (CI) it never happens.
fn drifted(answer: &Answer) -> bool {
    answer.status() == "rejected" && answer.structured["code"] == "snapshot_changed"
}

/// `web_status` and the gateways the helper reported. Whatever else runs
/// on this machine, the status must follow the rule: healthy only when the
/// list is non-empty and every app that should run runs and its gateway
/// answers, while an app stopped on purpose (by a completed stop) is fine.
async fn web_status(agent: &Agent) -> (Answer, Vec<Value>) {
    let web = agent.check("web_status").await;
    let output = web.structured["output"].as_str().unwrap_or_else(|| panic!("no output: {}", web.structured));
    let reply: Value = serde_json::from_str(output.trim())
        .unwrap_or_else(|_| panic!("web_status output is not the helper's reply: {}", web.structured));
    let gateways = reply["result"]["gateways"].as_array().cloned().expect("a gateways list");
    let fine = |g: &Value| {
        (g["state"] == "running" && g["answers"] != false)
            || (g["state"] == "stopped" && g["stopped_on_purpose"] == true)
    };
    let healthy = !gateways.is_empty() && gateways.iter().all(fine);
    assert_eq!(web.status(), if healthy { "ok" } else { "check_failed" }, "{}", web.structured);
    (web, gateways)
}

/// Removes the scenario's app when the test ends, passed or failed.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        remove_apps(&[APP]);
    }
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn the_whole_chain_from_agent_to_docker_and_back() {
    let host = require_setup();
    require_host_helper();
    require_docker_and_policy();
    let _serial = serial();
    fresh_host_state(&[APP]);
    let _cleanup = Cleanup;
    let state = private_tempdir();
    let port = free_port();

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let started = Instant::now();
        let step = |what: &str| eprintln!("scenario {:>6} ms: {what}", started.elapsed().as_millis());
        let agent = Agent::start(&host, state.path()).await;
        step("mcp-serve initialized over stdio");

        // 1. Who is there, and how is it doing.
        let identity = agent.check("identity").await;
        assert_eq!(identity.status(), "ok", "{}", identity.structured);
        assert_eq!(identity.structured["output"], format!("{host}\n{AGENT}\n"));
        assert_eq!(identity.structured["is_demo"], false);
        let disk = agent.check("disk").await;
        assert_eq!(disk.status(), "ok", "{}", disk.structured);
        step("identity and disk ok over ssh");

        // 2. No gateway of ours yet: the query works and says, honestly, not
        // healthy (unless other apps' gateways on this machine all run).
        let (web, gateways) = web_status(&agent).await;
        assert!(!gateways.iter().any(|g| g["app"] == APP), "{}", web.structured);
        if gateways.is_empty() {
            assert_eq!(web.status(), "check_failed", "{}", web.structured);
            assert!(web.is_error);
        }
        step(&format!("web_status before deploy: {}", web.status()));

        // 3. Deploy: plan, then execute (no approval needed to add an app).
        let mut attempt = 0;
        loop {
            attempt += 1;
            let planned = agent
                .plan(
                    "deploy",
                    json!({"app": APP, "image": "web", "host_port": port, "container_port": 8080,
                           "server_name": SERVER_NAME}),
                )
                .await;
            assert_eq!(planned.status(), "ok", "{}", planned.structured);
            let executed = agent.execute(&plan_id(&planned)).await;
            if drifted(&executed) && attempt < 3 {
                step("deploy plan voided by other Docker activity (snapshot_changed): planning again");
                continue;
            }
            assert_eq!(executed.status(), "ok", "{}", executed.structured);
            break;
        }
        step("deploy planned and executed");

        // 4. Healthy now, and the page is served through the gateway.
        let (web, gateways) = web_status(&agent).await;
        let ours: Vec<&Value> = gateways.iter().filter(|g| g["app"] == APP).collect();
        assert_eq!(ours.len(), 1, "{}", web.structured);
        assert_eq!(ours[0]["state"], "running", "{}", web.structured);
        let (code, _body) = http_get(port, SERVER_NAME).expect("the gateway answers on 127.0.0.1");
        assert!((200..400).contains(&code), "HTTP {code} from the gateway");
        let (app_image, running) = container_state(&format!("vl-{APP}-app")).expect("the app container");
        assert!(running);
        assert!(container_state(&format!("vl-{APP}-gateway")).is_some_and(|(_, running)| running));
        step(&format!("web_status {} and HTTP {code} through the gateway", web.status()));

        // 5. Stop needs a human: refused until the operator approves it;
        // 6. the operator approves on the server's terminal; 7. then it runs.
        let mut attempt = 0;
        let stop = loop {
            attempt += 1;
            let planned = agent.plan("stop", json!({"app": APP})).await;
            assert_eq!(planned.status(), "ok", "{}", planned.structured);
            let stop = plan_id(&planned);
            let refused = agent.execute(&stop).await;
            if drifted(&refused) && attempt < 3 {
                step("stop plan voided by other Docker activity (snapshot_changed): planning again");
                continue;
            }
            assert_eq!(refused.status(), "rejected", "{}", refused.structured);
            assert!(container_state(&format!("vl-{APP}-app")).is_some_and(|(_, running)| running));
            step(&format!("stop planned; execute without approval: {}", refused.structured["code"]));

            operator_approves(&stop);
            step("operator ran show and approve");

            let stopped = agent.execute(&stop).await;
            if drifted(&stopped) && attempt < 3 {
                step("approved stop voided by other Docker activity (snapshot_changed): planning again");
                continue;
            }
            assert_eq!(stopped.status(), "ok", "{}", stopped.structured);
            break stop;
        };
        for role in ["app", "gateway"] {
            let (_, running) = container_state(&format!("vl-{APP}-{role}")).expect("stopped, not removed");
            assert!(!running, "vl-{APP}-{role} still runs");
        }
        let again = agent.execute(&stop).await;
        assert_eq!(again.status(), "rejected", "a plan runs once: {}", again.structured);
        step(&format!("stop executed once; again: {}", again.structured["code"]));

        // 8. The app's image cannot go while the stopped container uses it:
        // the helper refuses the plan itself, so there is nothing to approve.
        let planned = agent.plan("remove_image", json!({"image_id": app_image})).await;
        assert_eq!(planned.status(), "rejected", "{}", planned.structured);
        assert_eq!(planned.structured["code"], "image_in_use", "{}", planned.structured);
        step(&format!("remove_image plan refused: {}", planned.structured["code"]));
        let image = run(DOCKER, &["image", "inspect", "-f", "{{.Id}}", &app_image], None);
        assert!(image.ok(), "the image in use must still exist: {image:?}");

        let started = Instant::now();
        agent.client.cancel().await.expect("close the MCP session");
        assert!(started.elapsed() < Duration::from_secs(10));
    });
    // The workstation's audit has one line per call, and no arguments.
    let audit_path = state.path().join("volce-lab/audit.jsonl");
    let audit = std::fs::read_to_string(&audit_path)
        .unwrap_or_else(|e| panic!("the workstation audit {} is missing: {e}", audit_path.display()));
    assert!(audit.lines().count() >= 10, "one audit line per tool call:\n{audit}");
    assert!(!audit.contains(SERVER_NAME), "the audit log must not carry arguments");
}
