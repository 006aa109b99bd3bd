//! Soak benchmark (issue 14): 100,000 rpc requests through the shipped
//! binary, and whether its state and its latency stay bounded.
//!
//!   cargo bench --profile dev --bench soak      (root; `apt-get install faketime`)
//!
//! Each request is one `volce-lab host rpc` process, exactly as sudo starts
//! it for the agent (`SUDO_USER=agent`, the request on stdin, one reply
//! line): policy load, process guard, slot, bounded read, store open, the
//! operation, its audit row. The binary is unchanged and runs on its fixed
//! paths; what it finds there is arranged from outside, in a private mount
//! namespace the bench makes for itself (`unshare --mount`), so nothing of
//! the machine's own installation is seen or touched:
//!
//! - `/etc` and `/var/lib` are overlays with a tmpfs upper layer; the
//!   bench writes `/etc/volce-lab/policy.json` there (`retention_days: 1`);
//! - the state directory `/var/lib/volce-lab` is a tmpfs of its own, so
//!   what is measured is the helper and its database's growth, not the
//!   fsync latency of a disk other builds share (on that disk two 20,000
//!   request runs of the same code gave p50 ratios of 3.74 and 0.19).
//!   `VL_SOAK_STATE_ON=DIR` puts it in a fresh directory under DIR instead
//!   (a disk, to see fsync);
//! - `/usr/bin/docker` is a bind-mounted script answering the snapshot's
//!   calls (no containers, one unused image, no networks): a real engine
//!   would add 150-360 ms of docker processes per request, and this bench
//!   must not depend on what else runs on the machine's engine;
//! - time: retention needs simulated days, and the shipped binary has no
//!   movable clock (by design). Each helper runs with libfaketime preloaded
//!   and `FAKETIME=+OFFSET`, OFFSET growing `VL_SOAK_STEP_SECS` (default 10)
//!   per request; libfaketime moves the wall clock and the boot clock
//!   together, so the helper's clock-skew check sees a consistent clock.
//!
//! The mix, per 25 requests: 1 prepare (deploy of app `soak`, left
//! pending: it expires), 1 execute of that pending plan (refused `approval_required`),
//! 10 executes of an unknown plan (refused `plan_not_found`, folded), 2
//! plans with an approval smuggled into the parameters (refused), 11
//! inventories (reads, one row each). Every simulated 6 hours the
//! operator's routine runs `volce-lab host audit prune --before` (one day
//! back), as docs/server-install.md describes after an export.
//!
//! Reports: per tenth of the run, the p50 of its requests (all, and per
//! kind), state.db + WAL size, plans and audit rows kept, and the peak RSS
//! of any helper so far (`RUSAGE_CHILDREN`); then the raw p50 of the first
//! and last 5,000 requests and the windowed one (first and last tenth), with
//! their ratios (target: <= 1.5). Those compare different moments, and on
//! a shared machine the load of the moment moves a p50 more than history
//! does; so last, `VL_SOAK_INTERLEAVED` (default 2,000) requests each run
//! against the soaked state and an empty one in alternating blocks of 25,
//! the same moments for both, and their p50 ratio is printed too.
//! `VL_SOAK_REQUESTS` sets the count (default 100,000). At the end `volce-lab host audit verify` must pass.
//!
//! `VL_SOAK_MIX=reads` (issue 22) is a flood of reads instead: every
//! request an inventory, no operator prune, so what bounds the trail is the
//! helper's own folding of successful reads (`store::fold`) and its audit
//! retention. With `VL_SOAK_STEP_SECS=0` the simulated clock runs at the
//! real one, so the flood comes at the rate the helper can serve it (the
//! attack in issue 22: 320 reads in 29 s, one row each).
//! Under `cargo test --all-targets` (no `--bench` argument) it does nothing;
//! without root or libfaketime it prints `skipped` and why.

#[path = "support/stats.rs"]
mod stats;
#[path = "../tests/support/mod.rs"]
mod support;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;
use stats::p50;
use support::fake_engine::unused_image;
use support::harness::{deploy_params, policy_json};

const BIN: &str = env!("CARGO_BIN_EXE_volce-lab");
const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
const INSIDE: &str = "VL_SOAK_IN_NAMESPACE";
const STATE: &str = "/var/lib/volce-lab";
const WINDOW: usize = 5_000;
/// The deploy's host port: free on 127.0.0.1 for the prepare to pass (a
/// prepare refused `port_in_use` shows in the outcome counts).
const PORT: u16 = 18_765;

/// The kinds of request in the mix, in the order they are reported.
const KINDS: [&str; 5] = ["prepare", "execute_pending", "execute_unknown", "smuggled", "inventory"];

fn ms(d: Duration) -> String {
    format!("{:.2}", stats::ms(d))
}

fn run(program: &str, args: &[&str]) {
    let status = Command::new(program).args(args).status().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(status.success(), "{program} {args:?}: {status}");
}

fn state_bytes() -> u64 {
    ["state.db", "state.db-wal"]
        .iter()
        .map(|f| std::fs::metadata(Path::new(STATE).join(f)).map(|m| m.len()).unwrap_or(0))
        .sum()
}

fn count(table: &str) -> i64 {
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    let db = rusqlite::Connection::open_with_flags(Path::new(STATE).join("state.db"), flags).unwrap();
    db.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)).unwrap()
}

/// The largest peak RSS of any finished child or grandchild, in KiB.
fn children_peak_kib() -> i64 {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .map(|u| u.max_rss())
        .unwrap_or(0)
}

/// The copy of the binary under test (see [`arrange`]).
static BINARY: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// The shipped binary, as sudo runs it, `offset` seconds in the future.
fn helper(args: &[&str], offset: i64) -> Command {
    let mut command = Command::new(BINARY.get().expect("arranged"));
    command
        .arg("host")
        .args(args)
        .env_clear()
        .env("LD_PRELOAD", FAKETIME_LIB)
        .env("FAKETIME", format!("+{offset}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn rpc(request: &str, offset: i64) -> serde_json::Value {
    let mut child = helper(&["rpc"], offset).env("SUDO_USER", "agent").spawn().expect("the helper starts");
    child.stdin.take().unwrap().write_all(request.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|_| panic!("no reply line: {stdout:?} {:?}", output.stderr))
}

fn operator(args: &[&str], offset: i64) -> String {
    let output = helper(args, offset).stdin(Stdio::null()).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{args:?}: {text} {}", String::from_utf8_lossy(&output.stderr));
    text
}

/// The world the helper finds on its fixed paths, inside our namespace.
/// Returns the on-disk state directory, if one was asked for (removed when
/// it is dropped).
fn arrange(scratch: &Path) -> Option<tempfile::TempDir> {
    run("mount", &["-t", "tmpfs", "-o", "mode=0700,size=1g", "volce-soak", &scratch.display().to_string()]);
    for (dir, name) in [("/etc", "etc"), ("/var/lib", "varlib")] {
        let (upper, work) = (scratch.join(format!("{name}-upper")), scratch.join(format!("{name}-work")));
        std::fs::create_dir(&upper).unwrap();
        std::fs::create_dir(&work).unwrap();
        let options = format!("lowerdir={dir},upperdir={},workdir={}", upper.display(), work.display());
        run("mount", &["-t", "overlay", "overlay", "-o", &options, dir]);
    }
    // The overlay's root takes its mode from the upper layer; the helper
    // checks that /etc/volce-lab is root's and not group-writable.
    std::fs::create_dir_all("/etc/volce-lab").unwrap();
    std::fs::create_dir_all(STATE).unwrap();
    let on_disk = std::env::var_os("VL_SOAK_STATE_ON").map(|dir| tempfile::tempdir_in(dir).unwrap());
    match &on_disk {
        Some(dir) => {
            run("mount", &["--bind", &dir.path().display().to_string(), STATE]);
            println!("state directory: bind mount of {} (a disk)", dir.path().display());
        }
        None => {
            run("mount", &["-t", "tmpfs", "-o", "mode=0700,size=8g", "volce-soak-state", STATE]);
            println!("state directory: a tmpfs of its own");
        }
    }
    let mut policy = policy_json();
    policy["retention_days"] = json!(1);
    // The pending deploys wait for an operator who never comes.
    policy["approval_required"] = json!(["stop", "remove_image", "remove_app", "deploy"]);
    std::fs::write("/etc/volce-lab/policy.json", policy.to_string()).unwrap();
    let docker = scratch.join("docker");
    let image = unused_image();
    std::fs::write(
        &docker,
        format!(
            "#!/bin/sh\n# The soak's docker: no containers, one unused image, no networks.\n\
             case \"$1\" in\nps) ;;\nimage) echo {} ;;\nnetwork) ;;\n\
             *) echo \"soak docker: unexpected $*\" >&2; exit 1 ;;\nesac\n",
            image.as_str()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&docker, std::fs::Permissions::from_mode(0o755)).unwrap();
    run("mount", &["--bind", &docker.display().to_string(), "/usr/bin/docker"]);
    // A copy on the tmpfs: a rebuild of target/ during the run cannot swap
    // the binary under test, and loading it reads no disk.
    let binary = scratch.join("volce-lab");
    std::fs::copy(BIN, &binary).unwrap();
    BINARY.set(binary).unwrap();
    on_disk
}

/// Timed requests: the kind (an index into [`KINDS`]) and the time.
type Samples = Vec<(usize, Duration)>;

/// The requests of the mix (module header), 25 to a cycle.
struct Mix {
    prepare: String,
    unknown: String,
    smuggled: String,
    inventory: String,
    /// `VL_SOAK_MIX=reads`: every request an inventory.
    reads_only: bool,
}

impl Mix {
    fn new() -> Mix {
        Mix {
            prepare:
                json!({"operation": "plan", "action": "deploy", "parameters": deploy_params("soak", PORT)})
                    .to_string(),
            unknown: format!(r#"{{"operation":"execute","plan_id":"{}"}}"#, "f".repeat(32)),
            smuggled: json!({"operation": "plan", "action": "stop",
                "parameters": {"app": "legacy", "approved": true}})
            .to_string(),
            inventory: r#"{"operation":"inventory"}"#.to_owned(),
            reads_only: std::env::var("VL_SOAK_MIX").is_ok_and(|mix| mix == "reads"),
        }
    }

    /// Request `n`: its kind (an index into [`KINDS`]) and its bytes.
    fn request(&self, n: usize, pending: &Option<String>) -> (usize, String) {
        if self.reads_only {
            return (4, self.inventory.clone());
        }
        match n % 25 {
            0 => (0, self.prepare.clone()),
            1 => match pending {
                Some(id) => (1, format!(r#"{{"operation":"execute","plan_id":"{id}"}}"#)),
                None => (2, self.unknown.clone()),
            },
            2..=11 => (2, self.unknown.clone()),
            12 | 13 => (3, self.smuggled.clone()),
            _ => (4, self.inventory.clone()),
        }
    }
}

/// The end state against an empty one at the same moments: blocks of 25
/// requests alternate between the soaked state directory and a fresh one
/// bind-mounted over it, so both halves see the same load on the machine.
/// Returns the p50 of each (soaked, fresh) and of their inventories.
fn interleaved(mix: &Mix, scratch: &Path, per_side: usize, mut offset: i64, step: i64) -> [Duration; 4] {
    let fresh = scratch.join("fresh");
    std::fs::create_dir(&fresh).unwrap();
    run(
        "mount",
        &["-t", "tmpfs", "-o", "mode=0700,size=8g", "volce-soak-fresh", &fresh.display().to_string()],
    );
    // Per side: its samples (kind, time) and its pending plan.
    let mut sides: [(Samples, Option<String>); 2] = Default::default();
    for block in 0..(2 * per_side).div_ceil(25) {
        let side = block % 2;
        if side == 1 {
            run("mount", &["--bind", &fresh.display().to_string(), STATE]);
        }
        for n in 0..25 {
            let (kind, request) = mix.request(n, &sides[side].1);
            let t = Instant::now();
            let reply = rpc(&request, offset);
            sides[side].0.push((kind, t.elapsed()));
            if kind == 0 {
                sides[side].1 = reply["result"]["id"].as_str().map(str::to_owned);
            }
            offset += step;
        }
        if side == 1 {
            run("umount", &[STATE]);
        }
    }
    let all = |side: usize| p50(&sides[side].0.iter().map(|s| s.1).collect::<Vec<_>>());
    let inventory =
        |side: usize| p50(&sides[side].0.iter().filter(|s| s.0 == 4).map(|s| s.1).collect::<Vec<_>>());
    [all(0), all(1), inventory(0), inventory(1)]
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    // As the other benches that need the machine's setup: say why, and stop.
    if !nix::unistd::geteuid().is_root() || !Path::new(FAKETIME_LIB).exists() {
        println!(
            "soak: skipped (needs root, for its mount namespace, and {FAKETIME_LIB}: apt-get install faketime)"
        );
        return;
    }
    if std::env::var_os(INSIDE).is_none() {
        // Re-run inside a private mount namespace: our mounts end with it.
        let exe = std::env::current_exe().unwrap();
        let status = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--"])
            .arg(exe)
            .args(std::env::args_os().skip(1))
            .env(INSIDE, "1")
            .status()
            .expect("unshare runs");
        std::process::exit(status.code().unwrap_or(1));
    }
    let total: usize = std::env::var("VL_SOAK_REQUESTS").ok().and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let step: i64 = std::env::var("VL_SOAK_STEP_SECS").ok().and_then(|n| n.parse().ok()).unwrap_or(10);
    let scratch = tempfile::tempdir().unwrap();
    let on_disk = arrange(scratch.path());

    let mix = Mix::new();

    let real_start = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let mut samples: Samples = Vec::with_capacity(total);
    let mut pending: Option<String> = None;
    let mut codes = std::collections::BTreeMap::<String, usize>::new();
    let mut last_prune = 0_i64;
    let tenth = (total / 10).max(1);
    let started = Instant::now();
    println!(
        "{:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>11} {:>6} {:>7} {:>9}",
        "requests",
        "p50 all",
        KINDS[0],
        "exec_pen",
        "exec_unk",
        KINDS[3],
        "invent.",
        "state MiB",
        "plans",
        "audit",
        "peak KiB"
    );
    for n in 0..total {
        let offset = n as i64 * step;
        let (kind, request) = mix.request(n, &pending);
        let t = Instant::now();
        let reply = rpc(&request, offset);
        samples.push((kind, t.elapsed()));
        let outcome = reply["code"].as_str().or(reply["status"].as_str()).unwrap_or("?");
        *codes.entry(format!("{} -> {outcome}", KINDS[kind])).or_default() += 1;
        if kind == 0 {
            pending = reply["result"]["id"].as_str().map(str::to_owned);
        }
        // The operator's routine, on the helper's (simulated) clock.
        if !mix.reads_only && offset - last_prune >= 6 * 3600 {
            let before = volce_lab::text::rfc3339_seconds(real_start + offset - 86_400);
            operator(&["audit", "prune", "--before", &before], offset);
            last_prune = offset;
        }
        if (n + 1) % tenth == 0 {
            let window = &samples[n + 1 - tenth..=n];
            let all: Vec<Duration> = window.iter().map(|s| s.1).collect();
            let of = |k: usize| p50(&window.iter().filter(|s| s.0 == k).map(|s| s.1).collect::<Vec<_>>());
            println!(
                "{:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>11.2} {:>6} {:>7} {:>9}",
                n + 1,
                ms(p50(&all)),
                ms(of(0)),
                ms(of(1)),
                ms(of(2)),
                ms(of(3)),
                ms(of(4)),
                state_bytes() as f64 / (1 << 20) as f64,
                count("plans"),
                count("audit"),
                children_peak_kib()
            );
        }
    }
    let wall = started.elapsed();
    let per_side: usize =
        std::env::var("VL_SOAK_INTERLEAVED").ok().and_then(|n| n.parse().ok()).unwrap_or(2_000);
    let ab = (per_side > 0).then(|| interleaved(&mix, scratch.path(), per_side, total as i64 * step, step));
    let times: Vec<Duration> = samples.iter().map(|s| s.1).collect();
    let raw = WINDOW.min(total / 10).max(1);
    let (raw_start, raw_end) = (p50(&times[..raw]), p50(&times[total - raw..]));
    let (win_start, win_end) = (p50(&times[..tenth.min(total)]), p50(&times[total - tenth.min(total)..]));
    let verify = operator(&["audit", "verify"], total as i64 * step);
    println!(
        "soak: {total} rpc requests through a copy of {BIN} in {:.1} s ({} simulated hours, step {step} s)",
        wall.as_secs_f64(),
        total as i64 * step / 3600
    );
    let raw_ratio = raw_end.as_secs_f64() / raw_start.as_secs_f64();
    println!(
        "  raw p50, first {raw} -> last {raw}: {} -> {} ms, ratio {raw_ratio:.2} (target <= 1.5) {}",
        ms(raw_start),
        ms(raw_end),
        if raw_ratio <= 1.5 { "met" } else { "FAILED" }
    );
    println!(
        "  windowed p50, first tenth -> last tenth ({tenth} each): {} -> {} ms, ratio {:.2}",
        ms(win_start),
        ms(win_end),
        win_end.as_secs_f64() / win_start.as_secs_f64()
    );
    if let Some([soaked, fresh, soaked_inventory, fresh_inventory]) = ab {
        println!(
            "  interleaved, {per_side} requests each in alternating blocks of 25: p50 soaked state {} ms, \
             empty state {} ms, ratio {:.2}; inventory alone {} vs {} ms, ratio {:.2}",
            ms(soaked),
            ms(fresh),
            soaked.as_secs_f64() / fresh.as_secs_f64(),
            ms(soaked_inventory),
            ms(fresh_inventory),
            soaked_inventory.as_secs_f64() / fresh_inventory.as_secs_f64()
        );
    }
    println!("  peak RSS of any helper process: {} KiB", children_peak_kib());
    if mix.reads_only {
        println!(
            "  read flood: {total} inventories, {} audit rows kept, state.db+wal {:.2} MiB",
            count("audit"),
            state_bytes() as f64 / (1 << 20) as f64
        );
    }
    for (what, n) in &codes {
        println!("  {what}: {n}");
    }
    println!("  audit verify: {}", verify.trim());
    // Detach the tmpfs (and with it the overlays' layers and the fake
    // docker) so the empty scratch directory can go.
    run("umount", &["--lazy", &scratch.path().display().to_string()]);
    drop(on_disk);
    // A missed target fails the run, as the other benches do.
    if raw_ratio > 1.5 {
        std::process::exit(1);
    }
}
