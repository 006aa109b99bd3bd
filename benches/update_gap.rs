//! Benchmark: the unavailability window of `update`. Deploys one app on the
//! real engine through the host helper's pipeline (`volce_lab::host::rpc`,
//! the real engine, the test policy of `scripts/test-images`), then updates
//! it back and forth between the catalog keys `web` and `web2`, and once to
//! `broken` (whose health check fails and is rolled back), while a thread
//! polls the app through its gateway every 50 ms. Runs as root; removes the
//! app again.
//!
//!     cargo bench --bench update_gap [-- UPDATES]
//!
//! Prints, per update, the polls made, the failed ones (target: none) and
//! the longest time between two good answers (50 ms of it is the poll
//! interval). Without root or the test images it says so and measures nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use volce_lab::docker::host_probe::http_get;
use volce_lab::host::clock::SystemClock;
use volce_lab::host::{HostPaths, ProcLiveness};

const POLICY: &str = "/var/tmp/volce-lab-test/policy.json";

fn rpc(paths: &HostPaths, request: Value) -> Value {
    let engine = volce_lab::host::real_engine(paths);
    volce_lab::host::Host::new(paths.clone(), engine, SystemClock, ProcLiveness)
        .rpc("vl-agent", request.to_string().as_bytes())
        .to_json()
}

/// Plan, approve when needed, execute: the execute reply.
fn run(paths: &HostPaths, action: &str, parameters: Value) -> Value {
    let plan = rpc(paths, json!({"operation": "plan", "action": action, "parameters": parameters}));
    assert_eq!(plan["status"], "ok", "{action}: {plan}");
    let id = plan["result"]["id"].as_str().unwrap();
    if plan["result"]["requires_approval"] == true {
        let digest = plan["result"]["digest"].as_str().unwrap();
        let engine = volce_lab::host::real_engine(paths);
        volce_lab::host::Host::new(paths.clone(), engine, SystemClock, ProcLiveness)
            .approve("vl-operator", id, digest, |_, _| volce_lab::host::Decision::Confirmed)
            .unwrap();
    }
    rpc(paths, json!({"operation": "execute", "plan_id": id}))
}

/// Removes the bench's app, whatever happened.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let docker = |args: &[&str]| std::process::Command::new("/usr/bin/docker").args(args).output();
        let filter = format!("label=io.volce-lab.app={}", self.0);
        if let Ok(out) = docker(&["ps", "-aq", "--no-trunc", "--filter", &filter]) {
            for id in String::from_utf8_lossy(&out.stdout).lines() {
                let _ = docker(&["rm", "-f", id]);
            }
        }
        for network in [format!("vl-{}", self.0), format!("vl-{}_edge", self.0)] {
            let _ = docker(&["network", "rm", &network]);
        }
    }
}

/// (polls, failed, longest gap between good answers) while `work` runs.
fn polled(port: u16, host: &str, work: impl FnOnce()) -> (usize, usize, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let (flag, host) = (stop.clone(), host.to_owned());
    let poller = std::thread::spawn(move || {
        let (mut polls, mut failed, mut longest) = (0, 0, Duration::ZERO);
        let mut last_good = Instant::now();
        while !flag.load(Ordering::SeqCst) {
            match http_get(port, &host, &Default::default(), Duration::from_secs(2)) {
                Some(reply) if reply.status == 200 => {
                    longest = longest.max(last_good.elapsed());
                    last_good = Instant::now();
                }
                _ => failed += 1,
            }
            polls += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        (polls, failed, longest)
    });
    work();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    poller.join().unwrap()
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("update_gap: skipped (measure with `cargo bench --bench update_gap`, as root)");
        return;
    }
    let policy: Option<Value> =
        std::fs::read(POLICY).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok());
    let ready = policy
        .as_ref()
        .is_some_and(|p| p["catalog"]["web2"].is_string() && p["catalog"]["broken"].is_string());
    if !nix::unistd::geteuid().is_root() || !ready {
        println!(
            "update_gap: skipped (needs root, the Docker engine and scripts/test-images: {POLICY} with web2, broken)"
        );
        return;
    }
    let updates: usize =
        std::env::args().skip(1).find(|a| a != "--bench").map_or(4, |a| a.parse().expect("a count"));
    let state = tempfile::tempdir().unwrap();
    let paths = HostPaths { policy: POLICY.into(), state_dir: state.path().join("state"), owner_uid: 0 };
    let app = format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let _cleanup = Cleanup(app.clone());
    let port =
        (18900..18999).find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok()).expect("a free port");
    let host = format!("{app}.bench");
    let deployed = run(
        &paths,
        "deploy",
        json!({"app": app, "image": "web", "host_port": port, "container_port": 8080, "server_name": host}),
    );
    assert_eq!(deployed["result"]["outcome"], "completed", "{deployed}");
    let mut worst = Duration::ZERO;
    let mut failures = 0;
    for n in 0..=updates {
        // The last one goes to `broken`: its rollback must not cost a request either.
        let key = if n == updates {
            "broken"
        } else if n % 2 == 0 {
            "web2"
        } else {
            "web"
        };
        let started = Instant::now();
        let mut reply = Value::Null;
        let (polls, failed, longest) =
            polled(port, &host, || reply = run(&paths, "update", json!({"app": app, "image": key})));
        let outcome =
            reply["result"]["outcome"].as_str().or(reply["code"].as_str()).unwrap_or("?").to_owned();
        println!(
            "update_gap: update to {key:<6} {outcome:<19} in {:>5} ms: {polls:>3} polls, {failed} failed, longest gap {} ms",
            started.elapsed().as_millis(),
            longest.as_millis()
        );
        worst = worst.max(longest);
        failures += failed;
    }
    println!(
        "update_gap: {} updates, {failures} failed requests, longest gap {} ms (target: no failed request)",
        updates + 1,
        worst.as_millis()
    );
    if failures > 0 {
        println!("update_gap: FAILED: {failures} requests failed during the updates");
        std::process::exit(1);
    }
}
