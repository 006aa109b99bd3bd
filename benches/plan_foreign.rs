//! Benchmark: plan and execute with 200 foreign containers on the engine
//! (issue 11), next to the bare docker calls a snapshot wraps. Runs as root
//! against the real engine with the test images of `scripts/test-images`,
//! through the library pipeline the helper runs (`volce_lab::host::rpc` on
//! the real engine, a temporary state directory, the test policy).
//!
//!     cargo bench --bench plan_foreign [-- FOREIGN ROUNDS]   (default 200 20)
//!
//! Creates FOREIGN containers without any volce-lab label (created, not
//! started), deploys one app, then ROUNDS times prepares and executes an
//! `nginx_config` plan (no approval needed) that flips its server name.
//! Prints the p50 of prepare (validation, the scoped snapshot, the store)
//! and of execute (snapshot check, nginx -t, reload, the new name
//! answering), and the p50 of the bare calls (`docker ps`, `inspect` of
//! every container, `image ls`, `network ls`). Removes all it created.
//! Without root or the test images it says so and measures nothing.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use volce_lab::host::clock::SystemClock;
use volce_lab::host::{HostPaths, ProcLiveness};

#[path = "support/snapshot_calls.rs"]
mod snapshot_calls;
#[path = "support/stats.rs"]
mod stats;

const POLICY: &str = "/var/tmp/volce-lab-test/policy.json";
const DOCKER: &str = "/usr/bin/docker";

fn docker(args: &[&str]) -> String {
    let output = Command::new(DOCKER).args(args).output().expect("docker runs");
    assert!(output.status.success(), "docker {:?} failed", &args[..args.len().min(2)]);
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Removes the foreign containers and the app, even when the bench panics.
struct Cleanup {
    prefix: String,
    app: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        snapshot_calls::remove_containers(&docker, &format!("name={}", self.prefix));
        let app = &self.app;
        for name in [format!("vl-{app}-app"), format!("vl-{app}-gateway"), format!("vl-{app}-check")] {
            let _ = Command::new(DOCKER).args(["rm", "-f", &name]).output();
        }
        for network in [format!("vl-{app}"), format!("vl-{app}_edge")] {
            let _ = Command::new(DOCKER).args(["network", "rm", &network]).output();
        }
    }
}

fn rpc(paths: &HostPaths, request: Value) -> Value {
    let reply = volce_lab::host::Host::new(
        paths.clone(),
        volce_lab::host::real_engine(paths),
        SystemClock,
        ProcLiveness,
    )
    .rpc("vl-bench", request.to_string().as_bytes());
    reply.to_json()
}

fn ok(reply: Value, what: &str) -> Value {
    assert_eq!(reply["status"], "ok", "{what}: {reply}");
    reply
}

fn p50(samples: Vec<Duration>) -> f64 {
    stats::ms(stats::p50(&samples))
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("plan_foreign: skipped (measure with `cargo bench --bench plan_foreign`, as root)");
        return;
    }
    if !nix::unistd::geteuid().is_root() || !std::path::Path::new(POLICY).is_file() {
        println!("plan_foreign: skipped (needs root, the Docker engine and scripts/test-images: {POLICY})");
        return;
    }
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .map(|a| a.parse().expect("FOREIGN ROUNDS are numbers"))
        .collect();
    let (foreign, rounds) = (args.first().copied().unwrap_or(200), args.get(1).copied().unwrap_or(20));
    let policy: Value = serde_json::from_str(&std::fs::read_to_string(POLICY).unwrap()).unwrap();
    let web = policy["catalog"]["web"].as_str().unwrap().to_owned();
    docker(&["pull", "--quiet", &web]);

    let tag = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let cleanup = Cleanup { prefix: format!("bench-foreign-{tag}-"), app: format!("bench-{tag}") };
    let mut created = 0;
    while created < foreign {
        let batch = (foreign - created).min(4);
        std::thread::scope(|s| {
            for i in 0..batch {
                let (prefix, web) = (&cleanup.prefix, &web);
                s.spawn(move || {
                    docker(&[
                        "create",
                        "--name",
                        &format!("{prefix}{}", created + i),
                        "--network",
                        "none",
                        web,
                    ]);
                });
            }
        });
        created += batch;
    }

    let state = tempfile::tempdir_in("/var/tmp").unwrap();
    let paths = HostPaths { policy: POLICY.into(), state_dir: state.path().join("state"), owner_uid: 0 };
    let port = (18500..18999u16)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free port in the test range");
    let app = cleanup.app.clone();
    let planned = ok(
        rpc(
            &paths,
            json!({"operation": "plan", "action": "deploy", "parameters": {"app": app, "image": "web",
            "host_port": port, "container_port": 8080, "server_name": "a.bench.test"}}),
        ),
        "deploy plan",
    );
    ok(rpc(&paths, json!({"operation": "execute", "plan_id": planned["result"]["id"]})), "deploy");

    let (mut prepares, mut executes, mut bare) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let name = if round % 2 == 0 { "b.bench.test" } else { "a.bench.test" };
        let t = Instant::now();
        let planned = ok(
            rpc(
                &paths,
                json!({"operation": "plan", "action": "nginx_config",
                "parameters": {"app": app, "server_name": name}}),
            ),
            "nginx_config plan",
        );
        prepares.push(t.elapsed());
        let t = Instant::now();
        ok(rpc(&paths, json!({"operation": "execute", "plan_id": planned["result"]["id"]})), "nginx_config");
        executes.push(t.elapsed());
        let t = Instant::now();
        snapshot_calls::bare_calls(&docker);
        bare.push(t.elapsed());
    }
    let total = docker(&["ps", "-aq"]).lines().count();
    let (prepare, execute, bare) = (p50(prepares), p50(executes), p50(bare));
    println!(
        "plan_foreign: {foreign} foreign containers ({total} in all), {rounds} rounds: prepare p50 {prepare:.1} ms, \
         execute p50 {execute:.1} ms; bare snapshot calls p50 {bare:.1} ms; prepare / bare = {:.2} \
         (target <= 1.2) {}",
        prepare / bare,
        if prepare / bare <= 1.2 { "met" } else { "FAILED" }
    );
    drop(cleanup);
    // A missed target fails the run, as the other benches do.
    if prepare / bare > 1.2 {
        std::process::exit(1);
    }
}
