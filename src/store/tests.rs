//! Store tests on real temporary SQLite files, including racing connections.
//!
//! Over 450 lines on purpose: every transition and every migration gets its own
//! test on a real SQLite file.

use std::path::Path;

use rusqlite::{Connection, params};

use super::chain;
use super::schema::MIGRATIONS;
use super::sql;
use super::*;
use crate::actions::plan::Plan;
use crate::vocab::{Code, PlanId, PlanOutcome, PlanState};

fn plan(n: u32, now: i64) -> Plan {
    crate::actions::plan::test_plan(PlanId::parse(&format!("{n:032x}")).unwrap(), now)
}

fn row(event: Event, actor: &str) -> AuditRow {
    AuditRow {
        at: 1000,
        event,
        outcome: AuditOutcome::Ok,
        exit_code: None,
        duration_ms: None,
        actor: actor.into(),
        process: None,
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
    Store::from_connection(conn)
}

/// The audit columns every version before the hash chain (step 4) had.
const AUDIT_V1: &str = "seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor";

/// [`old_store`] holding the history `fill` writes. Today's code chains
/// every audit row it writes, into columns no older schema has, so the
/// history is written into a scratch database at the current version and
/// the columns version `version` had (`plan_columns` of plans, the v1
/// columns of audit) are copied across.
fn old_store_with(
    path: &Path,
    version: usize,
    plan_columns: &str,
    fill: impl FnOnce(&Tx<'_>) -> Result<(), StoreError>,
) -> Store {
    let scratch_dir = tempfile::tempdir().unwrap();
    let scratch = scratch_dir.path().join("scratch.db");
    Store::open(&scratch).unwrap().write(fill).unwrap();
    let old = old_store(path, version);
    old.conn.execute("ATTACH DATABASE ?1 AS scratch", [scratch.to_str().unwrap()]).unwrap();
    old.conn
        .execute_batch(&format!(
            "INSERT INTO plans ({plan_columns}) SELECT {plan_columns} FROM scratch.plans;
             INSERT INTO audit ({AUDIT_V1}) SELECT {AUDIT_V1} FROM scratch.audit;
             INSERT INTO apps SELECT * FROM scratch.apps;
             DETACH DATABASE scratch;"
        ))
        .unwrap();
    old
}

#[test]
fn migrating_a_v1_database_keeps_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let ids: Vec<Plan> = (1..=5).map(|n| plan(n, 1000)).collect();
    let v1_columns = "seq, id, action, body, digest, requires_approval, requester, created_at, expires_at, state, \
                      approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, claimed_at, \
                      finished_at, outcome";
    let old = old_store_with(&path, 1, v1_columns, |tx| {
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
    });
    let plans_before = dump(&old.conn, &format!("SELECT {v1_columns} FROM plans ORDER BY seq"));
    let audit_before = dump(&old.conn, &format!("SELECT {AUDIT_V1} FROM audit ORDER BY seq"));
    assert_eq!((plans_before.len(), audit_before.len()), (5, 5 + 1 + 3 + 2 + 1));
    drop(old);

    // The executing plans' claimer is long gone (upgrade.rs has one that lives).
    let mut store = Store::open_settled(&path, &|_| false).unwrap();
    let conn = store.dangerous_connection_for_tests();
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    assert_eq!(version, Store::supported_version());
    assert_eq!(dump(conn, &format!("SELECT {v1_columns} FROM plans ORDER BY seq")), plans_before);
    assert_eq!(dump(conn, &format!("SELECT {AUDIT_V1} FROM audit ORDER BY seq")), audit_before);
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
            stuck_plans: vec![(stuck.id.clone(), PlanState::NeedsInspection)],
            audit_rows: 4,
            audit_break: None,
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
    store.write(|tx| tx.reject(&p.id, p.action, None, &by)).unwrap();
    let stored = store.read(|tx| tx.load_plan(&p.id)).unwrap().unwrap();
    assert_eq!(stored.state, PlanState::Rejected);
    assert_eq!(stored.rejection, Some(Rejection { by: "alice".into(), at: 2000, reason: None }));
    assert_eq!((stored.finished_at, stored.claimed_at, stored.outcome), (Some(2000), None, None));
    let audit = store.read(|tx| tx.audit_of(&p.id)).unwrap();
    let rows: Vec<_> =
        audit.iter().map(|a| (a.event.as_str(), a.outcome.as_str(), a.actor.as_str())).collect();
    assert_eq!(rows, [("prepared", "ok", "agent"), ("rejected", "ok", "alice")]);
    // Rejected is terminal: not again, not claimed, not approved.
    let again = store.write(|tx| tx.reject(&p.id, p.action, None, &row(Event::Rejected, "bob")));
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
        let result = store.write(|tx| tx.reject(&p.id, p.action, None, &row(Event::Rejected, "alice")));
        assert!(matches!(result, Err(StoreError::Conflict(_))));
        assert_eq!(store.read(|tx| tx.load_plan(&p.id)).unwrap(), before);
    }
    let unknown = plan(3, 1000);
    let result =
        store.write(|tx| tx.reject(&unknown.id, unknown.action, None, &row(Event::Rejected, "alice")));
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
            tx.reject(&rejected.id, rejected.action, None, &row(Event::Rejected, "alice"))
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
    for sql in [sql::AWAITING.sql(), sql::EXPIRED_PENDING.sql()] {
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
    let ids: Vec<Plan> = (1..=7).map(|n| plan(n, 1000)).collect();
    let v2_columns = "seq, id, action, body, digest, requires_approval, requester, created_at, expires_at, state, \
                      approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, claimed_at, \
                      finished_at, outcome, resolved_by, resolved_at";
    let old = old_store_with(&path, 2, v2_columns, |tx| {
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
    });
    // An app row that references a plan: the rebuild must keep it valid.
    old.conn
        .execute(
            "INSERT INTO apps (name, state, host_port, record, plan_id, updated_at) VALUES ('web', 'running', 18001, '{}', ?1, 5)",
            [ids[2].id.as_str()],
        )
        .unwrap();
    let plans_before = dump(&old.conn, &format!("SELECT {v2_columns} FROM plans ORDER BY seq"));
    let audit_before = dump(&old.conn, &format!("SELECT {AUDIT_V1} FROM audit ORDER BY seq"));
    let apps_before = dump(&old.conn, "SELECT * FROM apps");
    assert_eq!(plans_before.len(), 7);
    drop(old);

    // The executing plans' claimer is long gone (upgrade.rs has one that lives).
    let mut store = Store::open_settled(&path, &|_| false).unwrap();
    let conn = store.dangerous_connection_for_tests();
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    assert_eq!(version, Store::supported_version());
    assert_eq!(dump(conn, &format!("SELECT {v2_columns} FROM plans ORDER BY seq")), plans_before);
    assert_eq!(dump(conn, &format!("SELECT {AUDIT_V1} FROM audit ORDER BY seq")), audit_before);
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
    assert_eq!(
        indexes,
        [
            "Text(\"audit_at\")",
            "Text(\"audit_folds_opened\")",
            "Text(\"audit_plan\")",
            "Text(\"plans_finished\")",
            "Text(\"plans_pending\")",
            "Text(\"plans_pending_requester\")",
            "Text(\"plans_unsettled\")"
        ]
    );
    let states: Vec<PlanState> =
        ids.iter().map(|p| store.read(|tx| tx.load_plan(&p.id)).unwrap().unwrap().state).collect();
    use PlanState::*;
    assert_eq!(states, [Pending, Executing, Completed, NeedsInspection, Invalidated, Inspected, Failed]);
    // The migrated database takes the new transition, and the old ones.
    let one = &ids[0];
    store.write(|tx| tx.reject(&one.id, one.action, None, &row(Event::Rejected, "alice"))).unwrap();
    assert_eq!(store.read(|tx| tx.load_plan(&one.id)).unwrap().unwrap().state, Rejected);
    let four = &ids[3];
    store.write(|tx| tx.resolve(&four.id, four.action, &row(Event::Inspected, "alice"))).unwrap();
}

/// A store holding `n` plans, each with its `prepared` audit row (seq 1..=n,
/// at 1000 + seq).
fn chained(n: u32) -> (tempfile::TempDir, Store) {
    let (dir, mut store) = fresh();
    store
        .write(|tx| {
            for k in 1..=n {
                let mut prepared = row(Event::Prepared, "agent");
                prepared.at = 1000 + i64::from(k);
                tx.insert_plan(&plan(k, 1000), &prepared)?;
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
    (dir, store)
}

fn verify(store: &mut Store, from: Option<&str>) -> Verification {
    store.read(|tx| tx.verify_audit(from)).unwrap()
}

fn head_hash(store: &mut Store) -> String {
    store.read(|tx| tx.audit_head()).unwrap().hash().unwrap().to_owned()
}

fn tamper(store: &mut Store, sql: &str) {
    store.dangerous_connection_for_tests().execute_batch(sql).unwrap();
}

#[test]
fn a_clean_chain_verifies_and_each_row_chains_from_the_one_before() {
    let (_dir, mut empty) = fresh();
    let nothing = verify(&mut empty, Some(GENESIS));
    assert!(nothing.intact() && nothing.rows == 0, "{nothing:?}");
    assert_eq!(head_hash(&mut empty), GENESIS);

    let (_dir, mut store) = chained(5);
    let p = plan(1, 1000);
    store.write(|tx| tx.approve(&p.id, p.action, &p.digest, &row(Event::Approved, "alice"))).unwrap();
    let checked = verify(&mut store, None);
    assert_eq!((checked.intact(), checked.rows, checked.broken.clone()), (true, 6, None));
    let hashes =
        dump(store.dangerous_connection_for_tests(), "SELECT prev_hash, hash FROM audit ORDER BY seq");
    assert_eq!(hashes.len(), 6);
    assert!(hashes[0].starts_with(&format!("Text({GENESIS:?})")), "{}", hashes[0]);
    let head = store.read(|tx| tx.audit_head()).unwrap();
    assert_eq!((head.rows, head.last.as_ref().map(|l| l.0)), (6, Some(6)));
    // Every hash of the chain counts as a kept head; anything else does not.
    let all: Vec<String> = store
        .dangerous_connection_for_tests()
        .prepare("SELECT hash FROM audit")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for hash in &all {
        assert!(verify(&mut store, Some(hash)).intact(), "{hash}");
    }
    let unknown = verify(&mut store, Some(&"e".repeat(64)));
    assert_eq!((unknown.intact(), unknown.broken, unknown.from_found), (false, None, Some(false)));
}

#[test]
fn an_edited_row_is_named_by_its_seq_and_time() {
    let (_dir, mut store) = chained(8);
    for sql in [
        "UPDATE audit SET actor = 'mallory' WHERE seq = 4",
        "UPDATE audit SET outcome = 'refused' WHERE seq = 4",
        "UPDATE audit SET at = 5 WHERE seq = 4",
        "UPDATE audit SET exit_code = 0 WHERE seq = 4",
    ] {
        let (_dir, mut store) = chained(8);
        tamper(&mut store, sql);
        let at = if sql.contains("at = 5") { 5 } else { 1004 };
        assert_eq!(verify(&mut store, None).broken, Some(Break::Altered { seq: 4, at }), "{sql}");
    }
    // A hash edited to match nothing, or removed.
    tamper(&mut store, "UPDATE audit SET hash = NULL WHERE seq = 6");
    assert_eq!(verify(&mut store, None).broken, Some(Break::Unhashed { seq: 6, at: 1006 }));
}

#[test]
fn a_deleted_middle_row_is_named_with_the_seqs_that_are_missing() {
    let (_dir, mut store) = chained(8);
    tamper(&mut store, "DELETE FROM audit WHERE seq IN (4, 5)");
    let checked = verify(&mut store, None);
    assert_eq!(checked.broken, Some(Break::Deleted { seq: 6, at: 1006, missing_from: 4, missing_to: 5 }));
    assert!(!checked.intact());
    let (_dir, mut store) = chained(3);
    tamper(&mut store, "DELETE FROM audit WHERE seq = 1");
    assert_eq!(verify(&mut store, None).broken, Some(Break::NotFromGenesis { seq: 2, at: 1002 }));
}

/// Inserts a row at `seq` whose hash is right for its own content, chained
/// from row `chained_from`: what someone with the raw file could write.
fn forge(store: &mut Store, seq: i64, at: i64, chained_from: i64) {
    let conn = store.dangerous_connection_for_tests();
    let prev: String =
        conn.query_row("SELECT hash FROM audit WHERE seq = ?1", [chained_from], |r| r.get(0)).unwrap();
    let one = plan(1, 1000);
    let forged = chain::Content {
        seq,
        at,
        event: "approved",
        plan_id: Some(one.id.as_str()),
        action: Some("stop"),
        outcome: "ok",
        exit_code: None,
        duration_ms: None,
        actor: "mallory",
        ..chain::Content::default()
    };
    conn.execute(
        "INSERT INTO audit (seq, at, event, plan_id, action, outcome, actor, prev_hash, hash)
         VALUES (?1, ?2, 'approved', ?3, 'stop', 'ok', 'mallory', ?4, ?5)",
        params![seq, at, forged.plan_id, prev, chain::link(&prev, &forged)],
    )
    .unwrap();
}

#[test]
fn a_forged_row_is_named_and_a_recomputed_rewrite_is_caught_by_the_kept_head() {
    // A row slipped in between 3 and 4 (the later rows renumbered to make
    // room), with a hash that is right for its own content.
    let (_dir, mut store) = chained(6);
    tamper(
        &mut store,
        "UPDATE audit SET seq = seq + 100 WHERE seq > 3; UPDATE audit SET seq = seq - 99 WHERE seq > 100",
    );
    forge(&mut store, 4, 1003, 3);
    // The forged row itself holds; the row after it was moved (seq changed).
    assert_eq!(verify(&mut store, None).broken, Some(Break::Altered { seq: 5, at: 1004 }));

    // The same forgery by someone who then recomputed every later hash:
    // the chain holds, and only the head the operator kept shows it.
    let (_dir, mut store) = chained(6);
    let kept = head_hash(&mut store);
    let conn = store.dangerous_connection_for_tests();
    conn.execute("UPDATE audit SET actor = 'mallory' WHERE seq = 2", []).unwrap();
    let tx = conn.transaction().unwrap();
    chain::backfill(sql::Sql::new(&tx)).unwrap();
    tx.commit().unwrap();
    assert!(verify(&mut store, None).intact(), "a full recomputation is self-consistent");
    let against_kept = verify(&mut store, Some(&kept));
    assert_eq!((against_kept.intact(), against_kept.from_found), (false, Some(false)));
}

#[test]
fn a_row_that_chains_from_the_wrong_row_is_named() {
    // A forged row appended with a valid hash over the wrong predecessor.
    let (_dir, mut store) = chained(4);
    forge(&mut store, 5, 2000, 2);
    assert_eq!(verify(&mut store, None).broken, Some(Break::Unlinked { seq: 5, at: 2000, after: 4 }));
}

#[test]
fn two_swapped_rows_are_named() {
    let (_dir, mut store) = chained(6);
    tamper(
        &mut store,
        "UPDATE audit SET seq = -3 WHERE seq = 3; UPDATE audit SET seq = 3 WHERE seq = 4;
         UPDATE audit SET seq = 4 WHERE seq = -3;",
    );
    // seq 3 now holds the row written as 4.
    assert_eq!(verify(&mut store, None).broken, Some(Break::Altered { seq: 3, at: 1004 }));
}

#[test]
fn a_cut_tail_is_caught_only_against_the_kept_head() {
    let (_dir, mut store) = chained(8);
    let kept = head_hash(&mut store);
    let earlier: String = store
        .dangerous_connection_for_tests()
        .query_row("SELECT hash FROM audit WHERE seq = 5", [], |r| r.get(0))
        .unwrap();
    tamper(&mut store, "DELETE FROM audit WHERE seq > 6");
    assert!(verify(&mut store, None).intact(), "what is left is a valid chain");
    assert!(verify(&mut store, Some(&earlier)).intact(), "a head kept before the cut still holds");
    let checked = verify(&mut store, Some(&kept));
    assert_eq!((checked.intact(), checked.broken, checked.from_found), (false, None, Some(false)));
    assert_eq!(checked.head.last.map(|(seq, at, _)| (seq, at)), Some((6, 1006)));
}

#[test]
fn nothing_is_chained_onto_a_row_without_a_hash() {
    let (_dir, mut store) = chained(2);
    tamper(&mut store, "UPDATE audit SET hash = NULL WHERE seq = 2");
    let p = plan(1, 1000);
    let result = store.write(|tx| tx.approve(&p.id, p.action, &p.digest, &row(Event::Approved, "alice")));
    assert!(matches!(result, Err(StoreError::Corrupt)), "{result:?}");
    assert!(store.read(|tx| tx.load_plan(&p.id)).unwrap().unwrap().approval.is_none(), "nothing changed");
}

#[test]
fn ten_thousand_rows_verify() {
    let (_dir, mut store) = chained(10_000);
    let started = std::time::Instant::now();
    let checked = verify(&mut store, None);
    let took = started.elapsed();
    assert!(checked.intact() && checked.rows == 10_000, "{checked:?}");
    eprintln!("verified 10,000 audit rows in {took:?}");
}

#[test]
fn migrating_a_v3_database_chains_its_rows_in_order_and_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let ids: Vec<Plan> = (1..=3).map(|n| plan(n, 1000)).collect();
    let v3_columns = "seq, id, action, body, digest, requires_approval, requester, created_at, expires_at, state, \
                      approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, claimed_at, \
                      finished_at, outcome, resolved_by, resolved_at, rejected_by, rejected_at";
    let old = old_store_with(&path, 3, v3_columns, |tx| {
        for p in &ids {
            tx.insert_plan(p, &row(Event::Prepared, "agent"))?;
        }
        tx.approve(&ids[0].id, ids[0].action, &ids[0].digest, &row(Event::Approved, "alice"))?;
        tx.reject(&ids[1].id, ids[1].action, None, &row(Event::Rejected, "bob"))
    });
    let audit_before = dump(&old.conn, &format!("SELECT {AUDIT_V1} FROM audit ORDER BY seq"));
    assert_eq!(audit_before.len(), 5);
    drop(old);

    // The executing plans' claimer is long gone (upgrade.rs has one that lives).
    let mut store = Store::open_settled(&path, &|_| false).unwrap();
    let conn = store.dangerous_connection_for_tests();
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    // Migrated to the newest step, whatever came after the chain's (4).
    assert_eq!(version, Store::supported_version());
    assert!(version >= 4);
    assert_eq!(dump(conn, &format!("SELECT {AUDIT_V1} FROM audit ORDER BY seq")), audit_before);
    assert_eq!(
        dump(conn, "SELECT count(*) FROM audit WHERE hash IS NULL OR prev_hash IS NULL"),
        ["Integer(0)"]
    );
    let checked = verify(&mut store, None);
    assert_eq!((checked.intact(), checked.rows), (true, 5));
    let kept = head_hash(&mut store);
    // The migrated chain takes new rows, chained on from the filled ones.
    let three = &ids[2];
    store.write(|tx| tx.reject(&three.id, three.action, None, &row(Event::Rejected, "alice"))).unwrap();
    let checked = verify(&mut store, Some(&kept));
    assert_eq!((checked.intact(), checked.rows), (true, 6));
    // Backfilled hashes are the same as the ones written row by row.
    let (_dir, mut written) = fresh();
    written
        .write(|tx| {
            for p in &ids {
                tx.insert_plan(p, &row(Event::Prepared, "agent"))?;
            }
            tx.approve(&ids[0].id, ids[0].action, &ids[0].digest, &row(Event::Approved, "alice"))?;
            tx.reject(&ids[1].id, ids[1].action, None, &row(Event::Rejected, "bob"))
        })
        .unwrap();
    assert_eq!(head_hash(&mut written), kept);
}

#[test]
fn health_reports_a_broken_audit_chain_without_changing_anything() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = Store::open(&path).unwrap();
    store.write(|tx| tx.insert_plan(&plan(1, 1000), &row(Event::Prepared, "agent"))).unwrap();
    store.write(|tx| tx.insert_plan(&plan(2, 1000), &row(Event::Prepared, "agent"))).unwrap();
    let health = read_health(&path).unwrap().unwrap();
    assert_eq!((health.audit_rows, health.audit_break), (2, None));
    tamper(&mut store, "UPDATE audit SET actor = 'mallory' WHERE seq = 2");
    drop(store);
    let before = std::fs::read(&path).unwrap();
    let health = read_health(&path).unwrap().unwrap();
    assert_eq!(health.audit_break, Some(Break::Altered { seq: 2, at: 1000 }));
    assert_eq!(std::fs::read(&path).unwrap(), before, "read-only");
}

mod app_log;
mod audit_start;
mod migration11;
mod migration13;
mod migration15;
mod migration16;
mod migration17;
mod migration5;
mod migration9;
mod statements;
mod upgrade;
mod witness;
