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
//! Each is timed over its `service_plan` and `service_execute` calls; the
//! operator's signature between them (`volce-lab approve`, one per plan or
//! one per rollout, made here with the fleet's software key) is their time,
//! not the machine's, and is left out; each server's verification of it is
//! inside the execute, and counted. The wait between batches is 0 s here:
//! it is a pause the user chooses, not a cost.
//!
//! Targets: batch 1 within 1.25x the three single updates (the rollout adds
//! little beyond its servers' own updates), batch 3 below 0.8x of them (its
//! servers update at once). A missed target prints FAILED.
//!
//! It writes only to the fleet test servers (one app, removed at the end,
//! and the plans and audit rows of its changes): run as root after
//! scripts/e2e-setup and `scripts/fleet-servers up`;
//! `cargo bench --bench rollout [-- ROUNDS]` (default 3). Prints `skipped`
//! with the reason when the servers are not up.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stats::{ms, p50};
use stdio_client::StdioClient;
use volce_lab::wire::signed::{ROLLOUT_HEADER, STATEMENT_HEADER};

#[path = "support/stats.rs"]
mod stats;
#[path = "support/stdio_client.rs"]
mod stdio_client;

const FLEET: &str = "/var/tmp/volce-lab-fleet";
const TARGETS: [&str; 3] = ["vl-fleet-1", "vl-fleet-2", "vl-fleet-3"];
const APP: &str = "rollbench";

/// The workstation's environment, for `mcp-serve` and `approve` alike.
fn workstation(command: &mut Command, home: &Path) {
    command
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("XDG_RUNTIME_DIR", home)
        .env("XDG_STATE_HOME", home.join("state"))
        .env("VOLCE_LAB_SSH_CONFIG", format!("{FLEET}/client/ssh_config"))
        .env("VOLCE_LAB_TARGETS", format!("{FLEET}/client/targets.toml"));
}

/// `volce-lab approve ARGS --key KEY`, confirmed with `hash`'s first 8
/// characters: the signed text it printed after the statement.
fn sign(home: &Path, args: &[&str], hash: &str, header: &str) -> String {
    use std::io::Write as _;
    let mut command = Command::new(env!("CARGO_BIN_EXE_volce-lab"));
    command.arg("approve").args(args).args(["--key", &format!("{FLEET}/operator/approve_key")]);
    workstation(&mut command, home);
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(format!("{}\n", &hash[..8]).as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "volce-lab approve {args:?} failed");
    let text = String::from_utf8(output.stdout).unwrap();
    text[text.rfind(header).expect("a signed approval")..].to_owned()
}

fn ok(answer: &Value) -> &Value {
    assert_eq!(answer["status"], "ok", "{answer}");
    answer
}

/// `service_plan` then `service_execute` of one plan on `target`, signed
/// between them when it needs it: the time of the two calls.
fn single(client: &mut StdioClient, home: &Path, target: &str, action: &str, parameters: Value) -> Duration {
    let started = Instant::now();
    let planned =
        client.call("service_plan", json!({"target": target, "action": action, "parameters": parameters}));
    let mut took = started.elapsed();
    let plan_id = ok(&planned)["plan_id"].as_str().unwrap().to_owned();
    let mut arguments = json!({"target": target, "plan_id": plan_id});
    if planned["result"]["requires_approval"] == true {
        let digest = planned["result"]["digest"].as_str().unwrap();
        arguments["signed_approval"] =
            json!(sign(home, &["--target", target, &plan_id], digest, STATEMENT_HEADER));
    }
    let started = Instant::now();
    ok(&client.call("service_execute", arguments));
    took += started.elapsed();
    took
}

/// A rollout over the three servers: planned, signed when it needs it,
/// executed: the time of the two calls.
fn rollout(
    client: &mut StdioClient,
    home: &Path,
    action: &str,
    parameters: Value,
    batch_size: usize,
) -> Duration {
    let started = Instant::now();
    let planned = client.call(
        "service_plan",
        json!({"targets": TARGETS, "action": action, "parameters": parameters,
            "batch_size": batch_size, "health_wait_seconds": 0}),
    );
    let mut took = started.elapsed();
    let view = &ok(&planned)["result"];
    let rollout_id = view["rollout_id"].as_str().unwrap();
    let mut arguments = json!({"rollout": rollout_id});
    if view["requires_approval"] == true {
        let manifest = view["manifest_sha256"].as_str().unwrap();
        arguments["signed_approval"] =
            json!(sign(home, &["--rollout", rollout_id], manifest, ROLLOUT_HEADER));
    }
    let started = Instant::now();
    ok(&client.call("service_execute", arguments));
    took += started.elapsed();
    took
}

fn verdict(what: &str, value: f64, limit: f64) -> bool {
    let met = value <= limit;
    println!("{what}: {value:.2}x (target <= {limit}x) {}", if met { "ok" } else { "FAILED" });
    met
}

fn main() {
    // `cargo test --all-targets` runs benches without `--bench`: a rollout
    // changes the fleet servers, so only `cargo bench` runs it.
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("rollout bench: skipped (run it with cargo bench --bench rollout)");
        return;
    }
    let rounds: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(3);
    if !Path::new(FLEET).join("ready").exists() {
        println!(
            "skipped: the fleet test servers are not up (scripts/e2e-setup, then scripts/fleet-servers up)"
        );
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let home = state.path();
    let mut command = Command::new(env!("CARGO_BIN_EXE_volce-lab"));
    command.arg("mcp-serve");
    workstation(&mut command, home);
    let mut client = StdioClient::start(command, "rollout-bench");
    let identity = client.call("cloud_check", json!({"check": "identity", "targets": TARGETS}));
    assert_eq!(identity["summary"]["failed"], 0, "{identity}");
    // An app left by an interrupted run goes first.
    for target in TARGETS {
        let inventory = client.call("service_inventory", json!({"target": target}));
        let apps = ok(&inventory)["result"]["apps"].as_array().cloned().unwrap_or_default();
        if apps.iter().any(|a| a["app"] == APP) {
            single(&mut client, home, target, "remove_app", json!({"app": APP}));
        }
    }
    let deploy = json!({"app": APP, "image": "web", "host_port": 18200, "container_port": 8080,
        "server_name": "rollbench.fleet.test"});
    rollout(&mut client, home, "deploy", deploy, 3);

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
        let each = TARGETS.map(|t| single(&mut client, home, t, "update", update.clone()));
        singles.push(each.iter().sum::<Duration>());
        one.push(rollout(&mut client, home, "update", next(), 1));
        all.push(rollout(&mut client, home, "update", next(), 3));
    }
    for target in TARGETS {
        single(&mut client, home, target, "remove_app", json!({"app": APP}));
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
