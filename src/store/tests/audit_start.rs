//! Issue 22: the kept chain's start must be accounted for. Root could
//! delete the oldest rows and set `audit_anchor` to the first kept row's
//! seq and prev_hash, and `verify` (even `--from` a kept head) passed.
//! Now a start other than the genesis needs the newest audit prune row on
//! the chain to name it. And migration 10 on a v9 database keeps every row,
//! hash and refusal window. Test-only; real temporary SQLite files.

use super::migration9::{AUDIT_V8, FOLDS_V8};
use super::*;

/// `seq`'s prev_hash: what the forger writes into `audit_anchor`.
fn prev_of(store: &mut Store, seq: i64) -> String {
    store
        .dangerous_connection_for_tests()
        .query_row("SELECT prev_hash FROM audit WHERE seq = ?1", [seq], |r| r.get(0))
        .unwrap()
}

/// Deletes rows `..to` and sets the anchor to `(seq, prev)`, as root can.
fn cut_start(store: &mut Store, to: i64, seq: i64, prev: &str) {
    let conn = store.dangerous_connection_for_tests();
    conn.execute("DELETE FROM audit WHERE seq < ?1", [to]).unwrap();
    conn.execute(
        "INSERT INTO audit_anchor (id, seq, prev_hash) VALUES (1, ?1, ?2)
         ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, prev_hash = excluded.prev_hash",
        params![seq, prev],
    )
    .unwrap();
}

/// Fails on the code before migration 10: both walks were intact, the
/// second one with the kept head "on the chain" (it was the forged anchor).
#[test]
fn rows_deleted_from_the_start_behind_a_forged_anchor_are_named_even_against_the_kept_head() {
    let (_dir, mut store) = chained(10);
    let kept = head_hash(&mut store);
    let prev = prev_of(&mut store, 5);
    cut_start(&mut store, 5, 5, &prev);
    let checked = verify(&mut store, Some(&kept));
    assert_eq!(
        checked.broken,
        Some(Break::Unaccounted { seq: 5, at: 1005, missing_from: 1, missing_to: 4 }),
        "{checked:?}"
    );
    assert!(!checked.intact());

    // Every row deleted and the anchor set to the kept head itself.
    let (_dir, mut store) = chained(10);
    let kept = head_hash(&mut store);
    cut_start(&mut store, 11, 11, &kept);
    let checked = verify(&mut store, Some(&kept));
    assert_eq!(checked.broken, Some(Break::Unaccounted { seq: 11, at: 0, missing_from: 1, missing_to: 10 }));
    assert!(!checked.intact(), "{checked:?}");
}

/// Fails on the code before migration 10 (the forged second start passed).
#[test]
fn a_real_prune_accounts_for_its_start_and_a_later_cut_behind_it_is_named() {
    let (_dir, mut store) = chained(10);
    store.begin_request(RequestMeta::new(AuditOperation::AuditPrune, "alice"));
    assert_eq!(store.write(|tx| tx.prune_audit(1003, 9000, "alice")).unwrap(), 2);
    let head = store.read(|tx| tx.audit_head()).unwrap();
    assert_eq!(head.anchor_seq, 3);
    let pruned: (i64, String) = store
        .dangerous_connection_for_tests()
        .query_row("SELECT anchor_seq, anchor_hash FROM audit WHERE event = 'pruned'", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(pruned, (3, head.anchor.clone()), "the prune row names the anchor it set");
    let kept = head_hash(&mut store);
    assert!(verify(&mut store, Some(&kept)).intact());

    let prev = prev_of(&mut store, 7);
    cut_start(&mut store, 7, 7, &prev);
    let checked = verify(&mut store, Some(&kept));
    assert_eq!(
        checked.broken,
        Some(Break::Unaccounted { seq: 7, at: 1007, missing_from: 3, missing_to: 6 }),
        "{checked:?}"
    );
    // The anchor edited back alone does not hide the cut: the rows are gone.
    cut_start(&mut store, 7, 3, &head.anchor);
    assert!(!verify(&mut store, Some(&kept)).intact());
}

/// Migration 10 on a v9 database with a pruned trail and refusal windows
/// open: every row and hash as it was, the chain intact (its legacy prune
/// row names no anchor and is taken as accounting for the start), the
/// windows kept as refusals of no reason, and new rows chain on.
#[test]
fn migrating_a_v9_database_keeps_every_row_hash_and_window() {
    let scratch_dir = tempfile::tempdir().unwrap();
    let scratch = scratch_dir.path().join("scratch.db");
    let mut written = Store::open(&scratch).unwrap();
    written
        .write(|tx| {
            for k in 1..=4 {
                let mut prepared = row(Event::Prepared, "agent");
                prepared.at = 1000 + i64::from(k);
                tx.insert_plan(&plan(k, 1000), &prepared)?;
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
    written.begin_request(RequestMeta::new(AuditOperation::AuditPrune, "alice"));
    written.write(|tx| tx.prune_audit(1003, 1010, "alice")).unwrap();
    written.begin_request(RequestMeta::new(AuditOperation::Execute, "agent"));
    let refused = RequestEnd {
        at: 1020,
        outcome: AuditOutcome::Refused,
        code: Some(Code::PlanNotFound),
        plan_id: None,
        action: None,
    };
    written.end_request(refused.clone()).unwrap();
    written.begin_request(RequestMeta::new(AuditOperation::Execute, "agent"));
    written.end_request(RequestEnd { at: 1030, ..refused }).unwrap();
    // As version 9 wrote it: the prune row names no anchor (and is hashed
    // without one), so the chain from the anchor is computed again.
    written
        .dangerous_connection_for_tests()
        .execute_batch("UPDATE audit SET anchor_seq = NULL, anchor_hash = NULL")
        .unwrap();
    let mut rows = Vec::new();
    written.read(|tx| tx.audit_since(i64::MIN, |e| rows.push(e))).unwrap();
    let mut prev = written.read(|tx| tx.audit_head()).unwrap().anchor;
    for entry in &rows {
        let hash = chain::link(&prev, &entry.content());
        written
            .dangerous_connection_for_tests()
            .execute(
                "UPDATE audit SET prev_hash = ?2, hash = ?3 WHERE seq = ?1",
                params![entry.seq, prev, hash],
            )
            .unwrap();
        prev = hash;
    }
    assert!(verify(&mut written, None).intact());
    drop(written);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let old = old_store(&path, 9);
    let plans = super::migration11::columns_at(9, "plans");
    old.conn.execute("ATTACH DATABASE ?1 AS scratch", [scratch.to_str().unwrap()]).unwrap();
    old.conn
        .execute_batch(&format!(
            "INSERT INTO audit ({AUDIT_V8}) SELECT {AUDIT_V8} FROM scratch.audit;
             INSERT INTO audit_folds ({FOLDS_V8}) SELECT {FOLDS_V8} FROM scratch.audit_folds;
             INSERT INTO audit_anchor SELECT * FROM scratch.audit_anchor;
             INSERT INTO plans ({plans}) SELECT {plans} FROM scratch.plans;
             DETACH DATABASE scratch;"
        ))
        .unwrap();
    let audit_before = dump(&old.conn, &format!("SELECT {AUDIT_V8} FROM audit ORDER BY seq"));
    let folds_before = dump(&old.conn, &format!("SELECT {FOLDS_V8} FROM audit_folds"));
    assert_eq!((audit_before.len(), folds_before.len()), (4, 1), "{audit_before:?}");
    drop(old);

    let mut store = Store::open(&path).unwrap();
    let conn = store.dangerous_connection_for_tests();
    assert_eq!(
        conn.pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0)).unwrap(),
        Store::supported_version()
    );
    assert_eq!(dump(conn, &format!("SELECT {AUDIT_V8} FROM audit ORDER BY seq")), audit_before);
    assert_eq!(dump(conn, &format!("SELECT {FOLDS_V8} FROM audit_folds")), folds_before);
    assert_eq!(dump(conn, "SELECT outcome, reason FROM audit_folds"), ["Text(\"refused\")|Text(\"\")"]);
    assert!(verify(&mut store, None).intact());
    // The open window flushes as before, and the chain goes on.
    store.write(|tx| tx.flush_folds(1020 + FOLD_WINDOW_SECS)).unwrap();
    let conn = store.dangerous_connection_for_tests();
    assert_eq!(
        dump(
            conn,
            "SELECT count, code, gate_reason FROM audit WHERE count IS NOT NULL AND event = 'request'"
        ),
        ["Integer(1)|Text(\"plan_not_found\")|Null"]
    );
    assert!(verify(&mut store, None).intact());
}
