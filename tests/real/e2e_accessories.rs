//! End-to-end for accessories (issue 40), on the installed package: the
//! operator declares a PostgreSQL accessory in /etc/volce-lab/policy.json
//! (as policy.md shows), the agent deploys an app that needs it through the
//! MCP server over the loopback sshd and the exact sudoers rule, sees it in
//! service_inventory, and asks for its credential to be rotated; the
//! operator approves at the terminal, reads the credential and rotates it
//! again with `volce-lab-host accessory`. With a backup repository and the
//! accessory's dump and load in the policy, the agent backs the database
//! up, a task loses its table, and the agent's restore of the dump, which
//! the operator approves, brings the row back; `backup list` shows the
//! dump. The credential is in no MCP answer and no row of the host's audit
//! trail; the app serves its row throughout, and a purge leaves nothing.
//!
//! Runs as root; needs scripts/test-images and scripts/e2e-setup.

use serde_json::{Value, json};

use super::e2e_scenario::{Agent, Answer, operator_approves, plan_id, planned_and_run, raw_audit_text};
use crate::support::e2e::*;

const APP: &str = "e2e-notes";
const SERVER_NAME: &str = "notes.e2e.test";

/// The test images' references, as scripts/test-images wrote them.
fn image(name: &str) -> Value {
    let images = std::fs::read("/var/tmp/volce-lab-test/images.json").expect("run scripts/test-images");
    let images: Value = serde_json::from_slice(&images).unwrap();
    assert!(images[name].is_object(), "scripts/test-images builds {name}: run it again");
    images[name]["reference"].clone()
}

/// Where the operator's backup repository and its password file are.
const BACKUPS: &str = "/var/tmp/volce-lab-e2e-backups";

/// The operator's edit: the accessory `db` (with its dump and load), the
/// entry `notes` that needs it, and a backup repository on a local path.
fn with_accessory(policy: &mut Value) {
    policy["accessories"] = json!({"db": {
        "image": image("pg"), "port": 5432,
        "data": {"path": "/srv/pgdata", "max_mib": 64},
        "health": ["/usr/lib/postgresql/15/bin/pg_isready", "-h", "127.0.0.1", "-p", "5432", "-q"],
        "env": {"POSTGRES_PASSWORD": "{password}"},
        "rotate": ["/bin/sh", "/bin/rotate-pg"],
        "dump": ["/bin/sh", "/bin/dump-pg"],
        "load": ["/bin/sh", "/bin/load-pg"]
    }});
    policy["catalog"]["notes"] = json!({
        "image": image("notes"), "container_port": 8080,
        "tasks": {"migrate": ["/app/bin/migrate"], "lose": ["/app/bin/sql", "DROP TABLE notes"]},
        "before_start": "migrate",
        "accessories": {"db": {"DATABASE_URL": "postgresql://app:{password}@{host}:{port}/app"}}
    });
    policy["backup"] = json!({
        "repository": format!("{BACKUPS}/repo"), "password_file": format!("{BACKUPS}/backup.password"),
        "keep": {"last": 5}
    });
}

/// The repository's directory and root's 0600 password file, made new.
fn backup_files() {
    use std::os::unix::fs::PermissionsExt as _;
    let _ = std::fs::remove_dir_all(BACKUPS);
    std::fs::create_dir_all(BACKUPS).unwrap();
    std::fs::set_permissions(BACKUPS, std::fs::Permissions::from_mode(0o700)).unwrap();
    let password = format!("{BACKUPS}/backup.password");
    std::fs::write(&password, "an-e2e-backup-password-long-enough\n").unwrap();
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// What the app's page at /cgi-bin/note shows: the row it read.
fn served_row(port: u16) -> Option<String> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10))).ok()?;
    write!(stream, "GET /cgi-bin/note HTTP/1.0\r\nHost: {SERVER_NAME}\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response.split_once("\r\n\r\n")?.1.trim().to_owned())
}

fn credential() -> String {
    std::fs::read_to_string(format!("{STATE_DIR}/data/{APP}@db.secret")).unwrap_or_default()
}

/// Its data unmounted and its containers gone, passed or failed.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        remove_apps(&[APP]);
        run("/usr/bin/umount", &[&format!("{STATE_DIR}/data/{APP}@db")], None);
        let _ = std::fs::remove_dir_all(BACKUPS);
    }
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn an_app_with_its_database_through_the_agents_tools_and_the_operators_commands() {
    let host = require_setup();
    require_host_helper();
    require_docker_and_policy();
    let _serial = serial();
    drop(Cleanup);
    fresh_host_state(&[APP]);
    let _cleanup = Cleanup;
    let _policy = PolicyChange::apply(with_accessory);
    backup_files();
    let state = private_tempdir();
    let port = free_port();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let agent = Agent::start(&host, state.path()).await;
        assert_eq!(agent.check("identity").await.status(), "ok");
        let mut answers: Vec<Answer> = Vec::new();

        let inventory = agent.call("service_inventory", json!({})).await;
        let offered = &inventory.structured["result"]["offer"]["catalog"];
        let notes = offered.as_array().unwrap().iter().find(|e| e["key"] == "notes").expect("notes offered");
        assert_eq!(notes["accessories"], json!(["db"]), "the offer names the entry's accessory");
        let deployed = planned_and_run(
            &agent,
            "deploy",
            json!({"app": APP, "image": "notes", "host_port": port, "server_name": SERVER_NAME}),
        )
        .await;
        assert_eq!(deployed.status(), "ok", "{}", deployed.structured);
        assert_eq!(served_row(port).as_deref(), Some("hello from postgres"));
        let first = credential();
        assert_eq!(first.len(), 64, "a credential generated on the server");
        let inventory = agent.call("service_inventory", json!({})).await;
        let apps = inventory.structured["result"]["apps"].as_array().unwrap().clone();
        let app = apps.iter().find(|a| a["app"] == APP).expect("the app is listed");
        assert_eq!(
            (&app["accessories"][0]["name"], &app["accessories"][0]["state"]),
            (&json!("db"), &json!("running"))
        );
        answers.extend([deployed, inventory]);

        // The agent asks for a rotation; it waits for the operator.
        let planned = agent.plan("rotate_credential", json!({"app": APP, "accessory": "db"})).await;
        assert_eq!(planned.status(), "ok", "{}", planned.structured);
        let id = plan_id(&planned);
        let early = agent.execute(&id).await;
        assert_eq!(early.structured["code"], "approval_required", "{}", early.structured);
        operator_approves(&id);
        let rotated = agent.execute(&id).await;
        assert_eq!(rotated.status(), "ok", "{}", rotated.structured);
        let second = credential();
        assert!(second.len() == 64 && second != first, "a new credential");
        assert_eq!(served_row(port).as_deref(), Some("hello from postgres"), "the app uses it");
        answers.extend([planned, early, rotated]);

        // The operator at the terminal: reads it, then rotates it again.
        let shown = as_operator(&["accessory", "secret", APP, "db"]);
        assert!(shown.ok(), "{shown:?}");
        assert_eq!(shown.stdout.trim(), second, "accessory secret prints the credential");
        let again = as_operator(&["accessory", "rotate", APP, "db", "--yes"]);
        assert!(again.ok() && again.stdout.contains("has a new credential"), "{again:?}");
        let third = credential();
        assert!(third.len() == 64 && third != second);
        assert_eq!(served_row(port).as_deref(), Some("hello from postgres"));
        answers.extend(database_backup(&agent, port).await);

        let removed = planned_and_run(&agent, "remove_app", json!({"app": APP, "purge_data": true})).await;
        assert_eq!(removed.status(), "ok", "{}", removed.structured);
        assert_eq!(credential(), "", "the purge deleted the credential");
        answers.push(removed);

        let said: String = answers.iter().map(|a| a.structured.to_string()).collect();
        let audit = raw_audit_text();
        for (which, secret) in [("first", &first), ("second", &second), ("third", &third)] {
            assert!(!said.contains(secret.as_str()), "the {which} credential reached the agent");
            assert!(!audit.contains(secret.as_str()), "the {which} credential is in the audit trail");
        }
    });
}

/// The database's backup and restore through the agent's tools, as
/// data.md's drill says: `backup init` by the operator, a backup (no
/// approval), the table lost by a task, the dump's snapshot restored with
/// the operator's approval, the row served again; `backup list` shows the
/// dump and the restore's safety dump. Returns the agent's answers.
async fn database_backup(agent: &Agent, port: u16) -> Vec<Answer> {
    let made = as_operator(&["backup", "init"]);
    assert!(made.ok(), "{made:?}");
    let backed_up = planned_and_run(agent, "backup", json!({"app": APP})).await;
    assert_eq!(backed_up.status(), "ok", "{}", backed_up.structured);
    let dump = &backed_up.structured["result"]["backup"]["dumps"][0];
    assert_eq!(dump["accessory"], "db", "{}", backed_up.structured);
    let snapshot = dump["snapshot"].as_str().unwrap().to_owned();

    let lost = planned_and_run(agent, "run_task", json!({"app": APP, "task": "lose"})).await;
    assert_eq!(lost.status(), "ok", "{}", lost.structured);
    assert_eq!(served_row(port).as_deref(), Some("no database"), "the table is gone");

    let planned = agent.plan("restore", json!({"app": APP, "snapshot": snapshot})).await;
    assert_eq!(planned.status(), "ok", "{}", planned.structured);
    let id = plan_id(&planned);
    let early = agent.execute(&id).await;
    assert_eq!(early.structured["code"], "approval_required", "{}", early.structured);
    operator_approves(&id);
    let restored = agent.execute(&id).await;
    assert_eq!(restored.status(), "ok", "{}", restored.structured);
    assert_eq!(served_row(port).as_deref(), Some("hello from postgres"), "the row is back");

    let listed = as_operator(&["backup", "list", APP]);
    assert!(listed.ok() && listed.stdout.contains(" db-dump "), "{listed:?}");
    assert!(listed.stdout.contains(" db-dump+safety "), "{listed:?}");
    vec![backed_up, lost, planned, early, restored]
}
