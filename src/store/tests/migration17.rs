//! Migration 17 (`audit.operation` keeps only a name's shape; a signed
//! approval's `signer_key` and `statement_sha256`) on a v16 database with
//! plans and a chained audit: every row is kept byte for byte, the chain
//! still verifies, an operation no version had is accepted where v16
//! refused it, a name of another shape is still refused, and the new
//! columns check their shapes. Test-only; real temporary SQLite files.

use super::migration11::columns_at;
use super::migration13::{reopened_keeping, seeded_old_store};
use super::*;

#[test]
fn migrating_a_v16_database_keeps_every_row_and_the_chain_and_takes_any_operation_of_the_shape() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let (plans, audit) = (columns_at(16, "plans"), columns_at(16, "audit"));
    assert_eq!(plans, columns_at(17, "plans"), "plans is not rebuilt");
    assert_eq!(
        format!("{audit}, signer_key, statement_sha256"),
        columns_at(17, "audit"),
        "the old columns in their order, then the two new ones"
    );
    let old = seeded_old_store(&path, 16);
    let refused = old.conn.execute("UPDATE audit SET operation = 'statement' WHERE seq = 1", []);
    assert!(refused.is_err(), "v16's CHECK knows no statement operation");
    let plans_before = dump(&old.conn, &format!("SELECT {plans} FROM plans ORDER BY seq"));
    let audit_before = dump(&old.conn, &format!("SELECT {audit} FROM audit ORDER BY seq"));
    drop(old);

    let mut store = reopened_keeping(&path, 17, (&plans, &audit), (&plans_before, &audit_before));
    let conn = store.dangerous_connection_for_tests();
    conn.execute("UPDATE audit SET operation = 'statement' WHERE seq = 1", []).unwrap();
    assert!(conn.execute("UPDATE audit SET operation = 'State Backup' WHERE seq = 1", []).is_err());
    let signer = |key: &str, sha: &str| {
        conn.execute("UPDATE audit SET signer_key = ?1, statement_sha256 = ?2 WHERE seq = 2", [key, sha])
    };
    assert!(signer("SHA256:abcdefgh", &"0".repeat(64)).is_ok());
    assert!(signer("MD5:ab:cd", &"0".repeat(64)).is_err(), "a fingerprint is SHA256:...");
    assert!(signer("SHA256:abcdefgh", &"G".repeat(64)).is_err(), "a digest is lowercase hex");
}
