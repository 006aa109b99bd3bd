//! A catalog entry's env file through the helper's rpc pipeline and the
//! operator's commands, on the fake engine: its values appear in no plan,
//! show, inventory, result, audit row or state file, service_logs redacts
//! them, and editing the file voids the pending plans of that key (and only
//! those). Hermetic: the env directory is the harness's `etc/apps`.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;

use crate::support::harness::*;
use serde_json::{Value, json};

const AGENT: &str = "agent";
const SECRET: &str = "Sup3r-Secret-Value";
const API_KEY: &str = "k-1234567890abcdef";

fn rpc(h: &Harness, request: Value) -> Value {
    h.rpc(AGENT, request.to_string().as_bytes()).to_json()
}

fn env_file(h: &Harness) -> PathBuf {
    h.root.join("etc/apps/web.env")
}

fn write_env(h: &Harness, text: &str) {
    let file = env_file(h);
    std::fs::write(&file, text).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A harness whose `web` entry has configuration and whose deploys need an
/// approval, beside a bare `plain` entry without any.
fn configured() -> Harness {
    let mut h = Harness::new();
    let mut policy = policy_json();
    let reference = policy["catalog"]["web"].clone();
    policy["catalog"]["web"] = json!({"image": reference, "env_file": "/etc/volce-lab/apps/web.env"});
    policy["catalog"]["plain"] = reference;
    policy["approval_required"] = json!(["deploy"]);
    h.write_policy(&policy);
    let dir = h.root.join("etc/apps");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    write_env(&h, &format!("DATABASE_URL=postgres://app:{SECRET}@db/shop\nAPI_KEY={API_KEY}\nDEBUG=1\n"));
    h
}

fn plan(h: &Harness, app: &str, port: u16, image: &str) -> Value {
    let mut parameters = deploy_params(app, port);
    parameters["image"] = json!(image);
    let reply = rpc(h, json!({"operation": "plan", "action": "deploy", "parameters": parameters}));
    assert_eq!(reply["status"], "ok", "{reply}");
    reply
}

fn approve(h: &Harness, reply: &Value) -> Result<String, volce_lab::vocab::Refusal> {
    let id = volce_lab::vocab::PlanId::parse(reply["result"]["id"].as_str().unwrap()).unwrap();
    h.approve(&id, reply["result"]["digest"].as_str().unwrap(), "alice")
}

fn execute(h: &Harness, reply: &Value) -> Value {
    rpc(h, json!({"operation": "execute", "plan_id": reply["result"]["id"]}))
}

fn holds_no_value(what: &str, text: &str) {
    for value in [SECRET, API_KEY] {
        assert!(!text.contains(value), "{what} holds a configured value: {text}");
    }
}

/// Every file under `dir`, as bytes: the state database and its journal included.
fn all_bytes(dir: &std::path::Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(all_bytes(&path));
        } else {
            out.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    out
}

/// Tried: plan, show (text and JSON), approve, execute, inventory, logs and
/// the audit export of a deploy whose entry has configuration; then every
/// byte of the state directory. The plan names the file and its keyed hash;
/// no answer, row or file holds a value; the log's values are redacted.
#[test]
fn configured_values_appear_in_no_plan_show_inventory_result_audit_or_state() {
    let h = configured();
    let planned = plan(&h, "shop", 18001, "web");
    holds_no_value("the plan answer", &planned.to_string());
    let spec = &planned["result"]["payload"]["spec"];
    assert_eq!(spec["env_file"]["path"], json!(env_file(&h)));
    assert_eq!(spec["env_file"]["hmac_sha256"].as_str().map(str::len), Some(64));
    let id = volce_lab::vocab::PlanId::parse(planned["result"]["id"].as_str().unwrap()).unwrap();
    let shown = h.show(&id);
    assert!(shown.contains("configuration: env file"), "{shown}");
    holds_no_value("show", &shown);
    holds_no_value("show --json", &h.show_json(&id));
    holds_no_value("approve", &approve(&h, &planned).unwrap());
    let executed = execute(&h, &planned);
    assert_eq!(executed["result"]["outcome"], "completed", "{executed}");
    holds_no_value("the execute result", &executed.to_string());

    let inventory = rpc(&h, json!({"operation": "inventory"}));
    let catalog = inventory["result"]["offer"]["catalog"].as_array().unwrap();
    let has = |key: &str| catalog.iter().find(|c| c["key"] == key).unwrap()["has_configuration"].clone();
    assert_eq!((has("web"), has("plain")), (json!(true), json!(false)));
    holds_no_value("the inventory", &inventory.to_string());

    // The app prints its configuration: each value of 8 characters or
    // more goes whole (DATABASE_URL's is the whole URL), wherever it
    // stands; `DEBUG=1` is too short to be matched.
    let apps = h.controller().store_for_tests().read(|tx| tx.apps()).unwrap();
    let container = apps["shop"].app_container.clone().unwrap();
    h.engine.edit(|state| {
        let text = format!("t1 connecting to postgres://app:{SECRET}@db/shop\nt2 key {API_KEY} DEBUG=1\n");
        state.logs.insert(container, text.into_bytes());
    });
    let logs = rpc(&h, json!({"operation": "logs", "app": "shop", "container": "app", "tail": 50}));
    assert_eq!(
        logs["result"]["lines"],
        json!(["t1 connecting to [REDACTED]", "t2 key [REDACTED] DEBUG=1"]),
        "{logs}"
    );
    holds_no_value("service_logs", &logs.to_string());

    let audit = volce_lab::host::audit::export(&h.paths, None, true).unwrap();
    holds_no_value("the audit export", &audit);
    for (path, bytes) in all_bytes(&h.paths.state_dir) {
        let text = String::from_utf8_lossy(&bytes);
        holds_no_value(&path.display().to_string(), &text);
    }
}

/// Tried: two approved-or-pending deploys, one of the configured key and one
/// of the bare key, then the env file edited: the configured key's plan can
/// be neither approved nor executed (`policy_changed`, and it ends
/// `invalidated`), the other key's runs; a plan made after the edit runs.
#[test]
fn editing_the_env_file_voids_the_pending_plans_of_its_key_only() {
    let h = configured();
    let configured_plan = plan(&h, "shop", 18001, "web");
    let approved_plan = plan(&h, "shop2", 18002, "web");
    let plain_plan = plan(&h, "blog", 18003, "plain");
    approve(&h, &approved_plan).unwrap();
    write_env(&h, &format!("DATABASE_URL=postgres://app:{SECRET}-rotated@db/shop\nAPI_KEY={API_KEY}\n"));

    let refused = approve(&h, &configured_plan).unwrap_err();
    assert_eq!(refused.code, volce_lab::vocab::Code::PolicyChanged, "{refused:?}");
    assert!(refused.message.contains("web.env changed since this plan was made"), "{}", refused.message);
    let reply = execute(&h, &approved_plan);
    assert_eq!(reply["code"], "policy_changed", "{reply}");
    holds_no_value("the refusal", &reply.to_string());
    let id = volce_lab::vocab::PlanId::parse(approved_plan["result"]["id"].as_str().unwrap()).unwrap();
    let stored = h.controller().load(&id, "root").unwrap();
    assert_eq!(stored.state, volce_lab::vocab::PlanState::Invalidated);
    assert_eq!(stored.outcome.map(|o| o.as_str()), Some("policy_changed"));

    approve(&h, &plain_plan).unwrap();
    assert_eq!(execute(&h, &plain_plan)["result"]["outcome"], "completed");
    let fresh = plan(&h, "shop3", 18004, "web");
    approve(&h, &fresh).unwrap();
    assert_eq!(execute(&h, &fresh)["result"]["outcome"], "completed");
}

/// Tried: the env file made group-readable, then removed: a deploy of its
/// key is refused `env_file_invalid` naming the path and the fix, nothing
/// planned; `service_logs` of an app of that key shows nothing either.
#[test]
fn an_unsafe_or_missing_env_file_refuses_the_plan_and_the_logs() {
    let h = configured();
    let planned = plan(&h, "shop", 18001, "web");
    approve(&h, &planned).unwrap();
    assert_eq!(execute(&h, &planned)["result"]["outcome"], "completed");
    std::fs::set_permissions(env_file(&h), std::fs::Permissions::from_mode(0o640)).unwrap();
    let mut parameters = deploy_params("shop2", 18002);
    parameters["image"] = json!("web");
    let reply = rpc(&h, json!({"operation": "plan", "action": "deploy", "parameters": parameters}));
    assert_eq!(reply["code"], "env_file_invalid", "{reply}");
    assert!(reply["message"].as_str().unwrap().contains("chmod 600"), "{reply}");
    std::fs::remove_file(env_file(&h)).unwrap();
    let logs = rpc(&h, json!({"operation": "logs", "app": "shop", "container": "app", "tail": 50}));
    assert_eq!(logs["code"], "env_file_invalid", "{logs}");
    assert!(logs.get("result").is_none_or(|r| r["lines"].is_null()), "{logs}");
}

/// Tried: rotating a secret. An update to the image the app runs is
/// refused `image_unchanged` while the env file is as the app got it;
/// once the file is edited the same update is accepted, says so in its
/// impact, completes, and records the new file's hash, so a second one is
/// refused again.
#[test]
fn an_update_after_the_env_file_changed_rotates_the_configuration() {
    let h = configured();
    let planned = plan(&h, "shop", 18001, "web");
    approve(&h, &planned).unwrap();
    assert_eq!(execute(&h, &planned)["result"]["outcome"], "completed");
    let recorded =
        || h.controller().store_for_tests().read(|tx| tx.apps()).unwrap()["shop"].configuration.clone();
    let before = recorded().expect("the record keeps the file's hash");
    let update =
        json!({"operation": "plan", "action": "update", "parameters": {"app": "shop", "image": "web"}});
    assert_eq!(rpc(&h, update.clone())["code"], "image_unchanged");

    write_env(&h, &format!("DATABASE_URL=postgres://app:{SECRET}-2@db/shop\nAPI_KEY={API_KEY}\n"));
    let rotated = rpc(&h, update.clone());
    assert_eq!(rotated["status"], "ok", "{rotated}");
    let target = rotated["result"]["impact"]["target"].as_str().unwrap();
    assert!(target.ends_with("with the configuration of its env file as it is now"), "{target}");
    approve(&h, &rotated).unwrap();
    let done = execute(&h, &rotated);
    assert_eq!(done["result"]["outcome"], "completed", "{done}");
    holds_no_value("the update", &format!("{rotated}{done}"));
    let after = recorded().unwrap();
    assert_ne!(after.hmac_sha256, before.hmac_sha256);
    assert_eq!(rpc(&h, update)["code"], "image_unchanged");
}

/// Tried: the env file edited while the app still runs with the old
/// values (no update yet), and the app printing the old one: it is
/// redacted too, known from the app container's environment.
#[test]
fn a_value_the_app_still_runs_with_after_an_edit_is_redacted() {
    let h = configured();
    let planned = plan(&h, "shop", 18001, "web");
    approve(&h, &planned).unwrap();
    assert_eq!(execute(&h, &planned)["result"]["outcome"], "completed");
    let apps = h.controller().store_for_tests().read(|tx| tx.apps()).unwrap();
    let container = apps["shop"].app_container.clone().unwrap();
    let old = format!("postgres://app:{SECRET}@db/shop");
    h.engine.edit(|state| {
        state
            .envs
            .insert(container.clone(), vec![format!("DATABASE_URL={old}"), format!("API_KEY={API_KEY}")]);
        state.logs.insert(container.clone(), format!("t1 still using {old}\n").into_bytes());
    });
    write_env(&h, "DATABASE_URL=postgres://app:another-one@db/shop\n");
    let logs = rpc(&h, json!({"operation": "logs", "app": "shop", "container": "app", "tail": 50}));
    assert_eq!(logs["result"]["lines"], json!(["t1 still using [REDACTED]"]), "{logs}");
}
