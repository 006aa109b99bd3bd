//! Benchmark of a fan-out (issue 23): `volce-lab mcp-serve` (bench profile)
//! with a targets file of 20 targets, every one an alias of the e2e sshd on
//! 127.0.0.1 with its own ssh master, spoken to over stdio:
//!
//! - the first `cloud_check identity` over all 20 (cold masters), reported;
//! - `cloud_check disk` fanned out over 1, 5, 10 and 20 targets with the
//!   masters up, p50 of each; target p50(20) / p50(1) <= 2.5;
//! - the server's peak RSS (VmHWM) after all of it; target <= 12 MiB;
//! - the CPU time `mcp-serve` itself used per call of each width (user +
//!   system, from /proc), which says how much of a fan-out is the
//!   workstation's: with the in-process mux it starts no ssh client, and
//!   every "server" here is the one sshd on the same cores.
//!
//! Run as root after scripts/e2e-setup: `cargo bench --bench fleet_bench -- 20`
//! (the number is the rounds per width). Prints `skipped` with the reason
//! where the e2e installation is missing.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use stats::{ms, p50};

#[path = "support/stats.rs"]
mod stats;

const BIN: &str = env!("CARGO_BIN_EXE_volce-lab");
const E2E_DIR: &str = "/var/tmp/volce-lab-e2e";
const TARGETS: usize = 20;
const WIDTHS: [usize; 4] = [1, 5, 10, 20];

struct Server {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Server {
    /// One tools/call, its answer's structured content.
    fn call(&mut self, arguments: serde_json::Value) -> serde_json::Value {
        self.next_id += 1;
        let request = serde_json::json!({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
            "params": {"name": "cloud_check", "arguments": arguments}});
        writeln!(self.stdin, "{request}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let answer: serde_json::Value = serde_json::from_str(&line).expect("one JSON-RPC line");
        answer["result"]["structuredContent"].clone()
    }
}

/// User + system CPU time of `pid` so far, in ms (from /proc/PID/stat).
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> =
        stat.rsplit_once(") ").map(|(_, rest)| rest.split(' ').collect()).unwrap_or_default();
    let ticks: f64 = [11, 12].iter().filter_map(|i| fields.get(*i)?.parse::<f64>().ok()).sum();
    // /proc counts in USER_HZ, 100 per second on Linux.
    ticks * 10.0
}

/// Busy CPU time of the whole machine so far, in ms (the `cpu` line of
/// /proc/stat: all but idle and iowait): where the sshd, its sessions and
/// the gate spend theirs.
fn machine_busy_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let busy: f64 = fields.iter().enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, v)| v).sum();
    busy * 10.0
}

fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn main() {
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("fleet_bench: skipped (measure with `cargo bench --bench fleet_bench`)");
        return;
    }
    if !Path::new(E2E_DIR).join("ready").exists() {
        println!(
            "fleet_bench: skipped (run scripts/e2e-setup first, as root: it needs its sshd on 127.0.0.1:2222)"
        );
        return;
    }
    let rounds: usize =
        std::env::args().skip(1).find(|a| a != "--bench").map(|a| a.parse().expect("ROUNDS")).unwrap_or(20);
    let host = std::fs::read_to_string(Path::new(E2E_DIR).join("expected_host")).unwrap().trim().to_owned();
    let dir = tempfile::tempdir().unwrap();
    // Twenty aliases of the one e2e server: each its own target and master.
    let ssh_config = dir.path().join("ssh_config");
    std::fs::write(
        &ssh_config,
        format!(
            "Host vl-e2e-f*\n    User vl-agent\n    UserKnownHostsFile {E2E_DIR}/client/known_hosts\n\
             Host *\nInclude {E2E_DIR}/client/ssh_config\n"
        ),
    )
    .unwrap();
    let targets: String = (1..=TARGETS)
        .map(|i| {
            format!(
                "[targets.f{i:02}]\nssh_alias = \"vl-e2e-f{i:02}\"\nexpected_host = \"{host}\"\n\
                 expected_user = \"vl-agent\"\n"
            )
        })
        .collect();
    std::fs::write(dir.path().join("targets.toml"), targets).unwrap();
    let mut child = Command::new(BIN)
        .arg("mcp-serve")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir.path())
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env("VOLCE_LAB_TARGETS", dir.path().join("targets.toml"))
        .env("VOLCE_LAB_SSH_CONFIG", &ssh_config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn volce-lab mcp-serve");
    let pid = child.id();
    let mut server = Server {
        stdin: child.stdin.take().unwrap(),
        stdout: BufReader::new(child.stdout.take().unwrap()),
        next_id: 0,
    };
    writeln!(
        server.stdin,
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"fleet-bench","version":"0"}}}}}}"#
    )
    .unwrap();
    let mut line = String::new();
    server.stdout.read_line(&mut line).unwrap();
    writeln!(server.stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();

    println!(
        "fan-out of cloud_check over aliases of the e2e sshd, {rounds} rounds per width; load average {}",
        load_average()
    );
    let started = Instant::now();
    let cold = server.call(serde_json::json!({"check": "identity", "targets": ["*"]}));
    let cold_ms = ms(started.elapsed());
    assert_eq!(cold["summary"]["failed"], 0, "every target must answer identity: {cold}");
    println!("| width | p50 ms | max ms | mcp-serve CPU ms per call | machine busy CPU ms per call |");
    println!("|---|---|---|---|---|");
    println!("| {TARGETS}, identity, cold masters | {cold_ms:.1} | - | - | - |");
    let names: Vec<String> = (1..=TARGETS).map(|i| format!("f{i:02}")).collect();
    let mut p50s = Vec::new();
    for width in WIDTHS {
        let chosen = &names[..width];
        let cpu_before = cpu_ms(pid);
        let busy_before = machine_busy_ms();
        let samples: Vec<Duration> = (0..rounds)
            .map(|_| {
                let started = Instant::now();
                let answer = server.call(serde_json::json!({"check": "disk", "targets": chosen}));
                let took = started.elapsed();
                assert_eq!(answer["summary"]["failed"], 0, "{answer}");
                took
            })
            .collect();
        let max = samples.iter().max().copied().unwrap_or_default();
        let median = ms(p50(&samples));
        let cpu = (cpu_ms(pid) - cpu_before) / rounds as f64;
        let busy = (machine_busy_ms() - busy_before) / rounds as f64;
        println!("| {width}, disk, masters up | {median:.1} | {:.1} | {cpu:.2} | {busy:.1} |", ms(max));
        p50s.push(median);
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let hwm_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    drop(server);
    let _ = child.wait();
    let ratio = p50s[3] / p50s[0];
    println!();
    println!(
        "fan-out: p50(20) / p50(1) = {ratio:.2} (target <= 2.5: {})",
        if ratio <= 2.5 { "met" } else { "FAILED" }
    );
    println!(
        "peak RSS with {TARGETS} targets used: {:.1} MiB (target <= 12 MiB: {})",
        hwm_kib / 1024.0,
        if hwm_kib / 1024.0 <= 12.0 { "met" } else { "FAILED" }
    );
    println!("load average at end: {}", load_average());
    // A missed target fails the run, as the other benches do.
    if ratio > 2.5 || hwm_kib / 1024.0 > 12.0 {
        std::process::exit(1);
    }
}
