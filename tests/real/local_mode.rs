//! Local mode for real, as an ordinary account: the checks run on this
//! machine through the real runner. Needs root (to switch to `nobody` with
//! runuser), so it is ignored by plain `cargo test` and run by scripts/test.

use std::process::Command;

use crate::support::unprivileged::{self, hostname};

#[test]
#[ignore = "real parts: run by scripts/test (needs root for runuser)"]
fn local_mode_as_nobody_shows_real_identity_and_disk_and_honest_web_status() {
    assert!(nix::unistd::geteuid().is_root(), "this suite must run as root (it switches to nobody)");
    let binary = unprivileged::binary();
    let host = hostname();
    let output = Command::new("/usr/sbin/runuser")
        .args(["-u", "nobody", "--", "/usr/bin/env", "-i", "VOLCE_LAB_MODE=local"])
        .arg(format!("VOLCE_LAB_EXPECTED_HOST={host}"))
        .arg("VOLCE_LAB_EXPECTED_USER=nobody")
        .arg(binary)
        .args(["inspect", "--json"])
        .output()
        .expect("runuser starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "web_status cannot be ok for nobody:\n{stdout}");
    let results: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(results.len(), 3, "{stdout}");
    assert_eq!(results[0]["status"], "ok");
    assert_eq!(results[0]["output"], format!("{host}\nnobody\n"));
    assert_eq!(results[0]["is_demo"], false);
    assert_eq!(results[1]["status"], "ok");
    assert!(results[1]["output"].as_str().unwrap().contains("Filesystem"), "{stdout}");
    // nobody may not run the helper through sudo (or sudo is absent): the
    // answer is that the helper could not be asked, never "healthy".
    assert_eq!(results[2]["status"], "helper_unavailable", "{stdout}");
}
