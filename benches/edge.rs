//! Benchmark: what the HTTPS edge costs (issue 39). Deploys one app on the
//! real engine through the host helper's pipeline, starts the edge on
//! 127.0.0.1 ports with a certificate of a CA the bench makes (Debian's
//! openssl), exposes the app, then measures with curl (every name pinned to
//! 127.0.0.1 by `--resolve`):
//! - the added latency: p50 of a request through the edge over HTTPS next
//!   to the same request to the gateway over plain HTTP, once with a new
//!   connection (and TLS handshake) per request and once over one kept-alive
//!   connection;
//! - failed HTTPS requests through the edge, polled every 50 ms, across
//!   updates of the exposed app and a rollback (target: none).
//!
//! Runs as root; removes the app and the edge again.
//!
//!     cargo bench --bench edge [-- REQUESTS]
//!
//! Without root or the test images it says so and measures nothing. Never
//! touches an installed host: its state is a temporary directory, its edge
//! ports 24080 and 24443 on 127.0.0.1.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use volce_lab::host::clock::SystemClock;
use volce_lab::host::{HostPaths, ProcLiveness};

const POLICY: &str = "/var/tmp/volce-lab-test/policy.json";
const HTTP: u16 = 24080;
const HTTPS: u16 = 24443;

fn rpc(paths: &HostPaths, request: Value) -> Value {
    let engine = volce_lab::host::real_engine(paths);
    volce_lab::host::Host::new(paths.clone(), engine, SystemClock, ProcLiveness)
        .rpc("vl-agent", request.to_string().as_bytes())
        .to_json()
}

/// Plan, approve when needed, execute: the execute reply.
fn run(paths: &HostPaths, action: &str, parameters: Value) -> Value {
    let plan = rpc(paths, json!({"operation": "plan", "action": action, "parameters": parameters}));
    assert_eq!(plan["status"], "ok", "{action}: {plan}");
    let id = plan["result"]["id"].as_str().unwrap();
    if plan["result"]["requires_approval"] == true {
        let digest = plan["result"]["digest"].as_str().unwrap();
        let engine = volce_lab::host::real_engine(paths);
        volce_lab::host::Host::new(paths.clone(), engine, SystemClock, ProcLiveness)
            .approve("vl-operator", id, digest, |_, _| volce_lab::host::Decision::Confirmed)
            .unwrap();
    }
    rpc(paths, json!({"operation": "execute", "plan_id": id}))
}

/// Removes the bench's edge and app, whatever happened.
struct Cleanup(String, std::path::PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = volce_lab::docker::client::DockerClient::new(&self.1).edge_remove();
        let docker = |args: &[&str]| Command::new("/usr/bin/docker").args(args).output();
        let filter = format!("label=io.volce-lab.app={}", self.0);
        if let Ok(out) = docker(&["ps", "-aq", "--no-trunc", "--filter", &filter]) {
            for id in String::from_utf8_lossy(&out.stdout).lines() {
                let _ = docker(&["rm", "-f", id]);
            }
        }
        for network in [format!("vl-{}", self.0), format!("vl-{}_edge", self.0), "vl_edge".into()] {
            let _ = docker(&["network", "rm", &network]);
        }
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA and a certificate for `name` in `dir`: ca.pem, cert.pem, cert.key (0600).
fn certificate(dir: &Path, name: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let ca = ["req", "-x509", ec[0], ec[1], ec[2], ec[3], ec[4], "-keyout", "ca.key", "-out", "ca.pem"];
    openssl(dir, &[&ca[..], &["-days", "2", "-subj", "/CN=volce-lab bench CA"]].concat());
    let subject = format!("/CN={name}");
    let req = ["req", ec[0], ec[1], ec[2], ec[3], ec[4], "-keyout", "cert.key", "-out", "cert.csr"];
    openssl(dir, &[&req[..], &["-subj", &subject]].concat());
    std::fs::write(dir.join("san.ext"), format!("subjectAltName=DNS:{name}\n")).unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "cert.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "cert.pem",
            "-days",
            "2",
            "-extfile",
            "san.ext",
        ],
    );
    std::fs::set_permissions(dir.join("cert.key"), std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// curl's `time_total` of each of `urls` (one process: kept-alive
/// connections where it can), in ms; `None` for a failed transfer.
fn curl_times(ca: &Path, resolve: &[String], urls: &[String]) -> Vec<Option<f64>> {
    let mut command = Command::new("curl");
    command.args([
        "-s",
        "--max-time",
        "5",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{time_total}\n",
        "--cacert",
    ]);
    command.arg(ca);
    for entry in resolve {
        command.args(["--resolve", entry]);
    }
    let out = command.args(urls).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let mut words = line.split(' ');
            let ok = words.next().is_some_and(|code| code == "200");
            let seconds: Option<f64> = words.next().and_then(|t| t.parse().ok());
            seconds.filter(|_| ok).map(|s| s * 1000.0)
        })
        .collect()
}

fn p50(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The p50 in ms of `n` requests to `url`: one curl each (a new connection
/// and, over HTTPS, a new handshake) or all in one curl (kept alive).
fn latency(ca: &Path, resolve: &[String], url: &str, n: usize, kept_alive: bool) -> f64 {
    let times: Vec<f64> = if kept_alive {
        curl_times(ca, resolve, &vec![url.to_owned(); n]).into_iter().skip(1).flatten().collect()
    } else {
        (0..n).filter_map(|_| curl_times(ca, resolve, &[url.to_owned()])[0]).collect()
    };
    assert!(times.len() >= n.saturating_sub(1), "{url}: {} of {n} requests failed", n - times.len());
    p50(times)
}

/// (polls, failed) of HTTPS requests through the edge while `work` runs.
fn polled(ca: &Path, resolve: &[String], url: &str, work: impl FnOnce()) -> (usize, usize) {
    let stop = Arc::new(AtomicBool::new(false));
    let (flag, ca, resolve, url) = (stop.clone(), ca.to_owned(), resolve.to_vec(), url.to_owned());
    let poller = std::thread::spawn(move || {
        let (mut polls, mut failed) = (0, 0);
        while !flag.load(Ordering::SeqCst) {
            if curl_times(&ca, &resolve, std::slice::from_ref(&url))[0].is_none() {
                failed += 1;
            }
            polls += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        (polls, failed)
    });
    work();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    poller.join().unwrap()
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("edge: skipped (measure with `cargo bench --bench edge`, as root)");
        return;
    }
    let policy: Option<Value> = std::fs::read(POLICY).ok().and_then(|b| serde_json::from_slice(&b).ok());
    if !nix::unistd::geteuid().is_root() || !policy.as_ref().is_some_and(|p| p["catalog"]["web2"].is_string())
    {
        println!("edge: skipped (needs root, the Docker engine and scripts/test-images: {POLICY} with web2)");
        return;
    }
    let requests: usize =
        std::env::args().skip(1).find(|a| a != "--bench").map_or(50, |a| a.parse().expect("a count"));
    let dir = tempfile::tempdir().unwrap();
    let app = format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let name = format!("{app}.bench");
    certificate(dir.path(), &name);
    let mut policy = policy.unwrap();
    policy["edge"] = json!({"http": format!("127.0.0.1:{HTTP}"), "https": format!("127.0.0.1:{HTTPS}"),
        "certificates": {name.as_str(): {"cert": dir.path().join("cert.pem"), "key": dir.path().join("cert.key")}}});
    std::fs::write(dir.path().join("policy.json"), policy.to_string()).unwrap();
    let paths = HostPaths {
        policy: dir.path().join("policy.json"),
        state_dir: dir.path().join("state"),
        owner_uid: 0,
    };
    // As setup makes it: the state directory root's 0700, before the edge's files go in it.
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new().mode(0o700).create(&paths.state_dir).unwrap();
    }
    let _cleanup = Cleanup(app.clone(), paths.state_dir.clone());
    volce_lab::install::edge::enable(&paths).expect("edge enable");
    let port =
        (18900..18999).find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok()).expect("a free port");
    let deployed = run(
        &paths,
        "deploy",
        json!({"app": app, "image": "web", "host_port": port, "container_port": 8080, "server_name": name}),
    );
    assert_eq!(deployed["result"]["outcome"], "completed", "{deployed}");
    let started = Instant::now();
    let exposed = run(&paths, "expose", json!({"app": app}));
    assert_eq!(exposed["result"]["outcome"], "completed", "{exposed}");
    println!("edge: expose with a certificate from files: {} ms", started.elapsed().as_millis());

    let ca = dir.path().join("ca.pem");
    let resolve = vec![format!("{name}:{HTTPS}:127.0.0.1"), format!("{name}:{port}:127.0.0.1")];
    let (direct, edge) = (format!("http://{name}:{port}/"), format!("https://{name}:{HTTPS}/"));
    for kept_alive in [false, true] {
        let plain = latency(&ca, &resolve, &direct, requests, kept_alive);
        let tls = latency(&ca, &resolve, &edge, requests, kept_alive);
        let how = if kept_alive { "one kept-alive connection" } else { "a new connection each" };
        println!(
            "edge: p50 over {requests} requests, {how}: gateway (HTTP) {plain:.2} ms, through the edge (HTTPS) \
             {tls:.2} ms, added {:.2} ms",
            tls - plain
        );
    }

    let mut failures = 0;
    for (action, parameters) in [
        ("update", json!({"app": app, "image": "web2"})),
        ("update", json!({"app": app, "image": "web"})),
        ("rollback", json!({"app": app})),
    ] {
        let started = Instant::now();
        let mut reply = Value::Null;
        let (polls, failed) = polled(&ca, &resolve, &edge, || reply = run(&paths, action, parameters));
        let outcome =
            reply["result"]["outcome"].as_str().or(reply["code"].as_str()).unwrap_or("?").to_owned();
        println!(
            "edge: {action:<8} {outcome:<10} in {:>5} ms: {polls:>3} HTTPS polls through the edge, {failed} failed",
            started.elapsed().as_millis()
        );
        failures += failed;
    }
    println!("edge: {failures} failed HTTPS requests across 2 updates and a rollback (target: none)");
    if failures > 0 {
        println!("edge: FAILED: {failures} requests failed through the edge");
        std::process::exit(1);
    }
}
