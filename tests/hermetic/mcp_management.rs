//! Management flows of the MCP server against a stand-in host helper.
//!
//! The shipped binary always runs the fixed `sudo -n /usr/local/bin/volce-lab-host rpc`
//! (locally or over ssh), so these tests build the server in-process through
//! the library, with an `Inspector::with_transport_for_tests` whose commands are real
//! `/bin/sh` processes playing the target and the helper, and talk to it with
//! an rmcp client over an in-memory duplex. Runs unprivileged; no network.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, Tool};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use volce_lab::inspect::Inspector;
use volce_lab::inspect::transport::RunLimits;
use volce_lab::mcp::audit::Audit;
use volce_lab::mcp::rpc::RPC_LIMITS;
use volce_lab::mcp::{Options, VolceLab};

use crate::support::mcp::{ScriptedTarget, arguments, structured};

const PLAN_ID: &str = "0123456789abcdef0123456789abcdef";
const GOOD_IDENTITY: &str = r#"echo x >> "$DIR/identity_calls"; printf 'web-1\nagent\n'"#;
/// Every stand-in helper first records that it ran and what it read.
const RPC_PROLOGUE: &str = r#"echo x >> "$DIR/rpc_calls"; cat > "$DIR/request"; "#;

struct Harness {
    client: RunningService<RoleClient, ()>,
    tools: Vec<Tool>,
    dir: tempfile::TempDir,
}

struct Setup {
    identity: &'static str,
    rpc: String,
    management: bool,
    rpc_timeout: Duration,
}

impl Setup {
    fn rpc(rpc: impl Into<String>) -> Setup {
        Setup {
            identity: GOOD_IDENTITY,
            rpc: rpc.into(),
            management: true,
            rpc_timeout: Duration::from_secs(10),
        }
    }

    async fn start(self) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::support::mcp::stand_in_config(self.management);
        let stand_in = ScriptedTarget {
            dir: dir.path().to_owned(),
            identity: self.identity.into(),
            disk: "printf 'Filesystem Size\\n/dev/vda 20G\\n'".into(),
            rpc: format!("{RPC_PROLOGUE}{}", self.rpc),
        };
        let inspector = Inspector::with_transport_for_tests(config, Arc::new(stand_in));
        let options = Options {
            rpc_limits: RunLimits { output: RPC_LIMITS.output, timeout: self.rpc_timeout },
            audit: Audit::at(dir.path().join("state/volce-lab/audit.jsonl")),
            heartbeat: volce_lab::mcp::progress::HEARTBEAT,
        };
        let server = VolceLab::new(inspector, options);
        let (client_io, server_io) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server_io);
        tokio::spawn(volce_lab::mcp::serve(server, read, write));
        let client = ().serve(client_io).await.expect("initialize");
        let tools = client.list_all_tools().await.expect("tools/list");
        Harness { client, tools, dir }
    }
}

impl Harness {
    fn params(name: &str, args: Value) -> CallToolRequestParams {
        CallToolRequestParams::new(name.to_owned()).with_arguments(arguments(args))
    }

    async fn call(&self, name: &str, args: Value) -> Value {
        let result =
            self.client.call_tool(Self::params(name, args)).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        let tool = self.tools.iter().find(|t| t.name == name).unwrap();
        structured(tool, &result)
    }

    async fn identify(&self) {
        let result = self.call("cloud_check", json!({"check": "identity"})).await;
        assert_eq!(result["status"], "ok", "{result}");
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// How many times a stand-in script ran.
    fn runs(&self, name: &str) -> usize {
        std::fs::read_to_string(self.path(name)).map(|text| text.lines().count()).unwrap_or(0)
    }

    fn audit_text(&self) -> String {
        std::fs::read_to_string(self.path("state/volce-lab/audit.jsonl")).unwrap_or_default()
    }

    fn audit(&self) -> Vec<Value> {
        self.audit_text().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }
}

fn reply(value: Value) -> String {
    format!("printf '%s\\n' '{value}'")
}

#[tokio::test]
async fn management_needs_identity_and_the_users_switch_and_runs_nothing_before() {
    let mut setup = Setup::rpc("exit 0");
    setup.management = false;
    let harness = setup.start().await;
    let early = harness.call("service_inventory", json!({})).await;
    assert_eq!(early["status"], "identity_required");
    assert_eq!(early["is_demo"], false);
    harness.identify().await;
    for (name, args) in [
        ("service_inventory", json!({})),
        ("service_plan", json!({"action": "stop", "parameters": {"app": "web"}})),
        ("service_execute", json!({"plan_id": PLAN_ID})),
    ] {
        let result = harness.call(name, args).await;
        assert_eq!(result["status"], "management_disabled", "{result}");
        assert!(result["message"].as_str().unwrap().contains("VOLCE_LAB_MANAGEMENT=enabled"));
    }
    assert_eq!(harness.runs("rpc_calls"), 0, "the helper never ran");
}

#[tokio::test]
async fn inventory_verifies_identity_again_and_passes_the_result_without_leaking_to_the_audit() {
    let script = reply(json!({"status": "ok", "operation": "inventory",
        "result": {"apps": [{"name": "web", "note": "token=SECRET-OUTPUT-1"}]}}))
        + "; echo SECRET-STDERR-2 >&2";
    let harness = Setup::rpc(script).start().await;
    harness.identify().await;
    let result = harness.call("service_inventory", json!({})).await;
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(result["is_demo"], false);
    assert_eq!(result["mode"], "ssh");
    assert_eq!(result["result"]["apps"][0]["name"], "web");
    assert_eq!(result["execution"]["execution_status"], "ok");
    // The request carries the call's request id, the same as its audit
    // line's: the host's rows for it join on that id.
    let request_id = result["request_id"].as_str().unwrap().to_owned();
    let sent = format!(r#"{{"operation":"inventory","request_id":"{request_id}"}}"#);
    assert_eq!(std::fs::read(harness.path("request")).unwrap(), sent.as_bytes());
    assert_eq!(harness.runs("identity_calls"), 2, "identity was verified again before the call");

    // A secret in the arguments: refused, and not recorded either.
    let refused = harness.call("service_inventory", json!({"command": "SECRET-ARG-3"})).await;
    assert_eq!(refused["status"], "invalid_arguments");
    let audit = harness.audit_text();
    assert_eq!(audit.lines().count(), 3);
    assert!(!audit.contains("SECRET"), "audit leaked: {audit}");
    assert!(!audit.contains("web"), "no output in the audit: {audit}");
    let line = &harness.audit()[1];
    assert_eq!(line["request_id"], request_id.as_str());
    assert_eq!(line["tool"], "service_inventory");
    assert_eq!(line["status"], "ok");
    assert_eq!(line["execution_status"], "ok");
    assert_eq!(line["exit_code"], 0);
}

#[tokio::test]
async fn plan_payload_arrives_byte_exact_at_the_helper() {
    let harness = Setup::rpc(reply(json!({"status": "ok", "operation": "plan",
        "result": {"id": PLAN_ID, "action": "deploy", "requires_approval": false}})))
    .start()
    .await;
    harness.identify().await;
    let mut text =
        String::from("it's \"quoted\" $(id) `id` ${HOME} \\ ; | & \n<<'EOF'\nrm -rf /\nEOF\n\t\u{7f} é 漢 ");
    while text.len() < 5000 {
        text.push_str("0123456789 $(reboot) `halt` 'x' \"y\"\n");
    }
    let parameters = json!({"app": "a'b\"c$(id)", "image": "web", "host_port": 18001, "container_port": 8080,
        "server_name": text});
    let result = harness.call("service_plan", json!({"action": "deploy", "parameters": parameters})).await;
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(result["plan_id"], PLAN_ID);
    assert_eq!(result["action"], "deploy");
    // The stored plan names its id plan_id, as every result (and demo mode's plan) does.
    assert_eq!(result["result"]["plan_id"], PLAN_ID, "{result}");
    assert_eq!(result["result"].get("id"), None, "{result}");
    assert_eq!(result["result"]["requires_approval"], false, "the rest as the helper printed it");

    let received = std::fs::read(harness.path("request")).unwrap();
    let expected =
        serde_json::to_vec(&json!({"operation": "plan", "action": "deploy", "parameters": parameters,
            "request_id": result["request_id"]}))
        .unwrap();
    assert_eq!(received, expected, "the helper must read exactly the request");
    let decoded: Value = serde_json::from_slice(&received).unwrap();
    assert_eq!(decoded["parameters"]["server_name"].as_str().unwrap(), text);
    assert_eq!(decoded["parameters"]["app"], "a'b\"c$(id)");
    assert!(!received.contains(&b'\n'), "one line on stdin");
}

#[tokio::test]
async fn a_helper_refusal_becomes_rejected_with_its_code() {
    let harness = Setup::rpc(
        reply(json!({"status": "rejected", "code": "plan_expired", "message": "The plan expired at 12:00."}))
            + "; exit 1",
    )
    .start()
    .await;
    harness.identify().await;
    let result = harness.call("service_execute", json!({"plan_id": PLAN_ID})).await;
    assert_eq!(result["status"], "rejected", "{result}");
    assert_eq!(result["code"], "plan_expired");
    assert_eq!(result["plan_id"], PLAN_ID);
    assert_eq!(result["exit_code"], 1);
    assert!(result["message"].as_str().unwrap().contains("The plan expired at 12:00."));
    assert_eq!(harness.runs("rpc_calls"), 1);
}

/// Every code has its one next step: a whole sentence within the bound.
#[test]
fn every_code_has_a_whole_fix_sentence_within_its_bound() {
    use strum::VariantArray as _;
    use volce_lab::vocab::{Code, FIX_MAX_CHARS};
    for code in Code::VARIANTS {
        let fix = code.fix();
        assert!(!fix.is_empty() && fix.chars().count() <= FIX_MAX_CHARS, "{code}: {fix}");
        assert!(fix.starts_with(|c: char| c.is_ascii_uppercase()) && fix.ends_with('.'), "{code}: {fix}");
        assert!(!fix.ends_with("...") && !fix.contains("  "), "{code}: {fix}");
    }
}

/// Issue 26: every result that is not ok carries `code`, the whole
/// `message` and a separate `fix`, the one next step of its code (the same
/// sentence for every tool), in structuredContent and the text mirror
/// (`structured` holds the two equal). Tried: a refusal (nothing ran), a
/// plan that ran and was rolled back, and arguments refused before anything
/// ran (a failure that needs inspection: `needs_inspection_is_passed_through`).
#[tokio::test]
async fn refused_and_rolled_back_results_carry_their_fix() {
    use volce_lab::vocab::Code;
    let rolled_back = "The new app did not answer through its gateway, so the deploy was rolled back and \
                       verified; nothing is retried and nothing else changed. Check container_port and the \
                       image, then prepare a new plan.";
    let cases = [
        (
            "approval_required",
            "An operator must approve this plan on the server first; nothing ran.",
            Code::ApprovalRequired,
        ),
        ("health_check_failed", rolled_back, Code::HealthCheckFailed),
    ];
    let mut harness = None;
    for (code, sentence, known) in cases {
        let started =
            Setup::rpc(reply(json!({"status": "rejected", "code": code, "message": sentence})) + "; exit 1")
                .start()
                .await;
        started.identify().await;
        let result = started.call("service_execute", json!({"plan_id": PLAN_ID})).await;
        assert_eq!(result["status"], "rejected", "{result}");
        assert_eq!(result["code"], code);
        assert!(result["message"].as_str().unwrap().ends_with(sentence), "whole: {result}");
        assert_eq!(result["fix"], known.fix(), "{result}");
        harness = Some(started);
    }
    let harness = harness.unwrap();
    let refused = harness.call("service_execute", json!({"plan_id": "not-a-plan", "extra": 1})).await;
    assert_eq!(refused["status"], "invalid_arguments", "{refused}");
    let code: Code = refused["code"].as_str().unwrap().parse().unwrap();
    assert_eq!(refused["fix"], code.fix());
}

/// Before issue 26 a policy with a typo made web_status answer
/// helper_unavailable while service_inventory said policy_invalid.
#[tokio::test]
async fn web_status_and_inventory_give_the_same_code_for_the_same_refusal() {
    let sentence = "The policy /etc/volce-lab/policy.json is invalid: catalog.web is not pinned; fix it, then run doctor.";
    let harness = Setup::rpc(
        reply(json!({"status": "rejected", "code": "policy_invalid", "message": sentence})) + "; exit 1",
    )
    .start()
    .await;
    harness.identify().await;
    let web = harness.call("cloud_check", json!({"check": "web_status"})).await;
    let inventory = harness.call("service_inventory", json!({})).await;
    for result in [&web, &inventory] {
        assert_eq!(result["status"], "rejected", "{result}");
        assert_eq!(result["code"], "policy_invalid", "{result}");
        assert!(result["message"].as_str().unwrap().ends_with(sentence), "the whole sentence: {result}");
    }
}

/// A server with no app yet: the helper answers ok with no gateway. Before
/// issue 37 the agent read "the answer is unhealthy; see output" next to an
/// output that said ok; it now reads why nothing serves and what to do.
#[tokio::test]
async fn web_status_on_a_server_with_no_app_says_no_managed_gateway_yet() {
    let harness =
        Setup::rpc(reply(json!({"status": "ok", "operation": "gateway_status", "result": {"gateways": []}})))
            .start()
            .await;
    harness.identify().await;
    let web = harness.call("cloud_check", json!({"check": "web_status"})).await;
    assert_eq!(web["status"], "check_failed", "nothing serves: {web}");
    let message = web["message"].as_str().unwrap();
    assert!(message.starts_with("No managed gateway yet"), "{web}");
    assert!(!message.contains("unhealthy"), "{web}");
    assert!(web["fix"].as_str().unwrap().contains("service_plan"), "{web}");
}

#[tokio::test]
async fn needs_inspection_is_passed_through() {
    let harness = Setup::rpc(
        reply(json!({"status": "needs_inspection", "code": "needs_inspection", "plan_id": PLAN_ID,
            "message": "docker run failed after the network was created."}))
            + "; exit 1",
    )
    .start()
    .await;
    harness.identify().await;
    let result = harness.call("service_execute", json!({"plan_id": PLAN_ID})).await;
    assert_eq!(result["status"], "needs_inspection", "{result}");
    assert_eq!(result["plan_id"], PLAN_ID);
    assert!(result["message"].as_str().unwrap().contains("do not retry"));
    // A failure's next step, the same as every tool gives for its code.
    assert_eq!(result["fix"], volce_lab::vocab::Code::NeedsInspection.fix());
}

#[tokio::test]
async fn a_timeout_is_unknown_unconfirmed_and_never_retried() {
    let mut setup = Setup::rpc("exec sleep 30");
    setup.rpc_timeout = Duration::from_millis(400);
    let harness = setup.start().await;
    harness.identify().await;
    let started = Instant::now();
    let result = harness.call("service_execute", json!({"plan_id": PLAN_ID})).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(result["status"], "unknown", "{result}");
    assert_eq!(result["execution"]["execution_status"], "timeout");
    assert_eq!(result["execution"]["completion"], "unconfirmed");
    assert!(result["message"].as_str().unwrap().contains("Do not retry"));
    assert_eq!(harness.runs("rpc_calls"), 1, "nothing is retried");
    let line = &harness.audit()[1];
    assert_eq!(
        (line["status"].as_str(), line["execution_status"].as_str()),
        (Some("unknown"), Some("timeout"))
    );
    assert_eq!(line["plan_id"], PLAN_ID);
}

#[tokio::test]
async fn an_oversized_reply_is_unknown() {
    let harness = Setup::rpc("head -c 200000 /dev/zero | tr '\\000' x").start().await;
    harness.identify().await;
    let result = harness.call("service_inventory", json!({})).await;
    assert_eq!(result["status"], "unknown", "{result}");
    assert_eq!(result["execution"]["execution_status"], "output_limit");
    assert_eq!(result["result"], Value::Null);
    assert_eq!(harness.runs("rpc_calls"), 1);
}

#[tokio::test]
async fn a_garbage_reply_is_unknown() {
    for script in [
        "echo 'Welcome to Ubuntu'; echo '{\"status\":\"ok\"'",
        "echo '{\"status\":\"ok\",\"operation\":\"inventory\",\"result\":{}}{}'",
        "echo '{\"status\":\"ok\",\"operation\":\"plan\",\"result\":{}}'",
        "echo '{\"status\":\"rejected\",\"code\":\"x\",\"message\":\"m\"}'; exit 3",
    ] {
        let harness = Setup::rpc(script).start().await;
        harness.identify().await;
        let result = harness.call("service_inventory", json!({})).await;
        assert_eq!(result["status"], "unknown", "{script}: {result}");
        assert!(result["message"].as_str().unwrap().contains("Do not retry"));
        assert_eq!(harness.runs("rpc_calls"), 1, "{script}");
    }
}

/// Tried: the helper played the way `sudo -n` refuses without a matching
/// rule: exit 1, nothing on stdout, sudo's sentence on stderr.
#[tokio::test]
async fn a_sudo_refusal_is_helper_unavailable_for_inventory_and_unknown_for_a_plan() {
    let harness = Setup::rpc("echo 'sudo: a password is required' >&2; exit 1").start().await;
    harness.identify().await;
    let inventory = harness.call("service_inventory", json!({})).await;
    assert_eq!(inventory["status"], "helper_unavailable", "{inventory}");
    assert_eq!(inventory["code"], Value::Null);
    let message = inventory["message"].as_str().unwrap();
    assert!(message.contains("sudo refuses") && message.contains("volce-lab-host doctor"), "{message}");
    let plan = harness.call("service_plan", json!({"action": "stop", "parameters": {"app": "web"}})).await;
    assert_eq!(plan["status"], "unknown", "a plan may have been recorded: {plan}");
    for result in [&inventory, &plan] {
        assert!(!result.to_string().contains("password"), "sudo's stderr never reaches the model: {result}");
    }
    let audit = harness.audit_text();
    assert!(!audit.contains("password"), "{audit}");
    let statuses: Vec<Value> = harness.audit().iter().map(|line| line["status"].clone()).collect();
    assert_eq!(statuses, [json!("ok"), json!("helper_unavailable"), json!("unknown")]);
}

/// Tried: ssh refusing a changed host key (its warning on stderr, exit 255)
/// and a target that answers as another host and user: `inspect` explains
/// both to a person, the agent gets neither ssh's words, nor the reason, nor
/// what the target said.
#[tokio::test]
async fn ssh_s_stderr_and_the_targets_answer_never_reach_a_result_or_the_audit() {
    for identity in [
        "printf '@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @\\nHost key verification failed.\\n' >&2; exit 255",
        "printf 'SPY-HOST\\nSPY-USER\\n'",
    ] {
        let mut setup = Setup::rpc("exit 0");
        setup.identity = identity;
        let harness = setup.start().await;
        let result = harness.call("cloud_check", json!({"check": "identity"})).await;
        assert!(["connection_failed", "identity_mismatch"].contains(&result["status"].as_str().unwrap()));
        let inventory = harness.call("service_inventory", json!({})).await;
        assert_eq!(harness.runs("rpc_calls"), 0);
        let seen = format!("{result} {inventory} {}", harness.audit_text());
        for word in
            ["WARNING", "IDENTIFICATION", "verification", "host_key", "known_hosts", "SPY", "differed"]
        {
            assert!(!seen.contains(word), "{word}: {seen}");
        }
    }
}

#[tokio::test]
async fn a_changed_identity_stops_management_before_the_helper_runs() {
    let mut setup = Setup::rpc("exit 0");
    setup.identity = r#"echo x >> "$DIR/identity_calls"
        if [ "$(wc -l < "$DIR/identity_calls")" -gt 1 ]; then printf 'web-2\nagent\n'; else printf 'web-1\nagent\n'; fi"#;
    let harness = setup.start().await;
    harness.identify().await;
    let result = harness.call("service_plan", json!({"action": "stop", "parameters": {"app": "web"}})).await;
    assert_eq!(result["status"], "identity_mismatch", "{result}");
    assert_eq!(harness.runs("rpc_calls"), 0, "the helper never ran");
    let again = harness.call("service_inventory", json!({})).await;
    assert_eq!(again["status"], "identity_mismatch", "a mismatch sticks until identity matches again");
    assert_eq!(harness.runs("rpc_calls"), 0, "the helper still never ran");
}

/// Whether `pid` is gone (or a zombie waiting to be reaped: it runs nothing).
fn is_dead(pid: i32) -> bool {
    use nix::sys::signal::kill;
    use nix::unistd::Pid;
    if kill(Pid::from_raw(pid), None).is_err() {
        return true;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'))
}

async fn wait_for(path: &Path) -> String {
    for _ in 0..500 {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} never appeared", path.display());
}

#[tokio::test]
async fn cancelling_a_call_kills_the_helper_process_and_audits_unknown() {
    let mut setup = Setup::rpc(r#"echo $$ > "$DIR/pid"; exec sleep 60"#);
    setup.rpc_timeout = Duration::from_secs(60);
    let harness = setup.start().await;
    harness.identify().await;

    // Dropping the client's call future sends notifications/cancelled.
    let peer = harness.client.peer().clone();
    let params = Harness::params("service_execute", json!({"plan_id": PLAN_ID}));
    let call = tokio::spawn(async move { peer.call_tool(params).await });
    let pid: i32 = wait_for(&harness.path("pid")).await.trim().parse().unwrap();
    assert!(!is_dead(pid), "the stand-in helper is running");
    call.abort();

    let started = Instant::now();
    while !is_dead(pid) {
        assert!(started.elapsed() < Duration::from_secs(5), "pid {pid} still alive after the cancel");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The audit line of the interrupted execute says unknown.
    let mut lines = Vec::new();
    for _ in 0..250 {
        lines = harness.audit();
        if lines.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[1]["tool"], "service_execute");
    assert_eq!(lines[1]["status"], "unknown");
    assert_eq!(lines[1]["plan_id"], PLAN_ID);
    assert_eq!(harness.runs("rpc_calls"), 1, "nothing is retried");

    // The server is still there.
    let after = harness.call("cloud_check", json!({"check": "disk"})).await;
    assert_eq!(after["status"], "ok", "{after}");
}

/// Tried: a server reached without the ssh gate (the stand-in is a login
/// shell), whose helper answers as 0.1.0 did: it is sent protocol 1's
/// bytes, and service_inventory's message says what is known of its version.
#[tokio::test]
async fn service_inventory_says_the_servers_version_and_sends_protocol_1_bytes_to_an_unknown_one() {
    let harness =
        Setup::rpc(reply(json!({"status": "ok", "operation": "inventory", "result": {"apps": []}})))
            .start()
            .await;
    harness.identify().await;
    let result = harness.call("service_inventory", json!({})).await;
    assert_eq!(result["status"], "ok", "{result}");
    let message = result["message"].as_str().unwrap();
    assert!(
        message.contains(
            "The server runs volce-lab not known (no ssh gate; protocol 1 assumed); this workstation runs"
        ),
        "{message}"
    );
    let sent: Value = serde_json::from_slice(&std::fs::read(harness.path("request")).unwrap()).unwrap();
    assert_eq!(sent.get("protocol"), None, "{sent}");
}

/// Tried: a deploy that leaves `container_port` to the catalog entry, to a
/// target that named no version (protocol 1, which refuses that deploy):
/// `server_too_old` from the workstation, and nothing reaches the helper.
#[tokio::test]
async fn a_deploy_without_its_port_is_not_sent_to_a_protocol_1_server() {
    let harness = Setup::rpc(reply(json!({"status": "ok", "operation": "plan", "result": {}}))).start().await;
    harness.identify().await;
    let arguments = json!({"action": "deploy", "parameters": {"app": "web", "image": "web", "host_port": 18080, "server_name": "web.example"}});
    let result = harness.call("service_plan", arguments).await;
    assert_eq!(
        (result["status"].as_str(), result["code"].as_str()),
        (Some("rejected"), Some("server_too_old")),
        "{result}"
    );
    let message = result["message"].as_str().unwrap();
    assert!(message.contains("nothing was sent") && message.contains("protocol 2"), "{message}");
    assert!(result["fix"].as_str().unwrap().starts_with("Upgrade volce-lab on that server"), "{result}");
    assert!(!harness.path("request").exists(), "the helper was never asked");
}

/// Tried: a restart (protocol 2, issue 25) to a target that named no
/// version (taken as protocol 1, whose helper knows no restart):
/// `server_too_old` from the workstation, and nothing reaches the helper.
#[tokio::test]
async fn a_restart_is_not_sent_to_a_protocol_1_server() {
    let harness = Setup::rpc(reply(json!({"status": "ok", "operation": "plan", "result": {}}))).start().await;
    harness.identify().await;
    let arguments = json!({"action": "restart", "parameters": {"app": "web"}});
    let result = harness.call("service_plan", arguments).await;
    assert_eq!(
        (result["status"].as_str(), result["code"].as_str()),
        (Some("rejected"), Some("server_too_old")),
        "{result}"
    );
    let message = result["message"].as_str().unwrap();
    assert!(message.contains("nothing was sent") && message.contains("protocol 2"), "{message}");
    assert!(!harness.path("request").exists(), "the helper was never asked");
}

/// Tried: a rollback (issue 25), as a restart, to a server of the same
/// protocol-1 kind: `server_too_old`, and nothing reaches the helper.
#[tokio::test]
async fn a_rollback_is_not_sent_to_a_protocol_1_server() {
    let harness = Setup::rpc(reply(json!({"status": "ok", "operation": "plan", "result": {}}))).start().await;
    harness.identify().await;
    let arguments = json!({"action": "rollback", "parameters": {"app": "web"}});
    let result = harness.call("service_plan", arguments).await;
    assert_eq!(
        (result["status"].as_str(), result["code"].as_str()),
        (Some("rejected"), Some("server_too_old")),
        "{result}"
    );
    let message = result["message"].as_str().unwrap();
    assert!(message.contains("nothing was sent") && message.contains("protocol 2"), "{message}");
    assert!(!harness.path("request").exists(), "the helper was never asked");
}
