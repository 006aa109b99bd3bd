//! Benchmark (issue 43): what a rollout costs next to the single updates it
//! replaces. On the three test servers of scripts/fleet-servers (each with
//! its own sshd and Docker engine, on this machine's cores), through
//! `volce-lab mcp-serve` over stdio, an app is updated back and forth:
//!
//! - three single updates, one server after another (`service_plan` then
//!   `service_execute` on each): their summed time;
//! - one rollout over the three, batch 1 (one server at a time);
//! - one rollout over the three, batch 3 (all at once).
//!
//! Each is timed from its first `service_plan` to its last answer. The
//! wait between batches is 0 s here (it is a pause the user chooses, not a
//! cost), and the servers' policies are set for the bench so that update
//! needs no approval: an operator's signature is their time, not the
//! machine's (verifying one is a few ms per server).
//!
//! Targets: batch 1 within 1.25x the three single updates (the rollout adds
//! little beyond its servers' own updates), batch 3 below 0.8x of them (its
//! servers update at once). A missed target prints FAILED.
//!
//! It writes only to the fleet test servers (their policies, restored as
//! scripts/fleet-servers writes them, and one app, removed): run as root
//! after scripts/e2e-setup and `scripts/fleet-servers up`;
//! `cargo bench --bench rollout [-- ROUNDS]` (default 3). Prints `skipped`
//! with the reason when the servers are not up.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stats::{ms, p50};
use stdio_client::StdioClient;

#[path = "support/stats.rs"]
mod stats;
#[path = "support/stdio_client.rs"]
mod stdio_client;

const FLEET: &str = "/var/tmp/volce-lab-fleet";
const TARGETS: [&str; 3] = ["vl-fleet-1", "vl-fleet-2", "vl-fleet-3"];
const APP: &str = "rollbench";

/// Each server's policy: the test policy with signed approvals, as
/// scripts/fleet-servers writes it, and `approval_required` when given.
fn write_policies(approval_required: Option<Value>) {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let base = std::fs::read("/var/tmp/volce-lab-test/policy.json").expect("scripts/test-images");
    for k in 1..=TARGETS.len() {
        let mut policy: Value = serde_json::from_slice(&base).unwrap();
        policy["signed_approvals"] = json!({"software_keys": true});
        if let Some(list) = &approval_required {
            policy["approval_required"] = list.clone();
        }
        let path = Path::new(FLEET).join(format!("s{k}/etc/policy.json"));
        let temp = path.with_extension("json.bench");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temp)
            .unwrap();
        file.write_all(&serde_json::to_vec_pretty(&policy).unwrap()).unwrap();
        std::fs::rename(&temp, &path).unwrap();
    }
}

/// The policies as scripts/fleet-servers writes them, whatever happens.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        write_policies(None);
    }
}

fn ok(answer: &Value) -> &Value {
    assert_eq!(answer["status"], "ok", "{answer}");
    answer
}

/// `service_plan` then `service_execute` of one plan on `target`.
fn single(client: &mut StdioClient, target: &str, action: &str, parameters: Value) {
    let planned =
        client.call("service_plan", json!({"target": target, "action": action, "parameters": parameters}));
    let plan_id = ok(&planned)["plan_id"].clone();
    ok(&client.call("service_execute", json!({"target": target, "plan_id": plan_id})));
}

/// A rollout over the three servers: planned, then executed.
fn rollout(client: &mut StdioClient, action: &str, parameters: Value, batch_size: usize) {
    let planned = client.call(
        "service_plan",
        json!({"targets": TARGETS, "action": action, "parameters": parameters,
            "batch_size": batch_size, "health_wait_seconds": 0}),
    );
    let rollout_id = ok(&planned)["result"]["rollout_id"].clone();
    ok(&client.call("service_execute", json!({"rollout": rollout_id})));
}

fn timed(run: impl FnOnce()) -> Duration {
    let started = Instant::now();
    run();
    started.elapsed()
}

fn verdict(what: &str, value: f64, limit: f64) -> bool {
    let met = value <= limit;
    println!("{what}: {value:.2}x (target <= {limit}x) {}", if met { "ok" } else { "FAILED" });
    met
}

fn main() {
    let rounds: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(3);
    if !Path::new(FLEET).join("ready").exists() {
        println!(
            "skipped: the fleet test servers are not up (scripts/e2e-setup, then scripts/fleet-servers up)"
        );
        return;
    }
    let _restore = Restore;
    write_policies(Some(json!([])));
    let state = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_volce-lab"));
    command
        .arg("mcp-serve")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", state.path())
        .env("XDG_RUNTIME_DIR", state.path())
        .env("XDG_STATE_HOME", state.path().join("state"))
        .env("VOLCE_LAB_SSH_CONFIG", format!("{FLEET}/client/ssh_config"))
        .env("VOLCE_LAB_TARGETS", format!("{FLEET}/client/targets.toml"));
    let mut client = StdioClient::start(command, "rollout-bench");
    let identity = client.call("cloud_check", json!({"check": "identity", "targets": TARGETS}));
    assert_eq!(identity["summary"]["failed"], 0, "{identity}");
    // An app left by an interrupted run goes first.
    for target in TARGETS {
        let inventory = client.call("service_inventory", json!({"target": target}));
        let apps = ok(&inventory)["result"]["apps"].as_array().cloned().unwrap_or_default();
        if apps.iter().any(|a| a["app"] == APP) {
            single(&mut client, target, "remove_app", json!({"app": APP}));
        }
    }
    let deploy = json!({"app": APP, "image": "web", "host_port": 18200, "container_port": 8080,
        "server_name": "rollbench.fleet.test"});
    rollout(&mut client, "deploy", deploy, 3);

    // Each update changes the image: web2, web, web2...
    let images = ["web", "web2"];
    let mut flip = 0;
    let mut next = || {
        flip += 1;
        json!({"app": APP, "image": images[flip % 2]})
    };
    let (mut singles, mut one, mut all) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let update = next();
        singles.push(timed(|| {
            for target in TARGETS {
                single(&mut client, target, "update", update.clone());
            }
        }));
        one.push(timed(|| rollout(&mut client, "update", next(), 1)));
        all.push(timed(|| rollout(&mut client, "update", next(), 3)));
    }
    for target in TARGETS {
        single(&mut client, target, "remove_app", json!({"app": APP}));
    }
    client.finish();

    let (singles, one, all) = (ms(p50(&singles)), ms(p50(&one)), ms(p50(&all)));
    println!("rollout over {} servers, {rounds} rounds (p50):", TARGETS.len());
    println!("  three single updates, one after another: {singles:.0} ms");
    println!("  one rollout, batch 1:                    {one:.0} ms");
    println!("  one rollout, batch 3:                    {all:.0} ms");
    let met =
        [verdict("batch 1 / singles", one / singles, 1.25), verdict("batch 3 / singles", all / singles, 0.8)];
    if met.iter().all(|m| *m) {
        println!("targets met");
    }
}
