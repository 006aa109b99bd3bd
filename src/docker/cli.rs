//! [`DockerCli`]: the [`Engine`] driven through the `docker` CLI. Runs as root
//! inside the host helper; every docker process goes through `crate::exec`.
//!
//! Invariants enforced here:
//! - the program is always `/usr/bin/docker`, argv is built from fixed words
//!   and validated values only (each value its own argv element, never a
//!   shell), the environment is fixed ([`docker_env`]), each call has a timeout;
//! - docker's stderr never leaves `exec`; errors name the step, not the text;
//! - every container we start carries the hardening in [`hardening`]; only the
//!   gateway publishes, and only on 127.0.0.1;
//! - a failed deploy removes what carries this plan's label (containers,
//!   networks) and nothing else; the app directory stays as evidence;
//! - stop and remove_image touch exactly the ids they are given; never `-f`,
//!   never prune.
//!
//! Networks: the app sits alone with the gateway on `vl-<app>`, created
//! `--internal` (no route out, no NAT: a compromised app cannot reach the
//! internet or other containers). An internal network cannot publish, so the
//! gateway is created on a second, ordinary bridge `vl-<app>_edge` that
//! carries the published port, and then joined to `vl-<app>`. The `_` keeps
//! that name out of the app-name space (`^[a-z][a-z0-9-]*$`), so no app's
//! network can collide with another app's edge network.
//!
//! Restart policy `unless-stopped`: the app comes back after a crash or a
//! reboot of the engine, and `stop` first sets `--restart=no`, so a stopped
//! app stays stopped even across engine restarts.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::fcntl::OFlag;
use serde::Deserialize;

use super::{
    Capacity, Container, ContainerId, DeploySpec, Deployed, Engine, EngineError, ImageId, LABEL_APP,
    LABEL_PLAN, LABEL_ROLE, Limits, PublishedPort, Snapshot,
};
use crate::control::plan::PlanId;
use crate::exec::{ExecutionStatus, Outcome, ProcessSpec, minimal_env, run_blocking};
use crate::nginx::GATEWAY_LISTEN_PORT;

/// The only docker program we run.
pub const DOCKER: &str = "/usr/bin/docker";
/// The only engine we talk to: the local socket, whatever the caller's env says.
pub const DOCKER_HOST: &str = "unix:///var/run/docker.sock";
/// Where the gateway finds its configuration (the read-only bind mount).
pub const GATEWAY_CONFIG_PATH: &str = "/etc/nginx/nginx.conf";
const NGINX: &str = "/usr/sbin/nginx";
const LABEL_PREFIX: &str = "io.volce-lab.";

/// Timeouts per kind of call. Pulls move image layers; everything else is a
/// local API call that answers in well under a second on a healthy engine.
const QUICK: Duration = Duration::from_secs(20);
const PULL: Duration = Duration::from_secs(180);
const NGINX_TEST: Duration = Duration::from_secs(30);
/// `docker stop --time 15` plus room for the engine's own kill.
const STOP: Duration = Duration::from_secs(40);
/// A whole deploy must end (done, or failed and cleaned up) well inside the
/// 240 s the MCP client waits for the helper's reply; otherwise the agent
/// reads `unknown` while the server is still acting. Every docker call of a
/// deploy gets at most what is left of this budget.
pub const DEPLOY_BUDGET: Duration = Duration::from_secs(180);
const STOP_GRACE_SECONDS: &str = "15";

const SMALL_OUTPUT: usize = 64 * 1024;
/// `docker inspect` of every container: about 1 KB each with our template.
const SNAPSHOT_OUTPUT: usize = 16 * 1024 * 1024;
/// The largest nginx.conf we read back from disk.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// One docker invocation: the argv after the program, its timeout, and how
/// much stdout we keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub args: Vec<String>,
    pub timeout: Duration,
    pub stdout_limit: usize,
}

/// Runs one docker call. The real one is [`DockerProcess`]; tests pass fakes
/// that record argv and answer from a script.
pub trait Runner: Sync {
    fn run(&self, call: &Call) -> Outcome;
}

/// Runs `/usr/bin/docker` through `crate::exec::run_blocking`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DockerProcess;

/// The fixed environment of every docker call: the minimal one, our socket,
/// root's own docker config (registry credentials an operator set up), and
/// no CLI hints on stdout.
pub fn docker_env() -> Vec<(OsString, OsString)> {
    let mut env = minimal_env();
    env.push(("DOCKER_HOST".into(), DOCKER_HOST.into()));
    env.push(("HOME".into(), "/root".into()));
    env.push(("DOCKER_CONFIG".into(), "/root/.docker".into()));
    env.push(("DOCKER_CLI_HINTS".into(), "false".into()));
    env
}

impl Runner for DockerProcess {
    fn run(&self, call: &Call) -> Outcome {
        let mut spec = ProcessSpec::new(DOCKER, &call.args);
        spec.env = docker_env();
        spec.timeout = call.timeout;
        spec.stdout_limit = call.stdout_limit;
        spec.stderr_limit = SMALL_OUTPUT;
        run_blocking(&spec)
    }
}

/// How the new gateway is probed after it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthCheck {
    pub tries: u32,
    pub interval: Duration,
    pub timeout: Duration,
}

impl Default for HealthCheck {
    fn default() -> Self {
        HealthCheck { tries: 10, interval: Duration::from_millis(300), timeout: Duration::from_secs(2) }
    }
}

/// The docker-CLI engine.
pub struct DockerCli<R: Runner = DockerProcess> {
    runner: R,
    state_dir: PathBuf,
    health: HealthCheck,
    /// Set while a deploy runs: no call may outlive it (see DEPLOY_BUDGET).
    deadline: std::sync::Mutex<Option<std::time::Instant>>,
    deploy_budget: Duration,
}

impl DockerCli<DockerProcess> {
    /// The real engine; `state_dir` is where capacity measures free disk.
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        DockerCli::with_runner(DockerProcess, state_dir)
    }
}

impl<R: Runner> DockerCli<R> {
    pub fn with_runner(runner: R, state_dir: impl Into<PathBuf>) -> Self {
        DockerCli {
            runner,
            state_dir: state_dir.into(),
            health: HealthCheck::default(),
            deadline: std::sync::Mutex::new(None),
            deploy_budget: DEPLOY_BUDGET,
        }
    }

    pub fn with_health_check(mut self, health: HealthCheck) -> Self {
        self.health = health;
        self
    }

    /// A shorter deploy budget, for tests of the budget itself.
    pub fn with_deploy_budget(mut self, budget: Duration) -> Self {
        self.deploy_budget = budget;
        self
    }

    pub fn runner(&self) -> &R {
        &self.runner
    }

    fn set_deadline(&self, deadline: Option<std::time::Instant>) {
        *self.deadline.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = deadline;
    }

    /// Runs one call and insists on exit 0.
    fn call(&self, step: &'static str, args: Vec<String>, timeout: Duration) -> Result<Vec<u8>, EngineError> {
        self.call_limited(step, args, timeout, SMALL_OUTPUT)
    }

    fn call_limited(
        &self,
        step: &'static str,
        args: Vec<String>,
        timeout: Duration,
        stdout_limit: usize,
    ) -> Result<Vec<u8>, EngineError> {
        let timeout = match *self.deadline.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) {
            // Out of budget: the call still runs with a token second, fails,
            // and the deploy's cleanup (which runs without the budget) follows.
            Some(deadline) => timeout.min(
                deadline.saturating_duration_since(std::time::Instant::now()).max(Duration::from_secs(1)),
            ),
            None => timeout,
        };
        let outcome = self.runner.run(&Call { args, timeout, stdout_limit });
        if outcome.execution.execution_status == ExecutionStatus::Ok {
            Ok(outcome.stdout)
        } else {
            Err(EngineError::Call { step, execution: outcome.execution })
        }
    }

    fn snapshot_once(&self) -> Result<Snapshot, EngineError> {
        // Images and networks do not depend on the container list: ask for
        // them while `ps` and `inspect` run, to pay for one round trip less.
        let (containers, images, networks) = std::thread::scope(|scope| {
            let images =
                scope.spawn(|| self.call("list images", argv(&["image", "ls", "-q", "--no-trunc"]), QUICK));
            let networks = scope.spawn(|| {
                // A substring match: parse_networks keeps the real prefix.
                let filter = format!("name={}", super::names::PREFIX);
                self.call(
                    "list networks",
                    argv(&["network", "ls", "--no-trunc", "--filter", &filter, "--format", "{{.Name}}"]),
                    QUICK,
                )
            });
            let containers = self.containers();
            let join = |h: std::thread::ScopedJoinHandle<'_, Result<Vec<u8>, EngineError>>, step| {
                h.join().unwrap_or(Err(EngineError::Unparsable { step }))
            };
            (containers, join(images, "list images"), join(networks, "list networks"))
        });
        Ok(Snapshot {
            containers: containers?,
            images: parse_images(&images?)?,
            networks: parse_networks(&networks?)?,
        }
        .normalize())
    }

    fn containers(&self) -> Result<Vec<Container>, EngineError> {
        let ids = self.call("list containers", argv(&["ps", "-aq", "--no-trunc"]), QUICK)?;
        let ids = parse_container_ids(&ids)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut args = argv(&["inspect", "--type", "container", "--format", INSPECT_TEMPLATE]);
        args.extend(ids.iter().map(|id| id.as_str().to_owned()));
        let rows = self.call_limited("inspect containers", args, QUICK, SNAPSHOT_OUTPUT)?;
        parse_inspect_rows(&rows)
    }

    /// Every container and network that carries this plan's label. Plan ids
    /// are unique and a plan executes once, so these are exactly the objects
    /// this deploy created, even if a call timed out after the engine acted.
    fn created_by_plan(&self, plan_id: &PlanId) -> (Vec<String>, Vec<String>) {
        let filter = format!("label={LABEL_PLAN}={plan_id}");
        let containers = self
            .call("find plan containers", argv(&["ps", "-aq", "--no-trunc", "--filter", &filter]), QUICK)
            .map(|out| lines(&out))
            .unwrap_or_default();
        let networks = self
            .call(
                "find plan networks",
                argv(&["network", "ls", "-q", "--no-trunc", "--filter", &filter]),
                QUICK,
            )
            .map(|out| lines(&out))
            .unwrap_or_default();
        (containers, networks)
    }

    /// Removes what this plan created. Best effort: the deploy already failed
    /// and the plan ends `needs_inspection`, so the operator looks anyway.
    fn remove_created(&self, plan_id: &PlanId, known: &Created) {
        let (mut containers, mut networks) = self.created_by_plan(plan_id);
        containers.extend(known.containers.iter().map(|id| id.as_str().to_owned()));
        containers.sort();
        containers.dedup();
        networks.extend(known.networks.iter().cloned());
        networks.sort();
        networks.dedup();
        for id in containers.iter().filter(|id| ContainerId::parse(id).is_some()) {
            // `rm -f` of a container this plan created: the only forced
            // removal in this file, and never of anything else.
            let _ = self.call("remove new container", argv(&["rm", "-f", "-v", id]), QUICK);
        }
        for id in networks.iter().filter(|id| crate::text::is_lower_hex(id, 64)) {
            let _ = self.call("remove new network", argv(&["network", "rm", id]), QUICK);
        }
    }

    fn deploy_steps(&self, spec: &DeploySpec, created: &mut Created) -> Result<Deployed, EngineError> {
        let app = &spec.app;
        let names = app.names();
        let (network, edge) = (&names.network, &names.edge_network);
        let (app_image, gateway_image) = (spec.app_image.as_str(), spec.gateway_image.as_str());
        self.call("pull app image", argv(&["pull", "--quiet", app_image]), PULL)?;
        self.call("pull gateway image", argv(&["pull", "--quiet", gateway_image]), PULL)?;

        let labels = |role: &str| {
            vec![
                "--label".to_owned(),
                format!("{LABEL_APP}={app}"),
                "--label".to_owned(),
                format!("{LABEL_ROLE}={role}"),
                "--label".to_owned(),
                format!("{LABEL_PLAN}={}", spec.plan_id),
            ]
        };
        let mut args = argv(&["network", "create", "--driver", "bridge", "--internal"]);
        args.extend(labels("network"));
        args.push(network.clone());
        let id = self.call("create app network", args, QUICK)?;
        created.networks.push(first_line(&id).to_owned());

        let mut args = argv(&["network", "create", "--driver", "bridge"]);
        args.extend(labels("network"));
        args.push(edge.clone());
        let id = self.call("create edge network", args, QUICK)?;
        created.networks.push(first_line(&id).to_owned());

        let config_path = write_new_config(&spec.app_dir, &spec.nginx_config)?;
        let mount =
            format!("type=bind,source={},target={GATEWAY_CONFIG_PATH},readonly", config_path.display());

        // The app: on the internal network only, reachable as `app`, publishes nothing.
        let mut args = argv(&["create", "--name", &names.app_container]);
        args.extend(labels("app"));
        args.extend(hardening(&spec.limits, "1000:1000", "unless-stopped"));
        args.extend(argv(&["--network", network, "--network-alias", crate::nginx::APP_ALIAS]));
        args.push(app_image.to_owned());
        let app_id = self.created_container("create app container", args, created)?;
        self.call("start app container", argv(&["start", app_id.as_str()]), QUICK)?;

        // nginx -t in a one-off container identical to the gateway but for the
        // port: it must resolve `app`, so it joins the internal network.
        let mut args = argv(&["run", "--rm", "--name", &names.check_container]);
        args.extend(labels("check"));
        args.extend(hardening(&spec.limits, "101:101", "no"));
        args.extend(argv(&["--network", network, "--mount", &mount, gateway_image, NGINX, "-t"]));
        self.nginx_test("test nginx config", args, NGINX_TEST)?;

        let mut args = argv(&["create", "--name", &names.gateway_container]);
        args.extend(labels("gateway"));
        args.extend(hardening(&spec.limits, "101:101", "unless-stopped"));
        let publish = format!("127.0.0.1:{}:{GATEWAY_LISTEN_PORT}", spec.host_port);
        args.extend(argv(&["--network", edge, "--publish", &publish, "--mount", &mount]));
        args.push(gateway_image.to_owned());
        let gateway_id = self.created_container("create gateway container", args, created)?;
        self.call(
            "connect gateway to app network",
            argv(&["network", "connect", network, gateway_id.as_str()]),
            QUICK,
        )?;
        self.call("start gateway container", argv(&["start", gateway_id.as_str()]), QUICK)?;

        if !self.healthy(spec.host_port, spec.server_name.as_str()) {
            return Err(EngineError::HealthCheckFailed);
        }
        Ok(Deployed { app_container: app_id, gateway_container: gateway_id })
    }

    fn created_container(
        &self,
        step: &'static str,
        args: Vec<String>,
        created: &mut Created,
    ) -> Result<ContainerId, EngineError> {
        let out = self.call(step, args, QUICK)?;
        let id = ContainerId::parse(first_line(&out)).ok_or(EngineError::Unparsable { step })?;
        created.containers.push(id.clone());
        Ok(id)
    }

    /// Runs an `nginx -t`; exit 1 is nginx's verdict, anything else is docker's.
    /// (`docker exec` also exits 1 when the container is gone or stopped; the
    /// controller only changes running apps, and in `update_nginx` the restore
    /// that follows fails at its own named step in that case.)
    fn nginx_test(
        &self,
        step: &'static str,
        args: Vec<String>,
        timeout: Duration,
    ) -> Result<(), EngineError> {
        match self.call(step, args, timeout) {
            Ok(_) => Ok(()),
            Err(EngineError::Call { execution, .. })
                if execution.execution_status == ExecutionStatus::NonzeroExit
                    && execution.exit_code == Some(1) =>
            {
                Err(EngineError::NginxRejected)
            }
            Err(error) => Err(error),
        }
    }

    fn healthy(&self, port: u16, host: &str) -> bool {
        for attempt in 0..self.health.tries {
            if attempt > 0 {
                std::thread::sleep(self.health.interval);
            }
            if let Some(reply) = http_get(port, host, self.health.timeout)
                && (200..400).contains(&reply.status)
            {
                return true;
            }
        }
        false
    }

    fn test_and_reload(&self, gateway: &ContainerId) -> Result<(), EngineError> {
        self.nginx_test("nginx -t in gateway", argv(&["exec", gateway.as_str(), NGINX, "-t"]), NGINX_TEST)?;
        self.call(
            "nginx reload in gateway",
            argv(&["exec", gateway.as_str(), NGINX, "-s", "reload"]),
            NGINX_TEST,
        )?;
        Ok(())
    }
}

/// What a deploy created so far, by id.
#[derive(Debug, Default)]
struct Created {
    containers: Vec<ContainerId>,
    networks: Vec<String>,
}

/// The controls every container we start carries. `restart` is
/// `unless-stopped` for the app and gateway, `no` for the one-off check.
pub fn hardening(limits: &Limits, user: &str, restart: &str) -> Vec<String> {
    let memory = limits.memory_bytes.to_string();
    vec![
        "--user".into(),
        user.into(),
        // docker-init as pid 1: forwards SIGTERM (a bare pid 1 ignores it, so
        // `stop` would wait out its grace period) and reaps zombies.
        "--init".into(),
        "--read-only".into(),
        // The only writable place: small, no exec, no devices, no setuid;
        // mode 1777 so the unprivileged user can write (nginx's pid and temp files).
        "--tmpfs".into(),
        "/tmp:rw,noexec,nosuid,nodev,size=16m,mode=1777".into(),
        "--cap-drop".into(),
        "ALL".into(),
        "--security-opt".into(),
        "no-new-privileges".into(),
        "--pids-limit".into(),
        limits.pids.to_string(),
        "--memory".into(),
        memory.clone(),
        // Equal to --memory: no swap on top of the limit.
        "--memory-swap".into(),
        memory,
        "--cpus".into(),
        format!("{}.{:03}", limits.millicpus / 1000, limits.millicpus % 1000),
        "--log-driver".into(),
        "json-file".into(),
        "--log-opt".into(),
        format!("max-size={}", limits.log_max_size_bytes),
        "--log-opt".into(),
        format!("max-file={}", limits.log_max_files),
        "--restart".into(),
        restart.into(),
        // We pulled by digest already; never let create/run fetch anything else.
        "--pull".into(),
        "never".into(),
    ]
}

impl<R: Runner> Engine for DockerCli<R> {
    fn snapshot(&self) -> Result<Snapshot, EngineError> {
        // A container removed between `ps` and `inspect` makes inspect fail;
        // a fresh attempt sees a consistent list.
        let mut last = None;
        for _ in 0..3 {
            match self.snapshot_once() {
                Ok(snapshot) => return Ok(snapshot),
                Err(error) => last = Some(error),
            }
        }
        Err(last.expect("at least one attempt"))
    }

    fn host_port_free(&self, port: u16) -> bool {
        port_free(port)
    }

    fn capacity(&self) -> Result<Capacity, EngineError> {
        let meminfo = std::fs::read_to_string("/proc/meminfo")
            .map_err(|_| EngineError::Host { step: "read /proc/meminfo" })?;
        let free_memory_bytes = mem_available(&meminfo)
            .ok_or(EngineError::Host { step: "parse MemAvailable in /proc/meminfo" })?;
        let stat = nix::sys::statvfs::statvfs(&self.state_dir)
            .map_err(|_| EngineError::Host { step: "statvfs of the state directory" })?;
        let free_disk_bytes = (stat.blocks_available() as u64).saturating_mul(stat.fragment_size() as u64);
        Ok(Capacity { free_memory_bytes, free_disk_bytes })
    }

    fn deploy(&self, spec: &DeploySpec) -> Result<Deployed, EngineError> {
        check_untyped_values(spec)?;
        // The controller checked at plan time; a listener may have arrived
        // since. Refusing here creates nothing.
        if !port_free(spec.host_port) {
            return Err(EngineError::PortTaken { port: spec.host_port });
        }
        let mut created = Created::default();
        self.set_deadline(Some(std::time::Instant::now() + self.deploy_budget));
        let result = self.deploy_steps(spec, &mut created);
        self.set_deadline(None);
        match result {
            Ok(deployed) => Ok(deployed),
            Err(error) => {
                self.remove_created(&spec.plan_id, &created);
                Err(error)
            }
        }
    }

    fn update_nginx(
        &self,
        app_dir: &Path,
        gateway: &ContainerId,
        old_config: &str,
        new_config: &str,
    ) -> Result<(), EngineError> {
        let mut file = open_managed_config(app_dir)?;
        let current = read_bounded(&mut file)?;
        if current != old_config.as_bytes() {
            return Err(EngineError::ManagedFileChanged);
        }
        backup(app_dir, old_config)?;
        // In place: the gateway's bind mount follows the inode, not the name,
        // so a rename would leave the gateway reading the old file.
        rewrite(&mut file, new_config)?;
        match self.test_and_reload(gateway) {
            Ok(()) => Ok(()),
            Err(error) => {
                // Rolling back: every failure from here on names a `restore`
                // step, so the operator can tell "rejected and restored"
                // (the original error) from "restore failed too".
                rewrite(&mut file, old_config)
                    .map_err(|_| EngineError::Host { step: "restore the previous nginx.conf" })?;
                let g = gateway.as_str();
                self.call("restore: nginx -t in gateway", argv(&["exec", g, NGINX, "-t"]), NGINX_TEST)?;
                self.call(
                    "restore: nginx reload in gateway",
                    argv(&["exec", g, NGINX, "-s", "reload"]),
                    NGINX_TEST,
                )?;
                // Only a rejection by `nginx -t` proves that nginx never
                // loaded the new bytes (no reload was sent); a failed or
                // timed-out reload call may have half happened, so it stays
                // an error that needs an operator even after the restore.
                Err(match error {
                    EngineError::NginxRejected => EngineError::NginxRejectedAndRestored,
                    other => other,
                })
            }
        }
    }

    fn stop(&self, containers: &[ContainerId]) -> Result<(), EngineError> {
        for id in containers {
            // First the policy, so the engine cannot bring it back while or
            // after it stops.
            self.call("disable restart", argv(&["update", "--restart=no", id.as_str()]), QUICK)?;
            self.call("stop container", argv(&["stop", "--time", STOP_GRACE_SECONDS, id.as_str()]), STOP)?;
        }
        Ok(())
    }

    fn remove_image(&self, image: &ImageId) -> Result<(), EngineError> {
        // Never -f, never prune: if a container still uses the image, docker
        // refuses and that refusal is the answer.
        self.call("remove image", argv(&["image", "rm", "--no-prune", image.as_str()]), QUICK)?;
        Ok(())
    }
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

fn first_line(out: &[u8]) -> &str {
    std::str::from_utf8(out).unwrap_or("").lines().next().unwrap_or("").trim()
}

fn lines(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out).lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect()
}

// ---------------------------------------------------------------- snapshot --

/// One JSON object per container with only the fields a snapshot holds.
/// Configured port bindings (HostConfig), not live ones, so a stopped
/// container still shows the port it will take when it starts.
pub const INSPECT_TEMPLATE: &str = concat!(
    r#"{"id":{{json .Id}},"name":{{json .Name}},"image":{{json .Image}},"#,
    r#""state":{{json .State.Status}},"labels":{{json .Config.Labels}},"#,
    r#""ports":{{json .HostConfig.PortBindings}}}"#
);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InspectRow {
    id: String,
    name: String,
    image: String,
    state: String,
    labels: Option<BTreeMap<String, String>>,
    ports: Option<BTreeMap<String, Option<Vec<Binding>>>>,
}

#[derive(Deserialize)]
struct Binding {
    #[serde(rename = "HostIp", default)]
    host_ip: String,
    #[serde(rename = "HostPort", default)]
    host_port: String,
}

pub(crate) fn parse_container_ids(out: &[u8]) -> Result<Vec<ContainerId>, EngineError> {
    lines(out)
        .iter()
        .map(|l| ContainerId::parse(l).ok_or(EngineError::Unparsable { step: "list containers" }))
        .collect()
}

pub(crate) fn parse_inspect_rows(out: &[u8]) -> Result<Vec<Container>, EngineError> {
    let bad = EngineError::Unparsable { step: "inspect containers" };
    let text = std::str::from_utf8(out).map_err(|_| bad.clone())?;
    let mut containers = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let row: InspectRow = serde_json::from_str(line).map_err(|_| bad.clone())?;
        let mut ports = Vec::new();
        for (key, bindings) in row.ports.unwrap_or_default() {
            let (port, protocol) = key.split_once('/').unwrap_or((key.as_str(), "tcp"));
            let container_port = port.parse().map_err(|_| bad.clone())?;
            for binding in bindings.unwrap_or_default() {
                // An empty HostPort means "any free port"; 0 says so.
                let host_port = if binding.host_port.is_empty() {
                    0
                } else {
                    binding.host_port.parse().map_err(|_| bad.clone())?
                };
                ports.push(PublishedPort {
                    host_ip: binding.host_ip,
                    host_port,
                    container_port,
                    protocol: protocol.to_owned(),
                });
            }
        }
        containers.push(Container {
            id: ContainerId::parse(&row.id).ok_or(bad.clone())?,
            name: row.name.trim_start_matches('/').to_owned(),
            image_id: ImageId::parse(&row.image).ok_or(bad.clone())?,
            state: row.state,
            labels: row
                .labels
                .unwrap_or_default()
                .into_iter()
                .filter(|(k, _)| k.starts_with(LABEL_PREFIX))
                .collect(),
            ports,
        });
    }
    Ok(containers)
}

pub(crate) fn parse_images(out: &[u8]) -> Result<Vec<ImageId>, EngineError> {
    lines(out)
        .iter()
        .map(|l| ImageId::parse(l).ok_or(EngineError::Unparsable { step: "list images" }))
        .collect()
}

/// `--filter name=vl-` matches anywhere in the name; keep the real prefix.
pub(crate) fn parse_networks(out: &[u8]) -> Result<Vec<String>, EngineError> {
    Ok(lines(out).into_iter().filter(|n| n.starts_with(super::names::PREFIX)).collect())
}

// ------------------------------------------------------------------ host side --

/// The values of a spec that no type carries. The names, references and
/// the plan id are validated types ([`DeploySpec`]); what is left is the
/// path that goes into a `--mount` list (no separators, quotes or
/// controls) and the numbers.
fn check_untyped_values(spec: &DeploySpec) -> Result<(), EngineError> {
    let dir = spec.app_dir.to_str().unwrap_or("");
    let dir_ok = spec.app_dir.is_absolute()
        && !dir.is_empty()
        && dir.bytes().all(|c| c.is_ascii_graphic() && !b",:\"'=".contains(&c));
    if dir_ok && spec.host_port >= 1024 && spec.container_port >= 1 && spec.limits.millicpus > 0 {
        Ok(())
    } else {
        Err(EngineError::Host { step: "validate deploy spec" })
    }
}

/// Creates the app directory (root-owned, 0755) if needed and creates
/// nginx.conf (0644: uid 101 in the gateway reads it through the mount).
/// An existing directory must be a real directory of ours that nobody else
/// can write; the file is never followed through a symlink.
fn write_new_config(app_dir: &Path, contents: &str) -> Result<PathBuf, EngineError> {
    match std::fs::symlink_metadata(app_dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .mode(0o755)
                .create(app_dir)
                .map_err(|_| EngineError::Host { step: "create the app directory" })?;
            std::fs::set_permissions(app_dir, std::fs::Permissions::from_mode(0o755))
                .map_err(|_| EngineError::Host { step: "set the app directory mode" })?;
        }
        Err(_) => return Err(EngineError::Host { step: "inspect the app directory" }),
        Ok(_) => {}
    }
    check_app_dir(app_dir)?;
    let path = app_dir.join("nginx.conf");
    // A new file only: an existing one is an earlier deploy's evidence (or
    // someone else's file), never ours to overwrite.
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(&path)
        .map_err(|_| EngineError::Host { step: "create nginx.conf (it must not exist yet)" })?;
    let meta = file.metadata().map_err(|_| EngineError::Host { step: "stat nginx.conf" })?;
    if !meta.is_file() {
        return Err(EngineError::Host { step: "nginx.conf is not a regular file" });
    }
    file.set_permissions(std::fs::Permissions::from_mode(0o644))
        .and_then(|()| file.write_all(contents.as_bytes()))
        .and_then(|()| file.sync_all())
        .map_err(|_| EngineError::Host { step: "write nginx.conf" })?;
    Ok(path)
}

fn check_app_dir(app_dir: &Path) -> Result<(), EngineError> {
    let meta = std::fs::symlink_metadata(app_dir)
        .map_err(|_| EngineError::Host { step: "inspect the app directory" })?;
    let ours = meta.uid() == nix::unistd::geteuid().as_raw();
    if !meta.is_dir() || !ours || meta.mode() & 0o022 != 0 {
        return Err(EngineError::Host { step: "the app directory is not a private directory of ours" });
    }
    Ok(())
}

/// Opens the managed nginx.conf for update: no symlink (O_NOFOLLOW), a
/// regular file, in a directory of ours.
fn open_managed_config(app_dir: &Path) -> Result<File, EngineError> {
    check_app_dir(app_dir).map_err(|_| EngineError::ManagedFileChanged)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(app_dir.join("nginx.conf"))
        .map_err(|_| EngineError::ManagedFileChanged)?;
    let meta = file.metadata().map_err(|_| EngineError::ManagedFileChanged)?;
    // A second hard link would make us rewrite a file somewhere else too.
    if !meta.is_file() || meta.nlink() != 1 {
        return Err(EngineError::ManagedFileChanged);
    }
    Ok(file)
}

fn read_bounded(file: &mut File) -> Result<Vec<u8>, EngineError> {
    let mut bytes = Vec::new();
    std::io::Read::by_ref(file)
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| EngineError::Host { step: "read nginx.conf" })?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(EngineError::ManagedFileChanged);
    }
    Ok(bytes)
}

/// A private copy beside the file, never overwriting an earlier one.
fn backup(app_dir: &Path, old_config: &str) -> Result<(), EngineError> {
    let stamp = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(app_dir.join(format!("nginx.conf.{stamp}.bak")))
        .map_err(|_| EngineError::Host { step: "create the nginx.conf backup" })?;
    file.write_all(old_config.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|_| EngineError::Host { step: "write the nginx.conf backup" })
}

fn rewrite(file: &mut File, contents: &str) -> Result<(), EngineError> {
    file.set_len(0)
        .and_then(|()| file.seek(SeekFrom::Start(0)).map(drop))
        .and_then(|()| file.write_all(contents.as_bytes()))
        .and_then(|()| file.sync_all())
        .map_err(|_| EngineError::Host { step: "rewrite nginx.conf in place" })
}

/// Whether nothing listens on 127.0.0.1:`port`: we can bind it, and a
/// connection attempt is refused (docker's proxy or a NAT rule may answer
/// without holding the address).
pub fn port_free(port: u16) -> bool {
    if port == 0 {
        return false;
    }
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let bindable = TcpListener::bind(addr).is_ok();
    bindable && TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err()
}

/// `MemAvailable` of /proc/meminfo, in bytes.
pub(crate) fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(kib.checked_mul(1024)?)
}

/// What a probe saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpReply {
    pub status: u16,
    pub body: Vec<u8>,
}

/// A minimal HTTP/1.0 GET of `/` on 127.0.0.1 (never anywhere else) with the
/// given Host header. Reads at most 64 KiB. `None` when nothing sensible came back.
pub fn http_get(port: u16, host: &str, timeout: Duration) -> Option<HttpReply> {
    if host.is_empty() || !host.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    let request = format!(
        "GET / HTTP/1.0\r\nHost: {host}\r\nUser-Agent: volce-lab-health\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).ok()?;
    // A read timeout bounds each read, not the reply: an app that trickles a
    // byte now and then would keep the claim forever. One deadline for all.
    let deadline = std::time::Instant::now() + timeout;
    let mut response = Vec::new();
    let mut buffer = [0u8; 4096];
    while response.len() < 64 * 1024 {
        let left = deadline.checked_duration_since(std::time::Instant::now()).filter(|d| !d.is_zero())?;
        stream.set_read_timeout(Some(left)).ok()?;
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => response.extend_from_slice(&buffer[..n.min(64 * 1024 - response.len())]),
            Err(_) => return None,
        }
    }
    parse_http_reply(&response)
}

pub(crate) fn parse_http_reply(response: &[u8]) -> Option<HttpReply> {
    let head_end = response.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&response[..head_end]).ok()?;
    let mut words = head.lines().next()?.split(' ');
    let version = words.next()?;
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    let status: u16 = words.next()?.parse().ok()?;
    (100..600).contains(&status).then(|| HttpReply { status, body: response[head_end + 4..].to_vec() })
}

#[cfg(test)]
mod tests;
