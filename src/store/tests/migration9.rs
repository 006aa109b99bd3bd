//! Migration 9 (the index `audit_folds_opened`) on a v8 database with
//! refusal windows open and closed: every row and window is kept, the index
//! is there, and the windows flush exactly as before the step. Test-only;
//! real temporary SQLite files.

use super::*;

/// The columns of `audit` at version 8 (migration 10 added two).
pub(super) const AUDIT_V8: &str = "seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor, \
    operation, app, code, process, request_id, count, sudo_uid, login_uid, gate_reason, command_bytes, \
    command_sha256, prev_hash, hash";
/// The columns of `audit_folds` before migration 10 rebuilt it.
pub(super) const FOLDS_V8: &str = "actor, operation, code, opened_at, last_at, count";

/// One refused `execute` by `actor` at `at` (a first one opens a window).
fn refuse(store: &mut Store, actor: &str, at: i64) {
    store.begin_request(RequestMeta::new(AuditOperation::Execute, actor));
    let end = RequestEnd {
        at,
        outcome: AuditOutcome::Refused,
        code: Some(Code::PlanNotFound),
        plan_id: None,
        action: None,
    };
    store.end_request(end).unwrap();
}

#[test]
fn migrating_a_v8_database_keeps_its_refusal_windows_and_they_flush_as_before() {
    // The history, written (and chained) by today's code in a scratch store:
    // `old` opened a window at 1000 with two repeats, `new` one at 1050.
    let scratch_dir = tempfile::tempdir().unwrap();
    let scratch = scratch_dir.path().join("scratch.db");
    let mut written = Store::open(&scratch).unwrap();
    for (actor, at) in [("old", 1000), ("old", 1010), ("old", 1020), ("new", 1050)] {
        refuse(&mut written, actor, at);
    }
    drop(written);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let old = old_store(&path, 8);
    old.conn.execute("ATTACH DATABASE ?1 AS scratch", [scratch.to_str().unwrap()]).unwrap();
    old.conn
        .execute_batch(&format!(
            "INSERT INTO audit ({AUDIT_V8}) SELECT {AUDIT_V8} FROM scratch.audit;
             INSERT INTO audit_folds ({FOLDS_V8}) SELECT {FOLDS_V8} FROM scratch.audit_folds;
             DETACH DATABASE scratch;",
        ))
        .unwrap();
    let audit_before = dump(&old.conn, &format!("SELECT {AUDIT_V8} FROM audit ORDER BY seq"));
    let folds_before = dump(&old.conn, &format!("SELECT {FOLDS_V8} FROM audit_folds ORDER BY actor"));
    assert_eq!((audit_before.len(), folds_before.len()), (2, 2));
    drop(old);

    let mut store = Store::open(&path).unwrap();
    let conn = store.dangerous_connection_for_tests();
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    assert_eq!(version, Store::supported_version());
    assert!(version >= 9);
    assert_eq!(dump(conn, &format!("SELECT {AUDIT_V8} FROM audit ORDER BY seq")), audit_before);
    assert_eq!(dump(conn, &format!("SELECT {FOLDS_V8} FROM audit_folds ORDER BY actor")), folds_before);
    let indexes =
        dump(conn, "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'audit_folds'");
    assert!(indexes.iter().any(|i| i.contains("audit_folds_opened")), "{indexes:?}");

    // At the first second `old`'s window is closed and `new`'s is not: only
    // `old`'s two repeats are appended, as one counted row at its last time.
    let now = 1000 + FOLD_WINDOW_SECS;
    store.write(|tx| tx.flush_folds(now)).unwrap();
    let conn = store.dangerous_connection_for_tests();
    assert_eq!(
        dump(conn, "SELECT actor, count, at FROM audit WHERE count IS NOT NULL"),
        ["Text(\"old\")|Integer(2)|Integer(1020)"]
    );
    assert_eq!(dump(conn, "SELECT actor FROM audit_folds"), ["Text(\"new\")"]);
    assert!(verify(&mut store, None).intact());
}
