//! The bodies of the helper's `ok` answers, held to golden JSON. One world
//! on the fake engine is driven through the rpc pipeline (and `show --json`,
//! which prints the same plan view), and every body is compared with the
//! JSON the helper printed before the bodies were typed
//! (tests/golden/answers/*.json): same field names, same nesting, the same
//! choice between a null and a missing field. Hermetic.
//!
//! What varies from run to run is replaced before the comparison: the
//! temporary directory by `/golden`, every 32-hex string (plan ids) and
//! every 64-hex string (container ids, digests) by a numbered stand-in of
//! the same shape (plan ids in the order they were made, then container ids
//! by app and role, then the rest in order of first appearance), and
//! `duration_ms` by 0. A payload's lists of container ids are sorted by the
//! ids themselves, so they are compared in the order of their stand-ins.
//!
//! After a deliberate change of a body, `VOLCE_LAB_BLESS_GOLDEN=1 cargo test
//! --test hermetic wire_answers` rewrites the files; review their diff like code.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use volce_lab::docker::EngineError;
use volce_lab::exec::{Execution, ExecutionStatus};
use volce_lab::vocab::PlanId;
use volce_lab::wire::answers::execution::ExecutedPlan;
use volce_lab::wire::answers::gateways::GatewayStatus;
use volce_lab::wire::answers::inventory::Inventory;
use volce_lab::wire::answers::log_lines::LogLines;
use volce_lab::wire::answers::plan_view::PlanView;

use crate::support::fake_engine::image;
use crate::support::harness::*;

const AGENT: &str = "agent";

/// What the helper answered, by golden file name.
struct Answers {
    root: PathBuf,
    bodies: BTreeMap<&'static str, Value>,
    /// Plan ids as they were made, then the recorded container ids.
    ids: Vec<String>,
}

fn ok(h: &Harness, request: Value) -> Value {
    let reply = h.rpc(AGENT, request.to_string().as_bytes()).to_json();
    assert_eq!(reply["status"], "ok", "{reply}");
    reply["result"].clone()
}

fn prepare(h: &Harness, ids: &mut Vec<String>, action: &str, parameters: Value) -> (PlanId, Value) {
    let body = ok(h, json!({"operation": "plan", "action": action, "parameters": parameters}));
    ids.push(body["id"].as_str().unwrap().to_owned());
    (PlanId::parse(body["id"].as_str().unwrap()).unwrap(), body)
}

fn execute(h: &Harness, id: &PlanId) -> Value {
    ok(h, json!({"operation": "execute", "plan_id": id}))
}

fn show(h: &Harness, id: &PlanId) -> Value {
    serde_json::from_str(&h.show_json(id)).unwrap()
}

fn digest_of(plan: &Value) -> String {
    plan["digest"].as_str().unwrap().to_owned()
}

/// One world with every kind of app, plan and answer in it.
fn answers() -> Answers {
    let mut h = Harness::new();
    let mut policy = policy_json();
    policy["max_apps"] = json!(8);
    h.write_policy(&policy);
    let mut bodies = BTreeMap::new();
    let mut ids = Vec::new();
    let reference = policy_json()["catalog"]["web"].as_str().unwrap().to_owned();
    h.engine.edit(|s| {
        s.local_images.insert(reference.clone(), image('e'));
    });

    // demo: deployed and running; its gateway answers.
    let (demo, plan) = prepare(&h, &mut ids, "deploy", deploy_params("demo", 18001));
    bodies.insert("plan", plan);
    bodies.insert("execute", execute(&h, &demo));
    // quiet: running, its gateway does not answer; gone: a container
    // removed by hand; paused: stopped by a completed stop plan.
    for (app, port) in [("quiet", 18002), ("gone", 18003), ("paused", 18004)] {
        let (id, _) = prepare(&h, &mut ids, "deploy", deploy_params(app, port));
        execute(&h, &id);
    }
    let (stop, plan) = prepare(&h, &mut ids, "stop", json!({"app": "paused"}));
    h.approve(&stop, &digest_of(&plan), "alice").unwrap();
    execute(&h, &stop);
    bodies.insert("plan_completed", show(&h, &stop));
    h.engine.edit(|s| {
        s.silent_ports.push(18002);
        s.snapshot.containers.retain(|c| c.name != "vl-gone-app");
    });

    // A pending plan the operator rejects, and one left pending.
    let (rejected, _) = prepare(&h, &mut ids, "stop", json!({"app": "quiet"}));
    h.reject(rejected.as_str(), "alice").unwrap();
    bodies.insert("plan_rejected", show(&h, &rejected));
    prepare(&h, &mut ids, "stop", json!({"app": "demo"}));

    // The log of demo's app container.
    let apps = h.controller().store_for_tests().read(|tx| tx.apps()).unwrap();
    for record in apps.values() {
        ids.extend(record.app_container.iter().chain(&record.gateway_container).map(|c| c.to_string()));
    }
    let container = apps["demo"].app_container.clone().unwrap();
    h.engine.edit(|s| {
        s.logs.insert(container, b"t1 \x1b[31mstarted\x1b[0m password=hunter2\nt2 GET / 200\n".to_vec());
    });
    let logs =
        json!({"operation": "logs", "app": "demo", "container": "app", "tail": 50, "since_minutes": 30});
    bodies.insert("logs", ok(&h, logs));

    // An nginx_config whose engine call fails: the plan needs inspection.
    // A minute later, so the open plans have one order (newest first).
    h.clock.advance(60);
    let (failed, _) =
        prepare(&h, &mut ids, "nginx_config", json!({"app": "quiet", "server_name": "new.example.com"}));
    h.engine.edit(|s| {
        s.fail_next = Some(EngineError::Call {
            step: "reload nginx",
            execution: Execution::not_started(ExecutionStatus::NonzeroExit),
        })
    });
    let reply = h.rpc(AGENT, json!({"operation": "execute", "plan_id": failed}).to_string().as_bytes());
    assert_eq!(reply.to_json()["status"], "needs_inspection");

    bodies.insert("gateway_status", ok(&h, json!({"operation": "gateway_status"})));
    bodies.insert("inventory", ok(&h, json!({"operation": "inventory"})));
    h.resolve(&failed, "alice").unwrap();
    bodies.insert("plan_inspected", show(&h, &failed));
    Answers { root: h.root.clone(), bodies, ids }
}

/// The run-to-run values replaced by stand-ins (see the module header).
struct Stable {
    root: String,
    seen: BTreeMap<String, String>,
}

impl Stable {
    fn value(&mut self, value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.text(text)),
            Value::Array(items) => Value::Array(items.iter().map(|item| self.value(item)).collect()),
            Value::Object(map) => {
                // A payload (it has a `kind`) lists container ids sorted.
                let payload = map.contains_key("kind");
                let mut stable = serde_json::Map::new();
                for (key, item) in map {
                    let mut item = if key == "duration_ms" { json!(0) } else { self.value(item) };
                    if let (true, Value::Array(ids)) = (payload, &mut item)
                        && ids.iter().all(|id| id.as_str().is_some_and(|t| t.len() == 64))
                    {
                        ids.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                    }
                    stable.insert(key.clone(), item);
                }
                Value::Object(stable)
            }
            other => other.clone(),
        }
    }

    fn text(&mut self, text: &str) -> String {
        let hex = |n: usize| {
            text.len() == n && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if hex(32) || hex(64) {
            let next = self.seen.len() + 1;
            let width = text.len();
            return self.seen.entry(text.to_owned()).or_insert_with(|| format!("{next:0width$x}")).clone();
        }
        // A message may name a container by its short id (drift does).
        let mut text = text.replace(&self.root, "/golden");
        for (id, stand_in) in self.seen.iter().filter(|(id, _)| id.len() == 64) {
            text = text.replace(&id[..12], &stand_in[..12]);
        }
        text
    }
}

fn golden_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/answers").join(format!("{name}.json"))
}

/// The world's bodies as the helper printed them, and with stand-ins.
struct Bodies {
    raw: BTreeMap<&'static str, Value>,
    stable: BTreeMap<&'static str, Value>,
}

/// The one world, made once for every test here.
fn bodies() -> &'static Bodies {
    static BODIES: OnceLock<Bodies> = OnceLock::new();
    BODIES.get_or_init(|| {
        let answers = answers();
        let mut stable = Stable { root: answers.root.display().to_string(), seen: BTreeMap::new() };
        for id in &answers.ids {
            stable.text(id);
        }
        // In name order, so the stand-ins are numbered the same every run.
        let stable = answers.bodies.iter().map(|(name, body)| (*name, stable.value(body))).collect();
        Bodies { raw: answers.bodies, stable }
    })
}

/// The body called `name` is its golden file (or, blessing, becomes it).
fn golden(name: &str) {
    let stable = &bodies().stable[name];
    let path = golden_path(name);
    if std::env::var_os("VOLCE_LAB_BLESS_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, serde_json::to_string_pretty(stable).unwrap() + "\n").unwrap();
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let golden: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        stable,
        &golden,
        "{name}: the body differs from {}:\n{}",
        path.display(),
        serde_json::to_string_pretty(stable).unwrap()
    );
}

/// The body called `name`, as the helper built it (typed) and printed it,
/// is its golden JSON, and read back through its wire type it is the same
/// value, which writes the same JSON again.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(name: &str) {
    golden(name);
    let printed = &bodies().raw[name];
    let typed: T = serde_json::from_value(printed.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let again = serde_json::to_value(&typed).unwrap();
    assert_eq!(&again, printed, "{name}: the wire type writes other JSON");
    assert_eq!(serde_json::from_value::<T>(again).unwrap(), typed, "{name}");
}

#[test]
fn gateway_status_round_trips_as_golden() {
    round_trip::<GatewayStatus>("gateway_status");
}

#[test]
fn inventory_round_trips_as_golden() {
    round_trip::<Inventory>("inventory");
}

#[test]
fn plan_views_round_trip_as_golden() {
    for name in ["plan", "plan_completed", "plan_rejected", "plan_inspected"] {
        round_trip::<PlanView>(name);
    }
}

#[test]
fn execute_round_trips_as_golden() {
    round_trip::<ExecutedPlan>("execute");
}

#[test]
fn logs_round_trip_as_golden() {
    round_trip::<LogLines>("logs");
}

/// No body is left out of the tests above.
#[test]
fn every_body_has_a_golden_file() {
    let names: Vec<&str> = bodies().raw.keys().copied().collect();
    assert_eq!(
        names,
        [
            "execute",
            "gateway_status",
            "inventory",
            "logs",
            "plan",
            "plan_completed",
            "plan_inspected",
            "plan_rejected"
        ]
    );
}
