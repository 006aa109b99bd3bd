//! Issue 26: `show` on a plan that ran, failed and was rolled back says
//! why, with the code and the whole sentence the agent was answered, not
//! only "Outcome rolled_back"; `show --json` (the plan view the workstation
//! reads) carries the same as `failure`. The text is held to a golden file
//! (tests/golden/show/*.txt; `VOLCE_LAB_BLESS_GOLDEN=1` rewrites it, review
//! its diff like code). Hermetic: the fake engine.

use std::path::Path;

use serde_json::{Value, json};
use volce_lab::docker::EngineError;
use volce_lab::host::Executed;
use volce_lab::vocab::Code;

use crate::support::harness::*;

const AGENT: &str = "agent";

/// `text` with what varies from run to run replaced: the temporary
/// directory, the plan id and the 64-hex digests the plan names.
fn stable(text: &str, root: &Path, hexes: &[&str]) -> String {
    let mut text = text.replace(&root.display().to_string(), "/golden");
    for (n, hex) in hexes.iter().enumerate() {
        text = text.replace(hex, &format!("<hex {}>", n + 1));
    }
    text
}

fn golden(name: &str, text: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/show").join(format!("{name}.txt"));
    if std::env::var_os("VOLCE_LAB_BLESS_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let golden = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(text, golden, "{name}: show differs from {}:\n{text}", path.display());
}

#[test]
fn show_of_a_rolled_back_deploy_names_its_code_and_whole_message() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    h.engine.edit(|s| {
        s.fail_next = Some(EngineError::RolledBack { cause: Box::new(EngineError::HealthCheckFailed) })
    });
    let Executed::Failed { refusal, .. } = c.execute(&plan.plan.id, AGENT).unwrap() else {
        panic!("a verified rollback is failed")
    };
    assert_eq!(refusal.code, Code::HealthCheckFailed);

    let shown = h.show(&plan.plan.id);
    assert!(shown.contains("Outcome  rolled_back\nCode     health_check_failed\n"), "{shown}");
    assert!(shown.contains(&format!("Message  {}\n", refusal.message)), "the whole sentence: {shown}");
    let view: Value = serde_json::from_str(&h.show_json(&plan.plan.id)).unwrap();
    assert_eq!(view["failure"], json!({"code": "health_check_failed", "message": refusal.message}));

    let id = plan.plan.id.to_string();
    let mut hexes = vec![id.as_str(), plan.plan.digest.as_str()];
    let view_hexes: Vec<String> =
        ["snapshot_digest", "policy_hash"].iter().map(|k| view[k].as_str().unwrap().to_owned()).collect();
    hexes.extend(view_hexes.iter().map(String::as_str));
    golden("deploy_rolled_back", &stable(&shown, &h.root, &hexes));
}

/// A plan that did not fail shows no reason: nothing is made up.
#[test]
fn show_of_a_completed_plan_names_no_failure() {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    assert!(matches!(c.execute(&plan.plan.id, AGENT).unwrap(), Executed::Completed(_)));
    let shown = h.show(&plan.plan.id);
    assert!(shown.contains("Outcome  completed\n") && !shown.contains("\nCode "), "{shown}");
    let view: Value = serde_json::from_str(&h.show_json(&plan.plan.id)).unwrap();
    assert_eq!(view["failure"], Value::Null);
}
