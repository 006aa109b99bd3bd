//! Shared setup for tests that need the real Docker engine and the images of
//! `scripts/test-images`: a `Lab` per test (unique app name, port and state
//! dir, every object removed on drop), docker helpers for assertions, and a
//! loud failure when root, Docker or the test images are missing.
//! Controller-level suites can reuse it and replace direct `Engine` calls
//! with plans.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use volce_lab::docker::client::DockerClient;
use volce_lab::docker::host_probe::http_get;
use volce_lab::docker::program::docker_env;
use volce_lab::exec::{ExecutionStatus, ProcessSpec, run_blocking};
use volce_lab::nginx::{AccessLog, render};
use volce_lab::vocab::{
    AppName, AppNames, ContainerLimits, DeploySpec, ImageId, ImageRef, LABEL_APP, PlanId, ServerName,
};

pub const TEST_DIR: &str = "/var/tmp/volce-lab-test";

/// Runs docker for the test itself (setup and assertions, never the code under test).
pub fn docker(args: &[&str]) -> (bool, String) {
    docker_with(args, None)
}

/// [`docker`] with bytes on stdin (`docker import -`).
pub fn docker_stdin(args: &[&str], stdin: Vec<u8>) -> (bool, String) {
    docker_with(args, Some(stdin))
}

fn docker_with(args: &[&str], stdin: Option<Vec<u8>>) -> (bool, String) {
    let mut spec = ProcessSpec::new("/usr/bin/docker", args.iter().copied());
    spec.stdin = stdin;
    spec.env = docker_env();
    spec.timeout = Duration::from_secs(60);
    spec.stdout_limit = 4 * 1024 * 1024;
    let outcome = run_blocking(&spec);
    if outcome.execution.execution_status != ExecutionStatus::Ok {
        eprintln!(
            "docker {:?}: {:?} exit {:?} ({} bytes of stderr withheld)",
            args, outcome.execution.execution_status, outcome.execution.exit_code, outcome.stderr_len
        );
    }
    (
        outcome.execution.execution_status == ExecutionStatus::Ok,
        String::from_utf8_lossy(&outcome.stdout).into_owned(),
    )
}

pub fn docker_ok(args: &[&str]) -> String {
    let (ok, out) = docker(args);
    assert!(ok, "docker {args:?} failed");
    out
}

/// psql in the test PostgreSQL accessory `container` (`volce-lab/pg`) as
/// its user `app` with `password`: one statement's unaligned output, or
/// `None` when psql fails (the password does not open the database, say).
pub fn psql(container: &str, password: &str, sql: &str) -> Option<String> {
    let env = format!("PGPASSWORD={password}");
    let psql = "/usr/lib/postgresql/15/bin/psql";
    let args = [
        "exec",
        "-e",
        &env,
        container,
        psql,
        "-X",
        "-At",
        "-h",
        "127.0.0.1",
        "-U",
        "app",
        "-d",
        "app",
        "-c",
        sql,
    ];
    let (ok, out) = docker(&args);
    ok.then(|| out.trim().to_owned())
}

pub fn inspect(kind: &str, name: &str) -> Value {
    let out = docker_ok(&["inspect", "--type", kind, name]);
    let mut all: Vec<Value> = serde_json::from_str(&out).expect("docker inspect answers JSON");
    all.remove(0)
}

pub fn read_json(name: &str) -> Value {
    let path = Path::new(TEST_DIR).join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} is missing: run scripts/test-images (as root) first", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("{} is not JSON", path.display()))
}

/// One test's world: its engine, state dir, app name and port, and the
/// objects to remove when it ends.
pub struct Lab {
    pub engine: DockerClient,
    pub state: PathBuf,
    pub app: String,
    pub port: u16,
    pub policy: Value,
    pub images: Value,
    /// Containers the test made itself (names or ids), removed on drop.
    pub extra_containers: Vec<String>,
    /// Images the test made itself, removed on drop (after the containers).
    pub extra_images: Vec<String>,
}

static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

impl Lab {
    pub fn new(tag: &str) -> Lab {
        assert!(
            nix::unistd::geteuid().is_root(),
            "the real-Docker tests need root (the engine socket, root-owned app directories)"
        );
        let (ok, _) = docker(&["version", "--format", "{{.Server.Version}}"]);
        assert!(
            ok,
            "the Docker engine does not answer on /var/run/docker.sock: start it (these tests need it)"
        );
        let policy = read_json("policy.json");
        let images = read_json("images.json");
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let app = format!("t{tag}-{}", &suffix[..8]);
        let state = Path::new(TEST_DIR).join("state").join(&app);
        std::fs::create_dir_all(state.join("apps")).unwrap();
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
        let port = free_port(&suffix);
        Lab {
            engine: DockerClient::new(&state),
            state,
            app,
            port,
            policy,
            images,
            extra_containers: Vec::new(),
            extra_images: Vec::new(),
        }
    }

    pub fn app_dir(&self) -> PathBuf {
        self.state.join("apps").join(&self.app)
    }

    pub fn server_name(&self) -> String {
        format!("{}.test", self.app)
    }

    pub fn image(&self, name: &str) -> (String, ImageId) {
        let entry = &self.images[name];
        let reference = entry["reference"].as_str().expect("reference in images.json").to_owned();
        let id = ImageId::parse(entry["image_id"].as_str().expect("image_id in images.json")).unwrap();
        (reference, id)
    }

    pub fn limits(&self) -> ContainerLimits {
        policy_limits(&self.policy)
    }

    /// The Docker names of this lab's app.
    pub fn names(&self) -> AppNames {
        AppName::parse(&self.app).expect("a valid app name").names()
    }

    pub fn spec(&self) -> DeploySpec {
        let server_name = self.server_name();
        let image = |key: &Value| ImageRef::parse(key.as_str().unwrap()).expect("a pinned reference");
        DeploySpec {
            accessories: Vec::new(),
            plan_id: PlanId::random(),
            app: AppName::parse(&self.app).expect("a valid app name"),
            app_image: image(&self.policy["catalog"]["web"]),
            gateway_image: image(&self.policy["nginx_image"]),
            host_port: self.port,
            container_port: 8080,
            health_path: Default::default(),
            nginx_config: render(&server_name, 8080, AccessLog::Off),
            server_name: ServerName::parse(&server_name).expect("a valid server name"),
            also_server_names: vec![],
            app_dir: self.app_dir(),
            limits: self.limits(),
            env_file: None,
            data: None,
            before_start: None,
        }
    }

    /// Every container carrying this app's label, by full id.
    pub fn labelled_containers(&self) -> Vec<String> {
        let filter = format!("label={LABEL_APP}={}", self.app);
        docker_ok(&["ps", "-aq", "--no-trunc", "--filter", &filter]).lines().map(str::to_owned).collect()
    }

    pub fn networks(&self) -> Vec<String> {
        let names = docker_ok(&["network", "ls", "--format", "{{.Name}}"]);
        let ours = [format!("vl-{}", self.app), self.names().edge_network];
        names.lines().filter(|n| ours.iter().any(|o| o == n)).map(str::to_owned).collect()
    }
}

/// Every container and network carrying this plan's label, by id.
pub fn plan_objects(plan_id: &str) -> Vec<String> {
    let filter = format!("label={}={plan_id}", volce_lab::vocab::LABEL_PLAN);
    let containers = docker_ok(&["ps", "-aq", "--no-trunc", "--filter", &filter]);
    let networks = docker_ok(&["network", "ls", "-q", "--no-trunc", "--filter", &filter]);
    containers.lines().chain(networks.lines()).map(str::to_owned).collect()
}

impl Drop for Lab {
    fn drop(&mut self) {
        let name_filter = format!("name=vl-{}-", self.app);
        let mut ids = self.labelled_containers();
        ids.extend(
            docker_ok(&["ps", "-aq", "--no-trunc", "--filter", &name_filter]).lines().map(str::to_owned),
        );
        ids.extend(self.extra_containers.iter().cloned());
        for id in ids {
            let _ = docker(&["rm", "-f", &id]);
        }
        for image in &self.extra_images {
            let _ = docker(&["image", "rm", image]);
        }
        for network in self.networks() {
            let _ = docker(&["network", "rm", &network]);
        }
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

/// A free port in the policy's range, spread by test so parallel tests do not meet.
fn free_port(seed: &str) -> u16 {
    let base = u16::from_str_radix(&seed[..4], 16).unwrap() % 900;
    for _ in 0..100 {
        let port = 18000 + (base + NEXT_PORT.fetch_add(7, Ordering::Relaxed)) % 1000;
        if volce_lab::docker::host_probe::port_free(port) {
            return port;
        }
    }
    panic!("no free port in 18000..18999");
}

/// The container limits a policy file (as JSON) sets.
pub fn policy_limits(policy: &Value) -> ContainerLimits {
    let l = &policy["limits"];
    ContainerLimits {
        memory_bytes: l["memory_mib"].as_u64().unwrap() * 1024 * 1024,
        millicpus: (l["cpus"].as_f64().unwrap() * 1000.0).round() as u32,
        pids: l["pids"].as_u64().unwrap() as u32,
        log_max_size_bytes: l["log_max_size_mib"].as_u64().unwrap() * 1024 * 1024,
        log_max_files: l["log_max_files"].as_u64().unwrap() as u32,
    }
}

/// Polls until `f` holds, for up to 5 s.
pub fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out waiting until {what}");
}

pub fn status(port: u16, host: &str) -> Option<u16> {
    http_get(port, host, &Default::default(), Duration::from_secs(2)).map(|r| r.status)
}

pub fn assert_hardened(c: &Value, user: &str, limits: &ContainerLimits) {
    let name = c["Name"].as_str().unwrap();
    let host = &c["HostConfig"];
    assert_eq!(host["ReadonlyRootfs"], true, "{name}: read-only root");
    assert_eq!(host["CapDrop"], serde_json::json!(["ALL"]), "{name}: cap-drop ALL");
    assert!(host["CapAdd"].is_null(), "{name}: no capability added");
    assert_eq!(host["SecurityOpt"], serde_json::json!(["no-new-privileges"]), "{name}");
    assert_eq!(c["Config"]["User"], user, "{name}: user");
    assert_eq!(host["PidsLimit"], limits.pids, "{name}: pids");
    assert_eq!(host["Memory"], limits.memory_bytes, "{name}: memory");
    assert_eq!(host["MemorySwap"], limits.memory_bytes, "{name}: no swap beyond memory");
    assert_eq!(host["NanoCpus"], u64::from(limits.millicpus) * 1_000_000, "{name}: cpus");
    assert_eq!(
        host["LogConfig"],
        serde_json::json!({"Type": "json-file", "Config": {
            "max-size": limits.log_max_size_bytes.to_string(),
            "max-file": limits.log_max_files.to_string()}}),
        "{name}: log rotation"
    );
    assert_eq!(host["Privileged"], false, "{name}: not privileged");
    let mode = host["NetworkMode"].as_str().unwrap();
    // One of ours: an app's `vl-<app>...`, or the edge's `vl_edge`.
    assert!(mode != "host" && (mode.starts_with("vl-") || mode == "vl_edge"), "{name}: network mode {mode}");
    assert_eq!(host["PidMode"], "", "{name}: own pid namespace");
    assert_eq!(host["IpcMode"], "private", "{name}: private ipc");
    assert_eq!(host["ShmSize"], 8 * 1024 * 1024, "{name}: a small /dev/shm");
    assert!(host["Devices"].as_array().is_none_or(Vec::is_empty), "{name}: no devices");
    assert!(host["Binds"].as_array().is_none_or(Vec::is_empty), "{name}: no -v binds");
    assert_eq!(
        host["Tmpfs"],
        serde_json::json!({"/tmp": "rw,noexec,nosuid,nodev,size=16m,mode=1777"}),
        "{name}"
    );
    assert_eq!(host["RestartPolicy"]["Name"], "unless-stopped", "{name}: restart policy");
    assert_eq!(host["Init"], true, "{name}: docker-init as pid 1");
    assert_eq!(c["State"]["Running"], true, "{name}: running");
}
