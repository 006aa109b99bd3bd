//! Controller benchmark (shipped; `cargo bench --bench controller`).
//!
//! 1. prepare and execute p50 with the fake engine after 1,000 and after
//!    100,000 stored plans. Target: the 100k/1k ratio stays under 1.5 (the
//!    cost must not grow with history).
//! 2. The cost of one rpc request refused after loading the policy and
//!    opening the store: in-process on temporary paths (library form), and,
//!    when run as root on a configured host, the wall time of a real
//!    `volce-lab-host rpc` process on the fixed paths. Target: under 3 ms.
//!
//! The request used for (2) is `execute` of an unknown plan id: it loads and
//! checks the policy, opens and migrates the store, settles abandoned
//! claims, looks the plan up, and is refused (`plan_not_found`) without
//! touching the engine or changing any state.

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rusqlite::params;
use serde_json::json;
use support::fake_engine;
use support::harness::{self, Harness, deploy_params};
use volce_lab::host::{Executed, ProcLiveness};

const ROUNDS: usize = 200;

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// Adds `count` finished plans (with their four audit rows each) in one transaction.
fn fill_history(h: &Harness, count: usize, body: &str, digest: &str) {
    let mut controller = h.controller();
    let conn = controller.store_for_tests().dangerous_connection_for_tests();
    let tx = conn.transaction().unwrap();
    {
        let mut plan = tx
            .prepare(
                "INSERT INTO plans (id, action, body, digest, requires_approval, requester, created_at, expires_at,
                 state, approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, claimed_at,
                 finished_at, outcome)
                 VALUES (?1, 'remove_image', ?2, ?3, 1, 'agent', ?4, ?4 + 600, 'completed', 'alice', ?4, ?3,
                 1, 1, 'boot', ?4, ?4, 'completed')",
            )
            .unwrap();
        let mut audit = tx
            .prepare(
                "INSERT INTO audit (seq, at, event, plan_id, action, outcome, actor, prev_hash, hash)
                 VALUES (?1, ?2, ?3, ?4, 'remove_image', 'ok', 'agent', ?5, ?6)",
            )
            .unwrap();
        // The rows chain on from what the harness already wrote, as the
        // helper's own rows would (it refuses to chain onto a row without one).
        let (mut seq, mut prev): (i64, String) = tx
            .query_row("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap_or((0, volce_lab::store::GENESIS.to_owned()));
        for i in 0..count {
            let id = format!("{:032x}", 0xb000_0000_u64 + i as u64);
            let at = 1_700_000_000_i64 + i as i64;
            plan.execute(params![id, body, digest, at]).unwrap();
            for event in ["prepared", "approved", "claimed", "completed"] {
                seq += 1;
                let content = volce_lab::store::ChainContent {
                    seq,
                    at,
                    event,
                    plan_id: Some(&id),
                    action: Some("remove_image"),
                    outcome: "ok",
                    exit_code: None,
                    duration_ms: None,
                    actor: "agent",
                    ..Default::default()
                };
                let hash = volce_lab::store::chain_link(&prev, &content);
                audit.execute(params![seq, at, event, id, prev, hash]).unwrap();
                prev = hash;
            }
        }
    }
    tx.commit().unwrap();
}

/// A deployed app `demo` over `history` stored plans, ready for rounds.
struct Bench {
    _harness: Harness,
    controller: harness::TestController,
    prepare: Vec<Duration>,
    execute: Vec<Duration>,
}

impl Bench {
    fn new(history: usize) -> Bench {
        let h = Harness::new();
        // A realistic stored body for the history rows.
        let sample = h.controller().prepare("deploy", &deploy_params("demo", 18001), "agent").unwrap();
        fill_history(&h, history, &sample.plan.canonical_json(), sample.plan.digest.as_str());
        match h.controller().execute(&sample.plan.id, "agent").unwrap() {
            Executed::Completed(_) => {}
            other => panic!("deploy failed: {other:?}"),
        }
        let controller = h.controller();
        Bench { _harness: h, controller, prepare: Vec::new(), execute: Vec::new() }
    }

    /// One nginx_config plan: prepare it, then execute it.
    fn round(&mut self, round: usize) {
        let name = if round.is_multiple_of(2) { "a.example.com" } else { "b.example.com" };
        let params = json!({"app": "demo", "server_name": name});
        let started = Instant::now();
        let plan = self.controller.prepare("nginx_config", &params, "agent").unwrap();
        self.prepare.push(started.elapsed());
        let started = Instant::now();
        let outcome = self.controller.execute(&plan.plan.id, "agent").unwrap();
        self.execute.push(started.elapsed());
        assert!(matches!(outcome, Executed::Completed(_)));
    }
}

/// p50 of prepare and execute after `small` and after `large` stored plans.
/// The two stores take turns round by round, so a burst of disk or CPU
/// contention from elsewhere hits both alike instead of skewing the ratio.
fn measure(small: usize, large: usize) -> [(Duration, Duration); 2] {
    let mut benches = [Bench::new(small), Bench::new(large)];
    for round in 0..ROUNDS {
        for bench in &mut benches {
            bench.round(round);
        }
    }
    benches.map(|b| (p50(b.prepare), p50(b.execute)))
}

/// p50 of the library form of a refused rpc (policy + store + refusal).
fn refused_rpc_in_process() -> Duration {
    let h = Harness::new();
    h.controller();
    let request = format!(r#"{{"operation":"execute","plan_id":"{}"}}"#, "f".repeat(32));
    let samples = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            let reply = h.rpc("agent", request.as_bytes());
            let elapsed = started.elapsed();
            assert_eq!(reply.to_json()["code"], "plan_not_found");
            elapsed
        })
        .collect();
    p50(samples)
}

/// The child side of [`refused_rpc_child_process`]: one rpc on injected
/// paths, exactly what `volce-lab-host rpc` does after its self-check.
fn child_rpc(dir: &str) -> ! {
    let dir = std::path::Path::new(dir);
    let paths = volce_lab::host::HostPaths {
        policy: dir.join("etc/policy.json"),
        state_dir: dir.join("state"),
        owner_uid: nix::unistd::geteuid().as_raw(),
    };
    let reply = volce_lab::host::Host::new(
        paths.clone(),
        fake_engine::FakeEngine::new(),
        volce_lab::host::clock::SystemClock,
        ProcLiveness,
    )
    .rpc("agent", std::io::stdin().lock());
    print!("{}", reply.to_line());
    std::process::exit(reply.exit() as i32)
}

/// p50 wall time of a whole process (this benchmark binary re-executed)
/// answering one refused rpc on temporary paths: start-up, policy load,
/// store open, refusal, exit. Needs no root and touches no system path.
fn refused_rpc_child_process() -> Duration {
    let h = Harness::new();
    h.controller();
    let request = format!(r#"{{"operation":"execute","plan_id":"{}"}}"#, "f".repeat(32));
    let samples = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            let mut child = Command::new(std::env::current_exe().unwrap())
                .env_clear()
                .env("VL_BENCH_CHILD", &h.root)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(request.as_bytes()).unwrap();
            let output = child.wait_with_output().unwrap();
            let elapsed = started.elapsed();
            let reply: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
            assert_eq!(reply["code"], "plan_not_found");
            elapsed
        })
        .collect();
    p50(samples)
}

/// p50 wall time of `volce-lab --version`: process start-up alone, the floor
/// under any helper request on this machine.
fn process_baseline() -> Duration {
    let samples = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            let status = Command::new(env!("CARGO_BIN_EXE_volce-lab"))
                .arg("--version")
                .env_clear()
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
            started.elapsed()
        })
        .collect();
    p50(samples)
}

/// p50 wall time of a real `volce-lab host rpc` process on the fixed paths.
fn refused_rpc_process() -> Result<Duration, &'static str> {
    if !nix::unistd::geteuid().is_root() {
        return Err("needs root");
    }
    if !std::path::Path::new("/etc/volce-lab/policy.json").exists()
        || !std::path::Path::new("/var/lib/volce-lab").is_dir()
    {
        // Never create the real state directory just to benchmark.
        return Err("needs an installed host (/etc/volce-lab/policy.json and /var/lib/volce-lab)");
    }
    let request = format!(r#"{{"operation":"execute","plan_id":"{}"}}"#, "f".repeat(32));
    let mut samples = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_volce-lab"))
            .args(["host", "rpc"])
            .env_clear()
            .env("SUDO_USER", "agent")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(request.as_bytes()).unwrap();
        let output = child.wait_with_output().unwrap();
        samples.push(started.elapsed());
        let reply: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        if reply["code"] != "plan_not_found" {
            eprintln!("unexpected reply from the installed helper: {reply}");
            return Err("the installed helper did not answer plan_not_found");
        }
    }
    Ok(p50(samples))
}

fn main() {
    if let Ok(dir) = std::env::var("VL_BENCH_CHILD") {
        child_rpc(&dir);
    }
    // `cargo test --benches` runs this with --bench absent: keep it quick then.
    let quick = !std::env::args().any(|a| a == "--bench");
    let (small, large) = if quick { (100, 1_000) } else { (1_000, 100_000) };

    let [(prepare_small, execute_small), (prepare_large, execute_large)] = measure(small, large);
    println!("controller benchmark (fake engine, p50 of {ROUNDS} interleaved rounds, nginx_config plans)");
    println!("  after {small:>7} plans: prepare {}  execute {}", ms(prepare_small), ms(execute_small));
    println!("  after {large:>7} plans: prepare {}  execute {}", ms(prepare_large), ms(execute_large));
    let prepare_ratio = prepare_large.as_secs_f64() / prepare_small.as_secs_f64();
    let execute_ratio = execute_large.as_secs_f64() / execute_small.as_secs_f64();
    println!(
        "  ratio {large}/{small}: prepare {prepare_ratio:.2}  execute {execute_ratio:.2}  (target < 1.5)"
    );

    println!("refused rpc (execute of an unknown plan, after policy load and store open)");
    println!("  in-process, temporary paths: p50 {}", ms(refused_rpc_in_process()));
    println!(
        "  whole process, temporary paths (bench binary re-executed): p50 {}",
        ms(refused_rpc_child_process())
    );
    println!("  process start-up alone (volce-lab --version): p50 {}", ms(process_baseline()));
    match refused_rpc_process() {
        Ok(p50) => println!("  real process on the fixed paths: p50 {}  (target < 3 ms)", ms(p50)),
        Err(why) => println!("  real process on the fixed paths: skipped ({why})"),
    }
    if !quick && (prepare_ratio >= 1.5 || execute_ratio >= 1.5) {
        eprintln!("FAILED: cost grows with history");
        std::process::exit(1);
    }
}
