//! Soak benchmark (issue 14; `cargo bench --bench soak`): many rpc requests
//! through the helper's pipeline, and whether its state and its latency
//! stay bounded.
//!
//! Each request runs `volce_lab::host::rpc`: exactly what `volce-lab-host
//! rpc` does after its process self-check (policy load and check, a slot,
//! the bounded read, store open and migration check, the operation, its
//! audit row). It runs in-process, with the fake engine and a test clock
//! that advances `VL_SOAK_STEP_SECS` (default 10) per request, because the shipped binary has
//! neither a fake engine nor a clock that can be moved (by design), and a
//! day of retention cannot pass in real time during a benchmark.
//!
//! The mix, per 25 requests: 1 prepare (remove_image, left pending: it
//! expires), 1 execute of that pending plan (refused `approval_required`),
//! 10 executes of an unknown plan (refused `plan_not_found`, folded), 2
//! plans with an approval smuggled into the parameters (refused), 11
//! inventories (reads, one row each). The policy keeps plans 1 day
//! (`retention_days`); every simulated 6 hours the operator's routine runs
//! `audit prune --before` (one day back), as HOST-SETUP describes after an
//! export.
//!
//! Reports: p50 of the first and the last 5,000 requests (target: end/start
//! <= 1.5), state.db (+ WAL) size over time (target: flat once retention
//! applies), and the process's RSS. `VL_SOAK_REQUESTS` sets the count
//! (default 100,000). Every request commits with `synchronous=FULL`, so the
//! run is bound by fsync, not CPU.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::fake_engine::unused_image;
use support::harness::{Harness, policy_json};

const WINDOW: usize = 5_000;

fn p50(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn state_bytes(h: &Harness) -> u64 {
    let db = h.paths.database();
    let wal = db.with_extension("db-wal");
    [db, wal].iter().map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)).sum()
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let total: usize = std::env::var("VL_SOAK_REQUESTS").ok().and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let step: i64 = std::env::var("VL_SOAK_STEP_SECS").ok().and_then(|n| n.parse().ok()).unwrap_or(10);
    let mut h = Harness::new();
    let mut policy = policy_json();
    policy["retention_days"] = json!(1);
    h.write_policy(&policy);
    let unknown = format!(r#"{{"operation":"execute","plan_id":"{}"}}"#, "f".repeat(32));
    let prepare = json!({"operation": "plan", "action": "remove_image",
        "parameters": {"image_id": unused_image().as_str()}})
    .to_string();
    let smuggled = json!({"operation": "plan", "action": "stop",
        "parameters": {"app": "legacy", "approved": true}})
    .to_string();
    let inventory = r#"{"operation":"inventory"}"#.to_owned();
    let operator =
        volce_lab::host::Caller { name: "alice".into(), sudo_uid: Some(1001), login_uid: Some(1001) };

    let mut samples = Vec::with_capacity(total);
    let mut pending: Option<String> = None;
    let mut sizes = Vec::new();
    let mut last_prune = volce_lab::control::Clock::now(&h.clock);
    let started = Instant::now();
    for n in 0..total {
        let request = match n % 25 {
            0 => prepare.clone(),
            1 => match &pending {
                Some(id) => format!(r#"{{"operation":"execute","plan_id":"{id}"}}"#),
                None => unknown.clone(),
            },
            2..=11 => unknown.clone(),
            12 | 13 => smuggled.clone(),
            _ => inventory.clone(),
        };
        let t = Instant::now();
        let reply = h.rpc("agent", request.as_bytes());
        samples.push(t.elapsed());
        if n % 25 == 0 {
            pending = reply.to_json()["result"]["id"].as_str().map(str::to_owned);
        }
        h.clock.advance(step);
        let now = volce_lab::control::Clock::now(&h.clock);
        if now - last_prune >= 6 * 3600 {
            let before = volce_lab::text::rfc3339_seconds(now - 86_400);
            volce_lab::host::audit::prune(&h.paths, &before, &operator, now).unwrap();
            last_prune = now;
        }
        if (n + 1) % (total / 10).max(1) == 0 {
            sizes.push((n + 1, state_bytes(&h)));
        }
    }
    let wall = started.elapsed();
    // The first and last tenth, at most WINDOW each: never the same samples.
    let window = WINDOW.min(total / 10).max(1);
    let (start, end) = (p50(&samples[..window]), p50(&samples[total - window..]));
    let ratio = end.as_secs_f64() / start.as_secs_f64();
    let plans: i64 = h
        .controller()
        .store_for_tests()
        .dangerous_connection_for_tests()
        .query_row("SELECT count(*) FROM plans", [], |r| r.get(0))
        .unwrap();
    let rows: i64 = h
        .controller()
        .store_for_tests()
        .dangerous_connection_for_tests()
        .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
        .unwrap();
    let intact = volce_lab::host::audit::verify(&h.paths, None).unwrap().1;
    let hours = total as i64 * step / 3600;
    println!("soak: {total} rpc requests in {:.1} s ({hours} simulated hours)", wall.as_secs_f64());
    println!(
        "  p50 first {window}: {}   p50 last {window}: {}   ratio {ratio:.2} (target <= 1.5)",
        ms(start),
        ms(end)
    );
    for (n, bytes) in &sizes {
        println!("  after {n:>7} requests: state.db+wal {:.2} MiB", *bytes as f64 / (1 << 20) as f64);
    }
    println!("  plans kept: {plans}   audit rows kept: {rows}   chain intact: {intact}");
    println!("  RSS now {} KiB, peak {} KiB", status_kib("VmRSS:"), status_kib("VmHWM:"));
    assert!(intact, "the chain must verify after the soak");
}
