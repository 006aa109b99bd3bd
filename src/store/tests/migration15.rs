//! Migration 15 (the action names leave both action CHECKs; a name's shape
//! stays) on a v14 database with plans, an app log and a chained audit:
//! every row is kept byte for byte, the chain still verifies, and an
//! action no version has yet, refused by v14's schema, is accepted, while
//! a name of the wrong shape is still refused. Test-only; real temporary
//! SQLite files.

use super::migration11::columns_at;
use super::migration13::{reopened_keeping, seeded_old_store};
use super::*;

#[test]
fn migrating_a_v14_database_keeps_every_row_and_the_chain_and_accepts_any_action_name_of_the_shape() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let (plans, audit) = (columns_at(14, "plans"), columns_at(14, "audit"));
    assert_eq!(plans, columns_at(15, "plans"), "the same columns, in the same order");
    assert_eq!(audit, columns_at(15, "audit"));
    let old = seeded_old_store(&path, 14);
    old.conn.execute("UPDATE plans SET app_log = '{\"lines\":[]}' WHERE seq = 2", []).unwrap();
    let refused = old.conn.execute("UPDATE plans SET action = 'run_task' WHERE seq = 1", []);
    assert!(refused.is_err(), "v14's CHECK knows no run_task");
    let plans_before = dump(&old.conn, &format!("SELECT {plans} FROM plans ORDER BY seq"));
    let audit_before = dump(&old.conn, &format!("SELECT {audit} FROM audit ORDER BY seq"));
    assert_eq!((plans_before.len(), audit_before.len()), (3, 5));
    drop(old);

    let mut store = reopened_keeping(&path, 15, (&plans, &audit), (&plans_before, &audit_before));
    let conn = store.dangerous_connection_for_tests();
    conn.execute("UPDATE audit SET action = 'run_task' WHERE seq = 1", []).unwrap();
    conn.execute("UPDATE plans SET action = 'run_task' WHERE seq = 1", []).unwrap();
    assert!(conn.execute("UPDATE plans SET action = 'Reboot' WHERE seq = 1", []).is_err());
    assert!(conn.execute("UPDATE audit SET action = 'run task' WHERE seq = 1", []).is_err());
}
