//! The conformance table: every protocol version the server advertises ×
//! every method a client may send × the orders clients send them in, as raw
//! JSON-RPC lines over stdio against the real binary in demo mode. Each cell
//! asserts the answer: the result's shape or the exact error code, or no
//! answer at all for a notification. Runs unprivileged; no network.
//!
//! The legacy versions (2024-11-05 .. 2025-11-25) open with `initialize`;
//! 2026-07-28 is stateless: no handshake, `_meta` on every request, and
//! `server/discover` as an optional probe. A client probing with discover
//! and falling back to `initialize` is one of the legacy openers.
//!
//! Demo calls answer at once, so a cancel here always names a request that
//! was answered (or never sent). Cancelling a call that is still running
//! needs a slow call for real: tests/real/mcp_python.rs does that.

use std::fmt::Write as _;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

const BIN: &str = env!("CARGO_BIN_EXE_volce-lab");

/// What the server must advertise, oldest first (`server/discover`'s `supportedVersions`).
const VERSIONS: [&str; 5] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"];
const STATELESS: &str = "2026-07-28";
const TOOLS: [&str; 5] =
    ["cloud_check", "service_inventory", "service_plan", "service_execute", "service_logs"];

/// What a client sends, and the answer each must get.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    /// `initialize` at the session's version (legacy), then `notifications/initialized`.
    Initialize,
    /// `server/discover` with the stateless `_meta`: the probe, in any session.
    Discover,
    /// `ping`: `{}`, always.
    Ping,
    /// `ping` without `_meta`, as a bare keep-alive: `{}`, always.
    BarePing,
    /// `tools/list`: the five tools.
    List,
    /// `tools/list` without `_meta` on a stateless session: -32602, and the
    /// session has not started (the next notification must not end it).
    ListWithoutMeta,
    /// `tools/call` of `cloud_check` `identity`: a demo result, status ok.
    Call,
    /// `tools/call` with refused arguments: an error result (`isError`), not a JSON-RPC error.
    BadArguments,
    /// `tools/call` of an unknown tool: JSON-RPC error -32602.
    UnknownTool,
    /// `notifications/cancelled` for the request answered last (the cancel
    /// crossed the answer): ignored, no answer.
    CancelAnswered,
    /// `notifications/cancelled` for an id never sent: ignored, no answer.
    CancelUnknown,
}
use Step::*;

/// The openers: how a session starts, per version kind.
const LEGACY_OPENERS: [&[Step]; 4] = [
    &[Initialize],
    &[Ping, Initialize],
    // Probe with discover, fall back to initialize (the Python SDK's auto mode).
    &[Discover, Initialize],
    &[CancelUnknown, Initialize],
];
const STATELESS_OPENERS: [&[Step]; 6] = [
    &[],
    &[Discover],
    &[Ping, Discover],
    &[CancelUnknown],
    &[Discover, CancelAnswered],
    &[ListWithoutMeta, CancelAnswered],
];

/// The bodies: what follows the opener. Every method before and after a
/// tool call, valid or not, and after a cancel.
const BODIES: [&[Step]; 4] = [
    &[Ping, List, Ping, Call, Ping, UnknownTool, Ping, BadArguments, Ping, CancelAnswered, Ping, List],
    &[Call, Ping, BarePing, Call, CancelAnswered, Call, Ping],
    &[UnknownTool, Ping, CancelUnknown, List, Call, List, Ping],
    &[BadArguments, CancelAnswered, BarePing, Ping, Discover, Call, Discover, Ping],
];

fn meta(version: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "conformance", "version": "0"},
    })
}

/// One server process spoken to in raw JSON-RPC lines.
struct Raw {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: i64,
    _state: tempfile::TempDir,
}

impl Raw {
    fn start() -> Raw {
        let state = tempfile::tempdir().unwrap();
        let mut child = tokio::process::Command::new(BIN)
            .arg("mcp-serve")
            .env_clear()
            .env("XDG_STATE_HOME", state.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn volce-lab mcp-serve");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Raw { child, stdin, lines, next_id: 0, _state: state }
    }

    async fn send(&mut self, message: Value) -> Result<(), String> {
        let line = message.to_string() + "\n";
        self.stdin.write_all(line.as_bytes()).await.map_err(|e| format!("write: {e} (server gone)"))
    }

    /// The next message on stdout: it must be the answer to `id`.
    async fn answer(&mut self, id: i64) -> Result<Value, String> {
        let line = match tokio::time::timeout(Duration::from_secs(10), self.lines.next_line()).await {
            Err(_) => return Err("no answer within 10 s".into()),
            Ok(Err(error)) => return Err(format!("read: {error}")),
            Ok(Ok(None)) => return Err("stdout closed (server gone)".into()),
            Ok(Ok(Some(line))) => line,
        };
        let message: Value = serde_json::from_str(&line).map_err(|_| format!("not JSON: {line}"))?;
        if message["id"] != id {
            return Err(format!("answer for id {} while waiting for {id}: {line}", message["id"]));
        }
        Ok(message)
    }

    async fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if params != json!({}) {
            message["params"] = params;
        }
        self.send(message).await?;
        self.answer(id).await
    }

    async fn notify(&mut self, method: &str, params: Value) -> Result<(), String> {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params})).await
    }

    /// Closes stdin: the server must end cleanly.
    async fn finish(mut self) -> Result<(), String> {
        drop(self.stdin);
        match tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => Err(format!("server exited with {status} at EOF")),
            _ => Err("server did not exit at EOF".into()),
        }
    }
}

fn result_of(answer: &Value) -> Result<&Value, String> {
    match (answer.get("result"), answer.get("error")) {
        (Some(result), None) => Ok(result),
        (_, Some(error)) => Err(format!("error {} {}", error["code"], error["message"])),
        _ => Err(format!("neither result nor error: {answer}")),
    }
}

/// Sends `step` in a session of `version` and checks its answer.
async fn run_step(raw: &mut Raw, version: &str, step: Step) -> Result<(), String> {
    let stateless = version == STATELESS;
    // Stateless requests carry their context; legacy requests carry none.
    let params = |mut params: Value| {
        if stateless {
            params["_meta"] = meta(version);
        }
        params
    };
    match step {
        Initialize => {
            let answer = raw
                .request(
                    "initialize",
                    json!({"protocolVersion": version, "capabilities": {},
                           "clientInfo": {"name": "conformance", "version": "0"}}),
                )
                .await?;
            let result = result_of(&answer)?;
            if result["protocolVersion"] != version {
                return Err(format!("negotiated {} instead of {version}", result["protocolVersion"]));
            }
            raw.notify("notifications/initialized", json!({})).await
        }
        Discover => {
            let answer = raw.request("server/discover", json!({"_meta": meta(STATELESS)})).await?;
            let versions = &result_of(&answer)?["supportedVersions"];
            if *versions != json!(VERSIONS) {
                return Err(format!("discover advertises {versions}, expected {VERSIONS:?}"));
            }
            Ok(())
        }
        Ping | BarePing => {
            let sent = if step == Ping { params(json!({})) } else { json!({}) };
            let answer = raw.request("ping", sent).await?;
            match result_of(&answer)? {
                result if *result == json!({}) => Ok(()),
                other => Err(format!("ping answered {other}")),
            }
        }
        List => {
            let answer = raw.request("tools/list", params(json!({}))).await?;
            let tools = result_of(&answer)?["tools"].as_array().cloned().unwrap_or_default();
            let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
            if names != TOOLS {
                return Err(format!("tools/list names {names:?}"));
            }
            Ok(())
        }
        Call | BadArguments => {
            let check = if step == Call { "identity" } else { "uptime" };
            let call = json!({"name": "cloud_check", "arguments": {"check": check}});
            let answer = raw.request("tools/call", params(call)).await?;
            let result = result_of(&answer)?;
            let (status, is_error) = if step == Call { ("ok", false) } else { ("invalid_arguments", true) };
            if result["structuredContent"]["status"] != status || result["isError"] != is_error {
                return Err(format!("expected status {status}, isError {is_error}: {result}"));
            }
            Ok(())
        }
        ListWithoutMeta => {
            let answer = raw.request("tools/list", json!({})).await?;
            match answer["error"]["code"].as_i64() {
                Some(-32602) => Ok(()),
                _ => Err(format!("expected error -32602: {answer}")),
            }
        }
        UnknownTool => {
            let call = json!({"name": "shell_execute", "arguments": {}});
            let answer = raw.request("tools/call", params(call)).await?;
            match answer["error"]["code"].as_i64() {
                Some(-32602) => Ok(()),
                _ => Err(format!("expected error -32602: {answer}")),
            }
        }
        CancelAnswered | CancelUnknown => {
            let id = if step == CancelAnswered { raw.next_id } else { 9_999 };
            // The next request's answer proves nothing was sent for this.
            raw.notify("notifications/cancelled", json!({"requestId": id, "reason": "conformance"})).await
        }
    }
}

/// Runs one session; returns the index and error of the first failing step.
async fn run_session(version: &str, steps: &[Step]) -> Result<(), (usize, String)> {
    let mut raw = Raw::start();
    for (index, step) in steps.iter().enumerate() {
        run_step(&mut raw, version, *step).await.map_err(|error| (index, error))?;
    }
    // A last ping after everything: the session is still alive.
    run_step(&mut raw, version, Ping).await.map_err(|error| (steps.len(), error))?;
    raw.finish().await.map_err(|error| (steps.len() + 1, error))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_method_answers_in_every_protocol_version_and_order() {
    let mut cells = 0;
    let mut report = String::new();
    for version in VERSIONS {
        let openers: &[&[Step]] = if version == STATELESS { &STATELESS_OPENERS } else { &LEGACY_OPENERS };
        for opener in openers {
            for body in BODIES {
                let steps: Vec<Step> = opener.iter().chain(body.iter()).copied().collect();
                cells += 1;
                if let Err((index, error)) = run_session(version, &steps).await {
                    let shown: Vec<String> = steps
                        .iter()
                        .enumerate()
                        .map(|(i, s)| if i == index { format!(">>{s:?}<<") } else { format!("{s:?}") })
                        .collect();
                    let at = steps.get(index).map_or("the closing ping/EOF".into(), |s| format!("{s:?}"));
                    writeln!(report, "{version} [{}]\n    {at}: {error}", shown.join(" ")).unwrap();
                }
            }
        }
    }
    assert!(report.is_empty(), "failing sessions (first failing step marked):\n{report}");
    assert_eq!(cells, 4 * LEGACY_OPENERS.len() * BODIES.len() + STATELESS_OPENERS.len() * BODIES.len());
}
