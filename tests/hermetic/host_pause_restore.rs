//! The way back to an older package (issue 46): the operator's pause of
//! the agent's access, `state backup`, and `state restore --for-downgrade`
//! with its hold. Hermetic: the library pipeline on the fake engine in a
//! temporary state directory; the package steps themselves are the real
//! suite's (tests/real/e2e_upgrade.rs).

use std::path::Path;

use serde_json::json;
use volce_lab::host::rpc::Reply;
use volce_lab::host::{Caller, pause};
use volce_lab::install::state::{self, RestoreFor};
use volce_lab::store::Store;
use volce_lab::vocab::Code;

use crate::support::harness::*;

const AGENT: &str = "agent";
const INVENTORY: &[u8] = br#"{"operation":"inventory"}"#;

fn refused(reply: Reply) -> volce_lab::vocab::Refusal {
    match reply {
        Reply::Rejected { refusal, .. } => refusal,
        other => panic!("must be refused: {other:?}"),
    }
}

/// A world whose database exists (one inventory through the pipeline).
fn world() -> Harness {
    let h = Harness::new();
    assert!(matches!(h.rpc(AGENT, INVENTORY), Reply::Ok { .. }));
    h
}

/// The database's files (state.db and its log), bytes and mtimes.
fn database_files(state_dir: &Path) -> Vec<(String, Vec<u8>, std::time::SystemTime)> {
    let mut files: Vec<_> = std::fs::read_dir(state_dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("state.db"))
        .map(|e| {
            let meta = e.metadata().unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
                meta.modified().unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

fn user_version(database: &Path) -> i64 {
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    let conn = rusqlite::Connection::open_with_flags(database, flags).unwrap();
    conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap()
}

fn now(h: &Harness) -> i64 {
    use volce_lab::control::Clock as _;
    h.clock.now()
}

/// Issue 46, item 3. Tried: pause with a reason, then an inventory and a
/// prepare as the agent, then the operator's list, then resume. Before
/// this there was no pause at all (the module did not exist, so this did
/// not compile): an agent polling during a downgrade reached the store,
/// whose open migrated the restored database. Now each rpc is refused
/// `paused` with the operator's reason, not one byte or mtime of the
/// database changes, the operator's commands work, and the refusals are
/// written to the audit trail, counted, when the pause ends.
#[test]
fn a_paused_helper_refuses_every_rpc_before_the_store_and_counts_them_at_resume() {
    let h = world();
    let alice = Caller::from("alice");
    let said = pause::pause(&h.paths, &alice, Some("downgrade to 0.1.0"), now(&h)).unwrap();
    assert!(said.contains("resume"), "{said}");
    let before = database_files(&h.paths.state_dir);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let refusal = refused(h.rpc(AGENT, INVENTORY));
    assert_eq!(refusal.code, Code::Paused, "{refusal:?}");
    assert!(
        refusal.message.contains("downgrade to 0.1.0"),
        "the operator's reason reaches the agent: {refusal:?}"
    );
    let plan = json!({"operation": "plan", "action": "stop", "parameters": {"app": "demo"}});
    assert_eq!(refused(h.rpc(AGENT, plan.to_string().as_bytes())).code, Code::Paused);
    assert_eq!(database_files(&h.paths.state_dir), before, "nothing of the database was opened to change");
    // The operator's own commands keep working while paused.
    assert!(h.host().list("root", false).is_ok(), "list works while paused");
    let said = pause::resume(&h.paths, &alice, now(&h)).unwrap();
    assert!(said.contains("2 requests were"), "{said}");
    assert!(matches!(h.rpc(AGENT, INVENTORY), Reply::Ok { .. }), "resume lifts it");
    let trail = volce_lab::host::audit::export(&h.paths, None, true).unwrap();
    let rows: Vec<serde_json::Value> = trail.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let counted = rows.iter().find(|r| r["code"] == "paused").expect("the refusals' row");
    assert_eq!(
        (&counted["count"], &counted["actor"], &counted["outcome"]),
        (&json!(2), &json!(AGENT), &json!("refused"))
    );
    for command in ["pause", "resume"] {
        let row = rows
            .iter()
            .find(|r| r["operation"] == command)
            .unwrap_or_else(|| panic!("{command}'s row: {trail}"));
        assert_eq!(row["actor"], "alice", "{row}");
        assert_eq!(row["code"], json!(null), "the command is the row's operation, not a code: {row}");
    }
    assert!(volce_lab::host::audit::verify(&h.paths, None).unwrap().1, "the chain verifies");
    assert_eq!(
        pause::resume(&h.paths, &alice, now(&h)).unwrap(),
        "volce-lab is not paused; nothing changed.\n"
    );
}

/// A pause file that is not root's own (here: writable by others) is not
/// trusted, and answered as the unsafe path it is, not served.
#[test]
fn a_pause_file_writable_by_others_is_refused_not_trusted() {
    use std::os::unix::fs::PermissionsExt as _;
    let h = world();
    pause::pause(&h.paths, &Caller::from("alice"), None, now(&h)).unwrap();
    let file = h.paths.state_dir.join(pause::PAUSE_FILE);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert_eq!(refused(h.rpc(AGENT, INVENTORY)).code, Code::UnsafePath);
}

/// A backup at an older schema, as `state backup` of that version would
/// have left it: a directory holding state.db.
fn older_backup(dir: &Path, schema: usize) -> std::path::PathBuf {
    let backup = dir.join("older");
    std::fs::create_dir(&backup).unwrap();
    Store::dangerous_create_at_schema_for_tests(&backup.join("state.db"), schema).unwrap();
    backup
}

/// Issue 46, item 1. Tried: the documented order of 0.2.0 (restore the
/// older backup, then the next command before the old package is in).
/// Before, any open (an rpc, `list`, `audit head`) migrated the restored
/// database back to this schema at once, and the old package then refused
/// it `state_too_new`. Now: restore refuses unless paused; with
/// `--for-downgrade` it leaves the hold and lifts the pause, and an rpc, a
/// `list`, `audit head` and the doctor all leave `user_version` as the
/// backup had it, each naming `downgrade_pending`; once the hold is gone
/// (the package's postinst when this version is installed again) the next
/// open migrates as after any upgrade.
#[test]
fn a_restore_for_a_downgrade_is_never_migrated_by_this_version() {
    let h = world();
    let scratch = tempfile::tempdir().unwrap();
    let backup = older_backup(scratch.path(), 10);
    let alice = Caller::from("alice");
    let unpaused = state::restore(&h.paths, &backup, RestoreFor::Downgrade, &alice, now(&h)).unwrap_err();
    assert_eq!(unpaused.code, Code::PauseRequired, "{unpaused:?}");
    assert!(unpaused.message.contains("volce-lab-host pause"), "{unpaused:?}");
    pause::pause(&h.paths, &alice, Some("downgrade"), now(&h)).unwrap();
    let said = state::restore(&h.paths, &backup, RestoreFor::Downgrade, &alice, now(&h)).unwrap();
    assert!(said.contains("Install the old package now"), "{said}");
    assert_eq!(pause::current(&h.paths).unwrap(), None, "the hold takes over from the pause");
    let database = h.paths.database();
    assert_eq!(user_version(&database), 10);

    let refusal = refused(h.rpc(AGENT, INVENTORY));
    assert_eq!(refusal.code, Code::DowngradePending, "{refusal:?}");
    assert!(refusal.message.contains("Install the old package now"), "{refusal:?}");
    assert_eq!(user_version(&database), 10, "an rpc migrated nothing");
    assert_eq!(h.host().list("root", false).unwrap_err().code, Code::DowngradePending);
    assert_eq!(volce_lab::host::audit::head(&h.paths).unwrap_err().code, Code::DowngradePending);
    assert_eq!(user_version(&database), 10, "list and audit head migrated nothing");
    let findings = crate::host_broken_state::doctor_findings(&h);
    let schema = findings.iter().find(|f| f.subject == "schema").expect("a schema finding");
    assert!(schema.failed() && schema.detail.contains("restored for a downgrade"), "{schema:?}");
    assert_eq!(user_version(&database), 10, "the doctor migrated nothing");

    // Installing this version again (its postinst removes the hold): the
    // next open migrates, as after any upgrade.
    std::fs::remove_file(h.paths.state_dir.join(volce_lab::store::hold::HOLD_FILE)).unwrap();
    assert!(matches!(h.rpc(AGENT, INVENTORY), Reply::Ok { .. }));
    assert_eq!(user_version(&database), Store::supported_version());
}

/// Bad backups change nothing: one from a newer schema, one that is no
/// database, and `--for-downgrade` of a backup at this very schema.
#[test]
fn a_restore_refuses_a_newer_a_damaged_or_a_same_schema_backup_for_downgrade() {
    let h = world();
    let alice = Caller::from("alice");
    pause::pause(&h.paths, &alice, None, now(&h)).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let newer = scratch.path().join("newer.db");
    Store::dangerous_create_at_schema_for_tests(&newer, 10).unwrap();
    rusqlite::Connection::open(&newer)
        .unwrap()
        .pragma_update(None, "user_version", Store::supported_version() + 1)
        .unwrap();
    let junk = scratch.path().join("junk.db");
    std::fs::write(&junk, b"not a database at all, but long enough to be looked at").unwrap();
    let current = scratch.path().join("current.db");
    Store::dangerous_create_at_schema_for_tests(&current, Store::supported_version() as usize).unwrap();
    let before = database_files(&h.paths.state_dir);
    let restore = |path: &Path, goal| state::restore(&h.paths, path, goal, &alice, now(&h)).unwrap_err().code;
    assert_eq!(restore(&newer, RestoreFor::ThisVersion), Code::StateTooNew);
    assert_eq!(restore(&junk, RestoreFor::ThisVersion), Code::StateCorrupt);
    assert_eq!(restore(&current, RestoreFor::Downgrade), Code::InvalidParameters);
    assert_eq!(database_files(&h.paths.state_dir), before, "a refused restore changes nothing");
}

/// Makes the plan `id` executing, as a helper's claim leaves it.
fn mark_executing(h: &Harness, id: &volce_lab::vocab::PlanId) {
    let mut c = h.controller();
    let updated = c
        .store_for_tests()
        .dangerous_connection_for_tests()
        .execute(
            "UPDATE plans SET state = 'executing', claim_pid = 1, claim_start = 1, claim_boot = 'boot', \
             claimed_at = 1 WHERE id = ?1",
            [id.as_str()],
        )
        .unwrap();
    assert_eq!(updated, 1);
}

/// Issue 46, item 2. Tried: `state backup` while a plan executes, then
/// after it ended. Before there was no backup command (this did not
/// compile; operator.md's recipe copied state.db alone). Now the first is
/// refused `plan_executing` and writes no backup; the second writes a
/// directory named with the audit head it ends at, whose state.db opens at
/// this schema, verifies, and ends at that head (its last row is the
/// backup's own), beside the env files and the data index.
#[test]
fn state_backup_waits_for_no_plan_executing_and_names_a_verified_copy_by_its_head() {
    let h = world();
    let into = tempfile::tempdir().unwrap();
    let into = into.path().join("backups");
    let alice = Caller::from("alice");
    let plan = h.controller().prepare("stop", &json!({"app": "legacy"}), AGENT);
    let id = match plan {
        Ok(stored) => stored.plan.id,
        Err(_) => h.controller().prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap().plan.id,
    };
    mark_executing(&h, &id);
    let refusal = state::backup(&h.paths, &into, &alice, now(&h)).unwrap_err();
    assert_eq!(refusal.code, Code::PlanExecuting, "{refusal:?}");
    assert!(refusal.message.contains(id.as_str()), "{refusal:?}");
    assert!(std::fs::read_dir(&into).map_or(true, |mut d| d.next().is_none()), "no backup was left");

    h.controller()
        .store_for_tests()
        .dangerous_connection_for_tests()
        .execute(
            "UPDATE plans SET state = 'completed', outcome = 'completed', finished_at = 2 WHERE id = ?1",
            [id.as_str()],
        )
        .unwrap();
    let done = state::backup(&h.paths, &into, &alice, now(&h)).unwrap();
    let name = done.file_name().unwrap().to_string_lossy().into_owned();
    let copy = volce_lab::host::HostPaths { state_dir: done.clone(), ..h.paths.clone() };
    let head = volce_lab::host::audit::head(&copy).unwrap();
    let hash = head.split_whitespace().next().unwrap();
    assert!(name.starts_with("volce-lab-state-") && name.ends_with(&hash[..16]), "{name} vs {head}");
    assert_eq!(user_version(&copy.database()), Store::supported_version());
    assert!(volce_lab::host::audit::verify(&copy, Some(hash)).unwrap().1, "the copy's chain verifies");
    assert!(done.join("env").is_dir() && done.join("data-index.txt").is_file());
    let trail = volce_lab::host::audit::export(&copy, None, true).unwrap();
    assert!(trail.lines().last().unwrap().contains(r#""operation":"state_backup""#), "{trail}");
}

/// The database of `h` as an older version (at `schema`) left it: its
/// plans and apps, each column that schema has, copied into a new database
/// at that schema, which takes its place. Built this way, not by lowering
/// `user_version`, so the copy `list` and `show` migrate in memory runs
/// every later step for real.
fn as_older_schema(h: &Harness, schema: usize) {
    let database = h.paths.database();
    let older = h.paths.state_dir.join("older.db");
    Store::dangerous_create_at_schema_for_tests(&older, schema).unwrap();
    {
        let conn = rusqlite::Connection::open(&older).unwrap();
        conn.execute("ATTACH DATABASE ?1 AS current", [database.to_str().unwrap()]).unwrap();
        for table in ["plans", "apps"] {
            let mut columns = conn.prepare("SELECT name FROM pragma_table_info(?1, 'main')").unwrap();
            let columns: Vec<String> =
                columns.query_map([table], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
            let list = columns.join(", ");
            conn.execute(
                &format!("INSERT INTO main.{table} ({list}) SELECT {list} FROM current.{table}"),
                [],
            )
            .unwrap();
        }
        conn.execute("DETACH DATABASE current", []).unwrap();
    }
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(h.paths.state_dir.join(format!("state.db{suffix}")));
    }
    std::fs::rename(&older, &database).unwrap();
}

/// Issue 46, item 4. Tried: a migration that waits for a plan a live
/// helper executes (here: this test process's claim, on a database an
/// older version left at schema 15, with a pending plan beside it), then
/// two agent requests, the operator's `list`, `list --json`, `show` and
/// `show --json` and `audit head`, then the plan ending. Before, every
/// request was refused `upgrade_waiting`; `list` answered with the
/// executing plans alone, and `list --json` and `show` were refused.
/// Now all of them answer, from a copy migrated in memory and saying so,
/// with the pending plan too; the file stays at schema 15; and the
/// requests are written, counted, by the first open after the migration.
#[test]
fn while_a_migration_waits_list_show_and_audit_head_answer_and_the_refusals_are_counted() {
    use volce_lab::host::Liveness as _;
    let h = world();
    let id = h.controller().prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap().plan.id;
    let pending = h.controller().prepare("deploy", &deploy_params("other", 18002), AGENT).unwrap().plan.id;
    let me = volce_lab::host::ProcLiveness.me().unwrap();
    {
        let mut c = h.controller();
        let conn = c.store_for_tests().dangerous_connection_for_tests();
        let claimed = conn
            .execute(
                "UPDATE plans SET state = 'executing', claim_pid = ?2, claim_start = ?3, claim_boot = ?4, \
                 claimed_at = 1 WHERE id = ?1",
                rusqlite::params![id.as_str(), me.pid, me.start_time as i64, me.boot_id],
            )
            .unwrap();
        assert_eq!(claimed, 1);
    }
    as_older_schema(&h, 15);
    for _ in 0..2 {
        let refusal = refused(h.rpc(AGENT, INVENTORY));
        assert_eq!(refusal.code, Code::UpgradeWaiting, "{refusal:?}");
        assert!(
            refusal.message.contains("volce-lab-host list") && refusal.message.contains("show"),
            "names the commands that answer: {refusal:?}"
        );
    }
    let copy = "copy of the state database migrated in memory";
    let listed = h.host().list("root", false).unwrap();
    assert!(listed.starts_with("upgrade_waiting: ") && listed.contains(copy), "{listed}");
    assert!(listed.contains(id.as_str()) && listed.contains(pending.as_str()), "the whole list: {listed}");
    let listed: serde_json::Value = serde_json::from_str(&h.host().list("root", true).unwrap()).unwrap();
    assert!(listed["upgrade_waiting"].as_str().unwrap().contains(id.as_str()), "{listed}");
    let plans: Vec<&str> =
        listed["plans"].as_array().unwrap().iter().map(|p| p["plan_id"].as_str().unwrap()).collect();
    assert!(plans.contains(&id.as_str()) && plans.contains(&pending.as_str()), "{listed}");
    let shown = h.host().show("root", pending.as_str(), false).unwrap();
    assert!(shown.starts_with("upgrade_waiting: ") && shown.contains(pending.as_str()), "{shown}");
    let shown: serde_json::Value =
        serde_json::from_str(&h.host().show("root", pending.as_str(), true).unwrap()).unwrap();
    assert_eq!(shown["id"], pending.as_str(), "{shown}");
    assert!(shown["upgrade_waiting"].is_string(), "{shown}");
    let head = volce_lab::host::audit::head(&h.paths).unwrap();
    assert!(head.contains("Read without migrating"), "{head}");
    assert_eq!(user_version(&h.paths.database()), 15, "nothing migrated while it waits");

    // The plan ends: the next open migrates and writes the counts.
    {
        let conn = rusqlite::Connection::open(h.paths.database()).unwrap();
        conn.execute(
            "UPDATE plans SET state = 'completed', outcome = 'completed', finished_at = 2 WHERE id = ?1",
            [id.as_str()],
        )
        .unwrap();
    }
    assert!(matches!(h.rpc(AGENT, INVENTORY), Reply::Ok { .. }));
    assert_eq!(user_version(&h.paths.database()), Store::supported_version());
    let listed: serde_json::Value = serde_json::from_str(&h.host().list("root", true).unwrap()).unwrap();
    assert!(listed["upgrade_waiting"].is_null(), "{listed}");
    let trail = volce_lab::host::audit::export(&h.paths, None, true).unwrap();
    let rows: Vec<serde_json::Value> = trail.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let counted = |actor: &str, operation: &str| {
        rows.iter()
            .find(|r| r["code"] == "upgrade_waiting" && r["actor"] == actor && r["operation"] == operation)
            .map(|r| r["count"].clone())
    };
    assert_eq!(counted(AGENT, "inventory"), Some(json!(2)), "{trail}");
    assert_eq!(counted("root", "list"), Some(json!(2)), "both lists were counted: {trail}");
    assert_eq!(counted("root", "show"), Some(json!(2)), "both shows were counted: {trail}");
}

/// A restore while another connection has the database open (a helper the
/// pause did not stop: an operator's command, a running execute's) would
/// leave that connection's write-ahead log beside the restored file.
/// Tried: a connection that keeps the database open during the restore.
/// Refused `busy` before anything is recorded, nothing restored, no hold
/// left; once it closed, the restore goes through.
#[test]
fn a_restore_waits_for_every_other_connection_to_close() {
    let h = world();
    let scratch = tempfile::tempdir().unwrap();
    let backup = older_backup(scratch.path(), 10);
    let alice = Caller::from("alice");
    pause::pause(&h.paths, &alice, None, now(&h)).unwrap();
    let holder = rusqlite::Connection::open(h.paths.database()).unwrap();
    let _: i64 = holder.query_row("SELECT count(*) FROM plans", [], |r| r.get(0)).unwrap();
    let refusal = state::restore(&h.paths, &backup, RestoreFor::Downgrade, &alice, now(&h)).unwrap_err();
    assert_eq!(refusal.code, Code::Busy, "{refusal:?}");
    assert_eq!(user_version(&h.paths.database()), Store::supported_version(), "nothing restored");
    assert!(!volce_lab::store::hold::held(&h.paths.database()), "no hold left");
    drop(holder);
    let trail = volce_lab::host::audit::export(&h.paths, None, true).unwrap();
    assert!(!trail.contains("state_restore"), "a refused restore records none: {trail}");
    state::restore(&h.paths, &backup, RestoreFor::Downgrade, &alice, now(&h)).unwrap();
    assert_eq!(user_version(&h.paths.database()), 10);
}

/// Issue 46, item 2 (its ways out). Tried: a deploy prepared, a backup,
/// the deploy executed, then the backup restored for this version, as an
/// administrator restoring a backup taken just before a change would.
/// Before, nothing said what the restored record no longer knew: the
/// deploy's two containers stood unrecorded (`resolve` called them
/// foreign, remove_app refused), its plan pending as if it never ran, and
/// only `docker rm` by hand cleared them (this did not compile: there was
/// no `state diff` nor `state remove-container`). Now `state diff` names
/// both containers and the plan, each with its command; `remove-container`
/// refuses without the pause, refuses a container without volce-lab's
/// labels (the world's `prod`), removes each labelled one, recorded in the
/// trail with its app; `reject` ends the plan; and `state diff` then says
/// only the world's own difference (legacy's record without containers) is left.
#[test]
fn after_a_restore_state_diff_names_each_difference_and_its_command_and_remove_container_ends_the_unrecorded()
{
    let h = world();
    let alice = Caller::from("alice");
    let scratch = tempfile::tempdir().unwrap();
    let late = h.controller().prepare("deploy", &deploy_params("late", 18003), AGENT).unwrap().plan.id;
    let backup = state::backup(&h.paths, &scratch.path().join("backups"), &alice, now(&h)).unwrap();
    h.controller().execute(&late, AGENT).unwrap();
    let made: Vec<(String, String)> = h
        .engine
        .snapshot_now()
        .containers
        .iter()
        .filter(|c| c.app() == Some("late"))
        .map(|c| (c.id.to_string(), c.name.clone()))
        .collect();
    assert_eq!(made.len(), 2, "the deploy made its app and gateway: {made:?}");
    let before = state::diff(&h.paths, &h.engine, now(&h)).unwrap();
    // The world's `legacy` record has no containers: a difference of its own, the one left at the end.
    assert!(
        before.starts_with("1 difference ") && before.contains("app legacy"),
        "before the restore: {before}"
    );

    pause::pause(&h.paths, &alice, Some("restore"), now(&h)).unwrap();
    state::restore(&h.paths, &backup, RestoreFor::ThisVersion, &alice, now(&h)).unwrap();
    let said = state::diff(&h.paths, &h.engine, now(&h)).unwrap();
    assert!(said.starts_with("4 differences"), "{said}");
    for (id, _) in &made {
        assert!(said.contains(&format!("state remove-container {id}")), "{said}");
    }
    assert!(said.contains(&format!("reject {late}")) && said.contains("it ran after the backup"), "{said}");
    assert!(!said.contains("prod"), "a container without volce-lab's labels is none of its business: {said}");

    let yes = |_: &str, _: &str| volce_lab::host::Decision::Confirmed;
    let remove =
        |container: &str| state::remove_container(&h.paths, &h.engine, container, &alice, now(&h), yes);
    pause::resume(&h.paths, &alice, now(&h)).unwrap();
    assert_eq!(remove(&made[0].0).unwrap_err().code, Code::PauseRequired);
    pause::pause(&h.paths, &alice, Some("cleanup"), now(&h)).unwrap();
    let foreign = remove("prod").unwrap_err();
    assert_eq!(foreign.code, Code::InvalidParameters, "{foreign:?}");
    assert!(foreign.message.contains("state diff"), "{foreign:?}");
    let declined = state::remove_container(&h.paths, &h.engine, &made[0].1, &alice, now(&h), |_, _| {
        volce_lab::host::Decision::Declined
    });
    assert_eq!(declined.unwrap_err().code, Code::NotConfirmed);
    for (_, name) in &made {
        let said = remove(name).unwrap();
        assert!(said.contains("Removed container"), "{said}");
    }
    let left: Vec<String> = h.engine.snapshot_now().containers.iter().map(|c| c.name.clone()).collect();
    assert!(left.iter().any(|n| n == "prod") && !left.iter().any(|n| n.contains("late")), "{left:?}");
    h.reject_because(late.as_str(), "alice", "restored from a backup; it ran already").unwrap();
    assert_eq!(state::diff(&h.paths, &h.engine, now(&h)).unwrap(), before, "only legacy's record is left");
    let trail = volce_lab::host::audit::export(&h.paths, None, true).unwrap();
    let removals: Vec<&str> =
        trail.lines().filter(|l| l.contains(r#""operation":"state_remove_container""#)).collect();
    assert_eq!(removals.len(), 2, "{trail}");
    assert!(
        removals.iter().all(|row| row.contains(r#""app":"late""#) && row.contains(r#""actor":"alice""#)),
        "{removals:?}"
    );
}
