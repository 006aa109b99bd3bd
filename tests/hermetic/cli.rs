//! Drives the real `volce-lab` executable the way a person does from a
//! terminal: help, the demo report, bad configuration, the host-mode name.
//! Hermetic: demo mode starts no process and touches no network.

use std::path::PathBuf;
use std::process::{Command, Output};

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_volce-lab"))
}

/// Runs the binary with a clean environment plus `vars`.
fn run(args: &[&str], vars: &[(&str, &str)]) -> Output {
    let mut command = Command::new(binary());
    command.args(args).env_clear().env("PATH", "/usr/bin:/bin");
    for (key, value) in vars {
        command.env(key, value);
    }
    command.output().expect("the binary starts")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_lists_the_subcommands() {
    let output = run(&["--help"], &[]);
    assert!(output.status.success());
    let help = text(&output.stdout);
    for subcommand in ["mcp-serve", "host", "inspect"] {
        assert!(help.contains(subcommand), "{subcommand} missing from:\n{help}");
    }
    let host = text(&run(&["host", "--help"], &[]).stdout);
    for subcommand in ["rpc", "show", "approve"] {
        assert!(host.contains(subcommand), "{subcommand} missing from:\n{host}");
    }
}

#[test]
fn demo_report_says_it_is_simulated_and_exits_zero() {
    let output = run(&["inspect"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let report = text(&output.stdout);
    assert!(report.contains("simulated"), "{report}");
    assert!(report.contains("no server was contacted"), "{report}");
    for check in ["identity", "disk", "web_status"] {
        assert!(report.contains(check), "{report}");
    }
    assert!(report.contains("3 of 3 checks ok"), "{report}");
}

#[test]
fn demo_json_prints_one_result_per_line() {
    let output = run(&["inspect", "--json"], &[]);
    assert_eq!(output.status.code(), Some(0));
    let lines: Vec<serde_json::Value> =
        text(&output.stdout).lines().map(|line| serde_json::from_str(line).expect("JSON line")).collect();
    assert_eq!(lines.len(), 3);
    let checks: Vec<&str> = lines.iter().map(|l| l["check"].as_str().unwrap()).collect();
    assert_eq!(checks, ["identity", "disk", "web_status"]);
    for line in &lines {
        assert_eq!(line["is_demo"], true);
        assert_eq!(line["status"], "ok");
        for field in ["request_id", "timestamp", "mode", "target", "exit_code", "output", "execution"] {
            assert!(line.get(field).is_some(), "{field} missing in {line}");
        }
    }
}

#[test]
fn bad_configuration_exits_2_with_one_sentence_naming_the_variable() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("VOLCE_LAB_MODE", "production")], "VOLCE_LAB_MODE"),
        (&[("VOLCE_LAB_TIMEOUT", "0")], "VOLCE_LAB_TIMEOUT"),
        (&[("VOLCE_LAB_SSH_ALIAS", "-oProxyCommand=id")], "VOLCE_LAB_SSH_ALIAS"),
        (&[("VOLCE_LAB_MODE", "ssh")], "VOLCE_LAB_EXPECTED_HOST"),
        (
            &[
                ("VOLCE_LAB_MODE", "ssh"),
                ("VOLCE_LAB_EXPECTED_HOST", "web"),
                ("VOLCE_LAB_EXPECTED_USER", "root"),
            ],
            "VOLCE_LAB_EXPECTED_USER",
        ),
    ];
    for (vars, variable) in cases {
        let output = run(&["inspect"], vars);
        assert_eq!(output.status.code(), Some(2), "{vars:?}");
        assert!(output.stdout.is_empty(), "nothing is reported on bad configuration");
        let error = text(&output.stderr);
        assert!(error.contains(variable), "{error}");
        assert_eq!(error.trim_end().lines().count(), 1, "{error}");
    }
}

#[test]
fn unknown_subcommand_is_a_usage_error() {
    let output = run(&["approve", "x", "y"], &[]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn the_host_file_name_selects_host_mode_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let host = dir.path().join("volce-lab-host");
    let other = dir.path().join("volce-lab-host2");
    std::os::unix::fs::symlink(binary(), &host).unwrap();
    std::os::unix::fs::symlink(binary(), &other).unwrap();

    // As volce-lab-host, the host subcommands are top level and `inspect` is not one.
    let help = Command::new(&host).arg("--help").env_clear().output().unwrap();
    assert!(help.status.success());
    let help = text(&help.stdout);
    assert!(help.contains("rpc") && help.contains("approve"), "{help}");
    assert!(!help.contains("inspect"), "{help}");
    let inspect = Command::new(&host).arg("inspect").env_clear().output().unwrap();
    assert_eq!(inspect.status.code(), Some(2));

    // Any other name is the ordinary CLI.
    let ordinary = Command::new(&other).arg("inspect").env_clear().output().unwrap();
    assert_eq!(ordinary.status.code(), Some(0), "{}", text(&ordinary.stderr));
}

#[test]
fn rpc_help_documents_the_request_shape_and_list_and_reject_exist() {
    let dir = tempfile::tempdir().unwrap();
    let host = dir.path().join("volce-lab-host");
    std::os::unix::fs::symlink(binary(), &host).unwrap();
    let help = Command::new(&host).args(["rpc", "--help"]).env_clear().output().unwrap();
    assert!(help.status.success());
    let help = text(&help.stdout);
    for shape in [
        r#"{"operation":"gateway_status"}"#,
        r#"{"operation":"inventory"}"#,
        r#"{"operation":"plan","action":A,"parameters":{..}}"#,
        r#"{"operation":"execute","plan_id":"<32 hex>"}"#,
        "at most 16 KiB",
    ] {
        assert!(help.contains(shape), "{shape} missing from rpc --help: {help}");
    }
    let help = Command::new(&host).arg("--help").env_clear().output().unwrap();
    let help = text(&help.stdout);
    assert!(help.contains("list") && help.contains("[alias: pending]") && help.contains("reject"), "{help}");
}

/// Issue 42's `volce-lab approve` in demo mode: bad arguments exit 2
/// before anything is asked; a demo target has no statement to sign, and
/// says so with exit 1. Tried: a short plan id, an unknown target, a
/// valid id.
#[test]
fn approve_refuses_bad_arguments_with_2_and_a_demo_target_with_1() {
    let short = run(&["approve", "abc"], &[]);
    assert_eq!(short.status.code(), Some(2), "{}", text(&short.stderr));
    assert!(text(&short.stderr).contains("32 lowercase hex"), "{}", text(&short.stderr));
    let id = "0123456789abcdef0123456789abcdef";
    let unknown = run(&["approve", id, "--target", "nowhere"], &[]);
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown.stderr));
    assert!(text(&unknown.stderr).contains("names no configured target"), "{}", text(&unknown.stderr));
    let demo = run(&["approve", id], &[]);
    assert_eq!(demo.status.code(), Some(1), "{}", text(&demo.stderr));
    assert!(text(&demo.stderr).contains("demo_only"), "{}", text(&demo.stderr));
    assert!(text(&demo.stdout).is_empty(), "nothing to sign was printed: {}", text(&demo.stdout));
}
