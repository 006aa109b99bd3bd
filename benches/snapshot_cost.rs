//! Benchmark: what one `DockerClient::snapshot()` costs with 10 and 100 extra
//! containers, against the bare docker calls it wraps (same argv, run one
//! after the other, output not parsed). Runs as root against the real engine
//! with the test images of `scripts/test-images`; creates labelled containers
//! from the test app image (created, not started) and removes them again.
//!
//!     cargo bench --bench snapshot_cost [-- COUNTS... ]
//!
//! Prints one line per count: median and min of 15 runs each. Without root
//! or the test images it says so and measures nothing.

use std::time::{Duration, Instant};

use volce_lab::docker::Engine as _;
use volce_lab::docker::client::DockerClient;
use volce_lab::docker::program::docker_env;
use volce_lab::exec::{ExecutionStatus, ProcessSpec, run_blocking};

#[path = "support/snapshot_calls.rs"]
mod snapshot_calls;
#[path = "support/stats.rs"]
mod stats;

const RUNS: usize = 15;

fn docker(args: &[&str]) -> String {
    let mut spec = ProcessSpec::new("/usr/bin/docker", args.iter().copied());
    spec.env = docker_env();
    spec.timeout = Duration::from_secs(60);
    spec.stdout_limit = 64 * 1024 * 1024;
    let outcome = run_blocking(&spec);
    assert_eq!(outcome.execution.execution_status, ExecutionStatus::Ok, "docker {:?} failed", &args[..2]);
    String::from_utf8(outcome.stdout).expect("utf-8")
}

/// Removes the bench's containers even when the bench panics.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        snapshot_calls::remove_containers(&docker, &format!("label=io.volce-lab.app={}", self.0));
    }
}

/// Median and min.
fn stats(samples: Vec<Duration>) -> (Duration, Duration) {
    (stats::p50(&samples), stats::percentile(&samples, 0.0))
}

const POLICY: &str = "/var/tmp/volce-lab-test/policy.json";

fn main() {
    // `cargo bench` passes --bench. Under `cargo test --all-targets` this is a
    // debug build whose figures mean nothing: say so and pass.
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("snapshot_cost: skipped (measure with `cargo bench --bench snapshot_cost`, as root)");
        return;
    }
    // A plain `cargo bench` runs every benchmark; this one needs the test machine.
    if !nix::unistd::geteuid().is_root() || !std::path::Path::new(POLICY).is_file() {
        println!("snapshot_cost: skipped (needs root, the Docker engine and scripts/test-images: {POLICY})");
        return;
    }
    let counts: Vec<usize> = {
        let args: Vec<usize> = std::env::args()
            .skip(1)
            .filter(|a| a != "--bench")
            .map(|a| a.parse().expect("counts are numbers"))
            .collect();
        if args.is_empty() { vec![10, 100] } else { args }
    };
    let policy: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(POLICY).expect("read the test policy")).unwrap();
    let web = policy["catalog"]["web"].as_str().unwrap().to_owned();
    docker(&["pull", "--quiet", &web]);
    let engine = DockerClient::new("/var/tmp");
    let app = format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let cleanup = Cleanup(app.clone());
    let mut created = 0;
    let mut missed = false;
    println!("snapshot cost (median / min of {RUNS} runs; containers created, not started)");
    for target in counts {
        // Four creators at a time: creating 100 containers one by one is the slow part.
        while created < target {
            let batch = (target - created).min(4);
            std::thread::scope(|s| {
                for i in 0..batch {
                    let (app, web) = (&app, &web);
                    s.spawn(move || {
                        let name = format!("vl-{app}-{}", created + i);
                        let label = format!("io.volce-lab.app={app}");
                        docker(&["create", "--name", &name, "--label", &label, "--network", "none", web]);
                    });
                }
            });
            created += batch;
        }
        let total = engine.snapshot().expect("snapshot").containers.len();
        let mut ours = Vec::new();
        let mut bare = Vec::new();
        for _ in 0..RUNS {
            let t = Instant::now();
            engine.snapshot().expect("snapshot");
            ours.push(t.elapsed());
            let t = Instant::now();
            snapshot_calls::bare_calls(&docker);
            bare.push(t.elapsed());
        }
        let ((om, on), (bm, bn)) = (stats(ours), stats(bare));
        missed |= om > bm;
        println!(
            "{target:>4} bench containers ({total} in total): snapshot() {:>6.1} ms / {:>6.1} ms; \
             bare calls {:>6.1} ms / {:>6.1} ms (median target: snapshot() <= bare calls) {}",
            om.as_secs_f64() * 1e3,
            on.as_secs_f64() * 1e3,
            bm.as_secs_f64() * 1e3,
            bn.as_secs_f64() * 1e3,
            if om > bm { "FAILED" } else { "met" }
        );
    }
    // A missed target fails the run, as the other benches do (the
    // containers are removed first, by the guard).
    drop(cleanup);
    if missed {
        std::process::exit(1);
    }
}
