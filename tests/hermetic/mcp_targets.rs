//! Several targets behind one MCP server: every tool takes `target`, each
//! target keeps its own identity gate and helper, a plan goes only to the
//! target it names, and `cloud_check` fans out read-only with one result
//! per target. The targets are stand-in shell scripts, each with its own
//! directory, run through the real runner. Runs unprivileged; no network.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, Tool};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use volce_lab::config::{Config, Mode};
use volce_lab::inspect::Inspector;
use volce_lab::inspect::transport::RunLimits;
use volce_lab::mcp::audit::Audit;
use volce_lab::mcp::rpc::RPC_LIMITS;
use volce_lab::mcp::{Options, VolceLab};

use crate::support::mcp::{ScriptedTarget, arguments, structured};

struct Fleet {
    client: RunningService<RoleClient, ()>,
    tools: Vec<Tool>,
    dir: tempfile::TempDir,
}

/// db (prod, slow when `slow`), web-1 (prod, web) and web-2 (web, answers
/// as another host), each expecting its own name.
async fn fleet(slow: bool) -> Fleet {
    fleet_answering(slow, "").await
}

/// [`fleet`], each helper then running `reply` (shell) after it read the request.
async fn fleet_answering(slow: bool, reply: &str) -> Fleet {
    serve_answering(
        &[
            ("db", &["prod"], "db", if slow { "sleep 30" } else { "printf 'db\\nagent\\n'" }),
            ("web-1", &["prod", "web"], "web-1", "printf 'web-1\\nagent\\n'"),
            ("web-2", &["web"], "web-2", "printf 'impostor\\nagent\\n'"),
        ],
        reply,
    )
    .await
}

/// A server for `targets`: (name, groups, expected host, identity script).
async fn serve(targets: &[(&str, &[&str], &str, &str)]) -> Fleet {
    serve_answering(targets, "").await
}

/// [`serve`], each helper then running `reply` (shell) after it read the request.
async fn serve_answering(targets: &[(&str, &[&str], &str, &str)], reply: &str) -> Fleet {
    let dir = tempfile::tempdir().unwrap();
    let targets = targets
        .iter()
        .map(|&(name, groups, expected_host, identity)| {
            let target_dir = dir.path().join(name);
            std::fs::create_dir(&target_dir).unwrap();
            let config = Config {
                mode: Mode::Ssh,
                ssh_alias: name.into(),
                expected_host: expected_host.into(),
                expected_user: "agent".into(),
                timeout: Duration::from_secs(2),
                management: true,
                ..Config::default()
            };
            // Each run is counted in the target's own directory.
            let stand_in = ScriptedTarget {
                dir: target_dir,
                identity: format!("echo x >> \"$DIR/identity\"; {identity}"),
                disk: "echo x >> \"$DIR/disk\"; printf 'Filesystem Size\\n/dev/vda 20G\\n'".into(),
                rpc: format!("echo x >> \"$DIR/rpc\"; cat > \"$DIR/request\"; {reply}"),
            };
            let inspector = Inspector::with_transport_for_tests(config, Arc::new(stand_in));
            (name.to_owned(), groups.iter().map(|g| String::from(*g)).collect(), inspector)
        })
        .collect();
    let options = Options {
        rpc_limits: RunLimits { output: RPC_LIMITS.output, timeout: Duration::from_secs(5) },
        audit: Audit::at(dir.path().join("state/audit.jsonl")),
        heartbeat: volce_lab::mcp::progress::HEARTBEAT,
    };
    let server = VolceLab::with_targets(targets, 8, options);
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server_io);
    tokio::spawn(volce_lab::mcp::serve(server, read, write));
    let client = ().serve(client_io).await.expect("initialize");
    let tools = client.list_all_tools().await.expect("tools/list");
    Fleet { client, tools, dir }
}

impl Fleet {
    async fn call(&self, name: &str, args: Value) -> Value {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments(args));
        let result = self.client.call_tool(params).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        structured(self.tools.iter().find(|t| t.name == name).unwrap(), &result)
    }

    /// How many times `what` ran on target `name`.
    fn runs(&self, name: &str, what: &str) -> usize {
        let path: PathBuf = self.dir.path().join(name).join(what);
        std::fs::read_to_string(path).map(|text| text.lines().count()).unwrap_or(0)
    }

    fn nothing_ran(&self) -> bool {
        ["db", "web-1", "web-2"]
            .iter()
            .all(|t| ["identity", "disk", "rpc"].iter().all(|w| self.runs(t, w) == 0))
    }

    fn audit(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.dir.path().join("state/audit.jsonl")).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }
}

/// Issue 44: the names are said once, in the server's instructions, not in
/// every tool's schema (where they would cost six times each on every
/// `tools/list`); `target` is required among several, where nothing else
/// names the servers.
#[tokio::test]
async fn every_tool_takes_target_the_instructions_name_them_and_it_is_required_among_several() {
    let fleet = fleet(false).await;
    assert_eq!(fleet.tools.len(), 5, "each tool once, whatever the number of targets");
    for tool in &fleet.tools {
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["properties"]["target"], json!({"type": "string"}), "{}", tool.name);
        let required = schema["required"].as_array().cloned().unwrap_or_default();
        // cloud_check may take `targets`, service_plan `targets` (a
        // rollout) and service_execute `rollout` instead (issue 43).
        let alone = ["cloud_check", "service_plan", "service_execute"];
        assert_eq!(
            required.contains(&json!("target")),
            !alone.contains(&tool.name.as_ref()),
            "{}",
            tool.name
        );
    }
    let check = fleet.tools.iter().find(|t| t.name == "cloud_check").unwrap();
    assert_eq!(check.input_schema["properties"]["targets"]["items"], json!({"type": "string"}));
    let info = fleet.client.peer_info().expect("server info");
    let instructions = info.instructions.as_deref().unwrap_or("");
    assert!(
        instructions.ends_with(
            "Configured targets: db, web-1, web-2; groups: @prod (db, web-1), @web (web-1, web-2)."
        ),
        "{instructions}"
    );
}

/// What was tried: no target, an unknown target, an unknown group, and
/// `targets` on a changing tool. Each is invalid_arguments and runs nothing.
#[tokio::test]
async fn a_call_that_names_no_configured_target_runs_nothing() {
    let fleet = fleet(false).await;
    let cases = [
        ("service_inventory", json!({}), "missing_field"),
        ("cloud_check", json!({"check": "disk"}), "missing_field"),
        (
            "service_plan",
            json!({"target": "web-3", "action": "stop", "parameters": {"app": "a"}}),
            "unknown_target",
        ),
        ("cloud_check", json!({"check": "disk", "targets": ["@dev"]}), "unknown_target"),
        (
            "service_execute",
            json!({"target": "db", "targets": ["*"], "plan_id": "0".repeat(32)}),
            "unexpected_field",
        ),
    ];
    for (tool, args, code) in cases {
        let result = fleet.call(tool, args.clone()).await;
        assert_eq!(result["status"], "invalid_arguments", "{args}: {result}");
        assert_eq!(result["code"], code, "{args}: {result}");
        assert!(fleet.nothing_ran(), "{args}: something ran");
    }
    let listed = fleet.call("service_inventory", json!({"target": "nope"})).await;
    assert!(listed["message"].as_str().unwrap().contains("the targets are db, web-1, web-2"), "{listed}");
}

#[tokio::test]
async fn each_target_keeps_its_own_identity_gate_and_a_call_reaches_only_the_target_it_names() {
    let fleet = fleet(false).await;
    let identity = fleet.call("cloud_check", json!({"target": "web-1", "check": "identity"})).await;
    assert_eq!((identity["status"].as_str(), identity["target"].as_str()), (Some("ok"), Some("web-1")));
    // web-1's verified identity stands for no other target.
    let db = fleet.call("service_inventory", json!({"target": "db"})).await;
    assert_eq!(db["status"], "identity_required", "{db}");
    assert_eq!(db["target"], "db");
    // (The stand-in helper's reply is not a whole inventory: only where it went counts.)
    let inventory = fleet.call("service_inventory", json!({"target": "web-1"})).await;
    assert_eq!(inventory["target"], "web-1", "{inventory}");
    assert_eq!(fleet.runs("web-1", "rpc"), 1);
    assert_eq!(fleet.runs("db", "rpc") + fleet.runs("web-2", "rpc"), 0, "no other helper was asked");
    let audit = fleet.audit();
    let targets: Vec<&str> = audit.iter().map(|line| line["target"].as_str().unwrap_or("-")).collect();
    assert_eq!(targets, ["web-1", "db", "web-1"], "every audit line names its target");
}

#[tokio::test]
async fn a_fan_out_gives_one_result_per_target_and_a_slow_or_mismatched_one_fails_only_itself() {
    let fleet = fleet(true).await;
    let result = fleet.call("cloud_check", json!({"check": "identity", "targets": ["*"]})).await;
    assert_eq!(result["status"], "check_failed", "{result}");
    assert_eq!(result["target"], Value::Null);
    assert_eq!(result["summary"], json!({"ok": 1, "failed": 2}));
    let results = result["results"].as_array().unwrap();
    let seen: Vec<(&str, &str)> =
        results.iter().map(|r| (r["target"].as_str().unwrap(), r["status"].as_str().unwrap())).collect();
    // The targets that are not ok come first, in fleet order.
    assert_eq!(seen, [("db", "timeout"), ("web-2", "identity_mismatch"), ("web-1", "ok")]);
    let message = result["message"].as_str().unwrap();
    assert!(
        message.starts_with("2 of 3 targets are not ok: db (timeout), web-2 (identity_mismatch)"),
        "{message}"
    );
    for name in ["db", "web-1", "web-2"] {
        assert_eq!(fleet.runs(name, "identity"), 1, "{name}: its own identity check, once");
    }
    // A group fans out to its members only; web-1 is verified, web-2 is not.
    let disk = fleet.call("cloud_check", json!({"check": "disk", "targets": ["@web"]})).await;
    let seen: Vec<(&str, &str)> = disk["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["target"].as_str().unwrap(), r["status"].as_str().unwrap()))
        .collect();
    assert_eq!(seen, [("web-2", "identity_mismatch"), ("web-1", "ok")]);
    assert_eq!(fleet.runs("web-1", "disk"), 1);
    assert_eq!(fleet.runs("web-2", "disk") + fleet.runs("db", "disk"), 0);
    assert_eq!(fleet.runs("db", "identity"), 1, "db was not in the group");
}

/// Issue 37: a `plan_not_found` among several targets read as "this plan
/// does not exist; make a new one", when the id was only another
/// server's. Tried: web-1's helper refuses the id `plan_not_found`; the
/// result says plans are per server, names the target asked and the other
/// targets, and the fix points at calling again with the right target.
#[tokio::test]
async fn plan_not_found_among_several_targets_says_plans_are_per_server() {
    let reply = r#"printf '%s\n' '{"status":"rejected","code":"plan_not_found","message":"No plan has this id."}'; exit 1"#;
    let fleet = fleet_answering(false, reply).await;
    let identity = fleet.call("cloud_check", json!({"target": "web-1", "check": "identity"})).await;
    assert_eq!(identity["status"], "ok", "{identity}");
    let result = fleet.call("service_execute", json!({"target": "web-1", "plan_id": "a".repeat(32)})).await;
    assert_eq!(
        (result["status"].as_str(), result["code"].as_str()),
        (Some("rejected"), Some("plan_not_found"))
    );
    let message = result["message"].as_str().unwrap();
    assert!(message.contains("No plan has this id."), "the helper's sentence stays whole: {message}");
    assert!(message.contains("Plans are per server and this call asked web-1"), "{message}");
    assert!(message.contains("(db, web-2)"), "names the other targets: {message}");
    let fix = result["fix"].as_str().unwrap();
    assert!(fix.contains("another target") && fix.contains("service_plan"), "{fix}");
}

/// Issue 37: with a targets file, `management_disabled` told the user to
/// set VOLCE_LAB_MANAGEMENT, which must stay unset there. Tried: a real
/// targets file read by `Fleet::from_lookup`, web-1 with `management =
/// false`; its service call names the target's `management` key and the
/// file, in the message and the fix, and not the variable.
#[tokio::test]
async fn management_disabled_with_a_targets_file_names_the_targets_management_key() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/config"), "Host web-1\n").unwrap();
    let file = home.path().join("targets.toml");
    std::fs::write(
        &file,
        "[targets.web-1]\nexpected_host = \"web-1\"\nexpected_user = \"agent\"\nmanagement = false\n",
    )
    .unwrap();
    let env =
        [("HOME", home.path().as_os_str().to_owned()), ("VOLCE_LAB_TARGETS", file.clone().into_os_string())];
    let fleet = volce_lab::config::Fleet::from_lookup(|name| {
        env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone())
    })
    .unwrap();
    let options = Options {
        rpc_limits: RunLimits { output: RPC_LIMITS.output, timeout: Duration::from_secs(5) },
        audit: Audit::at(home.path().join("state/audit.jsonl")),
        heartbeat: volce_lab::mcp::progress::HEARTBEAT,
    };
    let dir = home.path().to_owned();
    let server = VolceLab::for_fleet(
        &fleet,
        |target| {
            let stand_in = ScriptedTarget {
                dir: dir.clone(),
                identity: "printf 'web-1\\nagent\\n'".into(),
                disk: "true".into(),
                rpc: "echo x >> \"$DIR/rpc\"".into(),
            };
            Inspector::with_transport_for_tests(target.config.clone(), Arc::new(stand_in))
        },
        options,
    );
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server_io);
    tokio::spawn(volce_lab::mcp::serve(server, read, write));
    let client = ().serve(client_io).await.expect("initialize");
    let tools = client.list_all_tools().await.expect("tools/list");
    let call = |name: &'static str, args: Value| {
        let params = CallToolRequestParams::new(name).with_arguments(arguments(args));
        let tools = &tools;
        let client = &client;
        async move {
            let result = client.call_tool(params).await.unwrap();
            structured(tools.iter().find(|t| t.name == name).unwrap(), &result)
        }
    };
    assert_eq!(call("cloud_check", json!({"check": "identity"})).await["status"], "ok");
    let result = call("service_inventory", json!({})).await;
    assert_eq!(result["status"], "management_disabled", "{result}");
    let (message, fix) = (result["message"].as_str().unwrap(), result["fix"].as_str().unwrap());
    assert!(message.contains("management = true in its [targets.web-1] table"), "{message}");
    assert!(message.contains(&file.display().to_string()), "names the file: {message}");
    assert!(fix.contains("management = true") && fix.contains("targets file"), "{fix}");
    for text in [message, fix] {
        assert!(!text.contains("VOLCE_LAB_MANAGEMENT"), "names a variable that does not apply: {text}");
    }
    assert!(!home.path().join("rpc").exists(), "the helper was never asked");
}

/// Issue 38 (item 5): two aliases that reach one server made "a plan made
/// on one target is unknown to every other" false, and nothing said so.
/// Tried: rt-a and rt-b both expect and answer host srv, account agent (a
/// stand-in answering the same identity for both); solo is another
/// server. Fails on the code before (the fan-out said all ok, and a call
/// on rt-a carried no word of rt-b): the fan-out still gives each target's
/// result but is not ok, naming both with `targets_share_identity`, and
/// every call naming one of them carries the note.
#[tokio::test]
async fn two_targets_answering_as_one_identity_are_named_in_a_fan_out_and_on_each_call() {
    let fleet = serve(&[
        ("rt-a", &[], "srv", "printf 'srv\\nagent\\n'"),
        ("rt-b", &[], "srv", "printf 'srv\\nagent\\n'"),
        ("solo", &[], "solo", "printf 'solo\\nagent\\n'"),
    ])
    .await;
    let result = fleet.call("cloud_check", json!({"check": "identity", "targets": ["*"]})).await;
    assert_eq!(result["status"], "check_failed", "{result}");
    assert_eq!(result["code"], "targets_share_identity", "{result}");
    assert_eq!(result["summary"], json!({"ok": 3, "failed": 0}), "each target still reports");
    let message = result["message"].as_str().unwrap();
    assert!(
        message.contains("Targets rt-a, rt-b answered as one identity (host srv, account agent)"),
        "{message}"
    );
    assert!(!message.contains("solo,") && !message.contains(", solo"), "{message}");
    assert!(result["fix"].as_str().unwrap().contains("one server"), "{result}");
    // A fan-out over solo and one of them names nothing.
    let apart = fleet.call("cloud_check", json!({"check": "identity", "targets": ["rt-a", "solo"]})).await;
    assert_eq!((apart["status"].as_str(), apart["code"].as_str()), (Some("ok"), None), "{apart}");
    // A management call on rt-a (its helper's answer is the stand-in's,
    // only the note counts) and a check on rt-b carry the note; solo's not.
    let inventory = fleet.call("service_inventory", json!({"target": "rt-a"})).await;
    let note = "Note (targets_share_identity): rt-b also expects host srv and account agent";
    assert!(inventory["message"].as_str().unwrap().contains(note), "{inventory}");
    let check = fleet.call("cloud_check", json!({"target": "rt-b", "check": "identity"})).await;
    assert_eq!(check["status"], "ok");
    assert!(check["message"].as_str().unwrap().contains("rt-a also expects host srv"), "{check}");
    let solo = fleet.call("cloud_check", json!({"target": "solo", "check": "identity"})).await;
    assert!(!solo["message"].as_str().unwrap().contains("targets_share_identity"), "{solo}");
}

/// Issue 43, version skew: a rollout is refused at plan time, before any
/// server is asked anything, when a target speaks too old a protocol (these
/// stand-ins name no version: protocol 1, which knows no signed approval)
/// or has not passed its identity gate; the refusal names each target and
/// why. What was tried: two verified protocol-1 targets; then a group with
/// one whose identity did not match; then an action that does not roll out.
#[tokio::test]
async fn a_rollout_is_refused_at_plan_time_naming_each_target_that_cannot_take_part() {
    let fleet = fleet(false).await;
    for target in ["db", "web-1", "web-2"] {
        fleet.call("cloud_check", json!({"target": target, "check": "identity"})).await;
    }
    let plan = |targets: Value, action: &str| json!({"targets": targets, "action": action, "parameters": {"app": "a", "image": "web"}});
    let old = fleet.call("service_plan", plan(json!(["@prod"]), "update")).await;
    assert_eq!(
        (old["status"].as_str(), old["code"].as_str()),
        (Some("rejected"), Some("server_too_old")),
        "{old}"
    );
    let message = old["message"].as_str().unwrap();
    assert!(message.starts_with("Nothing was planned on any server"), "{message}");
    assert!(
        message.contains("db: Target db runs") && message.contains("web-1: Target web-1 runs"),
        "{message}"
    );
    let mixed = fleet.call("service_plan", plan(json!(["db", "@web"]), "update")).await;
    assert!(mixed["message"].as_str().unwrap().contains("web-2: identity_mismatch"), "{mixed}");
    let stop = fleet
        .call("service_plan", json!({"targets": ["@prod"], "action": "stop", "parameters": {"app": "a"}}))
        .await;
    assert_eq!(stop["code"], "not_a_fleet_action", "{stop}");
    assert_eq!(
        fleet.runs("db", "rpc") + fleet.runs("web-1", "rpc") + fleet.runs("web-2", "rpc"),
        0,
        "nothing was sent"
    );
    let all = fleet.call("service_plan", plan(json!(["*"]), "update")).await;
    assert_eq!(
        (all["status"].as_str(), all["code"].as_str()),
        (Some("invalid_arguments"), Some("not_allowed")),
        "{all}"
    );
}
