//! What an app container can reach and write, on the machine's real
//! engine, with apps deployed by the real controller (issue 13):
//! - a host listener on 0.0.0.0 (the test's own, on a random port, open
//!   only while the test runs) answers none of the host's bridge addresses
//!   from an app container: its own bridge's gateway address, docker0's,
//!   its edge bridge's, another app's bridge's; the gateway still reaches
//!   the app. A container on a plain `--internal` network (what volce-lab
//!   created before) reaches the same listener: the probe can tell;
//! - an image that declares a `VOLUME` is refused after its pull (nothing
//!   created, no volume made) and then at plan time, code
//!   `image_declares_volumes`;
//! - the only places an app container can write are `/tmp` (16 MiB),
//!   its private `/dev/shm` (8 MiB) and POSIX message queues.
//!
//! Only addresses the engine gave bridges this test's apps and docker0 are
//! probed; nothing else on the host or the network is touched.

use std::io::Write as _;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;

/// A listener of this test on 0.0.0.0 (every host address) that answers
/// each connection with a token and counts them. Closed when dropped.
struct HostListener {
    port: u16,
    token: String,
    accepted: Arc<AtomicUsize>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HostListener {
    fn start() -> HostListener {
        let listener = TcpListener::bind(("0.0.0.0", 0)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let token = format!("volce-confine-{}", uuid::Uuid::new_v4().simple());
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let (token, accepted, stop) = (token.clone(), accepted.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept() {
                        Ok((mut stream, _)) => {
                            accepted.fetch_add(1, Ordering::SeqCst);
                            let _ = stream.write_all(format!("{token}\n").as_bytes());
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })
        };
        HostListener { port, token, accepted, stop, thread: Some(thread) }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for HostListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Whether `container` gets the listener's token from `address`:`port`
/// (busybox nc, 2 s timeout), run inside the container.
fn reaches(container: &str, address: &str, listener: &HostListener) -> bool {
    let port = listener.port.to_string();
    let (ok, out) = docker(&["exec", container, "/bin/busybox", "nc", "-w", "2", address, &port]);
    ok && out.contains(&listener.token)
}

/// The gateway address the engine's IPAM gave a network.
fn gateway_address(network: &str) -> String {
    let config = &inspect("network", network)["IPAM"]["Config"];
    let address =
        config[0]["Gateway"].as_str().unwrap_or_else(|| panic!("{network} has a gateway: {config}"));
    address.to_owned()
}

/// docker0's own address (the default network's IPAM lists no gateway).
fn docker0_address() -> String {
    let addresses = host_ipv4_addresses();
    let line =
        addresses.lines().find(|l| l.split_whitespace().nth(1) == Some("docker0")).expect("docker0 exists");
    let cidr = line.split_whitespace().skip_while(|w| *w != "inet").nth(1).expect("docker0 has an address");
    cidr.split('/').next().unwrap().to_owned()
}

/// A network of this test alone, removed on drop (after its containers).
struct TestNetwork {
    name: String,
    containers: Vec<String>,
}

impl Drop for TestNetwork {
    fn drop(&mut self) {
        for container in &self.containers {
            let _ = docker(&["rm", "-f", container]);
        }
        let _ = docker(&["network", "rm", &self.name]);
    }
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn an_app_container_reaches_no_host_address_and_its_gateway_still_reaches_it() {
    let _turn = take_turn();
    let host = Host::new("cnet");
    let other = Host::new("cnetb");
    let app = host.deploy("web")[0].clone();
    other.deploy("web");
    let listener = HostListener::start();

    let names = host.lab.names();
    let probes = [
        ("its own bridge's gateway address", gateway_address(&names.network)),
        ("docker0's", docker0_address()),
        ("its edge bridge's", gateway_address(&names.edge_network)),
        ("another app's bridge's", gateway_address(&other.lab.names().network)),
        ("another app's edge bridge's", gateway_address(&other.lab.names().edge_network)),
    ];
    // The control: a container on a plain --internal network, as volce-lab
    // made them before, reaches the listener through its own bridge.
    let mut plain = TestNetwork { name: format!("t-confine-plain-{}", host.lab.app), containers: vec![] };
    docker_ok(&["network", "create", "--internal", &plain.name]);
    let (web, _) = host.lab.image("web");
    let control = format!("t-confine-control-{}", host.lab.app);
    plain.containers.push(control.clone());
    docker_ok(&["run", "-d", "--name", &control, "--user", "1000:1000", "--network", &plain.name, &web]);
    let plain_gateway = gateway_address(&plain.name);
    assert!(
        reaches(&control, &plain_gateway, &listener),
        "the control reaches {plain_gateway}: the probe works"
    );
    let after_control = listener.accepted();
    assert!(after_control >= 1);

    let started = std::time::Instant::now();
    for (what, address) in &probes {
        assert!(
            !reaches(&app, address, &listener),
            "the app container reached the host through {what} {address}"
        );
    }
    eprintln!(
        "{} host addresses probed from the app container in {:?}, none answered: {probes:?}",
        probes.len(),
        started.elapsed()
    );
    assert_eq!(listener.accepted(), after_control, "the listener saw no connection from the app container");
    // The app's own bridge has no host address at all.
    let addresses = host_ipv4_addresses();
    assert!(
        !addresses.contains(&format!(" {}/", probes[0].1)),
        "no host address on the app network: {addresses}"
    );

    // The gateway still reaches the app (the page is served through it),
    // and the app reaches the gateway on the app network: containers on it
    // still talk to each other both ways.
    assert_eq!(status(host.lab.port, &host.lab.server_name()), Some(200), "served through the gateway");
    let gateway = inspect("container", &names.gateway_container);
    let gateway_ip = gateway["NetworkSettings"]["Networks"][&names.network]["IPAddress"].as_str().unwrap();
    let request = format!("printf 'GET / HTTP/1.0\\r\\n\\r\\n' | /bin/busybox nc -w 2 {gateway_ip} 8080");
    let reply = docker_ok(&["exec", &app, "/bin/busybox", "sh", "-c", &request]);
    assert!(reply.starts_with("HTTP/1.1 404"), "nginx answers an unknown Host with 404: {reply}");
}

/// The host's IPv4 addresses, one line each, as `ip -4 -o addr` lists them.
fn host_ipv4_addresses() -> String {
    let mut spec = volce_lab::exec::ProcessSpec::new("/usr/sbin/ip", ["-4", "-o", "addr"]);
    spec.timeout = Duration::from_secs(5);
    let outcome = volce_lab::exec::run_blocking(&spec);
    assert_eq!(
        outcome.execution.execution_status,
        volce_lab::exec::ExecutionStatus::Ok,
        "ip -4 -o addr runs"
    );
    String::from_utf8_lossy(&outcome.stdout).into_owned()
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn an_image_that_declares_a_volume_is_refused_after_its_pull_and_then_at_plan_time() {
    let _turn = take_turn();
    let mut lab = Lab::new("cvol");
    let (reference, image) = committed_web_image(&mut lab, "web-volume-test", "VOLUME /data");
    let policy_dir = tempfile::tempdir().unwrap();
    let mut policy = lab.policy.clone();
    policy["catalog"]["vol"] = json!(reference);
    let policy_path = policy_dir.path().join("policy.json");
    std::fs::write(&policy_path, policy.to_string()).unwrap();
    let host = Host::with_policy(lab, policy_path);
    let volumes_before = docker_ok(&["volume", "ls", "-q"]);

    // Not in the engine yet: the plan is accepted, the deploy pulls the
    // image, reads its VOLUME and creates nothing.
    let id = host.planned("deploy", host.deploy_params("vol", 8080, &host.lab.server_name()));
    let failed = host.execute(&id);
    assert_eq!(failed["status"], "rejected", "{failed}");
    assert_eq!(failed["code"], "image_declares_volumes", "{failed}");
    let message = failed["message"].as_str().unwrap();
    assert!(message.contains("`/data`") && message.contains("rebuild the image without VOLUME"), "{message}");
    assert_eq!(docker_lab::plan_objects(&id), Vec::<String>::new(), "nothing carries the plan's label");
    assert!(host.lab.labelled_containers().is_empty() && host.lab.networks().is_empty());
    assert!(!host.lab.app_dir().exists(), "no app directory");
    let stored = host.plan_json(&id);
    assert_eq!((stored["state"].as_str(), stored["outcome"].as_str()), (Some("failed"), Some("rolled_back")));
    assert_eq!(docker_ok(&["volume", "ls", "-q"]), volumes_before, "no volume was created");

    // Now it is local: refused when the plan is made, nothing recorded.
    assert!(docker(&["image", "inspect", image.as_str()]).0, "pulled by the failed deploy");
    let refused = host.plan("deploy", host.deploy_params("vol", 8080, &host.lab.server_name()));
    assert_eq!(refused["code"], "image_declares_volumes", "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("catalog image `vol`"), "{refused}");
    // The catalog's other images deploy as before.
    host.deploy("web");
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn an_app_container_writes_only_tmp_a_small_private_shm_and_message_queues() {
    let _turn = take_turn();
    let host = Host::new("cwrite");
    let app = host.deploy("web")[0].clone();
    let container = inspect("container", &app);
    assert_eq!(container["HostConfig"]["IpcMode"], "private");
    assert_eq!(container["HostConfig"]["ShmSize"], 8 * 1024 * 1024);
    assert!(
        container["Mounts"].as_array().is_none_or(Vec::is_empty),
        "no volume, no bind: {}",
        container["Mounts"]
    );

    // Every directory a process could try, as the app's own user.
    let script = "for d in / /www /etc /bin /dev /dev/shm /dev/mqueue /dev/pts /tmp /run /var /proc/self /sys; do \
                  if /bin/busybox touch $d/.vl-probe 2>/dev/null; then echo $d; /bin/busybox rm -f $d/.vl-probe; fi; \
                  done; for f in /etc/hosts /etc/resolv.conf /etc/hostname /etc/passwd; do \
                  if (echo x >> $f) 2>/dev/null; then echo $f; fi; done";
    let writable = docker_ok(&["exec", &app, "/bin/busybox", "sh", "-c", script]);
    let writable: Vec<&str> = writable.lines().collect();
    assert_eq!(writable, ["/dev/shm", "/dev/mqueue", "/tmp"], "the only writable places");

    // Bounded: 9 MiB do not fit in /dev/shm, nor 17 MiB in /tmp.
    for (path, mib) in [("/dev/shm", "9"), ("/tmp", "17")] {
        let fill = format!("of={path}/fill");
        let (ok, _) = docker(&[
            "exec",
            &app,
            "/bin/busybox",
            "dd",
            "if=/dev/zero",
            &fill,
            "bs=1048576",
            &format!("count={mib}"),
        ]);
        assert!(!ok, "{mib} MiB must not fit in {path}");
        docker_ok(&["exec", &app, "/bin/busybox", "rm", "-f", &format!("{path}/fill")]);
    }
    assert_eq!(status(host.lab.port, &host.lab.server_name()), Some(200), "still serving");
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn doctor_reads_this_engine_and_names_an_app_network_made_the_old_way() {
    use volce_lab::install::doctor::Level;
    use volce_lab::install::doctor::engine::{
        app_network_findings_for_tests, engine_findings_for_tests, major_version,
    };
    let _turn = take_turn();
    let mut host = Host::new("cdoc");
    host.deploy("web");
    // An app as an older volce-lab left it: its network plain --internal,
    // carrying its label, and a record naming it.
    let old_app = format!("{}-old", host.lab.app);
    let label = format!("{}={old_app}", volce_lab::vocab::LABEL_APP);
    let old = TestNetwork { name: format!("vl-{old_app}"), containers: vec![] };
    docker_ok(&["network", "create", "--internal", "--label", &label, &old.name]);
    let (web, _) = host.lab.image("web");
    let stand_in = format!("t-confine-old-{}", host.lab.app);
    host.lab.extra_containers.push(stand_in.clone());
    let id = docker_ok(&["create", "--name", &stand_in, "--network", "none", &web]).trim().to_owned();
    let plan = host.planned("stop", json!({"app": host.lab.app}));
    record_app(&host, &old_app, &id, &plan, host.lab.port + 1);

    let networks = volce_lab::install::doctor::read_app_networks(&host.lab.state).unwrap();
    let names: Vec<&str> = networks.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names.len(), 3, "both of today's app and the old app's one: {names:?}");
    let findings = app_network_findings_for_tests(Ok(networks));
    let warned: Vec<String> =
        findings.iter().filter(|f| f.level == Level::Warn).map(|f| f.to_string()).collect();
    assert_eq!(warned.len(), 1, "{findings:#?}");
    assert!(
        warned[0]
            .starts_with(&format!("WARN app {old_app}: deployed by an older volce-lab: vl-{old_app} lacks"))
    );
    assert!(warned[0].contains("remove_app"), "{}", warned[0]);
    assert!(!warned[0].contains(&format!("vl-{} ", host.lab.app)), "today's app is not named");

    // This engine's own facts, read the way doctor reads them.
    let facts = volce_lab::install::doctor::read_engine_facts();
    assert!(facts.warnings.is_ok(), "docker info answers: {facts:?}");
    assert!(facts.daemon_args.is_some(), "dockerd's command line is found through /var/run/docker.pid");
    let version = docker_ok(&["version", "--format", "{{.Server.Version}}"]).trim().to_owned();
    let findings = engine_findings_for_tests(&version, Some(&facts));
    eprintln!("doctor on this engine:\n{}", findings.iter().map(|f| format!("{f}\n")).collect::<String>());
    let level = |subject: &str| findings.iter().find(|f| f.subject == subject).map(|f| f.level);
    let old_engine = major_version(&version).is_none_or(|major| major < 28);
    assert_eq!(level("docker version"), Some(if old_engine { Level::Warn } else { Level::Ok }));
    assert_eq!(level("docker daemon"), None, "everything it needs could be read");
    assert!(level("docker api").is_some() && level("docker iptables").is_some());
}
