//! The schema's CHECK lists against the enums whose names they hold: each
//! list, read back from a migrated database, is exactly its enum's name
//! table. Test-only; an in-memory SQLite database.

use rusqlite::Connection;
use strum::VariantArray as _;

use super::MIGRATIONS;
use crate::control::app_record::AppState;
use crate::exec::ProcessOutcome;
use crate::store::{AuditOperation, AuditOutcome, Event};
use crate::vocab::Action;
use crate::vocab::{PlanOutcome, PlanState};

/// The `CREATE TABLE` statement of `table` after every migration ran,
/// as SQLite itself keeps it.
fn table_sql(conn: &Connection, table: &str) -> String {
    conn.query_row("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1", [table], |r| r.get(0))
        .unwrap()
}

/// The names in the `IN (...)` list of the CHECK written on `column`'s
/// own definition (not the table constraints that also mention it),
/// sorted.
fn check_list(create_table: &str, column: &str) -> Vec<String> {
    let body = &create_table[create_table.find('(').unwrap() + 1..create_table.rfind(')').unwrap()];
    // The column definitions are the commas outside parentheses and quotes.
    let (mut items, mut start, mut depth, mut quoted) = (Vec::new(), 0, 0, false);
    for (at, c) in body.char_indices() {
        match c {
            '\'' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                items.push(body[start..at].trim());
                start = at + 1;
            }
            _ => {}
        }
    }
    items.push(body[start..].trim());
    let definition = items
        .into_iter()
        .find(|item| item.split_whitespace().next() == Some(column))
        .unwrap_or_else(|| panic!("no column {column} in {create_table}"));
    let list = definition
        .match_indices(" IN")
        .find_map(|(at, _)| definition[at + 3..].trim_start().strip_prefix('('))
        .unwrap_or_else(|| panic!("no IN list on {column}: {definition}"));
    let mut names: Vec<String> = list[..list.find(')').unwrap()]
        .split(',')
        .map(|name| name.trim().strip_prefix('\'').and_then(|n| n.strip_suffix('\'')).unwrap().to_owned())
        .collect();
    names.sort();
    names
}

fn sorted(names: impl IntoIterator<Item = &'static str>) -> Vec<String> {
    let mut names: Vec<String> = names.into_iter().map(str::to_owned).collect();
    names.sort();
    names
}

/// Every app state: the match fails to compile when a variant is added.
fn app_states() -> [&'static str; 3] {
    [AppState::Running, AppState::Stopped, AppState::NeedsInspection].map(|state| match state {
        AppState::Running | AppState::Stopped | AppState::NeedsInspection => state.as_str(),
    })
}

#[test]
fn each_check_list_is_exactly_its_enums_names() {
    let conn = Connection::open_in_memory().unwrap();
    for step in MIGRATIONS {
        conn.execute_batch(step).unwrap();
    }
    let (plans, audit, apps) =
        (table_sql(&conn, "plans"), table_sql(&conn, "audit"), table_sql(&conn, "apps"));
    let cases = [
        ("plans.state", check_list(&plans, "state"), sorted(PlanState::VARIANTS.iter().map(|v| v.as_str()))),
        (
            "plans.outcome",
            check_list(&plans, "outcome"),
            sorted(PlanOutcome::VARIANTS.iter().map(|v| v.as_str())),
        ),
        ("audit.event", check_list(&audit, "event"), sorted(Event::VARIANTS.iter().map(|v| v.as_str()))),
        (
            "audit.outcome",
            check_list(&audit, "outcome"),
            sorted(AuditOutcome::VARIANTS.iter().map(|v| v.as_str())),
        ),
        (
            "audit.process",
            check_list(&audit, "process"),
            sorted(ProcessOutcome::VARIANTS.iter().map(|v| v.as_str())),
        ),
        ("apps.state", check_list(&apps, "state"), sorted(app_states())),
        (
            "audit.gate_reason",
            check_list(&audit, "gate_reason"),
            sorted(crate::wire::gate::RefusalReason::VARIANTS.iter().map(|v| v.as_str())),
        ),
    ];
    for (column, schema, code) in cases {
        assert_eq!(
            schema, code,
            "{column}: the CHECK list and the enum differ; a new name needs a migration"
        );
    }
}

#[test]
fn check_list_reads_only_the_columns_own_constraint() {
    let sql = "CREATE TABLE t (
        state TEXT NOT NULL DEFAULT 'b' CHECK (state IN ('b', 'a')),
        outcome TEXT CHECK (outcome IS NULL OR outcome IN
            ('x')),
        CHECK (state IN ('a') OR outcome IN ('y', 'z'))
    )";
    assert_eq!(check_list(sql, "state"), ["a", "b"]);
    assert_eq!(check_list(sql, "outcome"), ["x"]);
}

/// Tried, after every migration: each action of `Action`, and a name no
/// version has yet, are accepted by both action columns (a new action
/// needs no schema step); an empty name, one in capitals, one with a
/// space or a dash and one of 32 characters are refused by both.
#[test]
fn the_action_columns_take_any_name_of_an_actions_shape_and_nothing_else() {
    let conn = Connection::open_in_memory().unwrap();
    for step in MIGRATIONS {
        conn.execute_batch(step).unwrap();
    }
    let audit = |action: &str| {
        conn.execute(
            "INSERT INTO audit (at, event, action, outcome, actor) VALUES (1, 'request', ?1, 'ok', 'root')",
            [action],
        )
    };
    let plan = |seq: usize, action: &str| {
        conn.execute(
            "INSERT INTO plans (id, action, body, digest, requires_approval, requester, created_at, expires_at)
             VALUES (?1, ?2, '{}', ?3, 1, 'agent', 1, 2)",
            [format!("{seq:032}"), action.to_owned(), "d".repeat(64)],
        )
    };
    let names = Action::ALL.iter().map(|a| a.as_str()).chain(["run_task"]);
    for (seq, name) in names.enumerate() {
        assert!(audit(name).is_ok(), "audit refused {name}");
        assert!(plan(seq, name).is_ok(), "plans refused {name}");
    }
    let thirty_two = "a".repeat(32);
    for (seq, bad) in ["", "Deploy", "remove app", "remove-app", thirty_two.as_str()].into_iter().enumerate()
    {
        assert!(audit(bad).is_err(), "audit took {bad:?}");
        assert!(plan(100 + seq, bad).is_err(), "plans took {bad:?}");
    }
}

/// Since step 17 `audit.operation` checks the shape of a name as `action`
/// does: every operation this build records, and one no build has yet, are
/// taken; a name of another shape is not.
#[test]
fn the_operation_column_takes_any_name_of_the_shape_and_nothing_else() {
    let conn = Connection::open_in_memory().unwrap();
    for step in MIGRATIONS {
        conn.execute_batch(step).unwrap();
    }
    let audit = |operation: &str| {
        conn.execute(
            "INSERT INTO audit (at, event, outcome, actor, operation) VALUES (1, 'request', 'ok', 'root', ?1)",
            [operation],
        )
    };
    for name in AuditOperation::VARIANTS.iter().map(|v| v.as_str()).chain(["backup_run"]) {
        assert!(audit(name).is_ok(), "audit refused {name}");
    }
    let thirty_two = "a".repeat(32);
    for bad in ["", "Show", "state backup", "state-backup", thirty_two.as_str()] {
        assert!(audit(bad).is_err(), "audit took {bad:?}");
    }
}
