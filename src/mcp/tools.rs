//! The four MCP tools: their descriptions, input and output schemas,
//! annotations, and the strict validation of call arguments. Pure: no I/O.
//! Runs unprivileged inside `volce-lab mcp-serve`.
//!
//! Invariant enforced here: rmcp hands arguments over unchecked, so every
//! call passes [`validate`] before anything runs. The schemas we publish and
//! the checks we apply say the same thing; the tests hold them together. A
//! refusal is a sentence naming the problem (field names and values are
//! escaped and capped before they are quoted back).

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

pub use crate::control::plan::Action;
use crate::inspect::Check;

/// The largest arguments object we accept, measured as compact JSON. The
/// host helper reads at most 16 KiB per request; this leaves room for the
/// envelope around the parameters.
pub const MAX_ARGUMENT_BYTES: usize = 12 * 1024;

/// Names of the four tools, in the order they are listed.
pub const TOOL_NAMES: [&str; 4] = ["cloud_check", "service_inventory", "service_plan", "service_execute"];

/// Every status word a result can carry (the `Status` enum, as serialized).
pub const STATUSES: [&str; 16] = [
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
    "invalid_arguments",
];

/// Which tool a call names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolName {
    CloudCheck,
    ServiceInventory,
    ServicePlan,
    ServiceExecute,
}

impl ToolName {
    pub fn parse(name: &str) -> Option<ToolName> {
        match name {
            "cloud_check" => Some(ToolName::CloudCheck),
            "service_inventory" => Some(ToolName::ServiceInventory),
            "service_plan" => Some(ToolName::ServicePlan),
            "service_execute" => Some(ToolName::ServiceExecute),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::CloudCheck => "cloud_check",
            ToolName::ServiceInventory => "service_inventory",
            ToolName::ServicePlan => "service_plan",
            ToolName::ServiceExecute => "service_execute",
        }
    }
}

/// The kind of value a plan parameter holds.
#[derive(Clone, Copy)]
enum Kind {
    Text,
    Port,
}

/// Every plan parameter any action takes, with its kind.
const PARAMETERS: [(&str, Kind); 6] = [
    ("app", Kind::Text),
    ("image", Kind::Text),
    ("host_port", Kind::Port),
    ("container_port", Kind::Port),
    ("server_name", Kind::Text),
    ("image_id", Kind::Text),
];

/// A 32-character lowercase hex plan id: the only shape `service_execute` takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanId(String);

impl PlanId {
    pub fn parse(text: &str) -> Option<PlanId> {
        let ok = crate::text::is_lower_hex(text, 32);
        ok.then(|| PlanId(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A validated call: the only things the server ever acts on.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Check(Check),
    Inventory,
    Plan { action: Action, parameters: Map<String, Value> },
    Execute { plan_id: PlanId },
}

/// Why arguments were refused. `code` is stable; `message` is one sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: &'static str,
    pub message: String,
}

fn refuse(code: &'static str, message: String) -> Refusal {
    Refusal { code, message }
}

/// Quotes a client-supplied name or value for a message: control characters
/// escaped, at most 40 characters.
pub fn shown(text: &str) -> String {
    crate::text::quoted(text, 40)
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Checks that `arguments` holds exactly `allowed` (all required), naming the
/// first stray or missing field.
fn exact_fields(
    tool: &str,
    arguments: &Map<String, Value>,
    allowed: &[&str],
    what: &str,
) -> Result<(), Refusal> {
    if let Some(extra) = arguments.keys().find(|key| !allowed.contains(&key.as_str())) {
        let expected = if allowed.is_empty() {
            format!("{tool} takes no {what}")
        } else {
            format!(
                "{tool} takes only {}",
                allowed.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ")
            )
        };
        return Err(refuse(
            "unexpected_field",
            format!("{what} {} is not accepted: {expected}; nothing was run.", shown(extra)),
        ));
    }
    if let Some(missing) = allowed.iter().find(|name| !arguments.contains_key(**name)) {
        return Err(refuse(
            "missing_field",
            format!("{tool} needs the {what} `{missing}`; nothing was run."),
        ));
    }
    Ok(())
}

fn string_field<'a>(tool: &str, arguments: &'a Map<String, Value>, name: &str) -> Result<&'a str, Refusal> {
    match &arguments[name] {
        Value::String(text) => Ok(text),
        other => Err(refuse(
            "wrong_type",
            format!("{tool} argument `{name}` must be a string, not {}; nothing was run.", type_name(other)),
        )),
    }
}

/// Validates the arguments of one call to `tool`. Nothing runs unless this
/// returns `Ok`.
pub fn validate(tool: ToolName, arguments: Option<&Map<String, Value>>) -> Result<Call, Refusal> {
    let empty = Map::new();
    let arguments = arguments.unwrap_or(&empty);
    let size = serde_json::to_vec(arguments).map(|bytes| bytes.len()).unwrap_or(usize::MAX);
    if size > MAX_ARGUMENT_BYTES {
        return Err(refuse(
            "too_large",
            format!(
                "the arguments are {size} bytes of JSON, more than the limit of {MAX_ARGUMENT_BYTES}; nothing was run."
            ),
        ));
    }
    let name = tool.as_str();
    match tool {
        ToolName::CloudCheck => {
            exact_fields(name, arguments, &["check"], "argument")?;
            let text = string_field(name, arguments, "check")?;
            let check = Check::ALL.into_iter().find(|check| check.as_str() == text).ok_or_else(|| {
                refuse(
                    "not_allowed",
                    format!(
                        "`check` must be one of identity, disk, web_status (got {}); nothing was run.",
                        shown(text)
                    ),
                )
            })?;
            Ok(Call::Check(check))
        }
        ToolName::ServiceInventory => {
            exact_fields(name, arguments, &[], "argument")?;
            Ok(Call::Inventory)
        }
        ToolName::ServicePlan => {
            exact_fields(name, arguments, &["action", "parameters"], "argument")?;
            let text = string_field(name, arguments, "action")?;
            let action = Action::parse(text).ok().ok_or_else(|| {
                refuse(
                    "not_allowed",
                    format!(
                        "`action` must be one of deploy, nginx_config, stop, remove_image (got {}); nothing was run.",
                        shown(text)
                    ),
                )
            })?;
            let parameters = match &arguments["parameters"] {
                Value::Object(parameters) => parameters,
                other => {
                    return Err(refuse(
                        "wrong_type",
                        format!("`parameters` must be an object, not {}; nothing was run.", type_name(other)),
                    ));
                }
            };
            let what = format!("{} parameter", action.as_str());
            exact_fields(name, parameters, action.parameters(), &what)?;
            for (key, value) in parameters {
                let kind = PARAMETERS.iter().find(|(name, _)| name == key).map(|(_, kind)| *kind);
                match (kind, value) {
                    (Some(Kind::Text), Value::String(_)) => {}
                    (Some(Kind::Port), Value::Number(n))
                        if n.as_u64().is_some_and(|p| (1024..=65535).contains(&p)) => {}
                    (Some(Kind::Text), other) => {
                        return Err(refuse(
                            "wrong_type",
                            format!(
                                "parameter `{key}` must be a string, not {}; nothing was run.",
                                type_name(other)
                            ),
                        ));
                    }
                    (Some(Kind::Port), other) => {
                        // An integer out of range is a value outside the schema; anything else a wrong type.
                        let code =
                            if other.is_u64() || other.is_i64() { "not_allowed" } else { "wrong_type" };
                        return Err(refuse(
                            code,
                            format!(
                                "parameter `{key}` must be a port number from 1024 to 65535; nothing was run."
                            ),
                        ));
                    }
                    (None, _) => unreachable!("exact_fields admits only known parameters"),
                }
            }
            Ok(Call::Plan { action, parameters: parameters.clone() })
        }
        ToolName::ServiceExecute => {
            exact_fields(name, arguments, &["plan_id"], "argument")?;
            let text = string_field(name, arguments, "plan_id")?;
            let plan_id = PlanId::parse(text).ok_or_else(|| {
                refuse(
                    "not_allowed",
                    format!(
                        "`plan_id` must be 32 lowercase hex characters as service_plan returned it (got {}); nothing was run.",
                        shown(text)
                    ),
                )
            })?;
            Ok(Call::Execute { plan_id })
        }
    }
}

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("schemas are object literals"),
    }
}

/// The `execution` record of a result: null when nothing ran.
fn execution_schema() -> Value {
    json!({
        "type": ["object", "null"],
        "description": "Facts of the process that ran (the ssh client or the local program); null when nothing ran.",
        "properties": {
            "execution_status": {"type": "string", "enum": ["ok", "nonzero_exit", "timeout", "output_limit", "signaled", "launch_failed", "ssh_or_remote_255"]},
            "exit_code": {"type": ["integer", "null"]},
            "signal": {"type": ["integer", "null"]},
            "timed_out": {"type": "boolean"},
            "output_truncated": {"type": "boolean"},
            "duration_ms": {"type": "integer", "minimum": 0},
            "completion": {"type": "string", "enum": ["confirmed", "unconfirmed"]}
        },
        "required": ["execution_status", "exit_code", "signal", "timed_out", "output_truncated", "duration_ms", "completion"],
        "additionalProperties": false
    })
}

/// The fields every result shares.
fn common_properties() -> Map<String, Value> {
    let value = json!({
        "request_id": {"type": "string", "description": "UUID of this call; also in the local audit log."},
        "timestamp": {"type": "string", "description": "UTC, RFC 3339."},
        "is_demo": {"type": "boolean", "description": "true: simulated, no server was contacted."},
        "mode": {"type": "string", "enum": ["demo", "local", "ssh"]},
        "target": {"type": "string"},
        "status": {"type": "string", "enum": STATUSES},
        "code": {"type": ["string", "null"], "description": "Stable machine code of a refusal; null otherwise."},
        "message": {"type": "string", "description": "One sentence saying what the status means and what to do next."},
        "exit_code": {"type": ["integer", "null"]},
        "execution": execution_schema()
    });
    match value {
        Value::Object(map) => map,
        _ => unreachable!(),
    }
}

fn output_schema(extra: Value, description: &str) -> Arc<JsonObject> {
    let mut properties = common_properties();
    if let Value::Object(extra) = extra {
        properties.extend(extra);
    }
    let required: Vec<&String> = properties.keys().collect();
    object(json!({
        "type": "object",
        "description": description,
        "properties": properties,
        "required": required,
        "additionalProperties": false
    }))
}

/// The output schema of `cloud_check`: the inspection result plus `code`
/// and `message`. `check` is null only when the arguments were refused.
pub fn check_output_schema() -> Arc<JsonObject> {
    output_schema(
        json!({
            "check": {"type": ["string", "null"], "enum": ["identity", "disk", "web_status", null]},
            "output": {"type": "string", "description": "What the target printed (at most 8 KiB); empty when withheld or not run."}
        }),
        "Result of one read-only check.",
    )
}

/// The output schema of the three service tools.
pub fn management_output_schema() -> Arc<JsonObject> {
    output_schema(
        json!({
            "tool": {"type": "string", "enum": ["service_inventory", "service_plan", "service_execute"]},
            "operation": {"type": "string", "enum": ["inventory", "plan", "execute"]},
            "action": {"type": ["string", "null"], "enum": ["deploy", "nginx_config", "stop", "remove_image", null]},
            "plan_id": {"type": ["string", "null"], "description": "The plan this call is about, when known."},
            "result": {"type": ["object", "null"], "description": "The host helper's result object when status is ok; null otherwise."}
        }),
        "Result of one management call through the host helper.",
    )
}

const NEVER_RETRY: &str = "A result with status `unknown` means the server may have acted: \
never retry it; call service_inventory (and ask the operator to run `volce-lab-host show <plan_id>`) first.";

/// The four tools as `tools/list` presents them.
pub fn list() -> Vec<Tool> {
    let cloud_check = Tool::new(
        "cloud_check",
        "Read-only check of the one server this MCP server is configured for. Call `identity` first: \
         every other check answers `identity_required` until identity matched, and identity is verified \
         again before each later call. `disk` shows `df -h /`; `web_status` asks the host helper whether \
         every managed gateway is running (`check_failed` = the query worked and something is down). \
         When `is_demo` is true the answers are simulated and no server was contacted: say so. \
         Stop on `identity_mismatch` (every later call answers it too until identity matches again); \
         do not try to change the target.",
        object(json!({
            "type": "object",
            "properties": {
                "check": {
                    "type": "string",
                    "enum": ["identity", "disk", "web_status"],
                    "description": "Which check to run: identity first, then disk or web_status."
                }
            },
            "required": ["check"],
            "additionalProperties": false
        })),
    )
    .with_title("Check the server (read-only)")
    .with_raw_output_schema(check_output_schema())
    .annotate(ToolAnnotations::with_title("Check the server").read_only(true).open_world(true));

    let inventory = Tool::new(
        "service_inventory",
        "Read-only: list the Docker applications, gateways, images and plans the host helper manages on \
         the server. Needs a verified identity (call cloud_check identity first) and management enabled \
         by the user. In demo mode it answers `demo_only` and runs nothing.",
        object(json!({"type": "object", "properties": {}, "additionalProperties": false})),
    )
    .with_title("List managed services (read-only)")
    .with_raw_output_schema(management_output_schema())
    .annotate(ToolAnnotations::with_title("List managed services").read_only(true));

    let plan = Tool::new(
        "service_plan",
        "Record a plan for one Docker change on the server; nothing changes yet. Returns the stored plan \
         (id, digest, impact, whether it needs approval, expiry). Actions and their parameters (exactly \
         these): deploy {app, image (a catalog key), host_port, container_port, server_name}; \
         nginx_config {app, server_name}; stop {app}; remove_image {image_id}. Plans for stop and \
         remove_image must be approved by an operator on the server (`volce-lab-host approve`); you cannot \
         approve them. The host helper checks every value against its policy and may answer `rejected` \
         with a stable code: fix the request instead of retrying it unchanged. In demo mode it answers \
         `demo_only` and records nothing. "
            .to_owned()
            + NEVER_RETRY,
        object(json!({
            "type": "object",
            "properties": {
                "action": {
                    "type": "string",
                    "enum": ["deploy", "nginx_config", "stop", "remove_image"],
                    "description": "The change to plan."
                },
                "parameters": {
                    "type": "object",
                    "description": "Exactly the parameters of the chosen action (see the tool description).",
                    "properties": {
                        "app": {"type": "string", "description": "Application name (deploy, nginx_config, stop)."},
                        "image": {"type": "string", "description": "Catalog key of the image to deploy (deploy)."},
                        "host_port": {"type": "integer", "minimum": 1024, "maximum": 65535, "description": "Loopback port of the gateway (deploy)."},
                        "container_port": {"type": "integer", "minimum": 1024, "maximum": 65535, "description": "Port the app listens on inside its container (deploy)."},
                        "server_name": {"type": "string", "description": "nginx server_name (deploy, nginx_config)."},
                        "image_id": {"type": "string", "description": "sha256:<64 hex> of the image to remove (remove_image)."}
                    },
                    "additionalProperties": false
                }
            },
            "required": ["action", "parameters"],
            "additionalProperties": false
        })),
    )
    .with_title("Plan a Docker change")
    .with_raw_output_schema(management_output_schema())
    .annotate(ToolAnnotations::with_title("Plan a Docker change").read_only(false).destructive(false));

    let execute = Tool::new(
        "service_execute",
        "Execute one stored plan, once, exactly as it was recorded. Plans for stop and remove_image run \
         only after an operator approved them on the server; this tool cannot approve anything. \
         `needs_inspection` means the change reached Docker and failed or is uncertain: stop and tell the \
         operator. "
            .to_owned()
            + NEVER_RETRY,
        object(json!({
            "type": "object",
            "properties": {
                "plan_id": {
                    "type": "string",
                    "pattern": "^[a-f0-9]{32}$",
                    "description": "The id service_plan returned."
                }
            },
            "required": ["plan_id"],
            "additionalProperties": false
        })),
    )
    .with_title("Execute a stored plan")
    .with_raw_output_schema(management_output_schema())
    .annotate(
        ToolAnnotations::with_title("Execute a stored plan")
            .read_only(false)
            .destructive(true)
            .idempotent(false),
    );

    vec![cloud_check, inventory, plan, execute]
}

/// Guidance sent with `initialize`, for clients that show it to the model.
pub const INSTRUCTIONS: &str = "volce-lab looks after one configured Linux server. Call cloud_check with \
check=identity first; every other tool needs a verified identity. Results with is_demo=true are simulated. \
Changes are two steps: service_plan records a plan, service_execute runs it; plans for stop and \
remove_image need an operator's approval on the server. Never retry a call whose status is unknown: \
inspect first.";

#[cfg(test)]
mod tests {
    use super::*;

    fn args(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn good_arguments_are_accepted() {
        let call = validate(ToolName::CloudCheck, Some(&args(json!({"check": "disk"})))).unwrap();
        assert_eq!(call, Call::Check(Check::Disk));
        assert_eq!(validate(ToolName::ServiceInventory, None).unwrap(), Call::Inventory);
        assert_eq!(validate(ToolName::ServiceInventory, Some(&Map::new())).unwrap(), Call::Inventory);
        let plan = json!({"action": "stop", "parameters": {"app": "web"}});
        assert!(matches!(
            validate(ToolName::ServicePlan, Some(&args(plan))).unwrap(),
            Call::Plan { action: Action::Stop, .. }
        ));
        let deploy = json!({"action": "deploy", "parameters": {
            "app": "web", "image": "web", "host_port": 18001, "container_port": 8080, "server_name": "x"}});
        assert!(validate(ToolName::ServicePlan, Some(&args(deploy))).is_ok());
        let id = "0123456789abcdef0123456789abcdef";
        let call = validate(ToolName::ServiceExecute, Some(&args(json!({"plan_id": id})))).unwrap();
        assert_eq!(call, Call::Execute { plan_id: PlanId(id.into()) });
    }

    #[test]
    fn every_bad_argument_is_refused_with_its_code() {
        let big = "x".repeat(MAX_ARGUMENT_BYTES);
        let table: Vec<(ToolName, Option<Value>, &str)> = vec![
            (ToolName::CloudCheck, None, "missing_field"),
            (ToolName::CloudCheck, Some(json!({})), "missing_field"),
            (ToolName::CloudCheck, Some(json!({"check": "disk", "host": "evil"})), "unexpected_field"),
            (ToolName::CloudCheck, Some(json!({"check": "disk", "command": "rm -rf /"})), "unexpected_field"),
            (ToolName::CloudCheck, Some(json!({"check": "disk", "path": "/etc"})), "unexpected_field"),
            (ToolName::CloudCheck, Some(json!({"check": 1})), "wrong_type"),
            (ToolName::CloudCheck, Some(json!({"check": ["disk"]})), "wrong_type"),
            (ToolName::CloudCheck, Some(json!({"check": null})), "wrong_type"),
            (ToolName::CloudCheck, Some(json!({"check": "Disk"})), "not_allowed"),
            (ToolName::CloudCheck, Some(json!({"check": "disk; id"})), "not_allowed"),
            (ToolName::CloudCheck, Some(json!({"check": big})), "too_large"),
            (ToolName::ServiceInventory, Some(json!({"approved": true})), "unexpected_field"),
            (ToolName::ServicePlan, Some(json!({"action": "deploy"})), "missing_field"),
            (ToolName::ServicePlan, Some(json!({"action": "restart", "parameters": {}})), "not_allowed"),
            (ToolName::ServicePlan, Some(json!({"action": "stop", "parameters": "app=web"})), "wrong_type"),
            (
                ToolName::ServicePlan,
                Some(json!({"action": "stop", "parameters": {"app": "web"}, "approved": true})),
                "unexpected_field",
            ),
            (
                ToolName::ServicePlan,
                Some(json!({"action": "stop", "parameters": {"app": "web", "command": "x"}})),
                "unexpected_field",
            ),
            (ToolName::ServicePlan, Some(json!({"action": "stop", "parameters": {}})), "missing_field"),
            (ToolName::ServicePlan, Some(json!({"action": "stop", "parameters": {"app": 7}})), "wrong_type"),
            (
                ToolName::ServicePlan,
                Some(json!({"action": "deploy", "parameters": {
                "app": "web", "image": "web", "host_port": 70000, "container_port": 8080, "server_name": "x"}})),
                "not_allowed",
            ),
            (
                ToolName::ServicePlan,
                Some(json!({"action": "deploy", "parameters": {
                "app": "web", "image": "web", "host_port": 18001, "container_port": 80, "server_name": "x"}})),
                "not_allowed",
            ),
            (
                ToolName::ServicePlan,
                Some(json!({"action": "deploy", "parameters": {
                "app": "web", "image": "web", "host_port": 18001.5, "container_port": 8080, "server_name": "x"}})),
                "wrong_type",
            ),
            (
                ToolName::ServicePlan,
                Some(json!({"action": "deploy", "parameters": {
                "app": "web", "image": "web", "host_port": "18001", "container_port": 8080, "server_name": "x"}})),
                "wrong_type",
            ),
            (
                ToolName::ServiceExecute,
                Some(json!({"plan_id": "0123456789ABCDEF0123456789ABCDEF"})),
                "not_allowed",
            ),
            (ToolName::ServiceExecute, Some(json!({"plan_id": "0123"})), "not_allowed"),
            (
                ToolName::ServiceExecute,
                Some(json!({"plan_id": "0123456789abcdef0123456789abcdef\n"})),
                "not_allowed",
            ),
            (
                ToolName::ServiceExecute,
                Some(json!({"plan_id": "0123456789abcdef0123456789abcdef", "approved": true})),
                "unexpected_field",
            ),
        ];
        for (tool, arguments, code) in table {
            let map = arguments.clone().map(args);
            let refusal = validate(tool, map.as_ref())
                .expect_err(&format!("{} {arguments:?} must be refused", tool.as_str()));
            assert_eq!(refusal.code, code, "{} {arguments:?}: {}", tool.as_str(), refusal.message);
            assert!(refusal.message.ends_with("nothing was run."), "{}", refusal.message);
            assert!(refusal.message.len() < 400, "{}", refusal.message);
        }
    }

    #[test]
    fn refused_names_are_escaped_and_capped() {
        let refusal =
            validate(ToolName::CloudCheck, Some(&args(json!({"check": "disk", "a\u{1b}[2J\nb": 1}))))
                .unwrap_err();
        assert!(
            !refusal.message.contains('\u{1b}') && !refusal.message.contains('\n'),
            "{}",
            refusal.message
        );
        let long = "y".repeat(500);
        let refusal = validate(ToolName::CloudCheck, Some(&args(json!({"check": long})))).unwrap_err();
        assert!(refusal.message.len() < 200, "{}", refusal.message);
    }

    #[test]
    fn every_input_schema_is_a_closed_object() {
        fn closed(schema: &Value, path: &str) {
            if let Some(Value::Object(properties)) = schema.get("properties") {
                assert_eq!(schema["type"], "object", "{path}");
                assert_eq!(schema["additionalProperties"], false, "{path} must be closed");
                for (name, property) in properties {
                    closed(property, &format!("{path}.{name}"));
                }
            }
        }
        let tools = list();
        assert_eq!(tools.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>(), TOOL_NAMES);
        for tool in tools {
            let schema = Value::Object((*tool.input_schema).clone());
            assert_eq!(schema["type"], "object");
            assert_eq!(schema["additionalProperties"], false);
            closed(&schema, &tool.name);
        }
    }

    #[test]
    fn status_list_matches_the_status_enum() {
        for status in STATUSES {
            let parsed: crate::inspect::Status = serde_json::from_value(json!(status)).unwrap();
            assert_eq!(parsed.as_str(), status);
        }
        // Every variant the enum's own schema names is in the list.
        let schema = serde_json::to_value(schemars::schema_for!(crate::inspect::Status)).unwrap();
        let text = schema.to_string();
        let mut named = 0;
        for word in text.split('"') {
            if serde_json::from_value::<crate::inspect::Status>(json!(word)).is_ok() {
                assert!(STATUSES.contains(&word), "{word} missing from STATUSES");
                named += 1;
            }
        }
        assert!(named >= STATUSES.len(), "schema names {named} statuses");
    }

    #[test]
    fn action_parameters_match_the_published_schema() {
        let plan = list().into_iter().find(|t| t.name == "service_plan").unwrap();
        let properties = &plan.input_schema["properties"]["parameters"]["properties"];
        for action in Action::ALL {
            for name in action.parameters() {
                assert!(properties.get(*name).is_some(), "{name} missing from the schema");
            }
        }
        for (name, _) in PARAMETERS {
            assert!(Action::ALL.iter().any(|a| a.parameters().contains(&name)), "{name} unused");
        }
    }
}
