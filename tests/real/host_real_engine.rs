//! The controller on the machine's real Docker engine, through
//! `volce_lab::host::real_engine` (the engine the shipped binary uses) and
//! the library pipeline on injected paths: the test policy written by
//! scripts/test-images, and a temporary state directory.
//! deploy -> gateway_status -> nginx_config -> stop refused without approval
//! -> approved by an approver -> stop -> the unmanaged container untouched.
//! Ignored: needs root, Docker, and `scripts/test-images`; fails loudly
//! without them. Cleans up every object it created, even when it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::docker_lab;
use docker_lab::{assert_hardened, eventually, inspect, policy_limits, status};
use volce_lab::host::clock::SystemClock;
use volce_lab::host::{HostPaths, ProcLiveness};

const TEST_POLICY: &str = "/var/tmp/volce-lab-test/policy.json";
const DOCKER: &str = "/usr/bin/docker";

fn docker(args: &[&str]) -> String {
    let output = Command::new(DOCKER).args(args).output().expect("docker runs");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Removes what this test may have created, whatever happened.
struct Cleanup {
    app: String,
    unmanaged: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let app = &self.app;
        for name in [
            format!("vl-{app}-app"),
            format!("vl-{app}-gateway"),
            format!("vl-{app}-check"),
            self.unmanaged.clone(),
        ] {
            let _ = Command::new(DOCKER).args(["rm", "-f", &name]).output();
        }
        for network in [format!("vl-{app}"), format!("vl-{app}_edge")] {
            let _ = Command::new(DOCKER).args(["network", "rm", &network]).output();
        }
    }
}

fn free_port() -> u16 {
    (18500..18999)
        .find(|p| {
            std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok()
                && docker(&["ps", "-aq", "--filter", &format!("publish={p}")]).is_empty()
        })
        .expect("a free port in the test range")
}

/// The suite's tests run on threads of one process; creating 1,000
/// containers beside a deploy would change what the deploy's plan was
/// bound to. Each test holds this for its whole run.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Fails loudly unless the test runs as root with an engine to talk to.
fn require_root_and_engine() {
    assert!(nix::unistd::geteuid().is_root(), "needs root (the helper's checks expect root-owned files)");
    assert!(
        !docker(&["version", "--format", "{{.Server.Version}}"]).is_empty(),
        "the Docker engine is not reachable"
    );
}

/// The helper's paths for a test: the test policy, a state directory
/// under `dir`, root as the owner.
fn test_paths(dir: &Path) -> HostPaths {
    HostPaths { policy: PathBuf::from(TEST_POLICY), state_dir: dir.join("state"), owner_uid: 0 }
}

fn rpc(paths: &HostPaths, caller: &str, request: Value) -> Value {
    let reply = volce_lab::host::Host::new(
        paths.clone(),
        volce_lab::host::real_engine(paths),
        SystemClock,
        ProcLiveness,
    )
    .rpc(caller, request.to_string().as_bytes());
    reply.to_json()
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn the_controller_drives_the_real_engine_end_to_end() {
    let _alone = one_at_a_time();
    require_root_and_engine();
    assert!(Path::new(TEST_POLICY).exists(), "{TEST_POLICY} is missing: run scripts/test-images first");

    let state = tempfile::tempdir().unwrap();
    let paths = test_paths(state.path());
    let app = format!("vlhost{}", std::process::id());
    let unmanaged = format!("vlhost-unmanaged-{}", std::process::id());
    let _cleanup = Cleanup { app: app.clone(), unmanaged: unmanaged.clone() };

    // An unmanaged container that must never be touched (created, not started).
    let web_image = docker(&["image", "ls", "-q", "--no-trunc", "127.0.0.1:15000/volce-lab/web"]);
    let web_image = web_image.lines().next().expect("the test app image is present").to_owned();
    docker(&["create", "--name", &unmanaged, &web_image]);
    let unmanaged_before = docker(&["inspect", "--format", "{{.State.Status}} {{.Id}}", &unmanaged]);

    let port = free_port();
    // Two names (issue 25): the primary one, which the health check asks,
    // and its www name.
    let params = json!({"app": app, "image": "web", "host_port": port, "container_port": 8080,
                        "server_name": format!("{app}.test"), "also_server_names": [format!("www.{app}.test")]});
    let plan =
        rpc(&paths, "vl-agent", json!({"operation": "plan", "action": "deploy", "parameters": params}));
    assert_ne!(
        plan["code"], "engine_unavailable",
        "host::real_engine could not reach Docker: is the engine running?"
    );
    assert_eq!(plan["status"], "ok", "{plan}");
    let id = plan["result"]["id"].as_str().unwrap().to_owned();
    let done = rpc(&paths, "vl-agent", json!({"operation": "execute", "plan_id": id}));
    assert_eq!(done["result"]["outcome"], "completed", "{done}");

    // Served through the gateway for the planned name only, and both
    // containers carry every hardening control of the policy.
    assert_eq!(status(port, &format!("{app}.test")), Some(200), "the page is served for the planned name");
    assert_eq!(status(port, &format!("www.{app}.test")), Some(200), "and for its other name");
    assert_eq!(status(port, "someone-else.test"), Some(404), "other Host headers are not the app's");
    let policy: Value = serde_json::from_slice(&std::fs::read(TEST_POLICY).unwrap()).unwrap();
    let limits = policy_limits(&policy);
    let app_container = inspect("container", &format!("vl-{app}-app"));
    assert_hardened(&app_container, "1000:1000", &limits);
    assert_hardened(&inspect("container", &format!("vl-{app}-gateway")), "101:101", &limits);
    assert!(
        app_container["HostConfig"]["PortBindings"].as_object().is_none_or(|p| p.is_empty()),
        "the app publishes nothing"
    );

    let gateways = rpc(&paths, "vl-agent", json!({"operation": "gateway_status"}));
    let ours: Vec<&Value> = gateways["result"]["gateways"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["app"] == app.as_str())
        .collect();
    assert_eq!(ours.len(), 1, "{gateways}");
    assert_eq!(ours[0]["state"], "running");

    let plan = rpc(
        &paths,
        "vl-agent",
        json!({"operation": "plan", "action": "nginx_config", "parameters": {"app": app, "server_name": format!("new-{app}.test")}}),
    );
    let id = plan["result"]["id"].as_str().unwrap().to_owned();
    let done = rpc(&paths, "vl-agent", json!({"operation": "execute", "plan_id": id}));
    assert_eq!(done["result"]["outcome"], "completed", "{done}");
    // `completed` means served: the new name answers at once, no waiting.
    assert_eq!(
        status(port, &format!("new-{app}.test")),
        Some(200),
        "the new name answers right after the reply"
    );
    // Old workers finish gracefully after a reload and may still answer for
    // a moment: wait for them to go.
    eventually("the old name is no longer the app's", || status(port, &format!("{app}.test")) == Some(404));
    eventually("nor its other name: nginx_config sets the list anew", || {
        status(port, &format!("www.{app}.test")) == Some(404)
    });

    let plan =
        rpc(&paths, "vl-agent", json!({"operation": "plan", "action": "stop", "parameters": {"app": app}}));
    let id = plan["result"]["id"].as_str().unwrap().to_owned();
    let digest = plan["result"]["digest"].as_str().unwrap().to_owned();
    let refused = rpc(&paths, "vl-agent", json!({"operation": "execute", "plan_id": id}));
    assert_eq!(refused["code"], "approval_required", "{refused}");
    let engine = volce_lab::host::real_engine(&paths);
    volce_lab::host::Host::new(paths.clone(), engine, SystemClock, ProcLiveness)
        .approve("vl-operator", &id, &digest, |_, _| volce_lab::host::Decision::Confirmed)
        .unwrap();
    let done = rpc(&paths, "vl-agent", json!({"operation": "execute", "plan_id": id}));
    assert_eq!(done["result"]["outcome"], "completed", "{done}");

    for role in ["app", "gateway"] {
        let status = docker(&[
            "inspect",
            "--format",
            "{{.State.Status}} {{.HostConfig.RestartPolicy.Name}}",
            &format!("vl-{app}-{role}"),
        ]);
        assert_eq!(status, "exited no", "vl-{app}-{role}");
    }
    assert_eq!(docker(&["inspect", "--format", "{{.State.Status}} {{.Id}}", &unmanaged]), unmanaged_before);

    // The deploy recorded the images its containers run: volce-lab's claim.
    let mut ours: Vec<String> = ["app", "gateway"]
        .iter()
        .map(|role| docker(&["inspect", "--format", "{{.Image}}", &format!("vl-{app}-{role}")]))
        .collect();
    ours.sort();
    ours.dedup();
    let mut store = volce_lab::store::Store::open(&paths.database()).unwrap();
    let apps = store.read(|tx| tx.apps()).unwrap();
    let recorded: Vec<String> = apps[&app].image_ids.iter().map(|i| i.to_string()).collect();
    assert_eq!(recorded, ours);
    // Claimed but used by the stopped containers: refused, not forced.
    let remove = |image: &str| {
        rpc(
            &paths,
            "vl-agent",
            json!({"operation": "plan", "action": "remove_image", "parameters": {"image_id": image}}),
        )
    };
    assert_eq!(remove(&ours[0])["code"], "image_in_use");
    // Any other local image is not ours to remove, used or not.
    let all = docker(&["image", "ls", "-q", "--no-trunc"]);
    if let Some(other) = all.lines().find(|i| !ours.iter().any(|o| o == i)) {
        assert_eq!(remove(other)["code"], "image_not_managed", "{other}");
    }
}

/// Removes the foreign containers the inventory test created, by id.
struct Foreign(std::sync::Mutex<Vec<String>>);

impl Drop for Foreign {
    fn drop(&mut self) {
        let ids = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        for chunk in ids.chunks(200) {
            let _ = Command::new(DOCKER).arg("rm").args(chunk).output();
        }
    }
}

/// 1,000 bare foreign containers (created, never started, of the test app
/// image) are counted in the inventory, never described, and the reply
/// stays under the workstation's 128 KiB reply limit. Before drift-aware
/// inventory, 650 of them pushed it past the limit for good.
#[test]
#[ignore = "real parts: run by scripts/test"]
fn inventory_with_a_thousand_foreign_containers_stays_small_and_names_none() {
    let _alone = one_at_a_time();
    assert!(nix::unistd::geteuid().is_root(), "needs root (the helper's checks expect root-owned files)");
    let images = docker_lab::read_json("images.json");
    let web_id = images["web"]["image_id"].as_str().unwrap().to_owned();
    assert!(
        !docker(&["image", "inspect", "--format", "{{.Id}}", &web_id]).is_empty(),
        "run scripts/test-images"
    );
    let state = tempfile::tempdir().unwrap();
    let paths = test_paths(state.path());
    let prefix = format!("vlinv-foreign-{}", std::process::id());
    let foreign = Foreign(std::sync::Mutex::new(Vec::new()));
    let started = std::time::Instant::now();
    // Four at a time: the engine serializes much of create, more gains nothing.
    std::thread::scope(|scope| {
        for worker in 0..4 {
            let (prefix, foreign, web_id) = (&prefix, &foreign, &web_id);
            scope.spawn(move || {
                for n in (worker..1000).step_by(4) {
                    let name = format!("{prefix}-{n}");
                    let id =
                        docker(&["create", "--name", &name, "--label", "io.volce-lab.app=EVIL<x>", web_id]);
                    assert_eq!(id.len(), 64, "docker create {name}: {id}");
                    foreign.0.lock().unwrap().push(id);
                }
            });
        }
    });
    eprintln!("created 1000 foreign containers in {:?}", started.elapsed());

    let started = std::time::Instant::now();
    let reply = volce_lab::host::Host::new(
        paths.clone(),
        volce_lab::host::real_engine(&paths),
        SystemClock,
        ProcLiveness,
    )
    .rpc("vl-agent", br#"{"operation":"inventory"}"#.as_slice());
    let elapsed = started.elapsed();
    let line = reply.to_line();
    eprintln!("inventory with 1000 foreign containers: {} bytes in {elapsed:?}", line.len());
    let json = reply.to_json();
    assert_eq!(json["status"], "ok", "{json}");
    assert!(line.len() < 16 * 1024, "far under the 128 KiB reply limit: {} bytes", line.len());
    assert!(!line.contains(&prefix) && !line.contains("EVIL"), "a foreign name or label value leaked");
    let foreign_count = json["result"]["foreign"]["containers"].as_u64().unwrap();
    assert!(foreign_count >= 1000, "{foreign_count}");
    let catalog = json["result"]["offer"]["catalog"].as_array().unwrap();
    let web = catalog.iter().find(|c| c["key"] == "web").expect("the test policy offers web");
    assert_eq!((web["key"].as_str(), web["present"].as_bool()), (Some("web"), Some(true)), "{web}");
    assert_eq!(web["image_id"], web_id.as_str(), "the catalog key resolves to the local image");
    drop(foreign);
    assert!(docker(&["ps", "-aq", "--filter", &format!("name={prefix}")]).is_empty(), "all removed");
}

/// Issue 46, item 2 on the real engine: a container carrying volce-lab's
/// app label that the state database does not record (as one made after
/// the backup a restore put back), beside one without labels. `state
/// diff` names the labelled one with its command and not the other;
/// `state remove-container`, paused, refuses the unlabelled one and leaves
/// it, and stops and removes the labelled one through the docker client
/// the shipped helper uses, recorded in the trail. Self-contained: its
/// image is an empty one imported here (a created container never starts),
/// so it needs root and Docker but not scripts/test-images.
#[test]
#[ignore = "real parts: run by scripts/test"]
fn state_remove_container_removes_only_a_labelled_unrecorded_container_on_the_real_engine() {
    let _alone = one_at_a_time();
    require_root_and_engine();
    let state = tempfile::tempdir().unwrap();
    let paths = test_paths(state.path());
    volce_lab::host::paths::prepare_state(&paths).unwrap();
    drop(volce_lab::store::Store::open(&paths.database()).unwrap());
    let app = format!("vlrestored{}", std::process::id());
    let unmanaged = format!("vlrestored-unmanaged-{}", std::process::id());
    let _cleanup = Cleanup { app: app.clone(), unmanaged: unmanaged.clone() };
    let image = format!("volce-lab-test-empty:{}", std::process::id());
    let imported = Command::new(DOCKER)
        .args(["import", "-", &image])
        .stdin(std::fs::File::open(empty_tar(state.path())).unwrap())
        .output()
        .unwrap();
    assert!(imported.status.success(), "docker import: {imported:?}");
    let labelled = docker(&[
        "create",
        "--name",
        &format!("vl-{app}-app"),
        "--label",
        &format!("io.volce-lab.app={app}"),
        "--label",
        "io.volce-lab.role=app",
        &image,
        "/never-started",
    ]);
    docker(&["create", "--name", &unmanaged, &image, "/never-started"]);
    assert_eq!(labelled.len(), 64, "the labelled container: {labelled}");

    let engine = volce_lab::host::real_engine(&paths);
    let alice = volce_lab::host::Caller::from("alice");
    let now = || volce_lab::control::Clock::now(&SystemClock);
    let said = volce_lab::install::state::diff(&paths, &engine, now()).unwrap();
    assert!(said.contains(&format!("state remove-container {labelled}")), "{said}");
    assert!(!said.contains(&unmanaged), "{said}");
    volce_lab::host::pause::pause(&paths, &alice, Some("cleanup"), now()).unwrap();
    let yes = |_: &str, _: &str| volce_lab::host::Decision::Confirmed;
    let remove = |container: &str| {
        volce_lab::install::state::remove_container(&paths, &engine, container, &alice, now(), yes)
    };
    assert_eq!(remove(&unmanaged).unwrap_err().code, volce_lab::vocab::Code::InvalidParameters);
    assert!(!docker(&["ps", "-aq", "--filter", &format!("name=^{unmanaged}$")]).is_empty(), "left alone");
    let done = remove(&labelled).unwrap();
    assert!(done.contains("Removed container"), "{done}");
    assert!(docker(&["ps", "-aq", "--filter", &format!("id={labelled}")]).is_empty(), "removed");
    let trail = volce_lab::host::audit::export(&paths, None, true).unwrap();
    assert!(trail.contains(r#""operation":"state_remove_container""#), "{trail}");
    let _ = Command::new(DOCKER).args(["rm", "-f", &unmanaged]).output();
    let _ = Command::new(DOCKER).args(["image", "rm", &image]).output();
}

/// An empty tar archive (two zero blocks) for `docker import`.
fn empty_tar(dir: &Path) -> PathBuf {
    let path = dir.join("empty.tar");
    std::fs::write(&path, vec![0u8; 1024]).unwrap();
    path
}
