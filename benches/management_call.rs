//! Management call benchmark (issue 44): what a `web_status` costs on the
//! server, from the ssh gate's start to its reply, and where the time goes.
//!
//!   cargo bench --bench management_call        (root, sudo, util-linux)
//!
//! The chain is the one the agent's key runs, without sshd's session (the
//! gated check's own benchmark, `ssh_bench`): the gate
//! (`volce-lab-host ssh-gate`, as the agent's account, the gated rpc line
//! in `SSH_ORIGINAL_COMMAND`) -> `/usr/bin/sudo -n /usr/local/bin/volce-lab-host rpc`
//! -> the helper, answering `gateway_status` (what web_status asks) on its
//! fixed paths. The binary is unchanged; its world is arranged in a private
//! mount namespace the bench makes for itself (`unshare --mount`), so the
//! machine's own installation is neither seen nor touched: `/etc`,
//! `/var/lib` and `/usr/local/bin` are overlays with a tmpfs upper layer
//! (the agent's account `vl-bench-agent` is added there, with the sudoers
//! drop-in and the helper), `/etc/volce-lab` is a tmpfs of its own (the
//! test policy, nothing of an installation's), and `/usr/bin/docker` is the
//! script soak binds there too (no containers, one image, no networks).
//! The state directory is a fresh directory on the disk under /var/tmp
//! (`VL_MC_STATE=tmpfs`: a tmpfs, to see what the fsyncs cost). The binary
//! is the one cargo built for the bench, or `VL_MC_BINARY`'s (a release
//! build, when the bench itself runs as `--profile dev`). `VL_MC_ROUNDS`
//! sets the samples per row (default 200).
//!
//! Rows, taken in turns in blocks of 20 (the sudoers drop-in switched
//! between blocks), so that the load of the moment hits each alike:
//! - sudo alone (`sudo -n /usr/bin/true` as the agent) under today's options
//!   and under the rule's (`install::RPC_DEFAULTS`);
//! - the helper alone as root: `rpc-worker` (one start) and `rpc` (front
//!   and worker: two starts);
//! - the whole chain under the rule before issue 44 (one line: sudo forks,
//!   waits, and the helper starts its worker) and under the drop-in setup
//!   writes now (`install::sudoers_file`: sudo execs the helper, one start).
//!   Target: p50 <= 10 ms for the latter; FAILED otherwise;
//! - two parts of it: the shell and the gate alone (the identity request,
//!   which starts no program), and the helper answering a request that
//!   calls no engine (an execute of an unknown plan: what the stub docker's
//!   three processes add to web_status shows beside the one-start row).
//!
//! Then the fsyncs of one request, counted with strace when it is there.
//! Under `cargo test --all-targets` (no `--bench` argument) it does nothing;
//! without root, sudo, useradd or unshare it prints `skipped` and why.

#[path = "support/stats.rs"]
mod stats;
#[path = "../tests/support/mod.rs"]
mod support;

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::fake_engine::unused_image;
use support::harness::policy_json;
use volce_lab::wire::remote::RemoteCommand;

const BIN: &str = env!("CARGO_BIN_EXE_volce-lab");
const INSIDE: &str = "VL_MC_IN_NAMESPACE";
const AGENT: &str = "vl-bench-agent";
const HELPER: &str = "/usr/local/bin/volce-lab-host";
const SUDO: &str = "/usr/bin/sudo";
const STATE: &str = "/var/lib/volce-lab";
const REQUEST: &[u8] = br#"{"operation":"gateway_status"}"#;
/// A request the helper answers (`plan_not_found`) without the engine.
const UNKNOWN_PLAN: &[u8] = br#"{"operation":"execute","plan_id":"0123456789abcdef0123456789abcdef"}"#;
const TARGET_MS: f64 = 10.0;
const BLOCK: usize = 20;
/// How sshd starts the forced command: the account's shell with `-c`, as
/// the account. The `exit` after it keeps the shell there, standing in for
/// sshd's session process: on a server the key line `exec`s the gate, and
/// that process, the agent's, is the helper's parent (one start); here
/// the parent must not be this root bench. So this chain pays one shell
/// fork that a server's no longer does (about 0.7 ms, docs/benchmarks.md).
const SHELL: &str = "/bin/sh";
const GATE_BY_SHELL: [&str; 3] = ["-c", "\"$0\" ssh-gate; exit $?", HELPER];

/// The options a drop-in gives the rpc command (and, in this bench only,
/// `/usr/bin/true` beside it).
#[derive(Clone, Copy, PartialEq)]
enum Rule {
    /// The one line setup wrote before issue 44: sudo's defaults.
    Before,
    /// `install::sudoers_file`: the rule and `install::RPC_DEFAULTS`.
    Now,
}

fn run(program: &str, args: &[&str]) {
    let status = Command::new(program).args(args).status().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(status.success(), "{program} {args:?}: {status}");
}

fn write(path: &str, text: &str, mode: u32) {
    let temp = format!("{path}.new");
    std::fs::write(&temp, text).unwrap();
    std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(mode)).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

/// The agent's drop-in under `rule`, and the bench's own rule for
/// `/usr/bin/true` with the same options (sudo alone).
fn install(rule: Rule) {
    let ours = match rule {
        Rule::Before => format!("{}\n", volce_lab::install::sudoers_rule(AGENT)),
        Rule::Now => volce_lab::install::sudoers_file(AGENT),
    };
    write("/etc/sudoers.d/volce-lab", &ours, 0o440);
    let defaults = match rule {
        Rule::Before => String::new(),
        Rule::Now => format!("Defaults!/usr/bin/true {}\n", volce_lab::install::RPC_DEFAULTS),
    };
    write(
        "/etc/sudoers.d/zz-bench-true",
        &format!("{defaults}{AGENT} ALL=(root) NOPASSWD: /usr/bin/true\n"),
        0o440,
    );
}

/// The world the helper and sudo find, inside our namespace. Returns the
/// state directory on the disk, if one (unmounted and removed at the end).
fn arrange(scratch: &Path) -> Option<tempfile::TempDir> {
    run("mount", &["-t", "tmpfs", "-o", "mode=0755", "volce-mc", &scratch.display().to_string()]);
    for (dir, name) in [("/etc", "etc"), ("/var/lib", "varlib"), ("/usr/local/bin", "bin")] {
        let (upper, work) = (scratch.join(format!("{name}-upper")), scratch.join(format!("{name}-work")));
        std::fs::create_dir(&upper).unwrap();
        std::fs::create_dir(&work).unwrap();
        let options = format!("lowerdir={dir},upperdir={},workdir={}", upper.display(), work.display());
        run("mount", &["-t", "overlay", "overlay", "-o", &options, dir]);
    }
    // Empty, whatever an installation on this machine keeps there.
    std::fs::create_dir_all("/etc/volce-lab").unwrap();
    run("mount", &["-t", "tmpfs", "-o", "mode=0755", "volce-mc-etc", "/etc/volce-lab"]);
    write("/etc/volce-lab/policy.json", &policy_json().to_string(), 0o600);
    std::fs::create_dir_all(STATE).unwrap();
    let on_disk = if std::env::var("VL_MC_STATE").is_ok_and(|s| s == "tmpfs") {
        run("mount", &["-t", "tmpfs", "-o", "mode=0700", "volce-mc-state", STATE]);
        println!("state directory: a tmpfs");
        None
    } else {
        let dir = tempfile::Builder::new().prefix("volce-mc-state").tempdir_in("/var/tmp").unwrap();
        run("mount", &["--bind", &dir.path().display().to_string(), STATE]);
        println!("state directory: {} (the disk)", dir.path().display());
        Some(dir)
    };
    std::fs::set_permissions(STATE, std::fs::Permissions::from_mode(0o700)).unwrap();
    let docker = scratch.join("docker");
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in\nps) ;;\nimage) echo {} ;;\nnetwork) ;;\n*) exit 1 ;;\nesac\n",
        unused_image().as_str()
    );
    std::fs::write(&docker, script).unwrap();
    std::fs::set_permissions(&docker, std::fs::Permissions::from_mode(0o755)).unwrap();
    run("mount", &["--bind", &docker.display().to_string(), "/usr/bin/docker"]);
    // A copy in the overlay: a rebuild of target/ cannot swap it mid-run.
    // `VL_MC_BINARY`: another build of the binary (a release build, while
    // this bench runs from a debug one).
    let binary = std::env::var("VL_MC_BINARY").unwrap_or_else(|_| BIN.to_owned());
    println!("binary: {binary}");
    // Removed first: where the machine has the package installed, HELPER
    // is a symlink into /usr/lib/volce-lab (not an overlay here), and a copy
    // onto it would write through it into the installed binary. Removed,
    // the overlay hides it and the copy is a file of the upper layer.
    match std::fs::remove_file(HELPER) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("remove {HELPER} in the overlay: {e}"),
    }
    std::fs::copy(&binary, HELPER).unwrap();
    std::fs::set_permissions(HELPER, std::fs::Permissions::from_mode(0o755)).unwrap();
    run("useradd", &["--no-create-home", "--home-dir", "/nonexistent", "--shell", "/bin/sh", AGENT]);
    on_disk
}

fn agent_ids() -> (u32, u32) {
    let user = nix::unistd::User::from_name(AGENT).unwrap().expect("the bench's agent exists");
    (user.uid.as_raw(), user.gid.as_raw())
}

/// Runs `command` with `stdin`; its time and stdout.
fn timed(mut command: Command, stdin: &[u8]) -> (Duration, String) {
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command.spawn().expect("starts");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let output = child.wait_with_output().unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    // An execute of an unknown plan is refused (exit 1) with its answer.
    assert!(stdout.contains("\"status\"") || output.status.success(), "{command:?}: {stdout}");
    (took, stdout)
}

/// The row names; [`sample`] says which it takes under which rule.
const ROWS: [&str; 8] = [
    "sudo alone, options before (sudo -n /usr/bin/true)",
    "sudo alone, the rule's options",
    "helper alone as root, one start (rpc-worker)",
    "helper alone as root, two starts (rpc: front + worker)",
    "management call, rule before: gate -> sudo (forks, waits) -> front -> worker",
    "management call, the rule setup writes: gate -> sudo (execs) -> helper",
    "  of which: the shell and the gate alone (the identity request: no sudo)",
    "  of which: the helper, one start, a request with no engine call",
];

/// One sample of each row this rule's block takes: (row index, time).
fn sample(rule: Rule, line: &str) -> Vec<(usize, Duration)> {
    let (uid, gid) = agent_ids();
    let as_agent = |program: &str| {
        let mut c = Command::new(program);
        c.env_clear().uid(uid).gid(gid);
        c
    };
    let mut sudo_true = as_agent(SUDO);
    sudo_true.args(["-n", "/usr/bin/true"]);
    let mut gate = as_agent(SHELL);
    gate.args(GATE_BY_SHELL).env("SSH_ORIGINAL_COMMAND", line);
    let (gated, reply) = timed(gate, REQUEST);
    assert!(reply.contains(r#""status":"ok""#), "the gated rpc answers: {reply}");
    let (row_sudo, row_chain) = if rule == Rule::Before { (0, 4) } else { (1, 5) };
    let mut samples = vec![(row_sudo, timed(sudo_true, b"").0), (row_chain, gated)];
    if rule == Rule::Now {
        for (row, sub) in [(2, "rpc-worker"), (3, "rpc")] {
            let mut helper = Command::new(HELPER);
            helper.arg(sub).env_clear().env("SUDO_USER", AGENT);
            samples.push((row, timed(helper, REQUEST).0));
        }
        let mut identity = as_agent(SHELL);
        identity.args(GATE_BY_SHELL).env("SSH_ORIGINAL_COMMAND", volce_lab::wire::gate::LEGACY_IDENTITY);
        samples.push((6, timed(identity, b"").0));
        let mut no_engine = Command::new(HELPER);
        no_engine.arg("rpc-worker").env_clear().env("SUDO_USER", AGENT);
        samples.push((7, timed(no_engine, UNKNOWN_PLAN).0));
    }
    samples
}

/// strace's log of one request: `program args` with REQUEST on stdin,
/// `SSH_ORIGINAL_COMMAND` set to `line`, as the agent when `agent` (strace's
/// `-u`, so that sudo keeps its set-uid), following children.
fn traced(trace: &str, agent: bool, program_args: &[&str], line: &str) -> Option<String> {
    let log = Path::new(STATE).parent()?.join("volce-mc-strace.log");
    let mut command = Command::new("/usr/bin/strace");
    command.args(["-f", "-e", trace, "-o"]).arg(&log);
    if agent {
        command.args(["-u", AGENT]);
    }
    let mut child = command
        .args(program_args)
        .env_clear()
        .env("SUDO_USER", AGENT)
        .env("SSH_ORIGINAL_COMMAND", line)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(REQUEST).ok()?;
    child.wait().ok()?;
    std::fs::read_to_string(&log).ok()
}

/// The files one rpc-worker process fsyncs, in order, from strace's log
/// (descriptors are per process: a docker child reuses the numbers).
fn fsyncs() -> Option<Vec<String>> {
    let text = traced("trace=openat,fsync,fdatasync", false, &[HELPER, "rpc-worker"], "")?;
    let mut open = std::collections::HashMap::new();
    let mut synced = Vec::new();
    for line in text.lines() {
        let pid = line.split_whitespace().next().unwrap_or_default();
        if let (true, Some(path), Some((_, fd))) =
            (line.contains("openat("), line.split('"').nth(1), line.rsplit_once("= "))
        {
            open.insert((pid.to_owned(), fd.trim().to_owned()), path.to_owned());
        }
        if let Some((_, rest)) = line.split_once("fsync(").or_else(|| line.split_once("fdatasync(")) {
            let fd = rest.split(')').next().unwrap_or_default().to_owned();
            synced
                .push(open.get(&(pid.to_owned(), fd.clone())).cloned().unwrap_or_else(|| format!("fd {fd}")));
        }
    }
    Some(synced)
}

/// How many times the whole chain (gate as the agent, under the rule
/// setup writes) execs the binary after the gate's own start.
fn helper_starts(line: &str) -> Option<usize> {
    let shell = [&[SHELL][..], &GATE_BY_SHELL[..]].concat();
    let text = traced("trace=execve", true, &shell, line)?;
    // The binary's execs (the gate's, then the helper's, perhaps its
    // worker's), not the shell's, sudo's or the stub docker's.
    let ours = text.lines().filter(|l| {
        l.contains("execve(") && l.contains("= 0") && l.contains("[\"volce-lab-host\"")
            || l.contains(&format!("execve(\"{HELPER}\"")) && l.contains("= 0")
    });
    Some(ours.count().saturating_sub(1))
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let tools = [SUDO, "/usr/sbin/useradd", "/usr/bin/unshare"];
    if !nix::unistd::geteuid().is_root() || tools.iter().any(|t| !Path::new(t).exists()) {
        println!("management_call: skipped (needs root, for its mount namespace, and {tools:?})");
        return;
    }
    if std::env::var_os(INSIDE).is_none() {
        // Re-run inside a private mount namespace: our mounts end with it.
        let status = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--"])
            .arg(std::env::current_exe().unwrap())
            .args(std::env::args_os().skip(1))
            .env(INSIDE, "1")
            .status()
            .expect("unshare runs");
        std::process::exit(status.code().unwrap_or(1));
    }
    let rounds: usize = std::env::var("VL_MC_ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(200);
    let scratch = tempfile::tempdir().unwrap();
    let on_disk = arrange(scratch.path());
    let host = nix::unistd::gethostname().unwrap().to_string_lossy().into_owned();
    let line = volce_lab::wire::gate::request_line(RemoteCommand::Rpc, &host, AGENT);
    let mut rows: Vec<Vec<Duration>> = vec![Vec::new(); ROWS.len()];
    // Pairs of blocks, one under each rule: every row gets samples.
    for block in 0..2 * rounds.div_ceil(BLOCK).max(1) {
        let rule = if block % 2 == 0 { Rule::Before } else { Rule::Now };
        install(rule);
        for _ in 0..BLOCK {
            for (row, took) in sample(rule, &line) {
                rows[row].push(took);
            }
        }
    }
    install(Rule::Now);
    let met = report(&rows, &line);
    if on_disk.is_some() {
        run("umount", &[STATE]);
    }
    drop(on_disk);
    if !met {
        std::process::exit(1);
    }
}

/// Prints the rows, the fsyncs and the verdict; whether the target was met.
fn report(rows: &[Vec<Duration>], line: &str) -> bool {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at the end: {}", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
    for (name, samples) in ROWS.iter().zip(rows) {
        let (p50, p90) = (stats::ms(stats::p50(samples)), stats::ms(stats::percentile(samples, 0.9)));
        println!("{name:<80} p50 {p50:7.2} ms  p90 {p90:7.2} ms  ({} samples)", samples.len());
    }
    match helper_starts(line) {
        Some(n) => println!("starts of the binary per request after the gate's, the rule setup writes: {n}"),
        None => println!("starts of the binary per request: not counted (no /usr/bin/strace)"),
    }
    match fsyncs() {
        Some(files) => println!("fsyncs of one request: {} ({})", files.len(), files.join(", ")),
        None => println!("fsyncs of one request: not counted (no /usr/bin/strace)"),
    }
    let now = stats::ms(stats::p50(&rows[5]));
    // No sample is no figure: never a pass.
    let met = !rows[5].is_empty() && now <= TARGET_MS;
    let verdict = if met { "met" } else { "FAILED" };
    println!("management call p50 {now:.2} ms (target <= {TARGET_MS} ms): {verdict}");
    met
}
