//! Hermetic tests of the docker-client engine: golden argv through a fake
//! runner, parsers on recorded docker output, file handling in temp dirs.
//! No Docker, no root.
//! Over 450 lines on purpose: every engine operation's golden argv is
//! checked through the one fake runner and deploy script defined here.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::sync::Mutex;

use super::*;
use crate::docker::{AppRemoval, LogWindow, NoProgress};
use crate::exec::{Completion, Execution, ProcessOutput};
use crate::vocab::{AppName, ContainerLimits, PublishedPort, ServerName, Step};

/// A progress sink that keeps what it was told.
#[derive(Default)]
pub(super) struct Steps(pub(super) std::cell::RefCell<Vec<Step>>);

impl crate::docker::ProgressSink for Steps {
    fn step(&self, step: Step) {
        self.0.borrow_mut().push(step);
    }
}

type Script = dyn Fn(&[String]) -> Result<String, i32> + Sync;

/// Records every call and answers from a script: `Ok(stdout)` is exit 0,
/// `Err(code)` a nonzero exit with that code.
struct Fake {
    calls: Mutex<Vec<DockerCall>>,
    script: Box<Script>,
}

impl Fake {
    fn new(script: impl Fn(&[String]) -> Result<String, i32> + Sync + 'static) -> Fake {
        Fake { calls: Mutex::new(Vec::new()), script: Box::new(script) }
    }
    fn argv(&self) -> Vec<String> {
        self.calls.lock().unwrap().iter().map(|c| c.args.join(" ")).collect()
    }
}

impl Runner for Fake {
    fn run(&self, call: &DockerCall) -> ProcessOutput {
        self.calls.lock().unwrap().push(call.clone());
        let (status, code, stdout) = match (self.script)(&call.args) {
            Ok(out) => (ExecutionStatus::Ok, 0, out),
            Err(code) => (ExecutionStatus::NonzeroExit, code, String::new()),
        };
        let execution = Execution {
            execution_status: status,
            exit_code: Some(code),
            signal: None,
            timed_out: false,
            output_truncated: false,
            duration_ms: 1,
            completion: Completion::Confirmed,
        };
        ProcessOutput { execution, stdout: stdout.into_bytes(), stderr_len: 0, stderr: Vec::new() }
    }
}

fn hex(c: char) -> String {
    c.to_string().repeat(64)
}

/// What the fake's `docker logs` of a failed app prints: a configured
/// value (one of its environment's), a secret by pattern, an escape.
const APP_OUTPUT: &str = "2026-12-01T10:00:00.000000001Z listening on :9090 with hunter2-configured-token\n\
                          2026-12-01T10:00:00.000000002Z \u{1b}[31mpassword=swordfish99\u{1b}[0m\n";
/// The failed app container's environment, as `inspect {{json .Config.Env}}` prints it.
const APP_ENV: &str = "[\"TOKEN=hunter2-configured-token\",\"PATH=/usr/bin\"]\n";

/// The fake's answers to a failed plan's reads of the app's last lines.
fn app_log_answer(args: &[String]) -> Option<Result<String, i32>> {
    let line = args.join(" ");
    match args[0].as_str() {
        "logs" => Some(Ok(APP_OUTPUT.to_owned())),
        "inspect" if line.contains(".Config.Env") => Some(Ok(APP_ENV.to_owned())),
        _ => None,
    }
}

/// The AppLog a failed plan carries from [`app_log_answer`].
fn app_log_read() -> Option<crate::logs::AppLog> {
    let log =
        crate::logs::AppLog::render(APP_OUTPUT.as_bytes(), b"", &["hunter2-configured-token", "/usr/bin"]);
    assert_eq!(log.lines.len(), 2);
    assert!(
        log.lines.iter().all(|l| !l.contains("hunter2") && !l.contains("swordfish") && !l.contains('\u{1b}'))
    );
    Some(log)
}

/// The two reads, by full id, in order.
fn app_log_argv(id: &str) -> [String; 2] {
    [
        format!("logs --tail 20 --timestamps -- {id}"),
        format!("inspect --type container --format {{{{json .Config.Env}}}} -- {id}"),
    ]
}

fn limits() -> ContainerLimits {
    ContainerLimits {
        memory_bytes: 256 * 1024 * 1024,
        millicpus: 500,
        pids: 128,
        log_max_size_bytes: 10 * 1024 * 1024,
        log_max_files: 3,
    }
}

fn image_ref(value: &str) -> ImageRef {
    ImageRef::parse(value).unwrap()
}

fn spec(app_dir: &Path, host_port: u16) -> DeploySpec {
    DeploySpec {
        accessories: Vec::new(),
        plan_id: PlanId::parse("0123456789abcdef0123456789abcdef").unwrap(),
        app: AppName::parse("shop").unwrap(),
        app_image: image_ref(&format!("127.0.0.1:15000/volce-lab/web@sha256:{}", hex('1'))),
        gateway_image: image_ref(&format!("127.0.0.1:15000/volce-lab/gateway@sha256:{}", hex('2'))),
        host_port,
        container_port: 8080,
        health_path: Default::default(),
        server_name: ServerName::parse("shop.example").unwrap(),
        also_server_names: vec![],
        nginx_config: crate::nginx::render("shop.example", 8080, crate::nginx::AccessLog::Off),
        app_dir: app_dir.to_path_buf(),
        limits: limits(),
        env_file: None,
        data: None,
        before_start: None,
    }
}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

const HARDENING: &str = "--init --read-only --tmpfs /tmp:rw,noexec,nosuid,nodev,size=16m,mode=1777 \
--ipc private --shm-size 8m --cap-drop ALL --security-opt no-new-privileges --pids-limit 128 --memory 268435456 --memory-swap 268435456 \
--cpus 0.500 --log-driver json-file --log-opt max-size=10485760 --log-opt max-file=3";

#[test]
fn snapshot_uses_four_calls_and_keeps_only_our_labels() {
    let row = format!(
        r#"{{"id":"{}","name":"/vl-shop-gateway","image":"sha256:{}","state":"running","labels":{{"io.volce-lab.app":"shop","io.volce-lab.role":"gateway","maintainer":"x"}},"ports":{{"8080/tcp":[{{"HostIp":"127.0.0.1","HostPort":"18001"}}]}}}}"#,
        hex('c'),
        hex('d')
    );
    let other = format!(
        r#"{{"id":"{}","name":"/other","image":"sha256:{}","state":"exited","labels":null,"ports":{{}}}}"#,
        hex('a'),
        hex('d')
    );
    let ids = format!("{}\n{}\n", hex('c'), hex('a'));
    let fake = Fake::new(move |args| match args[0].as_str() {
        "ps" => Ok(ids.clone()),
        "inspect" => Ok(format!("{row}\n{other}\n")),
        "image" => Ok(format!("sha256:{}\nsha256:{}\nsha256:{}\n", hex('e'), hex('d'), hex('e'))),
        "network" => Ok("vl-shop\nvl-shop_edge\nnot-vl-x\n".into()),
        _ => Err(99),
    });
    let engine = DockerClient::with_runner(fake, "/nonexistent");
    let snapshot = engine.snapshot().unwrap();

    let mut argv = engine.runner().argv();
    argv.sort();
    let inspect = format!("inspect --type container --format {INSPECT_TEMPLATE} {} {}", hex('c'), hex('a'));
    assert_eq!(
        argv,
        [
            "image ls -q --no-trunc".to_owned(),
            inspect,
            "network ls --no-trunc --filter name=vl- --format {{.Name}}".to_owned(),
            "ps -aq --no-trunc".to_owned(),
        ]
    );
    assert_eq!(snapshot.containers.len(), 2);
    let gateway = snapshot.containers.iter().find(|c| c.name == "vl-shop-gateway").unwrap();
    assert_eq!(gateway.app(), Some("shop"));
    assert_eq!(gateway.role(), Some("gateway"));
    assert_eq!(gateway.labels.len(), 2, "foreign labels are dropped");
    assert_eq!(
        gateway.ports,
        [PublishedPort {
            host_ip: "127.0.0.1".into(),
            host_port: 18001,
            container_port: 8080,
            protocol: "tcp".into()
        }]
    );
    let other = snapshot.containers.iter().find(|c| c.name == "other").unwrap();
    assert!(other.labels.is_empty() && other.ports.is_empty());
    assert_eq!(snapshot.images.len(), 2, "duplicate image ids (two tags) collapse");
    assert_eq!(snapshot.networks, ["vl-shop", "vl-shop_edge"], "substring matches are dropped");
}

#[test]
fn snapshot_of_an_empty_engine_skips_inspect() {
    let fake = Fake::new(|args| match args[0].as_str() {
        "inspect" => Err(1),
        _ => Ok(String::new()),
    });
    let engine = DockerClient::with_runner(fake, "/nonexistent");
    assert_eq!(engine.snapshot().unwrap(), Snapshot::default());
    assert!(!engine.runner().argv().iter().any(|a| a.starts_with("inspect")));
}

#[test]
fn snapshot_with_garbage_is_unparsable_not_guessed() {
    let fake = Fake::new(|args| match args[0].as_str() {
        "ps" => Ok("not-an-id\n".into()),
        _ => Ok(String::new()),
    });
    let engine = DockerClient::with_runner(fake, "/nonexistent");
    assert_eq!(engine.snapshot(), Err(EngineError::Unparsable { step: "list containers" }));
    assert!(parse_inspect_rows(b"{\"id\":1}").is_err());
    assert!(parse_images(b"deadbeef\n").is_err());
}

#[test]
fn snapshot_retries_when_a_container_vanishes_between_ps_and_inspect() {
    let attempts = Mutex::new(0);
    let fake = Fake::new(move |args| match args[0].as_str() {
        "ps" => Ok(hex('c')),
        "inspect" => {
            let mut n = attempts.lock().unwrap();
            *n += 1;
            if *n == 1 { Err(1) } else { Ok(String::new()) }
        }
        _ => Ok(String::new()),
    });
    let engine = DockerClient::with_runner(fake, "/nonexistent");
    assert!(engine.snapshot().is_ok());
}

/// Answers a deploy's calls; `fail` names the first argv word sequence that fails.
fn deploy_script(fail: Option<(&'static str, i32)>) -> impl Fn(&[String]) -> Result<String, i32> + Sync {
    move |args| {
        let line = args.join(" ");
        if let Some((prefix, code)) = fail
            && line.starts_with(prefix)
        {
            return Err(code);
        }
        if let Some(answer) = app_log_answer(args) {
            return answer;
        }
        match (args[0].as_str(), args.get(1).map(String::as_str)) {
            ("network", Some("create")) if line.ends_with("_edge") => Ok(format!("{}\n", hex('4'))),
            ("network", Some("create")) => Ok(format!("{}\n", hex('3'))),
            ("create", _) if line.contains("vl-shop-app") => Ok(format!("{}\n", hex('a'))),
            ("create", _) => Ok(format!("{}\n", hex('b'))),
            ("ps", _) | ("network", Some("ls")) => Ok(String::new()),
            ("image", Some("inspect")) => Ok("null\n".to_owned()),
            _ => Ok(String::new()),
        }
    }
}

fn expected_deploy_argv(dir: &Path, port: u16) -> Vec<String> {
    let labels = |role: &str| {
        format!(
            "--label io.volce-lab.app=shop --label io.volce-lab.role={role} \
             --label io.volce-lab.plan=0123456789abcdef0123456789abcdef"
        )
    };
    let web = format!("127.0.0.1:15000/volce-lab/web@sha256:{}", hex('1'));
    let gw = format!("127.0.0.1:15000/volce-lab/gateway@sha256:{}", hex('2'));
    let mount =
        format!("type=bind,source={}/nginx.conf,target=/etc/nginx/nginx.conf,readonly", dir.display());
    vec![
        format!("pull --quiet {web}"),
        format!("pull --quiet {gw}"),
        format!("image inspect --format {{{{json .Config.Volumes}}}} -- {web}"),
        format!("image inspect --format {{{{json .Config.Volumes}}}} -- {gw}"),
        format!(
            "network create --driver bridge --internal --opt com.docker.network.bridge.inhibit_ipv4=true {} \
             vl-shop",
            labels("network")
        ),
        format!(
            "network create --driver bridge --opt com.docker.network.bridge.enable_ip_masquerade=false {} \
             vl-shop_edge",
            labels("network")
        ),
        format!(
            "create --name vl-shop-app {} --user 1000:1000 {HARDENING} --restart unless-stopped --pull never \
             --network vl-shop --network-alias app {web}",
            labels("app")
        ),
        format!("start {}", hex('a')),
        format!(
            "run --rm --name vl-shop-check {} --user 101:101 {HARDENING} --restart no --pull never \
             --network vl-shop --mount {mount} {gw} /usr/sbin/nginx -t",
            labels("check")
        ),
        format!(
            "create --name vl-shop-gateway {} --user 101:101 {HARDENING} --restart unless-stopped --pull never \
             --network vl-shop_edge --publish 127.0.0.1:{port}:8080 --mount {mount} {gw}",
            labels("gateway")
        ),
        format!("network connect vl-shop {}", hex('b')),
        format!("start {}", hex('b')),
    ]
}

#[test]
fn hardening_puts_user_first_and_every_control_after() {
    let args = hardening(&limits(), "1000:1000", "unless-stopped").join(" ");
    assert_eq!(args, format!("--user 1000:1000 {HARDENING} --restart unless-stopped --pull never"));
    assert!(!args.contains("--privileged") && !args.contains("host"));
}

#[test]
fn deploy_runs_the_golden_argv_then_probes_with_the_host_header() {
    let dir = tempfile::tempdir().unwrap();
    let app_dir = dir.path().join("shop");
    let port = free_port();
    // Plays the gateway: starts answering when the gateway container starts.
    let seen = std::sync::Arc::new(Mutex::new(String::new()));
    let seen_by_server = seen.clone();
    let gateway_start = format!("start {}", hex('b'));
    let script = deploy_script(None);
    let fake = Fake::new(move |args| {
        if args.join(" ") == gateway_start {
            let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
            let seen = seen_by_server.clone();
            std::thread::spawn(move || {
                let (mut stream, _) = listener.accept().unwrap();
                let mut buf = [0u8; 1024];
                let n = stream.read(&mut buf).unwrap();
                *seen.lock().unwrap() = String::from_utf8_lossy(&buf[..n]).into_owned();
                stream.write_all(b"HTTP/1.0 200 OK\r\n\r\nhello").unwrap();
            });
        }
        script(args)
    });
    let engine = DockerClient::with_runner(fake, dir.path());
    let steps = Steps::default();
    let deployed = engine.deploy(&spec(&app_dir, port), &steps).unwrap();
    let expected = [Step::Pulled, Step::Network, Step::AppStarted, Step::GatewayTested, Step::HealthCheck];
    assert_eq!(steps.0.borrow().as_slice(), expected, "each deploy step reported once, in order");
    assert_eq!(deployed.app_container.as_str(), hex('a'));
    assert_eq!(deployed.gateway_container.as_str(), hex('b'));
    assert_eq!(engine.runner().argv(), expected_deploy_argv(&app_dir, port));
    assert!(seen.lock().unwrap().starts_with("GET / HTTP/1.0\r\nHost: shop.example\r\n"));

    let config = app_dir.join("nginx.conf");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        crate::nginx::render("shop.example", 8080, crate::nginx::AccessLog::Off)
    );
    assert_eq!(std::fs::metadata(&config).unwrap().mode() & 0o7777, 0o644);
    assert_eq!(std::fs::metadata(&app_dir).unwrap().mode() & 0o7777, 0o755);
}

#[test]
fn failed_health_check_removes_exactly_what_the_plan_created() {
    let dir = tempfile::tempdir().unwrap();
    let app_dir = dir.path().join("shop");
    let port = free_port();
    let script = deploy_script(None);
    let fake = Fake::new(move |args| match args[0].as_str() {
        // What the engine finds by the plan's label.
        "ps" => Ok(format!("{}\n", hex('a'))),
        "network" if args[1] == "ls" => Ok(format!("{}\n{}\n", hex('3'), hex('4'))),
        _ => script(args),
    });
    let quick =
        HealthCheck { tries: 2, interval: Duration::from_millis(10), timeout: Duration::from_millis(200) };
    let engine = DockerClient::with_runner(fake, dir.path()).with_health_check(quick);
    assert_eq!(engine.deploy(&spec(&app_dir, port), &NoProgress), Err(EngineError::HealthCheckFailed));
    let argv = engine.runner().argv();
    let plan = "label=io.volce-lab.plan=0123456789abcdef0123456789abcdef";
    assert_eq!(
        argv[12..],
        [
            // The app's last lines, while it still exists.
            app_log_argv(&hex('a'))[0].clone(),
            app_log_argv(&hex('a'))[1].clone(),
            format!("ps -aq --no-trunc --filter {plan}"),
            format!("network ls -q --no-trunc --filter {plan}"),
            format!("rm -f -v {}", hex('a')),
            format!("rm -f -v {}", hex('b')),
            format!("network rm {}", hex('3')),
            format!("network rm {}", hex('4')),
            // The verifying listing still finds them: not rolled back.
            format!("ps -aq --no-trunc --filter {plan}"),
            format!("network ls -q --no-trunc --filter {plan}"),
        ]
    );
    assert!(app_dir.join("nginx.conf").exists(), "the directory stays as evidence");
}

#[test]
fn a_failed_health_check_whose_rollback_lists_clean_is_rolled_back_and_leaves_no_directory() {
    let dir = tempfile::tempdir().unwrap();
    let app_dir = dir.path().join("shop");
    let port = free_port();
    let script = deploy_script(None);
    // The first listing (to remove) finds the plan's objects, the second
    // (to verify) finds none: the removals worked.
    let listings = std::sync::atomic::AtomicUsize::new(0);
    let fake = Fake::new(move |args| match args[0].as_str() {
        "ps" if listings.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 => {
            Ok(format!("{}\n", hex('a')))
        }
        _ => script(args),
    });
    let quick =
        HealthCheck { tries: 1, interval: Duration::from_millis(10), timeout: Duration::from_millis(200) };
    let engine = DockerClient::with_runner(fake, dir.path()).with_health_check(quick);
    assert_eq!(
        engine.deploy(&spec(&app_dir, port), &NoProgress),
        Err(EngineError::RolledBack {
            cause: Box::new(EngineError::HealthCheckFailed),
            app_log: app_log_read()
        })
    );
    let argv = engine.runner().argv();
    let read = argv.iter().position(|a| *a == app_log_argv(&hex('a'))[0]).expect("the log was read");
    let removed = argv.iter().position(|a| a.starts_with("rm -f")).unwrap();
    assert!(read < removed, "read before the removal: {argv:?}");
    let plan = "label=io.volce-lab.plan=0123456789abcdef0123456789abcdef";
    assert_eq!(
        argv[argv.len() - 2..],
        [format!("ps -aq --no-trunc --filter {plan}"), format!("network ls -q --no-trunc --filter {plan}")],
        "the rollback ends with the verifying listing"
    );
    assert!(!app_dir.exists(), "the directory the deploy created is gone");
}

#[test]
fn a_rollback_whose_verifying_listing_fails_is_not_called_verified() {
    let dir = tempfile::tempdir().unwrap();
    let app_dir = dir.path().join("shop");
    let script = deploy_script(Some(("run --rm", 1)));
    let listings = std::sync::atomic::AtomicUsize::new(0);
    let fake = Fake::new(move |args| match args[0].as_str() {
        "ps" if listings.fetch_add(1, std::sync::atomic::Ordering::SeqCst) > 0 => Err(1),
        _ => script(args),
    });
    let engine = DockerClient::with_runner(fake, dir.path());
    assert_eq!(engine.deploy(&spec(&app_dir, free_port()), &NoProgress), Err(EngineError::NginxRejected));
    assert!(app_dir.join("nginx.conf").exists(), "the directory stays as evidence");
}

#[test]
fn rejected_nginx_test_stops_before_the_gateway_exists() {
    let dir = tempfile::tempdir().unwrap();
    let app_dir = dir.path().join("shop");
    let fake = Fake::new(deploy_script(Some(("run --rm", 1))));
    let engine = DockerClient::with_runner(fake, dir.path());
    assert_eq!(
        engine.deploy(&spec(&app_dir, free_port()), &NoProgress),
        Err(EngineError::RolledBack { cause: Box::new(EngineError::NginxRejected), app_log: app_log_read() })
    );
    let argv = engine.runner().argv();
    assert!(!argv.iter().any(|a| a.contains("vl-shop-gateway")));
    assert!(argv.contains(&format!("rm -f -v {}", hex('a'))));
    assert!(argv.contains(&format!("network rm {}", hex('3'))));
}

#[test]
fn docker_failure_at_pull_creates_and_removes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let app_dir = dir.path().join("shop");
    let fake = Fake::new(deploy_script(Some(("pull", 1))));
    let engine = DockerClient::with_runner(fake, dir.path());
    match engine.deploy(&spec(&app_dir, free_port()), &NoProgress) {
        Err(EngineError::RolledBack { cause, .. })
            if matches!(*cause, EngineError::Call { step: "pull app image", .. }) => {}
        other => panic!("expected a verified pull failure, got {other:?}"),
    }
    let argv = engine.runner().argv();
    assert!(argv.iter().all(|a| a.starts_with("pull") || a.starts_with("ps") || a.starts_with("network ls")));
    assert!(!app_dir.exists());
}

#[test]
fn deploy_refuses_a_busy_port_and_bad_untyped_values_without_any_call() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = listener.local_addr().unwrap().port();
    let engine = DockerClient::with_runner(Fake::new(|_| Ok(String::new())), dir.path());
    let app_dir = dir.path().join("shop");
    let taken = engine.deploy(&spec(&app_dir, busy), &NoProgress).unwrap_err();
    assert_eq!(taken, EngineError::PortTaken { port: busy });
    assert!(taken.changed_nothing(), "refused before the first mutation");

    let port = free_port();
    let mut bad = Vec::new();
    for change in 0..5 {
        let mut s = spec(&app_dir, port);
        match change {
            0 => s.app_dir = dir.path().join("a,b"),
            1 => s.app_dir = "relative/shop".into(),
            2 => s.host_port = 80,
            3 => s.container_port = 0,
            _ => s.limits.millicpus = 0,
        }
        bad.push(engine.deploy(&s, &NoProgress));
    }
    assert!(bad.iter().all(|r| r == &Err(EngineError::Host { step: "validate deploy spec" })), "{bad:?}");
    assert!(engine.runner().argv().is_empty());
}

#[test]
fn a_spec_with_a_bad_name_or_reference_cannot_be_built_or_deserialized() {
    // What the engine used to re-check itself is now the types' job: none
    // of these values can reach `deploy`, from code or from a stored plan.
    let good = serde_json::to_value(spec(Path::new("/state/apps/shop"), 18001)).unwrap();
    assert!(serde_json::from_value::<DeploySpec>(good.clone()).is_ok());
    for (field, value) in [
        ("app", "Shop".to_owned()),
        ("app_image", "127.0.0.1:15000/volce-lab/web:latest".to_owned()),
        ("gateway_image", format!("--privileged@sha256:{}", hex('1'))),
        ("server_name", "a b".to_owned()),
        ("plan_id", "x;y".to_owned()),
    ] {
        let mut bad = good.clone();
        bad[field] = value.clone().into();
        assert!(serde_json::from_value::<DeploySpec>(bad).is_err(), "{field}: {value}");
    }
    assert!(AppName::parse("Shop").is_none());
    assert!(ImageRef::parse(&format!("--privileged@sha256:{}", hex('1'))).is_none());
    assert!(ServerName::parse("a b").is_none());
    assert!(PlanId::parse("x;y").is_err());
}

#[test]
fn deploy_never_overwrites_an_existing_nginx_conf() {
    let dir = tempfile::tempdir().unwrap();
    let app_dir = dir.path().join("shop");
    std::fs::create_dir(&app_dir).unwrap();
    std::fs::set_permissions(&app_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(app_dir.join("nginx.conf"), "evidence\n").unwrap();
    let fake = Fake::new(deploy_script(None));
    let engine = DockerClient::with_runner(fake, dir.path());
    assert_eq!(
        engine.deploy(&spec(&app_dir, free_port()), &NoProgress),
        Err(EngineError::Host { step: "create nginx.conf (it must not exist yet)" })
    );
    assert_eq!(std::fs::read_to_string(app_dir.join("nginx.conf")).unwrap(), "evidence\n");
    let argv = engine.runner().argv();
    assert!(!argv.iter().any(|a| a.starts_with("create") || a.starts_with("run")));
    assert!(argv.contains(&format!("network rm {}", hex('3'))), "the networks it made are removed");
}

#[test]
fn stop_disables_restart_then_stops_each_given_id_only() {
    let engine = DockerClient::with_runner(Fake::new(|_| Ok(String::new())), "/nonexistent");
    let ids = [ContainerId::parse(&hex('a')).unwrap(), ContainerId::parse(&hex('b')).unwrap()];
    engine.stop(&ids).unwrap();
    assert_eq!(
        engine.runner().argv(),
        [
            format!("update --restart=no {}", hex('a')),
            format!("stop --time 15 {}", hex('a')),
            format!("update --restart=no {}", hex('b')),
            format!("stop --time 15 {}", hex('b')),
        ]
    );
}

#[test]
fn remove_app_stops_the_running_removes_exactly_the_given_ids_and_only_its_labelled_networks() {
    let dir = app_dir_with("x");
    std::fs::write(dir.path().join("nginx.conf.1700000000123.bak"), b"x").unwrap();
    let app_dir = dir.path().to_owned();
    let listing = format!("{} vl-shop\n{} vl-shop_edge\n{} vl-shop-other\n", hex('3'), hex('4'), hex('5'));
    let fake = Fake::new(move |args| match args[0].as_str() {
        "network" if args[1] == "ls" => Ok(listing.clone()),
        _ => Ok(String::new()),
    });
    let engine = DockerClient::with_runner(fake, "/nonexistent");
    let app = AppName::parse("shop").unwrap();
    let (a, b) = (ContainerId::parse(&hex('a')).unwrap(), ContainerId::parse(&hex('b')).unwrap());
    let networks = ["vl-shop".to_owned(), "vl-shop_edge".to_owned()];
    let removal = AppRemoval {
        accessory_data: &[],
        app: &app,
        containers: &[a.clone(), b],
        running: &[a],
        networks: &networks,
        app_dir: &app_dir,
        data: None,
        purge_data: false,
    };
    engine.remove_app(&removal).unwrap();
    assert_eq!(
        engine.runner().argv(),
        [
            format!("update --restart=no {}", hex('a')),
            format!("stop --time 15 {}", hex('a')),
            // Never -f, never -v.
            format!("rm {}", hex('a')),
            format!("rm {}", hex('b')),
            "network ls --no-trunc --filter label=io.volce-lab.app=shop --format {{.ID}} {{.Name}}"
                .to_owned(),
            // Not vl-shop-other: labelled, but not one of the plan's names.
            format!("network rm {}", hex('3')),
            format!("network rm {}", hex('4')),
        ]
    );
    assert!(!app_dir.exists(), "the directory and what volce-lab wrote in it are gone");
}

#[test]
fn remove_app_keeps_a_directory_holding_anything_volce_lab_did_not_write() {
    for stranger in ["notes.txt", "nginx.conf.bak", "nginx.conf.12x.bak"] {
        let dir = app_dir_with("x");
        std::fs::write(dir.path().join(stranger), b"x").unwrap();
        let app_dir = dir.path().to_owned();
        let engine = DockerClient::with_runner(Fake::new(|_| Ok(String::new())), "/nonexistent");
        let app = AppName::parse("shop").unwrap();
        let removal = AppRemoval {
            accessory_data: &[],
            app: &app,
            containers: &[],
            running: &[],
            networks: &[],
            app_dir: &app_dir,
            data: None,
            purge_data: false,
        };
        assert!(matches!(engine.remove_app(&removal), Err(EngineError::Host { .. })), "{stranger}");
        assert!(
            app_dir.join("nginx.conf").exists() && app_dir.join(stranger).exists(),
            "{stranger}: nothing removed"
        );
    }
}

fn app_dir_with(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.path().join("nginx.conf"), config).unwrap();
    dir
}

/// A gateway published on `port` as `docker inspect` with our template
/// prints it.
fn gateway_row(port: u16) -> String {
    format!(
        r#"{{"id":"{}","name":"/vl-shop-gateway","image":"sha256:{}","state":"running","labels":{{}},"ports":{{"8080/tcp":[{{"HostIp":"127.0.0.1","HostPort":"{port}"}}]}}}}"#,
        hex('b'),
        hex('9')
    )
}

/// Answers `answers` GETs with `status` on a fresh loopback port, recording
/// each request's first lines.
fn serve(status: &'static str, answers: usize) -> (u16, std::sync::Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
    let seen_by_server = seen.clone();
    std::thread::spawn(move || {
        for _ in 0..answers {
            let (mut stream, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            let n = stream.read(&mut buf).unwrap();
            seen_by_server.lock().unwrap().push(String::from_utf8_lossy(&buf[..n]).into_owned());
            stream.write_all(format!("HTTP/1.0 {status}\r\n\r\n").as_bytes()).unwrap();
        }
    });
    (port, seen)
}

#[test]
fn update_nginx_writes_in_place_tests_reloads_and_waits_for_the_new_name() {
    let dir = app_dir_with("old\n");
    let inode = std::fs::metadata(dir.path().join("nginx.conf")).unwrap().ino();
    // Served means five answers in a row, each on a new connection.
    let (port, seen) = serve("200 OK", 5);
    let row = gateway_row(port);
    let fake = Fake::new(move |args| Ok(if args[0] == "inspect" { row.clone() } else { String::new() }));
    let engine = DockerClient::with_runner(fake, dir.path());
    let gateway = ContainerId::parse(&hex('b')).unwrap();
    let new = crate::nginx::render("new.example", 8080, crate::nginx::AccessLog::Off);
    engine.update_nginx(dir.path(), &gateway, "old\n", &new).unwrap();
    let path = dir.path().join("nginx.conf");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), new);
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode, "same inode: the bind mount follows it");
    assert_eq!(
        engine.runner().argv(),
        [
            format!("exec {} /usr/sbin/nginx -t", hex('b')),
            format!("exec {} /usr/sbin/nginx -s reload", hex('b')),
            format!("inspect --type container --format {INSPECT_TEMPLATE} {}", hex('b')),
        ]
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert!(seen.iter().all(|s| s.starts_with("GET / HTTP/1.0\r\nHost: new.example\r\n")), "{seen:?}");
    let backups: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".bak"))
        .collect();
    assert_eq!(backups.len(), 1);
    let backup = dir.path().join(&backups[0]);
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), "old\n");
    assert_eq!(std::fs::metadata(&backup).unwrap().mode() & 0o777, 0o600);
}

/// The reload went through but the new name keeps getting the default
/// server's 404: not `completed`, and not a clean failure either (the new
/// configuration is loaded), so the controller records needs_inspection.
#[test]
fn a_new_name_that_never_answers_is_an_error_that_needs_an_operator() {
    let dir = app_dir_with("old\n");
    let (port, seen) = serve("404 Not Found", 3);
    let row = gateway_row(port);
    let fake = Fake::new(move |args| Ok(if args[0] == "inspect" { row.clone() } else { String::new() }));
    let health =
        HealthCheck { tries: 3, interval: Duration::from_millis(10), timeout: Duration::from_secs(1) };
    let engine = DockerClient::with_runner(fake, dir.path()).with_health_check(health);
    let gateway = ContainerId::parse(&hex('b')).unwrap();
    let error = engine
        .update_nginx(
            dir.path(),
            &gateway,
            "old\n",
            &crate::nginx::render("new.example", 8080, crate::nginx::AccessLog::Off),
        )
        .unwrap_err();
    assert_eq!(error, EngineError::HealthCheckFailed);
    assert!(!error.changed_nothing());
    assert_eq!(seen.lock().unwrap().len(), 3, "polled, bounded by the health check's tries");
}

#[test]
fn rejected_update_restores_the_old_bytes_and_reloads_them() {
    let dir = app_dir_with("old\n");
    let path = dir.path().join("nginx.conf");
    let path_in_script = path.clone();
    // nginx -t fails while the file holds the new config, passes on the old one.
    let fake = Fake::new(move |args| {
        let current = std::fs::read_to_string(&path_in_script).unwrap();
        if args.last().unwrap() == "-t" && current == "bad\n" { Err(1) } else { Ok(String::new()) }
    });
    let engine = DockerClient::with_runner(fake, dir.path());
    let gateway = ContainerId::parse(&hex('b')).unwrap();
    assert_eq!(
        engine.update_nginx(dir.path(), &gateway, "old\n", "bad\n"),
        Err(EngineError::NginxRejectedAndRestored)
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
    assert_eq!(
        engine.runner().argv(),
        [
            format!("exec {} /usr/sbin/nginx -t", hex('b')),
            format!("exec {} /usr/sbin/nginx -t", hex('b')),
            format!("exec {} /usr/sbin/nginx -s reload", hex('b')),
        ]
    );
}

#[test]
fn a_failed_restore_names_its_own_step() {
    let dir = app_dir_with("old\n");
    // nginx -t fails whatever the file holds (say the app is gone).
    let engine = DockerClient::with_runner(Fake::new(|_| Err(1)), dir.path());
    let gateway = ContainerId::parse(&hex('b')).unwrap();
    match engine.update_nginx(dir.path(), &gateway, "old\n", "new\n") {
        Err(EngineError::Call { step: "restore: nginx -t in gateway", .. }) => {}
        other => panic!("expected the restore step to fail, got {other:?}"),
    }
    assert_eq!(std::fs::read_to_string(dir.path().join("nginx.conf")).unwrap(), "old\n");
}

#[test]
fn update_nginx_refuses_a_changed_file_or_a_symlink_and_touches_nothing() {
    let engine = DockerClient::with_runner(Fake::new(|_| Ok(String::new())), "/nonexistent");
    let gateway = ContainerId::parse(&hex('b')).unwrap();

    let dir = app_dir_with("edited by hand\n");
    assert_eq!(
        engine.update_nginx(dir.path(), &gateway, "old\n", "new\n"),
        Err(EngineError::ManagedFileChanged)
    );
    assert_eq!(std::fs::read_to_string(dir.path().join("nginx.conf")).unwrap(), "edited by hand\n");

    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.path().join("target"), "old\n").unwrap();
    std::os::unix::fs::symlink(dir.path().join("target"), dir.path().join("nginx.conf")).unwrap();
    assert_eq!(
        engine.update_nginx(dir.path(), &gateway, "old\n", "new\n"),
        Err(EngineError::ManagedFileChanged)
    );
    assert_eq!(std::fs::read_to_string(dir.path().join("target")).unwrap(), "old\n");
    assert!(engine.runner().argv().is_empty());
}

#[test]
fn a_failed_reload_is_not_reported_as_a_clean_rejection_even_after_restore() {
    let dir = app_dir_with("old\n");
    let path = dir.path().join("nginx.conf");
    let path_in_script = path.clone();
    // nginx -t passes; the reload of the new config fails (exit 2), the
    // restore's test and reload succeed.
    let fake = Fake::new(move |args| {
        let current = std::fs::read_to_string(&path_in_script).unwrap();
        if args.last().unwrap() == "reload" && current == "new\n" { Err(2) } else { Ok(String::new()) }
    });
    let engine = DockerClient::with_runner(fake, dir.path());
    let gateway = ContainerId::parse(&hex('b')).unwrap();
    let error = engine.update_nginx(dir.path(), &gateway, "old\n", "new\n").unwrap_err();
    assert!(matches!(error, EngineError::Call { step: "nginx reload in gateway", .. }), "{error:?}");
    assert!(!error.changed_nothing(), "a reload may have half happened: an operator must look");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
}

#[test]
fn a_deploy_that_runs_out_of_budget_gives_later_calls_only_what_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let app_dir = dir.path().join("shop");
    // The first pull eats the whole budget; the network create then fails.
    let script = deploy_script(Some(("network create --driver bridge --internal", 1)));
    let fake = Fake::new(move |args| {
        if args[0] == "pull" && args.join(" ").contains("web@") {
            std::thread::sleep(Duration::from_millis(1600));
        }
        script(args)
    });
    let engine = DockerClient::with_runner(fake, dir.path()).with_deploy_budget(Duration::from_millis(1500));
    // A fixed port below the kernel's ephemeral range (32768-60999) and
    // outside the test labs' 18000-18999: a port that `free_port` found
    // free could be any busy machine's client socket a moment later, and
    // the deploy then refused it (`PortTaken`) before its first pull, which
    // is what this test measures (seen once under load).
    let error = engine.deploy(&spec(&app_dir, 24713), &NoProgress).unwrap_err();
    assert!(
        !matches!(error, EngineError::PortTaken { .. }),
        "port 24713 is taken on this machine: {error:?}"
    );
    let calls = engine.runner().calls.lock().unwrap().clone();
    let timeout_of =
        |prefix: &str| calls.iter().find(|c| c.args.join(" ").starts_with(prefix)).unwrap().timeout;
    let first = timeout_of("pull --quiet 127.0.0.1:15000/volce-lab/web");
    assert!(
        first > Duration::from_secs(1) && first <= Duration::from_millis(1500),
        "{first:?}: what is left, not PULL"
    );
    assert_eq!(timeout_of("pull --quiet 127.0.0.1:15000/volce-lab/gateway"), Duration::from_secs(1));
    // Cleanup after the failure is not cut short by the spent budget.
    assert!(calls.iter().filter(|c| c.args[0] != "pull").all(|c| c.timeout >= Duration::from_secs(1)));
    assert!(calls.last().unwrap().timeout > Duration::from_secs(1), "{:?}", calls.last().unwrap().args);
}

#[test]
fn logs_reads_one_container_by_id_with_both_streams() {
    let engine =
        DockerClient::with_runner(Fake::new(|_| Ok("2026-12-01T10:00:00.1Z hello\n".into())), "/tmp");
    let id = ContainerId::parse(&hex('a')).unwrap();
    let out = engine.logs(&id, LogWindow { tail: 50, since_minutes: None }).unwrap();
    assert_eq!(out.stdout, b"2026-12-01T10:00:00.1Z hello\n");
    engine.logs(&id, LogWindow { tail: 200, since_minutes: Some(1440) }).unwrap();
    assert_eq!(
        engine.runner().argv(),
        [
            format!("logs --tail 50 --timestamps -- {}", hex('a')),
            format!("logs --tail 200 --since 1440m --timestamps -- {}", hex('a')),
        ]
    );
    let calls = engine.runner().calls.lock().unwrap().clone();
    assert!(calls.iter().all(|c| c.stderr_is_data && c.stdout_limit == super::limits::LOGS_OUTPUT));
    // Every other call keeps docker's stderr away from stdout.
    let other = DockerClient::with_runner(Fake::new(|_| Ok(String::new())), "/tmp");
    other.remove_image(&ImageId::parse(&format!("sha256:{}", hex('b'))).unwrap()).unwrap();
    assert!(other.runner().calls.lock().unwrap().iter().all(|c| !c.stderr_is_data));
}

/// Tried: the check before every `service_logs` read. One inspect of
/// exactly the recorded id; when it fails (gone or engine down look alike
/// to docker) the snapshot decides: gone is `None`, an engine that fails
/// the snapshot too is an error.
#[test]
fn one_container_is_one_inspect_and_a_failed_inspect_asks_the_snapshot() {
    let row = format!(
        r#"{{"id":"{}","name":"/vl-shop-app","image":"sha256:{}","state":"running","labels":{{"io.volce-lab.app":"shop","io.volce-lab.role":"app"}},"ports":{{}}}}"#,
        hex('c'),
        hex('d')
    );
    let id = ContainerId::parse(&hex('c')).unwrap();
    let found = DockerClient::with_runner(Fake::new(move |_| Ok(format!("{row}\n"))), "/tmp");
    let container = found.container(&id).unwrap().expect("the recorded container");
    assert_eq!((container.app(), container.role()), (Some("shop"), Some("app")));
    assert_eq!(
        found.runner().argv(),
        [format!("inspect --type container --format {INSPECT_TEMPLATE} -- {}", hex('c'))]
    );

    // Gone: inspect fails, the snapshot (an empty engine) has no such id.
    let gone = DockerClient::with_runner(
        Fake::new(|args| match args[0].as_str() {
            "inspect" => Err(1),
            "ps" | "image" | "network" => Ok(String::new()),
            _ => Err(99),
        }),
        "/tmp",
    );
    assert_eq!(gone.container(&id).unwrap(), None);
    assert!(gone.runner().argv().contains(&"ps -aq --no-trunc".to_owned()), "the snapshot decided");

    // The engine is down: both fail, and that is an error, never `None`.
    let down = DockerClient::with_runner(Fake::new(|_| Err(1)), "/tmp");
    assert!(down.container(&id).is_err());
}

#[test]
fn a_failed_logs_call_names_its_step() {
    let engine = DockerClient::with_runner(Fake::new(|_| Err(1)), "/tmp");
    let id = ContainerId::parse(&hex('a')).unwrap();
    let error = engine.logs(&id, LogWindow { tail: 5, since_minutes: None }).unwrap_err();
    assert!(matches!(error, EngineError::Call { step: "read container logs", .. }), "{error:?}");
}

mod accessory;
mod edge;
mod images;
mod lifecycle;
mod refusals;
mod task;

/// Tried: the networks of a plan, as `show`/`resolve`/`doctor` ask for
/// them: one read-only `network ls` by the plan's label; a line without a
/// full id is unparsable, never guessed.
#[test]
fn plan_networks_lists_by_the_plans_label_and_refuses_a_garbled_line() {
    let dir = tempfile::tempdir().unwrap();
    let plan = PlanId::parse("0123456789abcdef0123456789abcdef").unwrap();
    let fake = Fake::new(|_| Ok(format!("{} vl-shop\n{} vl-shop_edge\n", hex('3'), hex('4'))));
    let engine = DockerClient::with_runner(fake, dir.path());
    let networks = engine.plan_networks(&plan).unwrap();
    assert_eq!(
        networks.iter().map(|n| (n.id.as_str(), n.name.as_str())).collect::<Vec<_>>(),
        [(hex('3').as_str(), "vl-shop"), (hex('4').as_str(), "vl-shop_edge")]
    );
    assert_eq!(
        engine.runner().argv(),
        [format!(
            "network ls --no-trunc --filter label=io.volce-lab.plan={plan} --format {{{{.ID}}}} {{{{.Name}}}}"
        )]
    );
    let garbled = DockerClient::with_runner(Fake::new(|_| Ok("abc vl-shop\n".into())), dir.path());
    assert_eq!(garbled.plan_networks(&plan), Err(EngineError::Unparsable { step: "list plan networks" }));
}

#[test]
fn a_deploy_whose_pulled_image_declares_a_volume_creates_nothing_and_is_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let app_dir = dir.path().join("shop");
    let port = free_port();
    let script = deploy_script(None);
    let fake = Fake::new(move |args| {
        if args[0] == "image" && args.last().is_some_and(|r| r.contains("/web@")) {
            return Ok("{\"/data\":{},\"/cache\":{}}\n".to_owned());
        }
        script(args)
    });
    let engine = DockerClient::with_runner(fake, dir.path());
    let cause = EngineError::ImageDeclaresVolumes {
        image: spec(&app_dir, port).app_image,
        volumes: vec!["/cache".into(), "/data".into()],
    };
    assert_eq!(
        engine.deploy(&spec(&app_dir, port), &NoProgress),
        Err(EngineError::RolledBack { cause: Box::new(cause), app_log: None })
    );
    let argv = engine.runner().argv();
    assert!(
        !argv
            .iter()
            .any(|a| a.starts_with("network create") || a.starts_with("create") || a.starts_with("run")),
        "nothing is created from it: {argv:?}"
    );
    assert!(!app_dir.exists(), "no app directory either");
}

#[test]
fn declared_volumes_parse_strictly() {
    use super::parse::parse_volumes;
    assert_eq!(parse_volumes(b"null\n").unwrap(), Vec::<String>::new());
    assert_eq!(parse_volumes(b"{}").unwrap(), Vec::<String>::new());
    assert_eq!(parse_volumes(br#"{"/var/lib/x":{},"/data":{}}"#).unwrap(), ["/data", "/var/lib/x"]);
    for bad in [&b""[..], b"[\"/data\"]", b"{\"/data\":{}} trailing", b"\xff"] {
        assert!(parse_volumes(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn network_options_asks_by_exact_name_and_reads_labels_and_options() {
    let fake = Fake::new(|args| {
        match args.last().map(String::as_str) {
        Some("vl-shop") => Ok(
            r#"{"labels":{"io.volce-lab.app":"shop"},"options":{"com.docker.network.bridge.inhibit_ipv4":"true"}}"#
                .to_owned(),
        ),
        Some("vl-bare") => Ok(r#"{"labels":null,"options":null}"#.to_owned()),
        _ => Err(1),
    }
    });
    let engine = DockerClient::with_runner(fake, "/nonexistent");
    let shop = engine.network_options("vl-shop").unwrap().unwrap();
    assert_eq!(shop.labels["io.volce-lab.app"], "shop");
    assert_eq!(shop.options["com.docker.network.bridge.inhibit_ipv4"], "true");
    assert_eq!(engine.network_options("vl-bare").unwrap().unwrap(), NetworkOptions::default());
    assert_eq!(engine.network_options("vl-none").unwrap(), None, "exit 1: no such network");
    assert_eq!(
        engine.runner().argv()[0],
        r#"network inspect --format {"labels":{{json .Labels}},"options":{{json .Options}}} -- vl-shop"#
    );
}

/// Tried: a deploy whose entry has configuration (stopped after the
/// gateway's create): the app's create reads the env file by path, right
/// after the hardening; no argv names a value, and the gateway and the
/// check container get no configuration.
#[test]
fn configuration_reaches_only_the_app_container_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let app_dir = dir.path().join("shop");
    let mut spec = spec(&app_dir, free_port());
    spec.env_file = Some(crate::vocab::EnvFileUse {
        path: "/etc/volce-lab/apps/shop.env".into(),
        hmac_sha256: "e".repeat(64),
    });
    let engine =
        DockerClient::with_runner(Fake::new(deploy_script(Some(("network connect", 1)))), dir.path());
    assert!(engine.deploy(&spec, &Steps::default()).is_err());
    let argv = engine.runner().argv();
    let with_env: Vec<&String> = argv.iter().filter(|line| line.contains("--env-file")).collect();
    assert_eq!(with_env.len(), 1, "{argv:#?}");
    assert!(with_env[0].starts_with("create --name vl-shop-app "), "{}", with_env[0]);
    assert!(
        with_env[0].contains("--pull never --env-file /etc/volce-lab/apps/shop.env --network vl-shop "),
        "{}",
        with_env[0]
    );
    assert!(argv.iter().all(|line| !line.contains("--env ") && !line.contains(" -e ")));
}

/// Tried: a container's environment as docker prints it, `null` for none,
/// and a gone container (exit 1): the entries, empty, empty; the argv names
/// the container by full id after `--`.
#[test]
fn container_env_reads_one_containers_config_env() {
    let dir = tempfile::tempdir().unwrap();
    let id = ContainerId::parse(&hex('a')).unwrap();
    let engine = DockerClient::with_runner(Fake::new(|_| Ok("[\"A=1\",\"B=x=y\"]\n".to_owned())), dir.path());
    assert_eq!(engine.container_env(&id).unwrap(), ["A=1", "B=x=y"]);
    assert_eq!(
        engine.runner().argv(),
        [format!("inspect --type container --format {{{{json .Config.Env}}}} -- {}", hex('a'))]
    );
    let engine = DockerClient::with_runner(Fake::new(|_| Ok("null\n".to_owned())), dir.path());
    assert!(engine.container_env(&id).unwrap().is_empty());
    let engine = DockerClient::with_runner(Fake::new(|_| Err(1)), dir.path());
    assert!(engine.container_env(&id).unwrap().is_empty());
}

/// `catalog pin`'s two calls: the reference after `--`, one argv element
/// each, and docker's `null`s read as empty.
#[test]
fn pin_pulls_and_inspects_by_fixed_argv() {
    let reference = "127.0.0.1:15000/team/web:1";
    let fake = Fake::new(|args| match args[0].as_str() {
        "pull" => Ok(String::new()),
        "image" if args.last().unwrap() == "absent:1" => Err(1),
        "image" => Ok(format!(
            r#"{{"config":{{"User":"1000","Cmd":["/app"],"Entrypoint":null,"ExposedPorts":{{"8080/tcp":{{}}}},"Volumes":null}},"digests":["127.0.0.1:15000/team/web@sha256:{}"]}}"#,
            "a".repeat(64)
        )),
        _ => Err(2),
    });
    let client = DockerClient::with_runner(fake, "/nonexistent");
    client.pull_reference(reference).unwrap();
    let image = client.local_image(reference).unwrap().unwrap();
    assert_eq!(image.config.user, "1000");
    assert!(image.config.volumes.is_empty() && image.config.entrypoint.is_empty());
    assert_eq!(image.config.exposed_ports.keys().collect::<Vec<_>>(), ["8080/tcp"]);
    assert_eq!(image.digests.len(), 1);
    assert_eq!(client.local_image("absent:1").unwrap(), None, "exit 1: no such image");
    assert_eq!(
        client.runner().argv(),
        [
            format!("pull --quiet -- {reference}"),
            format!("image inspect --format {} -- {reference}", super::PIN_TEMPLATE),
            format!("image inspect --format {} -- absent:1", super::PIN_TEMPLATE),
        ]
    );
}

/// The app container's data mount: the mount point as the source, the
/// entry's path as the target, one argv element; nothing without data.
#[test]
fn the_data_mount_binds_the_mount_point_at_the_entrys_path() {
    let data = crate::vocab::DataUse {
        path: crate::vocab::DataPath::parse("/data").unwrap(),
        image: "/var/lib/volce-lab/data/shop.ext4".into(),
        mount: "/var/lib/volce-lab/data/shop".into(),
        max_mib: 64,
    };
    assert_eq!(
        super::argv::data_mount(Some(&data)),
        ["--mount", "type=bind,source=/var/lib/volce-lab/data/shop,target=/data"]
    );
    assert!(super::argv::data_mount(None).is_empty());
}

/// Issue 37: `image_pull_failed` hid the registry's reason. Docker's own
/// words for each cause (Docker 20.10-28, a local registry and Docker Hub)
/// name one reason of the closed set; the words themselves go nowhere.
#[test]
fn a_failed_pull_names_the_registrys_reason_from_dockers_words() {
    use super::PullFailure::*;
    let cases = [
        (
            "Error response from daemon: manifest for 127.0.0.1:15000/team/web:nope not found: manifest unknown: manifest unknown",
            NoSuchImage,
        ),
        ("Error response from daemon: manifest unknown", NoSuchImage),
        (
            "Error response from daemon: pull access denied for nosuch, repository does not exist or may require 'docker login': denied: requested access to the resource is denied",
            NotFoundOrDenied,
        ),
        (
            "Error response from daemon: Head \"https://registry.example/v2/team/web/manifests/1\": unauthorized: authentication required",
            AccessDenied,
        ),
        (
            "Error response from daemon: Get \"https://r.example/v2/\": no basic auth credentials",
            AccessDenied,
        ),
        (
            "Error response from daemon: Get \"http://127.0.0.1:1/v2/\": dial tcp 127.0.0.1:1: connect: connection refused",
            Unreachable,
        ),
        (
            "Error response from daemon: Get \"https://nowhere.invalid/v2/\": dial tcp: lookup nowhere.invalid: no such host",
            Unreachable,
        ),
        (
            "Error response from daemon: Get \"https://127.0.0.1:5000/v2/\": http: server gave HTTP response to HTTPS client",
            Unreachable,
        ),
        ("Error response from daemon: something new", Unrecognised),
        ("", Unrecognised),
    ];
    for (words, reason) in cases {
        assert_eq!(PullFailure::of_words(words.as_bytes()), reason, "{words}");
    }
    for reason in <PullFailure as strum::VariantArray>::VARIANTS {
        let step = reason.next_step();
        assert!(step.starts_with(char::is_uppercase) && step.ends_with('.'), "{step}");
        assert!(!reason.clause().ends_with('.'), "a clause, inside a sentence");
    }
}

/// The pull's words are read (stderr as data) and never shown; our own
/// time limit is its own reason.
#[test]
fn a_pull_reads_dockers_words_and_its_timeout_is_its_own_reason() {
    struct Words(ExecutionStatus, &'static str);
    impl Runner for Words {
        fn run(&self, call: &DockerCall) -> ProcessOutput {
            assert!(call.stderr_is_data, "the words are needed to name the reason");
            let mut execution = Execution::not_started(self.0);
            execution.completion = Completion::Confirmed;
            ProcessOutput { execution, stdout: Vec::new(), stderr_len: 0, stderr: self.1.as_bytes().to_vec() }
        }
    }
    let refused = DockerClient::with_runner(
        Words(ExecutionStatus::NonzeroExit, "Error response from daemon: manifest unknown"),
        "/nonexistent",
    );
    assert_eq!(refused.pull_reference("127.0.0.1:15000/a:1"), Err(super::PullFailure::NoSuchImage));
    let slow = DockerClient::with_runner(Words(ExecutionStatus::Timeout, ""), "/nonexistent");
    assert_eq!(slow.pull_reference("127.0.0.1:15000/a:1"), Err(super::PullFailure::TimedOut));
}
