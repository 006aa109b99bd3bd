//! Every statement of `sql.rs` that a request path runs is served by an
//! index or a bounded range, on a database with history: `EXPLAIN QUERY
//! PLAN` of each, without and then with the planner's statistics, shows no
//! full scan of `plans`, `audit` (the request rows among them) or
//! `audit_folds`. And the store's code runs no SQL that is not in that
//! table. Test-only; a real temporary SQLite file.
//!
//! On the code before migration 9 this failed on three statements:
//! `FOLDS_CLOSED` and `FOLDS_DROP` (`SCAN audit_folds`: `opened_at + ?1 <=
//! ?2` can use no index, and no index was there) and `LAST_ROW` (`SCAN
//! audit`: `ORDER BY seq DESC LIMIT 1`, which reads one row, but says so in
//! no plan a test can hold it to, so it is now `max(seq)`).

use super::sql::{self, Reach, Statement};
use super::*;

/// The tables whose size grows with the history.
const GROWING: [&str; 3] = ["plans", "audit", "audit_folds"];

/// A store with history: plans in every state, the state changes' rows and
/// request rows, open refusal windows, apps and image claims. Bulk rows are
/// written through the raw connection (their hashes do not matter to a
/// query plan); a few through the transitions, so every table has real rows.
fn with_history() -> (tempfile::TempDir, Store) {
    let (dir, mut store) = fresh();
    let stuck = plan(1, 1000);
    store
        .write(|tx| {
            tx.insert_plan(&stuck, &row(Event::Prepared, "agent"))?;
            tx.claim(&stuck.id, stuck.action, &claim(), &row(Event::Claimed, "agent"))?;
            tx.finish(
                &stuck.id,
                stuck.action,
                &claim(),
                PlanOutcome::EngineFailed,
                &row(Event::Failed, "agent"),
            )
        })
        .unwrap();
    let conn = store.dangerous_connection_for_tests();
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
         INSERT INTO plans (id, action, body, digest, requires_approval, requester, created_at, expires_at,
             state, approved_by, approved_at, approved_digest, claim_pid, claim_start, claim_boot, claimed_at,
             finished_at, outcome, rejected_by, rejected_at)
         SELECT printf('%032x', 4096 + i), 'stop', '{}', printf('%064x', i), 1, 'agent' || (i % 7), i, i + 600,
             CASE i % 3 WHEN 0 THEN 'completed' WHEN 1 THEN 'pending' ELSE 'rejected' END,
             NULL, NULL, NULL, CASE i % 3 WHEN 0 THEN 1 END, CASE i % 3 WHEN 0 THEN 1 END,
             CASE i % 3 WHEN 0 THEN 'boot' END, CASE i % 3 WHEN 0 THEN i END,
             CASE i % 3 WHEN 1 THEN NULL ELSE i END, CASE i % 3 WHEN 0 THEN 'completed' END,
             CASE i % 3 WHEN 2 THEN 'alice' END, CASE i % 3 WHEN 2 THEN i END
         FROM n;
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
         INSERT INTO audit (at, event, plan_id, action, outcome, actor, operation, code)
         SELECT i, CASE WHEN i % 4 = 0 THEN 'prepared' ELSE 'request' END,
             CASE WHEN i % 4 = 0 THEN printf('%032x', 4096 + i % 3000) END, CASE WHEN i % 4 = 0 THEN 'stop' END,
             CASE WHEN i % 2 = 0 THEN 'ok' ELSE 'refused' END, 'agent', 'inventory',
             CASE WHEN i % 2 = 1 THEN 'plan_not_found' END
         FROM n;
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
         INSERT INTO audit_folds (actor, operation, code, opened_at, last_at, count)
         SELECT 'agent' || i, 'execute', 'plan_not_found', i, i, i % 5 FROM n;",
    )
    .unwrap();
    (dir, store)
}

/// Whether the index `name` is partial (`CREATE INDEX ... WHERE ...`): a
/// walk of it reads only the rows in a bounded state, not the history.
/// A step's `INDEX` word that names no index of ours (`SCAN json_each
/// VIRTUAL TABLE INDEX 1:`, a table-valued function over one value) is no
/// partial index.
fn is_partial(conn: &Connection, name: &str) -> bool {
    use rusqlite::OptionalExtension as _;
    conn.query_row("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?1", [name], |r| {
        r.get::<_, Option<String>>(0)
    })
    .optional()
    .unwrap()
    .flatten()
    .is_some_and(|sql| sql.contains(" WHERE "))
}

/// The steps of `statement`'s query plan that read a growing table whole:
/// `SCAN <table>`, unless through a partial index.
fn full_scans(conn: &Connection, statement: Statement) -> Vec<String> {
    let mut explain = conn.prepare(&format!("EXPLAIN QUERY PLAN {}", statement.sql())).unwrap();
    // The plan does not depend on the values, only on their places.
    for at in 1..=explain.parameter_count() {
        explain.raw_bind_parameter(at, rusqlite::types::Null).unwrap();
    }
    let mut rows = explain.raw_query();
    let mut scans = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        let step: String = row.get(3).unwrap();
        let words: Vec<&str> = step.split_whitespace().collect();
        let growing = words.first() == Some(&"SCAN") && words.get(1).is_some_and(|t| GROWING.contains(t));
        let through_partial = words
            .iter()
            .position(|w| *w == "INDEX")
            .and_then(|at| words.get(at + 1))
            .is_some_and(|index| is_partial(conn, index));
        if growing && !through_partial {
            scans.push(step);
        }
    }
    scans
}

#[test]
fn every_request_statement_is_served_by_an_index_on_a_database_with_history() {
    let (_dir, mut store) = with_history();
    let conn = store.dangerous_connection_for_tests();
    let bounded: Vec<Statement> = sql::ALL.iter().copied().filter(|s| s.reach() == Reach::Bounded).collect();
    assert!(bounded.len() > 30, "the table lists every statement: {}", bounded.len());
    // Without statistics (as the helper runs), then with them: the planner
    // must not find a scan cheaper once it knows how many rows there are.
    for pass in ["without statistics", "after ANALYZE"] {
        let failures: Vec<String> = bounded
            .iter()
            .filter_map(|&statement| {
                let scans = full_scans(conn, statement);
                (!scans.is_empty()).then(|| format!("{}: {}", statement.name(), scans.join("; ")))
            })
            .collect();
        assert!(failures.is_empty(), "{pass}, full scans on a request path:\n{}", failures.join("\n"));
        conn.execute_batch("ANALYZE").unwrap();
    }
}

#[test]
fn the_check_catches_a_full_scan_and_lets_a_partial_index_through() {
    let (_dir, mut store) = with_history();
    let conn = store.dangerous_connection_for_tests();
    let scan = Statement::for_tests("SCAN", "SELECT count(*) FROM audit WHERE actor = ?1");
    assert_eq!(full_scans(conn, scan), ["SCAN audit"]);
    assert_eq!(full_scans(conn, sql::UNSETTLED), Vec::<String>::new(), "plans_unsettled is partial");
}

/// The text of the store's non-test code: every `.rs` under `src/store`
/// except test files, each cut where its test module starts.
fn store_sources() -> Vec<(std::path::PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(std::path::PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            if path.is_dir() {
                if name != "tests" {
                    walk(&path, out);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" {
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("#[cfg(test)]\nmod tests").next().unwrap().to_owned();
                out.push((path, code));
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store"), &mut out);
    out
}

#[test]
fn the_store_runs_no_sql_outside_its_table() {
    // `Tx` can only run a `Statement`; this holds the raw connections of
    // `database.rs` and `health.rs` to the same rule. The migrations are
    // DDL in `schema.rs`, run as one batch each.
    let calls = [
        "prepare(\"",
        "prepare(&format!",
        "prepare_cached(",
        "query_row(\"",
        "execute(\"",
        "execute_batch(\"",
    ];
    let sources = store_sources();
    assert!(sources.iter().any(|(path, _)| path.ends_with("sql.rs")), "walked src/store");
    for (path, code) in sources {
        if path.ends_with("sql.rs") {
            continue;
        }
        for call in calls {
            assert!(!code.contains(call), "{}: `{call}`: SQL belongs in store/sql.rs", path.display());
        }
    }
}
