//! Migration 13 (the actions `restart` and `rollback` in both action CHECK
//! lists) on a v12 database with plans and a chained audit: every row is
//! kept byte for byte, the chain still verifies, and `restart` and
//! `rollback` rows, refused by v12's schema, are accepted. Test-only; real temporary SQLite files.

use super::migration11::columns_at;
use super::*;

#[test]
fn migrating_a_v12_database_keeps_every_row_and_the_chain_and_accepts_restart_and_rollback() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let (plans, audit) = (columns_at(12, "plans"), columns_at(12, "audit"));
    assert_eq!(plans, columns_at(13, "plans"), "the same columns, in the same order");
    assert_eq!(audit, columns_at(13, "audit"));
    let old = seeded_old_store(&path, 12);
    let refused = old.conn.execute("UPDATE plans SET action = 'restart' WHERE seq = 1", []);
    assert!(refused.is_err(), "v12's CHECK knows no restart");
    let plans_before = dump(&old.conn, &format!("SELECT {plans} FROM plans ORDER BY seq"));
    let audit_before = dump(&old.conn, &format!("SELECT {audit} FROM audit ORDER BY seq"));
    assert_eq!((plans_before.len(), audit_before.len()), (3, 5));
    drop(old);

    let mut store = reopened_keeping(&path, 13, (&plans, &audit), (&plans_before, &audit_before));
    let conn = store.dangerous_connection_for_tests();
    for action in ["restart", "rollback"] {
        conn.execute(&format!("UPDATE audit SET action = '{action}' WHERE seq = 1"), []).unwrap();
        conn.execute(&format!("UPDATE plans SET action = '{action}' WHERE seq = 1"), []).unwrap();
    }
    // Since step 15 the columns check a name's shape only (migration15.rs).
    assert!(conn.execute("UPDATE plans SET action = 'Reboot' WHERE seq = 1", []).is_err());
}

/// Opens the store at `path` (migrating it to at least `version`) and
/// checks what a table rebuild must keep: every row of `columns` (plans,
/// audit) as `before` dumped it, the indexes, and every link of the chain.
pub(super) fn reopened_keeping(
    path: &std::path::Path,
    version: i64,
    (plans, audit): (&str, &str),
    (plans_before, audit_before): (&[String], &[String]),
) -> Store {
    let mut store = Store::open(path).unwrap();
    let conn = store.dangerous_connection_for_tests();
    let migrated: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    assert!(migrated >= version, "{migrated}");
    assert_eq!(dump(conn, &format!("SELECT {plans} FROM plans ORDER BY seq")), plans_before);
    assert_eq!(dump(conn, &format!("SELECT {audit} FROM audit ORDER BY seq")), audit_before);
    let indexes = dump(conn, "SELECT name FROM sqlite_master WHERE type = 'index' ORDER BY name");
    for index in ["audit_at", "audit_plan", "plans_finished", "plans_pending", "plans_pending_requester"] {
        assert!(indexes.iter().any(|i| i.contains(index)), "{index}: {indexes:?}");
    }
    assert!(verify(&mut store, None).intact(), "every link still verifies");
    store
}

/// A database at schema `version` holding three plans (one completed) and
/// their chained audit rows, written by today's store and copied in column
/// by column; shared by the migrations that rebuild both tables.
pub(super) fn seeded_old_store(path: &std::path::Path, version: usize) -> Store {
    let (plans, audit) = (columns_at(version, "plans"), columns_at(version, "audit"));
    let ids: Vec<Plan> = (1..=3).map(|n| plan(n, 1000)).collect();
    let scratch_dir = tempfile::tempdir().unwrap();
    let scratch = scratch_dir.path().join("scratch.db");
    Store::open(&scratch)
        .unwrap()
        .write(|tx| {
            for p in &ids {
                tx.insert_plan(p, &row(Event::Prepared, "agent"))?;
            }
            let done = &ids[1];
            tx.claim(&done.id, done.action, &claim(), &row(Event::Claimed, "agent"))?;
            tx.finish(
                &done.id,
                done.action,
                &claim(),
                PlanOutcome::Completed,
                &row(Event::Completed, "agent"),
            )
        })
        .unwrap();
    let old = old_store(path, version);
    old.conn.execute("ATTACH DATABASE ?1 AS scratch", [scratch.to_str().unwrap()]).unwrap();
    old.conn
        .execute_batch(&format!(
            "INSERT INTO plans ({plans}) SELECT {plans} FROM scratch.plans;
             INSERT INTO audit ({audit}) SELECT {audit} FROM scratch.audit;
             DETACH DATABASE scratch;"
        ))
        .unwrap();
    old
}
