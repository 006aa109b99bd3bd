//! Bounded state and the chain across migration 6 and `audit prune`: on
//! real temporary SQLite files.

use super::*;
use crate::actions::plan::Plan;
use crate::store::{AuditRow, RequestMeta, Store};
use crate::vocab::PlanId;

fn plan(n: u32, now: i64) -> Plan {
    crate::actions::plan::test_plan(PlanId::parse(&format!("{n:032x}")).unwrap(), now)
}

fn row(event: Event, at: i64) -> AuditRow {
    AuditRow {
        at,
        event,
        outcome: AuditOutcome::Ok,
        exit_code: None,
        duration_ms: None,
        actor: "agent".into(),
        process: None,
    }
}

fn fresh() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state.db")).unwrap();
    (dir, store)
}

fn count(store: &mut Store, sql: &str) -> i64 {
    store.dangerous_connection_for_tests().query_row(sql, [], |r| r.get(0)).unwrap()
}

fn intact(store: &mut Store) -> bool {
    store.read(|tx| tx.verify_audit(None)).unwrap().intact()
}

/// Plans 1..=n prepared at 1000+k; odd ones rejected at 2000+k.
fn history(store: &mut Store, n: u32) {
    store
        .write(|tx| {
            for k in 1..=n {
                let p = plan(k, 1000 + i64::from(k));
                tx.insert_plan(&p, &row(Event::Prepared, 1000 + i64::from(k)))?;
                if k % 2 == 1 {
                    tx.reject(&p.id, p.action, None, &row(Event::Rejected, 2000 + i64::from(k)))?;
                }
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
}

#[test]
fn only_plans_that_can_never_be_used_again_are_pruned_and_the_pruning_is_recorded() {
    let (_dir, mut store) = fresh();
    history(&mut store, 10);
    // Cut at 2006: rejected 1, 3, 5 finished before it; the even ones are
    // pending and (test plans live 600 s) expired at 1602.. < 2006 too.
    let removed = store.write(|tx| tx.prune_plans(2006, 5000, "agent")).unwrap();
    assert_eq!(removed, 3 + 5);
    assert_eq!(count(&mut store, "SELECT count(*) FROM plans"), 2, "rejected 7 and 9 are younger");
    let pruned = count(&mut store, "SELECT count FROM audit WHERE event = 'pruned'");
    assert_eq!(pruned, 8);
    assert_eq!(count(&mut store, "SELECT count(*) FROM audit WHERE event <> 'pruned'"), 15, "history kept");
    assert!(intact(&mut store));
    // Nothing due: no row.
    assert_eq!(store.write(|tx| tx.prune_plans(2006, 5001, "agent")).unwrap(), 0);
    assert_eq!(count(&mut store, "SELECT count(*) FROM audit WHERE event = 'pruned'"), 1);
}

#[test]
fn an_unexpired_pending_plan_and_an_executing_one_are_never_pruned() {
    let (_dir, mut store) = fresh();
    let (young, running) = (plan(1, 10_000), plan(2, 1000));
    store
        .write(|tx| {
            tx.insert_plan(&young, &row(Event::Prepared, 10_000))?;
            tx.insert_plan(&running, &row(Event::Prepared, 1000))?;
            let claim = crate::store::Claim { pid: 1, start_time: 1, boot_id: "b".into() };
            tx.claim(&running.id, running.action, &claim, &row(Event::Claimed, 1001))
        })
        .unwrap();
    assert_eq!(store.write(|tx| tx.prune_plans(10_500, 10_500, "agent")).unwrap(), 0);
    assert_eq!(count(&mut store, "SELECT count(*) FROM plans"), 2);
}

#[test]
fn one_run_prunes_at_most_a_batch() {
    let (_dir, mut store) = fresh();
    history(&mut store, (PRUNE_BATCH as u32) + 10);
    let first = store.write(|tx| tx.prune_plans(1_000_000, 1_000_000, "agent")).unwrap();
    assert_eq!(first, PRUNE_BATCH as u64);
    let second = store.write(|tx| tx.prune_plans(1_000_000, 1_000_001, "agent")).unwrap();
    assert_eq!(second, 10);
}

#[test]
fn pending_plans_are_counted_per_requester_and_only_until_they_expire() {
    let (_dir, mut store) = fresh();
    history(&mut store, 4);
    // 2 and 4 pending, expiring at 1602 and 1604.
    assert_eq!(store.read(|tx| tx.pending_of("agent", 1500)).unwrap(), 2);
    assert_eq!(store.read(|tx| tx.pending_of("agent", 1603)).unwrap(), 1);
    assert_eq!(store.read(|tx| tx.pending_of("other", 1500)).unwrap(), 0);
}

#[test]
fn audit_prune_keeps_the_chain_verifiable_from_its_new_anchor() {
    let (_dir, mut store) = fresh();
    // Six prepared rows at 1001..=1006, then three rejections at 2001..
    store
        .write(|tx| {
            for k in 1..=6 {
                tx.insert_plan(&plan(k, 1000 + i64::from(k)), &row(Event::Prepared, 1000 + i64::from(k)))?;
            }
            for k in 1..=3 {
                let p = plan(k, 0);
                tx.reject(&p.id, p.action, None, &row(Event::Rejected, 2000 + i64::from(k)))?;
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let rows_before = count(&mut store, "SELECT count(*) FROM audit");
    store.begin_request(RequestMeta::new(AuditOperation::AuditPrune, "alice"));
    let dropped = store.write(|tx| tx.prune_audit(2000, 9000, "alice")).unwrap();
    assert_eq!(dropped, 6, "the six prepared rows");
    let uid_row =
        count(&mut store, "SELECT count(*) FROM audit WHERE event = 'pruned' AND operation = 'audit_prune'");
    assert_eq!(uid_row, 1, "the pruning is recorded");
    assert_eq!(count(&mut store, "SELECT count(*) FROM audit"), rows_before - 6 + 1);
    let checked = store.read(|tx| tx.verify_audit(None)).unwrap();
    assert!(checked.intact(), "{checked:?}");
    // New rows chain on; the anchor is what the kept head verifies from.
    history(&mut store, 0);
    let kept = store.read(|tx| tx.audit_head()).unwrap().hash().unwrap().to_owned();
    store.write(|tx| tx.prune_plans(1_000_000, 9001, "agent")).unwrap();
    assert!(store.read(|tx| tx.verify_audit(Some(&kept))).unwrap().intact());
    // Deleting the first kept row is still caught.
    store
        .dangerous_connection_for_tests()
        .execute_batch("DELETE FROM audit WHERE seq = (SELECT min(seq) FROM audit)")
        .unwrap();
    assert!(!intact(&mut store));
}

#[test]
fn pruning_everything_then_appending_chains_from_the_last_dropped_row() {
    let (_dir, mut store) = fresh();
    history(&mut store, 2);
    let last = store.read(|tx| tx.audit_head()).unwrap().hash().unwrap().to_owned();
    store.write(|tx| tx.prune_audit(1_000_000, 1_000_000, "alice")).unwrap();
    // Only the pruning's own row is left, chained from the dropped head.
    let prev: String = store
        .dangerous_connection_for_tests()
        .query_row("SELECT prev_hash FROM audit", [], |r| r.get(0))
        .unwrap();
    assert_eq!(prev, last);
    assert!(intact(&mut store));
}

#[test]
fn rows_written_before_migration_6_verify_and_new_rows_hash_their_new_columns() {
    let (_dir, mut store) = fresh();
    history(&mut store, 1);
    // A new row's request columns are in its content: changing one breaks it.
    let mut meta = RequestMeta::new(AuditOperation::Inventory, "agent");
    meta.request_id = Some("r-1".into());
    store.begin_request(meta);
    store
        .end_request(crate::store::RequestEnd {
            at: 3000,
            outcome: AuditOutcome::Ok,
            code: None,
            plan_id: None,
            action: None,
        })
        .unwrap();
    assert!(intact(&mut store));
    store
        .dangerous_connection_for_tests()
        .execute_batch("UPDATE audit SET request_id = 'r-2' WHERE request_id = 'r-1'")
        .unwrap();
    let checked = store.read(|tx| tx.verify_audit(None)).unwrap();
    assert!(matches!(checked.broken, Some(crate::store::Break::Altered { .. })), "{checked:?}");
}

#[test]
fn each_committed_row_is_copied_to_a_listening_syslog_socket_and_a_rolled_back_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("log");
    let listener = std::os::unix::net::UnixDatagram::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let (_db, mut store) = fresh();
    store.send_to_syslog(&socket);
    history(&mut store, 1);
    let _ = store.write(|tx| {
        tx.insert_plan(&plan(9, 1000), &row(Event::Prepared, 1000))?;
        Err::<(), _>(StoreError::Corrupt)
    });
    let mut got = Vec::new();
    let mut buffer = [0u8; 4096];
    while let Ok(n) = listener.recv(&mut buffer) {
        got.push(String::from_utf8(buffer[..n].to_vec()).unwrap());
    }
    assert_eq!(got.len(), 2, "prepared and rejected, not the rolled-back row: {got:?}");
    let json: serde_json::Value =
        serde_json::from_str(got[0].strip_prefix("<86>volce-lab-host: ").unwrap()).unwrap();
    assert_eq!((json["seq"].as_i64(), json["event"].as_str()), (Some(1), Some("prepared")));
    let hash: String = store
        .dangerous_connection_for_tests()
        .query_row("SELECT hash FROM audit WHERE seq = 1", [], |r| r.get(0))
        .unwrap();
    assert_eq!(json["hash"], hash);
    // Nobody listening: nothing fails.
    drop(listener);
    history(&mut store, 0);
    store.write(|tx| tx.prune_plans(1_000_000, 5000, "agent")).unwrap();
}

#[test]
fn audit_prune_refuses_a_broken_chain_and_drops_nothing() {
    let (_dir, mut store) = fresh();
    history(&mut store, 4);
    store
        .dangerous_connection_for_tests()
        .execute_batch("UPDATE audit SET actor = 'mallory' WHERE seq = 3")
        .unwrap();
    let before = count(&mut store, "SELECT count(*) FROM audit");
    let refused = store.write(|tx| tx.prune_audit(1_000_000, 1_000_000, "alice")).unwrap_err();
    assert_eq!(refused.refusal().code, crate::vocab::Code::AuditChainBroken);
    assert_eq!(count(&mut store, "SELECT count(*) FROM audit"), before);
}

#[test]
fn audit_prune_with_nothing_older_changes_nothing_but_leaves_its_row() {
    let (_dir, mut store) = fresh();
    history(&mut store, 2);
    let before = count(&mut store, "SELECT count(*) FROM audit");
    assert_eq!(store.write(|tx| tx.prune_audit(0, 5000, "alice")).unwrap(), 0);
    assert_eq!(count(&mut store, "SELECT count(*) FROM audit"), before + 1);
    assert!(intact(&mut store));
}

/// A read's `request` row at `at` by `actor` (first of its kind: a row).
fn read_at(store: &mut Store, actor: &str, at: i64) {
    store.begin_request(RequestMeta::new(AuditOperation::Inventory, actor));
    let end =
        crate::store::RequestEnd { at, outcome: AuditOutcome::Ok, code: None, plan_id: None, action: None };
    store.end_request(end).unwrap();
}

/// Issue 22: audit rows were never dropped but by the operator. Fails on the
/// code before (every row stayed): rows older than the audit retention go,
/// a batch per request, each pruning a chained row that names its anchor,
/// and the chain verifies throughout.
#[test]
fn audit_rows_older_than_their_retention_are_dropped_a_batch_at_a_time_with_a_prune_row() {
    let (_dir, mut store) = fresh();
    let old = 1500;
    store
        .write(|tx| {
            for k in 0..old {
                tx.insert_plan(&plan(k + 1, 1000), &row(Event::Prepared, 1000 + i64::from(k)))?;
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let later = 1000 + AUDIT_RETENTION_DAYS * 86_400 + 10_000;
    read_at(&mut store, "agent", later);
    let kept = count(&mut store, "SELECT count(*) FROM audit WHERE event = 'prepared'");
    assert_eq!(kept, i64::from(old) - AUDIT_PRUNE_BATCH, "one batch");
    let anchor: (i64, i64) = store
        .dangerous_connection_for_tests()
        .query_row("SELECT anchor_seq, count FROM audit WHERE event = 'pruned'", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(anchor, (AUDIT_PRUNE_BATCH + 1, AUDIT_PRUNE_BATCH));
    assert!(intact(&mut store));
    read_at(&mut store, "other", later + 1);
    assert_eq!(count(&mut store, "SELECT count(*) FROM audit WHERE event = 'prepared'"), 0);
    assert_eq!(count(&mut store, "SELECT count(*) FROM audit WHERE event = 'pruned'"), 2);
    assert!(intact(&mut store));
    // Nothing more is due: the next request leaves only its own row.
    let rows = count(&mut store, "SELECT count(*) FROM audit");
    read_at(&mut store, "third", later + 2);
    assert_eq!(count(&mut store, "SELECT count(*) FROM audit"), rows + 1);
}

/// Retention never drops a row that does not verify: the break stays for
/// `audit verify` and the doctor to name.
#[test]
fn audit_retention_drops_nothing_when_its_rows_do_not_verify() {
    let (_dir, mut store) = fresh();
    history(&mut store, 4);
    store
        .dangerous_connection_for_tests()
        .execute_batch("UPDATE audit SET actor = 'x' WHERE seq = 2")
        .unwrap();
    let rows = count(&mut store, "SELECT count(*) FROM audit");
    read_at(&mut store, "agent", 1000 + AUDIT_RETENTION_DAYS * 86_400 + 10_000);
    assert_eq!(count(&mut store, "SELECT count(*) FROM audit"), rows + 1, "only the read's row");
    assert_eq!(count(&mut store, "SELECT count(*) FROM audit WHERE event = 'pruned'"), 0);
    assert!(!intact(&mut store));
}

/// Issue 22: the free-space floor held for a prepare only; every other
/// write (a read's row, a refusal's) could take the filesystem to its last
/// byte. Fails on the code before (the read's row was written): below the
/// floor every write is refused `state_full` and nothing is written.
#[test]
fn every_write_below_the_free_space_floor_is_refused_state_full_and_writes_nothing() {
    let (_dir, mut store) = fresh();
    history(&mut store, 2);
    let rows = count(&mut store, "SELECT count(*) FROM audit");
    store.set_free_space_floor_for_tests(u64::MAX);
    store.begin_request(RequestMeta::new(AuditOperation::Inventory, "agent"));
    let end = crate::store::RequestEnd {
        at: 5000,
        outcome: AuditOutcome::Ok,
        code: None,
        plan_id: None,
        action: None,
    };
    let refused = store.end_request(end).unwrap_err();
    assert_eq!(refused.refusal().code, crate::vocab::Code::StateFull);
    assert!(crate::store::space::is_below_floor(&refused));
    let refused = store.write(|tx| tx.prune_plans(1_000_000, 5000, "agent")).unwrap_err();
    assert_eq!(refused.refusal().code, crate::vocab::Code::StateFull);
    assert_eq!(count(&mut store, "SELECT count(*) FROM audit"), rows);
    // Reads still work; with room again, writes do.
    assert!(intact(&mut store));
    store.set_free_space_floor_for_tests(0);
    read_at(&mut store, "agent", 5001);
    assert_eq!(count(&mut store, "SELECT count(*) FROM audit"), rows + 1);
}
