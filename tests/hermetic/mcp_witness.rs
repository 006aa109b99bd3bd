//! The trail witnessed off the host (issue 45), end to end in-process: the
//! MCP server's real rpc client against the real host pipeline on a fake
//! engine (`support::harness`), relayed by a stand-in `/bin/sh` helper that
//! hands each request to the host and prints its answer. Between calls the
//! tests do to the host's state.db what a root attacker or an operator
//! would: restore an old copy, rewrite the chain, prune its start.
//! Runs unprivileged; no network.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, Tool};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use volce_lab::inspect::Inspector;
use volce_lab::inspect::transport::RunLimits;
use volce_lab::mcp::audit::Audit;
use volce_lab::mcp::witness::{Resolve, Witness, resolve_with};
use volce_lab::mcp::{Options, VolceLab};
use volce_lab::store::{ChainedEntry, Store, chain_link};
use volce_lab::wire::witness::Mismatch;

use crate::support::harness::{Harness as World, START, TestClock};
use crate::support::mcp::{ScriptedTarget, arguments, stand_in_config, structured};

/// A gate of protocol 2: the identity frame names the helper's version.
const GATE_V2: &str =
    r#"printf 'volce-lab-gate 1 match web-1 agent\nweb-1\nagent\nvolce-lab-host 0.2.0 protocol 2\n'"#;
/// A login shell (no gate): protocol 1 assumed, as a 0.1.0 server.
const NO_GATE: &str = r#"printf 'web-1\nagent\n'"#;
/// The helper: counts its runs, hands the request over, waits for the
/// host's answer and exits as the host said.
const RELAY: &str = r#"echo x >> "$DIR/rpc_calls"; cat > "$DIR/request.tmp" && mv "$DIR/request.tmp" "$DIR/request"
i=0; while [ ! -f "$DIR/reply" ]; do sleep 0.02; i=$((i+1)); [ $i -gt 500 ] && exit 3; done
mv "$DIR/reply" "$DIR/reply.last"; cat "$DIR/reply.last"; exit "$(cat "$DIR/exit")""#;

struct Lab {
    world: World,
    /// The world's directory (a world of `World::at` owns none).
    _root: tempfile::TempDir,
    dir: tempfile::TempDir,
    client: RunningService<RoleClient, ()>,
    tools: Vec<Tool>,
    stop: Arc<AtomicBool>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Answers each request the relay hands over with the host of `root`,
/// two minutes after the one before (so no request row is folded).
fn serve_host(root: PathBuf, clock: TestClock, dir: PathBuf, stop: Arc<AtomicBool>) {
    let mut world = World::at(&root);
    world.host.clock = clock;
    while !stop.load(Ordering::SeqCst) {
        let Ok(request) = std::fs::read(dir.join("request")) else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        std::fs::remove_file(dir.join("request")).unwrap();
        world.host.clock.advance(120);
        let host = world.host();
        let answered = host.rpc_answered("agent", &request[..], &volce_lab::docker::NoProgress);
        let exit = if answered.reply.exit() == volce_lab::exit::Exit::Ok { "0" } else { "1" };
        std::fs::write(dir.join("exit"), exit).unwrap();
        let mut file = std::fs::File::create(dir.join("reply.tmp")).unwrap();
        file.write_all(answered.to_line().as_bytes()).unwrap();
        drop(file);
        std::fs::rename(dir.join("reply.tmp"), dir.join("reply")).unwrap();
    }
}

impl Lab {
    async fn start(identity: &str) -> Lab {
        // No seeded app: its rows' times would be ahead of a clock set back.
        let world_dir = tempfile::tempdir().unwrap();
        let mut world = World::at(world_dir.path());
        world.write_policy(&crate::support::harness::policy_json());
        let dir = tempfile::tempdir().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let clock = world.host.clock.clone();
        let (root, relay_dir, stopping) = (world.root.clone(), dir.path().to_owned(), stop.clone());
        std::thread::spawn(move || serve_host(root, clock, relay_dir, stopping));
        let stand_in = ScriptedTarget {
            dir: dir.path().to_owned(),
            identity: identity.into(),
            disk: "true".into(),
            rpc: RELAY.into(),
        };
        let config = volce_lab::config::Config { ssh_alias: "web-1".into(), ..stand_in_config(true) };
        let inspector = Inspector::with_transport_for_tests(config, Arc::new(stand_in));
        let options = Options {
            rpc_limits: RunLimits { output: 128 * 1024, timeout: Duration::from_secs(20) },
            audit: Audit::at(dir.path().join("state/volce-lab/audit.jsonl")),
            heartbeat: volce_lab::mcp::progress::HEARTBEAT,
        };
        let (client_io, server_io) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server_io);
        tokio::spawn(volce_lab::mcp::serve(VolceLab::new(inspector, options), read, write));
        let client = ().serve(client_io).await.expect("initialize");
        let tools = client.list_all_tools().await.expect("tools/list");
        let lab = Lab { world, _root: world_dir, dir, client, tools, stop };
        assert_eq!(lab.call("cloud_check", json!({"check": "identity"})).await["status"], "ok");
        lab
    }

    async fn call(&self, name: &str, args: Value) -> Value {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments(args));
        let result = self.client.call_tool(params).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        structured(self.tools.iter().find(|t| t.name == name).unwrap(), &result)
    }

    async fn inventory(&self) -> Value {
        let result = self.call("service_inventory", json!({})).await;
        assert_eq!(result["status"], "ok", "{result}");
        result
    }

    async fn plan(&self) -> Value {
        self.call("service_plan", json!({"action": "stop", "parameters": {"app": "web"}})).await
    }

    fn witness(&self) -> Witness {
        Witness::beside(Some(&self.dir.path().join("state/volce-lab/audit.jsonl")))
    }

    fn rpc_calls(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("rpc_calls")).map_or(0, |t| t.lines().count())
    }

    fn database(&self) -> PathBuf {
        self.world.paths.database()
    }

    /// The head `sudo volce-lab-host audit head` prints on the server.
    fn host_head(&self) -> String {
        let mut store = Store::open(&self.database()).unwrap();
        store.read(|tx| tx.audit_head()).unwrap().hash().unwrap().to_owned()
    }

    fn mismatch(&self) -> Option<Mismatch> {
        self.witness().held("web-1").and_then(|entry| entry.mismatch).map(|found| found.mismatch)
    }
}

/// Puts `backup` in place of the host's state.db, as an operator restoring
/// an old copy by hand would.
fn restore(database: &Path, backup: &Path) {
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", database.display()));
    }
    std::fs::copy(backup, database).unwrap();
    std::fs::set_permissions(database, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Root rewrites the chain whole from `seq` on: one row's actor changed,
/// every hash after it recomputed, so `audit verify` alone finds nothing.
fn rewrite_from(database: &Path, seq: i64) {
    let mut rows: Vec<ChainedEntry> = Vec::new();
    let mut store = Store::open(database).unwrap();
    store.read(|tx| tx.audit_since(0, |row| rows.push(row))).unwrap();
    drop(store);
    let connection = rusqlite::Connection::open(database).unwrap();
    let mut prev: Option<String> = None;
    for row in rows.iter_mut().filter(|row| row.seq >= seq) {
        if row.seq == seq {
            row.actor = "someone-else".into();
        }
        let prev_hash = prev.clone().or(row.prev_hash.clone()).unwrap();
        let hash = chain_link(&prev_hash, &row.content());
        connection
            .execute(
                "UPDATE audit SET actor = ?1, prev_hash = ?2, hash = ?3 WHERE seq = ?4",
                rusqlite::params![row.actor, prev_hash, hash, row.seq],
            )
            .unwrap();
        prev = Some(hash);
    }
}

/// The operator's `audit prune --before` the time `before_now` seconds
/// before the host's clock.
fn prune(lab: &Lab, before_now: i64) {
    use volce_lab::control::Clock as _;
    let now = lab.world.host.clock.now();
    let before = volce_lab::text::rfc3339_seconds(now - before_now);
    let operator = volce_lab::host::Caller::from("root");
    volce_lab::host::audit::prune(&lab.world.paths, &before, &operator, now).unwrap();
}

/// Tried: an old state.db restored on the host after two witnessed calls;
/// then a management call (refused here, nothing sent); then the operator's
/// accept with a wrong head (refused) and with `audit head`'s.
#[tokio::test(flavor = "multi_thread")]
async fn a_restored_old_state_db_is_caught_and_management_refused_until_accepted() {
    let lab = Lab::start(GATE_V2).await;
    lab.inventory().await;
    let backup = lab.dir.path().join("old-state.db");
    volce_lab::store::copy_database(&lab.database(), &backup).unwrap();
    let seen = |name: &str| std::fs::read_to_string(lab.dir.path().join(name)).unwrap_or_default();
    let old = lab.witness().held("web-1").unwrap_or_else(|| panic!("{}", seen("reply.last"))).head.seq;
    lab.inventory().await;
    lab.inventory().await;
    let grown = lab.witness().held("web-1").unwrap();
    assert!(grown.head.seq > old && grown.mismatch.is_none(), "{grown:?}");
    restore(&lab.database(), &backup);
    let read = lab.inventory().await;
    let message = read["message"].as_str().unwrap();
    assert!(message.contains(&format!("seq {}", grown.head.seq)), "{message}");
    assert!(message.contains("audit_witness_mismatch"), "{message}");
    assert!(matches!(lab.mismatch(), Some(Mismatch::RolledBack { seq, .. }) if seq == grown.head.seq));
    let check = lab.call("cloud_check", json!({"check": "disk"})).await;
    assert_eq!(check["status"], "ok", "read-only checks still run: {check}");
    assert!(check.to_string().contains("audit_witness_mismatch"), "and say so: {check}");
    let sent = lab.rpc_calls();
    let refused = lab.plan().await;
    assert_eq!(refused["code"], "audit_witness_mismatch", "{refused}");
    assert!(refused["message"].as_str().unwrap().contains(&format!("seq {}", grown.head.seq)), "{refused}");
    assert_eq!(lab.rpc_calls(), sent, "nothing was sent");
    let witness = lab.witness();
    let wrong = Resolve::Accept { target: "web-1".into(), hash: "e".repeat(64) };
    let (text, exit) = resolve_with(&witness, &["web-1"], &wrong, START).unwrap();
    assert_eq!(exit, volce_lab::exit::Exit::Failure, "{text}");
    assert!(lab.mismatch().is_some(), "nothing changed");
    let right = Resolve::Accept { target: "web-1".into(), hash: lab.host_head() };
    let (text, exit) = resolve_with(&witness, &["web-1"], &right, START).unwrap();
    assert_eq!(exit, volce_lab::exit::Exit::Ok, "{text}");
    let planned = lab.plan().await;
    assert_ne!(planned["code"], "audit_witness_mismatch", "{planned}");
    assert_eq!(lab.rpc_calls(), sent + 1);
    assert_eq!(lab.mismatch(), None, "the host's answer extends the accepted head");
}

/// Tried: growth over calls on a host whose clock is 200 days behind this
/// workstation's; then 181 days later on the host, its retention drops
/// every witnessed row (accepted: they are older than 180 days); then a
/// rewrite of the chain up to the witnessed row (caught); then, forgotten
/// and witnessed again, an operator's prune through the witnessed row,
/// which is younger than the retention (caught).
#[tokio::test(flavor = "multi_thread")]
async fn retention_is_accepted_and_a_rewrite_and_a_young_front_cut_are_caught() {
    let lab = Lab::start(GATE_V2).await;
    let day = 86_400;
    lab.world.host.clock.0.store(volce_lab::mcp::witness::now() - 200 * day, Ordering::SeqCst);
    for _ in 0..3 {
        lab.inventory().await;
    }
    let before = lab.witness().held("web-1").unwrap().head;
    lab.world.host.clock.advance(181 * day);
    lab.inventory().await;
    let after = lab.witness().held("web-1").unwrap();
    assert_eq!(after.mismatch, None, "rows older than the retention may go");
    assert!(after.head.seq > before.seq);
    let mut store = Store::open(&lab.database()).unwrap();
    let anchor = store.read(|tx| tx.audit_head()).unwrap().anchor_seq;
    assert!(anchor > before.seq, "retention dropped the witnessed row (anchor {anchor})");
    drop(store);
    let held = after.head;
    rewrite_from(&lab.database(), held.seq - 1);
    lab.inventory().await;
    assert_eq!(lab.mismatch(), Some(Mismatch::Rewritten { seq: held.seq }));
    let (_, exit) =
        resolve_with(&lab.witness(), &["web-1"], &Resolve::Forget { target: "web-1".into() }, START).unwrap();
    assert_eq!(exit, volce_lab::exit::Exit::Ok);
    lab.inventory().await;
    let held = lab.witness().held("web-1").unwrap().head;
    // A second later, everything before now: the witnessed row too.
    lab.world.host.clock.advance(1);
    prune(&lab, 0);
    let read = lab.inventory().await;
    assert!(matches!(lab.mismatch(), Some(Mismatch::FrontCut { seq, .. }) if seq == held.seq), "{read}");
    assert_eq!(lab.plan().await["code"], "audit_witness_mismatch");
}

/// A server without the gate's version (a 0.1.0 one) is served as before
/// and listed "not witnessed"; nothing is sent beside the request.
#[tokio::test(flavor = "multi_thread")]
async fn an_older_server_keeps_working_not_witnessed() {
    let lab = Lab::start(NO_GATE).await;
    lab.inventory().await;
    assert_eq!(lab.witness().held("web-1"), None);
    let (text, _) = resolve_with(&lab.witness(), &["web-1"], &Resolve::Show, START).unwrap();
    assert!(text.contains("web-1: not witnessed"), "{text}");
    let planned = lab.plan().await;
    assert_ne!(planned["code"], "audit_witness_mismatch", "{planned}");
}

/// `cloud_check web_status` as a call the host answers: the head it
/// witnessed.
async fn web_status(lab: &Lab) -> Value {
    lab.call("cloud_check", json!({"check": "web_status"})).await
}

/// Tried: web_status's `gateway_status` carries the witnessed head and its
/// answer's proof is checked like any rpc's: it witnesses growth, then,
/// after an old state.db was restored, records the roll-back and says so
/// (the proof itself never reaches the agent); a later plan is refused
/// without anything sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_web_status_answer_that_does_not_extend_the_witness_is_caught() {
    let lab = Lab::start(GATE_V2).await;
    lab.inventory().await;
    let backup = lab.dir.path().join("old-state.db");
    volce_lab::store::copy_database(&lab.database(), &backup).unwrap();
    let old = lab.witness().held("web-1").unwrap().head.seq;
    for _ in 0..2 {
        let read = web_status(&lab).await;
        assert!(!read.to_string().contains("audit_witness_mismatch"), "{read}");
    }
    let grown = lab.witness().held("web-1").unwrap();
    assert!(grown.head.seq > old && grown.mismatch.is_none(), "web_status witnessed the growth: {grown:?}");
    restore(&lab.database(), &backup);
    let read = web_status(&lab).await;
    assert!(matches!(lab.mismatch(), Some(Mismatch::RolledBack { seq, .. }) if seq == grown.head.seq));
    let message = read["results"][0]["message"].as_str().or(read["message"].as_str()).unwrap().to_owned();
    assert!(message.contains("audit_witness_mismatch"), "{read}");
    assert!(message.contains(&format!("seq {}", grown.head.seq)), "{read}");
    assert!(!read.to_string().contains("anchor_seq"), "the proof stays on the workstation: {read}");
    let sent = lab.rpc_calls();
    let refused = lab.plan().await;
    assert_eq!(refused["code"], "audit_witness_mismatch", "{refused}");
    assert_eq!(lab.rpc_calls(), sent, "nothing was sent");
}

/// Tried: a server witnessed through web_status that then answers as a
/// 0.1.0 one (no gate, so no head): the witness holds it withheld, as an
/// rpc's answer would, and management is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_stops_carrying_its_head_is_caught_by_web_status() {
    let identity = format!(r#"if [ -f "$DIR/downgraded" ]; then {NO_GATE}; else {GATE_V2}; fi"#);
    let lab = Lab::start(&identity).await;
    web_status(&lab).await;
    let held = lab.witness().held("web-1").expect("a first witness from web_status").head;
    std::fs::write(lab.dir.path().join("downgraded"), "").unwrap();
    assert_eq!(lab.call("cloud_check", json!({"check": "identity"})).await["status"], "ok");
    let read = web_status(&lab).await;
    assert_eq!(lab.mismatch(), Some(Mismatch::Withheld { seq: held.seq }), "{read}");
    assert!(read.to_string().contains("audit_witness_mismatch"), "{read}");
    assert_eq!(lab.plan().await["code"], "audit_witness_mismatch");
}
