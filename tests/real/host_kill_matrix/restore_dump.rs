//! A kill at each step of a restore of an accessory's dump (issue 41): the
//! shipped helper on its fixed paths restores a PostgreSQL accessory's
//! database (`volce-lab/pg`, beside `volce-lab/notes`) from a dump in a
//! restic repository on a local path, and is killed as `super::restore`'s
//! cells kill it: while the safety dump's restic runs, while the `load`
//! runs in the accessory (`docker exec -i`), once it has exited, and once
//! the app's start has run.
//!
//! Each cell: the database's newest row says "hello from postgres" when
//! backed up and "kept across its life" when the restore starts. After the
//! kill the plan is `needs_inspection` (claimer_died) and `resolve` ends
//! it; once no `pg_restore` runs in the accessory any more, its database
//! holds one of the two, whole (the load is one transaction, and a killed
//! helper's `docker exec` closes its input, so a load cut short rolls
//! back), and which one is fixed by the step, except while the load runs.

use super::restore::{At, Call, each_cell_caught, executed_and_killed, with_backup};
use super::*;

const BACKED_UP: &str = "hello from postgres";
const LATER: &str = "kept across its life";

/// Each cell: its step, and the row the database holds after it (`None`
/// while the load runs: either, whole).
const CELLS: [(At, Option<&str>); 4] = [
    (At::During(Call { program: "/usr/bin/restic", word: "--stdin" }), Some(LATER)),
    (At::During(Call { program: "/usr/bin/docker", word: "-i" }), None),
    (At::After(Call { program: "/usr/bin/docker", word: "-i" }), Some(BACKED_UP)),
    (At::After(Call { program: "/usr/bin/docker", word: "start" }), Some(BACKED_UP)),
];

/// The world's policy (with `super::restore::with_backup`'s repository)
/// with the accessory `db`, its dump and load, and the entry `notes`.
fn with_database(world: &World) {
    with_backup(world);
    let file = Path::new(ETC).join("policy.json");
    let mut policy: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let images = read_json("images.json");
    assert!(images["pg"].is_object() && images["notes"].is_object(), "run scripts/test-images");
    policy["accessories"] = json!({"db": {
        "image": images["pg"]["reference"], "port": 5432,
        "data": {"path": "/srv/pgdata", "max_mib": 64},
        "health": ["/usr/lib/postgresql/15/bin/pg_isready", "-h", "127.0.0.1", "-p", "5432", "-q"],
        "env": {"POSTGRES_PASSWORD": "{password}"},
        "dump": ["/bin/busybox", "sh", "/bin/dump-pg"],
        "load": ["/bin/busybox", "sh", "/bin/load-pg"]
    }});
    policy["catalog"]["notes"] = json!({
        "image": images["notes"]["reference"], "container_port": 8080,
        "tasks": {"migrate": ["/app/bin/migrate"],
                  "remember": ["/app/bin/sql", format!("INSERT INTO notes (body) VALUES ('{LATER}')")]},
        "before_start": "migrate",
        "accessories": {"db": {"DATABASE_URL": "postgresql://app:{password}@{host}:{port}/app"}}
    });
    std::fs::write(&file, policy.to_string()).unwrap();
}

/// psql in the accessory's container with its credential: one value.
fn query(world: &World, app: &str, sql: &str) -> Option<String> {
    let secret =
        std::fs::read_to_string(world.paths.state_dir.join("data").join(format!("{app}@db.secret"))).ok()?;
    crate::support::docker_lab::psql(&format!("vl-{app}-db"), secret.trim(), sql)
}

/// The newest row, once no pg_restore is connected any more.
fn newest_row(world: &World, app: &str) -> String {
    let started = Instant::now();
    let busy = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg_restore'";
    while query(world, app, busy).as_deref() != Some("0") {
        assert!(started.elapsed() < Duration::from_secs(60), "a pg_restore still runs after 60 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    query(world, app, "SELECT body FROM notes ORDER BY id DESC LIMIT 1").unwrap_or_default()
}

/// An app of `notes` whose dump holds BACKED_UP and whose database holds
/// LATER, and its approved restore plan of that dump.
fn restore_prepared(world: &World, app: &str, port: u16) -> String {
    let mut deploy = deploy_params(app, port);
    deploy["image"] = "notes".into();
    world.completed("deploy", &deploy);
    let planned = world.rpc(json!({"operation": "plan", "action": "backup", "parameters": {"app": app}}));
    let id = planned["result"]["id"].as_str().unwrap().to_owned();
    let done = world.rpc(json!({"operation": "execute", "plan_id": id}));
    assert_eq!(done["result"]["outcome"], "completed", "{done}");
    let snapshot = done["result"]["backup"]["dumps"][0]["snapshot"].as_str().unwrap().to_owned();
    world.completed("run_task", &json!({"app": app, "task": "remember"}));
    assert_eq!(newest_row(world, app), LATER);
    world.planned("restore", &json!({"app": app, "snapshot": snapshot}))
}

/// One try of one cell: whether its step was caught.
fn dump_cell(world: &World, (at, expected): (At, Option<&str>)) -> bool {
    let (app, port) = world.app();
    let _cleanup = AppCleanup(app.clone());
    let before = volce_lab_objects();
    let id = restore_prepared(world, &app, port);
    let (caught, state, outcome) = executed_and_killed(world, &id, at, "");
    let found = newest_row(world, &app);
    assert!(found == BACKED_UP || found == LATER, "{at:?}: the database is neither whole: {found:?}");
    if let (true, Some(expected)) = (caught, expected) {
        assert_eq!(found, expected, "{at:?}");
    }
    let env_files: Vec<_> = std::fs::read_dir(world.paths.apps_dir().join(&app))
        .map(|dir| dir.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    Row {
        action: "restore (dump)",
        fault: if caught { "kill -9".into() } else { "kill -9 (step missed: completed)".into() },
        step: format!("{at:?}"),
        call: String::new(),
        end_state: format!("{state} ({outcome}); newest row {found:?}"),
        labelled: labelled(&id).len(),
        recovery: back_to_clean(world, &app, &before, &id, None),
    }
    .print();
    // A killed helper may leave the credential's env file: remove_app deletes it.
    assert!(
        !world.paths.apps_dir().join(&app).exists(),
        "remove_app left the app's directory: {env_files:?}"
    );
    caught
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn kill_9_at_each_step_of_a_restore_of_a_dump_leaves_the_old_or_the_restored_database_whole() {
    let world = World::enter();
    assert!(Path::new("/usr/bin/restic").is_file(), "restic is not installed: scripts/test installs it");
    with_database(&world);
    each_cell_caught(&world, &CELLS, dump_cell);
}
