//! Shared helpers of the MCP tests: a strict checker for the JSON Schema
//! subset our tool schemas use, result helpers, and a target played by
//! shell scripts. Runs unprivileged.
//!
//! The checker refuses any keyword it does not implement, so a schema can
//! never quietly rely on something the tests do not check.
#![allow(dead_code)]

use std::path::PathBuf;

use rmcp::model::{CallToolResult, Tool};
use serde_json::{Map, Value};
use volce_lab::exec::{ProcessSpec, Transport as ExecTransport};
use volce_lab::inspect::transport::{CommandCarrier, RunLimits};
use volce_lab::wire::remote::RemoteCommand;

/// A target and its helper, played by one `/bin/sh` script per remote
/// command, run through the real runner with `$DIR` set to `dir` (where
/// the scripts count their runs and keep what they read).
pub struct ScriptedTarget {
    pub dir: PathBuf,
    pub identity: String,
    pub disk: String,
    pub rpc: String,
}

impl CommandCarrier for ScriptedTarget {
    fn specs(&self, command: RemoteCommand, stdin: Option<&[u8]>, limits: RunLimits) -> Vec<ProcessSpec> {
        let script = match command {
            RemoteCommand::Identity => &self.identity,
            RemoteCommand::Disk => &self.disk,
            RemoteCommand::Rpc => &self.rpc,
        };
        let mut spec = limits.apply(ProcessSpec::new("/bin/sh", ["-c", script.as_str()]), stdin);
        spec.env.push(("DIR".into(), self.dir.clone().into()));
        spec.transport = ExecTransport::Ssh;
        vec![spec]
    }

    fn kind(&self) -> &'static str {
        "stand-in"
    }
}

const KNOWN: [&str; 12] = [
    "type",
    "items",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "pattern",
    "minimum",
    "maximum",
    "description",
    "title",
    "$schema",
];

fn type_matches(name: &str, value: &Value) -> bool {
    match name {
        "object" => value.is_object(),
        "string" => value.is_string(),
        "integer" => value.as_i64().is_some() || value.as_u64().is_some(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "array" => value.is_array(),
        other => panic!("schema uses an unknown type {other}"),
    }
}

/// Checks `value` against `schema`; returns the first violation found.
/// The ssh-mode configuration the stand-in targets answer to: host `web-1`,
/// user `agent`, a 5 s timeout, management as asked.
pub fn stand_in_config(management: bool) -> volce_lab::config::Config {
    volce_lab::config::Config {
        mode: volce_lab::config::Mode::Ssh,
        expected_host: "web-1".into(),
        expected_user: "agent".into(),
        timeout: std::time::Duration::from_secs(5),
        management,
        ..volce_lab::config::Config::default()
    }
}

pub fn check(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    let schema = schema.as_object().unwrap_or_else(|| panic!("{path}: schema is not an object"));
    for key in schema.keys() {
        assert!(
            KNOWN.contains(&key.as_str()),
            "{path}: schema keyword {key} is not supported by the checker"
        );
    }
    if let Some(kind) = schema.get("type") {
        let ok = match kind {
            Value::String(name) => type_matches(name, value),
            Value::Array(names) => names.iter().any(|n| type_matches(n.as_str().unwrap(), value)),
            _ => panic!("{path}: bad type keyword"),
        };
        if !ok {
            return Err(format!("{path}: {value} is not of type {kind}"));
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        return Err(format!("{path}: {value} is not one of {allowed:?}"));
    }
    if let Some(Value::String(pattern)) = schema.get("pattern")
        && let Value::String(text) = value
    {
        // The only pattern our schemas use; any other must be added here.
        assert_eq!(pattern, "^[a-f0-9]{32}$", "{path}: unsupported pattern");
        if !(text.len() == 32 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))) {
            return Err(format!("{path}: {text:?} does not match {pattern}"));
        }
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Err(format!("{path}: {n} < {min}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Err(format!("{path}: {n} > {max}"));
        }
    }
    if let (Some(items), Value::Array(elements)) = (schema.get("items"), value) {
        for (i, element) in elements.iter().enumerate() {
            check(items, element, &format!("{path}[{i}]"))?;
        }
    }
    if let Value::Object(object) = value {
        let empty = Map::new();
        let properties = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
        if let Some(Value::Array(required)) = schema.get("required") {
            for name in required {
                let name = name.as_str().unwrap();
                if !object.contains_key(name) {
                    return Err(format!("{path}: required field {name} is missing"));
                }
            }
        }
        for (name, field) in object {
            match properties.get(name) {
                Some(sub) => check(sub, field, &format!("{path}.{name}"))?,
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(format!("{path}: field {name} is not allowed"));
                }
                None => {}
            }
        }
    }
    Ok(())
}

/// The structured result, after checking the envelope rules every result
/// follows: structuredContent present, the text content is the same JSON,
/// `isError` exactly when status is not ok, and the tool's outputSchema holds.
pub fn structured(tool: &Tool, result: &CallToolResult) -> Value {
    let value = result.structured_content.clone().expect("every result has structuredContent");
    assert_eq!(result.content.len(), 1, "one text block");
    let text = result.content[0].as_text().expect("text content").text.clone();
    let from_text: Value = serde_json::from_str(&text).expect("text content is JSON");
    assert_eq!(from_text, value, "text content and structuredContent differ");
    let ok = value["status"] == "ok";
    assert_eq!(result.is_error, Some(!ok), "isError must be true exactly when status != ok: {value}");
    // Every result that is not ok says its one next step; an ok one has none.
    let entries = value["results"].as_array().cloned().unwrap_or_default();
    for entry in std::iter::once(&value).chain(&entries) {
        match entry["status"].as_str() {
            Some("ok") => assert!(entry["fix"].is_null(), "an ok result has no fix: {entry}"),
            _ => assert!(
                entry["fix"].as_str().is_some_and(|fix| fix.ends_with('.') && fix.len() > 10),
                "a result that is not ok carries its fix: {entry}"
            ),
        }
    }
    let schema = Value::Object((**tool.output_schema.as_ref().expect("outputSchema")).clone());
    if let Err(problem) = check(&schema, &value, &tool.name) {
        panic!("result of {} breaks its outputSchema: {problem}\n{value:#}", tool.name);
    }
    value
}

pub fn arguments(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, not {other}"),
    }
}

/// An MCP server for the stand-in target (identity `web-1`/`agent`, the
/// helper the shell script `rpc` plays), management on, audit under `dir`,
/// served over an in-memory duplex: the client's end.
pub fn serve_in_memory(dir: &std::path::Path, rpc: String) -> tokio::io::DuplexStream {
    use volce_lab::mcp::{Options, VolceLab};
    let stand_in = ScriptedTarget {
        dir: dir.to_owned(),
        identity: "printf 'web-1\\nagent\\n'".into(),
        disk: "true".into(),
        rpc,
    };
    let inspector = volce_lab::inspect::Inspector::with_transport_for_tests(
        stand_in_config(true),
        std::sync::Arc::new(stand_in),
    );
    let options = Options {
        rpc_limits: RunLimits {
            output: volce_lab::mcp::rpc::RPC_LIMITS.output,
            timeout: std::time::Duration::from_secs(10),
        },
        audit: volce_lab::mcp::audit::Audit::at(dir.join("audit.jsonl")),
        heartbeat: volce_lab::mcp::progress::HEARTBEAT,
    };
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server_io);
    tokio::spawn(volce_lab::mcp::serve(VolceLab::new(inspector, options), read, write));
    client_io
}
