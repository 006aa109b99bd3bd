//! A kill at every step (issues 16 and 13), on the machine's real Docker
//! engine with the real shipped helper binary on its fixed paths.
//!
//! The helper always runs `/usr/bin/docker`. Each execute here runs the
//! helper inside a private mount namespace (`unshare --mount --propagation
//! private`) in which a test wrapper is bind-mounted over `/usr/bin/docker`;
//! the real client stays reachable for the wrapper at another bind mount.
//! The wrapper counts the calls and blocks at call N, either before it runs
//! the real call or after the real call returned (after the last call: the
//! moment between the last docker call and the final record). The shipped
//! binary has no switch for any of this.
//!
//! For every action a clean run first counts its calls (K); then each cell
//! blocks at call N (before, N = 1..=K, and after K), kill -9s the helper
//! and every process under it (a power loss), and checks: the plan is
//! `needs_inspection` (claimer_died); a second execute is refused
//! `plan_consumed` with no mutating docker call; `show` and `doctor` name
//! exactly the objects carrying the plan's label; `resolve` then an
//! approved `remove_app` (or, where resolve forgot the app, removing by hand
//! what `show` named, as docs/server-install.md says) leaves nothing of the app;
//! `PRAGMA integrity_check` is ok; every volce-lab object on the engine is
//! one that was there before the cell.
//! The deploy matrix again with a TERM relayed through `sudo -n` and a TSTP
//! from a job-control shell, a helper stopped with SIGSTOP (visible, and
//! both ways out), and OOM kills by the kernel in a memory cgroup.
//!
//! Ignored: needs root, Docker, util-linux's unshare, sudo and
//! scripts/test-images; fails loudly without them. It needs the fixed paths
//! (/etc/volce-lab, /var/lib/volce-lab) to itself, creates them and removes
//! them again; it removes every object it created.

use std::collections::BTreeSet;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use volce_lab::host::clock::SystemClock;
use volce_lab::host::{HostPaths, ProcLiveness};

use crate::support::docker_lab::{TEST_DIR, docker, docker_ok, read_json};

// A kill at each step of a restore (issue 41), in the machine's own mount
// namespace (the data's mounts must reach the engine).
mod restore;
// The same for a restore of an accessory's dump.
mod restore_dump;

const BIN: &str = env!("CARGO_BIN_EXE_volce-lab");
const ETC: &str = "/etc/volce-lab";
const STATE: &str = "/var/lib/volce-lab";
const LABEL_PLAN: &str = volce_lab::vocab::LABEL_PLAN;

/// One test of this suite at a time: they share the fixed paths and the
/// engine's volce-lab objects (a change to any of ours voids a plan).
static SERIAL: Mutex<()> = Mutex::new(());

/// The fixed paths and the wrapper's directory for one test; all removed
/// when it ends.
struct World {
    work: PathBuf,
    paths: HostPaths,
    next: std::cell::Cell<u32>,
    _serial: MutexGuard<'static, ()>,
}

impl World {
    fn enter() -> World {
        let serial = SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        assert!(
            nix::unistd::geteuid().is_root(),
            "needs root (the helper on its fixed paths, mount namespaces)"
        );
        for tool in ["/usr/bin/unshare", "/usr/bin/sudo", "/bin/bash", "/usr/bin/docker"] {
            assert!(
                Path::new(tool).exists(),
                "{tool} is missing: this suite needs it (util-linux, sudo, bash)"
            );
        }
        assert!(
            docker(&["version", "--format", "{{.Server.Version}}"]).0,
            "the Docker engine is not reachable"
        );
        let policy = read_json("policy.json");
        for key in ["web", "web2"] {
            assert!(
                policy["catalog"][key].is_string(),
                "the test catalog lacks {key}: run scripts/test-images"
            );
        }
        assert!(
            !Path::new(ETC).exists() && !Path::new(STATE).exists(),
            "{ETC} or {STATE} exists: this suite needs the fixed paths to itself (run it on a test machine \
             without another volce-lab installation; scripts/e2e-setup's is torn down after its suites)"
        );
        std::fs::create_dir(ETC).unwrap();
        std::fs::set_permissions(ETC, std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = Path::new(ETC).join("policy.json");
        std::fs::write(&file, policy.to_string()).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();

        let work = Path::new(TEST_DIR).join("kill-matrix");
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).unwrap();
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(work.join("real-docker"), b"").unwrap();
        let wrapper = work.join("docker");
        std::fs::write(&wrapper, WRAPPER.replace("@WORK@", &work.display().to_string())).unwrap();
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        World { work, paths: HostPaths::fixed(), next: std::cell::Cell::new(0), _serial: serial }
    }

    /// A fresh app name and a free port for one cell.
    fn app(&self) -> (String, u16) {
        let n = self.next.get();
        self.next.set(n + 1);
        let port = (18600..18999)
            .find(|p| {
                volce_lab::docker::host_probe::port_free(*p)
                    && !docker_ok(&["ps", "-aq", "--filter", &format!("publish={p}")])
                        .contains(|c: char| c.is_ascii_hexdigit())
            })
            .expect("a free port in the test range");
        (format!("vk{}x{n}", std::process::id() % 100_000), port)
    }

    // ----- the agent and the operator through the library, on the fixed paths -----

    fn rpc(&self, request: Value) -> Value {
        let engine = volce_lab::host::real_engine(&self.paths);
        volce_lab::host::Host::new(self.paths.clone(), engine, SystemClock, ProcLiveness)
            .rpc("vl-agent", request.to_string().as_bytes())
            .to_json()
    }

    /// Plans `action` and approves it where it needs approval: the plan id.
    fn planned(&self, action: &str, parameters: &Value) -> String {
        let reply = self.rpc(json!({"operation": "plan", "action": action, "parameters": parameters}));
        assert_eq!(reply["status"], "ok", "{action} {parameters}: {reply}");
        let id = reply["result"]["id"].as_str().unwrap().to_owned();
        let digest = reply["result"]["digest"].as_str().unwrap();
        if reply["result"]["requires_approval"] != false {
            let engine = volce_lab::host::real_engine(&self.paths);
            volce_lab::host::Host::new(self.paths.clone(), engine, SystemClock, ProcLiveness)
                .approve("vl-operator", &id, digest, |_, _| volce_lab::host::Decision::Confirmed)
                .unwrap_or_else(|r| panic!("approve {action}: {r:?}"));
        }
        id
    }

    fn completed(&self, action: &str, parameters: &Value) {
        let id = self.planned(action, parameters);
        let done = self.rpc(json!({"operation": "execute", "plan_id": id}));
        assert_eq!(done["result"]["outcome"], "completed", "{action}: {done}");
    }

    fn resolve(&self, id: &str) -> String {
        let engine = volce_lab::host::real_engine(&self.paths);
        volce_lab::host::Host::new(self.paths.clone(), engine, SystemClock, ProcLiveness)
            .resolve("vl-operator", id)
            .unwrap_or_else(|r| panic!("resolve {id}: {r:?}"))
    }

    fn has_record(&self, app: &str) -> bool {
        let mut store = volce_lab::store::Store::open(&self.paths.database()).unwrap();
        store.read(|tx| tx.apps()).unwrap().contains_key(app)
    }

    // ----- the shipped binary -----

    /// The operator's command `volce-lab-host ARGS` as root (no sudo): (exit code, stdout + stderr).
    fn operator(&self, args: &[&str]) -> (Option<i32>, String) {
        let output =
            Command::new(BIN).arg("host").args(args).env_clear().stdin(Stdio::null()).output().unwrap();
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        (output.status.code(), text)
    }

    fn plan_state(&self, id: &str) -> (String, String) {
        let (code, text) = self.operator(&["show", id, "--json"]);
        assert_eq!(code, Some(0), "show --json: {text}");
        let shown: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("show --json: {text}"));
        (
            shown["state"].as_str().unwrap_or("?").to_owned(),
            shown["outcome"].as_str().unwrap_or("").to_owned(),
        )
    }

    /// Arms the wrapper: block at call `n` (`Step::Before`/`After`), or never.
    fn arm(&self, block: Option<Step>) {
        for file in ["count", "calls", "blocked", "release"] {
            let _ = std::fs::remove_file(self.work.join(file));
        }
        let line = match block {
            None => "0 none".to_owned(),
            Some(Step::Before(n)) => format!("{n} before"),
            Some(Step::After(n)) => format!("{n} after"),
        };
        std::fs::write(self.work.join("block"), line + "\n").unwrap();
    }

    /// The docker calls the wrapper saw since it was armed, as argv lines.
    fn calls(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.work.join("calls")).unwrap_or_default();
        let mut numbered: Vec<(usize, String)> = text
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(n, rest)| (n.parse().unwrap_or(0), rest.to_owned()))
            .collect();
        numbered.sort();
        numbered.into_iter().map(|(_, call)| call).collect()
    }

    /// The helper `volce-lab host rpc` in the namespace with the wrapper, as
    /// the shipped binary (`via_sudo`: `sudo -n` in front, as the agent's
    /// sudoers rule runs it; `job_control`: under `bash -c 'set -m; ...'`).
    fn helper(&self, via_sudo: bool, job_control: bool) -> Child {
        self.helper_writing_to(via_sudo, job_control, Stdio::piped())
    }

    /// [`World::helper`] with its stdout on `stdout` (a pipe the test fills
    /// and does not read, for the blocked-stdout cells).
    fn helper_writing_to(&self, via_sudo: bool, job_control: bool, stdout: Stdio) -> Child {
        let mut inner: Vec<String> = vec![
            "/usr/bin/unshare".into(),
            "--mount".into(),
            "--propagation".into(),
            "private".into(),
            "--".into(),
            "/bin/sh".into(),
            "-c".into(),
            r#"mount --bind /usr/bin/docker "$0/real-docker" && mount --bind "$0/docker" /usr/bin/docker && exec "$@""#
                .into(),
            self.work.display().to_string(),
        ];
        if via_sudo {
            inner.extend(["/usr/bin/sudo".into(), "-n".into()]);
        }
        inner.extend([BIN.into(), "host".into(), "rpc".into()]);
        let mut command = if job_control {
            let mut c = Command::new("/bin/bash");
            c.args(["-c", r#"set -m; "$@" & wait $!"#, "bash"]).args(&inner);
            c
        } else {
            let mut c = Command::new(&inner[0]);
            c.args(&inner[1..]);
            c
        };
        command
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(Stdio::piped())
            .stdout(stdout)
            .stderr(Stdio::null());
        command.spawn().unwrap()
    }

    /// Starts an execute of `id` with the wrapper armed at `step` and waits
    /// until the wrapper blocks there.
    fn execute_until(&self, id: &str, step: Step, via_sudo: bool, job_control: bool) -> Child {
        self.execute_until_writing_to(id, step, via_sudo, job_control, Stdio::piped())
    }

    /// [`World::execute_until`] with the helper's stdout on `stdout`.
    fn execute_until_writing_to(
        &self,
        id: &str,
        step: Step,
        via_sudo: bool,
        job_control: bool,
        stdout: Stdio,
    ) -> Child {
        self.arm(Some(step));
        let mut child = self.helper_writing_to(via_sudo, job_control, stdout);
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(json!({"operation": "execute", "plan_id": id}).to_string().as_bytes()).unwrap();
        drop(stdin);
        let started = Instant::now();
        while !self.work.join("blocked").exists() {
            if let Some(status) = child.try_wait().unwrap() {
                let mut stdout = String::new();
                if let Some(mut out) = child.stdout.take() {
                    let _ = out.read_to_string(&mut stdout);
                }
                let count = std::fs::read_to_string(self.work.join("count")).unwrap_or_default();
                let block = std::fs::read_to_string(self.work.join("block")).unwrap_or_default();
                panic!(
                    "the helper ended ({status:?}) before call {step:?}: {stdout}; count {count:?} block {block:?} calls: {:#?}",
                    self.calls()
                );
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "never reached {step:?}: {:#?}",
                self.calls()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        child
    }

    /// An execute with the wrapper only counting: (reply, docker calls).
    fn execute_counted(&self, id: &str) -> (Value, Vec<String>) {
        self.arm(None);
        let mut child = self.helper(false, false);
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(json!({"operation": "execute", "plan_id": id}).to_string().as_bytes()).unwrap();
        drop(stdin);
        let (_, stdout) = finish(child, Duration::from_secs(120));
        (last_reply(&stdout), self.calls())
    }

    fn release(&self) {
        std::fs::write(self.work.join("release"), b"").unwrap();
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(STATE);
        let _ = std::fs::remove_dir_all(ETC);
        let _ = std::fs::remove_dir_all(&self.work);
    }
}

/// The test's docker: counts, logs, and blocks at the armed call until
/// `release` appears (a kill usually comes first). `real-docker` is the
/// real client, bind-mounted there in the namespace.
const WRAPPER: &str = r#"#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
d=@WORK@
# The helper runs some calls side by side (a snapshot's ps and network ls):
# count under a lock, so every call gets its own number.
exec 9>>"$d/lock"
flock 9
n=$(( $(cat "$d/count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$d/count"
echo "$n $*" >> "$d/calls"
flock -u 9
exec 9>&-
read block mode < "$d/block"
if [ "$n" = "$block" ] && [ "$mode" = before ]; then
    echo "$$" > "$d/blocked"
    while [ ! -e "$d/release" ]; do sleep 0.02; done
fi
"$d/real-docker" "$@"
rc=$?
if [ "$n" = "$block" ] && [ "$mode" = after ]; then
    echo "$$" > "$d/blocked"
    while [ ! -e "$d/release" ]; do sleep 0.02; done
fi
exit $rc
"#;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Blocked before the real call N ran.
    Before(usize),
    /// Blocked after the real call N returned, before the wrapper exits.
    After(usize),
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Before(n) => write!(f, "before call {n}"),
            Step::After(n) => write!(f, "after call {n}"),
        }
    }
}

/// Waits for `child` to end (killing everything under it past `within`)
/// and reads its stdout.
fn finish(mut child: Child, within: Duration) -> (std::process::ExitStatus, String) {
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > within {
            kill_tree(child.id());
            panic!("the helper did not end within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stdout = String::new();
    // None: the cell gave the helper a stdout of its own (a full pipe).
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut stdout);
    }
    (status, stdout)
}

fn last_reply(stdout: &str) -> Value {
    let line = stdout.lines().last().unwrap_or_else(|| panic!("no reply: {stdout:?}"));
    serde_json::from_str(line).unwrap_or_else(|_| panic!("not a reply: {stdout:?}"))
}

/// (pid, ppid) of every process.
fn processes() -> Vec<(i32, i32)> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            all.push((pid, ppid));
        }
    }
    all
}

/// `root` and everything under it.
fn tree(root: u32) -> Vec<i32> {
    let all = processes();
    let mut found = vec![root as i32];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(all.iter().filter(|(_, ppid)| *ppid == parent).map(|(pid, _)| *pid));
        i += 1;
    }
    found
}

/// What a power loss does to the helper: SIGKILL to it, its process group
/// and every process under it, at once.
fn kill_tree(root: u32) {
    let pids = tree(root);
    for pid in &pids {
        let _ = kill(Pid::from_raw(-pid), Signal::SIGKILL);
    }
    for pid in &pids {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    // A killed process is not dead at once: until the kernel has taken it
    // down (a zombie, or gone) the helper's liveness check rightly sees
    // its claimer alive. Seen once in CI: a plan still `executing` when
    // show looked right after the kill, under load. A power loss is over
    // when the processes are, so wait for that (bounded).
    let started = Instant::now();
    for pid in &pids {
        while !matches!(proc_state(*pid), 'Z' | 'X' | '?') {
            assert!(started.elapsed() < Duration::from_secs(10), "pid {pid} outlived SIGKILL by 10 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The pid of the helper's worker under `root` (`volce-lab-host
/// rpc-worker`, started by the front `volce-lab host rpc` in its own
/// session): the process that claims, acts and records.
fn helper_pid(root: u32) -> i32 {
    let started = Instant::now();
    loop {
        for pid in tree(root) {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let argv: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            if argv.get(1) == Some(&volce_lab::host::front::WORKER.as_bytes()) {
                return pid;
            }
        }
        assert!(started.elapsed() < Duration::from_secs(5), "no helper worker under {root}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn proc_state(pid: i32) -> char {
    volce_lab::host::liveness::proc_stat(pid).map_or('?', |(state, _)| state)
}

/// The docker subcommand of a call, for the table (no ids, no names).
fn words(call: &str) -> String {
    call.split_whitespace()
        .take_while(|w| !w.starts_with('-') && !w.contains("vl-") && w.len() < 20)
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The calls as a multiset of subcommands: what a run did, whatever the
/// order of the calls it ran side by side.
fn shape(calls: &[String]) -> Vec<String> {
    let mut words: Vec<String> = calls.iter().map(|c| words(c)).collect();
    words.sort();
    words
}

/// Whether an argv the helper ran only reads.
fn read_only(call: &str) -> bool {
    let words: Vec<&str> = call.split_whitespace().collect();
    match words.as_slice() {
        ["ps", ..] | ["inspect", ..] | ["version", ..] | ["info", ..] | ["images", ..] | ["logs", ..] => true,
        ["network", sub, ..] | ["image", sub, ..] | ["container", sub, ..] => {
            matches!(*sub, "ls" | "inspect")
        }
        _ => false,
    }
}

/// Every volce-lab object on the engine: containers labelled with an app,
/// networks labelled with a plan (ids).
fn volce_lab_objects() -> BTreeSet<String> {
    let containers = docker_ok(&["ps", "-aq", "--no-trunc", "--filter", "label=io.volce-lab.app"]);
    let networks =
        docker_ok(&["network", "ls", "-q", "--no-trunc", "--filter", &format!("label={LABEL_PLAN}")]);
    containers.lines().chain(networks.lines()).map(str::to_owned).collect()
}

/// Everything on the engine carrying the plan's label (ids).
fn labelled(plan: &str) -> Vec<String> {
    let filter = format!("label={LABEL_PLAN}={plan}");
    let containers = docker_ok(&["ps", "-aq", "--no-trunc", "--filter", &filter]);
    let networks = docker_ok(&["network", "ls", "-q", "--no-trunc", "--filter", &filter]);
    containers.lines().chain(networks.lines()).map(str::to_owned).collect()
}

/// Runs the real docker for the test, quietly: whether it succeeded.
fn quiet(args: &[&str]) -> bool {
    Command::new("/usr/bin/docker")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Removes whatever carries the app's name, whatever happened (a failed cell).
struct AppCleanup(String);

impl Drop for AppCleanup {
    fn drop(&mut self) {
        let filter = format!("label=io.volce-lab.app={}", self.0);
        let (_, ids) = docker(&["ps", "-aq", "--no-trunc", "--filter", &filter]);
        for id in ids.lines() {
            let _ = docker(&["rm", "-f", id]);
        }
        for network in [format!("vl-{}", self.0), format!("vl-{}_edge", self.0)] {
            if quiet(&["network", "inspect", &network]) {
                quiet(&["network", "rm", &network]);
            }
        }
    }
}

/// The actions of the matrix and what each needs before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Deploy,
    NginxConfig,
    Stop,
    Start,
    Update,
    RemoveApp,
    RemoveImage,
    Restart,
    Rollback,
}

impl Action {
    /// The actions whose docker calls are other actions' of the matrix, in
    /// the same order: in CI they get one kill cell of their own
    /// ([`matrix_steps`]); `VOLCE_LAB_KILL_MATRIX` gives them every cell.
    fn is_a_sequence_of_others(self) -> bool {
        matches!(self, Action::Restart | Action::Rollback)
    }

    fn name(self) -> &'static str {
        match self {
            Action::Deploy => "deploy",
            Action::NginxConfig => "nginx_config",
            Action::Stop => "stop",
            Action::Start => "start",
            Action::Update => "update",
            Action::RemoveApp => "remove_app",
            Action::RemoveImage => "remove_image",
            Action::Restart => "restart",
            Action::Rollback => "rollback",
        }
    }
}

fn deploy_params(app: &str, port: u16) -> Value {
    json!({"app": app, "image": "web", "host_port": port, "container_port": 8080, "server_name": format!("{app}.test")})
}

fn web2_image_id() -> String {
    read_json("images.json")["web2"]["image_id"].as_str().unwrap().to_owned()
}

/// Brings the engine to what `action` needs and returns its approved plan.
fn prepared(world: &World, action: Action, app: &str, port: u16) -> String {
    let deploy = deploy_params(app, port);
    let app_only = json!({"app": app});
    match action {
        Action::Deploy => world.planned("deploy", &deploy),
        Action::RemoveImage => {
            // An image an app of volce-lab used (the only kind it removes),
            // used by no container now: web2, pulled again after the cell.
            ensure_web2();
            let mut with_web2 = deploy;
            with_web2["image"] = "web2".into();
            world.completed("deploy", &with_web2);
            world.completed("remove_app", &app_only);
            world.planned("remove_image", &json!({"image_id": web2_image_id()}))
        }
        _ => {
            world.completed("deploy", &deploy);
            match action {
                Action::NginxConfig => world.planned(
                    "nginx_config",
                    &json!({"app": app, "server_name": format!("{app}.other.test")}),
                ),
                Action::Stop => world.planned("stop", &app_only),
                Action::Start => {
                    world.completed("stop", &app_only);
                    world.planned("start", &app_only)
                }
                Action::Update => world.planned("update", &json!({"app": app, "image": "web2"})),
                Action::RemoveApp => world.planned("remove_app", &app_only),
                Action::Restart => world.planned("restart", &app_only),
                Action::Rollback => {
                    world.completed("update", &json!({"app": app, "image": "web2"}));
                    world.planned("rollback", &app_only)
                }
                Action::Deploy | Action::RemoveImage => unreachable!(),
            }
        }
    }
}

fn ensure_web2() {
    if !docker(&["image", "inspect", &web2_image_id()]).0 {
        let policy = read_json("policy.json");
        assert!(docker(&["pull", "-q", policy["catalog"]["web2"].as_str().unwrap()]).0, "pull web2 again");
    }
}

/// One row of the matrix.
struct Row {
    action: &'static str,
    fault: String,
    step: String,
    call: String,
    end_state: String,
    labelled: usize,
    recovery: String,
}

impl Row {
    fn print(&self) {
        eprintln!(
            "MATRIX | {} | {} | {} | `{}` | {} | {} | {} |",
            self.action, self.fault, self.step, self.call, self.end_state, self.labelled, self.recovery
        );
    }
}

/// The calls of a clean run of each action, once per test process: the
/// deploy-based tests share deploy's.
static COUNTED: Mutex<Vec<(&'static str, Vec<String>)>> = Mutex::new(Vec::new());

/// The calls of a clean run of `action` (completed), for the cells to come.
fn count_calls(world: &World, action: Action) -> Vec<String> {
    let counted = COUNTED.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
    if let Some((_, calls)) = counted.iter().find(|(name, _)| *name == action.name()) {
        return calls.clone();
    }
    let calls = count_clean_run(world, action);
    COUNTED.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push((action.name(), calls.clone()));
    calls
}

fn count_clean_run(world: &World, action: Action) -> Vec<String> {
    let (app, port) = world.app();
    let _cleanup = AppCleanup(app.clone());
    let before = volce_lab_objects();
    let id = prepared(world, action, &app, port);
    let (reply, calls) = world.execute_counted(&id);
    assert_eq!(reply["result"]["outcome"], "completed", "clean {}: {reply}", action.name());
    eprintln!(
        "{}: {} docker calls in a clean execute:\n  {}",
        action.name(),
        calls.len(),
        calls.join("\n  ")
    );
    back_to_clean(world, &app, &before, &id, None);
    calls
}

/// After a cell: the documented way back to a clean host, then the checks
/// that nothing is left. `leftover`: what `show` named (for the by-hand path).
fn back_to_clean(
    world: &World,
    app: &str,
    before: &BTreeSet<String>,
    id: &str,
    needs_inspection: Option<&[String]>,
) -> String {
    let mut recovery = Vec::new();
    if let Some(named) = needs_inspection {
        let resolved = world.resolve(id);
        recovery.push("resolve");
        if !world.has_record(app) {
            // resolve forgot the app: what show named is removed by hand.
            for object in named {
                if quiet(&["container", "inspect", object]) {
                    assert!(quiet(&["rm", "-f", object]), "docker rm -f {object}");
                } else if quiet(&["network", "inspect", object]) {
                    assert!(quiet(&["network", "rm", object]), "docker network rm {object}");
                }
            }
            if !named.is_empty() {
                recovery.push("docker rm / network rm of what show named");
            }
            let _ = resolved;
        }
    }
    if world.has_record(app) {
        world.completed("remove_app", &json!({"app": app}));
        recovery.push("remove_app");
    }
    let _ = std::fs::remove_dir_all(world.paths.apps_dir().join(app));
    // Nothing of the app, and nothing volce-lab's that was not there before.
    let filter = format!("label=io.volce-lab.app={app}");
    assert_eq!(docker_ok(&["ps", "-aq", "--filter", &filter]).trim(), "", "containers of {app} are left");
    let networks = docker_ok(&["network", "ls", "--format", "{{.Name}}"]);
    assert!(
        !networks.lines().any(|n| n.starts_with(&format!("vl-{app}"))),
        "networks of {app} are left: {networks}"
    );
    let after = volce_lab_objects();
    assert!(after.is_subset(before), "volce-lab objects nobody accounts for: {:?}", after.difference(before));
    assert!(!world.has_record(app), "the record of {app} is left");
    let db = rusqlite::Connection::open(world.paths.database()).unwrap();
    let integrity: String = db.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(integrity, "ok");
    if recovery.is_empty() { "-".to_owned() } else { recovery.join(" + ") }
}

/// The checks after a killed helper: the plan's state, a refused second
/// execute without a mutating call, show and doctor naming what carries
/// the label. Returns (end state, what carries the label).
fn after_kill(world: &World, id: &str) -> (String, Vec<String>) {
    let (state, outcome) = world.plan_state(id);
    assert_eq!((state.as_str(), outcome.as_str()), ("needs_inspection", "claimer_died"), "plan {id}");
    let (again, calls) = world.execute_counted(id);
    assert_eq!(again["code"], "plan_consumed", "a second execute: {again}");
    assert!(calls.iter().all(|c| read_only(c)), "a second execute changed the engine: {calls:?}");
    let left = labelled(id);
    let (_, shown) = world.operator(&["show", id]);
    let (_, doctor) = world.operator(&["doctor"]);
    for object in &left {
        assert!(shown.contains(&object[..12]), "show does not name {object}:\n{shown}");
        assert!(doctor.contains(&object[..12]), "doctor does not name {object}:\n{doctor}");
    }
    if left.is_empty() {
        assert!(shown.contains("Nothing on the engine carries its label"), "{shown}");
    }
    (format!("{state} ({outcome})"), left)
}

/// The steps of one action's kill matrix, by `VOLCE_LAB_KILL_MATRIX`:
/// - `full`: before every call and after the last (the issue's matrix);
/// - `changes`: before the first call (the plan is claimed, nothing asked
///   yet), before every call that changes the engine, after the last call.
///   A kill before a read-only call leaves engine and store exactly as a
///   kill before the next change (or after the last call) does;
/// - unset (CI, within its time budget, docs/reliability.md): [`few_steps`],
///   without the first call for the actions other than deploy (every
///   action's execute begins with the same claim and verification snapshot,
///   which deploy's cells cover).
fn matrix_steps(action: Action, calls: &[String]) -> Vec<Step> {
    let chosen = std::env::var("VOLCE_LAB_KILL_MATRIX").unwrap_or_default();
    if chosen != "full" && chosen != "changes" && action.is_a_sequence_of_others() {
        // Its calls are other actions' in the matrix already (restart:
        // stop's, then start's; rollback: update's); its own cell is the
        // middle change, where the helper has changed the engine and not
        // yet recorded it.
        let steps = few_steps(calls);
        return vec![steps[steps.len() / 2]];
    }
    if chosen != "full" && chosen != "changes" {
        let mut steps = few_steps(calls);
        if action != Action::Deploy && steps.len() > 2 {
            steps.remove(0);
        }
        return steps;
    }
    let mut steps: Vec<Step> = (1..=calls.len())
        .filter(|n| chosen == "full" || *n == 1 || !read_only(&calls[n - 1]))
        .map(Step::Before)
        .collect();
    steps.push(Step::After(calls.len()));
    steps
}

/// Before the first call, before the first, a middle and the last change,
/// and after the last call.
fn few_steps(calls: &[String]) -> Vec<Step> {
    let changes: Vec<usize> = (1..=calls.len()).filter(|n| !read_only(&calls[n - 1])).collect();
    let mut picked = vec![1];
    if let (Some(first), Some(last)) = (changes.first(), changes.last()) {
        picked.extend([*first, changes[changes.len() / 2], *last]);
    }
    picked.dedup();
    let mut steps: Vec<Step> = picked.into_iter().map(Step::Before).collect();
    steps.push(Step::After(calls.len()));
    steps
}

/// The kill -9 matrix of one action: every call before it runs, and after the last.
fn kill_matrix(action: Action) {
    let world = World::enter();
    let started = Instant::now();
    let calls = count_calls(&world, action);
    let steps = matrix_steps(action, &calls);
    let cells = steps.len();
    for step in steps {
        let (app, port) = world.app();
        let _cleanup = AppCleanup(app.clone());
        let before = volce_lab_objects();
        let id = prepared(&world, action, &app, port);
        let child = world.execute_until(&id, step, false, false);
        let n = match step {
            Step::Before(n) | Step::After(n) => n,
        };
        let call = world.calls().get(n - 1).map_or(String::new(), |c| words(c));
        kill_tree(child.id());
        let (status, _) = finish(child, Duration::from_secs(10));
        assert_eq!(status.signal(), Some(9), "{step}: the helper was killed");
        let (end_state, left) = after_kill(&world, &id);
        let recovery = back_to_clean(&world, &app, &before, &id, Some(&left));
        Row {
            action: action.name(),
            fault: "kill -9".into(),
            step: step.to_string(),
            call,
            end_state,
            labelled: left.len(),
            recovery,
        }
        .print();
    }
    // Issue 22: one of the signals the agent's account can send its sudo,
    // and a stdout that is full and never read; at the step that matters
    // most, every signal (nginx_config after the new configuration was
    // written: the helper has changed nginx.conf and not yet recorded it).
    // The signals are the helper's, whatever the action or the step: in
    // the default (CI) matrix each action tries two of them, at its first
    // and its last step, rotating over the actions so that each signal
    // meets at least two actions; a full stdout holds the helper at its
    // first progress write and then at its reply, whatever the step, and
    // is tried at the same two. Every step with VOLCE_LAB_KILL_MATRIX=full
    // or changes. (CI's time, docs/reliability.md: the middle steps' signal
    // cells cost 90 s and their kill cells are there.)
    let every_step = std::env::var("VOLCE_LAB_KILL_MATRIX").is_ok_and(|m| m == "full" || m == "changes");
    let steps = matrix_steps(action, &calls);
    let relayed = if every_step {
        steps
    } else if action.is_a_sequence_of_others() {
        // Its calls are its others' in the matrix, which try the signals.
        Vec::new()
    } else {
        vec![steps[0], steps[steps.len() - 1]]
    };
    for (i, step) in relayed.iter().enumerate() {
        let signal = RELAYABLE[(action as usize * 2 + i) % RELAYABLE.len()];
        relayed_cell(&world, action, &calls, *step, signal, false);
        if every_step || i == 0 || i + 1 == relayed.len() {
            blocked_stdout_cell(&world, action, *step, action == Action::Deploy && i == 0);
        }
    }
    if action == Action::NginxConfig {
        let written = Step::Before((1..=calls.len()).find(|n| !read_only(&calls[n - 1])).unwrap());
        let already = relayed.iter().position(|step| *step == written);
        for (i, signal) in RELAYABLE.iter().enumerate() {
            if already.is_some_and(|at| (action as usize * 2 + at) % RELAYABLE.len() == i) {
                continue;
            }
            relayed_cell(&world, action, &calls, written, signal, false);
        }
    }
    if action == Action::RemoveImage {
        ensure_web2();
    }
    eprintln!(
        "{} kill matrix: {cells} kill cells and the issue 22 cells in {:?}",
        action.name(),
        started.elapsed()
    );
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn kill_9_at_every_docker_call_of_deploy() {
    kill_matrix(Action::Deploy);
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn kill_9_at_every_docker_call_of_nginx_config() {
    kill_matrix(Action::NginxConfig);
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn kill_9_at_every_docker_call_of_stop() {
    kill_matrix(Action::Stop);
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn kill_9_at_every_docker_call_of_start() {
    kill_matrix(Action::Start);
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn kill_9_at_every_docker_call_of_update() {
    kill_matrix(Action::Update);
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn kill_9_at_every_docker_call_of_remove_app() {
    kill_matrix(Action::RemoveApp);
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn kill_9_at_every_docker_call_of_remove_image() {
    kill_matrix(Action::RemoveImage);
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn kill_9_during_a_restart() {
    kill_matrix(Action::Restart);
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn kill_9_during_a_rollback() {
    kill_matrix(Action::Rollback);
}

/// The signals the agent's account can send to its `sudo` besides TERM and
/// TSTP (issue 22), by `kill -s` name: sudo relays USR1, USR2, PIPE and
/// WINCH to the command, answers ALRM by ending the command's process group
/// itself (HUP, TERM, then KILL to the front: the worker in its own session
/// goes on), and dies of a real-time signal itself (the helper goes on).
const RELAYABLE: [&str; 6] = ["USR1", "USR2", "ALRM", "PIPE", "WINCH", "RTMIN+3"];

/// Sends `signal` (a `kill -s` name, real-time ones included, which nix's
/// `Signal` cannot name) to `pid`.
fn send(pid: i32, signal: &str) {
    let sent = Command::new("/usr/bin/kill").args(["-s", signal, &pid.to_string()]).status().unwrap();
    assert!(sent.success(), "kill -s {signal} {pid}");
}

/// One cell: `signal` sent to the `sudo -n` in front of the helper while
/// it waits at `step` of `action` (`calls`: a clean run's): the action
/// completes once, with the calls of a clean run, and is recorded.
fn relayed_cell(
    world: &World,
    action: Action,
    calls: &[String],
    step: Step,
    signal: &str,
    job_control: bool,
) {
    let (app, port) = world.app();
    let _cleanup = AppCleanup(app.clone());
    let before = volce_lab_objects();
    let id = prepared(world, action, &app, port);
    let child = world.execute_until(&id, step, true, job_control);
    let sudo = if job_control { tree(child.id())[1] } else { child.id() as i32 };
    let helper = helper_pid(child.id());
    send(sudo, signal);
    // ALRM: sudo's HUP and TERM, then its KILL of the front after a pause.
    std::thread::sleep(Duration::from_millis(if signal == "ALRM" { 2500 } else { 100 }));
    let state = proc_state(helper);
    assert!(
        state != 'T' && state != '?',
        "{} {step}: {signal} stopped or ended the helper ({state})",
        action.name()
    );
    world.release();
    let (_, stdout) = finish(child, Duration::from_secs(90));
    let reply = last_reply(&stdout);
    assert_eq!(reply["result"]["outcome"], "completed", "{} {step}: {signal}: {reply}", action.name());
    let call = world
        .calls()
        .get(match step {
            Step::Before(n) | Step::After(n) => n - 1,
        })
        .map_or(String::new(), |c| words(c));
    assert_eq!(shape(&world.calls()), shape(calls), "{step}: the same calls as a clean run, none twice");
    let (state, _) = world.plan_state(&id);
    assert_eq!(state, "completed");
    let (again, again_calls) = world.execute_counted(&id);
    assert_eq!(again["code"], "plan_consumed", "{again}");
    assert!(again_calls.iter().all(|c| read_only(c)), "{again_calls:?}");
    let recovery = back_to_clean(world, &app, &before, &id, None);
    let fault = match (signal, job_control) {
        ("TSTP", true) => "TSTP to sudo (set -m)".to_owned(),
        _ => format!("{signal} to sudo"),
    };
    Row {
        action: action.name(),
        fault,
        step: step.to_string(),
        call,
        end_state: "completed".into(),
        labelled: 0,
        recovery,
    }
    .print();
}

/// A pipe filled to its capacity (64 KiB), as the attack of issue 22 hands
/// the helper for stdout: (the read end, which the test keeps and does not
/// read, the write end in blocking mode again).
fn full_pipe() -> (std::io::PipeReader, std::io::PipeWriter) {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let (reader, mut writer) = std::io::pipe().unwrap();
    let flags = OFlag::from_bits_truncate(fcntl(&writer, FcntlArg::F_GETFL).unwrap());
    fcntl(&writer, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).unwrap();
    // Whole lines, so that what the helper writes after them starts a line.
    let mut filler = [b'x'; 4096];
    filler[4095] = b'\n';
    while writer.write(&filler).is_ok() {}
    fcntl(&writer, FcntlArg::F_SETFL(flags)).unwrap();
    (reader, writer)
}

/// One cell: the helper (through `sudo -n`) writes to a stdout pipe that is
/// full and that nobody reads, and is held at `step`. After the release the
/// plan must be recorded `completed` while the pipe is still unread (the
/// record never waits on the output); then, `never_read`: the helper gives
/// up on its reply and exits within its bound (10 s) with the pipe still
/// full; else the pipe is read late and its last line is the reply.
fn blocked_stdout_cell(world: &World, action: Action, step: Step, never_read: bool) {
    let (app, port) = world.app();
    let _cleanup = AppCleanup(app.clone());
    let before = volce_lab_objects();
    let id = prepared(world, action, &app, port);
    let (mut reader, writer) = full_pipe();
    let child = world.execute_until_writing_to(&id, step, true, false, Stdio::from(writer));
    world.release();
    let released = Instant::now();
    while world.plan_state(&id).0 != "completed" {
        assert!(
            released.elapsed() < Duration::from_secs(90),
            "{} {step}: the plan was not recorded while its stdout was full: {:?}",
            action.name(),
            world.plan_state(&id)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let recorded = released.elapsed();
    let mut ended = String::new();
    if never_read {
        let (_, _) = finish(child, Duration::from_secs(30));
        ended = format!(", helper ended {:?} after the release, stdout never read", released.elapsed());
    } else {
        let drain = std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = reader.read_to_end(&mut all);
            all
        });
        let (_, _) = finish(child, Duration::from_secs(30));
        let all = drain.join().unwrap();
        let text = String::from_utf8_lossy(&all);
        let reply = last_reply(&text);
        assert_eq!(reply["result"]["outcome"], "completed", "{} {step}: {reply}", action.name());
        reader = std::io::pipe().unwrap().0;
    }
    drop(reader);
    eprintln!("{} {step}: recorded {recorded:?} after the release{ended}", action.name());
    let (again, again_calls) = world.execute_counted(&id);
    assert_eq!(again["code"], "plan_consumed", "{again}");
    assert!(again_calls.iter().all(|c| read_only(c)), "{again_calls:?}");
    let recovery = back_to_clean(world, &app, &before, &id, None);
    Row {
        action: action.name(),
        fault: if never_read { "stdout full, never read" } else { "stdout full, read late" }.into(),
        step: step.to_string(),
        call: String::new(),
        end_state: "completed".into(),
        labelled: 0,
        recovery,
    }
    .print();
}

/// A signal the caller's account can send, relayed to the helper at each
/// step of a deploy: it must neither split nor repeat the action.
fn relayed_matrix(signal: Signal, job_control: bool) {
    let world = World::enter();
    let started = Instant::now();
    let calls = count_calls(&world, Action::Deploy);
    let name = signal.as_str().trim_start_matches("SIG");
    for step in few_steps(&calls) {
        relayed_cell(&world, Action::Deploy, &calls, step, name, job_control);
    }
    eprintln!("deploy {signal} matrix in {:?}", started.elapsed());
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn term_relayed_through_sudo_at_every_step_of_a_deploy() {
    relayed_matrix(Signal::SIGTERM, false);
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn tstp_from_a_job_control_shell_at_every_step_of_a_deploy() {
    relayed_matrix(Signal::SIGTSTP, true);
}

/// The memory hog of an OOM cell, killed however the cell ends.
struct Hog(Child);

impl Drop for Hog {
    fn drop(&mut self) {
        kill_tree(self.0.id());
        let _ = self.0.wait();
    }
}

/// A memory cgroup (v1) under this test's own, for the OOM cells; removed on drop.
struct MemoryCgroup(PathBuf);

impl MemoryCgroup {
    fn new(limit: u64) -> MemoryCgroup {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let line = own.lines().find(|l| l.split(':').nth(1) == Some("memory")).expect(
            "no cgroup v1 memory controller in /proc/self/cgroup (docs/reliability.md says what this needs)",
        );
        let own_path = line.splitn(3, ':').nth(2).unwrap().trim_start_matches('/');
        let dir = Path::new("/sys/fs/cgroup/memory")
            .join(own_path)
            .join(format!("vl-kill-oom-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap_or_else(|e| {
            panic!("cannot create the memory cgroup {}: {e} (docs/reliability.md)", dir.display())
        });
        std::fs::write(dir.join("memory.limit_in_bytes"), limit.to_string()).unwrap();
        // Without swap accounting the file is missing: then the limit above is all.
        let _ = std::fs::write(dir.join("memory.memsw.limit_in_bytes"), limit.to_string());
        MemoryCgroup(dir)
    }

    fn join(&self, pid: i32) {
        std::fs::write(self.0.join("cgroup.procs"), pid.to_string()).unwrap();
    }

    fn oom_kills(&self) -> u64 {
        let text = std::fs::read_to_string(self.0.join("memory.oom_control")).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            // A hog whose shell the kernel killed first is nobody's child any more.
            let procs = std::fs::read_to_string(self.0.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The kernel's OOM killer ends the helper at a few steps of a deploy: the
/// helper joins a 64 MiB memory cgroup with oom_score_adj 1000 while it
/// waits at the step, a hog (`tail /dev/zero`, oom_score_adj -999) fills
/// the cgroup, the kernel picks the helper. Then the same checks as kill -9.
#[test]
#[ignore = "real parts: run by scripts/test"]
fn the_oom_killer_at_a_few_steps_of_a_deploy() {
    let world = World::enter();
    let started = Instant::now();
    let calls = count_calls(&world, Action::Deploy);

    for step in few_steps(&calls) {
        let (app, port) = world.app();
        let _cleanup = AppCleanup(app.clone());
        let before = volce_lab_objects();
        let id = prepared(&world, Action::Deploy, &app, port);
        let child = world.execute_until(&id, step, false, false);
        let call = world
            .calls()
            .get(match step {
                Step::Before(n) | Step::After(n) => n - 1,
            })
            .map_or(String::new(), |c| words(c));
        let under = tree(child.id());
        let cgroup = MemoryCgroup::new(64 * 1024 * 1024);
        // The claimer: the worker (the front only waits for it).
        let helper = helper_pid(child.id());
        std::fs::write(format!("/proc/{helper}/oom_score_adj"), "1000").unwrap();
        cgroup.join(helper);
        // Eight small hogs, none near the helper's score: the kernel picks
        // the helper (root here may raise an oom_score_adj, not lower one).
        let hog_script = format!(
            "echo $$ > {}/cgroup.procs && for i in 1 2 3 4 5 6 7 8; do tail /dev/zero & done; wait",
            cgroup.0.display()
        );
        let hog =
            Hog(Command::new("/bin/sh").args(["-c", &hog_script]).stdout(Stdio::null()).spawn().unwrap());
        // The front ends once its worker died (exit 1: no reply).
        let (status, _) = finish(child, Duration::from_secs(30));
        drop(hog);
        let worker_gone = volce_lab::host::liveness::proc_stat(helper).is_none();
        for pid in under {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        assert!(worker_gone, "{step}: the OOM killer ended the worker");
        assert_eq!(status.code(), Some(1), "{step}: the front answers its worker's death with exit 1");
        assert!(cgroup.oom_kills() >= 1, "{step}: the kernel counted an OOM kill");
        drop(cgroup);
        let (end_state, left) = after_kill(&world, &id);
        let recovery = back_to_clean(&world, &app, &before, &id, Some(&left));
        Row {
            action: "deploy",
            fault: "OOM killer".into(),
            step: step.to_string(),
            call,
            end_state,
            labelled: left.len(),
            recovery,
        }
        .print();
    }
    eprintln!("deploy OOM cells in {:?}", started.elapsed());
}

/// A helper stopped with SIGSTOP (no process can refuse it) at the first
/// change of a deploy: `list`, `show` and `doctor` name it STOPPED with its
/// pid, `resolve` and a second execute are refused, and both ways out that
/// `show` prints end in a recorded state with the action run at most once:
/// `kill -CONT` (it finishes: completed) and `kill -KILL -- -PID`
/// (needs_inspection, claimer_died, then the usual recovery).
#[test]
#[ignore = "real parts: run by scripts/test"]
fn a_stopped_helper_is_visible_and_both_ways_out_run_the_action_at_most_once() {
    let world = World::enter();
    let calls = count_calls(&world, Action::Deploy);
    let first_change = (1..=calls.len()).find(|n| !read_only(&calls[n - 1])).unwrap();
    let step = Step::Before(first_change);
    for way_out in ["kill -CONT", "kill -KILL -- -PID"] {
        let (app, port) = world.app();
        let _cleanup = AppCleanup(app.clone());
        let before = volce_lab_objects();
        let id = prepared(&world, Action::Deploy, &app, port);
        let child = world.execute_until(&id, step, false, false);
        // The claimer: the worker, not the front sudo would have started.
        let pid = helper_pid(child.id());
        let under = tree(child.id());
        kill(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
        let started = Instant::now();
        while proc_state(pid) != 'T' {
            assert!(started.elapsed() < Duration::from_secs(5), "the helper did not stop");
            std::thread::sleep(Duration::from_millis(10));
        }
        world.release();

        let (_, listed) = world.operator(&["list"]);
        assert!(listed.contains(&format!("claimer {pid} STOPPED")), "list: {listed}");
        let (_, shown) = world.operator(&["show", &id]);
        assert!(
            shown.contains(&format!("kill -CONT {pid}")) && shown.contains(&format!("kill -KILL -- -{pid}")),
            "{shown}"
        );
        let (_, doctor) = world.operator(&["doctor"]);
        assert!(doctor.contains(&format!("process {pid}, is STOPPED")), "doctor: {doctor}");
        let engine = volce_lab::host::real_engine(&world.paths);
        let refused = volce_lab::host::Host::new(world.paths.clone(), engine, SystemClock, ProcLiveness)
            .resolve("vl-operator", &id)
            .unwrap_err();
        assert_eq!(refused.code, volce_lab::vocab::Code::NotAwaitingInspection);
        let (again, again_calls) = world.execute_counted(&id);
        assert_eq!(again["code"], "plan_executing", "{again}");
        assert!(again_calls.iter().all(|c| read_only(c)), "{again_calls:?}");

        let (end_state, left, recovery) = if way_out == "kill -CONT" {
            kill(Pid::from_raw(pid), Signal::SIGCONT).unwrap();
            let (_, stdout) = finish(child, Duration::from_secs(60));
            assert_eq!(last_reply(&stdout)["result"]["outcome"], "completed", "{stdout}");
            assert_eq!(world.plan_state(&id).0, "completed");
            let (again, _) = world.execute_counted(&id);
            assert_eq!(again["code"], "plan_consumed");
            ("completed".to_owned(), Vec::new(), back_to_clean(&world, &app, &before, &id, None))
        } else {
            // The front first: killed after its worker, it may see the
            // worker die and end on its own before its own SIGKILL lands
            // (seen once in CI, status exit instead of signal 9). The way
            // out under test is the next line, the worker's group.
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = kill(Pid::from_raw(-pid), Signal::SIGKILL);
            for p in under {
                let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
            }
            let (status, _) = finish(child, Duration::from_secs(10));
            assert_eq!(status.signal(), Some(9), "the front is killed with the rest of the tree");
            let (end_state, left) = after_kill(&world, &id);
            let recovery = back_to_clean(&world, &app, &before, &id, Some(&left));
            (end_state, left, recovery)
        };
        Row {
            action: "deploy",
            fault: if way_out == "kill -CONT" {
                "SIGSTOP, then kill -CONT"
            } else {
                "SIGSTOP, then kill -KILL -- -PID"
            }
            .into(),
            step: step.to_string(),
            call: words(&calls[first_change - 1]),
            end_state,
            labelled: left.len(),
            recovery,
        }
        .print();
    }
}
