//! Concurrency under load, small: 4 helper processes × 12 rounds of mixed
//! inventory, prepare, approve, reject and execute on one state directory
//! (`crate::support::load`; the 16 × 200 figure is benches/load.rs). Each
//! approved plan reaches the engine exactly once, a rejected one never, a
//! second execute is always refused, and no caller sees a locked database.
//! Hermetic: real processes, real SQLite, the fake engine.

use std::process::Command;

use crate::support::load;

/// The child side. A no-op unless started by the test below.
#[test]
fn load_child() {
    load::child_from_env();
}

#[test]
fn mixed_operations_from_four_processes_run_each_approved_plan_once() {
    let dir = tempfile::tempdir().unwrap();
    let report = load::run(dir.path(), 4, 12, || {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command.args(["host_load::load_child", "--exact", "--nocapture", "--test-threads=1"]);
        command
    });
    assert!(report.locked.is_empty(), "a caller saw a locked or unavailable database: {:?}", report.locked);
    assert_eq!(report.apps.len(), 4 * 12, "{:?}", report.apps);
    let mutations = load::mutations_per_app(&report);
    for (app, fate) in &report.apps {
        let (deploys, removals) = mutations.get(app).copied().unwrap_or_default();
        match fate.as_str() {
            "deployed" => assert_eq!((deploys, removals), (1, 1), "{app}"),
            "rejected" | "skipped" => assert_eq!((deploys, removals), (0, 0), "{app}"),
            other => assert!(deploys <= 1 && removals <= 1, "{app} {other}: {deploys} {removals}"),
        }
    }
    // With the agent's retries (see `load::child`), every round ends one of two ways.
    let fates: Vec<&String> = report.apps.values().filter(|f| *f != "deployed" && *f != "rejected").collect();
    assert!(fates.is_empty(), "rounds that ended otherwise: {fates:?} ({:?})", report.outcomes);
    let rejected = report.apps.values().filter(|fate| *fate == "rejected").count();
    assert_eq!(rejected, 4 * 3, "every fourth round is rejected");
}
