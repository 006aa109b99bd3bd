//! Hermetic tests of start and update through the fake runner: golden
//! argv, the health checks' Host headers, and what a failure undoes.

use super::*;
use crate::docker::NoProgress;
use crate::vocab::{StartSpec, UpdateSpec};

/// Answers `count` HTTP requests on `port` with 200 once `trigger` (a whole
/// argv line) has first run, recording each request's Host header.
fn gateway_on(port: u16, trigger: String, count: usize) -> (Arc<Mutex<Vec<String>>>, impl Fn(&str) + Sync) {
    let hosts = Arc::new(Mutex::new(Vec::new()));
    let seen = hosts.clone();
    let fired = std::sync::atomic::AtomicBool::new(false);
    let on_call = move |line: &str| {
        // The first time only (an update reloads twice).
        if line != trigger || fired.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let seen = seen.clone();
        std::thread::spawn(move || {
            for _ in 0..count {
                let (mut stream, _) = listener.accept().unwrap();
                let mut buf = [0u8; 1024];
                let n = stream.read(&mut buf).unwrap();
                let request = String::from_utf8_lossy(&buf[..n]).into_owned();
                let host = request.lines().find_map(|l| l.strip_prefix("Host: ")).unwrap_or("").to_owned();
                seen.lock().unwrap().push(host);
                stream.write_all(b"HTTP/1.0 200 OK\r\n\r\nok").unwrap();
            }
        });
    };
    (hosts, on_call)
}

use std::sync::Arc;

fn start_spec(port: u16) -> StartSpec {
    StartSpec {
        accessories: Vec::new(),
        app_container: ContainerId::parse(&hex('a')).unwrap(),
        gateway: ContainerId::parse(&hex('b')).unwrap(),
        host_port: port,
        server_name: ServerName::parse("shop.example").unwrap(),
        health_path: Default::default(),
        data: None,
    }
}

fn quick() -> HealthCheck {
    HealthCheck { tries: 2, interval: Duration::from_millis(10), timeout: Duration::from_millis(300) }
}

#[test]
fn start_restores_the_restart_policy_and_starts_app_then_gateway_then_probes_the_server_name() {
    let port = free_port();
    let (hosts, on_call) = gateway_on(port, format!("start {}", hex('b')), 1);
    let fake = Fake::new(move |args| {
        on_call(&args.join(" "));
        Ok(String::new())
    });
    let engine = DockerClient::with_runner(fake, "/nonexistent").with_health_check(quick());
    engine.start(&start_spec(port), &NoProgress).unwrap();
    assert_eq!(
        engine.runner().argv(),
        [
            format!("update --restart=unless-stopped {}", hex('a')),
            format!("start {}", hex('a')),
            format!("update --restart=unless-stopped {}", hex('b')),
            format!("start {}", hex('b')),
        ]
    );
    assert_eq!(*hosts.lock().unwrap(), ["shop.example"]);
}

#[test]
fn a_start_that_fails_its_health_check_is_stopped_again_and_rolled_back_once_seen_stopped() {
    let port = free_port();
    let fake = Fake::new(|args| match args[0].as_str() {
        _ if app_log_answer(args).is_some() => app_log_answer(args).unwrap(),
        "inspect" => Ok("exited\nexited\n".into()),
        _ => Ok(String::new()),
    });
    let engine = DockerClient::with_runner(fake, "/nonexistent").with_health_check(quick());
    assert_eq!(
        engine.start(&start_spec(port), &NoProgress),
        Err(EngineError::RolledBack {
            cause: Box::new(EngineError::HealthCheckFailed),
            app_log: app_log_read()
        })
    );
    let argv = engine.runner().argv();
    assert_eq!(
        argv[4..],
        [
            // The app's last lines, before it is stopped again.
            app_log_argv(&hex('a'))[0].clone(),
            app_log_argv(&hex('a'))[1].clone(),
            format!("update --restart=no {}", hex('a')),
            format!("stop --time 15 {}", hex('a')),
            format!("update --restart=no {}", hex('b')),
            format!("stop --time 15 {}", hex('b')),
            format!("inspect --type container --format {{{{.State.Status}}}} {} {}", hex('a'), hex('b')),
        ]
    );
    // Seen running after the stop: not called rolled back.
    let fake = Fake::new(|args| match args[0].as_str() {
        "inspect" => Ok("exited\nrunning\n".into()),
        _ => Ok(String::new()),
    });
    let engine = DockerClient::with_runner(fake, "/nonexistent").with_health_check(quick());
    assert_eq!(engine.start(&start_spec(port), &NoProgress), Err(EngineError::HealthCheckFailed));
}

const PLAN: &str = "0123456789abcdef0123456789abcdef";

pub(super) fn update_spec(app_dir: &Path, port: u16) -> UpdateSpec {
    let name = "vl-shop-app-0123456789ab".to_owned();
    let check = format!("{PLAN}.update.volce-lab.invalid");
    UpdateSpec {
        accessories_env: None,
        plan_id: PlanId::parse(PLAN).unwrap(),
        app: AppName::parse("shop").unwrap(),
        app_image: image_ref(&format!("127.0.0.1:15000/volce-lab/web2@sha256:{}", hex('5'))),
        previous_image: format!("127.0.0.1:15000/volce-lab/web@sha256:{}", hex('1')),
        old_app: ContainerId::parse(&hex('a')).unwrap(),
        gateway: ContainerId::parse(&hex('b')).unwrap(),
        host_port: port,
        container_port: 8080,
        health_path: Default::default(),
        server_name: ServerName::parse("shop.example").unwrap(),
        app_dir: app_dir.to_path_buf(),
        previous_config: crate::nginx::render("shop.example", 8080, crate::nginx::AccessLog::Off),
        staged_config: crate::nginx::render_staged(
            "shop.example",
            8080,
            "app",
            &check,
            &name,
            crate::nginx::AccessLog::Off,
        ),
        new_config: crate::nginx::render_for("shop.example", 8080, &name, crate::nginx::AccessLog::Off),
        check_name: ServerName::parse(&check).unwrap(),
        container_name: name,
        limits: limits(),
        env_file: None,
        data: None,
        before_start: None,
    }
}

fn update_script(args: &[String]) -> Result<String, i32> {
    if let Some(answer) = app_log_answer(args) {
        return answer;
    }
    match args[0].as_str() {
        "create" => Ok(format!("{}\n", hex('e'))),
        "inspect" => Ok("running\nrunning\n".into()),
        "image" => Ok("null\n".into()),
        _ => Ok(String::new()),
    }
}

#[test]
fn update_starts_the_new_container_beside_the_old_checks_it_twice_then_removes_the_old() {
    let dir = app_dir_with(&crate::nginx::render("shop.example", 8080, crate::nginx::AccessLog::Off));
    let port = free_port();
    // The gateway answers from its first reload on (the staged config).
    let (hosts, on_call) = gateway_on(port, format!("exec {} {NGINX} -s reload", hex('b')), 2);
    let fake = Fake::new(move |args| {
        on_call(&args.join(" "));
        update_script(args)
    });
    let engine = DockerClient::with_runner(fake, dir.path()).with_health_check(quick());
    let spec = update_spec(dir.path(), port);
    let steps = Steps::default();
    assert_eq!(engine.update(&spec, &steps).unwrap().as_str(), hex('e'));
    let expected = [Step::Pulled, Step::AppStarted, Step::GatewayTested, Step::HealthCheck, Step::Switched];
    assert_eq!(steps.0.borrow().as_slice(), expected, "each update step reported once, in order");
    let argv = engine.runner().argv();
    let image = spec.app_image.as_str();
    assert_eq!(argv[0], format!("pull --quiet {image}"));
    assert_eq!(argv[1], format!("image inspect --format {{{{json .Config.Volumes}}}} -- {image}"));
    assert_eq!(
        argv[2],
        format!(
            "create --name vl-shop-app-0123456789ab --label io.volce-lab.app=shop --label io.volce-lab.role=app \
             --label io.volce-lab.plan={PLAN} --user 1000:1000 {HARDENING} --restart unless-stopped --pull never \
             --network vl-shop --network-alias vl-shop-app-0123456789ab {image}"
        )
    );
    let b = hex('b');
    assert_eq!(
        argv[3..],
        [
            format!("start {}", hex('e')),
            format!("exec {b} {NGINX} -t"),
            format!("exec {b} {NGINX} -s reload"),
            format!("exec {b} {NGINX} -t"),
            format!("exec {b} {NGINX} -s reload"),
            format!("update --restart=no {}", hex('a')),
            format!("stop --time 15 {}", hex('a')),
            format!("rm {}", hex('a')),
        ]
    );
    assert_eq!(*hosts.lock().unwrap(), [spec.check_name.to_string(), "shop.example".to_owned()]);
    assert_eq!(std::fs::read_to_string(dir.path().join("nginx.conf")).unwrap(), spec.new_config);
}

#[test]
fn a_failed_update_restores_the_config_removes_the_new_container_and_is_rolled_back_when_verified() {
    let dir = app_dir_with(&crate::nginx::render("shop.example", 8080, crate::nginx::AccessLog::Off));
    let port = free_port();
    // The first listing by the plan's label finds the new container, the
    // verifying one finds nothing; the old container and gateway run.
    let listings = std::sync::atomic::AtomicUsize::new(0);
    let fake = Fake::new(move |args| match args[0].as_str() {
        "ps" if listings.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 => {
            Ok(format!("{}\n", hex('e')))
        }
        _ => update_script(args),
    });
    let engine = DockerClient::with_runner(fake, dir.path()).with_health_check(quick());
    let spec = update_spec(dir.path(), port);
    assert_eq!(
        engine.update(&spec, &NoProgress),
        Err(EngineError::RolledBack {
            cause: Box::new(EngineError::HealthCheckFailed),
            app_log: app_log_read()
        })
    );
    let argv = engine.runner().argv();
    let plan = format!("label=io.volce-lab.plan={PLAN}");
    let b = hex('b');
    assert_eq!(
        argv[6..],
        [
            // The previous config, tested and reloaded.
            format!("exec {b} {NGINX} -t"),
            format!("exec {b} {NGINX} -s reload"),
            // Then the new container's last lines, while it still exists.
            app_log_argv(&hex('e'))[0].clone(),
            app_log_argv(&hex('e'))[1].clone(),
            format!("ps -aq --no-trunc --filter {plan}"),
            format!("network ls -q --no-trunc --filter {plan}"),
            format!("rm -f -v {}", hex('e')),
            format!("ps -aq --no-trunc --filter {plan}"),
            format!("network ls -q --no-trunc --filter {plan}"),
            format!("inspect --type container --format {{{{.State.Status}}}} {} {b}", hex('a')),
        ]
    );
    assert!(!argv.iter().any(|a| a.contains(&format!("rm {}", hex('a')))), "the old one is never touched");
    assert_eq!(std::fs::read_to_string(dir.path().join("nginx.conf")).unwrap(), spec.previous_config);
}

#[test]
fn an_update_refuses_a_changed_config_or_a_foreign_name_without_touching_the_old_container() {
    let dir = app_dir_with("# edited by hand\n");
    let port = free_port();
    let fake = Fake::new(update_script);
    let engine = DockerClient::with_runner(fake, dir.path()).with_health_check(quick());
    let spec = update_spec(dir.path(), port);
    assert_eq!(
        engine.update(&spec, &NoProgress),
        Err(EngineError::RolledBack {
            cause: Box::new(EngineError::ManagedFileChanged),
            app_log: app_log_read()
        })
    );
    assert_eq!(std::fs::read_to_string(dir.path().join("nginx.conf")).unwrap(), "# edited by hand\n");
    let mut bad = spec.clone();
    bad.container_name = "prod".into();
    let fake = Fake::new(update_script);
    let engine = DockerClient::with_runner(fake, dir.path());
    assert_eq!(engine.update(&bad, &NoProgress), Err(EngineError::Host { step: "validate update spec" }));
    assert!(engine.runner().argv().is_empty(), "nothing ran");
}

#[test]
fn a_log_that_cannot_be_read_or_made_safe_is_unreadable_and_the_rollback_still_decides() {
    let port = free_port();
    // docker logs fails: the start is still rolled back, its log unreadable.
    let fake = Fake::new(|args| match args[0].as_str() {
        "logs" => Err(1),
        "inspect" => Ok("exited\nexited\n".into()),
        _ => Ok(String::new()),
    });
    let engine = DockerClient::with_runner(fake, "/nonexistent").with_health_check(quick());
    let unreadable = Some(crate::logs::AppLog::unreadable());
    assert_eq!(
        engine.start(&start_spec(port), &NoProgress),
        Err(EngineError::RolledBack {
            cause: Box::new(EngineError::HealthCheckFailed),
            app_log: unreadable.clone()
        })
    );
    // The log reads, but the environment (the values to redact) does not:
    // nothing of it is called safe.
    let fake = Fake::new(|args| match args[0].as_str() {
        "logs" => Ok("2026-12-01T10:00:00.000000001Z token hunter2-configured-token\n".into()),
        // Exit 1 is docker's "no such container": no values known either.
        "inspect" if args.join(" ").contains(".Config.Env") => Err(1),
        "inspect" => Ok("exited\nexited\n".into()),
        _ => Ok(String::new()),
    });
    let engine = DockerClient::with_runner(fake, "/nonexistent").with_health_check(quick());
    assert_eq!(
        engine.start(&start_spec(port), &NoProgress),
        Err(EngineError::RolledBack { cause: Box::new(EngineError::HealthCheckFailed), app_log: unreadable })
    );
    // A log read never turns a rollback that is not verified into one.
    let fake = Fake::new(|args| match args[0].as_str() {
        _ if app_log_answer(args).is_some() => app_log_answer(args).unwrap(),
        "inspect" => Ok("exited\nrunning\n".into()),
        _ => Ok(String::new()),
    });
    let engine = DockerClient::with_runner(fake, "/nonexistent").with_health_check(quick());
    assert_eq!(engine.start(&start_spec(port), &NoProgress), Err(EngineError::HealthCheckFailed));
}
