//! Benchmark of a fan-out (issues 23 and 44): `volce-lab mcp-serve` (bench
//! profile) with a targets file of its own, every target an alias of the
//! e2e sshd on 127.0.0.1:2222 with its own ssh master, spoken to over stdio.
//! Two fleets:
//!
//! - direct (the first measure, kept for comparison, no target): 20 aliases
//!   straight to the sshd. Every "server" is then the one sshd on this
//!   machine's 2 cores, so p50(20) / p50(1) measures the cores;
//! - far away (issue 44): each target through its own latency proxy
//!   (`support/latency_proxy.rs`, one listener per target on 127.0.0.1,
//!   15 ms each way: a 30 ms round trip; the ssh_config gives each alias
//!   its proxy's `Port`). Targets: `cloud_check disk` with the masters up
//!   p50(20) / p50(1) <= 1.5; the first fan-out over 20 cold targets <= 2x
//!   one cold target (the p50 of [`COLD_RUNS`] fresh servers each); the
//!   server's peak RSS (VmHWM) <= 8 MiB with one target, <= 12 MiB with 20.
//!
//! For each width it also prints the CPU time `mcp-serve` used per call
//! (user + system, from /proc) and the whole machine's busy time, which say
//! how much of a fan-out is the workstation's.
//!
//! The far-away fleet runs twice: at the server's default fan-out width (20
//! checks at a time since issue 44, or the `VOLCE_LAB_FAN_OUT` this bench is
//! given), which the targets are held to, and at 8 (the default before,
//! three waves for 20 targets), reported beside it.
//!
//! Run as root after scripts/e2e-setup: `cargo bench --bench fleet_bench -- 20`
//! (the number is the rounds per width; `VL_FLEET_KEX=curve25519-sha256`
//! makes every login use that key exchange, a reported run). Prints
//! `skipped` with the reason where the e2e installation is missing. Every
//! ssh_config it writes ends with `Host *` / `HostName 127.0.0.1`: no alias
//! ever resolves through DNS.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use latency_proxy::LatencyProxy;
use stats::{ms, p50};

#[path = "support/latency_proxy.rs"]
mod latency_proxy;
#[path = "support/stats.rs"]
mod stats;
#[path = "support/stdio_client.rs"]
mod stdio_client;

use stdio_client::StdioClient;

const BIN: &str = env!("CARGO_BIN_EXE_volce-lab");
const E2E_DIR: &str = "/var/tmp/volce-lab-e2e";
const SSHD: &str = "127.0.0.1:2222";
const TARGETS: usize = 20;
const WIDTHS: [usize; 4] = [1, 5, 10, 20];
/// Half the round trip the proxies add.
const ONE_WAY: Duration = Duration::from_millis(15);
/// Fresh servers per cold measure, one and twenty targets in turns.
const COLD_RUNS: usize = 3;

/// What scripts/e2e-setup left for the workstation side.
struct E2e {
    host: String,
    /// The sshd's host key, `TYPE BASE64`, as its known_hosts line has it.
    host_key: String,
}

impl E2e {
    fn read() -> E2e {
        let read = |name: &str| std::fs::read_to_string(Path::new(E2E_DIR).join(name)).unwrap();
        let known = read("client/known_hosts");
        let line = known.lines().next().expect("a known_hosts line");
        let host_key = line.split_once(' ').expect("HOST KEY").1.trim().to_owned();
        E2e { host: read("expected_host").trim().to_owned(), host_key }
    }
}

/// How the targets reach the sshd.
#[derive(Clone, Copy, PartialEq)]
enum Route {
    Direct,
    Proxied,
}

/// One first call over cold masters: its time and the whole machine's
/// busy CPU time meanwhile (the logins' client and server sides both run
/// on this machine's cores).
#[derive(Clone, Copy)]
struct Cold {
    took: Duration,
    busy_ms: f64,
}

/// The p50 of `samples`' times, and each sample as `ms (busy ms)`.
fn cold_figures(samples: &[Cold]) -> (f64, String) {
    let times: Vec<Duration> = samples.iter().map(|c| c.took).collect();
    let each: Vec<String> = samples.iter().map(|c| format!("{:.1} ({:.0})", ms(c.took), c.busy_ms)).collect();
    (ms(p50(&times)), each.join(" / "))
}

/// One width's figures.
struct Width {
    width: usize,
    p50_ms: f64,
    max_ms: f64,
    cpu_ms: f64,
    busy_ms: f64,
}

/// A running `mcp-serve` with its own targets file, ssh_config and control
/// directory (so its masters are its own), and the proxies in front of it.
struct Fleet {
    _dir: tempfile::TempDir,
    client: StdioClient,
    names: Vec<String>,
}

impl Fleet {
    /// `fan_out`: the server's `VOLCE_LAB_FAN_OUT`, else its default.
    fn start(e2e: &E2e, count: usize, route: Route, fan_out: Option<&str>) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let prefix = if route == Route::Direct { "f" } else { "p" };
        let names: Vec<String> = (1..=count).map(|i| format!("{prefix}{i:02}")).collect();
        let ports: Vec<u16> = match route {
            Route::Direct => Vec::new(),
            Route::Proxied => {
                let sshd: SocketAddr = SSHD.parse().unwrap();
                names.iter().map(|_| LatencyProxy::start(sshd, ONE_WAY).expect("a proxy").port).collect()
            }
        };
        let ssh_config = write_ssh_config(dir.path(), e2e, &names, &ports);
        let targets: String = names
            .iter()
            .map(|name| {
                format!(
                    "[targets.{name}]\nssh_alias = \"vl-e2e-{name}\"\nexpected_host = \"{}\"\n\
                     expected_user = \"vl-agent\"\n",
                    e2e.host
                )
            })
            .collect();
        std::fs::write(dir.path().join("targets.toml"), targets).unwrap();
        let mut command = Command::new(BIN);
        command
            .arg("mcp-serve")
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", dir.path())
            // The tempdir is ours and 0700: the control sockets stay in it.
            .env("XDG_RUNTIME_DIR", dir.path())
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env("VOLCE_LAB_TARGETS", dir.path().join("targets.toml"))
            .env("VOLCE_LAB_SSH_CONFIG", &ssh_config);
        if let Some(width) = fan_out {
            command.env("VOLCE_LAB_FAN_OUT", width);
        }
        let client = StdioClient::start(command, "fleet-bench");
        Fleet { _dir: dir, client, names }
    }

    /// One `cloud_check` call, its answer's structured content.
    fn call(&mut self, arguments: serde_json::Value) -> serde_json::Value {
        self.client.call("cloud_check", arguments)
    }

    /// The first call, `identity` over every target: each starts its master.
    fn cold(&mut self) -> Cold {
        let (started, busy_before) = (Instant::now(), machine_busy_ms());
        let answer = self.call(serde_json::json!({"check": "identity", "targets": ["*"]}));
        let took = started.elapsed();
        assert_eq!(answer["summary"]["failed"], 0, "every target must answer identity: {answer}");
        Cold { took, busy_ms: machine_busy_ms() - busy_before }
    }

    /// `rounds` calls of `cloud_check disk` over the first `width` targets.
    fn disk(&mut self, width: usize, rounds: usize) -> Width {
        let chosen = self.names[..width].to_vec();
        let pid = self.client.child.id();
        let (cpu_before, busy_before) = (cpu_ms(pid), machine_busy_ms());
        let samples: Vec<Duration> = (0..rounds)
            .map(|_| {
                let started = Instant::now();
                let answer = self.call(serde_json::json!({"check": "disk", "targets": chosen}));
                let took = started.elapsed();
                assert_eq!(answer["summary"]["failed"], 0, "{answer}");
                took
            })
            .collect();
        Width {
            width,
            p50_ms: ms(p50(&samples)),
            max_ms: ms(samples.iter().max().copied().unwrap_or_default()),
            cpu_ms: (cpu_ms(pid) - cpu_before) / rounds as f64,
            busy_ms: (machine_busy_ms() - busy_before) / rounds as f64,
        }
    }

    /// The server's peak resident set so far (VmHWM), in MiB.
    fn peak_rss_mib(&self) -> f64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.client.child.id())).unwrap_or_default();
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        kib / 1024.0
    }

    fn finish(self) {
        self.client.finish();
    }
}

/// Names the key exchange the bench's logins use instead of ssh's default
/// (OpenSSH 9.2's sntrup761x25519 costs a login's client 0.12 s of CPU on
/// the 2-core machine, docs/benchmarks.md).
const KEX_VAR: &str = "VL_FLEET_KEX";

/// The ssh_config of one fleet: each alias's own `Port` (its proxy's) when
/// there are proxies, with a known_hosts naming the sshd's key at each of
/// those ports; the rest from the e2e client's config; and last a catch-all
/// that keeps every name on loopback.
fn write_ssh_config(dir: &Path, e2e: &E2e, names: &[String], ports: &[u16]) -> std::path::PathBuf {
    let mut config = String::from("# fleet_bench: one target per alias of the e2e sshd.\n");
    let known_hosts = if ports.is_empty() {
        format!("{E2E_DIR}/client/known_hosts")
    } else {
        let path = dir.join("known_hosts");
        let lines: String =
            ports.iter().map(|port| format!("[127.0.0.1]:{port} {}\n", e2e.host_key)).collect();
        std::fs::write(&path, lines).unwrap();
        for (name, port) in names.iter().zip(ports) {
            config.push_str(&format!("Host vl-e2e-{name}\n    Port {port}\n"));
        }
        path.display().to_string()
    };
    // `VL_FLEET_KEX` (reported runs only): the key exchange every login
    // uses, to show what OpenSSH's default costs a cold fan-out here.
    if let Ok(kex) = std::env::var(KEX_VAR) {
        config.push_str(&format!("Host *\n    KexAlgorithms {kex}\n"));
    }
    // ssh takes the first value it finds for a keyword: these come before
    // the e2e file's `Port 2222` and known_hosts.
    config.push_str(&format!(
        "Host vl-e2e-f* vl-e2e-p*\n    User vl-agent\n    UserKnownHostsFile {known_hosts}\n\
         Host *\nInclude {E2E_DIR}/client/ssh_config\nHost *\n    HostName 127.0.0.1\n"
    ));
    let path = dir.join("ssh_config");
    std::fs::write(&path, config).unwrap();
    path
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

fn print_widths(cold: &[Cold], widths: &[Width]) {
    println!("| width | p50 ms | max ms | mcp-serve CPU ms per call | machine busy CPU ms per call |");
    println!("|---|---|---|---|---|");
    let (p50_ms, each) = cold_figures(cold);
    println!("| {TARGETS}, identity, cold masters: each (busy ms) | {p50_ms:.1}: {each} | - | - | - |");
    for w in widths {
        println!(
            "| {}, disk, masters up | {:.1} | {:.1} | {:.2} | {:.1} |",
            w.width, w.p50_ms, w.max_ms, w.cpu_ms, w.busy_ms
        );
    }
}

/// The first measure: 20 aliases straight to the one sshd (no target).
fn direct(e2e: &E2e, rounds: usize) {
    println!("## direct: {TARGETS} aliases of the e2e sshd on {SSHD}, {rounds} rounds per width");
    let mut fleet = Fleet::start(e2e, TARGETS, Route::Direct, None);
    let cold = fleet.cold();
    let widths: Vec<Width> = WIDTHS.iter().map(|&w| fleet.disk(w, rounds)).collect();
    fleet.finish();
    print_widths(&[cold], &widths);
    println!(
        "direct: p50(20) / p50(1) = {:.2} (reported, no target: every target is the one sshd on this \
         machine's cores, so it measures the cores)\n",
        widths[3].p50_ms / widths[0].p50_ms
    );
}

/// What the far-away fleets measured at one fan-out width.
struct FarAway {
    /// p50(20) / p50(1), disk with the masters up.
    ratio: f64,
    /// p50 of the cold fan-outs over 20 / p50 of the cold single targets.
    cold_ratio: f64,
    rss_one: f64,
    rss_all: f64,
}

/// [`COLD_RUNS`] fresh servers of one target and of [`TARGETS`], in turns,
/// every target behind its own proxy; the last of each also measures the
/// widths and its peak RSS.
fn far_away(e2e: &E2e, rounds: usize, fan_out: Option<&str>) -> FarAway {
    println!(
        "## far away, VOLCE_LAB_FAN_OUT={}: each target through its own latency proxy ({} ms round trip), \
         {rounds} rounds per width",
        fan_out.unwrap_or("unset (the default)"),
        ONE_WAY.as_millis() * 2
    );
    let (mut cold_one, mut cold_all) = (Vec::new(), Vec::new());
    let (mut rss_one, mut rss_all, mut one_p50, mut widths) = (0.0, 0.0, 0.0, Vec::new());
    for run in 0..COLD_RUNS {
        let last = run + 1 == COLD_RUNS;
        let mut one = Fleet::start(e2e, 1, Route::Proxied, fan_out);
        cold_one.push(one.cold());
        if last {
            one_p50 = one.disk(1, rounds).p50_ms;
            rss_one = one.peak_rss_mib();
        }
        one.finish();
        let mut all = Fleet::start(e2e, TARGETS, Route::Proxied, fan_out);
        cold_all.push(all.cold());
        if last {
            widths = WIDTHS.iter().map(|&w| all.disk(w, rounds)).collect();
            rss_all = all.peak_rss_mib();
        }
        all.finish();
    }
    print_widths(&cold_all, &widths);
    let (one_cold_ms, each) = cold_figures(&cold_one);
    println!(
        "| 1, identity, cold master (a server of one target): each (busy ms) | {one_cold_ms:.1}: {each} | - | - | - |"
    );
    println!("| 1, disk, masters up (a server of one target) | {one_p50:.1} | - | - | - |");
    println!(
        "peak RSS: a server of one target {rss_one:.2} MiB, of {TARGETS} targets used {rss_all:.2} MiB\n"
    );
    FarAway {
        ratio: widths[3].p50_ms / widths[0].p50_ms,
        cold_ratio: cold_figures(&cold_all).0 / one_cold_ms,
        rss_one,
        rss_all,
    }
}

/// A verdict line; true when the target was missed.
fn verdict(what: &str, value: f64, limit: f64, unit: &str) -> bool {
    let met = value <= limit;
    println!("{what} = {value:.2}{unit} (target <= {limit}{unit}: {})", if met { "met" } else { "FAILED" });
    !met
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
    let e2e = E2e::read();
    println!("fleet_bench: load average {}", load_average());
    match std::env::var(KEX_VAR) {
        Ok(kex) => println!(
            "fleet_bench: every login's key exchange is {kex} ({KEX_VAR}; reported, not the default)"
        ),
        Err(_) => println!("fleet_bench: key exchange: ssh's default (`ssh -Q kex` and sshd's offer decide)"),
    }
    direct(&e2e, rounds);
    // The targets hold for what a user gets: the server's default width,
    // or the VOLCE_LAB_FAN_OUT this bench was given.
    let given = std::env::var("VOLCE_LAB_FAN_OUT").ok();
    let default = far_away(&e2e, rounds, given.as_deref());
    // Reported beside it: the width before issue 44, what the default buys.
    let narrow = far_away(&e2e, rounds, Some("8"));
    println!(
        "far away, VOLCE_LAB_FAN_OUT=8 (reported): disk p50(20) / p50(1) = {:.2}, first fan-out 20 cold / 1 cold = {:.2}",
        narrow.ratio, narrow.cold_ratio
    );
    let missed = [
        verdict("far away: disk p50(20) / p50(1)", default.ratio, 1.5, ""),
        verdict("far away: first fan-out, 20 cold / 1 cold (p50s)", default.cold_ratio, 2.0, ""),
        verdict("peak RSS, a server of one target", default.rss_one, 8.0, " MiB"),
        verdict(&format!("peak RSS, {TARGETS} targets used"), default.rss_all, 12.0, " MiB"),
    ];
    println!("load average at end: {}", load_average());
    // A missed target fails the run, as the other benches do.
    if missed.contains(&true) {
        println!("fleet_bench: FAILED");
        std::process::exit(1);
    }
}
