//! `also_server_names` (issue 25) end to end on the fake engine: a deploy
//! with several names, what the record, the inventory, `show` and `list`
//! say, nginx_config replacing the list, update, rollback, stop, start and
//! restart keeping it, and each wrong list refused with nothing stored.
//! Hermetic: no root, no Docker.

use crate::support::harness::*;
use serde_json::{Value, json};
use volce_lab::control::app_record::AppRecord;
use volce_lab::host::Executed;
use volce_lab::vocab::{Code, ServerName};

const AGENT: &str = "agent";
const LINE: &str = "server_name demo.example.com www.demo.example.com;\n";

fn harness() -> Harness {
    let mut h = Harness::new();
    let mut policy = policy_json();
    policy["catalog"]["web2"] = json!(format!("127.0.0.1:15000/volce-lab/web2@sha256:{}", "d".repeat(64)));
    h.write_policy(&policy);
    h
}

fn completed(h: &Harness, action: &str, parameters: Value) {
    let mut c = h.controller();
    let plan = c.prepare(action, &parameters, AGENT).unwrap();
    if plan.plan.requires_approval {
        c.approve(&plan.plan.id, &plan.plan.digest, "alice").unwrap();
    }
    let executed = c.execute(&plan.plan.id, AGENT).unwrap();
    assert!(matches!(executed, Executed::Completed(_)), "{action}: {executed:?}");
}

fn record(h: &Harness) -> AppRecord {
    h.controller().store_for_tests().read(|tx| tx.apps()).unwrap()["demo"].clone()
}

fn also(record: &AppRecord) -> Vec<&str> {
    record.also_server_names.iter().map(ServerName::as_str).collect()
}

fn two_names() -> Value {
    let mut params = deploy_params("demo", 18001);
    params["also_server_names"] = json!(["www.demo.example.com"]);
    params
}

/// Tried: each wrong list on deploy, and on nginx_config of a deployed
/// app: refused with its code, no plan stored, the engine not called.
#[test]
fn a_wrong_list_is_refused_and_nothing_is_stored() {
    let h = harness();
    let plans = || h.controller().inventory(AGENT).unwrap().plans.len();
    for (names, code) in [
        (json!(["Www.demo"]), Code::InvalidServerName),
        (json!(["demo.example.com"]), Code::InvalidServerName),
        (json!(["a.example", "a.example"]), Code::InvalidServerName),
        (json!(["a.example", "b.example", "c.example", "d.example"]), Code::InvalidServerName),
        (json!({"www": true}), Code::InvalidParameters),
    ] {
        let mut params = deploy_params("demo", 18001);
        params["also_server_names"] = names.clone();
        let refused = h.controller().prepare("deploy", &params, AGENT).expect_err("refused");
        assert_eq!(refused.code, code, "{names}");
        assert_eq!(plans(), 0, "{names}");
    }
    assert!(h.engine.mutations().is_empty());
    completed(&h, "deploy", deploy_params("demo", 18001));
    let (stored, calls) = (plans(), h.engine.mutations().len());
    let params =
        json!({"app": "demo", "server_name": "new.example.com", "also_server_names": ["new.example.com"]});
    let refused = h.controller().prepare("nginx_config", &params, AGENT).expect_err("refused");
    assert_eq!(refused.code, Code::InvalidServerName);
    assert_eq!((plans(), h.engine.mutations().len()), (stored, calls));
    assert!(also(&record(&h)).is_empty());
}

#[test]
fn a_deploy_with_two_names_records_shows_and_lists_both() {
    let h = harness();
    let plan = h.controller().prepare("deploy", &two_names(), AGENT).unwrap();
    let show = h.show(&plan.plan.id);
    assert!(show.contains("for demo.example.com (also www.demo.example.com)"), "{show}");
    assert!(show.contains(LINE.trim_end()), "the rendered config is shown: {show}");
    h.controller().execute(&plan.plan.id, AGENT).unwrap();
    let after = record(&h);
    assert_eq!(after.server_name.as_str(), "demo.example.com");
    assert_eq!(also(&after), ["www.demo.example.com"]);
    assert!(after.nginx_config.contains(LINE), "{}", after.nginx_config);
    let inventory = serde_json::to_value(h.controller().inventory(AGENT).unwrap()).unwrap();
    assert_eq!(inventory["apps"][0]["server_name"], "demo.example.com");
    assert_eq!(inventory["apps"][0]["also_server_names"], json!(["www.demo.example.com"]));
    assert!(h.list(false).contains("demo.example.com (also www.demo.example.com)"));
    let listed: Value = serde_json::from_str(&h.list(true)).unwrap();
    assert_eq!(listed["apps"][0]["also_server_names"], json!(["www.demo.example.com"]));
}

/// Tried: update, rollback, stop, start and restart of an app that serves
/// two names, then an nginx_config with another list and one without.
#[test]
fn every_later_plan_keeps_the_names_and_nginx_config_sets_them_anew() {
    let h = harness();
    completed(&h, "deploy", two_names());
    for (action, parameters) in [
        ("update", json!({"app": "demo", "image": "web2"})),
        ("rollback", json!({"app": "demo"})),
        ("stop", json!({"app": "demo"})),
        ("start", json!({"app": "demo"})),
        ("restart", json!({"app": "demo"})),
    ] {
        completed(&h, action, parameters);
        let after = record(&h);
        assert_eq!(also(&after), ["www.demo.example.com"], "{action}");
        assert!(after.nginx_config.contains(LINE), "{action}: {}", after.nginx_config);
    }
    let params = json!({"app": "demo", "server_name": "new.example.com",
                        "also_server_names": ["demo.example.com", "www.new.example.com"]});
    let plan = h.controller().prepare("nginx_config", &params, AGENT).unwrap();
    let show = h.show(&plan.plan.id);
    assert!(show.contains("Before   server_name demo.example.com (also www.demo.example.com)"), "{show}");
    assert!(
        show.contains("After    server_name new.example.com (also demo.example.com, www.new.example.com)")
    );
    h.controller().execute(&plan.plan.id, AGENT).unwrap();
    let after = record(&h);
    assert_eq!(
        (after.server_name.as_str(), also(&after)),
        ("new.example.com", vec!["demo.example.com", "www.new.example.com"])
    );
    assert!(
        after.nginx_config.contains("server_name new.example.com demo.example.com www.new.example.com;\n")
    );
    completed(&h, "nginx_config", json!({"app": "demo", "server_name": "new.example.com"}));
    let after = record(&h);
    assert!(also(&after).is_empty());
    assert!(after.nginx_config.contains("server_name new.example.com;\n"));
    let inventory = serde_json::to_value(h.controller().inventory(AGENT).unwrap()).unwrap();
    assert!(inventory["apps"][0].get("also_server_names").is_none(), "absent with one name");
}
