//! Migration 11 (why a plan failed: `failure_code`, `failure_message`) on
//! a v10 database with plans in several states: every row is kept as it
//! was, the new columns are empty on them (`show` prints no reason it does
//! not have), and a plan that fails after the step records its reason.
//! Test-only; real temporary SQLite files.

use super::*;

/// The columns `table` had at schema `version`, in order, read from an
/// in-memory database built by the first `version` migrations.
pub(super) fn columns_at(version: usize, table: &str) -> String {
    let conn = Connection::open_in_memory().unwrap();
    for step in &MIGRATIONS[..version] {
        conn.execute_batch(step).unwrap();
    }
    let mut statement = conn.prepare(&format!("SELECT name FROM pragma_table_info('{table}')")).unwrap();
    let names: Vec<String> = statement.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    names.join(", ")
}

#[test]
fn migrating_a_v10_database_keeps_every_plan_and_records_why_later_plans_failed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let v10 = columns_at(10, "plans");
    assert!(!v10.contains("failure"), "{v10}");
    let audit = columns_at(10, "audit");
    let ids: Vec<Plan> = (1..=4).map(|n| plan(n, 1000)).collect();
    // The history, written (and chained) by today's code in a scratch
    // store, then copied into a v10 database through v10's columns.
    let scratch_dir = tempfile::tempdir().unwrap();
    let scratch = scratch_dir.path().join("scratch.db");
    Store::open(&scratch)
        .unwrap()
        .write(|tx| {
            for p in &ids {
                tx.insert_plan(p, &row(Event::Prepared, "agent"))?;
            }
            // 1 pending, 2 completed, 3 failed rolled_back (as v10 wrote
            // it, with no reason), 4 executing (it fails after the step).
            let [_, two, three, four] = &ids[..] else { unreachable!() };
            for p in [two, three, four] {
                tx.claim(&p.id, p.action, &claim(), &row(Event::Claimed, "agent"))?;
            }
            tx.finish(
                &two.id,
                two.action,
                &claim(),
                PlanOutcome::Completed,
                &row(Event::Completed, "agent"),
            )?;
            tx.finish(
                &three.id,
                three.action,
                &claim(),
                PlanOutcome::RolledBack,
                &row(Event::Failed, "agent"),
            )
        })
        .unwrap();
    let old = old_store(&path, 10);
    old.conn.execute("ATTACH DATABASE ?1 AS scratch", [scratch.to_str().unwrap()]).unwrap();
    old.conn
        .execute_batch(&format!(
            "INSERT INTO plans ({v10}) SELECT {v10} FROM scratch.plans;
             INSERT INTO audit ({audit}) SELECT {audit} FROM scratch.audit;
             DETACH DATABASE scratch;"
        ))
        .unwrap();
    let plans_before = dump(&old.conn, &format!("SELECT {v10} FROM plans ORDER BY seq"));
    let audit_before = dump(&old.conn, &format!("SELECT {audit} FROM audit ORDER BY seq"));
    assert_eq!(plans_before.len(), 4);
    drop(old);

    let mut store = Store::open(&path).unwrap();
    let conn = store.dangerous_connection_for_tests();
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    assert!(version >= 11, "{version}");
    assert_eq!(dump(conn, &format!("SELECT {v10} FROM plans ORDER BY seq")), plans_before);
    assert_eq!(dump(conn, &format!("SELECT {audit} FROM audit ORDER BY seq")), audit_before);
    let empty: i64 = conn
        .query_row(
            "SELECT count(*) FROM plans WHERE failure_code IS NULL AND failure_message IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(empty, 4, "older rows have no reason");
    let old_failed = store.read(|tx| tx.load_plan(&ids[2].id)).unwrap().unwrap();
    assert_eq!((old_failed.state, old_failed.failure), (PlanState::Failed, None));

    // After the step a failed plan keeps its code and whole sentence.
    let why = crate::vocab::Refusal::new(Code::HealthCheckFailed, "It did not answer; it was rolled back.");
    let four = &ids[3];
    store
        .write(|tx| {
            tx.fail(
                &four.id,
                four.action,
                &claim(),
                PlanOutcome::RolledBack,
                &why,
                &row(Event::Failed, "agent"),
            )
        })
        .unwrap();
    let failed = store.read(|tx| tx.load_plan(&four.id)).unwrap().unwrap();
    assert_eq!((failed.state, failed.outcome), (PlanState::Failed, Some(PlanOutcome::RolledBack)));
    assert_eq!(failed.failure, Some(why));
    // A reason longer than a message may be is refused by the schema.
    let conn = store.dangerous_connection_for_tests();
    let long = "x".repeat(crate::vocab::MESSAGE_MAX_CHARS + 1);
    assert!(conn.execute("UPDATE plans SET failure_message = ?1 WHERE seq = 1", [long]).is_err());
}
