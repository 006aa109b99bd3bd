//! The shipped binary's host boundary, driven as a real process: it refuses
//! to run as non-root and ignores hostile environment variables.
//! The non-root tests are hermetic (as root they drop to nobody first); the
//! root test is ignored and run by scripts/test, where it fails loudly
//! without root.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_volce-lab");

use crate::support::unprivileged;

fn unprivileged_binary() -> &'static Path {
    unprivileged::binary()
}
const NOBODY: u32 = 65534;

fn run(program: &Path, args: &[&str], stdin: &[u8], env: &[(&str, &str)], drop_root: bool) -> Output {
    let mut command = Command::new(program);
    command.args(args).env_clear().stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    if drop_root && nix::unistd::geteuid().is_root() {
        command.uid(NOBODY).gid(NOBODY);
    }
    let mut child = command.spawn().unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

fn hostile_env(evil: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("LD_PRELOAD", evil.join("evil.so").display().to_string()),
        ("LD_LIBRARY_PATH", evil.display().to_string()),
        ("DOCKER_HOST", "tcp://203.0.113.7:2375".into()),
        ("DOCKER_CONFIG", evil.display().to_string()),
        ("DOCKER_CONTEXT", "evil".into()),
        ("PATH", evil.display().to_string()),
        ("HOME", evil.display().to_string()),
        ("VOLCE_LAB_POLICY", evil.join("policy.json").display().to_string()),
        ("VOLCE_LAB_STATE", evil.display().to_string()),
        ("SQLITE_TMPDIR", evil.display().to_string()),
    ]
}

/// A directory nobody can read, with a `docker` that leaves a marker if run.
fn evil_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let docker = dir.path().join("docker");
    std::fs::write(&docker, format!("#!/bin/sh\ntouch {}/ran\n", dir.path().display())).unwrap();
    std::fs::set_permissions(&docker, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn reply(output: &Output) -> serde_json::Value {
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    assert_eq!(stdout.matches('\n').count(), 1, "exactly one line on stdout: {stdout:?}");
    serde_json::from_str(&stdout).unwrap()
}

#[test]
fn rpc_refuses_to_run_as_non_root() {
    let output = run(unprivileged_binary(), &["host", "rpc"], br#"{"operation":"inventory"}"#, &[], true);
    assert_eq!(output.status.code(), Some(1));
    let reply = reply(&output);
    assert_eq!(reply["status"], "rejected");
    assert_eq!(reply["code"], "not_root");
}

#[test]
fn the_operators_commands_refuse_to_run_as_non_root() {
    let id = "a".repeat(32);
    let digest = "b".repeat(64);
    for args in [
        vec!["host", "list"],
        vec!["host", "list", "--json"],
        vec!["host", "pending"],
        vec!["host", "show", id.as_str()],
        vec!["host", "approve", id.as_str(), digest.as_str()],
        vec!["host", "reject", id.as_str()],
        vec!["host", "resolve", id.as_str()],
    ] {
        let output = run(unprivileged_binary(), &args, b"", &[], true);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        assert!(output.stdout.is_empty());
        assert!(String::from_utf8_lossy(&output.stderr).contains("not_root"), "{args:?}");
    }
}

#[test]
fn the_volce_lab_host_name_selects_host_mode_and_refuses_non_root() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let link = dir.path().join("volce-lab-host");
    std::os::unix::fs::symlink(unprivileged_binary(), &link).unwrap();
    let output = run(&link, &["rpc"], br#"{"operation":"gateway_status"}"#, &[], true);
    assert_eq!(reply(&output)["code"], "not_root");
}

#[test]
fn hostile_environment_does_not_change_the_non_root_refusal() {
    let evil = evil_dir();
    let env = hostile_env(evil.path());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let clean = run(unprivileged_binary(), &["host", "rpc"], br#"{"operation":"inventory"}"#, &[], true);
    let hostile = run(unprivileged_binary(), &["host", "rpc"], br#"{"operation":"inventory"}"#, &env, true);
    assert_eq!(clean.status.code(), hostile.status.code());
    assert_eq!(reply(&clean), reply(&hostile));
    assert!(!evil.path().join("ran").exists());
}

#[test]
fn doctor_refuses_to_run_as_non_root_and_reports_nothing() {
    let output = run(unprivileged_binary(), &["host", "doctor"], b"", &[], true);
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    assert!(String::from_utf8_lossy(&output.stderr).contains("must run as root"));
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn as_root_the_binary_ignores_hostile_environment_variables() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (it runs the real helper on the fixed paths); run it through scripts/test as root"
    );
    let evil = evil_dir();
    let env = hostile_env(evil.path());
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.push(("SUDO_USER", "vl-agent"));
    // A request whose answer depends on nothing but our files: compared in full.
    let unknown = format!(r#"{{"operation":"execute","plan_id":"{}"}}"#, "f".repeat(32));
    // A request that reaches the engine: a helper that honoured the hostile
    // DOCKER_HOST or PATH would answer differently (or run the fake docker).
    // Its result can change with other tests' containers, so compare the verdict.
    let gateways = br#"{"operation":"gateway_status"}"#.to_vec();
    for (request, whole) in [(unknown.into_bytes(), true), (gateways, false)] {
        let clean = run(Path::new(BIN), &["host", "rpc"], &request, &[("SUDO_USER", "vl-agent")], false);
        let hostile = run(Path::new(BIN), &["host", "rpc"], &request, &env, false);
        let (clean_reply, hostile_reply) = (reply(&clean), reply(&hostile));
        assert_ne!(clean_reply["code"], "not_root");
        if whole {
            assert_eq!(clean_reply, hostile_reply, "the environment must not change the answer");
        } else {
            assert_eq!(
                (&clean_reply["status"], &clean_reply["code"]),
                (&hostile_reply["status"], &hostile_reply["code"]),
                "the environment must not change the verdict: {clean_reply} vs {hostile_reply}"
            );
        }
        assert_eq!(clean.status.code(), hostile.status.code());
        let text = hostile_reply.to_string();
        assert!(
            !text.contains("203.0.113.7") && !text.contains(&evil.path().display().to_string()),
            "{text}"
        );
    }
    assert!(!evil.path().join("ran").exists(), "a docker from the caller's PATH was run");
}
