//! Accessories on the machine's real engine (issue 40), through the real
//! controller and the test images: an app (`volce-lab/notes`, busybox httpd
//! with psql) whose catalog entry needs a PostgreSQL accessory
//! (`volce-lab/pg`, Debian's PostgreSQL 15) and migrates it before it starts.
//! Shown: the deploy creates the database with a credential generated on
//! the host, the app serves a row it read from it, `service_logs` reads the
//! database's log by its name, and the credential is in no reply, no plan,
//! no log and nowhere in the state database; the
//! database's rows survive a task, an update, a rollback, a restart, a stop and start,
//! and a remove_app that keeps the data followed by a new deploy; the
//! database stopped by hand is drift that names it, and a restart heals
//! it; the inventory lists it with the image the policy pins for it now;
//! an update_accessory to a build that never starts is rolled back, one to
//! a build that starts moves it on the same rows and credential; a
//! rotation whose command fails changes nothing, one that works leaves the
//! database opening with the new credential only and the app using it;
//! a backup dumps the database (with the rotated credential) into restic,
//! a lost table comes back from that dump by a restore, a load that fails
//! and a dump that fails change nothing and keep no snapshot; a purge
//! deletes the data and the credential.

use super::tasks::Unmount;
use super::*;

/// What the app serves at /cgi-bin/note: the newest row of its table.
fn served_row(host: &Host) -> Option<String> {
    super::backups::served_at(host, "/cgi-bin/note")
}

/// The test policy with accessory `db` and two entries that need it.
fn policy_with_db(lab: &Lab) -> Value {
    let mut policy = lab.policy.clone();
    let image = |name: &str| lab.images[name]["reference"].clone();
    assert!(image("pg").is_string(), "scripts/test-images builds volce-lab/pg: run it again");
    policy["accessories"] = json!({"db": {
        "image": image("pg"), "port": 5432,
        "data": {"path": "/srv/pgdata", "max_mib": 128},
        "health": ["/usr/lib/postgresql/15/bin/pg_isready", "-h", "127.0.0.1", "-p", "5432", "-q"],
        "env": {"POSTGRES_PASSWORD": "{password}"},
        "rotate": ["/bin/busybox", "sh", "/bin/rotate-pg"]
    }});
    let entry = |image: Value| {
        json!({"image": image, "container_port": 8080,
               "tasks": {"migrate": ["/app/bin/migrate"],
                         "remember": ["/app/bin/sql", "INSERT INTO notes (body) VALUES ('kept across its life')"],
                         "lose": ["/app/bin/sql", "DROP TABLE notes"]},
               "before_start": "migrate",
               "accessories": {"db": {"DATABASE_URL": "postgresql://app:{password}@{host}:{port}/app"}}})
    };
    policy["catalog"]["notes"] = entry(image("notes"));
    policy["catalog"]["notes2"] = entry(image("notes2"));
    policy
}

/// Plans `action`, approves it when the policy says so, executes it, and
/// checks it completed; returns the execute reply.
fn carried_out(host: &Host, action: &str, parameters: Value) -> Value {
    let reply = host.plan(action, parameters);
    assert_eq!(reply["status"], "ok", "{action} plan refused: {reply}");
    let id = reply["result"]["id"].as_str().unwrap().to_owned();
    if reply["result"]["requires_approval"] == true {
        host.approve(&id);
    }
    let done = host.execute(&id);
    assert_eq!(done["result"]["outcome"], "completed", "{action}: {done}");
    done
}

fn accessory_containers(app: &str) -> String {
    let filter = format!("label=io.volce-lab.app={app}");
    docker_ok(&["ps", "-aq", "--filter", &filter, "--filter", "label=io.volce-lab.role=accessory"])
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn an_app_with_its_database_keeps_its_rows_through_its_life_and_never_shows_the_credential() {
    let _turn = take_turn();
    let lab = Lab::new("racc");
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_with_db(&lab);
    let policy_path = dir.path().join("policy.json");
    std::fs::write(&policy_path, policy.to_string()).unwrap();
    let host = Host::with_policy(lab, policy_path.clone());
    let data = host.paths.state_dir.join("data");
    let _unmount = Unmount(data.join(format!("{}@db", host.lab.app)));
    let (image, secret_file) =
        (data.join(format!("{}@db.ext4", host.lab.app)), data.join(format!("{}@db.secret", host.lab.app)));
    let deploy = || host.deploy_params("notes", 8080, &host.lab.server_name());

    let started = std::time::Instant::now();
    let deploy_id = host.planned("deploy", deploy());
    let deployed = host.execute(&deploy_id);
    eprintln!("deploy with a PostgreSQL accessory: {:?}", started.elapsed());
    assert_eq!(deployed["result"]["outcome"], "completed", "{deployed}");
    assert_eq!(deployed["result"]["containers"].as_array().unwrap().len(), 3, "{deployed}");
    assert_eq!(served_row(&host).as_deref(), Some("hello from postgres"), "read from the database");
    let secret = std::fs::read_to_string(&secret_file).unwrap();
    assert_eq!(secret.len(), 64, "a generated credential beside the data");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&secret_file).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);

    let task = carried_out(&host, "run_task", json!({"app": host.lab.app, "task": "remember"}));
    assert_eq!(served_row(&host).as_deref(), Some("kept across its life"), "{task}");
    let update = carried_out(&host, "update", json!({"app": host.lab.app, "image": "notes2"}));
    assert_eq!(status(host.lab.port, &host.lab.server_name()), Some(200));
    assert_eq!(served_row(&host).as_deref(), Some("kept across its life"), "after the update");
    let rollback = carried_out(&host, "rollback", json!({"app": host.lab.app}));
    assert_eq!(served_row(&host).as_deref(), Some("kept across its life"), "after the rollback");
    let restart = carried_out(&host, "restart", json!({"app": host.lab.app}));
    assert_eq!(served_row(&host).as_deref(), Some("kept across its life"), "after the restart");
    host.stop();
    let accessory = accessory_containers(&host.lab.app);
    assert_eq!(container_state(accessory.trim()), "exited", "a stop takes the database down with the app");
    let start = carried_out(&host, "start", json!({"app": host.lab.app}));
    assert_eq!(served_row(&host).as_deref(), Some("kept across its life"), "after stop and start");

    // The credential is nowhere the agent or the audit can read.
    let logs = host.rpc(json!({"operation": "logs", "app": host.lab.app, "container": "app", "tail": 50}));
    // The database's own log, by the accessory's name; another name is refused.
    let db_logs = host.rpc(json!({"operation": "logs", "app": host.lab.app, "container": "db", "tail": 50}));
    assert_eq!(db_logs["result"]["container"], "db", "{db_logs}");
    assert!(db_logs["result"]["lines"].to_string().contains("ready to accept connections"), "{db_logs}");
    let unknown =
        host.rpc(json!({"operation": "logs", "app": host.lab.app, "container": "cache", "tail": 5}));
    assert_eq!(unknown["code"], "invalid_parameters", "{unknown}");
    assert!(unknown["message"].as_str().unwrap().contains("its accessories: db"), "{unknown}");
    let inventory = host.rpc(json!({"operation": "inventory"}));
    let shown = host.plan_json(&deploy_id);
    assert!(shown.to_string().contains(r#""role":"accessory""#), "the plan lists it: {shown}");
    for (what, text) in [
        ("deploy", deployed.to_string()),
        ("run_task", task.to_string()),
        ("update", update.to_string()),
        ("rollback", rollback.to_string()),
        ("restart", restart.to_string()),
        ("start", start.to_string()),
        ("logs", logs.to_string()),
        ("the database's logs", db_logs.to_string()),
        ("inventory", inventory.to_string()),
        ("show", shown.to_string()),
    ] {
        assert!(!text.contains(&secret), "the credential is in the {what} reply");
    }
    for file in std::fs::read_dir(&host.paths.state_dir).unwrap().flatten() {
        if file.path().is_file() {
            let bytes = std::fs::read(file.path()).unwrap();
            let found = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
            assert!(!found, "the credential is in {}", file.path().display());
        }
    }

    // The database stopped by hand: drift names it, and a restart brings
    // it back before the app.
    let name = format!("vl-{}-db", host.lab.app);
    docker_ok(&["stop", "--time", "5", &name]);
    let drift = host.app_record()["drift"].to_string();
    assert!(drift.contains(&name), "drift names the accessory: {drift}");
    carried_out(&host, "restart", json!({"app": host.lab.app}));
    assert_eq!(served_row(&host).as_deref(), Some("kept across its life"), "after its restart");
    assert_eq!(host.app_record()["drift"], Value::Null, "healed");

    accessory_image_updates(&host, &policy, &policy_path);
    let secret = credential_rotations(&host, &policy, &policy_path, &secret);
    database_backups(&host, &policy, &policy_path, dir.path());

    // Removed with its data kept, then deployed again: the same rows, the
    // same credential.
    carried_out(&host, "remove_app", json!({"app": host.lab.app}));
    assert_eq!(accessory_containers(&host.lab.app), "", "its container went with the app");
    assert!(image.is_file() && secret_file.is_file(), "its data and credential are kept");
    let again = host.planned("deploy", deploy());
    assert!(host.plan_json(&again).to_string().contains("kept from before: re-attached"));
    let redeployed = host.execute(&again);
    assert_eq!(redeployed["result"]["outcome"], "completed", "{redeployed}");
    assert_eq!(served_row(&host).as_deref(), Some("kept across its life"), "the kept database");
    assert_eq!(std::fs::read_to_string(&secret_file).unwrap(), secret, "the kept (rotated) credential");

    carried_out(&host, "remove_app", json!({"app": host.lab.app, "purge_data": true}));
    assert!(!image.exists() && !secret_file.exists(), "a purge deletes the data and its credential");
}

/// The accessory's own image through update_accessory: the inventory shows
/// it, then the policy's new pin; a build that never starts ends the plan
/// `failed`, the old database running again with the rows; a build that
/// starts takes its place on the same data, and the old container is gone.
fn accessory_image_updates(host: &Host, policy: &Value, policy_path: &std::path::Path) {
    let image = |name: &str| host.lab.images[name]["reference"].clone();
    let db = || host.app_record()["accessories"][0].clone();
    let shown = db();
    assert_eq!((&shown["name"], &shown["state"]), (&json!("db"), &json!("running")), "{shown}");
    assert_eq!((&shown["image"], &shown["data"]["mounted"]), (&image("pg"), &json!(true)), "{shown}");
    assert!(shown.get("policy_image").is_none(), "the policy pins what it runs: {shown}");
    let pin = |name: &str| {
        let mut pinned = policy.clone();
        pinned["accessories"]["db"]["image"] = image(name);
        std::fs::write(policy_path, pinned.to_string()).unwrap();
    };
    let params = json!({"app": host.lab.app, "accessory": "db"});
    assert_eq!(host.plan("update_accessory", params.clone())["code"], "image_unchanged");

    pin("pgbroken");
    assert_eq!(db()["policy_image"], image("pgbroken"), "the inventory shows the new pin");
    let id = host.planned("update_accessory", params.clone());
    host.approve(&id);
    let started = std::time::Instant::now();
    let failed = host.execute(&id);
    eprintln!("update_accessory to a build that never starts, rolled back in {:?}", started.elapsed());
    assert_eq!(
        (&failed["status"], &failed["code"]),
        (&json!("rejected"), &json!("update_failed")),
        "{failed}"
    );
    assert!(failed["message"].as_str().unwrap().contains("old one started again"), "{failed}");
    assert!(failed["app_log"].to_string().contains("this build never starts"), "its last lines: {failed}");
    assert_eq!(served_row(host).as_deref(), Some("kept across its life"), "the old database again");
    assert_eq!(db()["image"], image("pg"));
    assert_eq!(host.app_record()["drift"], Value::Null, "nothing left behind: {}", host.app_record());

    pin("pg2");
    let started = std::time::Instant::now();
    let done = carried_out(host, "update_accessory", params);
    eprintln!("update_accessory to a build that starts: {:?}", started.elapsed());
    assert_eq!(served_row(host).as_deref(), Some("kept across its life"), "the same rows: {done}");
    let shown = db();
    assert_eq!((&shown["image"], &shown["state"]), (&image("pg2"), &json!("running")), "{shown}");
    assert!(shown.get("policy_image").is_none(), "{shown}");
    let running =
        docker_ok(&["inspect", "--format", "{{.Config.Image}}", shown["container"].as_str().unwrap()]);
    assert_eq!(running.trim(), image("pg2").as_str().unwrap(), "the new container runs the new pin");
    assert_eq!(accessory_containers(&host.lab.app).lines().count(), 1, "the old one was removed");
    assert_eq!(host.app_record()["drift"], Value::Null);
}

/// Whether `password` opens the accessory's database (psql in its container).
fn opens_the_database(host: &Host, password: &str) -> bool {
    crate::support::docker_lab::psql(&format!("vl-{}-db", host.lab.app), password, "SELECT 1").is_some()
}

/// The credential's rotation: refused without a rotate command; a command
/// that fails changes nothing; the operator's `accessory rotate` gives the
/// database a new credential that the app uses, the old one opening it no
/// more, and `accessory secret` prints it. Returns the new credential.
fn credential_rotations(host: &Host, policy: &Value, policy_path: &std::path::Path, old: &str) -> String {
    let write = |rotate: Value| {
        let mut changed = policy.clone();
        changed["accessories"]["db"]["image"] = host.lab.images["pg2"]["reference"].clone();
        changed["accessories"]["db"]["rotate"] = rotate;
        std::fs::write(policy_path, changed.to_string()).unwrap();
    };
    let params = json!({"app": host.lab.app, "accessory": "db"});
    let secret_file = host.paths.state_dir.join(format!("data/{}@db.secret", host.lab.app));
    write(Value::Null);
    assert_eq!(host.plan("rotate_credential", params.clone())["code"], "rotation_not_declared");

    write(json!(["/bin/busybox", "false"]));
    let id = host.planned("rotate_credential", params.clone());
    host.approve(&id);
    let failed = host.execute(&id);
    assert_eq!(
        (&failed["status"], &failed["code"]),
        (&json!("rejected"), &json!("update_failed")),
        "{failed}"
    );
    assert_eq!(std::fs::read_to_string(&secret_file).unwrap(), old, "nothing changed");
    assert!(opens_the_database(host, old), "the old credential still opens it");
    assert_eq!(served_row(host).as_deref(), Some("kept across its life"));

    write(policy["accessories"]["db"]["rotate"].clone());
    let confirm = |_: &str, _: &volce_lab::host::Confirmation| volce_lab::host::Decision::Confirmed;
    let started = std::time::Instant::now();
    let said =
        volce_lab::install::accessory::rotate(&host.paths, OPERATOR.into(), &host.lab.app, "db", confirm)
            .unwrap_or_else(|refusal| panic!("{}: {}", refusal.code, refusal.message));
    eprintln!("accessory rotate: {:?}", started.elapsed());
    assert!(said.contains("has a new credential"), "{said}");
    let new = std::fs::read_to_string(&secret_file).unwrap();
    assert!(new.len() == 64 && new != old, "a new credential in the credential's file");
    let printed = volce_lab::install::accessory::secret(&host.paths, &host.lab.app, "db").unwrap();
    assert_eq!(printed.trim(), new, "accessory secret prints it");
    assert!(opens_the_database(host, &new) && !opens_the_database(host, old), "only the new one opens it");
    assert_eq!(served_row(host).as_deref(), Some("kept across its life"), "the app uses the new one");
    assert_eq!(host.app_record()["drift"], Value::Null);
    let data = host.paths.state_dir.join("data");
    let leftovers: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".new"))
        .collect();
    assert!(leftovers.is_empty(), "no pending credential left: {leftovers:?}");
    let inventory = host.rpc(json!({"operation": "inventory"})).to_string();
    assert!(!said.contains(&new) && !inventory.contains(&new), "the new credential is in no reply");
    for file in std::fs::read_dir(&host.paths.state_dir).unwrap().flatten() {
        if file.path().is_file() {
            let bytes = std::fs::read(file.path()).unwrap();
            assert!(!bytes.windows(64).any(|w| w == new.as_bytes()), "in {}", file.path().display());
        }
    }
    new
}

/// The database through its own dump (issue 41), the policy declaring
/// `dump` and `load` and a repository on a local path: a backup streams
/// it into restic (the app has no data of its own), the table dropped by a
/// task comes back by an approved restore of that dump, the app serving
/// its row again; a load that fails ends the restore `failed` with the
/// rows as they were; a dump cut short, its command failing, ends the
/// backup `failed` and keeps no snapshot of what it wrote; the next
/// backup's retention runs despite the lock the failed load's restic left.
fn database_backups(host: &Host, policy: &Value, policy_path: &std::path::Path, dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let (repository, password) = (dir.join("repo"), dir.join("backup.password"));
    std::fs::write(&password, "a-long-random-backup-password\n").unwrap();
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o600)).unwrap();
    let write = |dump: Value, load: Value| {
        let mut changed = policy.clone();
        changed["accessories"]["db"]["image"] = host.lab.images["pg2"]["reference"].clone();
        changed["accessories"]["db"]["dump"] = dump;
        changed["accessories"]["db"]["load"] = load;
        changed["backup"] = json!({"repository": repository, "password_file": password, "keep": {"last": 5}});
        std::fs::write(policy_path, changed.to_string()).unwrap();
    };
    let (dump, load) =
        (json!(["/bin/busybox", "sh", "/bin/dump-pg"]), json!(["/bin/busybox", "sh", "/bin/load-pg"]));
    write(dump.clone(), load.clone());
    volce_lab::install::backup::init(&host.paths).unwrap();
    let started = std::time::Instant::now();
    let done = super::backups::backup(host);
    eprintln!("backup of the database by its dump: {:?}", started.elapsed());
    assert_eq!(done["result"]["outcome"], "completed", "{done}");
    let run = &done["result"]["backup"];
    assert!(run.get("snapshot").is_none(), "the app has no data of its own: {run}");
    assert_eq!(run["dumps"][0]["accessory"], "db", "{run}");
    assert!(run["dumps"][0]["bytes"].as_u64().unwrap() > 1000, "a whole dump: {run}");
    let snapshot = run["dumps"][0]["snapshot"].as_str().unwrap().to_owned();
    let listed = volce_lab::install::backup::list(&host.paths, Some(&host.lab.app)).unwrap();
    assert!(listed.contains(&snapshot[..8]) && listed.contains(" db-dump "), "{listed}");
    let shown = &host.app_record()["accessories"][0]["data"]["backup"];
    assert_eq!(shown["snapshot"], json!(snapshot), "the inventory shows the dump: {shown}");

    carried_out(host, "run_task", json!({"app": host.lab.app, "task": "lose"}));
    assert_eq!(served_row(host).as_deref(), Some("no database"), "the table is gone");
    let restore = json!({"app": host.lab.app, "snapshot": snapshot});
    let started = std::time::Instant::now();
    let restored = carried_out(host, "restore", restore.clone());
    eprintln!("restore of the database from its dump: {:?}", started.elapsed());
    assert_eq!(served_row(host).as_deref(), Some("kept across its life"), "the rows are back: {restored}");
    assert_eq!(restored["result"]["restore"]["started"], true, "{restored}");
    let listed = volce_lab::install::backup::list(&host.paths, Some(&host.lab.app)).unwrap();
    assert!(listed.contains(" db-dump+safety "), "the safety dump: {listed}");

    write(dump.clone(), json!(["/bin/busybox", "false"]));
    let id = host.planned("restore", restore);
    host.approve(&id);
    let failed = host.execute(&id);
    assert_eq!(
        (&failed["status"], &failed["code"]),
        (&json!("rejected"), &json!("restore_failed")),
        "{failed}"
    );
    assert!(failed["message"].as_str().unwrap().contains("'load the dump'"), "{failed}");
    assert_eq!(served_row(host).as_deref(), Some("kept across its life"), "unchanged, and served again");

    // A dump cut after 512 bytes, its command failing: restic keeps what
    // it got, and the backup forgets it.
    let cut = "/bin/busybox sh /bin/dump-pg | /bin/busybox head -c 512; exit 1";
    write(json!(["/bin/busybox", "sh", "-c", cut]), load);
    let before = volce_lab::install::backup::list(&host.paths, Some(&host.lab.app)).unwrap();
    let failed = super::backups::backup(host);
    assert_eq!(
        (&failed["status"], &failed["code"]),
        (&json!("rejected"), &json!("backup_failed")),
        "{failed}"
    );
    assert!(failed["message"].as_str().unwrap().contains("'dump the accessory's database'"), "{failed}");
    let after = volce_lab::install::backup::list(&host.paths, Some(&host.lab.app)).unwrap();
    assert_eq!(before.lines().count(), after.lines().count(), "the cut dump was forgotten: {after}");
    let env_files: Vec<_> = std::fs::read_dir(host.lab.app_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("dump-"))
        .collect();
    assert!(env_files.is_empty(), "no credential file left: {env_files:?}");

    // The failed load's `restic dump` died of SIGPIPE and left its lock:
    // the next backup's retention still runs (the stale lock is cleared).
    write(dump, json!(["/bin/busybox", "sh", "/bin/load-pg"]));
    let again = super::backups::backup(host);
    assert_eq!(again["result"]["backup"]["retention"], "applied", "{again}");
}
