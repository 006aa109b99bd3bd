//! Schema step 14 (a rolled-back plan's failed app container's last lines,
//! `app_log`): one nullable column added to plans, nothing rebuilt, kept
//! once beside a failure and read back whole. Test-only; real temporary
//! SQLite files.

use super::migration11::columns_at;
use super::*;
use crate::logs::AppLog;
use crate::vocab::Refusal;

#[test]
fn the_step_adds_one_nullable_column_and_rebuilds_nothing() {
    // Step 14 itself (step 15 rebuilt both tables later, keeping the columns).
    let step = 14;
    assert_eq!(columns_at(step, "plans"), format!("{}, app_log", columns_at(step - 1, "plans")));
    assert_eq!(columns_at(step, "audit"), columns_at(step - 1, "audit"));
    assert!(!MIGRATIONS[step - 1].contains("CREATE TABLE"), "a column added, no table rebuilt");
}

#[test]
fn a_failed_plan_keeps_its_app_log_once_and_only_beside_its_failure() {
    let (_dir, mut store) = fresh();
    let log = AppLog::render(b"2026-12-01T10:00:00.000000001Z listening on :9090\n", b"", &[]);
    let why = Refusal::new(Code::HealthCheckFailed, "It did not answer.");
    let (failed, done) = (plan(1, 1000), plan(2, 1000));
    store
        .write(|tx| {
            for p in [&failed, &done] {
                tx.insert_plan(p, &row(Event::Prepared, "agent"))?;
            }
            tx.claim(&failed.id, failed.action, &claim(), &row(Event::Claimed, "agent"))?;
            tx.fail(
                &failed.id,
                failed.action,
                &claim(),
                PlanOutcome::RolledBack,
                &why,
                &row(Event::Failed, "agent"),
            )?;
            tx.keep_app_log(&failed.id, &log)
        })
        .unwrap();
    let stored = store.read(|tx| tx.load_plan(&failed.id)).unwrap().unwrap();
    assert_eq!((stored.failure.clone(), stored.app_log.clone()), (Some(why), Some(log.clone())));
    assert_eq!(stored.view().app_log, Some(log.clone()), "the plan view carries it");
    assert!(
        matches!(store.write(|tx| tx.keep_app_log(&failed.id, &log)), Err(StoreError::Conflict(_))),
        "once"
    );
    let pending = store.write(|tx| tx.keep_app_log(&done.id, &log));
    assert!(matches!(pending, Err(StoreError::Conflict(_))), "only beside a failure");
    assert_eq!(store.read(|tx| tx.load_plan(&done.id)).unwrap().unwrap().app_log, None);
    let conn = store.dangerous_connection_for_tests();
    assert!(conn.execute("UPDATE plans SET app_log = 'not json' WHERE seq = 1", []).is_err());
}
