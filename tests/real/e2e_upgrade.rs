//! End-to-end: the package upgrade over a live installation (issue 27).
//! scripts/test installs the previous release's package
//! (packaging/previous-release, built by `scripts/package --previous`) with
//! scripts/e2e-setup and runs this suite first: it makes state with the old
//! helper (apps, plans in every state, a plan the old helper is executing),
//! upgrades to the package under test with `apt-get install ./…deb`, and
//! shows that everything is still there, that the migration waited for the
//! executing plan and ran once, that the maintainer scripts touched no app,
//! and that a downgrade below the new schema is refused before anything
//! changes. Then it walks the documented way back (issue 46): pause, the
//! backup taken before the upgrade restored with the hold, the old package
//! installed, the apps still served by the old helper; and forward again
//! to the package under test. Every e2e suite after it runs on the
//! upgraded installation.
//!
//! Runs as root; needs VOLCE_LAB_TEST_DEB (the package under test) and
//! VOLCE_LAB_TEST_PREVIOUS_DEB (the previous release's), which scripts/test
//! sets.

use std::time::{Duration, Instant};

use crate::support::e2e::*;
use crate::support::procfs::helper_process;
use serde_json::{Value, json};
use volce_lab::inspect::{Check, Inspector, Status};
use volce_lab::wire::versions::{HelperVersion, PROTOCOL_VERSION, ServerVersion};

/// What this build's workstation learns of the server's helper from an
/// identity check over the real sshd and gate (issue 27), and that the
/// check itself works whatever the server runs.
fn server_version_seen(host: &str) -> ServerVersion {
    let config = ssh_mode(std::path::Path::new(SSH_CONFIG), ALIAS, host, AGENT, &[]);
    let inspector = Inspector::new(config);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let identity = runtime.block_on(inspector.check(Check::Identity));
    assert_eq!(identity.status, Status::Ok, "identity from this workstation: {identity:?}");
    let disk = runtime.block_on(inspector.check(Check::Disk));
    assert_eq!(disk.status, Status::Ok, "disk through the gate: {disk:?}");
    inspector.server_version()
}

/// `inspect` of a workstation binary at `path` (the previous release's),
/// configured by the variables as its README says, against the e2e sshd.
fn inspect_with(path: &str, host: &str) -> Ran {
    let vars = [
        "VOLCE_LAB_MODE=ssh".to_owned(),
        format!("VOLCE_LAB_SSH_CONFIG={SSH_CONFIG}"),
        format!("VOLCE_LAB_SSH_ALIAS={ALIAS}"),
        format!("VOLCE_LAB_EXPECTED_HOST={host}"),
        format!("VOLCE_LAB_EXPECTED_USER={AGENT}"),
    ];
    let mut args: Vec<&str> = vars.iter().map(String::as_str).collect();
    args.extend([path, "inspect"]);
    run("/usr/bin/env", &args, None)
}

/// Whether `inspect`'s report says `check` is ok.
fn reports_ok(report: &str, check: &str) -> bool {
    report.lines().any(|line| line.split_whitespace().take(2).eq([check, "ok"]))
}

/// The schema the previous release reads (src/install/package_check.rs).
const PREVIOUS_SCHEMA: i64 = 10;

fn installed_version() -> String {
    let ran = run("/usr/bin/dpkg-query", &["-W", "-f", "${Version}", "volce-lab"], None);
    assert!(ran.ok(), "dpkg-query: {ran:?}");
    ran.stdout.trim().to_owned()
}

/// `apt-get install ./DEB`, as docs/server-install.md upgrades.
fn apt_install(deb: &str) -> Ran {
    run(
        "/usr/bin/env",
        &[
            "DEBIAN_FRONTEND=noninteractive",
            "/usr/bin/apt-get",
            "-o",
            "DPkg::Lock::Timeout=600",
            "-qq",
            "install",
            "-y",
            "--allow-downgrades",
            "--no-install-recommends",
            deb,
        ],
        None,
    )
}

/// Plans one action and returns its (id, digest); an engine snapshot moved
/// by other activity on the machine is not expected here (nothing else
/// runs while the e2e suites do).
fn plan(action: &str, parameters: Value) -> (String, String) {
    let (code, planned) =
        agent_rpc(&json!({"operation": "plan", "action": action, "parameters": parameters}));
    assert_eq!(code, Some(0), "{action} plan: {planned}");
    (find_str(&planned, "id").to_owned(), find_str(&planned, "digest").to_owned())
}

fn execute(plan_id: &str) -> (Option<i32>, Value) {
    agent_rpc(&json!({"operation": "execute", "plan_id": plan_id}))
}

fn deploy(app: &str, container_port: u16) -> (String, String) {
    plan(
        "deploy",
        json!({"app": app, "image": "web", "host_port": free_port(), "container_port": container_port,
               "server_name": format!("{app}.e2e.test")}),
    )
}

/// The state of each plan, as `show --json` gives it (root's own view;
/// `list` shows only what awaits the operator).
fn plan_states(ids: &[&str]) -> std::collections::BTreeMap<String, String> {
    ids.iter().map(|id| (id.to_string(), state_of(id))).collect()
}

fn state_of(plan_id: &str) -> String {
    stored_plan(plan_id)["state"].as_str().unwrap_or_default().to_owned()
}

/// The containers of volce-lab apps: id, state and start time of each.
fn app_containers() -> Vec<String> {
    let ids = run(DOCKER, &["ps", "-aq", "--no-trunc", "--filter", "label=io.volce-lab.app"], None);
    let mut seen: Vec<String> = ids
        .stdout
        .split_whitespace()
        .map(|id| {
            let facts = run(
                DOCKER,
                &["inspect", "--format", "{{.Id}} {{.State.Status}} {{.State.StartedAt}}", id],
                None,
            );
            facts.stdout.trim().to_owned()
        })
        .collect();
    seen.sort();
    seen
}

/// The pid of the old helper's `rpc-worker` (the process that executes).
fn rpc_worker() -> Option<i32> {
    helper_process("rpc-worker")
}

fn signal(pid: i32, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).expect("signal the rpc worker");
}

/// Continues the held worker when dropped, so that a failing assertion
/// never leaves a stopped helper (and its ssh session) behind.
struct Held(i32);

impl Drop for Held {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.0), nix::sys::signal::Signal::SIGCONT);
    }
}

/// Whether the old helper has committed its claim of `plan_id`, read on a
/// read-only connection: through the helper, a read would wait for the
/// write lock of a worker stopped inside a transaction.
fn claimed(plan_id: &str) -> bool {
    let database = std::path::Path::new(STATE_DIR).join("state.db");
    volce_lab::store::read_claims(&database)
        .map(|claims| claims.iter().any(|(id, _, _)| id.as_str() == plan_id))
        .unwrap_or(false)
}

/// Executes `plan_id` in a thread and stops the helper's worker while the
/// plan is `executing`: once its claim is committed, a moment later (the
/// worker is then in docker's calls, outside any transaction). Returns the
/// held worker (continued when dropped) and the thread.
fn execute_and_hold(plan_id: &str) -> (Held, std::thread::JoinHandle<(Option<i32>, Value)>) {
    let id = plan_id.to_owned();
    let running = std::thread::spawn(move || execute(&id));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !claimed(plan_id) {
        assert!(Instant::now() < deadline, "the old helper never claimed {plan_id}");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(500));
    let pid = rpc_worker().expect("the old helper's rpc-worker runs the plan");
    signal(pid, nix::sys::signal::Signal::SIGSTOP);
    let held = Held(pid);
    assert!(claimed(plan_id), "{plan_id} ended before the worker was held; the deploy must take longer");
    // A docker call the worker had started when it stopped still runs to its
    // end (a container it creates then appeared after the test's "before",
    // once, on CI): the engine is still only when no child of the worker is
    // left but an unreaped one.
    let deadline = Instant::now() + Duration::from_secs(30);
    while children_running(pid) {
        assert!(Instant::now() < deadline, "a docker call of the held worker never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    (held, running)
}

/// Whether a child of `parent` still runs (one that ended stays a zombie:
/// its stopped parent does not reap it).
fn children_running(parent: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else { return false };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { return false };
        // pid (comm) state ppid ...: comm may hold spaces, so read after its ')'.
        let mut after = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace();
        let (state, ppid) = (after.next(), after.next().and_then(|p| p.parse::<i32>().ok()));
        ppid == Some(parent) && state != Some("Z")
    })
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn the_package_upgrade_keeps_plans_apps_and_the_trail_and_a_downgrade_below_the_schema_is_refused() {
    require_installation();
    require_host_helper();
    require_docker_and_policy();
    let _serial = serial();
    let new_deb = std::env::var("VOLCE_LAB_TEST_DEB").expect("VOLCE_LAB_TEST_DEB: the package under test");
    let old_deb = std::env::var("VOLCE_LAB_TEST_PREVIOUS_DEB")
        .expect("VOLCE_LAB_TEST_PREVIOUS_DEB: the previous release");
    let host = require_installation();
    let old_version = installed_version();
    assert!(
        old_version.starts_with("0.1.0-"),
        "the suite starts on the previous release's package (scripts/e2e-setup $(scripts/package --previous)), \
         not {old_version}"
    );
    let apps = ["e2e-up1", "e2e-up2", "e2e-up3"];
    fresh_host_state(&apps);
    // This workstation against the old gate: the checks work, and the gate
    // names no version (protocol 1). Keep the old workstation binary for
    // the other direction after the upgrade.
    assert_eq!(server_version_seen(&host), ServerVersion::Before020);
    // What a protocol-2 server is sent, the old helper cannot read (it
    // refuses unknown fields): why a server that names no protocol is sent
    // protocol 1's bytes, which are exactly what 0.1.0's workstation sent.
    let (code, refused) = agent_rpc(&json!({"operation": "inventory", "protocol": 2}));
    assert_eq!((code, &refused["code"]), (Some(1), &json!("invalid_request")), "{refused}");
    assert_eq!(
        volce_lab::wire::Request::Inventory {}.to_bytes_for(None, &ServerVersion::Before020),
        br#"{"operation":"inventory"}"#
    );
    // A deploy that leaves its port to the catalog (protocol 2): 0.1.0
    // refuses it, so the workstation, having learned the old gate's
    // protocol, answers server_too_old instead of sending it.
    let without_port =
        json!({"app": "e2e-up1", "image": "web", "host_port": 18081, "server_name": "e2e.test"});
    let (code, refused) =
        agent_rpc(&json!({"operation": "plan", "action": "deploy", "parameters": without_port.clone()}));
    assert_eq!((code, &refused["code"]), (Some(1), &json!("invalid_parameters")), "{refused}");
    let request = volce_lab::wire::Request::plan(
        volce_lab::vocab::Action::Deploy,
        without_port.as_object().unwrap().clone(),
    );
    let seen = server_version_seen(&host);
    let refusal = volce_lab::wire::versions::may_send(request.needs(), &seen, ALIAS).unwrap_err();
    assert_eq!(refusal.code, volce_lab::vocab::Code::ServerTooOld, "{refusal:?}");
    let old_workstation = tempfile::tempdir().unwrap();
    let old_binary = old_workstation.path().join("volce-lab-0.1.0");
    std::fs::copy(INSTALLED, &old_binary).unwrap();
    let old_binary = old_binary.to_str().unwrap();

    // --- state made by the old helper -------------------------------------------
    let mut deployed = Vec::new();
    for app in &apps[..2] {
        let (id, _) = deploy(app, 8080);
        let (code, done) = execute(&id);
        assert_eq!(code, Some(0), "deploy {app}: {done}");
        deployed.push(id);
    }
    let (rejected, _) = plan("stop", json!({"app": "e2e-up1"}));
    assert!(as_operator(&["reject", &rejected]).ok());
    let (waiting, waiting_digest) = plan("stop", json!({"app": "e2e-up1"}));
    let (approved, approved_digest) = plan("stop", json!({"app": "e2e-up2"}));
    let ok = as_operator(&["approve", &approved, &approved_digest, "--yes"]);
    assert!(ok.ok(), "approve with the old helper: {ok:?}");
    // The backup the way back restores (server-install.md, Upgrading: taken
    // before the upgrade). 0.1.0 has no `state backup`, so it is what
    // `sqlite3 state.db .backup` makes, by SQLite's online backup API, at a
    // quiet moment: no plan executes, the helper is not running.
    let backup_dir = private_tempdir();
    let backup = backup_dir.path().join("state.db");
    volce_lab::store::copy_database(&std::path::Path::new(STATE_DIR).join("state.db"), &backup)
        .expect("a backup of the 0.1.0 state before the upgrade");
    let ports: Vec<u16> = deployed
        .iter()
        .map(|id| {
            find(&stored_plan(id), "host_port").and_then(Value::as_u64).expect("the deploy's host_port")
                as u16
        })
        .collect();
    // A deploy whose health check cannot pass (nothing listens on 9999 in the
    // container) runs for seconds before its rollback: long enough to hold.
    let (in_flight, _) = deploy("e2e-up3", 9999);
    let (held, running) = execute_and_hold(&in_flight);

    let ids = [&deployed[0], &deployed[1], &rejected, &waiting, &approved, &in_flight].map(String::as_str);
    let before = plan_states(&ids);
    assert_eq!((before[&deployed[0]].as_str(), before[&deployed[1]].as_str()), ("completed", "completed"));
    assert_eq!(before[&rejected], "rejected");
    assert_eq!((before[&waiting].as_str(), before[&approved].as_str()), ("pending", "pending"));
    assert_eq!(before[&in_flight], "executing");
    let head_before = run(HOST_LINK, &["audit", "head"], None);
    assert!(head_before.ok(), "audit head: {head_before:?}");
    let containers_before = app_containers();
    assert!(containers_before.len() >= 2, "two apps run: {containers_before:?}");

    // --- the upgrade, while the old helper is stopped mid-execute --------------
    let upgraded = apt_install(&new_deb);
    assert!(upgraded.ok(), "apt-get install ./new.deb: {upgraded:?}");
    assert_ne!(installed_version(), old_version);
    assert_eq!(
        sha256_file(INSTALLED),
        sha256_file(env!("CARGO_BIN_EXE_volce-lab")),
        "the new binary is installed"
    );
    assert_eq!(app_containers(), containers_before, "the maintainer scripts touched no app");

    // The new helper does not migrate under the old one's running plan.
    let migrates = volce_lab::store::Store::supported_version() > PREVIOUS_SCHEMA;
    let list = run(HOST_LINK, &["list"], None);
    let (code, inventory) = agent_rpc(&json!({"operation": "inventory"}));
    if migrates {
        // Issue 46: the operator's list (text and JSON), show and audit
        // head answer, the database unmigrated, naming the plan the
        // migration waits for.
        assert!(list.ok(), "list answers while the migration waits: {list:?}");
        assert!(
            list.stdout.contains("upgrade_waiting") && list.stdout.contains(&in_flight),
            "the list names the plan it waits for: {list:?}"
        );
        assert!(list.stdout.contains(&approved), "the whole list, from a copy migrated in memory: {list:?}");
        let listed = run(HOST_LINK, &["list", "--json"], None);
        assert!(listed.ok(), "list --json while the migration waits: {listed:?}");
        let listed: Value = serde_json::from_str(&listed.stdout).expect("list --json is JSON");
        assert!(listed["upgrade_waiting"].as_str().is_some_and(|s| s.contains(&in_flight)), "{listed}");
        let shown = run(HOST_LINK, &["show", &approved], None);
        assert!(
            shown.ok() && shown.stdout.starts_with("upgrade_waiting: ") && shown.stdout.contains(&approved),
            "show while the migration waits: {shown:?}"
        );
        let head = run(HOST_LINK, &["audit", "head"], None);
        assert!(
            head.ok() && head.stdout.contains("Read without migrating"),
            "audit head while it waits: {head:?}"
        );
        assert_eq!((code, &inventory["code"]), (Some(1), &json!("upgrade_waiting")), "{inventory}");
    } else {
        // Nothing to migrate: the new helper reads the state as it is and
        // names the old one's stopped claimer.
        assert!(list.ok() && list.stdout.contains(&in_flight) && list.stdout.contains("STOPPED"), "{list:?}");
        assert_eq!(code, Some(0), "{inventory}");
    }

    // The old helper finishes its plan (a rollback), then the migration runs.
    drop(held);
    let (_, finished) = running.join().expect("the held execute");
    // Its health check fails either way; whether the old helper could confirm
    // its rollback depends on where the stop caught it (a docker call that
    // outlived its deadline while stopped is unconfirmed). Either outcome is
    // its own to record, and needs_inspection has its way out below.
    let held_end = match finished["status"].as_str() {
        Some("rejected") => "failed",
        Some("needs_inspection") => "needs_inspection",
        _ => panic!("the held deploy ended neither rolled back nor for inspection: {finished}"),
    };

    let after = plan_states(&ids);
    for (id, state) in &before {
        if id != &in_flight {
            assert_eq!(after.get(id), Some(state), "plan {id} kept its state across the upgrade");
        }
    }
    assert!(!stored_plan(&approved)["approval"].is_null(), "the old helper's approval is kept");
    assert_eq!(after[&in_flight], held_end, "the held plan ended as the old helper recorded it");
    if held_end == "needs_inspection" {
        // The operator inspects and resolves it with the new helper.
        remove_apps(&["e2e-up3"]);
        let resolved = as_operator(&["resolve", &in_flight]);
        assert!(resolved.ok(), "resolve after the upgrade: {resolved:?}");
    }
    let verified = run(HOST_LINK, &["audit", "verify"], None);
    assert!(verified.ok(), "audit verify across the migration: {verified:?}");
    if migrates {
        let trail = run(HOST_LINK, &["audit", "export", "--json"], None);
        assert!(
            trail.stdout.lines().any(|row| row.contains(r#""code":"upgrade_waiting""#)),
            "the requests refused while the migration waited are counted in the trail: {trail:?}"
        );
    }
    let verified_from = run(
        HOST_LINK,
        &["audit", "verify", "--from", head_before.stdout.split_whitespace().next().unwrap()],
        None,
    );
    assert!(verified_from.ok(), "the chain still holds the head from before: {verified_from:?}");
    let doctor = run(HOST_LINK, &["doctor"], None);
    assert!(doctor.ok(), "doctor after the upgrade: {doctor:?}");

    // Versions meet: this workstation learns the new helper's version from
    // the gate, and the previous release's workstation still checks the
    // upgraded server (it passes over the gate's version line).
    assert_eq!(server_version_seen(&host), ServerVersion::Known(HelperVersion::this()));
    // The new helper reads this workstation's protocol, and refuses a newer
    // one than its own server_too_old, naming its version.
    let (code, _) = agent_rpc(&json!({"operation": "inventory", "protocol": PROTOCOL_VERSION}));
    assert_eq!(code, Some(0), "the protocol field is read from 0.2.0");
    let (code, refused) = agent_rpc(&json!({"operation": "inventory", "protocol": PROTOCOL_VERSION + 1}));
    assert_eq!((code, &refused["code"]), (Some(1), &json!("server_too_old")), "{refused}");
    assert!(refused["message"].as_str().unwrap().contains(env!("CARGO_PKG_VERSION")), "{refused}");
    let old_inspect = inspect_with(old_binary, &host);
    assert!(
        reports_ok(&old_inspect.stdout, "identity") && reports_ok(&old_inspect.stdout, "disk"),
        "the 0.1.0 workstation against the upgraded server: {old_inspect:?}"
    );

    // Plans made and approved before the upgrade still work after it.
    let (code, done) = execute(&approved);
    assert_eq!(code, Some(0), "the plan approved by the old helper executes under the new one: {done}");
    assert!(as_operator(&["approve", &waiting, &waiting_digest, "--yes"]).ok());
    let (code, done) = execute(&waiting);
    assert_eq!(code, Some(0), "a plan made before the upgrade, approved after it: {done}");

    // --- the downgrade ------------------------------------------------------------
    let containers = app_containers();
    let binary = sha256_file(INSTALLED);
    let downgraded = apt_install(&old_deb);
    if volce_lab::store::Store::supported_version() > PREVIOUS_SCHEMA {
        assert!(!downgraded.ok(), "a downgrade below the schema must fail: {downgraded:?}");
        let said = format!("{}{}", downgraded.stdout, downgraded.stderr);
        assert!(said.contains("refused (downgrade_refused)"), "dpkg's output carries the refusal: {said}");
        assert!(said.contains("server-install.md, Upgrading"), "{said}");
        assert_eq!(sha256_file(INSTALLED), binary, "the new binary stays");
        assert_ne!(installed_version(), old_version);
        let list = run(HOST_LINK, &["list"], None);
        assert!(list.ok(), "the installation works after the refused downgrade: {list:?}");
        assert_eq!(app_containers(), containers, "the downgrade attempt touched no app");
        // The documented way back, walked to its end, then forward again.
        let served = Served { apps: &apps[..2], ports: &ports };
        the_way_back(&served, backup.to_str().unwrap(), &old_deb, &old_version);
        forward_again(&served, &new_deb);
    } else {
        // No migration since the previous release: it reads this state, and
        // the downgrade may go on; the new package goes back on for the
        // suites after this one.
        assert!(downgraded.ok(), "a downgrade to a release that reads the schema: {downgraded:?}");
        assert!(apt_install(&new_deb).ok());
        assert_eq!(app_containers(), containers, "the downgrade touched no app");
    }
    remove_apps(&apps);
}

/// The apps made before the upgrade, and the gateway ports they serve on.
struct Served<'a> {
    apps: &'a [&'a str],
    ports: &'a [u16],
}

impl Served<'_> {
    /// Each app answers through the gateway (HTTP 2xx or 3xx).
    fn assert_serving(&self, when: &str) {
        for (app, port) in self.apps.iter().zip(self.ports) {
            let answer = http_get(*port, &format!("{app}.e2e.test"));
            assert!(
                answer.as_ref().is_some_and(|(code, _)| (200..400).contains(code)),
                "{app} must serve through the gateway on port {port} {when}: {answer:?}"
            );
        }
    }
}

/// Plans, approves (when the policy asks for it) and executes `action` on
/// `app` with the installed helper.
fn planned_and_executed(action: &str, app: &str) {
    let (id, digest) = plan(action, json!({"app": app}));
    let approved = as_operator(&["approve", &id, &digest, "--yes"]);
    assert!(
        approved.ok() || approved.stderr.contains("approval_not_required"),
        "approve {action} {app}: {approved:?}"
    );
    let (code, done) = execute(&id);
    assert_eq!(code, Some(0), "{action} {app}: {done}");
}

/// The way back of server-install.md ("Upgrading"), with the agent's
/// requests arriving all along: pause, restore the pre-upgrade backup with
/// the hold, install the old package (its package-check passes: the old
/// version reads the restored schema), and the old helper serves the apps.
fn the_way_back(served: &Served<'_>, backup: &str, old_deb: &str, old_version: &str) {
    // The stop plans executed after the upgrade stopped both apps; the
    // backup says they run, so start them again first (with the new helper).
    for app in served.apps {
        planned_and_executed("start", app);
    }
    served.assert_serving("before the way back");

    let paused = as_operator(&["pause", "--reason", "downgrade to 0.1.0"]);
    assert!(paused.ok(), "pause: {paused:?}");
    let (code, refused) = agent_rpc(&json!({"operation": "inventory"}));
    assert_eq!(
        (code, &refused["code"]),
        (Some(1), &json!("paused")),
        "the agent is refused while paused: {refused}"
    );
    assert!(
        refused["message"].as_str().unwrap_or("").contains("downgrade to 0.1.0"),
        "with the reason: {refused}"
    );

    let restored = as_operator(&["state", "restore", backup, "--for-downgrade"]);
    assert!(restored.ok(), "state restore --for-downgrade: {restored:?}");
    let database = std::path::Path::new(STATE_DIR).join("state.db");
    let schema = || volce_lab::store::schema_version_of(&database).expect("the restored schema");
    assert_eq!(schema(), Some(PREVIOUS_SCHEMA), "the backup's schema is in place");
    // Held: the agent, `list` and the doctor all leave it unmigrated.
    let (code, held) = agent_rpc(&json!({"operation": "inventory"}));
    assert_eq!(
        (code, &held["code"]),
        (Some(1), &json!("downgrade_pending")),
        "the agent meets the hold: {held}"
    );
    let list = run(HOST_LINK, &["list"], None);
    assert!(list.stderr.contains("refused (downgrade_pending)"), "list meets the hold: {list:?}");
    let doctor = run(HOST_LINK, &["doctor"], None);
    assert!(doctor.stdout.contains("restored for a downgrade"), "the doctor names the hold: {doctor:?}");
    assert_eq!(schema(), Some(PREVIOUS_SCHEMA), "nothing migrated the held backup");

    // The agent's shell as this version's setup leaves it: the gate, which
    // 0.1.0's helper cannot be.
    assert!(run("/usr/sbin/usermod", &["--shell", HOST_LINK, "--", AGENT], None).ok());
    // No VOLCE_LAB_PACKAGE_CHECK=skip: the installed package-check reads
    // the restored schema, which 0.1.0 reads.
    let downgraded = apt_install(old_deb);
    assert!(downgraded.ok(), "the old package installs over the held backup: {downgraded:?}");
    assert_eq!(installed_version(), old_version, "0.1.0 is installed again");
    let shell = nix::unistd::User::from_name(AGENT).unwrap().expect("the agent").shell;
    assert_eq!(shell, std::path::Path::new("/bin/sh"), "the postrm gave the agent /bin/sh back");
    let over_sshd = over_ssh(
        "sudo -n /usr/local/bin/volce-lab-host rpc",
        Some(json!({"operation": "gateway_status"}).to_string().as_bytes()),
    );
    assert_eq!(over_sshd.code, Some(0), "the agent's key through sshd and 0.1.0's gate: {over_sshd:?}");
    let wants = "/etc/systemd/system/multi-user.target.wants/volce-lab-data.service";
    assert!(std::fs::symlink_metadata(wants).is_err(), "no dangling enable link of the data unit is left");
    let (code, inventory) = agent_rpc(&json!({"operation": "inventory"}));
    assert_eq!(code, Some(0), "the old helper answers the agent (it knows no pause): {inventory}");
    for app in served.apps {
        assert!(inventory.to_string().contains(app), "the old helper manages {app}: {inventory}");
    }
    let (code, gateways) = agent_rpc(&json!({"operation": "gateway_status"}));
    assert_eq!(code, Some(0), "gateway_status with the old helper: {gateways}");
    served.assert_serving("with the old package");
    let verified = run(HOST_LINK, &["audit", "verify"], None);
    assert!(verified.ok(), "the old helper verifies the restored trail: {verified:?}");
    assert_eq!(schema(), Some(PREVIOUS_SCHEMA), "the old helper keeps its schema");
}

/// Back to the package under test, so the suites after this one run on an
/// upgraded installation: the postinst lifts the hold, the new helper
/// migrates, and the apps keep serving.
fn forward_again(served: &Served<'_>, new_deb: &str) {
    let upgraded = apt_install(new_deb);
    assert!(upgraded.ok(), "apt-get install ./new.deb after the way back: {upgraded:?}");
    assert_eq!(
        sha256_file(INSTALLED),
        sha256_file(env!("CARGO_BIN_EXE_volce-lab")),
        "the new binary is back"
    );
    let hold = std::path::Path::new(STATE_DIR).join(volce_lab::store::hold::HOLD_FILE);
    assert!(!hold.exists(), "the postinst lifted the restore hold");
    let (code, inventory) = agent_rpc(&json!({"operation": "inventory"}));
    assert_eq!(code, Some(0), "the new helper migrates and answers: {inventory}");
    let database = std::path::Path::new(STATE_DIR).join("state.db");
    assert_eq!(
        volce_lab::store::schema_version_of(&database).unwrap(),
        Some(volce_lab::store::Store::supported_version()),
        "migrated to this build's schema"
    );
    let verified = run(HOST_LINK, &["audit", "verify"], None);
    assert!(verified.ok(), "audit verify after going forward again: {verified:?}");
    served.assert_serving("after going forward again");
    setup_again();
}

/// The last step of docs/server-install.md's Upgrading: `setup` again with
/// the arguments it was first run with. The previous release's setup wrote
/// the one-line sudoers rule, the key line without `exec` and `/bin/sh` as
/// the agent's shell, which doctor warns of; run again, setup replaces
/// them with this version's drop-in, line and shell (issue 44),
/// and the suites after this one find the installation a fresh setup makes.
fn setup_again() {
    let before = run(HOST_LINK, &["doctor"], None);
    assert!(
        before.stdout.contains("WARN sudo options"),
        "the old rule is named after the upgrade: {before:?}"
    );
    // The previous release's key line, without `exec`: as safe, a fork more.
    assert!(before.stdout.contains("WARN agent key"), "the old key line is named: {before:?}");
    // And its shell, /bin/sh: as safe, one shell start more.
    assert!(before.stdout.contains("WARN agent shell: /bin/sh"), "the old shell is named: {before:?}");
    let key = format!("{E2E_DIR}/client/id_ed25519.pub");
    let again = run(HOST_LINK, &["setup", "--agent", AGENT, "--operator", OPERATOR, "--key", &key], None);
    assert!(again.ok(), "setup again after the upgrade: {again:?}");
    let sudoers = std::fs::read_to_string("/etc/sudoers.d/volce-lab").unwrap();
    assert_eq!(sudoers, volce_lab::install::sudoers_file(AGENT), "setup wrote this version's drop-in");
    let after = run(HOST_LINK, &["doctor"], None);
    assert!(after.ok() && !after.stdout.contains("WARN sudo options"), "{after:?}");
    assert!(!after.stdout.contains("WARN agent key"), "setup rewrote the key line it wrote: {after:?}");
    assert!(!after.stdout.contains("WARN agent shell"), "setup made the gate the shell: {after:?}");
    let shell = nix::unistd::User::from_name(AGENT).unwrap().expect("the agent").shell;
    assert_eq!(shell, std::path::Path::new(HOST_LINK), "the agent's shell after setup again");
    let keys = std::fs::read_to_string(format!("/home/{AGENT}/.ssh/authorized_keys")).unwrap();
    assert!(keys.starts_with(&volce_lab::install::gate_key_options()), "{keys}");
    let (code, inventory) = agent_rpc(&json!({"operation": "inventory"}));
    assert_eq!(code, Some(0), "the agent's rpc under the new rule: {inventory}");
}
