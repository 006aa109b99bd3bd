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
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use volce_lab::host::HostPaths;

#[path = "support/host_pipeline.rs"]
mod host_pipeline;
#[path = "support/stats.rs"]
mod stats;
use host_pipeline::{AppCleanup, POLICY, free_app_port, outcome, polled, run};

const HTTP: u16 = 24080;
const HTTPS: u16 = 24443;

/// Removes the bench's edge (and, by its `AppCleanup`, its app), whatever
/// happened.
struct Cleanup {
    state_dir: std::path::PathBuf,
    /// Dropped after the edge is gone.
    _app: AppCleanup,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = volce_lab::docker::client::DockerClient::new(&self.state_dir).edge_remove();
        let _ = Command::new("/usr/bin/docker").args(["network", "rm", "vl_edge"]).output();
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
/// connections where it can); `None` for a failed transfer.
fn curl_times(ca: &Path, resolve: &[String], urls: &[String]) -> Vec<Option<Duration>> {
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
            seconds.filter(|_| ok).map(Duration::from_secs_f64)
        })
        .collect()
}

/// The p50 in ms of `n` requests to `url`: one curl each (a new connection
/// and, over HTTPS, a new handshake) or all in one curl (kept alive).
fn latency(ca: &Path, resolve: &[String], url: &str, n: usize, kept_alive: bool) -> f64 {
    let times: Vec<Duration> = if kept_alive {
        curl_times(ca, resolve, &vec![url.to_owned(); n]).into_iter().skip(1).flatten().collect()
    } else {
        (0..n).filter_map(|_| curl_times(ca, resolve, &[url.to_owned()])[0]).collect()
    };
    assert!(times.len() >= n.saturating_sub(1), "{url}: {} of {n} requests failed", n - times.len());
    stats::ms(stats::p50(&times))
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
    let _cleanup = Cleanup { state_dir: paths.state_dir.clone(), _app: AppCleanup(app.clone()) };
    volce_lab::install::edge::enable(&paths).expect("edge enable");
    let port = free_app_port();
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
        let (ca, resolve, url) = (ca.clone(), resolve.clone(), edge.clone());
        let good = move || curl_times(&ca, &resolve, std::slice::from_ref(&url))[0].is_some();
        let seen = polled(good, || reply = run(&paths, action, parameters));
        println!(
            "edge: {action:<8} {:<10} in {:>5} ms: {:>3} HTTPS polls through the edge, {} failed",
            outcome(&reply),
            started.elapsed().as_millis(),
            seen.polls,
            seen.failed
        );
        failures += seen.failed;
    }
    println!("edge: {failures} failed HTTPS requests across 2 updates and a rollback (target: none)");
    if failures > 0 {
        println!("edge: FAILED: {failures} requests failed through the edge");
        std::process::exit(1);
    }
}
