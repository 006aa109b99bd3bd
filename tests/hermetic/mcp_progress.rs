//! MCP progress of a long `service_execute`, seen on the wire: a stand-in
//! helper (a real `/bin/sh` process through the real runner) prints progress
//! lines with a slow step between them, then its reply; the server, built
//! in-process with a 100 ms heartbeat instead of 10 s, is spoken to in raw
//! JSON-RPC lines over an in-memory duplex, so the order of notifications
//! and result is exactly what a client reads. Runs unprivileged; no network.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream, Lines, WriteHalf};
use volce_lab::config::{Config, Mode};
use volce_lab::exec::{ProcessSpec, Transport as ExecTransport};
use volce_lab::inspect::Inspector;
use volce_lab::inspect::transport::{CommandCarrier, RunLimits};
use volce_lab::mcp::audit::Audit;
use volce_lab::mcp::progress::step_message;
use volce_lab::mcp::rpc::RPC_LIMITS;
use volce_lab::mcp::{Options, VolceLab};
use volce_lab::vocab::Step;
use volce_lab::wire::remote::RemoteCommand;

const PLAN_ID: &str = "0123456789abcdef0123456789abcdef";

/// The target and its helper, played by shell scripts.
struct StandIn {
    rpc: String,
}

impl CommandCarrier for StandIn {
    fn specs(&self, command: RemoteCommand, stdin: Option<&[u8]>, limits: RunLimits) -> Vec<ProcessSpec> {
        let script = match command {
            RemoteCommand::Identity => "printf 'web-1\\nagent\\n'".to_owned(),
            RemoteCommand::Disk => "printf 'Filesystem Size\\n'".to_owned(),
            RemoteCommand::Rpc => format!("cat > /dev/null; {}", self.rpc),
        };
        let mut spec = limits.apply(ProcessSpec::new("/bin/sh", ["-c", script.as_str()]), stdin);
        spec.transport = ExecTransport::Ssh;
        vec![spec]
    }

    fn kind(&self) -> &'static str {
        "stand-in"
    }
}

/// The server, spoken to in raw JSON-RPC lines.
struct Raw {
    write: WriteHalf<DuplexStream>,
    lines: Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    next_id: i64,
    _dir: tempfile::TempDir,
}

impl Raw {
    async fn start(rpc: &str) -> Raw {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::support::mcp::stand_in_config(true);
        let inspector =
            Inspector::with_transport_for_tests(config, Arc::new(StandIn { rpc: rpc.to_owned() }));
        let options = Options {
            rpc_limits: RunLimits { output: RPC_LIMITS.output, timeout: Duration::from_secs(20) },
            audit: Audit::at(PathBuf::from(dir.path()).join("audit.jsonl")),
            heartbeat: Duration::from_millis(100),
        };
        let (client_io, server_io) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server_io);
        tokio::spawn(volce_lab::mcp::serve(VolceLab::new(inspector, options), read, write));
        let (read, write) = tokio::io::split(client_io);
        let mut raw = Raw { write, lines: BufReader::new(read).lines(), next_id: 0, _dir: dir };
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "progress-test", "version": "0"}});
        let (_, answer) = raw.request("initialize", init).await;
        assert!(answer.get("result").is_some(), "{answer}");
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        let (_, identity) = raw
            .request("tools/call", json!({"name": "cloud_check", "arguments": {"check": "identity"}}))
            .await;
        assert_eq!(identity["result"]["structuredContent"]["status"], "ok", "{identity}");
        raw
    }

    async fn send(&mut self, message: Value) {
        self.write.write_all((message.to_string() + "\n").as_bytes()).await.unwrap();
    }

    /// Sends a request; returns every message before its answer, and the answer.
    async fn request(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        let mut before = Vec::new();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
                .await
                .expect("an answer within 20 s")
                .unwrap()
                .expect("the server is still there");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return (before, message);
            }
            before.push(message);
        }
    }

    async fn execute(&mut self, token: Option<Value>) -> (Vec<Value>, Value) {
        let mut params = json!({"name": "service_execute", "arguments": {"plan_id": PLAN_ID}});
        if let Some(token) = token {
            params["_meta"] = json!({"progressToken": token});
        }
        self.request("tools/call", params).await
    }
}

fn progress_line(step: &str) -> String {
    format!("printf '%s\\n' '{{\"progress\":\"{step}\"}}'; ")
}

fn ok_reply() -> String {
    let reply = json!({"operation": "execute", "status": "ok",
                       "result": {"plan_id": PLAN_ID, "outcome": "completed"}});
    format!("printf '%s\\n' '{reply}'")
}

/// A deploy's steps with a slow pull (0.6 s, six heartbeats' worth).
fn deploying_helper() -> String {
    let mut script = "sleep 0.6; ".to_owned();
    for step in ["pulled", "network", "app_started", "gateway_tested", "health_check"] {
        script.push_str(&progress_line(step));
    }
    script + &ok_reply()
}

#[tokio::test]
async fn with_a_progress_token_the_steps_and_heartbeats_arrive_in_order_before_the_result() {
    let mut raw = Raw::start(&deploying_helper()).await;
    let (before, answer) = raw.execute(Some(json!("deploy-1"))).await;
    assert_eq!(answer["result"]["structuredContent"]["status"], "ok", "{answer}");
    assert!(before.iter().all(|m| m["method"] == "notifications/progress"), "{before:?}");
    assert!(before.iter().all(|m| m["params"]["progressToken"] == "deploy-1"), "{before:?}");
    let progress: Vec<f64> = before.iter().map(|m| m["params"]["progress"].as_f64().unwrap()).collect();
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "progress increases: {progress:?}");
    let messages: Vec<&str> = before.iter().map(|m| m["params"]["message"].as_str().unwrap()).collect();
    // The slow pull: heartbeats (at least 3 of the 100 ms ones) before any step.
    let beats = messages.iter().take_while(|m| m.starts_with("still working")).count();
    assert!(beats >= 3, "{messages:?}");
    let steps: Vec<&str> = messages[beats..].to_vec();
    let expected: Vec<&str> =
        [Step::Pulled, Step::Network, Step::AppStarted, Step::GatewayTested, Step::HealthCheck]
            .into_iter()
            .map(step_message)
            .collect();
    assert_eq!(steps, expected, "every step, in order, and nothing after the last");
}

#[tokio::test]
async fn without_a_progress_token_nothing_extra_is_sent() {
    let mut raw = Raw::start(&deploying_helper()).await;
    let (before, answer) = raw.execute(None).await;
    assert_eq!(answer["result"]["structuredContent"]["status"], "ok", "{answer}");
    assert_eq!(before, Vec::<Value>::new());
}

#[tokio::test]
async fn an_older_helper_that_prints_no_progress_still_answers() {
    let mut raw = Raw::start(&ok_reply()).await;
    let (before, answer) = raw.execute(Some(json!(7))).await;
    assert_eq!(answer["result"]["structuredContent"]["status"], "ok", "{answer}");
    assert_eq!(answer["result"]["structuredContent"]["result"]["outcome"], "completed", "{answer}");
    assert!(before.iter().all(|m| m["params"]["message"].as_str().unwrap().starts_with("still working")));
}

#[tokio::test]
async fn a_malformed_progress_line_makes_the_outcome_unknown_and_is_not_forwarded() {
    let helper =
        format!("{}printf '%s\\n' '{{\"progress\":\"rebooted\"}}'; {}", progress_line("pulled"), ok_reply());
    let mut raw = Raw::start(&helper).await;
    let (before, answer) = raw.execute(Some(json!("t"))).await;
    assert_eq!(answer["result"]["structuredContent"]["status"], "unknown", "{answer}");
    let messages: Vec<&str> = before.iter().map(|m| m["params"]["message"].as_str().unwrap()).collect();
    assert!(!messages.iter().any(|m| m.contains("rebooted")), "{messages:?}");
    assert_eq!(messages.iter().filter(|m| !m.starts_with("still working")).count(), 1, "{messages:?}");
}

#[tokio::test]
async fn progress_then_a_refusal_is_still_a_refusal() {
    let reply = json!({"code": "plan_expired", "message": "Too late.", "status": "rejected"});
    let helper = format!("{}printf '%s\\n' '{reply}'; exit 1", progress_line("pulled"));
    let mut raw = Raw::start(&helper).await;
    let (before, answer) = raw.execute(Some(json!("t"))).await;
    assert_eq!(answer["result"]["structuredContent"]["status"], "rejected", "{answer}");
    assert_eq!(before.last().unwrap()["params"]["message"], step_message(Step::Pulled));
}

/// An rmcp client that keeps the progress messages it is handed.
#[derive(Clone, Default)]
struct Progressed(Arc<std::sync::Mutex<Vec<String>>>);

impl rmcp::ClientHandler for Progressed {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.0.lock().unwrap().push(params.message.unwrap_or_default());
    }
}

/// The client agents are built on: its handler is handed every step.
#[tokio::test]
async fn an_rmcp_client_with_a_progress_handler_is_handed_the_steps() {
    use rmcp::ServiceExt as _;
    use rmcp::model::CallToolRequestParams;
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        mode: Mode::Ssh,
        expected_host: "web-1".into(),
        expected_user: "agent".into(),
        management: true,
        ..Config::default()
    };
    let inspector =
        Inspector::with_transport_for_tests(config, Arc::new(StandIn { rpc: deploying_helper() }));
    let options = Options {
        rpc_limits: RPC_LIMITS,
        audit: Audit::at(dir.path().join("audit.jsonl")),
        heartbeat: Duration::from_millis(100),
    };
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server_io);
    tokio::spawn(volce_lab::mcp::serve(VolceLab::new(inspector, options), read, write));
    let seen = Progressed::default();
    let client = seen.clone().serve(client_io).await.unwrap();
    let args = |v: Value| v.as_object().unwrap().clone();
    let identity =
        CallToolRequestParams::new("cloud_check").with_arguments(args(json!({"check": "identity"})));
    client.call_tool(identity).await.unwrap();
    // rmcp's client puts a progress token of its own on every request.
    let params =
        CallToolRequestParams::new("service_execute").with_arguments(args(json!({"plan_id": PLAN_ID})));
    let result = client.call_tool(params).await.unwrap();
    assert_eq!(result.structured_content.unwrap()["status"], "ok");
    let steps = || seen.0.lock().unwrap().iter().filter(|m| !m.starts_with("still working")).count();
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while steps() < 5 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let messages = seen.0.lock().unwrap().clone();
    assert_eq!(steps(), 5, "{messages:?}");
}
