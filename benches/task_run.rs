//! Benchmark (issue 40): what `run_task` costs on top of the task itself.
//! The engine's run of one task (`DockerClient::run_task`: create with the
//! app's hardening, start, wait, read the safe output, remove, see it gone)
//! against a bare `docker run --rm` of the same argv in the same image and
//! network, one after the other, on the real engine with the test images of
//! `scripts/test-images`. Makes its own internal network and removes it;
//! writes nothing to an installed host.
//!
//!     cargo bench --bench task_run [-- RUNS]
//!
//! Prints the median and min of each, and the overhead. Target: the
//! engine's median within 2x the bare run's (each docker CLI start costs
//! tens of ms here; the engine makes eight calls for the bare run's one,
//! so that it can bound the output, redact it and prove the container
//! gone). Without root or the test images it says so and measures nothing.

use std::time::{Duration, Instant};

use volce_lab::docker::Engine as _;
use volce_lab::docker::client::DockerClient;
use volce_lab::docker::program::docker_env;
use volce_lab::exec::{ExecutionStatus, ProcessSpec, run_blocking};
use volce_lab::vocab::{AppName, ContainerLimits, ImageRef, PlanId, TaskArgv, TaskName, TaskSpec};

#[path = "support/stats.rs"]
mod stats;

const POLICY: &str = "/var/tmp/volce-lab-test/policy.json";
const ARGV: [&str; 4] = ["/bin/busybox", "sh", "-c", "echo migrated 3 tables"];

fn docker(args: &[&str]) -> Result<String, String> {
    let mut spec = ProcessSpec::new("/usr/bin/docker", args.iter().copied());
    spec.env = docker_env();
    spec.timeout = Duration::from_secs(60);
    let outcome = run_blocking(&spec);
    match outcome.execution.execution_status {
        ExecutionStatus::Ok => Ok(String::from_utf8_lossy(&outcome.stdout).into_owned()),
        other => Err(format!("docker {:?}: {other:?}", &args[..2])),
    }
}

/// Removes the bench's network (and any container left on it) whatever happens.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let filter = format!("label=io.volce-lab.app={}", self.0.trim_start_matches("vl-"));
        if let Ok(ids) = docker(&["ps", "-aq", "--filter", &filter]) {
            for id in ids.lines() {
                let _ = docker(&["rm", "-f", id]);
            }
        }
        let _ = docker(&["network", "rm", &self.0]);
    }
}

fn spec(app: &AppName, image: &ImageRef, run: usize) -> TaskSpec {
    let plan_id = PlanId::parse(&format!("{:032x}", 0xbe0c_0000_u128 + run as u128)).unwrap();
    TaskSpec {
        accessories_env: None,
        container_name: TaskSpec::container_name(app, &plan_id),
        plan_id,
        app: app.clone(),
        task: TaskName::parse("bench").unwrap(),
        argv: TaskArgv::parse(ARGV.iter().map(|a| (*a).to_owned()).collect()).unwrap(),
        image: image.clone(),
        limits: ContainerLimits {
            memory_bytes: 256 << 20,
            millicpus: 500,
            pids: 128,
            log_max_size_bytes: 10 << 20,
            log_max_files: 3,
        },
        timeout_seconds: 60,
        env_file: None,
        data: None,
    }
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("task_run: skipped (measure with `cargo bench --bench task_run`, as root)");
        return;
    }
    if !nix::unistd::geteuid().is_root() || !std::path::Path::new(POLICY).is_file() {
        println!("task_run: skipped (needs root, the Docker engine and scripts/test-images: {POLICY})");
        return;
    }
    let runs: usize = std::env::args().skip(1).find(|a| a != "--bench").map_or(15, |a| a.parse().unwrap());
    let policy: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(POLICY).unwrap()).unwrap();
    let web = policy["catalog"]["web"].as_str().unwrap().to_owned();
    docker(&["pull", "--quiet", &web]).expect("the test image");
    let app = AppName::parse(&format!("bench{}", std::process::id())).unwrap();
    let network = app.names().network;
    let label = format!("io.volce-lab.app={app}");
    docker(&["network", "create", "--internal", "--label", &label, &network]).expect("a network");
    let _cleanup = Cleanup(network.clone());
    let engine = DockerClient::new("/var/tmp");
    let image = ImageRef::parse(&web).unwrap();
    let (mut ours, mut bare) = (Vec::new(), Vec::new());
    for run in 0..runs {
        let t = Instant::now();
        let done = engine.run_task(&spec(&app, &image, run)).expect("the task runs");
        ours.push(t.elapsed());
        assert_eq!(done.exit_code, 0);
        let t = Instant::now();
        let mut args =
            vec!["run", "--rm", "--label", &label, "--network", &network, "--entrypoint", ARGV[0], &web];
        args.extend(&ARGV[1..]);
        docker(&args).expect("docker run");
        bare.push(t.elapsed());
    }
    let (om, bm) = (stats::p50(&ours), stats::p50(&bare));
    let met = om <= bm * 2;
    println!("run_task vs docker run --rm of the same argv (median / min of {runs} runs each)");
    println!(
        "  run_task (engine)  {:>7.1} ms / {:>7.1} ms\n  docker run --rm    {:>7.1} ms / {:>7.1} ms\n  \
         overhead {:>+7.1} ms, ratio {:.2} (target <= 2.00) {}",
        stats::ms(om),
        stats::ms(stats::percentile(&ours, 0.0)),
        stats::ms(bm),
        stats::ms(stats::percentile(&bare, 0.0)),
        stats::ms(om) - stats::ms(bm),
        om.as_secs_f64() / bm.as_secs_f64(),
        if met { "met" } else { "FAILED" }
    );
    drop(_cleanup);
    if !met {
        std::process::exit(1);
    }
}
