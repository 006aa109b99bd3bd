//! Benchmark of `volce-lab mcp-serve`, measured from outside over stdio in
//! demo mode, against the binary built with the bench (= release) profile:
//!
//! - startup: time from spawn to the `initialize` result (median and worst
//!   of 30 spawns);
//! - `tools/call` latency (cloud_check disk, after identity), p50 and p99
//!   over 1,000 sequential calls, each one write + one read of a line;
//! - peak RSS of the server (VmHWM from /proc/<pid>/status, read before it exits);
//! - peak RSS with a targets file of 1 and of 20 ssh targets (issue 44):
//!   after `tools/list` and one `cloud_check identity` over every target,
//!   each refused on 127.0.0.1 (a port nothing listens on): the server's
//!   own share of a fleet, without an sshd. `fleet_bench` measures it with
//!   the targets answering.
//!
//! Targets on a 2-core machine: startup < 10 ms, p50 < 0.1 ms, peak RSS < 8 MiB
//! (one target) and <= 12 MiB (20 targets).
//! Run: `cargo bench --bench mcp_stdio` (prints one line per figure and
//! exits 1 when a target is missed). Runs unprivileged; no network but
//! loopback.

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use stats::{ms, percentile};

#[path = "../tests/support/named_targets.rs"]
mod named_targets;
#[path = "support/stats.rs"]
mod stats;

const BIN: &str = env!("CARGO_BIN_EXE_volce-lab");
const STARTS: usize = 30;
const CALLS: usize = 1000;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Server {
    fn spawn(state: &std::path::Path) -> Server {
        Server::spawn_with(state, &[])
    }

    /// [`Server::spawn`] with `env` added to its clean environment.
    fn spawn_with(state: &std::path::Path, env: &[(&str, &std::ffi::OsStr)]) -> Server {
        let mut child = Command::new(BIN)
            .arg("mcp-serve")
            .env_clear()
            .env("XDG_STATE_HOME", state)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn volce-lab mcp-serve");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Server { child, stdin, stdout, line: String::new() }
    }

    /// Sends one line and, for a request, reads its one-line answer.
    fn exchange(&mut self, message: &str, answer: bool) -> &str {
        self.stdin.write_all(message.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
        self.line.clear();
        if answer {
            self.stdout.read_line(&mut self.line).unwrap();
            assert!(!self.line.is_empty(), "the server closed stdout");
        }
        &self.line
    }

    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM");
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    fn finish(mut self) {
        drop(self.stdin);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "server exit: {status}");
    }
}

/// Peak RSS in KiB of a server whose targets file names `count` ssh
/// targets, after `tools/list` and one identity fan-out over all of them,
/// every connection refused on loopback.
fn fleet_peak_rss_kib(count: usize) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let names = named_targets::names(count);
    std::fs::write(dir.path().join("targets.toml"), named_targets::targets_toml(&names)).unwrap();
    // The catch-all keeps every name on loopback: nothing goes to DNS.
    let ssh_config = format!(
        "Host {}\n    Port {port}\n    BatchMode yes\nHost *\n    HostName 127.0.0.1\n",
        names.join(" ")
    );
    std::fs::write(dir.path().join("ssh_config"), ssh_config).unwrap();
    let (targets, config) = (dir.path().join("targets.toml"), dir.path().join("ssh_config"));
    let env = [
        ("PATH", std::ffi::OsStr::new("/usr/bin:/bin")),
        ("HOME", dir.path().as_os_str()),
        // The tempdir is ours and 0700: control sockets stay in it.
        ("XDG_RUNTIME_DIR", dir.path().as_os_str()),
        ("VOLCE_LAB_TARGETS", targets.as_os_str()),
        ("VOLCE_LAB_SSH_CONFIG", config.as_os_str()),
    ];
    let mut server = Server::spawn_with(&dir.path().join("state"), &env);
    server.exchange(INITIALIZE, true);
    server.exchange(INITIALIZED, false);
    let list = server.exchange(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#, true);
    assert!(list.contains("cloud_check"), "{list}");
    let fan_out = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"cloud_check","arguments":{"check":"identity","targets":["*"]}}}"#;
    let answer = server.exchange(fan_out, true);
    assert!(answer.contains(&format!(r#""failed":{count}"#)), "every target refused: {answer}");
    let peak = server.peak_rss_kib();
    server.finish();
    peak
}

fn main() {
    // `cargo bench` passes --bench. Under `cargo test --all-targets` this is a
    // debug build whose figures mean nothing: say so and pass.
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("mcp_stdio: skipped (measure with `cargo bench --bench mcp_stdio`)");
        return;
    }
    let state = std::env::temp_dir().join(format!("volce-lab-bench-{}", std::process::id()));
    std::fs::create_dir_all(&state).unwrap();

    let mut starts = Vec::with_capacity(STARTS);
    for _ in 0..STARTS {
        let started = Instant::now();
        let mut server = Server::spawn(&state);
        let answer = server.exchange(INITIALIZE, true);
        starts.push(started.elapsed());
        assert!(answer.contains("\"protocolVersion\""), "{answer}");
        server.finish();
    }

    let mut server = Server::spawn(&state);
    server.exchange(INITIALIZE, true);
    server.exchange(INITIALIZED, false);
    let identity = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cloud_check","arguments":{"check":"identity"}}}"#;
    assert!(server.exchange(identity, true).contains(r#""status":"ok""#));
    let mut latencies = Vec::with_capacity(CALLS);
    for id in 0..CALLS {
        let call = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"cloud_check","arguments":{{"check":"disk"}}}}}}"#,
            id + 2
        );
        let started = Instant::now();
        let answer = server.exchange(&call, true);
        latencies.push(started.elapsed());
        assert!(answer.contains(r#""status":"ok""#), "{answer}");
    }
    let peak_kib = server.peak_rss_kib();
    server.finish();
    let _ = std::fs::remove_dir_all(&state);

    let startup = percentile(&starts, 0.5);
    let p50 = percentile(&latencies, 0.5);
    let p99 = percentile(&latencies, 0.99);
    let peak_mib = peak_kib as f64 / 1024.0;
    println!(
        "mcp_stdio startup (spawn -> initialize result): median {:.2} ms, max {:.2} ms over {STARTS} spawns (target < 10 ms)",
        ms(startup),
        ms(percentile(&starts, 1.0))
    );
    println!(
        "mcp_stdio tools/call cloud_check disk: p50 {:.3} ms, p99 {:.3} ms over {CALLS} calls (target p50 < 0.1 ms)",
        ms(p50),
        ms(p99)
    );
    println!("mcp_stdio peak RSS (VmHWM): {peak_mib:.2} MiB (target < 8 MiB)");
    let (one_mib, twenty_mib) =
        (fleet_peak_rss_kib(1) as f64 / 1024.0, fleet_peak_rss_kib(20) as f64 / 1024.0);
    println!(
        "mcp_stdio peak RSS, targets file, identity fan-out refused on loopback: 1 target {one_mib:.2} MiB \
         (target <= 8 MiB), 20 targets {twenty_mib:.2} MiB (target <= 12 MiB)"
    );
    let missed: Vec<&str> = [
        (startup >= Duration::from_millis(10), "startup"),
        (p50 >= Duration::from_micros(100), "p50 latency"),
        (peak_mib >= 8.0, "peak RSS"),
        (one_mib > 8.0, "peak RSS with 1 target"),
        (twenty_mib > 12.0, "peak RSS with 20 targets"),
    ]
    .into_iter()
    .filter_map(|(missed, name)| missed.then_some(name))
    .collect();
    if !missed.is_empty() {
        println!("mcp_stdio: FAILED: target missed: {}", missed.join(", "));
        std::process::exit(1);
    }
}
