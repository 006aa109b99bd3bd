//! A foreign client: the official Python MCP SDK (`mcp`, pinned in
//! tests/support/python/requirements.txt) drives `volce-lab mcp-serve` over
//! stdio through tests/support/python/mcp_client.py, once per lifecycle it
//! offers (`initialize` at 2025-11-25, the stateless `discover` at
//! 2026-07-28): tools listed, each tool called, a ping before and after
//! every call, an unknown tool, and a slow call cancelled. Runs as whoever
//! runs it; the only network is a silent listener of the script's own on
//! 127.0.0.1.
//!
//! Demo calls answer at once, so the slow call is real: ssh mode against a
//! "server" that accepts the TCP connection and never sends its banner (a
//! hung sshd), which ssh would wait on for its 8 s ConnectTimeout. The
//! cancel must kill ssh (the listener sees the connection close), leave an
//! `unknown` audit line, and leave the session answering.
//!
//! scripts/test builds the venv (`python3 -m venv`, `pip install -r`) and
//! names its interpreter in `VOLCE_LAB_TEST_PYTHON`; without it this fails.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_volce-lab");
const TOOLS: [&str; 5] =
    ["cloud_check", "service_inventory", "service_plan", "service_execute", "service_logs"];

fn report() -> Value {
    let python = std::env::var_os("VOLCE_LAB_TEST_PYTHON").expect(
        "VOLCE_LAB_TEST_PYTHON must name the python of a venv with tests/support/python/requirements.txt \
         installed (scripts/test sets it up)",
    );
    assert!(Path::new(&python).is_file(), "VOLCE_LAB_TEST_PYTHON={python:?} is not a file");
    assert!(
        Path::new("/usr/bin/ssh").is_file(),
        "the cancelled call needs the OpenSSH client at /usr/bin/ssh"
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/python/mcp_client.py");
    let output = Command::new(&python)
        .arg(script)
        .arg(BIN)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("run the Python client");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the Python client failed ({}):\n{stderr}", output.status);
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("the client's report is not JSON ({e}):\n{}", String::from_utf8_lossy(&output.stdout))
    })
}

/// Every ping answered `{}`; returns where they were sent.
fn pings_answered(session: &Value) -> Vec<&str> {
    let pings = session["pings"].as_array().expect("pings");
    for ping in pings {
        assert_eq!(ping["ok"], true, "ping after {} failed: {ping}", ping["after"]);
        assert_eq!(ping["result"], json!({}), "{ping}");
    }
    pings.iter().map(|p| p["after"].as_str().unwrap()).collect()
}

#[test]
#[ignore = "real parts: run by scripts/test (needs the pinned Python SDK in a venv)"]
fn the_python_sdk_lists_calls_pings_and_cancels_in_both_lifecycles() {
    let report = report();
    assert_eq!(report["sdk"], "2.3.0", "the pinned SDK version");
    for (lifecycle, version) in [("initialize", "2025-11-25"), ("discover", "2026-07-28")] {
        let demo = &report[format!("demo_{lifecycle}")];
        assert_eq!(demo["protocol_version"], version, "{lifecycle}: {demo}");
        assert_eq!(demo["tools"], json!(TOOLS), "{lifecycle}");
        let calls = demo["calls"].as_array().unwrap();
        assert_eq!(calls.len(), TOOLS.len(), "{lifecycle}: every tool called once");
        for call in calls {
            // Demo mode answers a simulated plan (issue 24); the execute
            // names a plan id that is not one, so it stays demo_only.
            let simulated = call["tool"] == "cloud_check" || call["tool"] == "service_plan";
            let (status, is_error) = if simulated { ("ok", false) } else { ("demo_only", true) };
            assert_eq!(
                (&call["status"], &call["is_error"]),
                (&json!(status), &json!(is_error)),
                "{lifecycle}: {call}"
            );
            assert_eq!(call["is_demo"], true, "{lifecycle}: {call}");
        }
        assert_eq!(demo["unknown_tool"]["error"], -32602, "{lifecycle}: an unknown tool is invalid params");
        let mut expected = vec!["open", "tools/list"];
        expected.extend(TOOLS);
        expected.push("unknown tool");
        assert_eq!(pings_answered(demo), expected, "{lifecycle}: a ping after every step");

        let cancel = &report[format!("cancel_{lifecycle}")];
        assert_eq!(cancel["protocol_version"], version, "{lifecycle}: {cancel}");
        assert_eq!(
            cancel["call_cancelled"], true,
            "{lifecycle}: the slow call was still running at the cancel"
        );
        assert_eq!(cancel["ssh_connected"], 1, "{lifecycle}: the call really reached the hung server");
        let closed = cancel["ssh_closed_after_cancel_s"].as_f64();
        assert!(
            closed.is_some_and(|s| s < 3.0),
            "{lifecycle}: ssh must be killed by the cancel, not by its own 8 s timeout: {cancel}"
        );
        assert_eq!(pings_answered(cancel), ["open", "cancel", "call after cancel"], "{lifecycle}");
        assert_eq!(cancel["after_cancel_status"], "identity_required", "{lifecycle}: the gate stays closed");
        assert_eq!(
            cancel["audit"],
            json!([
                {"tool": "cloud_check", "check": "identity", "status": "unknown"},
                {"tool": "cloud_check", "check": "disk", "status": "identity_required"},
            ]),
            "{lifecycle}: the cancelled call is audited as unknown"
        );
        eprintln!(
            "{lifecycle} ({version}): cancelled after {} s, ssh gone {} s later",
            cancel["cancelled_after_s"], cancel["ssh_closed_after_cancel_s"]
        );
    }
}

mod signed;
mod tasks;

mod approval {
    //! The same SDK as a client that shows forms (`approval_client.py`),
    //! against the e2e installation: `service_execute` of a plan that waits
    //! for approval shows the user a form; accepting before the operator
    //! approved runs nothing; after the operator's `approve` (by sudo, at
    //! their terminal) the next accept executes the plan exactly once;
    //! declining runs nothing. Needs scripts/e2e-setup and the test images.

    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use serde_json::{Value, json};

    use crate::support::e2e::*;

    const APP: &str = "e2e-wait";

    fn deploy_plan(port: u16) -> String {
        deploy_plan_of(APP, port)
    }

    /// A deploy plan of `app` (under approval by the test's policy) through
    /// the agent's rpc: its id.
    pub(super) fn deploy_plan_of(app: &str, port: u16) -> String {
        let (code, reply) = agent_rpc(&json!({"operation": "plan", "action": "deploy", "parameters":
            {"app": app, "image": "web", "host_port": port, "container_port": 8080, "server_name": "wait.e2e.test"}}));
        assert_eq!(code, Some(0), "{reply}");
        assert_eq!(reply["result"]["requires_approval"], true, "{reply}");
        reply["result"]["id"].as_str().unwrap().to_owned()
    }

    /// Runs the client on `plan_id`; `user` is called with each form's
    /// number once it is shown (and may write `go-N`). The client's report.
    fn client(
        host: &str,
        dir: &Path,
        choice: &str,
        plan_id: &str,
        mode: &str,
        mut user: impl FnMut(usize),
    ) -> Value {
        let python = std::env::var_os("VOLCE_LAB_TEST_PYTHON").expect("VOLCE_LAB_TEST_PYTHON (scripts/test)");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/python/approval_client.py");
        let mut child = Command::new(python)
            .arg(script)
            .args([env!("CARGO_BIN_EXE_volce-lab"), dir.to_str().unwrap(), choice, plan_id, mode])
            .env_clear()
            // The script passes only the VOLCE_LAB_ variables on to the server.
            .envs(workstation_env(host, &dir.join("state")))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run the Python client");
        let mut seen = 0;
        let deadline = Instant::now() + Duration::from_secs(300);
        while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            if dir.join(format!("form-{}", seen + 1)).exists() {
                seen += 1;
                user(seen);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "the Python client failed ({}):\n{stderr}", output.status);
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}"))
    }

    fn go(dir: &Path, n: usize) {
        std::fs::write(dir.join(format!("go-{n}")), "").unwrap();
    }

    pub(super) fn claimed_rows(plan_id: &str) -> usize {
        let export = run(HOST_LINK, &["audit", "export", "--json"], None);
        export.stdout.lines().filter(|l| l.contains(plan_id) && l.contains("\"claimed\"")).count()
    }

    #[test]
    #[ignore = "real parts: run by scripts/test after scripts/e2e-setup (needs the pinned Python SDK in a venv)"]
    fn the_python_sdk_shows_the_form_and_only_the_operators_approval_runs_the_plan_once() {
        let host = require_setup();
        require_host_helper();
        require_docker_and_policy();
        let _serial = serial();
        let _policy = PolicyChange::apply(|policy| policy["approval_required"] = json!(["deploy"]));
        // The SDK's legacy mode (server-to-client elicitation/create) and its
        // default mode (InputRequiredResult with the sealed requestState,
        // driven through the same callback).
        for (mode, version) in [("legacy", "2025-11-25"), ("default", "2026-07-28")] {
            fresh_host_state(&[APP]);
            scenario(&host, mode, version);
        }
        // A tampered and a replayed requestState (default mode, by hand).
        fresh_host_state(&[APP]);
        let plan = deploy_plan(free_port());
        let dir = private_tempdir();
        let report = client(&host, dir.path(), "forge", &plan, "default", |_| {});
        assert_eq!(
            report["codes"],
            json!({"tampered": "request_state_tampered", "genuine": "InputRequiredResult",
                   "replayed": "request_state_replayed"}),
            "{report}"
        );
        assert_eq!(stored_plan(&plan)["state"], "pending", "nothing ran");
        assert_eq!(claimed_rows(&plan), 0);
        remove_apps(&[APP]);
    }

    fn scenario(host: &str, mode: &str, version: &str) {
        let host = host.to_owned();
        let port = free_port();

        // Decline: approval_required, the user's decline said, nothing ran.
        let declined = deploy_plan(port);
        let dir = private_tempdir();
        let report = client(&host, dir.path(), "decline", &declined, mode, |_| {});
        assert_eq!(report["sdk"], "2.3.0");
        assert_eq!(report["protocol_version"], version, "{mode}: {report}");
        assert_eq!(report["identity"], "ok", "{report}");
        let result = &report["result"];
        assert_eq!(result["code"], "approval_required", "{report}");
        assert!(result["message"].as_str().unwrap().starts_with("The user declined"), "{result}");
        let form = report["forms"][0].as_str().unwrap();
        for part in
            [declined.as_str(), "Action: deploy of app e2e-wait", "Time left: ", "sudo volce-lab-host show"]
        {
            assert!(form.contains(part), "the form names {part:?}: {form}");
        }
        assert_eq!(stored_plan(&declined)["state"], "pending", "nothing ran");
        assert_eq!(claimed_rows(&declined), 0);
        let rejected = as_operator(&["reject", &declined, "--reason", "declined in the test"]);
        assert!(rejected.ok(), "{rejected:?}");

        // Accept before the operator approved: nothing runs, the form comes
        // again; the operator approves; the next accept executes once.
        let plan = deploy_plan(port);
        let digest = stored_plan(&plan)["digest"].as_str().unwrap().to_owned();
        let dir = private_tempdir();
        let mut approved_at = None;
        let report = client(&host, dir.path(), "accept", &plan, mode, |n| {
            if n == 2 {
                assert_eq!(stored_plan(&plan)["state"], "pending", "the first accept ran nothing");
                assert_eq!(claimed_rows(&plan), 0);
                let approved = as_operator(&["approve", &plan, &digest, "--yes"]);
                assert!(approved.ok(), "{approved:?}");
                approved_at = Some(std::time::SystemTime::now());
            }
            go(dir.path(), n);
        });
        let result = &report["result"];
        assert_eq!(result["status"], "ok", "{report}");
        assert_eq!(report["forms"].as_array().unwrap().len(), 2, "{report}");
        assert_eq!(stored_plan(&plan)["state"], "completed");
        assert_eq!(claimed_rows(&plan), 1, "executed exactly once");
        // One round after the accept: the look (inventory) and the execute.
        let accepted = report["accepted_at"][1].as_f64().unwrap();
        let answered = report["result_at"].as_f64().unwrap();
        let execute_ms = result["execution"]["duration_ms"].as_f64().unwrap_or(0.0);
        let approved = approved_at.unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        eprintln!(
            "{mode} ({version}): approval on the host -> accept {:.3} s (the test's own pause); accept -> execution \
             started {:.3} s (one look, then the execute rpc); accept -> result {:.3} s (the deploy took {:.3} s)",
            accepted - approved,
            (answered - accepted) - execute_ms / 1000.0,
            answered - accepted,
            execute_ms / 1000.0
        );
    }
}
