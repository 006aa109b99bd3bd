//! Strict validation of tool-call arguments. Pure: no I/O. Runs
//! unprivileged inside `volce-lab mcp-serve`.
//!
//! Invariant enforced here: rmcp hands arguments over unchecked, so every
//! call passes [`validate`] before anything runs. It says what the published
//! input schemas say (see `super::schema`; the tests hold them together),
//! and refuses with a precise code and a sentence naming the problem. Field
//! names and values are escaped and capped before they are quoted back.
//! These checks are written by hand, not derived: the sentences are part of
//! what the agent learns from.

use serde_json::{Map, Value};

use super::Batches;
use super::{Call, ToolName};
use crate::inspect::Check;
use crate::vocab::{ALSO_SERVER_NAMES, Action};
use crate::vocab::{Code, MAX_ALSO_SERVER_NAMES, PlanId, Refusal, RolloutId};
use crate::wire::rollout::{MAX_HEALTH_WAIT_SECONDS, MAX_ROLLOUT_HOSTS};

/// The largest arguments object we accept, measured as compact JSON. The
/// host helper reads at most 16 KiB per request
/// ([`crate::wire::MAX_REQUEST_BYTES`]); this leaves room for the envelope
/// around the parameters.
pub const MAX_ARGUMENT_BYTES: usize = 12 * 1024;

/// The kind of value a plan parameter holds.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    Text,
    Port,
    Flag,
    /// A list of at most [`MAX_ALSO_SERVER_NAMES`] strings; the helper
    /// judges the names themselves.
    Names,
}

/// Every plan parameter any action takes, with its kind.
pub(super) const PARAMETERS: [(&str, Kind); 11] = [
    ("app", Kind::Text),
    ("image", Kind::Text),
    ("host_port", Kind::Port),
    ("container_port", Kind::Port),
    ("server_name", Kind::Text),
    (ALSO_SERVER_NAMES, Kind::Names),
    ("image_id", Kind::Text),
    ("purge_data", Kind::Flag),
    ("task", Kind::Text),
    ("snapshot", Kind::Text),
    ("accessory", Kind::Text),
];

/// The lowest and highest port a plan may name.
pub(super) const PORTS: std::ops::RangeInclusive<u64> = 1024..=65535;

fn refuse(code: Code, message: String) -> Refusal {
    Refusal::new(code, message)
}

/// Quotes a client-supplied name or value for a message: control characters
/// escaped, at most 40 characters.
pub fn shown(text: &str) -> String {
    crate::text::quoted(text, 40)
}

/// `a, b, c`: the names a refusal lists as allowed.
fn one_of(names: impl IntoIterator<Item = &'static str>) -> String {
    names.into_iter().collect::<Vec<_>>().join(", ")
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
    optional: &[&str],
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
            Code::UnexpectedField,
            format!("{what} {} is not accepted: {expected}; nothing was run.", shown(extra)),
        ));
    }
    if let Some(missing) =
        allowed.iter().find(|name| !arguments.contains_key(**name) && !optional.contains(name))
    {
        return Err(refuse(
            Code::MissingField,
            format!("{tool} needs the {what} `{missing}`; nothing was run."),
        ));
    }
    Ok(())
}

fn string_field<'a>(tool: &str, arguments: &'a Map<String, Value>, name: &str) -> Result<&'a str, Refusal> {
    match &arguments[name] {
        Value::String(text) => Ok(text),
        other => Err(refuse(
            Code::WrongType,
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
            Code::TooLarge,
            format!(
                "the arguments are {size} bytes of JSON, more than the limit of {MAX_ARGUMENT_BYTES}; nothing was run."
            ),
        ));
    }
    let name = tool.as_str();
    match tool {
        ToolName::CloudCheck => check(name, arguments),
        ToolName::ServiceInventory => {
            exact_fields(name, arguments, &[], &[], "argument")?;
            Ok(Call::Inventory)
        }
        ToolName::ServicePlan => plan(name, arguments),
        ToolName::ServiceLogs => logs(name, arguments),
        ToolName::ServiceExecute => execute(name, arguments),
    }
}

/// `cloud_check`: `check`, one of [`Check::ALL`].
fn check(tool: &str, arguments: &Map<String, Value>) -> Result<Call, Refusal> {
    exact_fields(tool, arguments, &["check"], &[], "argument")?;
    let text = string_field(tool, arguments, "check")?;
    let check = Check::ALL.into_iter().find(|check| check.as_str() == text).ok_or_else(|| {
        refuse(
            Code::NotAllowed,
            format!(
                "`check` must be one of {} (got {}); nothing was run.",
                one_of(Check::ALL.map(Check::as_str)),
                shown(text)
            ),
        )
    })?;
    Ok(Call::Check(check))
}

/// `service_plan`: `action` and exactly its `parameters`, each of its kind.
fn plan(tool: &str, arguments: &Map<String, Value>) -> Result<Call, Refusal> {
    const OPTIONS: [&str; 2] = ["batch_size", "health_wait_seconds"];
    exact_fields(tool, arguments, &["action", "parameters", OPTIONS[0], OPTIONS[1]], &OPTIONS, "argument")?;
    let text = string_field(tool, arguments, "action")?;
    let action = Action::parse(text).map_err(|_| {
        refuse(
            Code::NotAllowed,
            format!(
                "`action` must be one of {} (got {}); nothing was run.",
                one_of(Action::ALL.iter().map(|a| a.as_str())),
                shown(text)
            ),
        )
    })?;
    let parameters = match &arguments["parameters"] {
        Value::Object(parameters) => parameters,
        other => {
            return Err(refuse(
                Code::WrongType,
                format!("`parameters` must be an object, not {}; nothing was run.", type_name(other)),
            ));
        }
    };
    let what = format!("{} parameter", action.as_str());
    exact_fields(tool, parameters, action.parameters(), action.optional_parameters(), &what)?;
    for (key, value) in parameters {
        parameter(key, value)?;
    }
    let batches = Batches {
        batch_size: whole(arguments, "batch_size", 1..=MAX_ROLLOUT_HOSTS as u32)?,
        health_wait_seconds: whole(arguments, "health_wait_seconds", 0..=MAX_HEALTH_WAIT_SECONDS)?,
    };
    Ok(Call::Plan { action, parameters: parameters.clone(), batches })
}

/// The optional whole number `key` of `arguments`, inside `range`.
fn whole(
    arguments: &Map<String, Value>,
    key: &str,
    range: std::ops::RangeInclusive<u32>,
) -> Result<Option<u32>, Refusal> {
    let Some(value) = arguments.get(key) else { return Ok(None) };
    match value.as_u64().and_then(|n| u32::try_from(n).ok()) {
        Some(n) if range.contains(&n) => Ok(Some(n)),
        _ => Err(refuse(
            if value.is_u64() || value.is_i64() { Code::NotAllowed } else { Code::WrongType },
            format!(
                "`{key}` must be a whole number from {} to {}; nothing was run.",
                range.start(),
                range.end()
            ),
        )),
    }
}

/// One plan parameter `key` (admitted by `exact_fields`): its value is of
/// the parameter's kind ([`PARAMETERS`]).
fn parameter(key: &str, value: &Value) -> Result<(), Refusal> {
    let kind = PARAMETERS.iter().find(|(name, _)| *name == key).map(|(_, kind)| *kind);
    let wrong_type = |what: &str, other: &Value| {
        refuse(
            Code::WrongType,
            format!("parameter `{key}` must be {what}, not {}; nothing was run.", type_name(other)),
        )
    };
    match (kind, value) {
        (Some(Kind::Text), Value::String(_)) | (Some(Kind::Flag), Value::Bool(_)) => Ok(()),
        (Some(Kind::Flag), other) => Err(wrong_type("true or false", other)),
        (Some(Kind::Port), Value::Number(n)) if n.as_u64().is_some_and(|p| PORTS.contains(&p)) => Ok(()),
        (Some(Kind::Names), Value::Array(names))
            if names.len() <= MAX_ALSO_SERVER_NAMES && names.iter().all(Value::is_string) =>
        {
            Ok(())
        }
        (Some(Kind::Names), Value::Array(names)) if names.iter().all(Value::is_string) => Err(refuse(
            Code::NotAllowed,
            format!(
                "parameter `{key}` lists {} names and takes at most {MAX_ALSO_SERVER_NAMES} \
                 (server_name is the fourth); nothing was run.",
                names.len()
            ),
        )),
        (Some(Kind::Names), Value::Array(_)) => Err(refuse(
            Code::WrongType,
            format!(
                "parameter `{key}` must be a list of strings, not a list holding something else; nothing was run."
            ),
        )),
        (Some(Kind::Names), other) => Err(wrong_type("a list of strings", other)),
        (Some(Kind::Text), other) => Err(wrong_type("a string", other)),
        (Some(Kind::Port), other) => Err(port_refusal(key, other)),
        // exact_fields admits only known parameters; were another to come
        // through, it is still refused, never run.
        (None, _) => Err(refuse(
            Code::UnexpectedField,
            format!("parameter {} is not accepted; nothing was run.", shown(key)),
        )),
    }
}

/// A port parameter that is no port of [`PORTS`].
fn port_refusal(key: &str, value: &Value) -> Refusal {
    // An integer out of range is a value outside the schema; anything else a wrong type.
    let code = if value.is_u64() || value.is_i64() { Code::NotAllowed } else { Code::WrongType };
    // The operator's range is the server's to say: name where to read it
    // instead of a bound it may not use.
    let range = if key == "host_port" {
        " and inside the operator's range, which service_inventory shows as offer.port_range"
    } else {
        ""
    };
    refuse(
        code,
        format!(
            "parameter `{key}` must be a port number from {} to {}{range}; nothing was run.",
            PORTS.start(),
            PORTS.end()
        ),
    )
}

/// `service_execute`: `plan_id`, 32 lowercase hex, and optionally
/// `signed_approval`, a statement and its signature block in one string
/// (its shape checked here; only the host can say whether it approves).
fn execute(tool: &str, arguments: &Map<String, Value>) -> Result<Call, Refusal> {
    let first = if arguments.contains_key("rollout") { "rollout" } else { "plan_id" };
    exact_fields(tool, arguments, &[first, "signed_approval"], &["signed_approval"], "argument")?;
    let signed_approval = match arguments.get("signed_approval") {
        None => None,
        Some(_) => {
            let text = string_field(tool, arguments, "signed_approval")?;
            Some(crate::wire::signed::SignedApproval::parse(text)?)
        }
    };
    if first == "rollout" {
        let text = string_field(tool, arguments, "rollout")?;
        let rollout_id = RolloutId::parse(text).map_err(|refusal| {
            Refusal::new(
                refusal.code,
                format!(
                    "`rollout` must be 32 lowercase hex characters as service_plan returned it (got {}); \
                     nothing was run.",
                    shown(text)
                ),
            )
        })?;
        return Ok(Call::ExecuteRollout { rollout_id, signed_approval });
    }
    // A rollout's consent carried to one of its plans would skip the
    // rollout's order and halt (issue 43): only `rollout` takes it.
    if signed_approval.as_ref().is_some_and(|signed| signed.is_rollout()) {
        return Err(refuse(
            Code::RolloutApprovalAlone,
            "`signed_approval` is a rollout's: it runs only with `rollout` (no `plan_id`), in the rollout's order; \
             nothing was run."
                .into(),
        ));
    }
    let text = string_field(tool, arguments, "plan_id")?;
    let plan_id = PlanId::parse(text).map_err(|_| {
        refuse(
            Code::NotAllowed,
            format!(
                "`plan_id` must be 32 lowercase hex characters as service_plan returned it (got {}); nothing was run.",
                shown(text)
            ),
        )
    })?;
    Ok(Call::Execute { plan_id, signed_approval })
}

/// `service_logs`: `app` and `container` required, `tail` (default
/// [`LOG_TAIL_DEFAULT`]) and `since_minutes` optional, whole numbers in
/// their ranges. The app name itself is the helper's to judge (it knows
/// which apps it manages); here it only has to be a string.
fn logs(tool: &str, arguments: &Map<String, Value>) -> Result<Call, Refusal> {
    use strum::VariantArray as _;

    use crate::wire::{ContainerRole, LOG_SINCE_MINUTES, LOG_TAIL, LOG_TAIL_DEFAULT, LogContainer};
    const ALLOWED: [&str; 4] = ["app", "container", "tail", "since_minutes"];
    let mut required = Map::new();
    for (key, value) in arguments {
        if !ALLOWED.contains(&key.as_str()) {
            return Err(refuse(
                Code::UnexpectedField,
                format!(
                    "argument {} is not accepted: {tool} takes only `app`, `container`, `tail`, `since_minutes`; nothing was run.",
                    shown(key)
                ),
            ));
        }
        if key == "app" || key == "container" {
            required.insert(key.clone(), value.clone());
        }
    }
    exact_fields(tool, &required, &["app", "container"], &[], "argument")?;
    let app = string_field(tool, arguments, "app")?;
    let text = string_field(tool, arguments, "container")?;
    let container = LogContainer::parse(text).ok_or_else(|| {
        refuse(
            Code::NotAllowed,
            format!(
                "`container` must be one of {}, or the name of one of the app's accessories (got {}); nothing \
                 was run.",
                one_of(ContainerRole::VARIANTS.iter().map(|c| c.as_str())),
                shown(text)
            ),
        )
    })?;
    let number = |field: &str, range: std::ops::RangeInclusive<u64>| -> Result<Option<u64>, Refusal> {
        let Some(value) = arguments.get(field) else { return Ok(None) };
        match value.as_u64() {
            Some(n) if range.contains(&n) => Ok(Some(n)),
            _ => {
                // An integer out of range is a value outside the schema; anything else a wrong type.
                let code = if value.is_u64() || value.is_i64() { Code::NotAllowed } else { Code::WrongType };
                Err(refuse(
                    code,
                    format!(
                        "`{field}` must be a whole number from {} to {} (got {}); nothing was run.",
                        range.start(),
                        range.end(),
                        shown(&value.to_string())
                    ),
                ))
            }
        }
    };
    let tail = number("tail", LOG_TAIL)?.unwrap_or(LOG_TAIL_DEFAULT);
    let since_minutes = number("since_minutes", LOG_SINCE_MINUTES)?;
    Ok(Call::Logs { app: app.to_owned(), container, tail, since_minutes })
}

#[cfg(test)]
mod tests;
