//! Shared set-up for the host controller tests: a policy and a state
//! directory on a temporary directory owned by the test's uid, an
//! adjustable clock, and helpers to open controllers on them.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use serde_json::{Value, json};
use volce_lab::control::Clock;
use volce_lab::host::{Controller, HostPaths, ProcLiveness};

use super::fake_engine::FakeEngine;

pub const START: i64 = 1_800_000_000;

#[derive(Clone)]
pub struct TestClock(pub Arc<AtomicI64>);

impl TestClock {
    pub fn new() -> TestClock {
        TestClock(Arc::new(AtomicI64::new(START)))
    }
    pub fn advance(&self, secs: i64) {
        self.0.fetch_add(secs, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
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

pub struct Harness {
    pub root: PathBuf,
    pub paths: HostPaths,
    pub engine: FakeEngine,
    pub clock: TestClock,
    _dir: Option<tempfile::TempDir>,
}

pub type TestController = Controller<FakeEngine, TestClock, ProcLiveness>;

fn me() -> u32 {
    nix::unistd::geteuid().as_raw()
}

impl Harness {
    pub fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let mut harness = Harness::at(dir.path());
        harness.write_policy(&policy_json());
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
            paths,
            engine: FakeEngine::new(),
            clock: TestClock::new(),
            _dir: None,
        }
    }

    pub fn write_policy(&mut self, policy: &Value) {
        std::fs::write(&self.paths.policy, policy.to_string()).unwrap();
        std::fs::set_permissions(&self.paths.policy, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    pub fn controller(&self) -> TestController {
        volce_lab::host::open(&self.paths, self.engine.clone(), self.clock.clone(), ProcLiveness).unwrap()
    }
}
