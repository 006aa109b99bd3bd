//! Shared set-up for the host controller tests: a policy and a state
//! directory on a temporary directory owned by the test's uid, an
//! adjustable clock, and one [`Host`] on them (a fake engine), whose
//! commands the helpers below run.
//!
//! Every world made by [`Harness::new`] starts with one recorded app,
//! `legacy`: stopped, its containers since removed by an operator, and its
//! image [`unused_image`] still on the host. That is volce-lab's claim on the
//! image, which remove_image needs; the many tests that use remove_image as
//! "the action that needs approval" rely on it.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use serde_json::{Value, json};
use volce_lab::control::Clock;
use volce_lab::host::rpc::Reply;
use volce_lab::host::{Controller, Decision, Host, HostPaths, ProcLiveness};
use volce_lab::vocab::{PlanId, Refusal};

use super::fake_engine::{FakeEngine, unused_image};

pub const START: i64 = 1_800_000_000;

/// The boot clock's reading at [`START`], in milliseconds.
pub const BOOT_START_MS: i64 = 10_000_000;

/// A wall clock and a boot clock (one boot, `test-boot`) that time moves
/// together ([`TestClock::advance`]) and an operator or NTP can split
/// ([`TestClock::step_wall`]).
#[derive(Clone)]
pub struct TestClock(pub Arc<AtomicI64>, pub Arc<AtomicI64>);

impl TestClock {
    pub fn new() -> TestClock {
        TestClock(Arc::new(AtomicI64::new(START)), Arc::new(AtomicI64::new(BOOT_START_MS)))
    }
    /// Time passes: both clocks move.
    pub fn advance(&self, secs: i64) {
        self.0.fetch_add(secs, Ordering::SeqCst);
        self.1.fetch_add(secs * 1000, Ordering::SeqCst);
    }
    /// The wall clock is set: only it moves.
    pub fn step_wall(&self, secs: i64) {
        self.0.fetch_add(secs, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
    fn boot(&self) -> Option<volce_lab::control::clock::BootInstant> {
        Some(volce_lab::control::clock::BootInstant {
            boot_id: "test-boot".into(),
            millis: self.1.load(Ordering::SeqCst),
        })
    }
}

pub fn policy_json() -> Value {
    json!({
        "catalog": {"web": format!("127.0.0.1:15000/volce-lab/web@sha256:{}", "a".repeat(64))},
        "nginx_image": format!("127.0.0.1:15000/volce-lab/gateway@sha256:{}", "b".repeat(64)),
        "approvers": ["alice", "bob"]
    })
}

pub fn deploy_params(app: &str, port: u16) -> Value {
    json!({"app": app, "image": "web", "host_port": port, "container_port": 8080, "server_name": format!("{app}.example.com")})
}

/// A world for host tests: its root directory and the one [`Host`] on it.
/// `h.paths`, `h.engine` and `h.clock` are the host's (through `Deref`):
/// the engine and the clock share their state with every clone, so what a
/// test does to them is what the next command sees.
pub struct Harness {
    pub root: PathBuf,
    pub host: TestHost,
    _dir: Option<tempfile::TempDir>,
}

pub type TestHost = Host<FakeEngine, TestClock, ProcLiveness>;
pub type TestController = Controller<FakeEngine, TestClock, ProcLiveness>;

impl std::ops::Deref for Harness {
    type Target = TestHost;
    fn deref(&self) -> &TestHost {
        &self.host
    }
}

fn me() -> u32 {
    nix::unistd::geteuid().as_raw()
}

impl Harness {
    pub fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let mut harness = Harness::at(dir.path());
        harness.write_policy(&policy_json());
        harness.seed_legacy_app();
        harness._dir = Some(dir);
        harness
    }

    /// A harness over an existing directory (child processes use this).
    pub fn at(root: &Path) -> Harness {
        let etc = root.join("etc");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::set_permissions(&etc, std::fs::Permissions::from_mode(0o755)).unwrap();
        let paths =
            HostPaths { policy: etc.join("policy.json"), state_dir: root.join("state"), owner_uid: me() };
        Harness {
            root: root.to_owned(),
            host: Host::new(paths, FakeEngine::new(), TestClock::new(), ProcLiveness),
            _dir: None,
        }
    }

    pub fn write_policy(&mut self, policy: &Value) {
        std::fs::write(&self.paths.policy, policy.to_string()).unwrap();
        std::fs::set_permissions(&self.paths.policy, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    /// Records the app `legacy` (see the module header). Its plan row only
    /// satisfies the apps table's reference; it stays pending and blocks nothing.
    fn seed_legacy_app(&self) {
        use volce_lab::actions::plan::Plan;
        use volce_lab::actions::{Impact, Payload};
        use volce_lab::control::app_record::{AppRecord, AppState};
        use volce_lab::control::policy::Terms;
        use volce_lab::store::{AuditOutcome, AuditRow, Event};
        use volce_lab::vocab::{AppName, ImageRef, ServerName};
        let id = PlanId::parse(&"1e".repeat(16)).unwrap();
        let plan = Plan::seal(
            id.clone(),
            json!({"image_id": "sha256:0"}),
            Payload::RemoveImage(volce_lab::actions::RemoveImage {
                image_id: unused_image(),
                used_by: vec![],
            }),
            Impact {
                target: "seed".into(),
                containers_touched: vec![],
                data_volumes_deleted: false,
                shared_nginx_changed: false,
                rollback: "none".into(),
            },
            "0".repeat(64),
            Terms { policy_hash: "0".repeat(64), requires_approval: true, ttl_seconds: 600 },
            "seed".into(),
            START - 3600,
        );
        let record = AppRecord {
            accessories: Vec::new(),
            app: AppName::parse("legacy").unwrap(),
            state: AppState::Stopped,
            host_port: 18990,
            container_port: 8080,
            server_name: ServerName::parse("legacy.example.com").unwrap(),
            also_server_names: vec![],
            image_key: "web".into(),
            app_image: ImageRef::parse(&format!("old.example/web@sha256:{}", "1".repeat(64))).unwrap(),
            gateway_image: ImageRef::parse(&format!("old.example/gateway@sha256:{}", "2".repeat(64)))
                .unwrap(),
            nginx_config: String::new(),
            app_dir: self.paths.state_dir.join("apps/legacy"),
            containers: vec![],
            app_container: None,
            gateway_container: None,
            plan_id: id,
            image_ids: vec![unused_image()],
            upstream: None,
            image_history: vec![],
            configuration: None,
            kept_versions: vec![],
            health_path: None,
            data: None,
            exposed: None,
        };
        let row = AuditRow {
            at: START - 3600,
            event: Event::Prepared,
            outcome: AuditOutcome::Ok,
            exit_code: None,
            duration_ms: None,
            actor: "seed".into(),
            process: None,
        };
        self.controller()
            .store_for_tests()
            .write(|tx| {
                tx.insert_plan(&plan, &row)?;
                tx.put_app(&record, START - 3600)
            })
            .unwrap();
    }

    /// The host for one command (a command spends its host, as the
    /// shipped binary's one command per process does).
    pub fn host(&self) -> TestHost {
        self.host.clone()
    }

    pub fn controller(&self) -> TestController {
        self.host().open().unwrap()
    }

    /// `volce-lab-host rpc` in library form: one request from `caller`.
    pub fn rpc(&self, caller: &str, request: &[u8]) -> Reply {
        self.host().rpc(caller, request)
    }

    // The operator's terminal commands in library form: each opens its own
    // controller on this world, as `volce-lab-host show/approve/resolve` do.

    /// `show PLAN_ID` as root: the text the operator reads.
    pub fn show(&self, id: &PlanId) -> String {
        self.show_as(id, false)
    }

    /// `show --json PLAN_ID` as root: the text, one JSON object.
    pub fn show_json(&self, id: &PlanId) -> String {
        self.show_as(id, true)
    }

    fn show_as(&self, id: &PlanId, json: bool) -> String {
        self.host().show("root", id.as_str(), json).unwrap()
    }

    /// `approve PLAN_ID DIGEST` by `approver` (the digest as typed: it may be
    /// malformed): on success, what the operator reads, the summary printed
    /// before the approval is recorded and then the confirmation.
    pub fn approve(&self, id: &PlanId, digest: &str, approver: &str) -> Result<String, Refusal> {
        let (shown, result) = self.approve_showing(id.as_str(), digest, approver);
        result.map(|confirmation| shown + &confirmation)
    }

    /// `approve` as typed: (the summary printed before anything is recorded,
    /// empty if none was, and the result).
    pub fn approve_showing(
        &self,
        plan_id: &str,
        digest: &str,
        approver: &str,
    ) -> (String, Result<String, Refusal>) {
        self.approve_typing(plan_id, digest, approver, None)
    }

    /// `approve` with the operator's confirmation: `typed` is the line typed
    /// at the question (`None`: `--yes`). The summary printed and the result.
    pub fn approve_typing(
        &self,
        plan_id: &str,
        digest: &str,
        approver: &str,
        typed: Option<&str>,
    ) -> (String, Result<String, Refusal>) {
        let mut shown = String::new();
        let result = self.host().approve(approver, plan_id, digest, |text, expected| {
            shown.push_str(text);
            match typed {
                None => Decision::Confirmed,
                Some(line) => expected.decide(line),
            }
        });
        (shown, result)
    }

    /// `list` as root (`json`: `list --json`): the text the operator reads.
    pub fn list(&self, json: bool) -> String {
        self.host().list("root", json).unwrap()
    }

    /// `reject PLAN_ID` by `operator`, the id as typed (it may be malformed).
    pub fn reject(&self, plan_id: &str, operator: &str) -> Result<String, Refusal> {
        self.host().reject(operator, plan_id, None)
    }

    /// `reject PLAN_ID --reason TEXT` by `operator`.
    pub fn reject_because(&self, plan_id: &str, operator: &str, reason: &str) -> Result<String, Refusal> {
        self.host().reject(operator, plan_id, Some(reason))
    }

    /// `resolve PLAN_ID` by `operator`.
    pub fn resolve(&self, id: &PlanId, operator: &str) -> Result<String, Refusal> {
        self.host().resolve(operator, id.as_str())
    }
}
