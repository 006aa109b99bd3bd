//! Migration 5 (the `start` and `update` actions) on a chained v4
//! database: every plan and audit row is kept byte for byte, the hash
//! chain still verifies from its first row and from the old head, and new
//! rows chain on. Test-only; real temporary SQLite files.

use super::*;

/// Every column of the plans table since step 3, and of audit since step 4.
const PLANS_V3: &str = "seq, id, action, body, digest, requires_approval, requester, created_at, expires_at, \
                        state, approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, \
                        claimed_at, finished_at, outcome, resolved_by, resolved_at, rejected_by, rejected_at";
const AUDIT_V4: &str =
    "seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor, prev_hash, hash";

#[test]
fn migrating_a_chained_v4_database_keeps_every_row_and_the_chain_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let plans: Vec<Plan> = (1..=3).map(|n| plan(n, 1000)).collect();
    // The history, written (and chained) by today's code in a scratch store.
    let scratch_dir = tempfile::tempdir().unwrap();
    let scratch = scratch_dir.path().join("scratch.db");
    Store::open(&scratch)
        .unwrap()
        .write(|tx| {
            for p in &plans {
                tx.insert_plan(p, &row(Event::Prepared, "agent"))?;
            }
            tx.approve(&plans[0].id, plans[0].action, &plans[0].digest, &row(Event::Approved, "alice"))?;
            tx.reject(&plans[1].id, plans[1].action, None, &row(Event::Rejected, "bob"))
        })
        .unwrap();
    let old = old_store(&path, 4);
    old.conn.execute("ATTACH DATABASE ?1 AS scratch", [scratch.to_str().unwrap()]).unwrap();
    old.conn
        .execute_batch(&format!(
            "INSERT INTO plans ({PLANS_V3}) SELECT {PLANS_V3} FROM scratch.plans;
             INSERT INTO audit ({AUDIT_V4}) SELECT {AUDIT_V4} FROM scratch.audit;
             DETACH DATABASE scratch;"
        ))
        .unwrap();
    let plans_before = dump(&old.conn, &format!("SELECT {PLANS_V3} FROM plans ORDER BY seq"));
    let audit_before = dump(&old.conn, &format!("SELECT {AUDIT_V4} FROM audit ORDER BY seq"));
    assert_eq!(audit_before.len(), 5);
    drop(old);

    let mut store = Store::open(&path).unwrap();
    let conn = store.dangerous_connection_for_tests();
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    // Migrated through step 5 to the newest step.
    assert_eq!(version, Store::supported_version());
    assert!(version >= 5);
    assert_eq!(dump(conn, &format!("SELECT {PLANS_V3} FROM plans ORDER BY seq")), plans_before);
    assert_eq!(dump(conn, &format!("SELECT {AUDIT_V4} FROM audit ORDER BY seq")), audit_before);
    // The indexes the rebuild dropped with the old tables are back.
    let indexes =
        dump(conn, "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name");
    for name in ["audit_plan", "plans_pending", "plans_unsettled"] {
        assert!(indexes.iter().any(|i| i.contains(name)), "{name} missing: {indexes:?}");
    }
    let checked = verify(&mut store, None);
    assert_eq!((checked.intact(), checked.rows), (true, 5));
    let kept = head_hash(&mut store);
    let three = &plans[2];
    store.write(|tx| tx.reject(&three.id, three.action, None, &row(Event::Rejected, "alice"))).unwrap();
    let checked = verify(&mut store, Some(&kept));
    assert_eq!((checked.intact(), checked.rows), (true, 6));
}
