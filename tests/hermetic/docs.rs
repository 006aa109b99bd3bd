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

/// No string literal of the shipped code holds a run of eight or more
/// spaces inside a line: that is the indentation of a string continuation
/// that lost its backslash, and it reached users in three messages before
/// issue 22 (`container_set_changed`, the 1 MiB log refusal, `audit
/// prune`). Checked on the source, not on messages at run time, because a
/// message may quote an agent's text, spaces and all.
#[test]
fn no_message_carries_a_lost_continuations_run_of_spaces() {
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "tests") {
                    files(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                out.push(path);
            }
        }
    }
    let mut sources = Vec::new();
    files(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut sources);
    let mut found = Vec::new();
    for path in sources {
        let text = std::fs::read_to_string(&path).unwrap();
        // Production code only: a file's tests start at its first #[cfg(test)].
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (number, line) in code.lines().enumerate() {
            // The quoted parts of the line (odd pieces between quotes), each
            // split where the literal itself breaks the line.
            for literal in line.split('"').skip(1).step_by(2) {
                if literal.split("\\n").any(|part| part.trim_start().contains("        ")) {
                    found.push(format!("{}:{}: {literal}", path.display(), number + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "runs of spaces inside string literals:\n{}", found.join("\n"));
}
