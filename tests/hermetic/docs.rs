//! The documents a user follows are checked like code: the skill follows
//! the Agent Skills format and README opens with the two commands.

use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn skill_front_matter_names_its_directory_and_describes_briefly() {
    let skill = read("skills/cloud-service-inspect/SKILL.md");
    let front = skill.strip_prefix("---\n").expect("front matter opens the file");
    let (front, body) = front.split_once("\n---\n").expect("front matter closes");
    let field = |name: &str| {
        front
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("{name} missing"))
            .to_owned()
    };
    assert_eq!(field("name"), "cloud-service-inspect");
    let description = field("description");
    assert!(!description.is_empty() && description.chars().count() < 1024, "{}", description.len());
    for topic in ["identity", "simulated, no server contacted", "approve", "unknown", "needs_inspection"] {
        assert!(body.contains(topic), "the skill must cover {topic}");
    }
}

#[test]
fn readme_opens_with_the_run_and_test_commands() {
    let readme = read("README.md");
    let first_block: Vec<&str> =
        readme.split("```").nth(1).expect("a code block near the top").lines().skip(1).collect();
    assert!(first_block[0].starts_with("cargo run --release -- inspect"), "{first_block:?}");
    assert!(first_block[1].contains("./scripts/test"), "{first_block:?}");
    let ci = read(".ci/run");
    assert!(ci.contains("./scripts/test"), ".ci/run must call the README test command");
}

/// The policy's mode as HOST-SETUP states it is the rule the helper
/// applies (`host::paths`: not writable by group or others): before issue
/// 26 the docs said 0600 while 0644 was accepted.
#[test]
fn host_setup_states_the_policy_mode_the_helper_enforces() {
    let setup = read("HOST-SETUP.md");
    let row = setup.lines().find(|l| l.starts_with("| the operator's policy |")).expect("the policy's row");
    assert!(row.contains("writable by no one else") && row.contains("0644 is accepted"), "{row}");
    let paths = read("src/host/paths.rs");
    assert!(paths.contains("meta.mode() & 0o022 != 0"), "the helper's rule changed: update HOST-SETUP's row");
}
