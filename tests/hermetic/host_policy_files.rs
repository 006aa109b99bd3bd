//! The shipped policy example and schema stay loadable and in agreement
//! with the parser. Hermetic.
//!
//! No JSON Schema crate is in the dependency tree, so a small validator
//! below covers the keywords the schema uses (all but `pattern`, whose rules
//! the parser's own unit tests cover).

use std::path::Path;

use serde_json::{Value, json};
use volce_lab::control::policy::Policy;
use volce_lab::vocab::Action;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The example without its comment lines (comments stand on their own lines).
fn example() -> String {
    let text = std::fs::read_to_string(root().join("policy/policy.example.jsonc")).unwrap();
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

fn schema() -> Value {
    serde_json::from_str(&std::fs::read_to_string(root().join("policy/policy.schema.json")).unwrap()).unwrap()
}

fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let pointer = reference.strip_prefix('#').expect("local refs only");
            root.pointer(pointer).unwrap_or_else(|| panic!("dangling {reference}"))
        }
        None => schema,
    }
}

/// Errors of `value` against `schema` (subset of draft 2020-12).
fn validate(value: &Value, schema: &Value, root: &Value, at: &str, errors: &mut Vec<String>) {
    let schema = resolve(schema, root);
    if schema == &Value::Bool(false) {
        errors.push(format!("{at}: not allowed"));
        return;
    }
    if let Some(kind) = schema.get("type").and_then(Value::as_str) {
        let ok = match kind {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            other => panic!("unsupported type {other}"),
        };
        if !ok {
            errors.push(format!("{at}: not {kind}"));
            return;
        }
    }
    if let (Some(n), Some(min)) = (value.as_f64(), schema.get("minimum").and_then(Value::as_f64))
        && n < min
    {
        errors.push(format!("{at}: below {min}"));
    }
    if let (Some(n), Some(max)) = (value.as_f64(), schema.get("maximum").and_then(Value::as_f64))
        && n > max
    {
        errors.push(format!("{at}: above {max}"));
    }
    if let (Some(s), Some(max)) = (value.as_str(), schema.get("maxLength").and_then(Value::as_u64))
        && s.chars().count() as u64 > max
    {
        errors.push(format!("{at}: longer than {max}"));
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        errors.push(format!("{at}: {value} not one of {allowed:?}"));
    }
    if let Some(constant) = schema.get("const")
        && value != constant
    {
        errors.push(format!("{at}: not {constant}"));
    }
    for sub in schema.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        validate(value, sub, root, at, errors);
    }
    if let (Some(items), Some(wanted)) = (value.as_array(), schema.get("contains")) {
        let found = items.iter().any(|item| {
            let mut scratch = Vec::new();
            validate(item, wanted, root, at, &mut scratch);
            scratch.is_empty()
        });
        if !found {
            errors.push(format!("{at}: contains no item matching {wanted}"));
        }
    }
    if let Some(choices) = schema.get("oneOf").and_then(Value::as_array) {
        let passing = choices
            .iter()
            .filter(|choice| {
                let mut inner = Vec::new();
                validate(value, choice, root, at, &mut inner);
                inner.is_empty()
            })
            .count();
        if passing != 1 {
            errors.push(format!("{at}: matches {passing} of the oneOf choices, not exactly one"));
        }
    }
    if let Some(object) = value.as_object() {
        let properties = schema.get("properties").and_then(Value::as_object);
        for required in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            if !object.contains_key(required.as_str().unwrap()) {
                errors.push(format!("{at}: missing {required}"));
            }
        }
        if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
            && (object.len() as u64) < min
        {
            errors.push(format!("{at}: fewer than {min} properties"));
        }
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
            && (object.len() as u64) > max
        {
            errors.push(format!("{at}: more than {max} properties"));
        }
        for (key, item) in object {
            if let Some(names) = schema.get("propertyNames") {
                validate(&json!(key), names, root, &format!("{at}/{key} (name)"), errors);
            }
            match properties.and_then(|p| p.get(key)) {
                Some(sub) => validate(item, sub, root, &format!("{at}/{key}"), errors),
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => errors.push(format!("{at}: unknown property {key}")),
                    Some(sub) => validate(item, sub, root, &format!("{at}/{key}"), errors),
                    None => {}
                },
            }
        }
    }
    if let Some(items) = value.as_array() {
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && (items.len() as u64) < min
        {
            errors.push(format!("{at}: fewer than {min} items"));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && (items.len() as u64) > max
        {
            errors.push(format!("{at}: more than {max} items"));
        }
        if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
            for (i, a) in items.iter().enumerate() {
                if items[..i].contains(a) {
                    errors.push(format!("{at}: duplicate {a}"));
                }
            }
        }
        let prefix = schema.get("prefixItems").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
        for (i, item) in items.iter().enumerate() {
            let sub = prefix.get(i).or_else(|| schema.get("items"));
            if let Some(sub) = sub {
                validate(item, sub, root, &format!("{at}/{i}"), errors);
            }
        }
    }
}

fn schema_errors(value: &Value) -> Vec<String> {
    let schema = schema();
    let mut errors = Vec::new();
    validate(value, &schema, &schema, "", &mut errors);
    errors
}

#[test]
fn the_example_policy_loads() {
    let policy = Policy::from_json(example().as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(policy.port_range, (18000, 18999));
    assert_eq!(policy.approvers, ["alice"]);
    assert!(policy.catalog.contains_key("web"));
    assert_eq!(policy.catalog["api"].container_port, Some(8080));
    assert_eq!(policy.catalog["api"].health_path.as_str(), "/healthz");
    let migrate = &policy.catalog["api"].tasks[&volce_lab::vocab::TaskName::parse("migrate").unwrap()];
    assert_eq!(migrate.all(), ["/app/bin/migrate", "--to", "latest"]);
    assert_eq!(policy.plan_ttl_seconds, 600);
    assert!(policy.requires_approval(Action::Stop) && policy.requires_approval(Action::RemoveImage));
    assert!(!policy.requires_approval(Action::Deploy) && !policy.requires_approval(Action::NginxConfig));
}

#[test]
fn the_example_policy_satisfies_the_schema() {
    let value: Value = serde_json::from_str(&example()).unwrap();
    assert_eq!(schema_errors(&value), Vec::<String>::new());
}

#[test]
fn the_schema_lists_exactly_the_fields_the_parser_accepts() {
    let schema = schema();
    let mut fields: Vec<&str> =
        schema["properties"].as_object().unwrap().keys().map(String::as_str).collect();
    fields.sort();
    // The parser's own list: serde names every field it accepts when it
    // refuses an unknown one ("unknown field `x`, expected one of `a`, ...").
    let mut unknown: Value = serde_json::from_str(&example()).unwrap();
    unknown["approve_all"] = json!(true);
    let error = Policy::from_json(unknown.to_string().as_bytes()).unwrap_err().to_string();
    let listed = error.split_once("expected one of").unwrap_or_else(|| panic!("{error}")).1;
    let mut accepted: Vec<&str> = listed.split('`').skip(1).step_by(2).collect();
    accepted.sort();
    assert_eq!(fields, accepted, "policy.schema.json and the parser list different fields");
    assert!(fields.contains(&"gateway_access_log") && fields.contains(&"keep_versions"), "{fields:?}");
    // approval_required names exactly the actions there are.
    let names: Vec<&str> = Action::ALL.iter().map(|a| a.as_str()).collect();
    let items = &schema["properties"]["approval_required"]["items"]["enum"];
    assert_eq!(items, &json!(names), "the schema's approval_required enum");
    let base: Value = serde_json::from_str(&example()).unwrap();
    // Each section's keys: the parser accepts every key the schema lists ...
    for section in ["capacity", "limits"] {
        for key in schema["properties"][section]["properties"].as_object().unwrap().keys() {
            let mut value = base.clone();
            value[section] = json!({ key.as_str(): base[section][key].clone() });
            assert!(Policy::from_json(value.to_string().as_bytes()).is_ok(), "{section}.{key}");
        }
    }
    // ... and both refuse an unknown one.
    for (path, value) in [
        ("", json!({"approve_all": true})),
        ("capacity", json!({"min_free_cpu": 1})),
        ("limits", json!({"privileged": true})),
    ] {
        let mut policy = base.clone();
        if path.is_empty() {
            policy["approve_all"] = json!(true);
        } else {
            policy[path] = value;
        }
        assert!(Policy::from_json(policy.to_string().as_bytes()).is_err(), "parser accepts {path} extra");
        assert!(!schema_errors(&policy).is_empty(), "schema accepts {path} extra");
    }
}

/// Tried: each key of a catalog entry object alone with its image, and an
/// unknown key: the schema and the parser agree on both.
#[test]
fn the_schema_and_the_parser_agree_on_catalog_entry_objects() {
    let base: Value = serde_json::from_str(&example()).unwrap();
    let schema = schema();
    let image = base["catalog"]["api"]["image"].clone();
    for key in schema["$defs"]["entry"]["properties"].as_object().unwrap().keys() {
        let mut policy = base.clone();
        // The example names no env file (setup's skeleton is the example,
        // and a file it names must exist): this test names one.
        let value = match &base["catalog"]["api"][key] {
            Value::Null if key == "env_file" => json!("/etc/volce-lab/apps/api.env"),
            // An accessory must be declared too (the example declares none):
            // an entry that names none is the one both read alone.
            Value::Null if key == "accessories" => json!({}),
            value => value.clone(),
        };
        policy["catalog"]["api"] = json!({"image": image.clone(), key.as_str(): value});
        if key == "before_start" {
            // It names one of the entry's tasks: alone it is refused.
            policy["catalog"]["api"]["tasks"] = base["catalog"]["api"]["tasks"].clone();
        }
        assert!(Policy::from_json(policy.to_string().as_bytes()).is_ok(), "parser refuses {key}");
        assert_eq!(schema_errors(&policy), Vec::<String>::new(), "{key}");
    }
    let mut policy = base.clone();
    policy["catalog"]["api"]["env"] = json!("x");
    assert!(Policy::from_json(policy.to_string().as_bytes()).is_err(), "parser accepts an unknown entry key");
    assert!(!schema_errors(&policy).is_empty(), "schema accepts an unknown entry key");
}

/// Tried: an entry's env_file in the fixed directory, and paths outside or
/// below it: the parser takes exactly the first two; the schema accepts
/// them (its `pattern`, which this validator does not run, is the
/// parser's rule: `^/etc/volce-lab/apps/[a-z0-9][a-z0-9._-]{0,63}$`).
#[test]
fn the_schema_and_the_parser_agree_on_env_files() {
    let base: Value = serde_json::from_str(&example()).unwrap();
    for (path, good) in [
        ("/etc/volce-lab/apps/api.env", true),
        ("/etc/volce-lab/apps/a", true),
        ("/etc/volce-lab/apps/sub/api.env", false),
        ("/etc/volce-lab/api.env", false),
        ("api.env", false),
        ("/etc/volce-lab/apps/Api.env", false),
    ] {
        let mut policy = base.clone();
        policy["catalog"]["api"]["env_file"] = json!(path);
        assert_eq!(Policy::from_json(policy.to_string().as_bytes()).is_ok(), good, "parser on {path}");
        if good {
            assert_eq!(schema_errors(&policy), Vec::<String>::new(), "schema on {path}");
        }
    }
}

#[test]
fn the_schema_and_the_parser_accept_the_edges_and_the_additions() {
    let base: Value = serde_json::from_str(&example()).unwrap();
    let cases = [
        ("plan_ttl_seconds", json!(60)),
        ("plan_ttl_seconds", json!(3600)),
        // Issue 37: an empty catalog is valid (setup's policy starts so).
        ("catalog", json!({})),
        ("approval_required", json!(["update", "remove_app", "start", "remove_image", "stop"])),
        (
            "approval_required",
            json!(["stop", "remove_image", "remove_app", "start", "update", "deploy", "nginx_config"]),
        ),
    ];
    for (key, good) in cases {
        let mut value = base.clone();
        value[key] = good.clone();
        assert!(Policy::from_json(value.to_string().as_bytes()).is_ok(), "parser refuses {key}={good}");
        assert_eq!(schema_errors(&value), Vec::<String>::new(), "schema refuses {key}={good}");
    }
}

#[test]
fn the_schema_and_the_parser_agree_on_bounds() {
    let base: Value = serde_json::from_str(&example()).unwrap();
    let cases = [
        ("max_apps", json!(0)),
        ("max_apps", json!(65)),
        ("max_apps", json!(true)),
        ("port_range", json!([80, 18999])),
        ("port_range", json!([18000])),
        ("approvers", json!(["alice", "alice"])),
        ("limits", json!({"cpus": 0})),
        ("limits", json!({"pids": 8})),
        ("limits", json!({"memory_mib": 5})),
        // The plan lifetime: one second outside either end, and not a number.
        ("plan_ttl_seconds", json!(59)),
        ("plan_ttl_seconds", json!(3601)),
        ("plan_ttl_seconds", json!("600")),
        ("plan_ttl_seconds", json!(600.5)),
        // An unknown action, a repeat, not a list (a list that leaves the
        // fixed minimum out is accepted: the minimum applies anyway).
        ("approval_required", json!(["stop", "remove_image", "remove_app", "start", "update", "shell"])),
        ("approval_required", json!(["stop", "stop", "remove_image", "remove_app"])),
        ("approval_required", json!("stop")),
    ];
    for (key, bad) in cases {
        let mut value = base.clone();
        value[key] = bad.clone();
        assert!(Policy::from_json(value.to_string().as_bytes()).is_err(), "parser accepts {key}={bad}");
        assert!(!schema_errors(&value).is_empty(), "schema accepts {key}={bad}");
    }
}
