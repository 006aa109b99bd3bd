//! End-to-end tests of `DockerClient` against the machine's real Docker engine,
//! with the images and policy that `scripts/test-images` builds. Run as root
//! by scripts/test (`-- --ignored`); each test fails loudly when Docker, root
//! or the test images are missing.
//!
//! They drive the `Engine` trait directly. The controller-level suite can
//! reuse `Lab` (setup, specs, cleanup) and swap `lab.engine` calls for plans.
//! Every test uses its own app name and port and removes every object it
//! created (a Drop guard), so tests run in parallel and repeatedly.

use crate::support::docker_lab;

use std::net::TcpListener;
use std::os::unix::fs::MetadataExt as _;
use std::time::{Duration, Instant};

use docker_lab::{Lab, assert_hardened, docker, docker_ok, docker_stdin, eventually, inspect, status};
use serde_json::Value;
use volce_lab::docker::host_probe::http_get;
use volce_lab::docker::{Engine as _, EngineError, NoProgress};
use volce_lab::nginx::{AccessLog, render};
use volce_lab::vocab::{ContainerId, ImageHolds, ImageId, ImageRef};

/// A progress sink that keeps the steps it is told.
#[derive(Default)]
struct Steps(std::cell::RefCell<Vec<volce_lab::vocab::Step>>);

impl volce_lab::docker::ProgressSink for Steps {
    fn step(&self, step: volce_lab::vocab::Step) {
        self.0.borrow_mut().push(step);
    }
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn deploy_serves_the_page_through_the_hardened_gateway_only() {
    let lab = Lab::new("deploy");
    let spec = lab.spec();
    let started = Instant::now();
    let steps = Steps::default();
    let deployed = lab.engine.deploy(&spec, &steps).expect("deploy succeeds");
    eprintln!("deploy took {:?}", started.elapsed());
    use volce_lab::vocab::Step::*;
    let reported = steps.0.into_inner();
    assert_eq!(
        reported,
        [Pulled, Network, AppStarted, GatewayTested, HealthCheck],
        "the real deploy reports its steps"
    );

    let page = http_get(lab.port, &lab.server_name(), &Default::default(), Duration::from_secs(2))
        .expect("the gateway answers");
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
        assert_eq!(labels["io.volce-lab.plan"], spec.plan_id.as_str());
    }

    // Networks: the app only on the internal vl-<app> (alias `app`); the
    // gateway there and on its edge network, which carries the port.
    let internal = format!("vl-{}", lab.app);
    let edge = lab.names().edge_network;
    let app_nets = app["NetworkSettings"]["Networks"].as_object().unwrap();
    assert_eq!(app_nets.keys().collect::<Vec<_>>(), [&internal]);
    assert!(app_nets[&internal]["Aliases"].as_array().unwrap().contains(&Value::from("app")));
    let mut gw_nets: Vec<_> =
        gateway["NetworkSettings"]["Networks"].as_object().unwrap().keys().cloned().collect();
    gw_nets.sort();
    assert_eq!(gw_nets, [internal.clone(), edge.clone()]);
    assert_eq!(inspect("network", &internal)["Internal"], true);
    assert_eq!(inspect("network", &internal)["Options"]["com.docker.network.bridge.inhibit_ipv4"], "true");
    assert_eq!(inspect("network", &edge)["Internal"], false);
    assert_eq!(
        inspect("network", &edge)["Options"]["com.docker.network.bridge.enable_ip_masquerade"],
        "false"
    );

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
    let deployed = lab.engine.deploy(&spec, &NoProgress).expect("deploy succeeds");
    let gateway = &deployed.gateway_container;
    let path = lab.app_dir().join("nginx.conf");
    let inode = std::fs::metadata(&path).unwrap().ino();

    let new_name = format!("renamed-{}.test", lab.app);
    let new_config = render(&new_name, 8080, AccessLog::Off);
    lab.engine
        .update_nginx(&lab.app_dir(), gateway, &spec.nginx_config, &new_config)
        .expect("update succeeds");
    eventually("the new name is served", || status(lab.port, &new_name) == Some(200));
    // Old workers finish their graceful exit a moment after the new ones answer.
    eventually("the old name is gone (404)", || status(lab.port, &lab.server_name()) == Some(404));
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode, "written in place");

    // Below the validation layer: bytes nginx refuses.
    let broken = "events {}\nhttp { this is not nginx }\n";
    assert_eq!(
        lab.engine.update_nginx(&lab.app_dir(), gateway, &new_config, broken),
        Err(EngineError::NginxRejectedAndRestored)
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
    spec.nginx_config = render(spec.server_name.as_str(), 9, AccessLog::Off);
    let unrelated =
        docker_ok(&["network", "create", "--label", "volce-lab-test=1", &format!("t-keep-{}", lab.app)]);
    let started = Instant::now();
    // The app's last lines were read before its removal: the web image
    // prints nothing, so they are read and empty.
    let deployed = lab.engine.deploy(&spec, &NoProgress);
    let Err(EngineError::RolledBack { cause, app_log: Some(app_log) }) = &deployed else {
        panic!("the rollback is verified, with the app's log: {deployed:?}");
    };
    assert_eq!(**cause, EngineError::HealthCheckFailed);
    assert!(app_log.read && app_log.lines.is_empty(), "{app_log:?}");
    eprintln!("failed deploy took {:?}", started.elapsed());
    assert!(docker_lab::plan_objects(&spec.plan_id.to_string()).is_empty(), "nothing has the plan's label");
    assert!(lab.labelled_containers().is_empty(), "new containers removed");
    assert!(lab.networks().is_empty(), "new networks removed");
    assert!(!lab.app_dir().exists(), "the app directory it made is removed");
    assert!(lab.engine.host_port_free(lab.port));
    assert!(docker(&["network", "inspect", unrelated.trim()]).0, "nothing else removed");
    docker_ok(&["network", "rm", unrelated.trim()]);
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn stop_stops_exactly_the_given_containers_with_restart_no() {
    let mut lab = Lab::new("stop");
    let deployed = lab.engine.deploy(&lab.spec(), &NoProgress).expect("deploy succeeds");
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

/// Tried: each thing that makes docker refuse `image rm` by id without
/// force: a stopped container using the image, an image committed from it
/// (a child), two extra tags. Each is reported as a hold, and the engine's
/// own removal is a verified refusal (`Refused`: the image is still there
/// with the same references), never a silent partial change.
#[test]
#[ignore = "real parts: run by scripts/test"]
fn remove_image_is_refused_by_docker_while_anything_holds_it_and_the_refusal_is_verified() {
    let mut lab = Lab::new("rmi");
    // An image of this test alone: an empty root filesystem imported with a
    // unique message gets a unique id, so parallel runs never share it.
    let (ok, out) = docker_stdin(
        &["import", "--change", r#"CMD ["/none"]"#, "--message", &format!("volce-lab test {}", lab.app), "-"],
        vec![0u8; 1024],
    );
    assert!(ok, "docker import of an empty tar");
    let image = ImageId::parse(out.trim()).expect("docker import prints the new image id");
    lab.extra_images.push(image.to_string());
    let free = ImageHolds { children: vec![], tags: 0, digests: 0, references_removable: true };
    assert_eq!(lab.engine.image_holds(&image).unwrap(), Some(free));
    let refused = |lab: &Lab, what: &str| {
        assert_eq!(
            lab.engine.remove_image(&image),
            Err(EngineError::Refused { step: "remove image" }),
            "{what}: docker's refusal, verified"
        );
        // Asked by id: `image ls` without -a hides an untagged image that
        // others are built on.
        assert!(docker(&["image", "inspect", image.as_str()]).0, "{what}: the image is still there");
    };

    // A stopped container uses it.
    let holder = docker_ok(&[
        "create",
        "--name",
        &format!("t-holder-{}", lab.app),
        "--network",
        "none",
        image.as_str(),
    ]);
    let holder = holder.trim().to_owned();
    lab.extra_containers.push(holder.clone());
    assert_eq!(inspect("container", &holder)["State"]["Status"], "created");
    refused(&lab, "a stopped container");
    assert!(docker(&["container", "inspect", &holder]).0, "the container was not removed for it");

    // An image committed from that container is built on it.
    let child = docker_ok(&["commit", "--change", "LABEL io.volce-lab.test=child", &holder]);
    let child = ImageId::parse(child.trim()).expect("docker commit prints the new image id");
    // Removed before its parent when the lab drops.
    lab.extra_images.insert(0, child.to_string());
    docker_ok(&["rm", &holder]);
    let holds = lab.engine.image_holds(&image).unwrap().unwrap();
    assert_eq!(holds.children.as_slice(), std::slice::from_ref(&child), "the committed image is a child");
    refused(&lab, "a child image");
    assert!(docker(&["image", "inspect", child.as_str()]).0, "the child is untouched");
    // --no-prune: removing a child also removes its untagged parents.
    docker_ok(&["image", "rm", "--no-prune", child.as_str()]);

    // Two tags: docker does not drop them by id without force.
    let tags = ["a", "b"].map(|t| format!("volce-lab-test-{}:{t}", lab.app));
    for tag in &tags {
        docker_ok(&["tag", image.as_str(), tag]);
        lab.extra_images.insert(0, tag.clone());
    }
    let holds = lab.engine.image_holds(&image).unwrap().unwrap();
    assert_eq!((holds.tags, holds.digests, holds.references_removable), (2, 0, false));
    refused(&lab, "two tags");
    let kept = docker_ok(&["image", "inspect", "--format", "{{len .RepoTags}}", image.as_str()]);
    assert_eq!(kept.trim(), "2", "both tags are still there");
    // One tag is a single reference: docker removes it by id, tag and all.
    docker_ok(&["image", "rm", &tags[1]]);
    let holds = lab.engine.image_holds(&image).unwrap().unwrap();
    assert_eq!((holds.tags, holds.references_removable), (1, true));

    lab.engine.remove_image(&image).expect("removal allowed once nothing holds it");
    assert!(!lab.engine.snapshot().unwrap().images.contains(&image));
    assert_eq!(lab.engine.image_holds(&image).unwrap(), None, "gone");
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn deploy_on_a_port_held_by_a_foreign_listener_is_refused_and_the_listener_untouched() {
    let lab = Lab::new("port");
    let listener = TcpListener::bind(("127.0.0.1", lab.port)).unwrap();
    assert!(!lab.engine.host_port_free(lab.port));
    assert_eq!(lab.engine.deploy(&lab.spec(), &NoProgress), Err(EngineError::PortTaken { port: lab.port }));
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

/// The IP address of a container on one network.
fn ip_on(container: &Value, network: &str) -> String {
    let ip = container["NetworkSettings"]["Networks"][network]["IPAddress"].as_str().unwrap();
    assert!(!ip.is_empty(), "{} has an address on {network}", container["Name"]);
    ip.to_owned()
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn the_app_is_reachable_from_the_gateway_alone_and_has_no_way_out() {
    let mut lab = Lab::new("isolate");
    let deployed = lab.engine.deploy(&lab.spec(), &NoProgress).expect("deploy succeeds");
    let app = inspect("container", deployed.app_container.as_str());
    let gateway = inspect("container", deployed.gateway_container.as_str());
    let internal = format!("vl-{}", lab.app);
    let app_url = format!("http://{}:8080/", ip_on(&app, &internal));
    let (web, _) = lab.image("web");
    // busybox wget's own -T crashes (Debian 1.35); `timeout` bounds it instead.
    let probe = |network: &str, url: &str| {
        let name = format!("t-probe-{}-{}", lab.app, &uuid::Uuid::new_v4().simple().to_string()[..6]);
        let (ok, out) = docker(&[
            "run",
            "--rm",
            "--name",
            &name,
            // Not pid 1: `timeout` could not kill a pid-1 wget.
            "--init",
            "--user",
            "1000:1000",
            "--network",
            network,
            &web,
            "/bin/busybox",
            "timeout",
            "2",
            "/bin/busybox",
            "wget",
            "-q",
            "-O",
            "-",
            url,
        ]);
        (ok, out, name)
    };

    // Control: a container on the app's own network does reach it, so the
    // probe itself works.
    let (ok, out, name) = probe(&internal, "http://app:8080/");
    lab.extra_containers.push(name);
    assert!(
        ok && out.contains("volce-lab test app"),
        "control probe on {internal} reaches the app: {ok} {out:?}"
    );
    // A container on Docker's default bridge does not.
    let (ok, _, name) = probe("bridge", &app_url);
    lab.extra_containers.push(name);
    assert!(!ok, "a container on the default bridge must not reach the app at {app_url}");

    // From inside the app: no route to the gateway's published side nor to
    // the default bridge's host address.
    let edge_url = format!("http://{}:8080/", ip_on(&gateway, &lab.names().edge_network));
    // The host's own address on the edge bridge.
    let edge_net = inspect("network", &lab.names().edge_network);
    let host_url = format!("http://{}/", edge_net["IPAM"]["Config"][0]["Gateway"].as_str().unwrap());
    for url in [&edge_url, &host_url] {
        let (ok, _) = docker(&[
            "exec",
            deployed.app_container.as_str(),
            "/bin/busybox",
            "timeout",
            "2",
            "/bin/busybox",
            "wget",
            "-q",
            "-O",
            "-",
            url,
        ]);
        assert!(!ok, "the app must have no way out to {url}");
    }
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn a_squatter_on_our_container_name_fails_the_deploy_and_is_left_alone() {
    let mut lab = Lab::new("squat");
    let (web, _) = lab.image("web");
    docker_ok(&["pull", "--quiet", &web]);
    let squatter_name = format!("vl-{}-gateway", lab.app);
    let squatter =
        docker_ok(&["create", "--name", &squatter_name, "--network", "none", &web]).trim().to_owned();
    lab.extra_containers.push(squatter.clone());

    match lab.engine.deploy(&lab.spec(), &NoProgress) {
        // The squatter carries no label of the plan: the rollback is verified.
        Err(EngineError::RolledBack { cause, .. })
            if matches!(*cause, EngineError::Call { step: "create gateway container", .. }) => {}
        other => panic!("expected the gateway create to fail on the name, rolled back, got {other:?}"),
    }
    assert!(lab.labelled_containers().is_empty(), "what the deploy created is gone");
    assert!(lab.networks().is_empty());
    assert!(!lab.app_dir().exists(), "the app directory the deploy made is gone");
    assert_eq!(inspect("container", &squatter_name)["Id"], squatter, "the squatter is untouched");
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn a_digest_the_registry_does_not_have_fails_at_the_pull_and_creates_nothing() {
    let lab = Lab::new("pull");
    let mut spec = lab.spec();
    spec.app_image =
        ImageRef::parse(&format!("127.0.0.1:15000/volce-lab/web@sha256:{}", "0".repeat(64))).unwrap();
    match lab.engine.deploy(&spec, &NoProgress) {
        Err(EngineError::RolledBack { cause, .. })
            if matches!(*cause, EngineError::Call { step: "pull app image", .. }) => {}
        other => panic!("expected the pull to fail, rolled back, got {other:?}"),
    }
    assert!(lab.labelled_containers().is_empty());
    assert!(lab.networks().is_empty());
    assert!(!lab.app_dir().exists(), "nothing written before the images are there");
}

/// What `show`, `resolve` and `doctor` name for a plan that did not finish:
/// on the real engine, the plan's label finds both containers (with their
/// state) and both networks a deploy created, and another plan's id finds
/// nothing. Read-only: the lab's guard removes the app afterwards.
#[test]
#[ignore = "real parts: run by scripts/test"]
fn every_object_a_deploy_created_is_found_by_its_plan_label() {
    use volce_lab::host::leftovers::find;
    let lab = Lab::new("leftover");
    let spec = lab.spec();
    let deployed = lab.engine.deploy(&spec, &NoProgress).expect("deploy succeeds");
    let left = find(&lab.engine, &spec.plan_id).expect("the engine answers");
    let mut ids: Vec<String> = left.containers.iter().map(|c| c.id.clone()).collect();
    ids.sort();
    let mut expected = vec![deployed.app_container.to_string(), deployed.gateway_container.to_string()];
    expected.sort();
    assert_eq!(ids, expected);
    assert!(left.containers.iter().all(|c| c.state == "running"), "{left:?}");
    let names: Vec<&str> = left.networks.iter().map(|n| n.name.as_str()).collect();
    let (network, edge) = (format!("vl-{}", lab.app), format!("vl-{}_edge", lab.app));
    assert!(names.contains(&network.as_str()) && names.contains(&edge.as_str()), "{names:?}");
    assert_eq!(names.len(), 2, "{names:?}");
    let other = volce_lab::vocab::PlanId::parse(&"0f".repeat(16)).unwrap();
    assert!(find(&lab.engine, &other).unwrap().is_empty());
}
