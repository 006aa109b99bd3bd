//! Rollouts over several servers (issue 43), on real parts: the three
//! servers scripts/fleet-servers builds, each in its own network, mount and
//! UTS namespaces with its own sshd, its own Docker engine (so an app's
//! containers bind-mount that server's own paths), its own policy, plans,
//! audit trail and machine id, all running the installed package. The
//! agent is the official Python SDK (tests/support/python/rollout_client.py)
//! driving `volce-lab mcp-serve` with a targets file; the operator signs
//! with `volce-lab approve --rollout` and a key each server's
//! allowed_signers lists.
//!
//! Shows: a deploy rolled out over three servers at once; an update over
//! the three, one at a time, with one signed consent, where the second
//! server's pinned image fails its health check: the first server changed,
//! the second was rolled back, the third was not touched and its plan
//! stays pending; the same rollout refused a second run; a signed rollout
//! with an entry changed after signing, and one signed for two servers
//! carried to the third (each refused by the tools, which take a rollout's
//! approval only with `rollout`, and by the host itself when the agent's
//! own ssh key carries it past them); a server whose sshd is gone at
//! execute time (the rollout halts there, the next server untouched); and
//! a cancel between batches (the batch that ran finished, no later one
//! started); and a rollout without a signature, its plans approved at each
//! server's terminal, halting at the one its operator did not approve.
//!
//! Runs as root after scripts/e2e-setup, the pinned SDK's venv and
//! scripts/fleet-servers up; leaves the servers as it found them but for
//! their apps, which it removes.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use volce_lab::mcp::rollout::{HostOutcome, RolloutState, RolloutView};

use crate::support::e2e::{Ran, run};

const FLEET: &str = "/var/tmp/volce-lab-fleet";
const APP: &str = "roll";
const PORT: u16 = 18100;
const SERVER_NAME: &str = "roll.fleet.test";
const NAMES: [&str; 3] = ["vl-fleet-1", "vl-fleet-2", "vl-fleet-3"];

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fleet-servers")
}

/// Loudly, never a skip: the servers are this suite's real part.
fn require_fleet() {
    assert!(
        Path::new(FLEET).join("ready").exists(),
        "the fleet test servers are not up: run scripts/fleet-servers up (scripts/test does)"
    );
    std::env::var_os("VOLCE_LAB_TEST_PYTHON")
        .expect("VOLCE_LAB_TEST_PYTHON: the pinned SDK's venv (scripts/test)");
}

/// `argv` as root inside server `k` (1-based).
fn in_server(k: usize, argv: &[&str]) -> Ran {
    let mut args = vec!["exec".to_owned(), k.to_string()];
    args.extend(argv.iter().map(|a| (*a).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(script().to_str().unwrap(), &args, None)
}

/// The page server `k`'s gateway serves for the app.
fn page(k: usize) -> String {
    let url = format!("http://127.0.0.1:{PORT}/");
    let host = format!("Host: {SERVER_NAME}");
    in_server(k, &["curl", "-sS", "--max-time", "5", "-H", &host, &url]).stdout.trim().to_owned()
}

/// Server `k`'s policy: the test policy with signed approvals, and `edit`.
fn set_policy(k: usize, edit: impl FnOnce(&mut Value)) {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut policy: Value =
        serde_json::from_slice(&std::fs::read("/var/tmp/volce-lab-test/policy.json").unwrap()).unwrap();
    policy["signed_approvals"] = json!({"software_keys": true});
    edit(&mut policy);
    let path = Path::new(FLEET).join(format!("s{k}/etc/policy.json"));
    let temp = path.with_extension("json.new");
    let mut file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&temp).unwrap();
    file.write_all(&serde_json::to_vec_pretty(&policy).unwrap()).unwrap();
    std::fs::rename(&temp, &path).unwrap();
}

fn image(name: &str) -> Value {
    let images: Value =
        serde_json::from_slice(&std::fs::read("/var/tmp/volce-lab-test/images.json").unwrap()).unwrap();
    images[name]["reference"].clone()
}

/// Server `k` without apps, and its helper's state started afresh (setup's
/// record kept, as e2e's `fresh_host_state` does).
fn fresh(k: usize) {
    let containers = in_server(k, &["docker", "ps", "-aq", "--filter", "label=io.volce-lab.app"]);
    for id in containers.stdout.split_whitespace() {
        in_server(k, &["docker", "rm", "-f", id]);
    }
    for filter in ["label=io.volce-lab.app", "label=io.volce-lab.gateway"] {
        let networks = in_server(k, &["docker", "network", "ls", "-q", "--filter", filter]);
        for id in networks.stdout.split_whitespace() {
            in_server(k, &["docker", "network", "rm", id]);
        }
    }
    let state = Path::new(FLEET).join(format!("s{k}/state"));
    for entry in std::fs::read_dir(&state).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().is_some_and(|n| n == "setup.json") {
            continue;
        }
        if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) }.unwrap();
    }
}

/// The workstation: its own state directory (manifests, audit, witness).
struct Workstation {
    state: tempfile::TempDir,
}

impl Workstation {
    fn env(&self, command: &mut Command) {
        command
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", "/root")
            .env("XDG_STATE_HOME", self.state.path())
            .env("VOLCE_LAB_MODE", "ssh")
            .env("VOLCE_LAB_SSH_CONFIG", format!("{FLEET}/client/ssh_config"))
            .env("VOLCE_LAB_TARGETS", format!("{FLEET}/client/targets.toml"));
    }

    /// One agent session: identity on every target, then `steps`; the
    /// client's report. `during` runs once the client waits at a step
    /// `{"wait_for": PATH}` (then PATH is made and the client goes on).
    fn agent(&self, steps: Value, during: impl FnOnce()) -> Value {
        let python = std::env::var_os("VOLCE_LAB_TEST_PYTHON").unwrap();
        let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/python/rollout_client.py");
        let file = self.state.path().join("steps.json");
        std::fs::write(&file, steps.to_string()).unwrap();
        let mut command = Command::new(python);
        command.arg(client).arg(env!("CARGO_BIN_EXE_volce-lab")).arg(&file);
        self.env(&mut command);
        let child = command.stdout(std::process::Stdio::piped()).spawn().expect("start the Python client");
        let gate = self.state.path().join("go");
        let waiting = gate.with_extension("waiting");
        let started = std::time::Instant::now();
        if steps.as_array().unwrap().iter().any(|s| s.get("wait_for").is_some()) {
            while !waiting.exists() {
                assert!(started.elapsed().as_secs() < 120, "the client never reached its wait");
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            during();
            std::fs::write(&gate, "").unwrap();
        }
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "the Python client failed");
        let report: Value = serde_json::from_slice(&output.stdout).expect("the client's report");
        assert_eq!(report["identity"], json!({"ok": 3, "failed": 0}), "{report}");
        report
    }

    /// `volce-lab approve --rollout ID --key KEY`, confirming with the
    /// manifest hash's first 8 characters: the signed text it printed.
    fn sign(&self, view: &RolloutView) -> String {
        let key = format!("{FLEET}/operator/approve_key");
        let mut command = Command::new(env!("CARGO_BIN_EXE_volce-lab"));
        command.args(["approve", "--rollout", view.rollout_id.as_str(), "--key", &key]);
        self.env(&mut command);
        let mut child = command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let prefix = &view.manifest_sha256.as_deref().unwrap()[..8];
        use std::io::Write as _;
        child.stdin.take().unwrap().write_all(format!("{prefix}\n").as_bytes()).unwrap();
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8(output.stdout).unwrap();
        assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
        // The statement is printed first, then the signed approval.
        let header = volce_lab::wire::rollout::ROLLOUT_HEADER;
        stdout[stdout.rfind(header).expect("a signed rollout")..].to_owned()
    }
}

/// Call `n` of a report: its structuredContent.
fn call(report: &Value, n: usize) -> &Value {
    &report["calls"][n]["structured"]
}

fn view(structured: &Value) -> RolloutView {
    serde_json::from_value(structured["result"].clone()).unwrap_or_else(|e| panic!("{e}: {structured}"))
}

fn outcomes(view: &RolloutView) -> Vec<(&str, HostOutcome)> {
    view.hosts.iter().map(|h| (h.target.as_str(), h.outcome)).collect()
}

fn plan_step(targets: Value, action: &str, parameters: Value, batch_size: u32, wait: u32) -> Value {
    json!({"tool": "service_plan", "arguments": {"targets": targets, "action": action, "parameters": parameters,
        "batch_size": batch_size, "health_wait_seconds": wait}})
}

fn execute_step(rollout: &RolloutView, signed: &str) -> Value {
    json!({"tool": "service_execute", "arguments": {"rollout": rollout.rollout_id.as_str(), "signed_approval": signed}})
}

/// Apps removed, policies as fleet-servers writes them, passed or failed.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        for k in 1..=3 {
            fresh(k);
            set_policy(k, |_| {});
        }
    }
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn one_signed_consent_rolls_an_update_over_three_servers_and_halts_at_the_first_failure() {
    require_fleet();
    let _cleanup = Cleanup;
    for k in 1..=3 {
        fresh(k);
        // Server 2's operator pinned a bad build as `web2`.
        set_policy(k, |policy| {
            if k == 2 {
                policy["catalog"]["web2"] = image("broken");
            }
        });
    }
    let station = Workstation { state: tempfile::tempdir().unwrap() };
    let deploy = json!({"app": APP, "image": "web", "host_port": PORT, "container_port": 8080, "server_name": SERVER_NAME});
    let update = json!({"app": APP, "image": "web2"});

    // A deploy needs no approval: planned on all three, run all at once.
    let report = station.agent(json!([plan_step(json!(["@web"]), "deploy", deploy, 3, 0)]), || {});
    let deployed = view(call(&report, 0));
    assert!(!deployed.requires_approval && deployed.statement.is_none(), "{report}");
    let started = std::time::Instant::now();
    let report = station.agent(
        json!([{"tool": "service_execute", "arguments": {"rollout": deployed.rollout_id.as_str()}}]),
        || {},
    );
    let ran = view(call(&report, 0));
    assert_eq!(call(&report, 0)["status"], "ok", "{report}");
    assert_eq!(ran.state, RolloutState::Done);
    eprintln!("deploy over 3 servers, one batch: {:.1} s", started.elapsed().as_secs_f64());
    for k in 1..=3 {
        assert_eq!(page(k), "volce-lab test app: web", "server {k}");
    }

    // The update, one server at a time, and a second rollout over two.
    let report = station.agent(
        json!([
            plan_step(json!(NAMES), "update", update.clone(), 1, 1),
            plan_step(json!(["vl-fleet-1", "vl-fleet-2"]), "update", update, 1, 1),
        ]),
        || {},
    );
    let rollout = view(call(&report, 0));
    let two = view(call(&report, 1));
    assert!(rollout.requires_approval, "{report}");
    let statement = rollout.statement.clone().unwrap();
    for name in NAMES {
        assert!(statement.contains(&format!(": {name} (machine-id ")), "{statement}");
    }
    let signed = station.sign(&rollout);
    assert!(signed.starts_with(&statement), "the operator signed the statement the agent was given");
    let for_two = station.sign(&two);
    let plan_3 = rollout.hosts[2].plan_id.clone().unwrap();
    let forged = signed.replace(plan_3.as_str(), &"f".repeat(32));
    assert_ne!(forged, signed);
    let by_hand = |signed: &str| {
        json!({"tool": "service_execute", "arguments":
            {"target": "vl-fleet-3", "plan_id": plan_3.as_str(), "signed_approval": signed}})
    };

    // The same two carried to server 3 past the tools, as the agent's own
    // ssh key could: the host itself refuses both, and records nothing.
    let forged_on_3 = agent_rpc(
        3,
        &json!({"operation": "signed_approval", "plan_id": plan_3.as_str(), "approval": forged}),
    );
    assert_eq!(forged_on_3["code"], "signature_invalid", "{forged_on_3}");
    let two_on_3 = agent_rpc(
        3,
        &json!({"operation": "signed_approval", "plan_id": plan_3.as_str(), "approval": for_two}),
    );
    assert_eq!(two_on_3["code"], "approval_for_another_host", "{two_on_3}");
    let report = station.agent(
        json!([
            execute_step(&rollout, &forged),
            by_hand(&forged),
            by_hand(&for_two),
            execute_step(&rollout, &signed),
            execute_step(&rollout, &signed),
            {"tool": "service_inventory", "arguments": {"target": "vl-fleet-3"}},
        ]),
        || {},
    );
    // A forged entry: the workstation sends nothing; a rollout's approval
    // with one plan is refused by the tools too.
    assert_eq!(call(&report, 0)["code"], "statement_mismatch", "{report}");
    assert_eq!(call(&report, 1)["code"], "rollout_approval_alone", "{report}");
    assert_eq!(call(&report, 2)["code"], "rollout_approval_alone", "{report}");
    // The rollout: server 1 changed, server 2 failed and was rolled back, server 3 untouched.
    let halted = call(&report, 3);
    assert_eq!(
        (halted["status"].as_str(), halted["code"].as_str()),
        (Some("rejected"), Some("health_check_failed"))
    );
    let halted = view(halted);
    assert_eq!(halted.state, RolloutState::Halted);
    assert_eq!(
        outcomes(&halted),
        [
            ("vl-fleet-1", HostOutcome::Changed),
            ("vl-fleet-2", HostOutcome::Failed),
            ("vl-fleet-3", HostOutcome::Untouched)
        ]
    );
    let progress: Vec<&str> =
        report["calls"][3]["progress"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(progress, ["vl-fleet-1: changed", "batch 1 of 3 healthy", "vl-fleet-2: failed"], "{report}");
    assert_eq!(call(&report, 4)["code"], "rollout_already_started", "never run twice: {report}");
    let open = call(&report, 5)["result"]["plans"].as_array().unwrap().clone();
    assert!(open.iter().any(|p| p["plan_id"] == plan_3.as_str()), "server 3's plan stays pending: {open:?}");
    assert_eq!(
        [page(1), page(2), page(3)],
        ["volce-lab test app: web2", "volce-lab test app: web", "volce-lab test app: web"]
    );

    unreachable_and_cancelled(&station);
    approved_at_terminals(&station);
}

/// Without a signature, each plan approved at its own server's terminal as
/// today: the rollout runs what is approved, and halts at a server whose
/// plan its operator did not approve (`approval_required`), the changed
/// server listed first.
fn approved_at_terminals(station: &Workstation) {
    let report = station.agent(
        json!([plan_step(json!(["vl-fleet-1", "vl-fleet-3"]), "restart", json!({"app": APP}), 1, 0)]),
        || {},
    );
    let planned = view(call(&report, 0));
    let first = planned.hosts[0].plan_id.clone().unwrap();
    let digest = stored_digest(1, first.as_str());
    let pid = std::fs::read_to_string(format!("{FLEET}/s1/pid")).unwrap();
    let argv = [
        "/usr/bin/nsenter",
        "-t",
        pid.trim(),
        "-m",
        "-u",
        "-n",
        "--",
        "/usr/sbin/runuser",
        "-u",
        crate::support::e2e::OPERATOR,
        "--",
        "/usr/bin/sudo",
        "-n",
        crate::support::e2e::HOST_LINK,
        "approve",
        first.as_str(),
        &digest,
        "--yes",
    ];
    let approved = crate::support::e2e::at_terminal(crate::support::e2e::OPERATOR, "root", &argv);
    assert!(approved.ok(), "the operator approves at server 1's terminal: {approved:?}");
    let report = station.agent(
        json!([{"tool": "service_execute", "arguments": {"rollout": planned.rollout_id.as_str()}}]),
        || {},
    );
    let halted = call(&report, 0);
    assert_eq!(halted["code"], "approval_required", "{report}");
    assert_eq!(
        outcomes(&view(halted)),
        [("vl-fleet-1", HostOutcome::Changed), ("vl-fleet-3", HostOutcome::Failed)],
        "{report}"
    );
}

/// The digest server `k` recorded for `plan_id`, as `show --json` prints it.
fn stored_digest(k: usize, plan_id: &str) -> String {
    let shown = in_server(k, &[crate::support::e2e::HOST_LINK, "show", plan_id, "--json"]);
    let plan: volce_lab::wire::answers::plan_view::PlanView =
        serde_json::from_str(&shown.stdout).unwrap_or_else(|e| panic!("{e}: {shown:?}"));
    plan.digest.to_string()
}

/// The sshd of server 2 killed after the client checked identity there:
/// the rollout halts at it. Then a cancel between two batches.
fn unreachable_and_cancelled(station: &Workstation) {
    let restart = json!({"app": APP});
    let report = station.agent(
        json!([
            plan_step(json!(NAMES), "restart", restart.clone(), 1, 0),
            plan_step(json!(["vl-fleet-3", "vl-fleet-1"]), "restart", restart, 1, 30)
        ]),
        || {},
    );
    let cut = view(call(&report, 0));
    let cancelled = view(call(&report, 1));
    let (signed_cut, signed_cancelled) = (station.sign(&cut), station.sign(&cancelled));
    let gate = station.state.path().join("go");
    let report = station.agent(json!([{"wait_for": gate}, execute_step(&cut, &signed_cut)]), || kill_sshd(2));
    let result = &report["calls"][0]["structured"];
    let halted = view(result);
    restart_sshd(2);
    assert_eq!(halted.state, RolloutState::Halted, "{report}");
    assert_eq!(
        outcomes(&halted),
        [
            ("vl-fleet-1", HostOutcome::Changed),
            ("vl-fleet-2", HostOutcome::Failed),
            ("vl-fleet-3", HostOutcome::Untouched)
        ],
        "{report}"
    );

    let mut cancelling = execute_step(&cancelled, &signed_cancelled);
    cancelling["cancel_after"] = json!("vl-fleet-3: changed");
    let started = std::time::Instant::now();
    let report =
        station.agent(json!([cancelling, {"sleep": 1}, execute_step(&cancelled, &signed_cancelled)]), || {});
    assert_eq!(report["calls"][0]["cancelled"], true, "{report}");
    assert!(started.elapsed().as_secs() < 25, "the cancel ended the 30 s wait");
    let recorded = call(&report, 1);
    assert_eq!(recorded["code"], "rollout_already_started", "{report}");
    let recorded = view(recorded);
    assert_eq!(recorded.state, RolloutState::Cancelled);
    assert_eq!(
        outcomes(&recorded),
        [("vl-fleet-3", HostOutcome::Changed), ("vl-fleet-1", HostOutcome::Untouched)]
    );
}

/// The agent's rpc to server `k` through ssh, the gate and the exact
/// sudoers rule, outside the MCP tools: the helper's reply.
fn agent_rpc(k: usize, request: &Value) -> Value {
    let config = format!("{FLEET}/client/ssh_config");
    let alias = format!("vl-fleet-{k}");
    let bytes = serde_json::to_vec(request).unwrap();
    let ran = run(
        "/usr/bin/ssh",
        &["-F", &config, "-T", &alias, "sudo -n /usr/local/bin/volce-lab-host rpc"],
        Some(&bytes),
    );
    serde_json::from_slice(volce_lab::wire::progress::reply_bytes(ran.stdout.as_bytes()))
        .unwrap_or_else(|_| panic!("the helper's reply is not one JSON object: {ran:?}"))
}

/// Server `k`'s sshd and every session it forked: the server is cut off.
fn kill_sshd(k: usize) {
    let pid: i32 =
        std::fs::read_to_string(format!("{FLEET}/s{k}/sshd/sshd.pid")).unwrap().trim().parse().unwrap();
    // The listener, then each session it forked and theirs, deepest last.
    let mut doomed = vec![pid];
    let mut next = 0;
    while next < doomed.len() {
        let children = run("/usr/bin/pgrep", &["-P", &doomed[next].to_string()], None);
        doomed.extend(children.stdout.split_whitespace().filter_map(|c| c.parse::<i32>().ok()));
        next += 1;
    }
    for pid in doomed {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
}

fn restart_sshd(k: usize) {
    let config = format!("{FLEET}/s{k}/sshd/sshd_config");
    let log = format!("{FLEET}/s{k}/sshd/sshd.log");
    let started = in_server(k, &["/usr/sbin/sshd", "-f", &config, "-E", &log]);
    assert!(started.ok(), "{started:?}");
}
