//! The JSON Schemas the five tools publish: input schemas (what
//! [`super::validate`] accepts) and output schemas (the result envelope
//! `super::super::server` builds). Pure. Runs unprivileged inside
//! `volce-lab mcp-serve`.
//!
//! Every list of names here is read from the enum that owns it (`Check`,
//! `Action`, `Status`, `Mode`, `ExecutionStatus`, `Completion`, `ToolName`),
//! so a schema cannot fall out of step with the values.
//!
//! Why the output schemas are written out instead of derived with schemars
//! (rmcp's `Tool::with_output_schema`): the derived schema of the same
//! fields is a different document that clients see. It names nested types
//! through `$defs`/`$ref`, writes enums as `oneOf` of `const`s and a
//! nullable one as `anyOf` with `{"type": "null"}`, adds
//! `format: "int32"`/`"uint64"`, and does not close objects with
//! `additionalProperties: false` (the types are not `deny_unknown_fields`).
//! Our schemas keep to the
//! small subset (`type`, `enum`, `properties`, `required`,
//! `additionalProperties`, `pattern`, `minimum`, `maximum`) that simple
//! validators in MCP clients handle, and the MCP tests refuse any other
//! keyword. Instead, `outputs_describe_the_types_they_publish` below checks
//! the written schemas against the types' derived ones, and
//! `every_result_has_exactly_the_fields_of_its_schema` holds each typed
//! result (`super::super::result`) to its schema, field for field.
//! Input schemas stay written by hand for the same reason, and because
//! `validate` refuses with sentences a derived parser would not give.

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::{Map, Value, json};
use strum::VariantArray as _;

use super::ToolName;
use super::validate::PORTS;
use crate::config::Mode;
use crate::exec::{Completion, ExecutionStatus};
use crate::inspect::{Check, Status};
use crate::vocab::Action;

/// The strings of `variants`, as JSON.
fn names<T: Copy>(variants: &[T], name: fn(T) -> &'static str) -> Vec<Value> {
    variants.iter().map(|v| json!(name(*v))).collect()
}

/// As [`names`], with `null` last: a field that may be absent.
fn names_or_null<T: Copy>(variants: &[T], name: fn(T) -> &'static str) -> Vec<Value> {
    let mut names = names(variants, name);
    names.push(Value::Null);
    names
}

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("schemas are object literals"),
    }
}

pub fn check_input() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "check": {"type": "string", "enum": names(&Check::ALL, Check::as_str), "description": "identity first, then disk or web_status."}
        },
        "required": ["check"],
        "additionalProperties": false
    }))
}

pub fn inventory_input() -> Arc<JsonObject> {
    object(json!({"type": "object", "properties": {}, "additionalProperties": false}))
}

/// Which action takes which parameter is said once, in the tool's
/// description; a parameter's own description says only what it is.
pub fn plan_input() -> Arc<JsonObject> {
    let port = |description: &str| json!({"type": "integer", "minimum": PORTS.start(), "maximum": PORTS.end(), "description": description});
    object(json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": names(Action::ALL, Action::as_str)},
            "parameters": {
                "type": "object",
                "description": "Exactly the chosen action's parameters.",
                "properties": {
                    "app": {"type": "string"},
                    "image": {"type": "string", "description": "A catalog key."},
                    "host_port": port("The gateway's loopback port."),
                    "container_port": port("The app's port in its container."),
                    "server_name": {"type": "string", "description": "The primary name (the health check's Host)."},
                    "also_server_names": {
                        "type": "array",
                        "items": {"type": "string"},
                        "maxItems": crate::vocab::MAX_ALSO_SERVER_NAMES,
                        "description": "More names served (e.g. www), never server_name."
                    },
                    "image_id": {"type": "string", "description": "sha256:<64 hex>."},
                    "purge_data": {"type": "boolean", "description": "true deletes the data directory for good."},
                    "task": {"type": "string"},
                    "snapshot": {"type": "string"},
                    "accessory": {"type": "string"}
                },
                "additionalProperties": false
            },
            "batch_size": {"type": "integer", "minimum": 1, "maximum": crate::wire::rollout::MAX_ROLLOUT_HOSTS},
            "health_wait_seconds": {"type": "integer", "minimum": 0, "maximum": crate::wire::rollout::MAX_HEALTH_WAIT_SECONDS}
        },
        "required": ["action", "parameters"],
        "additionalProperties": false
    }))
}

pub fn execute_input() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "plan_id": {"type": "string", "pattern": "^[a-f0-9]{32}$", "description": "What service_plan returned."},
            "rollout": {"type": "string", "pattern": "^[a-f0-9]{32}$"},
            "signed_approval": {"type": "string", "maxLength": crate::wire::signed::MAX_SIGNED_BYTES}
        },
        "additionalProperties": false
    }))
}

pub fn logs_input() -> Arc<JsonObject> {
    use crate::wire::{ContainerRole, LOG_SINCE_MINUTES, LOG_TAIL, LOG_TAIL_DEFAULT};
    object(json!({
        "type": "object",
        "properties": {
            "app": {"type": "string"},
            // No enum: an accessory's name is the operator's (issue 40), and
            // the workstation checks the word against the names it may be.
            "container": {
                "type": "string",
                "description": format!(
                    "{}, or an accessory's name.",
                    ContainerRole::VARIANTS.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(", ")
                )
            },
            "tail": {
                "type": "integer", "minimum": LOG_TAIL.start(), "maximum": LOG_TAIL.end(),
                "description": format!("The newest lines (default {LOG_TAIL_DEFAULT}).")
            },
            "since_minutes": {
                "type": "integer", "minimum": LOG_SINCE_MINUTES.start(), "maximum": LOG_SINCE_MINUTES.end(),
                "description": "Optional: only lines of the last minutes."
            }
        },
        "required": ["app", "container"],
        "additionalProperties": false
    }))
}

/// The `execution` record of a result (`crate::exec::Execution`): null when nothing ran.
fn execution_schema() -> Value {
    json!({
        "type": ["object", "null"],
        "properties": {
            "execution_status": {"type": "string", "enum": names(ExecutionStatus::VARIANTS, ExecutionStatus::as_str)},
            "exit_code": {"type": ["integer", "null"]},
            "signal": {"type": ["integer", "null"]},
            "timed_out": {"type": "boolean"},
            "output_truncated": {"type": "boolean"},
            "duration_ms": {"type": "integer", "minimum": 0},
            "completion": {"type": "string", "enum": names(Completion::VARIANTS, Completion::as_str)}
        },
        "required": ["execution_status", "exit_code", "signal", "timed_out", "output_truncated", "duration_ms", "completion"],
        "additionalProperties": false
    })
}

/// The fields every result shares. What each one means is written once,
/// in docs/tools.md: an output schema is for the client that validates
/// `structuredContent` (types, enums, required, closed objects), and every
/// `tools/list` carries five of them (issue 44).
fn common_properties() -> Map<String, Value> {
    let value = json!({
        "request_id": {"type": "string"},
        "timestamp": {"type": "string"},
        "is_demo": {"type": "boolean"},
        "mode": {"type": "string", "enum": names(Mode::VARIANTS, Mode::as_str)},
        "target": {"type": ["string", "null"]},
        "status": {"type": "string", "enum": names(Status::VARIANTS, Status::as_str)},
        "code": {"type": ["string", "null"]},
        "message": {"type": "string"},
        "fix": {"type": ["string", "null"]},
        "exit_code": {"type": ["integer", "null"]},
        "execution": execution_schema()
    });
    match value {
        Value::Object(map) => map,
        _ => unreachable!("an object literal"),
    }
}

fn output_schema(extra: Value) -> Arc<JsonObject> {
    let mut properties = common_properties();
    if let Value::Object(extra) = extra {
        properties.extend(extra);
    }
    let required: Vec<&String> = properties.keys().collect();
    object(json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    }))
}

/// The output schema of `cloud_check`: the inspection result plus `code`,
/// `message` and `fix`. `check` is null only when the arguments were
/// refused; `results` (one entry per target, each shaped as a single
/// check's) and `summary` are null for one target.
pub fn check_output() -> Arc<JsonObject> {
    output_schema(json!({
        "check": {"type": ["string", "null"], "enum": names_or_null(&Check::ALL, Check::as_str)},
        "output": {"type": "string"},
        "results": {"type": ["array", "null"], "items": {"type": "object"}},
        "summary": {
            "type": ["object", "null"],
            "properties": {"ok": {"type": "integer", "minimum": 0}, "failed": {"type": "integer", "minimum": 0}},
            "required": ["ok", "failed"],
            "additionalProperties": false
        }
    }))
}

/// The output schema of one service tool: every result of `tool` names
/// that tool and its operation, so the schema names only those (one value
/// each, not the four). `action` is null but for service_plan and
/// service_execute (the validated call has none elsewhere; there, one of
/// service_plan's input enum), and `app_log`
/// (the failed container's last lines after a rolled-back plan, untrusted
/// output) but for service_execute (`super::super::rpc` keeps it from no
/// other answer). `result` is the host helper's object when status is ok.
pub fn management_output(tool: ToolName) -> Arc<JsonObject> {
    let null = json!({"type": "null"});
    let operation = tool.operation().map(|o| json!([o.as_str()]));
    let has_action = matches!(tool, ToolName::ServicePlan | ToolName::ServiceExecute);
    // No enum: the action is the one the call named, from service_plan's
    // input enum; listing the actions again in two output schemas cost
    // every agent 0.5 KB of context (issue 44) and told it nothing new.
    let action = json!({"type": ["string", "null"]});
    let app_log = json!({
        "type": ["object", "null"],
        "properties": {
            "read": {"type": "boolean"},
            "lines": {"type": "array", "items": {"type": "string"}},
            "truncated": {"type": "boolean"},
            "redactions": {"type": "integer", "minimum": 0},
            "untrusted": {"type": "string"}
        },
        "required": ["read", "lines", "truncated", "redactions", "untrusted"],
        "additionalProperties": false
    });
    output_schema(json!({
        "tool": {"type": "string", "enum": [tool.as_str()]},
        "operation": {"type": "string", "enum": operation},
        "action": if has_action { action } else { null.clone() },
        "plan_id": {"type": ["string", "null"]},
        "result": {"type": ["object", "null"]},
        "app_log": if tool == ToolName::ServiceExecute { app_log } else { null }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(schema: Arc<JsonObject>) -> Value {
        Value::Object((*schema).clone())
    }

    /// The four service tools, in order.
    fn service_tools() -> Vec<ToolName> {
        ToolName::VARIANTS.iter().copied().filter(|t| t.operation().is_some()).collect()
    }

    /// The enum lists as clients have always seen them.
    #[test]
    fn published_names_never_change() {
        let check = value(check_output());
        let management = value(management_output(ToolName::ServicePlan));
        let p = |schema: &Value, name: &str| schema["properties"][name]["enum"].clone();
        assert_eq!(
            p(&check, "status"),
            json!([
                "ok",
                "identity_required",
                "identity_mismatch",
                "connection_failed",
                "check_failed",
                "helper_unavailable",
                "timeout",
                "output_limit",
                "ssh_unavailable",
                "execution_failed",
                "demo_only",
                "management_disabled",
                "rejected",
                "unknown",
                "needs_inspection",
                "invalid_arguments"
            ])
        );
        assert_eq!(p(&check, "mode"), json!(["demo", "local", "ssh"]));
        assert_eq!(p(&check, "check"), json!(["identity", "disk", "web_status", null]));
        assert_eq!(
            check["properties"]["execution"]["properties"]["execution_status"]["enum"],
            json!([
                "ok",
                "nonzero_exit",
                "timeout",
                "output_limit",
                "signaled",
                "launch_failed",
                "ssh_or_remote_255"
            ])
        );
        assert_eq!(
            check["properties"]["execution"]["properties"]["completion"]["enum"],
            json!(["confirmed", "unconfirmed"])
        );
        // Each service tool's schema names that tool and its operation only.
        let one = |field: &str| -> Vec<Value> {
            service_tools().into_iter().map(|t| p(&value(management_output(t)), field)[0].clone()).collect()
        };
        assert_eq!(one("tool"), ["service_inventory", "service_plan", "service_execute", "service_logs"]);
        assert_eq!(one("operation"), ["inventory", "plan", "execute", "logs"]);
        for tool in service_tools() {
            assert_eq!(p(&value(management_output(tool)), "tool").as_array().unwrap().len(), 1);
            assert_eq!(p(&value(management_output(tool)), "operation").as_array().unwrap().len(), 1);
        }
        let logs = value(logs_input());
        assert_eq!(
            logs["properties"]["container"]["description"],
            json!("app, gateway, or an accessory's name.")
        );
        assert_eq!(logs["required"], json!(["app", "container"]));
        let range = |name: &str| {
            (logs["properties"][name]["minimum"].clone(), logs["properties"][name]["maximum"].clone())
        };
        assert_eq!(range("tail"), (json!(1), json!(200)));
        assert_eq!(range("since_minutes"), (json!(1), json!(1440)));
        assert_eq!(management["properties"]["action"], json!({"type": ["string", "null"]}));
        let plan = value(plan_input());
        assert_eq!(
            p(&plan, "action"),
            json!([
                "deploy",
                "nginx_config",
                "stop",
                "remove_image",
                "remove_app",
                "start",
                "update",
                "restart",
                "rollback",
                "run_task",
                "backup",
                "restore",
                "expose",
                "unexpose",
                "update_accessory",
                "rotate_credential"
            ])
        );
        let port = &plan["properties"]["parameters"]["properties"]["host_port"];
        assert_eq!((port["minimum"].clone(), port["maximum"].clone()), (json!(1024), json!(65535)));
        assert_eq!(p(&value(check_input()), "check"), json!(["identity", "disk", "web_status"]));
    }

    /// Where serde also names an enum, it uses the same strings as the
    /// strum table the schemas read.
    #[test]
    fn serde_and_strum_names_agree() {
        fn agree<T: serde::Serialize + Copy>(variants: &[T], name: fn(T) -> &'static str) {
            for v in variants {
                assert_eq!(serde_json::to_value(v).unwrap(), name(*v));
            }
        }
        agree(Status::VARIANTS, Status::as_str);
        agree(Check::VARIANTS, Check::as_str);
        agree(Mode::VARIANTS, Mode::as_str);
        agree(ExecutionStatus::VARIANTS, ExecutionStatus::as_str);
        agree(Completion::VARIANTS, Completion::as_str);
        agree(Action::ALL, Action::as_str);
        agree(ToolName::VARIANTS, ToolName::as_str);
        assert_eq!(Check::ALL, Check::VARIANTS);
        for status in Status::VARIANTS {
            assert_eq!(serde_json::from_value::<Status>(json!(status.as_str())).unwrap(), *status);
        }
        // Every status the enum's own derived schema names is a variant's name.
        let schema = serde_json::to_value(schemars::schema_for!(Status)).unwrap().to_string();
        let named: Vec<&str> =
            schema.split('"').filter(|word| serde_json::from_value::<Status>(json!(word)).is_ok()).collect();
        for status in Status::VARIANTS {
            assert!(named.contains(&status.as_str()), "{} missing from the schema", status.as_str());
        }
    }

    #[test]
    fn every_output_field_is_required_and_closed() {
        let management = service_tools().into_iter().map(|t| value(management_output(t)));
        for schema in std::iter::once(value(check_output())).chain(management) {
            assert_eq!(schema["type"], "object");
            assert_eq!(schema["additionalProperties"], false);
            let properties = schema["properties"].as_object().unwrap();
            let required: Vec<&str> =
                schema["required"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
            assert_eq!(required, properties.keys().map(String::as_str).collect::<Vec<_>>());
            assert_eq!(schema["properties"]["execution"]["additionalProperties"], false);
        }
    }

    /// Each typed result, as each of its constructors makes it, has
    /// exactly the fields its tool's schema lists: every one, no other.
    #[test]
    fn every_result_has_exactly_the_fields_of_its_schema() {
        use crate::mcp::result::{
            Base, CheckOutput, ManagementOutput, Output, Summary, TargetCheck, Verdict,
        };
        let base = |target: Option<&str>| Base {
            request_id: "r".into(),
            timestamp: "t".into(),
            is_demo: false,
            mode: Mode::Ssh,
            target: target.map(str::to_owned),
        };
        let verdict = || Verdict::new(Status::Ok, None, "m".into());
        let target = TargetCheck {
            base: base(Some("web-1")),
            check: Check::Disk,
            exit_code: Some(0),
            output: "o".into(),
            execution: None,
            verdict: verdict(),
        };
        let keys = |value: Value| value.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        let schema_keys = |schema: Arc<JsonObject>| keys(value(schema)["properties"].clone());
        let checks = [
            CheckOutput::one(target.clone()),
            CheckOutput::fan_out(
                base(None),
                Check::Disk,
                verdict(),
                vec![target.clone()],
                Summary { ok: 1, failed: 0 },
            ),
            CheckOutput::refused(base(None), verdict()),
        ];
        for output in checks {
            let json = Output::Check(Box::new(output)).to_json();
            assert_eq!(keys(json), schema_keys(check_output()));
        }
        let mut entry = schema_keys(check_output());
        entry.retain(|key| key != "results" && key != "summary");
        assert_eq!(
            keys(serde_json::to_value(&target).unwrap()),
            entry,
            "a fan-out's entry is a single check's"
        );
        let management = ManagementOutput {
            base: base(Some("web-1")),
            tool: ToolName::ServicePlan,
            operation: crate::wire::Operation::Plan,
            action: Some(Action::Stop),
            plan_id: None,
            verdict: verdict(),
            result: None,
            exit_code: None,
            execution: None,
            app_log: None,
        };
        let json = Output::Management(Box::new(management)).to_json();
        assert_eq!(keys(json), schema_keys(management_output(ToolName::ServicePlan)));
    }

    /// The written `execution` schema and the `check` result fields say what
    /// the derived schemas of `Execution` and `CheckResult` say: same
    /// fields, all required.
    #[test]
    fn outputs_describe_the_types_they_publish() {
        let settings = schemars::generate::SchemaSettings::draft2020_12().for_serialize();
        let derived = |schema: schemars::Schema| serde_json::to_value(schema).unwrap();
        let execution =
            derived(settings.clone().into_generator().into_root_schema_for::<crate::exec::Execution>());
        let written = execution_schema();
        let keys = |v: &Value| v["properties"].as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&execution), keys(&written));
        assert_eq!(execution["required"], written["required"]);

        let result = derived(settings.into_generator().into_root_schema_for::<crate::inspect::CheckResult>());
        let check = value(check_output());
        let mut envelope = keys(&check);
        envelope.retain(|k| !["code", "message", "fix", "results", "summary"].contains(&k.as_str()));
        assert_eq!(
            keys(&result),
            envelope,
            "cloud_check = CheckResult + code + message + fix + the fan-out's two"
        );
    }
}
