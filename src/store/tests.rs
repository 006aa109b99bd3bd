//! Store tests on real temporary SQLite files, including racing connections.

use std::path::Path;

use rusqlite::Connection;

use super::schema::MIGRATIONS;
use super::transitions::PLAN_COLUMNS;
use super::*;
use crate::control::Code;
use crate::control::plan::{Plan, PlanId};

fn plan(n: u32, now: i64) -> Plan {
    crate::control::plan::test_plan(PlanId::parse(&format!("{n:032x}")).unwrap(), now)
}

fn row(event: Event, actor: &str) -> AuditRow {
    AuditRow {
        at: 1000,
        event,
        outcome: AuditOutcome::Ok,
        exit_code: None,
        duration_ms: None,
        actor: actor.into(),
    }
}

fn claim() -> Claim {
    Claim { pid: 42, start_time: 7, boot_id: "boot".into() }
}

fn fresh() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state.db")).unwrap();
    (dir, store)
}

#[test]
fn pragmas_are_applied_and_read_back() {
    let (_dir, mut store) = fresh();
    let conn = store.dangerous_connection_for_tests();
    let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    let sync: i64 = conn.pragma_query_value(None, "synchronous", |r| r.get(0)).unwrap();
    assert_eq!(sync, 2);
    let fk: i64 = conn.pragma_query_value(None, "foreign_keys", |r| r.get(0)).unwrap();
    assert_eq!(fk, 1);
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    assert_eq!(version, Store::supported_version());
}

#[test]
fn reopening_does_not_migrate_twice() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = Store::open(&path).unwrap();
    store.write(|tx| tx.insert_plan(&plan(1, 1000), &row(Event::Prepared, "agent"))).unwrap();
    drop(store);
    let mut store = Store::open(&path).unwrap();
    let loaded = store.read(|tx| tx.load_plan(&plan(1, 1000).id)).unwrap();
    assert!(loaded.is_some());
}

#[test]
fn a_database_newer_than_the_code_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = Store::open(&path).unwrap();
    store.dangerous_connection_for_tests().pragma_update(None, "user_version", 99).unwrap();
    drop(store);
    match Store::open(&path) {
        Err(StoreError::TooNew { found: 99, supported }) => assert_eq!(supported, Store::supported_version()),
        other => panic!("expected TooNew, got {:?}", other.err()),
    }
}

#[test]
fn a_symlinked_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.db");
    Store::open(&real).unwrap();
    let link = dir.path().join("state.db");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert!(Store::open(&link).is_err());
}

#[test]
fn check_constraints_refuse_an_unknown_state() {
    let (_dir, mut store) = fresh();
    store.write(|tx| tx.insert_plan(&plan(1, 1000), &row(Event::Prepared, "agent"))).unwrap();
    let error = store
        .dangerous_connection_for_tests()
        .execute("UPDATE plans SET state = 'approved'", [])
        .unwrap_err();
    assert!(error.to_string().contains("CHECK"), "{error}");
    let error = store
        .dangerous_connection_for_tests()
        .execute("UPDATE plans SET state = 'completed'", [])
        .unwrap_err();
    assert!(error.to_string().contains("CHECK"), "completed needs a claim and an end time: {error}");
}

#[test]
fn every_transition_writes_its_audit_row() {
    let (_dir, mut store) = fresh();
    let p = plan(1, 1000);
    store
        .write(|tx| {
            tx.insert_plan(&p, &row(Event::Prepared, "agent"))?;
            tx.approve(&p.id, p.action, &p.digest, &row(Event::Approved, "alice"))?;
            tx.claim(&p.id, p.action, &claim(), &row(Event::Claimed, "agent"))?;
            tx.finish(&p.id, p.action, &claim(), PlanOutcome::Completed, &row(Event::Completed, "agent"))
        })
        .unwrap();
    let audit = store.read(|tx| tx.audit_of(&p.id)).unwrap();
    let events: Vec<_> = audit.iter().map(|a| (a.event.as_str(), a.actor.as_str())).collect();
    assert_eq!(
        events,
        [("prepared", "agent"), ("approved", "alice"), ("claimed", "agent"), ("completed", "agent")]
    );
    let stored = store.read(|tx| tx.load_plan(&p.id)).unwrap().unwrap();
    assert_eq!(stored.state, PlanState::Completed);
    assert_eq!(stored.approval.unwrap().by, "alice");
    assert_eq!(stored.claim, Some(claim()));
}

#[test]
fn a_transition_from_the_wrong_state_changes_nothing() {
    let (_dir, mut store) = fresh();
    let p = plan(1, 1000);
    store.write(|tx| tx.insert_plan(&p, &row(Event::Prepared, "agent"))).unwrap();
    store.write(|tx| tx.claim(&p.id, p.action, &claim(), &row(Event::Claimed, "agent"))).unwrap();
    let second = store.write(|tx| tx.claim(&p.id, p.action, &claim(), &row(Event::Claimed, "agent")));
    assert!(matches!(second, Err(StoreError::Conflict(_))));
    let approve = store.write(|tx| tx.approve(&p.id, p.action, &p.digest, &row(Event::Approved, "alice")));
    assert!(matches!(approve, Err(StoreError::Conflict(_))));
    let other = Claim { pid: 43, ..claim() };
    let finish = store
        .write(|tx| tx.finish(&p.id, p.action, &other, PlanOutcome::Completed, &row(Event::Completed, "x")));
    assert!(matches!(finish, Err(StoreError::Conflict(_))), "only the claimer may finish");
    let audit = store.read(|tx| tx.audit_of(&p.id)).unwrap();
    assert_eq!(audit.len(), 2, "refused transitions leave no audit row");
}

#[test]
fn an_error_inside_a_write_rolls_everything_back() {
    let (_dir, mut store) = fresh();
    let p = plan(1, 1000);
    let result: Result<(), StoreError> = store.write(|tx| {
        tx.insert_plan(&p, &row(Event::Prepared, "agent"))?;
        Err(StoreError::Corrupt)
    });
    assert!(result.is_err());
    assert!(store.read(|tx| tx.load_plan(&p.id)).unwrap().is_none());
    assert!(store.read(|tx| tx.audit_of(&p.id)).unwrap().is_empty());
}

#[test]
fn the_unsettled_gate_sees_executing_and_needs_inspection() {
    let (_dir, mut store) = fresh();
    let p = plan(1, 1000);
    store.write(|tx| tx.insert_plan(&p, &row(Event::Prepared, "agent"))).unwrap();
    assert_eq!(store.read(|tx| tx.unsettled_plan()).unwrap(), None);
    store.write(|tx| tx.claim(&p.id, p.action, &claim(), &row(Event::Claimed, "agent"))).unwrap();
    assert_eq!(store.read(|tx| tx.unsettled_plan()).unwrap(), Some((p.id.clone(), PlanState::Executing)));
    assert_eq!(store.read(|tx| tx.executing_plans()).unwrap().len(), 1);
    store.write(|tx| tx.abandon(&p.id, p.action, &claim(), &row(Event::ClaimAbandoned, "agent"))).unwrap();
    assert_eq!(
        store.read(|tx| tx.unsettled_plan()).unwrap(),
        Some((p.id.clone(), PlanState::NeedsInspection))
    );
    assert!(store.read(|tx| tx.executing_plans()).unwrap().is_empty());
}

#[test]
fn a_tampered_body_is_refused_on_load() {
    let (_dir, mut store) = fresh();
    let p = plan(1, 1000);
    store.write(|tx| tx.insert_plan(&p, &row(Event::Prepared, "agent"))).unwrap();
    store
        .dangerous_connection_for_tests()
        .execute("UPDATE plans SET body = replace(body, '\"agent\"', '\"alice\"')", [])
        .unwrap();
    let error = store.read(|tx| tx.load_plan(&p.id)).unwrap_err();
    assert_eq!(error.refusal().code, Code::PlanCorrupt);
}

#[test]
fn two_connections_racing_to_claim_get_exactly_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let p = plan(1, 1000);
    Store::open(&path).unwrap().write(|tx| tx.insert_plan(&p, &row(Event::Prepared, "agent"))).unwrap();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let path = path.clone();
            let p = p.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut store = Store::open(&path).unwrap();
                barrier.wait();
                let mine = Claim { pid: 100 + i, start_time: 1, boot_id: "b".into() };
                store.write(|tx| tx.claim(&p.id, p.action, &mine, &row(Event::Claimed, "agent"))).is_ok()
            })
        })
        .collect();
    let winners = handles.into_iter().map(|h| h.join().unwrap()).filter(|won| *won).count();
    assert_eq!(winners, 1);
    let audit = Store::open(&path).unwrap().read(|tx| tx.audit_of(&p.id)).unwrap();
    assert_eq!(audit.iter().filter(|a| a.event == "claimed").count(), 1);
}

#[test]
fn per_request_queries_use_indexes_not_table_scans() {
    let (_dir, mut store) = fresh();
    let conn = store.dangerous_connection_for_tests();
    let queries = [
        SQL_UNSETTLED.to_owned(),
        SQL_EXECUTING.to_owned(),
        format!("SELECT {PLAN_COLUMNS} FROM plans WHERE id = 'x'"),
        "SELECT at FROM audit WHERE plan_id = 'x' ORDER BY seq".to_owned(),
    ];
    for sql in queries {
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap()
            .query_map([], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let text = plan.join("; ");
        assert!(!text.contains("SCAN plans") && !text.contains("SCAN audit"), "{sql}: {text}");
        assert!(text.contains("USING"), "{sql}: {text}");
    }
}

fn needs_inspection(store: &mut Store, n: u32) -> Plan {
    let p = plan(n, 1000);
    store
        .write(|tx| {
            tx.insert_plan(&p, &row(Event::Prepared, "agent"))?;
            tx.claim(&p.id, p.action, &claim(), &row(Event::Claimed, "agent"))?;
            tx.finish(
                &p.id,
                p.action,
                &claim(),
                PlanOutcome::EngineFailed,
                &row(Event::NeedsInspection, "agent"),
            )
        })
        .unwrap();
    p
}

#[test]
fn resolve_moves_needs_inspection_to_inspected_with_who_and_when() {
    let (_dir, mut store) = fresh();
    let p = needs_inspection(&mut store, 1);
    let mut by = row(Event::Inspected, "alice");
    by.at = 2000;
    store.write(|tx| tx.resolve(&p.id, p.action, &by)).unwrap();
    let stored = store.read(|tx| tx.load_plan(&p.id)).unwrap().unwrap();
    assert_eq!(stored.state, PlanState::Inspected);
    assert_eq!(stored.resolution, Some(Resolution { by: "alice".into(), at: 2000 }));
    assert_eq!(stored.outcome, Some(PlanOutcome::EngineFailed), "why it needed inspection is kept");
    assert_eq!(store.read(|tx| tx.unsettled_plan()).unwrap(), None, "the gate is open again");
    let audit = store.read(|tx| tx.audit_of(&p.id)).unwrap();
    assert_eq!(audit.last().map(|a| (a.event.as_str(), a.actor.as_str())), Some(("inspected", "alice")));
}

#[test]
fn resolve_of_a_pending_plan_twice_or_of_an_unknown_id_is_refused() {
    let (_dir, mut store) = fresh();
    let pending = plan(1, 1000);
    store.write(|tx| tx.insert_plan(&pending, &row(Event::Prepared, "agent"))).unwrap();
    let result = store.write(|tx| tx.resolve(&pending.id, pending.action, &row(Event::Inspected, "alice")));
    assert!(matches!(result, Err(StoreError::Conflict(_))), "pending is not resolvable");
    let p = needs_inspection(&mut store, 2);
    store.write(|tx| tx.resolve(&p.id, p.action, &row(Event::Inspected, "alice"))).unwrap();
    let again = store.write(|tx| tx.resolve(&p.id, p.action, &row(Event::Inspected, "bob")));
    assert!(matches!(again, Err(StoreError::Conflict(_))), "twice is refused");
    let unknown = plan(3, 1000);
    let result = store.write(|tx| tx.resolve(&unknown.id, unknown.action, &row(Event::Inspected, "alice")));
    assert!(matches!(result, Err(StoreError::Conflict(_))));
    assert!(store.read(|tx| tx.audit_of(&unknown.id)).unwrap().is_empty());
    assert_eq!(store.read(|tx| tx.audit_of(&pending.id)).unwrap().len(), 1, "refusals leave no audit row");
    let stored = store.read(|tx| tx.load_plan(&p.id)).unwrap().unwrap();
    assert_eq!(stored.resolution.unwrap().by, "alice", "the first resolution stands");
    // The CHECK constraints hold the invariant even against raw SQL.
    let error = store
        .dangerous_connection_for_tests()
        .execute("UPDATE plans SET state = 'inspected' WHERE seq = 1", [])
        .unwrap_err();
    assert!(error.to_string().contains("CHECK"), "inspected needs who and when: {error}");
}

#[test]
fn a_rolled_back_or_not_started_failure_is_terminal_and_blocks_nothing() {
    let (_dir, mut store) = fresh();
    for (n, outcome) in [(1, PlanOutcome::RolledBack), (2, PlanOutcome::NotStarted)] {
        let p = plan(n, 1000);
        store
            .write(|tx| {
                tx.insert_plan(&p, &row(Event::Prepared, "agent"))?;
                tx.claim(&p.id, p.action, &claim(), &row(Event::Claimed, "agent"))?;
                tx.finish(&p.id, p.action, &claim(), outcome, &row(Event::Failed, "agent"))
            })
            .unwrap();
        let stored = store.read(|tx| tx.load_plan(&p.id)).unwrap().unwrap();
        assert_eq!((stored.state, stored.outcome), (PlanState::Failed, Some(outcome)));
        let resolve = store.write(|tx| tx.resolve(&p.id, p.action, &row(Event::Inspected, "alice")));
        assert!(matches!(resolve, Err(StoreError::Conflict(_))));
    }
    assert_eq!(store.read(|tx| tx.unsettled_plan()).unwrap(), None);
}

#[test]
fn a_claimed_plan_is_voided_only_by_its_claimer_and_only_while_executing() {
    let (_dir, mut store) = fresh();
    let p = plan(1, 1000);
    store.write(|tx| tx.insert_plan(&p, &row(Event::Prepared, "agent"))).unwrap();
    let void = |store: &mut Store, claim: &Claim| {
        store.write(|tx| {
            tx.void_claimed(
                &p.id,
                p.action,
                claim,
                PlanOutcome::SnapshotChanged,
                &row(Event::Invalidated, "agent"),
            )
        })
    };
    assert!(matches!(void(&mut store, &claim()), Err(StoreError::Conflict(_))), "a pending plan");
    store.write(|tx| tx.claim(&p.id, p.action, &claim(), &row(Event::Claimed, "agent"))).unwrap();
    let other = Claim { pid: 43, ..claim() };
    assert!(matches!(void(&mut store, &other), Err(StoreError::Conflict(_))), "another claimer");
    void(&mut store, &claim()).unwrap();
    let stored = store.read(|tx| tx.load_plan(&p.id)).unwrap().unwrap();
    assert_eq!((stored.state, stored.outcome), (PlanState::Invalidated, Some(PlanOutcome::SnapshotChanged)));
    assert!(matches!(void(&mut store, &claim()), Err(StoreError::Conflict(_))), "twice");
    assert_eq!(store.read(|tx| tx.unsettled_plan()).unwrap(), None, "it blocks nothing");
}

/// Every row `sql` returns, each column's value and type spelled out.
fn dump(conn: &Connection, sql: &str) -> Vec<String> {
    let mut statement = conn.prepare(sql).unwrap();
    let columns = statement.column_count();
    statement
        .query_map([], |r| {
            let mut line = Vec::new();
            for i in 0..columns {
                line.push(format!("{:?}", r.get::<_, rusqlite::types::Value>(i)?));
            }
            Ok(line.join("|"))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A database exactly as version `version` of this code left it.
fn old_store(path: &Path, version: usize) -> Store {
    let conn = Connection::open(path).unwrap();
    for step in &MIGRATIONS[..version] {
        conn.execute_batch(step).unwrap();
    }
    conn.pragma_update(None, "user_version", version as i64).unwrap();
    Store { conn }
}

#[test]
fn migrating_a_v1_database_keeps_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut old = old_store(&path, 1);
    let ids: Vec<Plan> = (1..=5).map(|n| plan(n, 1000)).collect();
    old.write(|tx| {
        for p in &ids {
            tx.insert_plan(p, &row(Event::Prepared, "agent"))?;
        }
        // 1 pending, 2 approved+executing, 3 completed, 4 needs_inspection, 5 invalidated.
        let [_, two, three, four, five] = &ids[..] else { unreachable!() };
        tx.approve(&two.id, two.action, &two.digest, &row(Event::Approved, "alice"))?;
        for p in [two, three, four] {
            tx.claim(&p.id, p.action, &claim(), &row(Event::Claimed, "agent"))?;
        }
        tx.finish(
            &three.id,
            three.action,
            &claim(),
            PlanOutcome::Completed,
            &row(Event::Completed, "agent"),
        )?;
        tx.abandon(&four.id, four.action, &claim(), &row(Event::ClaimAbandoned, "agent"))?;
        tx.invalidate(&five.id, five.action, PlanOutcome::SnapshotChanged, &row(Event::Invalidated, "agent"))
    })
    .unwrap();
    let v1_columns = "seq, id, action, body, digest, requires_approval, requester, created_at, expires_at, state, \
                      approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, claimed_at, \
                      finished_at, outcome";
    let plans_before = dump(&old.conn, &format!("SELECT {v1_columns} FROM plans ORDER BY seq"));
    let audit_before = dump(&old.conn, "SELECT * FROM audit ORDER BY seq");
    assert_eq!((plans_before.len(), audit_before.len()), (5, 5 + 1 + 3 + 2 + 1));
    drop(old);

    let mut store = Store::open(&path).unwrap();
    let conn = store.dangerous_connection_for_tests();
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    assert_eq!(version, Store::supported_version());
    assert_eq!(dump(conn, &format!("SELECT {v1_columns} FROM plans ORDER BY seq")), plans_before);
    assert_eq!(dump(conn, "SELECT * FROM audit ORDER BY seq"), audit_before);
    let fk: i64 = conn.pragma_query_value(None, "foreign_keys", |r| r.get(0)).unwrap();
    assert_eq!(fk, 1, "foreign keys are on again after the migration");
    let index: String = conn
        .query_row("SELECT sql FROM sqlite_master WHERE name = 'plans_unsettled'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        index,
        "CREATE INDEX plans_unsettled ON plans (state) WHERE state IN ('executing', 'needs_inspection')"
    );
    let states: Vec<PlanState> =
        ids.iter().map(|p| store.read(|tx| tx.load_plan(&p.id)).unwrap().unwrap().state).collect();
    assert_eq!(
        states,
        [
            PlanState::Pending,
            PlanState::Executing,
            PlanState::Completed,
            PlanState::NeedsInspection,
            PlanState::Invalidated
        ]
    );
    // The migrated database takes the new transition.
    let four = &ids[3];
    store.write(|tx| tx.resolve(&four.id, four.action, &row(Event::Inspected, "alice"))).unwrap();
    assert_eq!(store.read(|tx| tx.unsettled_plan()).unwrap().map(|(_, s)| s), Some(PlanState::Executing));
}

#[test]
fn health_lists_the_unsettled_plans_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    assert_eq!(read_health(&path).unwrap(), None, "no database yet");
    let mut store = Store::open(&path).unwrap();
    let stuck = needs_inspection(&mut store, 2);
    store.write(|tx| tx.insert_plan(&plan(1, 1000), &row(Event::Prepared, "agent"))).unwrap();
    drop(store);
    let before = std::fs::read(&path).unwrap();
    let health = read_health(&path).unwrap().unwrap();
    assert_eq!(
        health,
        StoreHealth {
            integrity_ok: true,
            schema_version: Store::supported_version(),
            expected_schema_version: Store::supported_version(),
            stuck_plans: vec![(stuck.id.as_str().to_owned(), "needs_inspection".to_owned())],
        }
    );
    assert_eq!(std::fs::read(&path).unwrap(), before, "read-only");
}

#[test]
fn reject_moves_pending_to_rejected_with_who_and_when() {
    let (_dir, mut store) = fresh();
    let p = plan(1, 1000);
    store.write(|tx| tx.insert_plan(&p, &row(Event::Prepared, "agent"))).unwrap();
    let mut by = row(Event::Rejected, "alice");
    by.at = 2000;
    store.write(|tx| tx.reject(&p.id, p.action, &by)).unwrap();
    let stored = store.read(|tx| tx.load_plan(&p.id)).unwrap().unwrap();
    assert_eq!(stored.state, PlanState::Rejected);
    assert_eq!(stored.rejection, Some(Rejection { by: "alice".into(), at: 2000 }));
    assert_eq!((stored.finished_at, stored.claimed_at, stored.outcome), (Some(2000), None, None));
    let audit = store.read(|tx| tx.audit_of(&p.id)).unwrap();
    let rows: Vec<_> =
        audit.iter().map(|a| (a.event.as_str(), a.outcome.as_str(), a.actor.as_str())).collect();
    assert_eq!(rows, [("prepared", "ok", "agent"), ("rejected", "ok", "alice")]);
    // Rejected is terminal: not again, not claimed, not approved.
    let again = store.write(|tx| tx.reject(&p.id, p.action, &row(Event::Rejected, "bob")));
    assert!(matches!(again, Err(StoreError::Conflict(_))), "twice is refused");
    let claimed = store.write(|tx| tx.claim(&p.id, p.action, &claim(), &row(Event::Claimed, "agent")));
    assert!(matches!(claimed, Err(StoreError::Conflict(_))), "a rejected plan is never claimed");
    let approved = store.write(|tx| tx.approve(&p.id, p.action, &p.digest, &row(Event::Approved, "bob")));
    assert!(matches!(approved, Err(StoreError::Conflict(_))), "nor approved");
    assert_eq!(store.read(|tx| tx.audit_of(&p.id)).unwrap().len(), 2, "refusals leave no audit row");
    assert_eq!(store.read(|tx| tx.load_plan(&p.id)).unwrap().unwrap().rejection.unwrap().by, "alice");
}

#[test]
fn reject_of_an_executing_finished_or_unknown_plan_changes_nothing() {
    let (_dir, mut store) = fresh();
    let stuck = needs_inspection(&mut store, 1);
    let executing = plan(2, 1000);
    store
        .write(|tx| {
            tx.insert_plan(&executing, &row(Event::Prepared, "agent"))?;
            tx.claim(&executing.id, executing.action, &claim(), &row(Event::Claimed, "agent"))
        })
        .unwrap();
    for p in [&stuck, &executing] {
        let before = store.read(|tx| tx.load_plan(&p.id)).unwrap();
        let result = store.write(|tx| tx.reject(&p.id, p.action, &row(Event::Rejected, "alice")));
        assert!(matches!(result, Err(StoreError::Conflict(_))));
        assert_eq!(store.read(|tx| tx.load_plan(&p.id)).unwrap(), before);
    }
    let unknown = plan(3, 1000);
    let result = store.write(|tx| tx.reject(&unknown.id, unknown.action, &row(Event::Rejected, "alice")));
    assert!(matches!(result, Err(StoreError::Conflict(_))));
    assert!(store.read(|tx| tx.audit_of(&unknown.id)).unwrap().is_empty());
    // The CHECK constraints hold the invariant even against raw SQL.
    let conn = store.dangerous_connection_for_tests();
    conn.execute(
        "INSERT INTO plans (id, action, body, digest, requires_approval, requester, created_at, expires_at)
                  VALUES ('9999999999999999999999999999999a', 'stop', '{}', ?1, 1, 'agent', 0, 600)",
        [&"d".repeat(64)],
    )
    .unwrap();
    for sql in [
        // rejected needs who and when, and finished_at
        "UPDATE plans SET state = 'rejected', finished_at = 1 WHERE id = '9999999999999999999999999999999a'",
        "UPDATE plans SET state = 'rejected', rejected_by = 'a', rejected_at = 1 WHERE id = '9999999999999999999999999999999a'",
        // who and when belong to rejected only
        "UPDATE plans SET rejected_by = 'a', rejected_at = 1 WHERE id = '9999999999999999999999999999999a'",
        // a claimed plan was never merely rejected
        "UPDATE plans SET state = 'rejected', rejected_by = 'a', rejected_at = 1, finished_at = 1, claimed_at = 1
             WHERE id = '9999999999999999999999999999999a'",
    ] {
        let error = conn.execute(sql, []).unwrap_err();
        assert!(error.to_string().contains("CHECK"), "{sql}: {error}");
    }
}

#[test]
fn the_awaiting_list_is_unexpired_pending_and_unsettled_plans_newest_first() {
    let (_dir, mut store) = fresh();
    let stuck = needs_inspection(&mut store, 1);
    let (old, new, expired, rejected) = (plan(2, 1100), plan(3, 1200), plan(4, 100), plan(5, 1300));
    store
        .write(|tx| {
            for p in [&old, &new, &expired, &rejected] {
                tx.insert_plan(p, &row(Event::Prepared, "agent"))?;
            }
            tx.reject(&rejected.id, rejected.action, &row(Event::Rejected, "alice"))
        })
        .unwrap();
    // `expired` expired at 700; `old` at 1700 (still open at its last second).
    let now = old.expires_at;
    let listed: Vec<PlanId> =
        store.read(|tx| tx.awaiting_plans(now)).unwrap().into_iter().map(|s| s.plan.id).collect();
    assert_eq!(listed, [new.id.clone(), old.id.clone(), stuck.id.clone()]);
    assert_eq!(store.read(|tx| tx.expired_pending(now)).unwrap(), 1);
    let later: Vec<PlanId> =
        store.read(|tx| tx.awaiting_plans(now + 1)).unwrap().into_iter().map(|s| s.plan.id).collect();
    assert_eq!(later, [new.id, stuck.id], "an expired plan awaits nothing");
    assert_eq!(store.read(|tx| tx.expired_pending(now + 1)).unwrap(), 2);
}

#[test]
fn the_operators_list_queries_use_their_partial_indexes() {
    let (_dir, mut store) = fresh();
    let conn = store.dangerous_connection_for_tests();
    for sql in [SQL_AWAITING, SQL_EXPIRED_PENDING] {
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", sql.replace("?1", "0")))
            .unwrap()
            .query_map([], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let text = plan.join("; ");
        assert!(text.contains("INDEX plans_pending"), "{sql}: {text}");
        assert!(!plan.iter().any(|step| step == "SCAN plans"), "no full scan: {sql}: {text}");
    }
}

#[test]
fn migrating_a_v2_database_keeps_every_row_and_takes_rejections() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut old = old_store(&path, 2);
    let ids: Vec<Plan> = (1..=7).map(|n| plan(n, 1000)).collect();
    old.write(|tx| {
        for p in &ids {
            tx.insert_plan(p, &row(Event::Prepared, "agent"))?;
        }
        // 1 pending, 2 approved+executing, 3 completed, 4 needs_inspection,
        // 5 invalidated, 6 inspected, 7 failed: every v2 state.
        let [_, two, three, four, five, six, seven] = &ids[..] else { unreachable!() };
        tx.approve(&two.id, two.action, &two.digest, &row(Event::Approved, "alice"))?;
        for p in [two, three, four, six, seven] {
            tx.claim(&p.id, p.action, &claim(), &row(Event::Claimed, "agent"))?;
        }
        tx.finish(
            &three.id,
            three.action,
            &claim(),
            PlanOutcome::Completed,
            &row(Event::Completed, "agent"),
        )?;
        tx.abandon(&four.id, four.action, &claim(), &row(Event::ClaimAbandoned, "agent"))?;
        tx.invalidate(&five.id, five.action, PlanOutcome::PolicyChanged, &row(Event::Invalidated, "agent"))?;
        tx.abandon(&six.id, six.action, &claim(), &row(Event::ClaimAbandoned, "agent"))?;
        tx.resolve(&six.id, six.action, &row(Event::Inspected, "bob"))?;
        tx.finish(&seven.id, seven.action, &claim(), PlanOutcome::RolledBack, &row(Event::Failed, "agent"))
    })
    .unwrap();
    // An app row that references a plan: the rebuild must keep it valid.
    old.conn
        .execute(
            "INSERT INTO apps (name, state, host_port, record, plan_id, updated_at) VALUES ('web', 'running', 18001, '{}', ?1, 5)",
            [ids[2].id.as_str()],
        )
        .unwrap();
    let v2_columns = "seq, id, action, body, digest, requires_approval, requester, created_at, expires_at, state, \
                      approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, claimed_at, \
                      finished_at, outcome, resolved_by, resolved_at";
    let plans_before = dump(&old.conn, &format!("SELECT {v2_columns} FROM plans ORDER BY seq"));
    let audit_before = dump(&old.conn, "SELECT * FROM audit ORDER BY seq");
    let apps_before = dump(&old.conn, "SELECT * FROM apps");
    assert_eq!(plans_before.len(), 7);
    drop(old);

    let mut store = Store::open(&path).unwrap();
    let conn = store.dangerous_connection_for_tests();
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    assert_eq!((version, Store::supported_version()), (3, 3));
    assert_eq!(dump(conn, &format!("SELECT {v2_columns} FROM plans ORDER BY seq")), plans_before);
    assert_eq!(dump(conn, "SELECT * FROM audit ORDER BY seq"), audit_before);
    assert_eq!(dump(conn, "SELECT * FROM apps"), apps_before);
    assert_eq!(
        dump(conn, "SELECT count(*) FROM plans WHERE rejected_by IS NOT NULL OR rejected_at IS NOT NULL"),
        ["Integer(0)"]
    );
    assert!(dump(conn, "PRAGMA foreign_key_check").is_empty());
    let fk: i64 = conn.pragma_query_value(None, "foreign_keys", |r| r.get(0)).unwrap();
    assert_eq!(fk, 1, "foreign keys are on again after the migration");
    let indexes =
        dump(conn, "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name");
    assert_eq!(indexes, ["Text(\"audit_plan\")", "Text(\"plans_pending\")", "Text(\"plans_unsettled\")"]);
    let states: Vec<PlanState> =
        ids.iter().map(|p| store.read(|tx| tx.load_plan(&p.id)).unwrap().unwrap().state).collect();
    use PlanState::*;
    assert_eq!(states, [Pending, Executing, Completed, NeedsInspection, Invalidated, Inspected, Failed]);
    // The migrated database takes the new transition, and the old ones.
    let one = &ids[0];
    store.write(|tx| tx.reject(&one.id, one.action, &row(Event::Rejected, "alice"))).unwrap();
    assert_eq!(store.read(|tx| tx.load_plan(&one.id)).unwrap().unwrap().state, Rejected);
    let four = &ids[3];
    store.write(|tx| tx.resolve(&four.id, four.action, &row(Event::Inspected, "alice"))).unwrap();
}
