//! End-to-end tests of `DockerCli` against the machine's real Docker engine,
//! with the images and policy that `scripts/test-images` builds. Run as root
//! by scripts/test (`-- --ignored`); each test fails loudly when Docker, root
//! or the test images are missing.
//!
//! They drive the `Engine` trait directly. The controller-level suite can
//! reuse `Lab` (setup, specs, cleanup) and swap `lab.engine` calls for plans.
//! Every test uses its own app name and port and removes every object it
//! created (a Drop guard), so tests run in parallel and repeatedly.

use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use volce_lab::docker::cli::{DockerCli, docker_env, edge_network, http_get};
use volce_lab::docker::{ContainerId, DeploySpec, Engine, EngineError, ImageId, LABEL_APP, Limits};
use volce_lab::exec::{ExecutionStatus, ProcessSpec, run_blocking};
use volce_lab::nginx::render;

const TEST_DIR: &str = "/var/tmp/volce-lab-test";

/// Runs docker for the test itself (setup and assertions, never the code under test).
fn docker(args: &[&str]) -> (bool, String) {
    let mut spec = ProcessSpec::new("/usr/bin/docker", args.iter().copied());
    spec.env = docker_env();
    spec.timeout = Duration::from_secs(60);
    spec.stdout_limit = 4 * 1024 * 1024;
    let outcome = run_blocking(&spec);
    (
        outcome.execution.execution_status == ExecutionStatus::Ok,
        String::from_utf8_lossy(&outcome.stdout).into_owned(),
    )
}

fn docker_ok(args: &[&str]) -> String {
    let (ok, out) = docker(args);
    assert!(ok, "docker {args:?} failed");
    out
}

fn inspect(kind: &str, name: &str) -> Value {
    let out = docker_ok(&["inspect", "--type", kind, name]);
    let mut all: Vec<Value> = serde_json::from_str(&out).expect("docker inspect answers JSON");
    all.remove(0)
}

fn read_json(name: &str) -> Value {
    let path = Path::new(TEST_DIR).join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} is missing: run scripts/test-images (as root) first", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("{} is not JSON", path.display()))
}

/// One test's world: its engine, state dir, app name and port, and the
/// objects to remove when it ends.
struct Lab {
    engine: DockerCli,
    state: PathBuf,
    app: String,
    port: u16,
    policy: Value,
    images: Value,
    extra_containers: Vec<String>,
}

static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

impl Lab {
    fn new(tag: &str) -> Lab {
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
        Lab { engine: DockerCli::new(&state), state, app, port, policy, images, extra_containers: Vec::new() }
    }

    fn app_dir(&self) -> PathBuf {
        self.state.join("apps").join(&self.app)
    }

    fn server_name(&self) -> String {
        format!("{}.test", self.app)
    }

    fn image(&self, name: &str) -> (String, ImageId) {
        let entry = &self.images[name];
        let reference = entry["reference"].as_str().expect("reference in images.json").to_owned();
        let id = ImageId::parse(entry["image_id"].as_str().expect("image_id in images.json")).unwrap();
        (reference, id)
    }

    fn limits(&self) -> Limits {
        let l = &self.policy["limits"];
        Limits {
            memory_bytes: l["memory_mib"].as_u64().unwrap() * 1024 * 1024,
            millicpus: (l["cpus"].as_f64().unwrap() * 1000.0).round() as u32,
            pids: l["pids"].as_u64().unwrap() as u32,
            log_max_size_bytes: l["log_max_size_mib"].as_u64().unwrap() * 1024 * 1024,
            log_max_files: l["log_max_files"].as_u64().unwrap() as u32,
        }
    }

    fn spec(&self) -> DeploySpec {
        let server_name = self.server_name();
        DeploySpec {
            plan_id: uuid::Uuid::new_v4().simple().to_string(),
            app: self.app.clone(),
            app_image: self.policy["catalog"]["web"].as_str().unwrap().to_owned(),
            gateway_image: self.policy["nginx_image"].as_str().unwrap().to_owned(),
            host_port: self.port,
            container_port: 8080,
            nginx_config: render(&server_name, 8080),
            server_name,
            app_dir: self.app_dir(),
            limits: self.limits(),
        }
    }

    /// Every container carrying this app's label, by full id.
    fn labelled_containers(&self) -> Vec<String> {
        let filter = format!("label={LABEL_APP}={}", self.app);
        docker_ok(&["ps", "-aq", "--no-trunc", "--filter", &filter]).lines().map(str::to_owned).collect()
    }

    fn networks(&self) -> Vec<String> {
        let names = docker_ok(&["network", "ls", "--format", "{{.Name}}"]);
        let ours = [format!("vl-{}", self.app), edge_network(&self.app)];
        names.lines().filter(|n| ours.iter().any(|o| o == n)).map(str::to_owned).collect()
    }
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
        if volce_lab::docker::cli::port_free(port) {
            return port;
        }
    }
    panic!("no free port in 18000..18999");
}

/// Polls until `f` holds, for up to 5 s.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out waiting until {what}");
}

fn status(port: u16, host: &str) -> Option<u16> {
    http_get(port, host, Duration::from_secs(2)).map(|r| r.status)
}

fn assert_hardened(c: &Value, user: &str, limits: &Limits) {
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
    assert!(mode != "host" && mode.starts_with("vl-"), "{name}: network mode {mode}");
    assert_eq!(host["PidMode"], "", "{name}: own pid namespace");
    assert_eq!(host["IpcMode"], "private", "{name}: private ipc");
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

#[test]
#[ignore = "real parts: run by scripts/test"]
fn deploy_serves_the_page_through_the_hardened_gateway_only() {
    let lab = Lab::new("deploy");
    let spec = lab.spec();
    let started = Instant::now();
    let deployed = lab.engine.deploy(&spec).expect("deploy succeeds");
    eprintln!("deploy took {:?}", started.elapsed());

    let page = http_get(lab.port, &lab.server_name(), Duration::from_secs(2)).expect("the gateway answers");
    assert_eq!(page.status, 200);
    assert_eq!(page.body, b"volce-lab test app: web\n");
    assert_eq!(status(lab.port, "someone-else.test"), Some(404), "other names never reach the app");

    let app = inspect("container", deployed.app_container.as_str());
    let gateway = inspect("container", deployed.gateway_container.as_str());
    let limits = lab.limits();
    assert_hardened(&app, "1000:1000", &limits);
    assert_hardened(&gateway, "101:101", &limits);
    assert_eq!(app["Name"], format!("/vl-{}-app", lab.app));
    assert_eq!(gateway["Name"], format!("/vl-{}-gateway", lab.app));

    // Mounts: nothing for the app; exactly the read-only nginx.conf for the gateway.
    assert!(app["Mounts"].as_array().unwrap().is_empty(), "the app has no host path");
    let mounts = gateway["Mounts"].as_array().unwrap();
    assert_eq!(mounts.len(), 1);
    assert_eq!(mounts[0]["Type"], "bind");
    assert_eq!(mounts[0]["Source"], lab.app_dir().join("nginx.conf").to_str().unwrap());
    assert_eq!(mounts[0]["Destination"], "/etc/nginx/nginx.conf");
    assert_eq!(mounts[0]["RW"], false);

    // Ports: the app publishes nothing; the gateway only 127.0.0.1:<port>.
    assert!(app["HostConfig"]["PortBindings"].as_object().unwrap().is_empty());
    assert!(app["NetworkSettings"]["Ports"].as_object().unwrap().values().all(Value::is_null));
    assert_eq!(
        gateway["HostConfig"]["PortBindings"],
        serde_json::json!({"8080/tcp": [{"HostIp": "127.0.0.1", "HostPort": lab.port.to_string()}]})
    );

    // Labels.
    for (c, role) in [(&app, "app"), (&gateway, "gateway")] {
        let labels = &c["Config"]["Labels"];
        assert_eq!(labels["io.volce-lab.app"], lab.app);
        assert_eq!(labels["io.volce-lab.role"], role);
        assert_eq!(labels["io.volce-lab.plan"], spec.plan_id);
    }

    // Networks: the app only on the internal vl-<app> (alias `app`); the
    // gateway there and on its edge network, which carries the port.
    let internal = format!("vl-{}", lab.app);
    let edge = edge_network(&lab.app);
    let app_nets = app["NetworkSettings"]["Networks"].as_object().unwrap();
    assert_eq!(app_nets.keys().collect::<Vec<_>>(), [&internal]);
    assert!(app_nets[&internal]["Aliases"].as_array().unwrap().contains(&Value::from("app")));
    let mut gw_nets: Vec<_> =
        gateway["NetworkSettings"]["Networks"].as_object().unwrap().keys().cloned().collect();
    gw_nets.sort();
    assert_eq!(gw_nets, [internal.clone(), edge.clone()]);
    assert_eq!(inspect("network", &internal)["Internal"], true);
    assert_eq!(inspect("network", &edge)["Internal"], false);

    // The managed file: root-owned 0644 in a 0755 directory.
    let meta = std::fs::metadata(lab.app_dir().join("nginx.conf")).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o7777), (0, 0o644));
    assert_eq!(std::fs::read_to_string(lab.app_dir().join("nginx.conf")).unwrap(), spec.nginx_config);

    // The snapshot sees both containers with our labels and the one port.
    let snapshot = lab.engine.snapshot().unwrap();
    let ours: Vec<_> = snapshot.containers.iter().filter(|c| c.app() == Some(lab.app.as_str())).collect();
    assert_eq!(ours.len(), 2);
    let gw = ours.iter().find(|c| c.role() == Some("gateway")).unwrap();
    assert_eq!(gw.id, deployed.gateway_container);
    assert_eq!(
        (gw.ports.len(), gw.ports[0].host_ip.as_str(), gw.ports[0].host_port),
        (1, "127.0.0.1", lab.port)
    );
    assert!(ours.iter().find(|c| c.role() == Some("app")).unwrap().ports.is_empty());
    assert!(snapshot.networks.contains(&internal) && snapshot.networks.contains(&edge));
    assert!(
        snapshot.images.contains(&lab.image("web").1) && snapshot.images.contains(&lab.image("gateway").1)
    );
    assert!(!lab.engine.host_port_free(lab.port), "the published port is taken");
    let capacity = lab.engine.capacity().unwrap();
    assert!(capacity.free_memory_bytes > 0 && capacity.free_disk_bytes > 0);
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn nginx_config_serves_the_new_name_and_a_rejected_config_is_rolled_back() {
    let lab = Lab::new("nginx");
    let spec = lab.spec();
    let deployed = lab.engine.deploy(&spec).expect("deploy succeeds");
    let gateway = &deployed.gateway_container;
    let path = lab.app_dir().join("nginx.conf");
    let inode = std::fs::metadata(&path).unwrap().ino();

    let new_name = format!("renamed-{}.test", lab.app);
    let new_config = render(&new_name, 8080);
    lab.engine
        .update_nginx(&lab.app_dir(), gateway, &spec.nginx_config, &new_config)
        .expect("update succeeds");
    eventually("the new name is served", || status(lab.port, &new_name) == Some(200));
    assert_eq!(status(lab.port, &lab.server_name()), Some(404), "the old name is gone");
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode, "written in place");

    // Below the validation layer: bytes nginx refuses.
    let broken = "events {}\nhttp { this is not nginx }\n";
    assert_eq!(
        lab.engine.update_nginx(&lab.app_dir(), gateway, &new_config, broken),
        Err(EngineError::NginxRejected)
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), new_config, "old bytes restored");
    assert_eq!(status(lab.port, &new_name), Some(200), "still serving the old config");
    assert_eq!(inspect("container", gateway.as_str())["State"]["Running"], true);

    // A file that differs from the record is refused and left alone.
    assert_eq!(
        lab.engine.update_nginx(&lab.app_dir(), gateway, &spec.nginx_config, broken),
        Err(EngineError::ManagedFileChanged)
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), new_config);
    let backups = std::fs::read_dir(lab.app_dir())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".bak"));
    assert_eq!(backups.count(), 2, "one backup per attempted update");
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn deploy_whose_health_check_fails_removes_what_it_created() {
    let lab = Lab::new("health");
    let mut spec = lab.spec();
    // nginx -t passes (`app` resolves) but nothing listens on that port: 502.
    spec.container_port = 9;
    spec.nginx_config = render(&spec.server_name, 9);
    let unrelated =
        docker_ok(&["network", "create", "--label", "volce-lab-test=1", &format!("t-keep-{}", lab.app)]);
    let started = Instant::now();
    assert_eq!(lab.engine.deploy(&spec), Err(EngineError::HealthCheckFailed));
    eprintln!("failed deploy took {:?}", started.elapsed());
    assert!(lab.labelled_containers().is_empty(), "new containers removed");
    assert!(lab.networks().is_empty(), "new networks removed");
    assert_eq!(
        std::fs::read_to_string(lab.app_dir().join("nginx.conf")).unwrap(),
        spec.nginx_config,
        "evidence kept"
    );
    assert!(lab.engine.host_port_free(lab.port));
    assert!(docker(&["network", "inspect", unrelated.trim()]).0, "nothing else removed");
    docker_ok(&["network", "rm", unrelated.trim()]);
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn stop_stops_exactly_the_given_containers_with_restart_no() {
    let mut lab = Lab::new("stop");
    let deployed = lab.engine.deploy(&lab.spec()).expect("deploy succeeds");
    let (web, _) = lab.image("web");
    let unmanaged_name = format!("t-unmanaged-{}", lab.app);
    let unmanaged = docker_ok(&[
        "run",
        "-d",
        "--init",
        "--restart",
        "unless-stopped",
        "--user",
        "1000:1000",
        "--name",
        &unmanaged_name,
        "--network",
        "none",
        &web,
    ]);
    lab.extra_containers.push(unmanaged.trim().to_owned());

    let started = Instant::now();
    lab.engine
        .stop(&[deployed.app_container.clone(), deployed.gateway_container.clone()])
        .expect("stop succeeds");
    eprintln!("stop took {:?}", started.elapsed());
    for id in [&deployed.app_container, &deployed.gateway_container] {
        let c = inspect("container", id.as_str());
        assert_eq!(c["State"]["Status"], "exited", "{}", c["Name"]);
        assert_eq!(c["HostConfig"]["RestartPolicy"]["Name"], "no", "{}", c["Name"]);
    }
    let other = inspect("container", &unmanaged_name);
    assert_eq!(other["State"]["Status"], "running", "the unmanaged container is untouched");
    assert_eq!(other["HostConfig"]["RestartPolicy"]["Name"], "unless-stopped");
    assert_eq!(status(lab.port, &lab.server_name()), None, "nothing answers any more");
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn remove_image_is_refused_by_docker_while_a_stopped_container_uses_it() {
    let mut lab = Lab::new("rmi");
    // The spare image belongs to this test alone (see scripts/test-images).
    let (spare, spare_id) = lab.image("spare");
    docker_ok(&["pull", "--quiet", &spare]);
    let holder =
        docker_ok(&["create", "--name", &format!("t-holder-{}", lab.app), "--network", "none", &spare]);
    let holder = holder.trim().to_owned();
    lab.extra_containers.push(holder.clone());
    assert_eq!(inspect("container", &holder)["State"]["Status"], "created");

    match lab.engine.remove_image(&spare_id) {
        Err(EngineError::Call { step: "remove image", execution }) => {
            assert_eq!(execution.exit_code, Some(1), "docker's own refusal")
        }
        other => panic!("expected docker to refuse, got {other:?}"),
    }
    assert!(lab.engine.snapshot().unwrap().images.contains(&spare_id), "the image is still there");
    assert!(docker(&["container", "inspect", &holder]).0, "the container was not removed for it");

    docker_ok(&["rm", &holder]);
    lab.engine.remove_image(&spare_id).expect("removal allowed once unused");
    assert!(!lab.engine.snapshot().unwrap().images.contains(&spare_id));
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn deploy_on_a_port_held_by_a_foreign_listener_is_refused_and_the_listener_untouched() {
    let lab = Lab::new("port");
    let listener = TcpListener::bind(("127.0.0.1", lab.port)).unwrap();
    assert!(!lab.engine.host_port_free(lab.port));
    assert_eq!(
        lab.engine.deploy(&lab.spec()),
        Err(EngineError::Host { step: "check that the host port is free" })
    );
    assert!(lab.labelled_containers().is_empty());
    assert!(lab.networks().is_empty());
    assert!(!lab.app_dir().exists(), "refused before anything was written");
    // The listener still owns the port and accepts.
    let client = std::net::TcpStream::connect(("127.0.0.1", lab.port)).unwrap();
    let (_, peer) = listener.accept().unwrap();
    assert_eq!(peer, client.local_addr().unwrap());
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn snapshot_digest_is_stable_and_changes_when_a_container_appears() {
    let mut lab = Lab::new("snap");
    let first = lab.engine.snapshot().unwrap();
    let second = lab.engine.snapshot().unwrap();
    // Other tests may run in parallel: compare only the digest of a
    // snapshot against itself and the presence of our own container.
    assert_eq!(first.digest(), first.clone().normalize().digest());
    assert!(second.containers.windows(2).all(|w| w[0] <= w[1]), "sorted");
    let (web, web_id) = lab.image("web");
    docker_ok(&["pull", "--quiet", &web]);
    let name = format!("t-drift-{}", lab.app);
    let id = docker_ok(&["create", "--name", &name, "--network", "none", &web]).trim().to_owned();
    lab.extra_containers.push(id.clone());
    let third = lab.engine.snapshot().unwrap();
    let seen = third
        .containers
        .iter()
        .find(|c| c.id == ContainerId::parse(&id).unwrap())
        .expect("new container seen");
    assert_eq!(
        (seen.name.as_str(), &seen.image_id, seen.state.as_str()),
        (name.as_str(), &web_id, "created")
    );
    assert!(seen.labels.is_empty(), "an unmanaged container carries none of our labels");
    assert_ne!(third.digest(), first.digest());
}
