//! Concurrency under load: 16 helper processes × 200 rounds mixing
//! inventory, prepare, approve, reject and execute on one state directory
//! (the workload of tests/support/load.rs: the library pipeline in real
//! processes on real SQLite, the fake engine logging every mutation to one
//! shared file). Prints the latency percentiles per operation, the
//! outcomes, and checks that each approved plan reached the engine exactly
//! once and that no caller saw a locked database. Unprivileged; a
//! temporary directory only. See docs/reliability.md.
//!
//!   cargo bench --bench load [-- PROCESSES ROUNDS]      (default 16 200)
//!
//! Under `cargo test --all-targets` (no `--bench` argument) it runs 4 × 5.

#[path = "support/stats.rs"]
mod stats;
#[path = "../tests/support/mod.rs"]
mod support;

use std::process::Command;
use std::time::Duration;

use support::load;

/// The `p`-th fraction of the latencies of `name` (every operation: `None`), in ms.
fn percentile_ms(report: &load::Report, name: Option<&str>, p: f64) -> f64 {
    let samples: Vec<Duration> = report
        .latencies
        .iter()
        .filter(|(n, _)| name.is_none_or(|w| w == n.as_str()))
        .flat_map(|(_, micros)| micros.iter().map(|&us| Duration::from_micros(us)))
        .collect();
    stats::ms(stats::percentile(&samples, p))
}

fn main() {
    if load::child_from_env() {
        return;
    }
    // Without `--bench` (cargo test --all-targets: a debug build) a quick run.
    let quick = !std::env::args().any(|a| a == "--bench");
    let numbers: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (default_processes, default_rounds) = if quick { (4, 5) } else { (16, 200) };
    let processes = numbers.first().copied().unwrap_or(default_processes);
    let rounds = numbers.get(1).copied().unwrap_or(default_rounds);
    let dir = tempfile::tempdir().unwrap();
    let report = load::run(dir.path(), processes, rounds, || Command::new(std::env::current_exe().unwrap()));
    let operations: usize = report.latencies.values().map(Vec::len).sum();
    println!(
        "{processes} processes x {rounds} rounds: {operations} operations in {:.1} s",
        report.elapsed.as_secs_f64()
    );
    println!("{:<10} {:>7} {:>9} {:>9} {:>9}", "operation", "count", "p50 ms", "p99 ms", "max ms");
    for name in report.latencies.keys() {
        println!(
            "{:<10} {:>7} {:>9.2} {:>9.2} {:>9.2}",
            name,
            report.latencies[name].len(),
            percentile_ms(&report, Some(name), 0.5),
            percentile_ms(&report, Some(name), 0.99),
            percentile_ms(&report, Some(name), 1.0)
        );
    }
    println!(
        "{:<10} {:>7} {:>9.2} {:>9.2} {:>9.2}",
        "all",
        operations,
        percentile_ms(&report, None, 0.5),
        percentile_ms(&report, None, 0.99),
        percentile_ms(&report, None, 1.0)
    );
    for ((name, outcome), count) in &report.outcomes {
        println!("  {name} -> {outcome}: {count}");
    }
    let mutations = load::mutations_per_app(&report);
    let mut fates = std::collections::BTreeMap::<&str, usize>::new();
    let mut wrong = Vec::new();
    for (app, fate) in &report.apps {
        *fates.entry(fate).or_default() += 1;
        let counted = mutations.get(app).copied().unwrap_or_default();
        let expected = match fate.as_str() {
            "deployed" => (1, 1),
            _ => (0, 0),
        };
        if counted != expected && (fate == "deployed" || fate == "rejected") {
            wrong.push(format!("{app} {fate}: {counted:?}"));
        }
    }
    println!("rounds: {fates:?}");
    println!("engine mutations: {} (each approved plan once: {})", report.mutations.len(), wrong.is_empty());
    println!("locked or unavailable database seen by a caller: {}", report.locked.len());
    assert!(wrong.is_empty(), "plans that did not reach the engine exactly once: {wrong:?}");
    assert!(report.locked.is_empty(), "{:?}", report.locked);
}
