//! Migration 16 (a refusal window keeps every distinct command digest, its
//! count row carries them; issue 38) on a v15 database with plans, a
//! chained audit and an open window: every row is kept byte for byte, the
//! chain still verifies, the window flushes as before (it learnt no
//! digests before the step, so its count row carries the latest one
//! only), and the new columns take nothing but a list of at most 16.
//! Test-only; real temporary SQLite files.

use super::migration11::columns_at;
use super::migration13::seeded_old_store;
use super::*;

#[test]
fn migrating_a_v15_database_keeps_every_row_the_chain_and_its_open_window() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let audit = columns_at(15, "audit");
    assert_eq!(
        columns_at(16, "audit"),
        format!("{audit}, command_digests, commands_beyond"),
        "two columns added, nothing rebuilt"
    );
    assert!(!MIGRATIONS[15].contains("CREATE TABLE"));
    let old = seeded_old_store(&path, 15);
    old.conn
        .execute(
            "INSERT INTO audit_folds (actor, operation, outcome, code, reason, opened_at, last_at, count,
                 command_bytes, command_sha256)
             VALUES ('agent', 'ssh_gate', 'refused', 'gate_refused', 'not_a_fixed_request', 5000, 5010, 2, 15, ?1)",
            ["e".repeat(64)],
        )
        .unwrap();
    let audit_before = dump(&old.conn, &format!("SELECT {audit} FROM audit ORDER BY seq"));
    assert_eq!(audit_before.len(), 5);
    drop(old);

    let mut store = Store::open(&path).unwrap();
    let conn = store.dangerous_connection_for_tests();
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    assert!(version >= 16, "{version}");
    assert_eq!(dump(conn, &format!("SELECT {audit} FROM audit ORDER BY seq")), audit_before);
    assert_eq!(dump(conn, "SELECT digests, beyond FROM audit_folds"), ["Text(\"[]\")|Integer(0)"]);
    assert!(verify(&mut store, None).intact(), "every link still verifies");

    store.write(|tx| tx.flush_folds(5000 + FOLD_WINDOW_SECS)).unwrap();
    let conn = store.dangerous_connection_for_tests();
    assert_eq!(
        dump(
            conn,
            "SELECT count, command_sha256 = printf('%.64c', 'e'), command_digests, commands_beyond
                    FROM audit WHERE count IS NOT NULL"
        ),
        ["Integer(2)|Integer(1)|Null|Null"]
    );
    assert!(verify(&mut store, None).intact());

    // The columns' shape: a list of 1 to 16 (the window's may be empty).
    let conn = store.dangerous_connection_for_tests();
    let digests = |n: usize| serde_json::Value::from(vec!["a".repeat(64); n]).to_string();
    let insert = |list: &str| {
        conn.execute(
            "INSERT INTO audit (at, event, outcome, actor, command_digests) VALUES (1, 'request', 'refused', 'x', ?1)",
            [list],
        )
    };
    assert!(insert(&digests(16)).is_ok());
    for bad in [digests(17), digests(0), "\"a\"".to_owned(), "not json".to_owned()] {
        assert!(insert(&bad).is_err(), "audit took {bad}");
    }
    let window = |list: &str| conn.execute("UPDATE audit_folds SET digests = ?1", [list]);
    conn.execute(
        "INSERT INTO audit_folds (actor, operation, code, opened_at, last_at, count) VALUES ('a', 'rpc', 'c', 1, 1, 0)",
        [],
    )
    .unwrap();
    assert!(window(&digests(0)).is_ok() && window(&digests(16)).is_ok());
    assert!(window(&digests(17)).is_err() && window("{}").is_err());
}
