//! A package upgrade while the previous version's helper executes a plan:
//! the migration waits for that plan (the open is refused, the file keeps
//! its schema) and runs once the claimer is gone. Test-only; real
//! temporary SQLite files, a database as schema 1 left it.

use super::*;

/// The plan columns of schema 1, which every later schema still has.
const V1_PLANS: &str = "seq, id, action, body, digest, requires_approval, requester, created_at, expires_at, state, \
    approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, claimed_at, finished_at, outcome";

/// A schema-1 database at `path` holding one plan that is executing.
fn old_store_executing(path: &Path) -> PlanId {
    let executing = plan(1, 1000);
    let id = executing.id.clone();
    let old = old_store_with(path, 1, V1_PLANS, |tx| {
        tx.insert_plan(&executing, &row(Event::Prepared, "agent"))?;
        tx.claim(&executing.id, executing.action, &claim(), &row(Event::Claimed, "agent"))
    });
    drop(old);
    id
}

fn version_of(path: &Path) -> i64 {
    let conn = Connection::open(path).unwrap();
    conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap()
}

#[test]
fn a_migration_waits_while_the_old_helper_still_executes_a_plan() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let id = old_store_executing(&path);

    // Tried: open with the claimer alive, through the host's form and the
    // conservative plain open. Both refuse and leave schema 1 as it was.
    for open in [Store::open_settled(&path, &|c: &Claim| *c == claim()).err(), Store::open(&path).err()] {
        let refusal = open.expect("refused while the claimer lives").refusal();
        assert_eq!(refusal.code, Code::UpgradeWaiting);
        assert!(refusal.message.contains(id.as_str()), "names the plan: {}", refusal.message);
        assert!(refusal.message.contains("schema 1 "), "names the schema it keeps: {}", refusal.message);
        assert!(refusal.message.contains("volce-lab-host list"), "says what to do: {}", refusal.message);
        assert_eq!(version_of(&path), 1, "nothing migrated");
    }

    // The claimer has gone: the migration runs, once, and keeps the plan.
    let mut store = Store::open_settled(&path, &|_| false).unwrap();
    assert_eq!(version_of(&path), Store::supported_version());
    let executing = store.read(|tx| tx.executing_plans()).unwrap();
    assert_eq!(executing.len(), 1);
    assert_eq!(executing[0].0, id);
    drop(store);
    // Up to date: a live claimer no longer matters (nothing to migrate).
    Store::open(&path).unwrap();
}

#[test]
fn a_fresh_database_migrates_whatever_the_claims() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    Store::open(&path).unwrap();
    assert_eq!(version_of(&path), Store::supported_version());
}
