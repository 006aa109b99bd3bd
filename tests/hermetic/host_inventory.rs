//! What `service_inventory` and web_status's `gateway_status` say, on a
//! fake engine: the managed apps held against the engine (drift), the
//! operator's offer, the open plans, foreign objects as counts only, and a
//! reply that stays small however busy the engine is. Hermetic.

use std::collections::BTreeMap;

use crate::support::fake_engine::*;
use crate::support::harness::*;
use serde_json::{Value, json};
use volce_lab::host::Executed;
use volce_lab::vocab::{ContainerId, ImageId, LABEL_APP, LABEL_ROLE, PublishedPort};
use volce_lab::wire::answers::app_state::{DriftReason, EngineState};
use volce_lab::wire::answers::gateways::{Gateway, GatewayStatus};

const AGENT: &str = "agent";
/// The workstation's reply limit (`volce_lab::mcp::rpc::RPC_LIMITS`).
const REPLY_LIMIT: usize = 128 * 1024;

fn deploy(h: &Harness, app: &str, port: u16) {
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params(app, port), AGENT).unwrap();
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
}

fn stop(h: &Harness, app: &str) {
    let mut c = h.controller();
    let plan = c.prepare("stop", &json!({"app": app}), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
}

fn numbered_id(n: usize) -> ContainerId {
    ContainerId::parse(&format!("{n:064x}")).unwrap()
}

/// The inventory as the helper prints it.
fn inventory_json(c: &mut TestController) -> Value {
    serde_json::to_value(c.inventory(AGENT).unwrap()).unwrap()
}

fn app<'a>(inventory: &'a Value, name: &str) -> &'a Value {
    inventory["apps"].as_array().unwrap().iter().find(|a| a["app"] == name).unwrap()
}

fn gateway<'a>(status: &'a GatewayStatus, name: &str) -> &'a Gateway {
    status.gateways.iter().find(|g| g.app == name).unwrap()
}

/// 10,000 foreign containers, each with a name, an image, a published port
/// and labels (ours among them, with values no app name may have): the
/// reply names none of it and stays far under the workstation's limit.
#[test]
fn ten_thousand_foreign_containers_are_counted_never_described() {
    let h = Harness::new();
    deploy(&h, "demo", 18001);
    h.engine.edit(|s| {
        for n in 0..10_000 {
            let mut labels = BTreeMap::new();
            // A label value outside the app-name grammar, and one inside it
            // that no record of ours has.
            labels.insert(
                LABEL_APP.to_owned(),
                if n % 2 == 0 { format!("EVIL<{n}>") } else { format!("ghost{n}") },
            );
            labels.insert(LABEL_ROLE.to_owned(), "gateway".to_owned());
            let mut c = foreign_container(
                numbered_id(n + 1),
                &format!("secret-name-{n}"),
                ImageId::parse(&format!("sha256:{:064x}", n + 7)).unwrap(),
                "running",
            );
            c.labels = labels;
            c.ports = vec![PublishedPort {
                host_ip: "0.0.0.0".into(),
                host_port: 18500,
                container_port: 1,
                protocol: "tcp".into(),
            }];
            s.snapshot.containers.push(c);
            s.snapshot.images.push(c_image(n));
        }
        s.snapshot = std::mem::take(&mut s.snapshot).normalize();
    });
    let reply = h.rpc(AGENT, br#"{"operation":"inventory"}"#);
    let line = reply.to_line();
    assert!(line.len() < REPLY_LIMIT / 8, "inventory is {} bytes", line.len());
    for leaked in ["secret-name", "EVIL", "ghost", "prod", &format!("{:064x}", 8)] {
        assert!(!line.contains(leaked), "{leaked} leaked into the inventory");
    }
    let inventory = reply.to_json()["result"].clone();
    assert_eq!(inventory["foreign"]["containers"], 10_001, "prod and the 10,000");
    assert_eq!(inventory["offer"]["ports"]["taken_by_others"], 1, "18500, counted, not named");
    assert_eq!(app(&inventory, "demo")["state"], "running");
    // Gateway status speaks only of our records too.
    let status = h.rpc(AGENT, br#"{"operation":"gateway_status"}"#).to_line();
    assert!(status.len() < 4096 && !status.contains("EVIL") && !status.contains("ghost"), "{status}");
}

fn c_image(n: usize) -> ImageId {
    ImageId::parse(&format!("sha256:{:064x}", n + 7)).unwrap()
}

#[test]
fn the_offer_says_what_may_be_deployed_where_and_how_much() {
    let h = Harness::new();
    let reference = policy_json()["catalog"]["web"].as_str().unwrap().to_owned();
    h.engine.edit(|s| {
        s.local_images.insert(reference.clone(), image('e'));
    });
    deploy(&h, "demo", 18001);
    let inventory = inventory_json(&mut h.controller());
    let offer = &inventory["offer"];
    assert_eq!(
        offer["catalog"],
        json!([{"key": "web", "reference": reference, "present": true, "image_id": image('e'),
                "container_port": null, "health_path": "/", "has_configuration": false, "has_data": false}])
    );
    assert_eq!(offer["gateway_image"]["present"], false);
    assert_eq!(offer["gateway_image"]["image_id"], Value::Null);
    let ports = &offer["ports"];
    assert_eq!((ports["first"].clone(), ports["last"].clone()), (json!(18000), json!(18999)));
    // The harness also holds a stopped record `legacy` on 18990.
    assert_eq!(ports["used"], json!([{"port": 18001, "app": "demo"}, {"port": 18990, "app": "legacy"}]));
    assert_eq!(ports["free_count"], 998);
    assert_eq!(ports["free"], json!([[18000, 18000], [18002, 18989], [18991, 18999]]));
    assert_eq!(ports["free_ranges_truncated"], false);
    assert_eq!(offer["quota"], json!({"used": 2, "max": 4}));
    assert_eq!(offer["plan_ttl_seconds"], 600);
    assert_eq!(
        offer["approval_required"],
        json!([
            "stop",
            "remove_image",
            "remove_app",
            "start",
            "update",
            "restart",
            "rollback",
            "run_task",
            "restore",
            "expose",
            "unexpose",
            "update_accessory",
            "rotate_credential"
        ])
    );
    assert_eq!(
        offer["actions"],
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
    let demo = app(&inventory, "demo");
    assert_eq!(demo["server_name"], "demo.example.com");
    assert_eq!(demo["host_port"], 18001);
    assert_eq!(demo["image"]["key"], "web");
    assert_eq!(demo["image"]["digest"], format!("sha256:{}", "a".repeat(64)));
    let roles: Vec<&Value> = demo["containers"].as_array().unwrap().iter().map(|c| &c["role"]).collect();
    assert_eq!(roles, [&json!("app"), &json!("gateway")]);
    assert_eq!(demo["last_plan"]["action"], "deploy");
    assert_eq!(demo["last_plan"]["state"], "completed");
    assert_eq!(demo["last_plan"]["requested_at"], "2027-01-15T08:00:00Z");
    assert_eq!(inventory["generated_at"], "2027-01-15T08:00:00Z");
}

/// Ports scattered over the range give many free ranges: only the first 16
/// are listed, and the count still counts them all.
#[test]
fn free_port_ranges_are_bounded() {
    let h = Harness::new();
    h.engine.edit(|s| {
        for n in 0..100u16 {
            let mut c = foreign_container(numbered_id(usize::from(n) + 1), "x", image('9'), "running");
            c.ports = vec![PublishedPort {
                host_ip: "127.0.0.1".into(),
                host_port: 18000 + 2 * n,
                container_port: 80,
                protocol: "tcp".into(),
            }];
            s.snapshot.containers.push(c);
        }
    });
    let ports = inventory_json(&mut h.controller())["offer"]["ports"].clone();
    assert_eq!(ports["free"].as_array().unwrap().len(), 16);
    assert_eq!(ports["free_ranges_truncated"], true);
    assert_eq!(ports["free_count"], 899, "1,000 less 100 taken less legacy's");
    assert_eq!(ports["taken_by_others"], 100);
}

#[test]
fn open_plans_are_listed_with_rfc3339_times_and_their_approval() {
    let h = Harness::new();
    deploy(&h, "demo", 18001);
    let mut c = h.controller();
    let plan = c.prepare("stop", &json!({"app": "demo"}), AGENT).unwrap();
    let listed = |c: &mut TestController| inventory_json(c)["plans"].clone();
    assert_eq!(
        listed(&mut c),
        json!([{
            "plan_id": plan.plan.id, "action": "stop", "app": "demo", "state": "pending", "requester": AGENT,
            "requested_at": "2027-01-15T08:00:00Z", "expires_at": "2027-01-15T08:10:00Z",
            "requires_approval": true, "approved": false,
        }])
    );
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    assert_eq!(listed(&mut c)[0]["approved"], true);
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    assert_eq!(listed(&mut c), json!([]), "a completed plan is no longer open");
}

#[test]
fn a_stopped_app_started_by_hand_is_drift_with_the_fix() {
    let h = Harness::new();
    deploy(&h, "demo", 18001);
    stop(&h, "demo");
    let mut c = h.controller();
    assert_eq!(app(&inventory_json(&mut c), "demo")["state"], "stopped");
    let status = c.gateway_status().unwrap();
    assert_eq!(gateway(&status, "demo").state, EngineState::Stopped.into());
    assert!(gateway(&status, "demo").stopped_on_purpose, "its last plan was a completed stop");
    // An operator runs `docker start` on the gateway.
    h.engine.edit(|s| {
        s.snapshot.containers.iter_mut().find(|c| c.name == "vl-demo-gateway").unwrap().state =
            "running".into();
    });
    let demo = app(&inventory_json(&mut c), "demo").clone();
    assert_eq!(demo["state"], "drifted");
    assert_eq!(demo["recorded_state"], "stopped");
    assert_eq!(demo["drift"]["reason"], "record_stopped_but_running");
    assert!(demo["drift"]["fix"].as_str().unwrap().contains("stop plan"));
    let status = c.gateway_status().unwrap();
    assert_eq!(gateway(&status, "demo").state, EngineState::Drifted.into());
    assert!(!gateway(&status, "demo").stopped_on_purpose);
}

#[test]
fn removed_containers_and_a_silent_gateway_are_told_apart() {
    let h = Harness::new();
    deploy(&h, "demo", 18001);
    deploy(&h, "shop", 18002);
    h.engine.edit(|s| {
        s.silent_ports.push(18002);
        s.snapshot.containers.retain(|c| c.name != "vl-demo-app");
    });
    let mut c = h.controller();
    let inventory = inventory_json(&mut c);
    assert_eq!(app(&inventory, "demo")["drift"]["reason"], "containers_missing");
    assert_eq!(app(&inventory, "demo")["containers"][0]["state"], "missing");
    assert_eq!(app(&inventory, "shop")["state"], "running", "the engine runs it");
    let status = c.gateway_status().unwrap();
    let drift = gateway(&status, "demo").drift.clone().unwrap();
    assert_eq!(drift.reason, DriftReason::ContainersMissing.into());
    assert_eq!(gateway(&status, "shop").answers, Some(false));
    assert_eq!(gateway(&status, "shop").state, EngineState::Running.into());
}

/// Tried: an object entry beside a bare one: the offer states its port and
/// health path (what the agent needs to plan without guessing), and the
/// bare one says the agent names the port.
#[test]
fn the_offer_says_each_entrys_port_and_health_path() {
    let mut h = Harness::new();
    let mut policy = policy_json();
    let reference = policy["catalog"]["web"].clone();
    policy["catalog"]["api"] = json!({"image": reference, "container_port": 3000, "health_path": "/healthz"});
    h.write_policy(&policy);
    let inventory = inventory_json(&mut h.controller());
    let catalog = &inventory["offer"]["catalog"];
    assert_eq!(catalog[0]["key"], "api");
    assert_eq!(
        (catalog[0]["container_port"].clone(), catalog[0]["health_path"].clone()),
        (json!(3000), json!("/healthz"))
    );
    assert_eq!(
        (catalog[1]["key"].clone(), catalog[1]["container_port"].clone()),
        (json!("web"), Value::Null)
    );
    assert_eq!(catalog[1]["health_path"], "/");
}

/// An app exposed through the HTTPS edge with a certificate from ACME:
/// the inventory names each exposed name with its source and what the
/// edge's copy of its certificate says (issuer, expiry, days left), and the
/// last failed ACME order of one of its names; gateway_status asks each
/// exposed name through the edge, and one whose TLS check fails makes
/// web_status unhealthy with that name. Tried: a certificate copy the edge
/// cannot read (null, never a made-up issuer), a failed renewal's
/// rate limit, a name whose TLS check fails.
#[test]
fn an_exposed_app_shows_its_certificates_its_last_acme_error_and_its_https_answers() {
    use volce_lab::vocab::{
        AcmeError, AcmeFailure, CertFingerprint, CertName, CertSerial, CertificateFacts, EdgeNameFacts,
        HttpsAnswer, IssuerName,
    };
    let mut h = Harness::new();
    let mut policy = policy_json();
    policy["edge"] = json!({"http": "127.0.0.1:24080", "https": "127.0.0.1:24443",
        "acme": {"directory": "https://acme.example/dir", "contact": "ops@example.com"}});
    h.write_policy(&policy);
    deploy(&h, "demo", 18001);
    h.engine.edit(|s| {
        let mut edge = foreign_container(container_id('e'), "/vl_edge", c_image(9), "running");
        edge.labels.insert(LABEL_ROLE.to_owned(), "edge".to_owned());
        s.snapshot.containers.push(edge);
    });
    let mut c = h.controller();
    let plan = c.prepare("expose", &json!({"app": "demo"}), AGENT).unwrap();
    c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));

    let now = h.clock.0.load(std::sync::atomic::Ordering::SeqCst);
    let facts = CertificateFacts {
        names: vec![CertName::parse("demo.example.com").unwrap()],
        not_before: now - 86_400,
        not_after: now + 20 * 86_400 + 3_600,
        issuer: IssuerName::parse("Pebble Intermediate CA 0c4b2a").unwrap(),
        serial: CertSerial::parse("1a2b").unwrap(),
        sha256: CertFingerprint::parse(&"c".repeat(64)).unwrap(),
    };
    let failure = AcmeFailure { at: now - 60, error: AcmeError::RateLimited };
    h.engine.edit(|s| {
        let known = EdgeNameFacts { certificate: Some(facts.clone()), acme_failure: Some(failure.clone()) };
        s.edge_names.insert("demo.example.com".into(), known);
    });
    let inventory = inventory_json(&mut c);
    let demo = app(&inventory, "demo");
    assert_eq!(
        demo["exposed"],
        json!([{"name": "demo.example.com", "source": "acme", "certificate": {
            "issuer": "Pebble Intermediate CA 0c4b2a",
            "expires_at": volce_lab::text::rfc3339_seconds(now + 20 * 86_400 + 3_600),
            "days_left": 20}}])
    );
    assert_eq!(demo["acme_error"]["name"], "demo.example.com");
    assert_eq!(demo["acme_error"]["code"], "rate_limited");
    let message = demo["acme_error"]["message"].as_str().unwrap();
    assert!(message.contains("rate limit") && message.contains("try again later"), "{message}");

    // web_status's answer carries the same certificate and ACME error.
    let status = c.gateway_status().unwrap();
    let seen = gateway(&status, "demo");
    assert_eq!(seen.acme_error.as_ref().map(|e| e.code.as_str()), Some("rate_limited"));
    assert_eq!(seen.https[0].certificate.as_ref().map(|c| c.days_left), Some(20));
    assert!(volce_lab::inspect::healthy(seen), "an old ACME failure does not fail a name that answers");

    h.engine.edit(|s| s.edge_names.clear());
    let inventory = inventory_json(&mut c);
    assert_eq!(app(&inventory, "demo")["exposed"][0]["certificate"], Value::Null);
    assert!(app(&inventory, "demo").get("acme_error").is_none());

    let status = c.gateway_status().unwrap();
    let https = &gateway(&status, "demo").https;
    assert_eq!(https.len(), 1);
    assert_eq!(https[0].answer, HttpsAnswer::Ok.into());
    assert!(volce_lab::inspect::healthy(gateway(&status, "demo")), "{status:?}");
    h.engine.edit(|s| {
        s.edge_answers.insert("demo.example.com".into(), HttpsAnswer::TlsFailed);
    });
    let status = c.gateway_status().unwrap();
    assert!(!volce_lab::inspect::healthy(gateway(&status, "demo")));
    let sentence = volce_lab::inspect::https_sentence_of(&status.gateways).unwrap();
    assert!(sentence.contains("demo.example.com (tls_failed)"), "{sentence}");
    assert!(sentence.contains("volce-lab-host doctor"), "{sentence}");
}
