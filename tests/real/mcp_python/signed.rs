//! Issue 42 on the e2e installation: an approval signed on the operator's
//! own machine and carried through the agent's channel. Real parts only:
//! keys made here by ssh-keygen (software keys under the policy's
//! `software_keys`: no FIDO authenticator exists on a test machine), the
//! installed helper behind the loopback sshd and the exact sudoers rule,
//! `volce-lab approve` fetching the host's statement over that path and
//! signing it with ssh-keygen, and the official Python SDK as the agent's
//! client carrying the signed text in `service_execute`.
//!
//! Tried: a validly signed statement with one parameter changed
//! (`statement_mismatch`, nothing ran), the true one (the plan executes
//! once and the app serves), the same again (`plan_consumed`);
//! `volce-lab approve --signed FILE --send` records another plan's
//! approval, which the agent then executes without carrying anything; an
//! `allowed_signers` others can write refuses a valid signature
//! (`signers_file_unsafe`). Every step leaves its row: the approval under
//! the operator's name with the key's fingerprint.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::approval::{claimed_rows, deploy_plan_of};
use crate::support::e2e::*;

const APP: &str = "e2e-signed";
const OTHER_APP: &str = "e2e-signed-send";
/// Only planned, never executed.
const UNSAFE_APP: &str = "e2e-signed-unsafe";
const SIGNERS: &str = "/etc/volce-lab/allowed_signers";
const NAMESPACE: &str = "volce-lab-approval";

/// Root's allowed_signers naming the operator's key, removed on drop.
struct Signers;

impl Signers {
    fn write(public_key: &str) -> Signers {
        std::fs::write(SIGNERS, format!("{OPERATOR} namespaces=\"{NAMESPACE}\" {public_key}\n")).unwrap();
        std::fs::set_permissions(SIGNERS, std::fs::Permissions::from_mode(0o644)).unwrap();
        Signers
    }
}

impl Drop for Signers {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(SIGNERS);
    }
}

fn keygen(dir: &Path) -> (PathBuf, String) {
    let key = dir.join("operator");
    let made = Command::new("/usr/bin/ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", OPERATOR, "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen (openssh-client) makes the operator's key");
    assert!(made.success());
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap().trim().to_owned();
    (key, public)
}

/// `volce-lab approve` as the operator on their machine, with the e2e
/// target's ssh settings: (exit code, stdout, stderr).
fn approve(host: &str, args: &[&str], stdin: &str) -> (Option<i32>, String, String) {
    let state = private_tempdir();
    let mut child = Command::new(env!("CARGO_BIN_EXE_volce-lab"))
        .arg("approve")
        .args(args)
        .env_clear()
        .envs(workstation_env(host, state.path()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run volce-lab approve");
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code(), text(&output.stdout), text(&output.stderr))
}

/// The signed approval `volce-lab approve --key` printed after the
/// statement: the text from the statement's second header on.
fn signed_text(stdout: &str) -> String {
    let header = "volce-lab approval statement 1\n";
    let second = stdout.rfind(header).expect("a signed approval after the statement");
    assert!(stdout[..second].contains(header), "the statement came first: {stdout}");
    stdout[second..].to_owned()
}

fn digest_prefix(plan_id: &str) -> String {
    stored_plan(plan_id)["digest"].as_str().unwrap()[..8].to_owned()
}

/// Signs `plan_id`'s statement with `key` through `volce-lab approve`.
fn signed_by_cli(host: &str, plan_id: &str, key: &Path) -> String {
    let answer = format!("{}\n", digest_prefix(plan_id));
    let (code, stdout, stderr) = approve(host, &[plan_id, "--key", key.to_str().unwrap()], &answer);
    assert_eq!(code, Some(0), "volce-lab approve: {stdout}\n{stderr}");
    assert!(stdout.contains(&format!("plan: {plan_id}")), "{stdout}");
    signed_text(&stdout)
}

/// The Python SDK carrying `good` (after `forged`) in service_execute.
fn python_client(host: &str, plan_id: &str, good: &Path, forged: &Path) -> Value {
    let state = private_tempdir();
    let python = std::env::var_os("VOLCE_LAB_TEST_PYTHON").expect("VOLCE_LAB_TEST_PYTHON (scripts/test)");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/python/signed_client.py");
    let output = Command::new(python)
        .arg(script)
        .args([env!("CARGO_BIN_EXE_volce-lab"), plan_id])
        .arg(good)
        .arg(forged)
        .env_clear()
        .envs(workstation_env(host, state.path()))
        .output()
        .expect("run the Python client");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the Python client failed ({}):\n{stderr}", output.status);
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}"))
}

/// The plan's `approved` row: (actor, signer_key).
fn approved_row(plan_id: &str) -> (String, Option<String>) {
    let export = run(HOST_LINK, &["audit", "export", "--json"], None);
    let row: Value = export
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["plan_id"] == plan_id && r["event"] == "approved")
        .unwrap_or_else(|| panic!("no approved row of {plan_id}"));
    (row["actor"].as_str().unwrap().to_owned(), row["signer_key"].as_str().map(str::to_owned))
}

#[test]
#[ignore = "real parts: run by scripts/test after scripts/e2e-setup (needs the pinned Python SDK in a venv)"]
fn an_approval_signed_on_the_operators_machine_and_carried_by_the_agent_executes_once() {
    let host = require_setup();
    require_host_helper();
    require_docker_and_policy();
    let _serial = serial();
    let _policy = PolicyChange::apply(|policy| {
        policy["approval_required"] = json!(["deploy"]);
        policy["signed_approvals"] = json!({"software_keys": true});
    });
    fresh_host_state(&[APP, OTHER_APP, UNSAFE_APP]);
    let keys = private_tempdir();
    let (key, public) = keygen(keys.path());
    let _signers = Signers::write(&public);
    let port = free_port();
    let plan = deploy_plan_of(APP, port);

    let good = signed_by_cli(&host, &plan, &key);
    // The operator's display was changed on its way (another image key),
    // and they signed what they saw: a valid signature over another text.
    let forged_statement =
        good[..good.find("-----BEGIN").unwrap()].replace("\"image\":\"web\"", "\"image\":\"web2\"");
    assert!(forged_statement.contains("web2"), "{forged_statement}");
    let forged_file = keys.path().join("forged");
    std::fs::write(&forged_file, &forged_statement).unwrap();
    let sig = Command::new("/usr/bin/ssh-keygen")
        .args(["-q", "-Y", "sign", "-n", NAMESPACE, "-f"])
        .arg(&key)
        .arg(&forged_file)
        .status()
        .unwrap();
    assert!(sig.success());
    let forged =
        format!("{forged_statement}{}", std::fs::read_to_string(forged_file.with_extension("sig")).unwrap());
    std::fs::write(&forged_file, forged).unwrap();
    let good_file = keys.path().join("good");
    std::fs::write(&good_file, &good).unwrap();

    let report = python_client(&host, &plan, &good_file, &forged_file);
    assert_eq!(report["sdk"], "2.3.0");
    assert_eq!(report["identity"], "ok", "{report}");
    let calls = report["calls"].as_array().unwrap();
    let call = |name: &str| calls.iter().find(|c| c["name"] == name).unwrap().clone();
    assert_eq!(
        (call("forged")["status"].clone(), call("forged")["code"].clone()),
        (json!("rejected"), json!("statement_mismatch")),
        "{report}"
    );
    assert_eq!(call("good")["status"], "ok", "{report}");
    assert_eq!(call("replayed")["code"], "plan_consumed", "{report}");
    assert_eq!(claimed_rows(&plan), 1, "executed exactly once");
    assert_eq!(stored_plan(&plan)["state"], "completed");
    assert!(http_get(port, "wait.e2e.test").is_some_and(|(status, _)| status == 200), "the app serves");
    let (actor, signer_key) = approved_row(&plan);
    assert_eq!(actor, OPERATOR);
    assert!(signer_key.is_some_and(|k| k.starts_with("SHA256:")), "the key's fingerprint is on the row");

    // `--signed FILE --send`: recorded by the operator's own command; the
    // agent then executes with nothing to carry.
    let other = deploy_plan_of(OTHER_APP, free_port());
    let signed_file = keys.path().join("other");
    std::fs::write(&signed_file, signed_by_cli(&host, &other, &key)).unwrap();
    let (code, stdout, stderr) =
        approve(&host, &[&other, "--signed", signed_file.to_str().unwrap(), "--send"], "");
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert_eq!(stored_plan(&other)["approval"]["by"], OPERATOR);
    let (code, reply) = agent_rpc(&json!({"operation": "execute", "plan_id": other}));
    assert_eq!(code, Some(0), "{reply}");

    // An allowed_signers others may write: a valid signature counts for nothing.
    let third = deploy_plan_of(UNSAFE_APP, free_port());
    let refused = signed_by_cli(&host, &third, &key);
    std::fs::set_permissions(SIGNERS, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (code, reply) =
        agent_rpc(&json!({"operation": "signed_approval", "plan_id": third, "approval": refused}));
    assert_eq!((code, reply["code"].as_str()), (Some(1), Some("signers_file_unsafe")), "{reply}");
    assert!(stored_plan(&third)["approval"].is_null(), "nothing recorded");
    remove_apps(&[APP, OTHER_APP]);
}
