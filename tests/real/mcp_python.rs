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
            let (status, is_error) =
                if call["tool"] == "cloud_check" { ("ok", false) } else { ("demo_only", true) };
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
