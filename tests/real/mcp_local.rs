//! `volce-lab mcp-serve` in local mode for real, as the unprivileged account
//! `nobody`, driven by an rmcp client: real identity and disk, an honest
//! web_status, management that cannot reach a helper and says so, and the
//! audit log written 0600 by that account. Needs root (runuser), so it is
//! ignored by plain `cargo test` and run by scripts/test with --ignored.

use crate::support::unprivileged::{self, hostname};

use std::os::unix::fs::PermissionsExt as _;
use std::process::Stdio;

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::support::mcp::{arguments, structured};

#[tokio::test]
#[ignore = "real parts: run by scripts/test (needs root for runuser)"]
async fn local_mode_as_nobody_checks_for_real_and_management_fails_honestly() {
    assert!(nix::unistd::geteuid().is_root(), "this suite must run as root (it switches to nobody)");
    let nobody = nix::unistd::User::from_name("nobody").unwrap().expect("the nobody account exists");
    let state = tempfile::tempdir().unwrap();
    nix::unistd::chown(state.path(), Some(nobody.uid), Some(nobody.gid)).unwrap();
    let host = hostname();

    let mut command = tokio::process::Command::new("/usr/sbin/runuser");
    command
        .args([
            "-u",
            "nobody",
            "--",
            "/usr/bin/env",
            "-i",
            "VOLCE_LAB_MODE=local",
            "VOLCE_LAB_EXPECTED_USER=nobody",
        ])
        .arg(format!("VOLCE_LAB_EXPECTED_HOST={host}"))
        .arg("VOLCE_LAB_MANAGEMENT=enabled")
        .arg(format!("XDG_STATE_HOME={}", state.path().display()))
        .arg(unprivileged::binary())
        .arg("mcp-serve")
        .stderr(Stdio::null());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.expect("initialize as nobody");
    let tools = client.list_all_tools().await.unwrap();
    let call = |name: &'static str, args: Value| {
        let client = &client;
        let tool = tools.iter().find(|t| t.name == name).unwrap().clone();
        async move {
            let params = CallToolRequestParams::new(name).with_arguments(arguments(args));
            structured(&tool, &client.call_tool(params).await.unwrap())
        }
    };

    let identity = call("cloud_check", json!({"check": "identity"})).await;
    assert_eq!(identity["status"], "ok", "{identity}");
    assert_eq!(identity["output"], format!("{host}\nnobody\n"));
    assert_eq!(identity["is_demo"], false);
    let disk = call("cloud_check", json!({"check": "disk"})).await;
    assert_eq!(disk["status"], "ok", "{disk}");
    assert!(disk["output"].as_str().unwrap().contains("Filesystem"));
    let web = call("cloud_check", json!({"check": "web_status"})).await;
    assert_eq!(web["status"], "helper_unavailable", "{web}");

    // nobody may not run the helper through sudo: never ok, and never retried.
    let inventory = call("service_inventory", json!({})).await;
    let status = inventory["status"].as_str().unwrap();
    assert!(["helper_unavailable", "execution_failed"].contains(&status), "{inventory}");
    assert!(inventory["execution"].is_object(), "the sudo attempt is recorded: {inventory}");
    eprintln!("local-mode inventory as nobody: {}", inventory["message"]);
    client.cancel().await.unwrap();

    let log = state.path().join("volce-lab/audit.jsonl");
    let metadata = std::fs::metadata(&log).expect("nobody wrote the audit log");
    assert_eq!(metadata.permissions().mode() & 0o777, 0o600);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&metadata), nobody.uid.as_raw());
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.lines().count(), 4, "{text}");
    assert!(!text.contains("Filesystem"), "no output in the audit log");
}
