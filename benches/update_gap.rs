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

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use volce_lab::docker::host_probe::http_get;
use volce_lab::host::HostPaths;

#[path = "support/host_pipeline.rs"]
mod host_pipeline;
use host_pipeline::{AppCleanup, POLICY, free_app_port, outcome, polled, run};

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
    let _cleanup = AppCleanup(app.clone());
    let port = free_app_port();
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
        let probe_host = host.clone();
        let good = move || {
            http_get(port, &probe_host, &Default::default(), Duration::from_secs(2))
                .is_some_and(|reply| reply.status == 200)
        };
        let seen = polled(good, || reply = run(&paths, "update", json!({"app": app, "image": key})));
        println!(
            "update_gap: update to {key:<6} {:<19} in {:>5} ms: {:>3} polls, {} failed, longest gap {} ms",
            outcome(&reply),
            started.elapsed().as_millis(),
            seen.polls,
            seen.failed,
            seen.longest_gap.as_millis()
        );
        worst = worst.max(seen.longest_gap);
        failures += seen.failed;
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
