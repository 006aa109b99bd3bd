//! What the benches that drive the real engine share: a request through the
//! host helper's own pipeline (`volce_lab::host::Host::rpc`), a plan run to
//! its end with the operator's approval given in-process, the cleanup of a
//! bench's app, and a poller that counts failed requests while work runs.
//! Root only (the callers check); never the installed host's state.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use volce_lab::host::clock::SystemClock;
use volce_lab::host::{HostPaths, ProcLiveness};

/// The test policy `scripts/test-images` writes.
pub const POLICY: &str = "/var/tmp/volce-lab-test/policy.json";

/// One RPC as the agent's account sends it.
pub fn rpc(paths: &HostPaths, request: Value) -> Value {
    let engine = volce_lab::host::real_engine(paths);
    volce_lab::host::Host::new(paths.clone(), engine, SystemClock, ProcLiveness)
        .rpc("vl-agent", request.to_string().as_bytes())
        .to_json()
}

/// Plan, approve when needed (as the operator would), execute: the
/// execute reply.
pub fn run(paths: &HostPaths, action: &str, parameters: Value) -> Value {
    let plan = rpc(paths, json!({"operation": "plan", "action": action, "parameters": parameters}));
    assert_eq!(plan["status"], "ok", "{action}: {plan}");
    let id = plan["result"]["id"].as_str().unwrap();
    if plan["result"]["requires_approval"] == true {
        let digest = plan["result"]["digest"].as_str().unwrap();
        let engine = volce_lab::host::real_engine(paths);
        volce_lab::host::Host::new(paths.clone(), engine, SystemClock, ProcLiveness)
            .approve("vl-operator", id, digest, |_, _| volce_lab::host::Decision::Confirmed)
            .unwrap();
    }
    rpc(paths, json!({"operation": "execute", "plan_id": id}))
}

/// What a reply ended in: the outcome, or the refusal's code.
pub fn outcome(reply: &Value) -> String {
    reply["result"]["outcome"].as_str().or(reply["code"].as_str()).unwrap_or("?").to_owned()
}

/// Removes the bench's app (its containers and networks), whatever
/// happened, when dropped.
pub struct AppCleanup(pub String);

impl Drop for AppCleanup {
    fn drop(&mut self) {
        let docker = |args: &[&str]| std::process::Command::new("/usr/bin/docker").args(args).output();
        let filter = format!("label=io.volce-lab.app={}", self.0);
        if let Ok(out) = docker(&["ps", "-aq", "--no-trunc", "--filter", &filter]) {
            for id in String::from_utf8_lossy(&out.stdout).lines() {
                let _ = docker(&["rm", "-f", id]);
            }
        }
        for network in [format!("vl-{}", self.0), format!("vl-{}_edge", self.0)] {
            let _ = docker(&["network", "rm", &network]);
        }
    }
}

/// A loopback port in the deploy range that nothing holds now.
pub fn free_app_port() -> u16 {
    (18900..18999).find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok()).expect("a free port")
}

/// What a poller saw while the work ran.
pub struct Polled {
    pub polls: usize,
    pub failed: usize,
    /// The longest time between two good answers (the poll interval
    /// included).
    pub longest_gap: Duration,
}

/// Calls `good` every 50 ms on another thread while `work` runs (and
/// 300 ms after).
pub fn polled(good: impl Fn() -> bool + Send + 'static, work: impl FnOnce()) -> Polled {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let poller = std::thread::spawn(move || {
        let mut seen = Polled { polls: 0, failed: 0, longest_gap: Duration::ZERO };
        let mut last_good = Instant::now();
        while !flag.load(Ordering::SeqCst) {
            if good() {
                seen.longest_gap = seen.longest_gap.max(last_good.elapsed());
                last_good = Instant::now();
            } else {
                seen.failed += 1;
            }
            seen.polls += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        seen
    });
    work();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    poller.join().unwrap()
}
