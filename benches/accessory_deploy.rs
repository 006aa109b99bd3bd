//! Benchmark (issue 40): what an accessory adds to a deploy. Deploys the
//! test image `notes` through the host helper's own pipeline on the real
//! engine, three ways, each followed by its remove_app: without an
//! accessory; with the PostgreSQL accessory `volce-lab/pg` made new (its
//! data image, its credential and the cluster's first start); and with
//! that accessory's data kept from the round before (what a redeploy
//! meets). Uses the images of `scripts/test-images` and a state directory
//! of its own; writes nothing to an installed host. Root only.
//!
//!     cargo bench --bench accessory_deploy [-- ROUNDS]
//!
//! Prints the median and min of each. Target: a deploy with a kept
//! accessory within the plain deploy's median + 3 s (the database's own
//! start, polled every 500 ms by its health command, and a few docker
//! calls; measured at about 1 s). A new accessory adds its first start
//! too (PostgreSQL's initdb), which is the image's and has no target. Without root or the test images it says so and measures nothing.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use volce_lab::host::HostPaths;

#[path = "support/host_pipeline.rs"]
mod host_pipeline;
#[path = "support/stats.rs"]
mod stats;
use host_pipeline::{AppCleanup, POLICY, free_app_port, outcome, run};

const IMAGES: &str = "/var/tmp/volce-lab-test/images.json";
const TARGET_ADDED: Duration = Duration::from_secs(3);

fn read(path: &str) -> Option<Value> {
    std::fs::read(path).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok())
}

/// The test policy with `plain` (notes alone) and `withdb` (notes and `db`).
fn policy(mut policy: Value, images: &Value) -> Value {
    let notes = images["notes"]["reference"].clone();
    policy["accessories"] = json!({"db": {
        "image": images["pg"]["reference"], "port": 5432,
        "data": {"path": "/srv/pgdata", "max_mib": 128},
        "health": ["/usr/lib/postgresql/15/bin/pg_isready", "-h", "127.0.0.1", "-p", "5432", "-q"],
        "env": {"POSTGRES_PASSWORD": "{password}"}
    }});
    policy["catalog"]["plain"] = json!({"image": notes, "container_port": 8080});
    policy["catalog"]["withdb"] = json!({"image": notes, "container_port": 8080,
        "accessories": {"db": {"DATABASE_URL": "postgresql://app:{password}@{host}:{port}/app"}}});
    policy
}

/// One deploy of `key` as `app` and its remove_app (purging or not): the
/// deploy's wall time.
fn deploy_once(paths: &HostPaths, app: &str, key: &str, purge: bool) -> Duration {
    let port = free_app_port();
    let params = json!({"app": app, "image": key, "host_port": port, "container_port": 8080,
                        "server_name": format!("{app}.bench")});
    let started = Instant::now();
    let deployed = run(paths, "deploy", params);
    let took = started.elapsed();
    assert_eq!(outcome(&deployed), "completed", "{deployed}");
    let removed = run(paths, "remove_app", json!({"app": app, "purge_data": purge}));
    assert_eq!(outcome(&removed), "completed", "{removed}");
    took
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("accessory_deploy: skipped (measure with `cargo bench --bench accessory_deploy`, as root)");
        return;
    }
    let (Some(base), Some(images)) = (read(POLICY), read(IMAGES)) else {
        println!("accessory_deploy: skipped (needs scripts/test-images: {POLICY} and {IMAGES})");
        return;
    };
    if !nix::unistd::geteuid().is_root() || !images["pg"]["reference"].is_string() {
        println!(
            "accessory_deploy: skipped (needs root and the test images' pg and notes: run scripts/test-images)"
        );
        return;
    }
    let rounds: usize =
        std::env::args().skip(1).find(|a| a != "--bench").map_or(3, |a| a.parse().expect("a count"));
    let dir = tempfile::tempdir().unwrap();
    let policy_path = dir.path().join("policy.json");
    std::fs::write(&policy_path, policy(base, &images).to_string()).unwrap();
    let paths = HostPaths { policy: policy_path, state_dir: dir.path().join("state"), owner_uid: 0 };
    let app = format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let _cleanup = AppCleanup(app.clone());
    let (mut plain, mut new_db, mut kept_db) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        plain.push(deploy_once(&paths, &app, "plain", true));
        new_db.push(deploy_once(&paths, &app, "withdb", false));
        kept_db.push(deploy_once(&paths, &app, "withdb", true));
    }
    let show = |what: &str, runs: &[Duration]| {
        let (median, min) = (stats::p50(runs), runs.iter().min().copied().unwrap_or_default());
        println!("{what:<36} median {:>8.1} ms  min {:>8.1} ms", stats::ms(median), stats::ms(min));
        median
    };
    println!("accessory_deploy: {rounds} rounds, release build, the test images");
    let base = show("deploy without an accessory", &plain);
    show("deploy with a new PostgreSQL", &new_db);
    let kept = show("deploy with a kept PostgreSQL", &kept_db);
    let added = kept.saturating_sub(base);
    let verdict = if added <= TARGET_ADDED { "met" } else { "FAILED" };
    println!(
        "a kept accessory adds {:.1} ms (target <= {} s): {verdict}",
        stats::ms(added),
        TARGET_ADDED.as_secs()
    );
}
