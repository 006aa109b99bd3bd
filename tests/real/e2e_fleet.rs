//! End-to-end: several servers from one MCP entry. Server A is the e2e
//! installation; server B is a second "server" on the same machine: its own
//! sshd on another loopback port inside its own UTS and mount namespace
//! (`unshare --uts --mount`), with its own hostname and its own
//! `/etc/volce-lab` and `/var/lib/volce-lab` (bind mounts), sharing the
//! accounts, the sudoers rule, the installed helper and the Docker engine.
//! One `volce-lab mcp-serve` with a targets file speaks to both, to an alias
//! whose port is closed, and to an alias that reaches A but expects another
//! host. Shows: the fan-out reports each target on its own; a plan made on
//! A is unknown to B; an approval on A approves nothing on B; a killed sshd
//! fails only its own target; a mistyped alias stops the start before any
//! ssh runs.
//!
//! Runs as root after scripts/e2e-setup; cleans up what it made.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::e2e::*;
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{ConfigureCommandExt as _, TokioChildProcess};
use serde_json::{Value, json};

const B_HOST: &str = "vl-fleet-b";
const B_DIR: &str = "/var/tmp/volce-lab-e2e/fleet-b";

/// Server B: its sshd in its own namespaces, killed (with every session it
/// forked) on drop.
struct ServerB {
    sshd: Child,
    port: u16,
}

impl ServerB {
    fn start(approval_for_deploy: bool) -> ServerB {
        let dir = Path::new(B_DIR);
        if dir.exists() {
            std::fs::remove_dir_all(dir).unwrap();
        }
        let etc = dir.join("etc");
        let state = dir.join("state");
        for (path, mode) in [(dir, "0755"), (&etc, "0755"), (&state, "0700")] {
            let made = run(
                "/usr/bin/install",
                &["-d", "-o", "root", "-g", "root", "-m", mode, path.to_str().unwrap()],
                None,
            );
            assert!(made.ok(), "{made:?}");
        }
        let copied = run("/bin/cp", &["-a", "/etc/volce-lab/.", etc.to_str().unwrap()], None);
        assert!(copied.ok(), "{copied:?}");
        // B's own policy: deploy needs an approval there.
        let policy_path = etc.join("policy.json");
        let mut policy: Value = serde_json::from_slice(&std::fs::read(&policy_path).unwrap()).unwrap();
        if approval_for_deploy {
            policy["approval_required"] =
                json!(["deploy", "stop", "remove_image", "remove_app", "start", "update"]);
        }
        std::fs::write(&policy_path, serde_json::to_vec_pretty(&policy).unwrap()).unwrap();

        let port = (2300..2400)
            .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
            .expect("a free port for server B's sshd");
        let config = std::fs::read_to_string(Path::new(E2E_DIR).join("sshd/sshd_config")).unwrap();
        let config: String = config
            .lines()
            .map(|line| {
                if line.starts_with("ListenAddress") {
                    format!("ListenAddress 127.0.0.1:{port}")
                } else if line.starts_with("PidFile") {
                    format!("PidFile {B_DIR}/sshd.pid")
                } else {
                    line.to_owned()
                }
            })
            .map(|line| line + "\n")
            .collect();
        let config_path = dir.join("sshd_config");
        std::fs::write(&config_path, config).unwrap();
        let script = format!(
            "hostname {B_HOST} && mount --bind {etc} /etc/volce-lab && mount --bind {state} /var/lib/volce-lab \
             && exec /usr/sbin/sshd -D -e -f {config}",
            etc = etc.display(),
            state = state.display(),
            config = config_path.display()
        );
        let sshd = Command::new("/usr/bin/unshare")
            .args(["--uts", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start server B's sshd in its own namespaces");
        let server = ServerB { sshd, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "server B's sshd does not answer on 127.0.0.1:{port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// `sudo volce-lab-host ARGS` as the operator, inside B's namespaces:
    /// B's terminal.
    fn operator(&self, args: &[&str]) -> Ran {
        let pid = self.sshd.id().to_string();
        let mut argv = vec!["-t", pid.as_str(), "-m", "-u", "--", "/usr/sbin/runuser", "-u", OPERATOR, "--"];
        argv.extend(["/usr/bin/sudo", "-n", HOST_LINK]);
        argv.extend_from_slice(args);
        run("/usr/bin/nsenter", &argv, None)
    }

    /// The stored plan as B's operator sees it.
    fn stored_plan(&self, plan_id: &str) -> Value {
        let pid = self.sshd.id().to_string();
        let shown = run(
            "/usr/bin/nsenter",
            &["-t", &pid, "-m", "-u", "--", HOST_LINK, "show", "--json", plan_id],
            None,
        );
        assert!(shown.ok(), "B: show --json {plan_id}: {shown:?}");
        serde_json::from_str(shown.stdout.trim()).unwrap()
    }

    /// Kills the sshd and every session it forked (the workstation's master
    /// to B dies with them).
    fn kill(&mut self) {
        self.signal_all(nix::sys::signal::Signal::SIGKILL);
        let _ = self.sshd.wait();
    }

    /// Sends `signal` to the sshd and every session it forked.
    fn signal_all(&self, signal: nix::sys::signal::Signal) {
        let root = self.sshd.id();
        let mut doomed = vec![root];
        // The namespace's processes are the listener's descendants.
        for _ in 0..4 {
            for entry in std::fs::read_dir("/proc").unwrap().flatten() {
                let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
                let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
                let ppid = stat
                    .rsplit(") ")
                    .next()
                    .and_then(|rest| rest.split(' ').nth(1))
                    .and_then(|p| p.parse().ok());
                if ppid.is_some_and(|p: u32| doomed.contains(&p)) && !doomed.contains(&pid) {
                    doomed.push(pid);
                }
            }
        }
        for pid in doomed {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal);
        }
    }
}

impl Drop for ServerB {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(B_DIR);
    }
}

/// The workstation: an ssh_config with the four aliases and a targets file.
struct Workstation {
    dir: tempfile::TempDir,
}

impl Workstation {
    fn new(host_a: &str, port_b: u16, alias_typo: bool) -> Workstation {
        let dir = private_tempdir();
        let key = std::fs::read_to_string(Path::new(E2E_DIR).join("sshd/ssh_host_ed25519_key.pub")).unwrap();
        let key: Vec<&str> = key.split_whitespace().take(2).collect();
        let closed = free_port();
        let known: String = [SSHD_PORT, port_b, closed]
            .iter()
            .map(|p| format!("[127.0.0.1]:{p} {}\n", key.join(" ")))
            .collect();
        std::fs::write(dir.path().join("known_hosts"), known).unwrap();
        let config = format!(
            "Host vl-fleet-a vl-fleet-c vl-fleet-a2 vl-fleet-a3 vl-fleet-a4 vl-fleet-a5 vl-fleet-a6 vl-fleet-a7\n\
             \x20   Port {SSHD_PORT}\nHost vl-fleet-b\n    Port {port_b}\n\
             Host vl-fleet-down\n    Port {closed}\nHost vl-fleet-*\n    HostName 127.0.0.1\n    User {AGENT}\n\
             \x20   UserKnownHostsFile {kh}\n    GlobalKnownHostsFile /dev/null\n    IdentityFile {E2E_DIR}/client/id_ed25519\n\
             \x20   IdentitiesOnly yes\n    StrictHostKeyChecking yes\n    UpdateHostKeys no\n    CheckHostIP no\n\
             \x20   BatchMode yes\n    PasswordAuthentication no\n    KbdInteractiveAuthentication no\n    LogLevel ERROR\n",
            kh = dir.path().join("known_hosts").display()
        );
        std::fs::write(dir.path().join("ssh_config"), config).unwrap();
        let a_alias = if alias_typo { "vl-flet-a" } else { "vl-fleet-a" };
        let targets = format!(
            "# two servers, a closed port and an impostor\n\
             [targets.a]\nssh_alias = \"{a_alias}\"\nexpected_host = \"{host_a}\"\nexpected_user = \"{AGENT}\"\n\
             management = true\ngroups = [\"prod\"]\n\n\
             [targets.b]\nssh_alias = \"vl-fleet-b\"\nexpected_host = \"{B_HOST}\"\nexpected_user = \"{AGENT}\"\n\
             management = true\ngroups = [\"prod\"]\n\n\
             [targets.down]\nssh_alias = \"vl-fleet-down\"\nexpected_host = \"down\"\nexpected_user = \"{AGENT}\"\n\n\
             [targets.impostor]\nssh_alias = \"vl-fleet-c\"\nexpected_host = \"not-{host_a}\"\nexpected_user = \"{AGENT}\"\n"
        );
        // Six more names for A, each its own target and master: ten in all.
        let more: String = (2..=7)
            .map(|i| {
                format!(
                    "\n[targets.a{i}]\nssh_alias = \"vl-fleet-a{i}\"\nexpected_host = \"{host_a}\"\n\
                     expected_user = \"{AGENT}\"\n"
                )
            })
            .collect();
        std::fs::write(dir.path().join("targets.toml"), targets + &more).unwrap();
        Workstation { dir }
    }

    fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_volce-lab"));
        command
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", self.dir.path())
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .env("VOLCE_LAB_TARGETS", self.dir.path().join("targets.toml"))
            .env("VOLCE_LAB_SSH_CONFIG", self.dir.path().join("ssh_config"))
            .env("VOLCE_LAB_TIMEOUT", "10");
        command
    }

    async fn agent(&self) -> RunningService<RoleClient, ()> {
        let template = self.command();
        let command = tokio::process::Command::new(env!("CARGO_BIN_EXE_volce-lab")).configure(|cmd| {
            cmd.arg("mcp-serve").env_clear();
            for (key, value) in template.get_envs() {
                if let Some(value) = value {
                    cmd.env(key, value);
                }
            }
        });
        ().serve(TokioChildProcess::new(command).unwrap()).await.expect("MCP initialize")
    }
}

async fn call(agent: &RunningService<RoleClient, ()>, tool: &'static str, arguments: Value) -> Value {
    let Value::Object(arguments) = arguments else { panic!("an object") };
    let result = agent
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    result.structured_content.unwrap_or_else(|| panic!("{tool}: no structuredContent"))
}

/// (target, status) of each result of a fan-out, in the order given.
fn statuses(result: &Value) -> Vec<(String, String)> {
    result["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results: {result}"))
        .iter()
        .map(|r| (r["target"].as_str().unwrap().to_owned(), r["status"].as_str().unwrap().to_owned()))
        .collect()
}

/// A deploy plan of `app` on `target`.
fn plan(target: &str, app: &str, port: u16) -> Value {
    json!({"target": target, "action": "deploy", "parameters": {"app": app, "image": "web", "host_port": port,
        "container_port": 8080, "server_name": format!("{app}.e2e.test")}})
}

#[test]
#[ignore = "real parts: scripts/e2e-setup (sshd, accounts, sudo, the installed helper), unshare"]
fn two_servers_keep_their_plans_and_approvals_apart_and_a_fan_out_reports_each() {
    let host_a = require_setup();
    require_docker_and_policy();
    let _serial = serial();
    fresh_host_state(&[]);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(two_servers(&host_a));
    fresh_host_state(&[]);
}

async fn two_servers(host_a: &str) {
    // Deploy needs an approval on A too, so that both plans wait for one.
    let _policy = PolicyChange::apply(|policy| {
        policy["approval_required"] =
            json!(["deploy", "stop", "remove_image", "remove_app", "start", "update"]);
    });
    let mut b = ServerB::start(true);
    let workstation = Workstation::new(host_a, b.port, false);

    let listed = workstation.command().arg("targets").output().unwrap();
    assert!(listed.status.success(), "{listed:?}");
    let listed = String::from_utf8_lossy(&listed.stdout);
    for name in ["a", "a7", "b", "down", "impostor"] {
        assert!(listed.lines().any(|l| l.starts_with(&format!("{name} "))), "{name} in: {listed}");
    }

    let agent = workstation.agent().await;
    let started = Instant::now();
    let fan_out = call(&agent, "cloud_check", json!({"check": "identity", "targets": ["*"]})).await;
    let took = started.elapsed();
    assert_eq!(fan_out["summary"], json!({"ok": 8, "failed": 2}), "{fan_out}");
    let seen = statuses(&fan_out);
    let pairs: Vec<(&str, &str)> = seen.iter().map(|(t, s)| (t.as_str(), s.as_str())).collect();
    assert_eq!(pairs.len(), 10, "ten targets in one call");
    assert_eq!(pairs[..2], [("down", "connection_failed"), ("impostor", "identity_mismatch")]);
    assert_eq!((pairs[2], pairs[9]), (("a", "ok"), ("b", "ok")));
    assert!(pairs[2..].iter().all(|(_, status)| *status == "ok"), "{pairs:?}");
    let b_identity = &fan_out["results"][9];
    assert!(
        b_identity["output"].as_str().unwrap().starts_with(B_HOST),
        "B answers as its own host: {b_identity}"
    );
    println!("fan-out of identity over 10 targets (cold masters): {} ms", took.as_millis());

    // One plan on each server; each exists only where it was made.
    let port_a = free_port();
    let on_a = call(&agent, "service_plan", plan("a", "e2e-fleet-a", port_a)).await;
    assert_eq!(on_a["status"], "ok", "{on_a}");
    let on_b = call(&agent, "service_plan", plan("b", "e2e-fleet-b", port_a + 1)).await;
    assert_eq!(on_b["status"], "ok", "{on_b}");
    let id_a = on_a["plan_id"].as_str().unwrap().to_owned();
    let id_b = on_b["plan_id"].as_str().unwrap().to_owned();
    assert_eq!(on_a["result"]["requires_approval"], true);

    // A's plan sent to B: B does not know it; nothing runs on either.
    let crossed = call(&agent, "service_execute", json!({"target": "b", "plan_id": id_a})).await;
    assert_eq!(
        (crossed["status"].as_str(), crossed["code"].as_str()),
        (Some("rejected"), Some("plan_not_found")),
        "{crossed}"
    );
    assert_eq!(crossed["target"], "b");

    // The operator approves A's plan on A: B's plan stays unapproved.
    let digest_a = find_str(&stored_plan(&id_a), "digest").to_owned();
    let approved = as_operator(&["approve", &id_a, &digest_a, "--yes"]);
    assert!(approved.ok(), "approve on A: {approved:?}");
    // (An approved plan is pending with an approval.)
    let shown_a = stored_plan(&id_a);
    assert_eq!(
        (shown_a["state"].as_str(), shown_a["approval"]["by"].as_str()),
        (Some("pending"), Some(OPERATOR))
    );
    let shown_b = b.stored_plan(&id_b);
    assert_eq!(
        (shown_b["state"].as_str(), &shown_b["approval"]),
        (Some("pending"), &Value::Null),
        "{shown_b}"
    );
    let waiting = call(&agent, "service_execute", json!({"target": "b", "plan_id": id_b})).await;
    assert_eq!(waiting["code"], "approval_required", "{waiting}");
    // B's operator does not know A's plan either.
    let unknown = b.operator(&["show", &id_a]);
    assert!(
        !unknown.ok() && format!("{}{}", unknown.stdout, unknown.stderr).contains("plan_not_found"),
        "{unknown:?}"
    );
    let shown_a = stored_plan(&id_a);
    assert_eq!(
        (shown_a["state"].as_str(), shown_a["claimed_at"].as_str()),
        (Some("pending"), None),
        "nothing ran on A"
    );

    // B's sshd, and with it the master's connection, killed while a
    // fan-out is in flight: B is held stopped first, so that its check is
    // surely under way when it dies. Only b fails; the others answer
    // within their own time.
    b.signal_all(nix::sys::signal::Signal::SIGSTOP);
    let started = Instant::now();
    let (in_flight, killed_at) = tokio::join!(
        call(&agent, "cloud_check", json!({"check": "disk", "targets": ["a", "a2", "a3", "b"]})),
        async {
            tokio::time::sleep(Duration::from_millis(800)).await;
            b.kill();
            started.elapsed()
        }
    );
    let took = started.elapsed();
    let seen = statuses(&in_flight);
    let pairs: Vec<(&str, &str)> = seen.iter().map(|(t, s)| (t.as_str(), s.as_str())).collect();
    assert_eq!(pairs[0], ("b", "connection_failed"), "{in_flight}");
    assert_eq!(pairs[1..], [("a", "ok"), ("a2", "ok"), ("a3", "ok")], "{in_flight}");
    assert_eq!(in_flight["summary"], json!({"ok": 3, "failed": 1}), "{in_flight}");
    for result in &in_flight["results"].as_array().unwrap()[1..] {
        let duration = result["execution"]["duration_ms"].as_u64().unwrap_or_else(|| panic!("{result}"));
        assert!(duration < 2_000, "a target waited for the dying one: {result}");
    }
    assert!(took < killed_at + Duration::from_secs(5), "b's failure came {took:?} after the start");
    println!(
        "fan-out with b killed in flight: {} ms (killed at {} ms)",
        took.as_millis(),
        killed_at.as_millis()
    );

    // B's sshd stays dead: only b fails, a still answers.
    b.kill();
    let after = call(&agent, "cloud_check", json!({"check": "disk", "targets": ["@prod"]})).await;
    let seen = statuses(&after);
    let pairs: Vec<(&str, &str)> = seen.iter().map(|(t, s)| (t.as_str(), s.as_str())).collect();
    assert_eq!(pairs[1], ("a", "ok"), "{after}");
    assert_eq!(pairs[0].0, "b");
    assert_ne!(pairs[0].1, "ok", "{after}");
    agent.cancel().await.ok();

    // A mistyped alias: the start stops with the file it was looked for in,
    // before any ssh runs (no master socket appears).
    let typo = Workstation::new(host_a, b.port, true);
    let refused = typo.command().arg("mcp-serve").stdin(Stdio::null()).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("vl-flet-a") && stderr.contains("ssh_config"), "{stderr}");
    assert!(sockets_under(typo.dir.path()).is_empty(), "no ssh master was started");
}

fn sockets_under(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt as _;
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path).into_iter().flatten().flatten() {
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_socket() {
                found.push(entry.path());
            }
        }
    }
    found
}
