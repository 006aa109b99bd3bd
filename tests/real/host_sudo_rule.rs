//! The agent's sudoers drop-in as setup writes it (`install::sudoers_file`:
//! the one rule, and for the rpc command no pty, no PAM session, no
//! credentials), against the real sudo (issue 44): the agent's account can
//! run exactly `sudo -n /usr/local/bin/volce-lab-host rpc` and nothing else,
//! sudo execs the helper in its own place, and the helper answers from one
//! process that no signal of the agent's reaches.
//!
//! Each test builds its world in a private mount namespace (`unshare
//! --mount`, util-linux), so the machine's own installation is neither seen
//! nor touched: `/etc`, `/var/lib` and `/usr/local/bin` are overlays with a
//! tmpfs upper layer holding the account `vl-rule-agent`, the drop-in
//! (`visudo -c` must accept the whole configuration) and the shipped
//! binary; `/etc/volce-lab` (the test policy) and `/var/lib/volce-lab` are
//! tmpfs of their own, empty whatever an installation keeps there; `/usr/bin/docker` is a script answering an empty
//! engine. Ignored: needs root, sudo, visudo, useradd, runuser and unshare,
//! and fails loudly without them.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::fake_engine::unused_image;
use crate::support::harness::policy_json;
use crate::support::procfs::process_field;

const BIN: &str = env!("CARGO_BIN_EXE_volce-lab");
const AGENT: &str = "vl-rule-agent";
const HELPER: &str = "/usr/local/bin/volce-lab-host";
const UNKNOWN_PLAN: &str = r#"{"operation":"execute","plan_id":"0123456789abcdef0123456789abcdef"}"#;

/// Sets up the world in the namespace, then runs "$@" (`$0` is the
/// directory of the files the test wrote).
const WORLD: &str = r#"set -e
S="$0"
mount -t tmpfs -o mode=0755 vl-rule "$S/mnt"
for pair in /etc:etc /var/lib:varlib /usr/local/bin:bin; do
    d=${pair%%:*}; n=${pair##*:}
    mkdir "$S/mnt/$n-up" "$S/mnt/$n-work"
    mount -t overlay overlay -o "lowerdir=$d,upperdir=$S/mnt/$n-up,workdir=$S/mnt/$n-work" "$d"
done
mkdir -p /etc/volce-lab /var/lib/volce-lab
# Empty, whatever an installation on this machine keeps there.
mount -t tmpfs -o mode=0755 vl-rule-etc /etc/volce-lab
mount -t tmpfs -o mode=0700 vl-rule-state /var/lib/volce-lab
install -m 0600 "$S/policy.json" /etc/volce-lab/policy.json
install -m 0755 "$S/volce-lab" /usr/local/bin/volce-lab-host
mount --bind "$S/docker" /usr/bin/docker
useradd --no-create-home --home-dir /nonexistent --shell /bin/sh vl-rule-agent
install -m 0440 "$S/sudoers" /etc/sudoers.d/volce-lab
visudo -cq
exec "$@""#;

/// The files [`WORLD`] installs, in a directory of the test's own.
struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        assert!(nix::unistd::geteuid().is_root(), "needs root (mount namespaces, accounts, sudoers)");
        for tool in [
            "/usr/bin/sudo",
            "/usr/sbin/visudo",
            "/usr/sbin/useradd",
            "/usr/sbin/runuser",
            "/usr/bin/unshare",
        ] {
            assert!(
                Path::new(tool).exists(),
                "{tool} is missing: this suite needs it (sudo, passwd, util-linux)"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let put = |name: &str, bytes: &[u8], mode: u32| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(dir.path().join("mnt")).unwrap();
        put("policy.json", policy_json().to_string().as_bytes(), 0o600);
        put("volce-lab", &std::fs::read(BIN).unwrap(), 0o755);
        put("sudoers", volce_lab::install::sudoers_file(AGENT).as_bytes(), 0o440);
        let docker = format!(
            "#!/bin/sh\ncase \"$1\" in\nps) ;;\nimage) echo {} ;;\nnetwork) ;;\n*) exit 1 ;;\nesac\n",
            unused_image().as_str()
        );
        put("docker", docker.as_bytes(), 0o755);
        World { dir }
    }

    /// `args` run as root in the world, in a namespace of their own.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("/usr/bin/unshare");
        command
            .args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c", WORLD])
            .arg(self.dir.path())
            .args(args)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    /// `script` run by the agent's account's shell in the world (the shell
    /// stays its parent, as sshd's does under the gate), `stdin` on its stdin.
    fn as_agent(&self, script: &str, stdin: &[u8]) -> Output {
        let mut child = self.spawn_as_agent(script);
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        child.wait_with_output().unwrap()
    }

    fn spawn_as_agent(&self, script: &str) -> Child {
        let script = format!("{script}; exit $?");
        self.command(&["runuser", "-u", AGENT, "--", "/bin/sh", "-c", &script]).spawn().unwrap()
    }
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
#[ignore = "real parts: root, sudo, unshare; run by scripts/test"]
fn the_agent_runs_exactly_the_rpc_through_the_rule_setup_writes() {
    let world = World::new();
    let answered = world.as_agent(&format!("/usr/bin/sudo -n {HELPER} rpc"), UNKNOWN_PLAN.as_bytes());
    assert!(text(&answered).contains(r#""code":"plan_not_found""#), "the rpc answers: {}", text(&answered));

    // Outside the namespace's tmpfs, so the test sees it if made.
    let marker = world.dir.path().join("sudo-ran");
    let plan = "0123456789abcdef0123456789abcdef";
    let digest = "a".repeat(64);
    let attempts = [
        format!("sudo -n {HELPER} approve {plan} {digest}"),
        format!("sudo -n {HELPER} show {plan}"),
        format!("sudo -n {HELPER} doctor"),
        format!("sudo -n {HELPER} pause"),
        format!("sudo -n {HELPER} rpc-worker"),
        format!("sudo -n {HELPER}"),
        format!("sudo -n {HELPER} rpc extra"),
        format!("sudo -n {HELPER} ssh-gate"),
        format!("sudo -n -u nobody {HELPER} rpc"),
        format!("sudo -n -E {HELPER} rpc"),
        format!("sudo -n --preserve-env=PATH {HELPER} rpc"),
        format!("sudo -n LD_PRELOAD=/tmp/x.so {HELPER} rpc"),
        format!("sudo -n /bin/sh -c 'touch {}'", marker.display()),
        format!("sudo -n /usr/bin/touch {}", marker.display()),
        "sudo -n -s".to_owned(),
        "sudo -n -i".to_owned(),
        "sudo -n -e /etc/volce-lab/policy.json".to_owned(),
    ];
    for attempt in &attempts {
        let refused = world.as_agent(attempt, b"");
        assert_ne!(refused.status.code(), Some(0), "{attempt} ran: {}", text(&refused));
        assert!(!text(&refused).contains("\"status\""), "{attempt} reached the helper: {}", text(&refused));
    }
    assert!(!marker.exists(), "a refused sudo ran a command");
}

#[test]
#[ignore = "real parts: root, sudo, unshare; run by scripts/test"]
fn sudo_lists_the_one_rule_and_no_option_that_passes_a_loader_variable() {
    let world = World::new();
    let listed = world.command(&["sudo", "-n", "-l", "-U", AGENT]).output().unwrap();
    assert!(listed.status.success(), "{}", text(&listed));
    let listing = volce_lab::install::doctor::loader::parse_listing(&String::from_utf8_lossy(&listed.stdout));
    // Exactly what the doctor demands of the agent (`doctor/ssh.rs`).
    assert_eq!(listing.rules, [format!("(root) NOPASSWD: {HELPER} rpc")], "{}", text(&listed));
    assert_eq!(volce_lab::install::doctor::loader::loader_risk(&listing), None, "{}", text(&listed));
    let options = listing.defaults.join(", ");
    for option in ["!use_pty", "!pam_session", "!pam_setcred"] {
        assert!(options.contains(option), "{option} not in force for the rpc: {}", text(&listed));
    }
    // The doctor's warning reads the same listing and finds nothing missing.
    let missing =
        volce_lab::install::doctor::ssh::rpc_options_missing(&String::from_utf8_lossy(&listed.stdout));
    assert_eq!(missing, Vec::<&str>::new(), "{}", text(&listed));
}

/// The processes under `root`, as (pid, parent, cmdline with NULs as
/// spaces, real uid of the parent).
fn descendants(root: u32) -> Vec<(u32, u32, String)> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let Some(rest) = stat.rfind(')').map(|at| &stat[at + 1..]) else { continue };
        let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) else { continue };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        all.push((pid, ppid, String::from_utf8_lossy(&cmdline).replace('\0', " ").trim().to_owned()));
    }
    let mut found = vec![root];
    let mut grew = true;
    while grew {
        grew = false;
        for (pid, ppid, _) in &all {
            if found.contains(ppid) && !found.contains(pid) {
                found.push(*pid);
                grew = true;
            }
        }
    }
    all.into_iter().filter(|(pid, _, _)| found.contains(pid) && *pid != root).collect()
}

#[test]
#[ignore = "real parts: root, sudo, unshare; run by scripts/test"]
fn sudo_execs_the_helper_in_its_place_and_the_agent_cannot_signal_it() {
    let world = World::new();
    // The request comes after 2 s: meanwhile the helper waits for it.
    let script = format!(r#"{{ sleep 2; printf '%s' '{UNKNOWN_PLAN}'; }} | /usr/bin/sudo -n {HELPER} rpc"#);
    let mut child = world.spawn_as_agent(&script);
    let started = Instant::now();
    let helper = loop {
        let under = descendants(child.id());
        if let Some(found) = under.iter().find(|(_, _, cmd)| *cmd == format!("{HELPER} rpc")) {
            break (found.clone(), under);
        }
        assert!(started.elapsed() < Duration::from_secs(5), "no helper under the agent's shell: {under:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let ((pid, parent, _), under) = helper;
    let exe: PathBuf = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert!(exe.ends_with("volce-lab-host"), "sudo's process became the helper: {exe:?} {under:?}");
    assert!(!under.iter().any(|(_, _, cmd)| cmd.starts_with("/usr/bin/sudo")), "a sudo waits: {under:?}");
    assert!(
        !process_field(parent, "Uid").split(' ').any(|uid| uid == "0"),
        "its parent is the agent's shell: {}",
        process_field(parent, "Uid")
    );
    assert_eq!(process_field(pid, "Uid"), "0 0 0 0", "the helper runs as root");
    // Give the helper time to decide; then no worker may exist.
    std::thread::sleep(Duration::from_millis(500));
    let under = descendants(child.id());
    assert!(!under.iter().any(|(_, _, cmd)| cmd.contains("rpc-worker")), "one start, no worker: {under:?}");
    // The ALRM that made sudo kill its command, and a KILL, from the agent.
    for signal in ["ALRM", "KILL"] {
        let sent =
            world.command(&["runuser", "-u", AGENT, "--", "kill", "-s", signal, &pid.to_string()]).output();
        let sent = sent.unwrap();
        assert!(!sent.status.success(), "the agent signalled the helper ({signal}): {}", text(&sent));
        assert!(text(&sent).contains("not permitted"), "{}", text(&sent));
    }
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    assert!(text(&output).contains(r#""code":"plan_not_found""#), "the helper answered: {}", text(&output));
}
