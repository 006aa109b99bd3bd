//! Concurrency under load: N helper processes × R rounds sharing one state
//! directory, each round mixing inventory, prepare, approve, reject and
//! execute. Shared by the hermetic test (tests/hermetic/host_load.rs, a
//! small run) and the benchmark (benches/load.rs, 16 × 200, p99).
//!
//! Which path: the library pipeline (`volce_lab::host::open` + the
//! controller, as `volce-lab-host rpc` and the operator commands run it) in
//! real OS processes on real SQLite, with the fake engine: the shipped
//! binary cannot be pointed at a fake, and 3,200 rounds on the real engine
//! would take the CI budget. Each child's fake engine appends every
//! mutation to one shared log, so the parent counts engine mutations per
//! plan across all processes.
//!
//! A child's round r (app `l<child>r<round>`, its own port): inventory;
//! prepare deploy (the policy makes deploy need approval); every fourth
//! round the operator rejects it and an execute must be refused; otherwise
//! approve, execute, a second execute that must be refused, then prepare,
//! approve and execute remove_app. Unprivileged; temporary directory only.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use volce_lab::host::{Executed, ProcLiveness};
use volce_lab::vocab::{Code, Refusal};

use super::fake_engine::FakeEngine;
use super::harness::*;

const AGENT: &str = "agent";
/// How often a child prepares again after `snapshot_changed`.
const PREPARE_TRIES: usize = 20;
/// How long a child keeps asking while another helper's plan executes.
const BUSY_WAIT: Duration = Duration::from_secs(10);

/// The policy of a load run: deploy needs approval too; 64 apps.
pub fn policy() -> serde_json::Value {
    let mut policy = policy_json();
    policy["approval_required"] = json!(["stop", "remove_image", "remove_app", "deploy"]);
    // Room for every child's app and pending deploy at once (the default quota is smaller).
    policy["max_apps"] = json!(64);
    policy
}

/// One child's rounds; prints one line per operation (`OP name micros
/// outcome`) and per app (`APP name deployed|rejected|skipped`).
pub fn child(dir: &Path, index: usize, rounds: usize) {
    let go = dir.join("go");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !go.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    // A line of its own: libtest may have printed the test's name without a newline.
    println!();
    let h = Harness::at(dir);
    let engine = FakeEngine::new().with_log(&dir.join("mutations.log"));
    let port = 18100 + index as u16;
    let timed = |name: &str, work: &mut dyn FnMut() -> Result<String, Refusal>| -> Result<String, Refusal> {
        let start = Instant::now();
        let result = work();
        let outcome = match &result {
            // A prepare answers with the new plan's id.
            Ok(_) if name == "prepare" => "ok".to_owned(),
            Ok(what) => what.clone(),
            Err(refusal) => {
                format!("{}:{}", refusal.code.as_str(), refusal.message.replace(char::is_whitespace, "_"))
            }
        };
        println!("OP {name} {} {outcome}", start.elapsed().as_micros());
        result
    };
    // Each operation opens its own controller, as each helper process does.
    let open =
        || volce_lab::host::Host::new(h.paths.clone(), engine.clone(), h.clock.clone(), ProcLiveness).open();
    // A prepare refused because another helper changed volce-lab's records
    // meanwhile says "prepare it again", and one refused while another
    // helper's plan is executing can be made a moment later: the agent
    // does, a few times.
    // While another helper executes, it waits a moment between tries, up to
    // BUSY_WAIT (without the pause, 20 tries could all fall inside one slow
    // execute on a loaded machine, as seen once in CI).
    let prepare = |action: &str, parameters: serde_json::Value| -> Result<String, Refusal> {
        let (mut changed, started) = (0, Instant::now());
        loop {
            match timed("prepare", &mut || {
                open()?.prepare(action, &parameters, AGENT).map(|p| p.plan.id.to_string())
            }) {
                Err(refusal) if refusal.code == Code::SnapshotChanged && changed + 1 < PREPARE_TRIES => {
                    changed += 1
                }
                Err(refusal) if busy(&refusal) && started.elapsed() < BUSY_WAIT => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                other => return other,
            }
        }
    };
    // An execute refused only because another helper's plan is executing
    // right now changed nothing, so it may be asked again.
    let execute = |id: &volce_lab::vocab::PlanId| -> Result<String, Refusal> {
        let started = Instant::now();
        loop {
            match timed("execute", &mut || executed(open()?.execute(id, AGENT))) {
                Err(refusal) if busy(&refusal) && started.elapsed() < BUSY_WAIT => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                other => return other,
            }
        }
    };
    for round in 0..rounds {
        let app = format!("l{index}r{round}");
        let _ = timed("inventory", &mut || open()?.inventory(AGENT).map(|_| "ok".into()));
        let Ok(deploy) = prepare("deploy", deploy_params(&app, port)) else {
            println!("APP {app} skipped");
            continue;
        };
        let deploy = volce_lab::vocab::PlanId::parse(&deploy).unwrap();
        let digest = open().unwrap().load(&deploy, "root").unwrap().plan.digest;
        if round % 4 == 3 {
            let _ = timed("reject", &mut || open()?.reject(&deploy, "alice", None).map(|_| "ok".into()));
            let refused = timed("execute", &mut || executed(open()?.execute(&deploy, AGENT)));
            assert_eq!(refused.map_err(|r| r.code), Err(Code::PlanRejected), "{app}");
            println!("APP {app} rejected");
            continue;
        }
        let _ = timed("approve", &mut || open()?.approve(&deploy, &digest, "alice").map(|_| "ok".into()));
        let ran = execute(&deploy);
        let again = execute(&deploy);
        if ran.is_ok() {
            assert_eq!(
                again.map_err(|r| r.code),
                Err(Code::PlanConsumed),
                "{app}: a second execute after {ran:?}"
            );
        }
        if ran.as_deref() != Ok("completed") {
            let why = ran.unwrap_or_else(|r| r.code.as_str().to_owned());
            println!("APP {app} deploy-{why}");
            continue;
        }
        let removal = prepare("remove_app", json!({"app": app}));
        let Ok(removal) = removal else {
            println!("APP {app} deployed-not-removed-{}", removal.unwrap_err().code.as_str());
            continue;
        };
        let removal = volce_lab::vocab::PlanId::parse(&removal).unwrap();
        let digest = open().unwrap().load(&removal, "root").unwrap().plan.digest;
        let _ = timed("approve", &mut || open()?.approve(&removal, &digest, "alice").map(|_| "ok".into()));
        let removed = execute(&removal);
        match removed {
            Ok(what) if what == "completed" => println!("APP {app} deployed"),
            Ok(what) => println!("APP {app} deployed-removal-{what}"),
            Err(refusal) => println!("APP {app} deployed-removal-{}", refusal.code.as_str()),
        }
    }
}

/// Refused only because another helper's plan is executing at this moment.
fn busy(refusal: &Refusal) -> bool {
    refusal.code == Code::InspectionRequired && refusal.message.contains("is executing")
}

fn executed(result: Result<Executed, Refusal>) -> Result<String, Refusal> {
    result.map(|executed| match executed {
        Executed::Completed(_) => "completed".to_owned(),
        Executed::NeedsInspection { .. } => "needs_inspection".to_owned(),
        Executed::Failed { .. } => "failed".to_owned(),
    })
}

/// What a run measured.
#[derive(Debug, Default)]
pub struct Report {
    /// Microseconds per operation name.
    pub latencies: BTreeMap<String, Vec<u64>>,
    /// Outcome (`ok`, `completed`, or the refusal code) per operation name, counted.
    pub outcomes: BTreeMap<(String, String), usize>,
    /// App name -> what its child says became of it.
    pub apps: BTreeMap<String, String>,
    /// The shared mutation log, one entry per engine mutation.
    pub mutations: Vec<Vec<String>>,
    /// Any refusal whose sentence says the database was locked or busy.
    pub locked: Vec<String>,
    pub elapsed: Duration,
}

/// Runs `processes` children of `command` (which must call [`child`] with
/// the environment it is given) in a fresh world at `dir`, and collects.
pub fn run(dir: &Path, processes: usize, rounds: usize, command: impl Fn() -> Command) -> Report {
    let mut h = Harness::at(dir);
    h.write_policy(&policy());
    drop(h.controller());
    let children: Vec<Child> = (0..processes)
        .map(|index| {
            command()
                .env("VL_LOAD_DIR", dir)
                .env("VL_LOAD_CHILD", index.to_string())
                .env("VL_LOAD_ROUNDS", rounds.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect();
    let start = Instant::now();
    std::fs::write(dir.join("go"), "").unwrap();
    let mut report = Report::default();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "a load child failed: {:?}", output.status);
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let words: Vec<&str> = line.split(' ').collect();
            match words.as_slice() {
                ["OP", name, micros, outcome] => {
                    report.latencies.entry(name.to_string()).or_default().push(micros.parse().unwrap());
                    let code = outcome.split(':').next().unwrap().to_owned();
                    *report.outcomes.entry((name.to_string(), code)).or_default() += 1;
                    let lower = outcome.to_lowercase();
                    if lower.contains("locked") || lower.contains("state_unavailable") {
                        report.locked.push(line.to_owned());
                    }
                }
                ["APP", app, fate] => {
                    report.apps.insert(app.to_string(), fate.to_string());
                }
                _ => {}
            }
        }
    }
    report.elapsed = start.elapsed();
    let log = std::fs::read_to_string(dir.join("mutations.log")).unwrap_or_default();
    // Each line: the writing process's pid, then the call's words.
    report.mutations = log.lines().map(|l| l.split(' ').skip(1).map(str::to_owned).collect()).collect();
    report
}

/// The child's side, when the environment says this process is one.
pub fn child_from_env() -> bool {
    let (Ok(dir), Ok(index), Ok(rounds)) =
        (std::env::var("VL_LOAD_DIR"), std::env::var("VL_LOAD_CHILD"), std::env::var("VL_LOAD_ROUNDS"))
    else {
        return false;
    };
    child(Path::new(&dir), index.parse().unwrap(), rounds.parse().unwrap());
    true
}

/// Each app's engine mutations: (deploys, removals).
pub fn mutations_per_app(report: &Report) -> BTreeMap<String, (usize, usize)> {
    let mut per_app: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for mutation in &report.mutations {
        match mutation.first().map(String::as_str) {
            Some("deploy") => per_app.entry(mutation[1].clone()).or_default().0 += 1,
            Some("remove_app") => per_app.entry(mutation[1].clone()).or_default().1 += 1,
            _ => {}
        }
    }
    per_app
}
