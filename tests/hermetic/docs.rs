//! The documents a user follows are checked like code: the skill follows
//! the Agent Skills format, README opens with the two commands, every
//! relative link resolves, every command line of a code block parses with
//! today's CLI, docs/troubleshooting.md has exactly the refusal codes of
//! `vocab::Code`, and docs/policy.md every key of the policy's schema and of
//! the targets file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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

/// The policy's mode as docs/server-install.md states it is the rule the
/// helper applies (`host::paths`: not writable by group or others): before
/// issue 26 the docs said 0600 while 0644 was accepted.
#[test]
fn server_install_states_the_policy_mode_the_helper_enforces() {
    let setup = read("docs/server-install.md");
    let row = setup.lines().find(|l| l.starts_with("| the operator's policy |")).expect("the policy's row");
    assert!(row.contains("writable by no one else") && row.contains("0644 is accepted"), "{row}");
    let paths = read("src/host/paths.rs");
    assert!(
        paths.contains("meta.mode() & 0o022 != 0"),
        "the helper's rule changed: update docs/server-install.md's row"
    );
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

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every Markdown file of the project (not build output, not git's).
fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() {
                if !name.starts_with('.')
                    && !name.starts_with("target")
                    && name != "corpus"
                    && name != "artifacts"
                {
                    walk(&path, out);
                }
            } else if name.ends_with(".md") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(root(), &mut files);
    files.sort();
    assert!(files.len() > 10, "found only {files:?}");
    files
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root()).unwrap().display().to_string()
}

/// A Markdown text cut into prose (fenced blocks blanked, so that their
/// `#` lines and `](` are not read as headings or links) and its fenced
/// blocks, each with its info string.
fn fences(text: &str) -> (String, Vec<(String, Vec<String>)>) {
    let mut prose = String::new();
    let mut blocks = Vec::new();
    let mut open: Option<(String, Vec<String>)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            match open.take() {
                Some(block) => blocks.push(block),
                None => open = Some((info.trim().to_owned(), Vec::new())),
            }
            prose.push('\n');
            continue;
        }
        match &mut open {
            Some((_, lines)) => {
                lines.push(line.to_owned());
                prose.push('\n');
            }
            None => {
                prose.push_str(line);
                prose.push('\n');
            }
        }
    }
    assert!(open.is_none(), "a code block is not closed");
    (prose, blocks)
}

/// `text` without its inline code spans (a JSON `"](..."` in backticks is
/// no link).
fn without_code_spans(text: &str) -> String {
    let mut out = String::new();
    for (i, piece) in text.split('`').enumerate() {
        if i % 2 == 0 {
            out.push_str(piece);
        } else {
            out.push_str(&" ".repeat(piece.len()));
        }
    }
    out
}

/// GitHub's anchor of a heading: lowercase, punctuation dropped (but `-`
/// and `_`), spaces to hyphens; a repeated anchor gets `-1`, `-2`...
fn anchors(text: &str) -> BTreeSet<String> {
    let (prose, _) = fences(text);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in prose.lines() {
        let Some(title) = line.strip_prefix('#') else { continue };
        let title = title.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let count = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *count == 0 { slug.clone() } else { format!("{slug}-{count}") });
        *count += 1;
    }
    out
}

/// The destinations of the inline links `[text](dest)` of a text's prose.
fn links(text: &str) -> Vec<String> {
    let (prose, _) = fences(text);
    let prose = without_code_spans(&prose);
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find(')').expect("a link closes");
        out.push(rest[..end].trim().to_owned());
        rest = &rest[end..];
    }
    out
}

/// Every relative link of every Markdown file names a file that exists,
/// and an `#anchor` names a heading of that file (or of the same file).
#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match link.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() { file.clone() } else { file.parent().unwrap().join(path) };
            if !target.exists() {
                broken.push(format!("{}: {link}: no such file", relative(&file)));
                continue;
            }
            if let Some(anchor) = anchor
                && target.extension().is_some_and(|e| e == "md")
            {
                let headings = anchors(&std::fs::read_to_string(&target).unwrap());
                if !headings.contains(anchor) {
                    broken.push(format!("{}: {link}: no heading with that anchor", relative(&file)));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The words of one shell command line as the shell would pass them, up to
/// the first unquoted operator (`|`, `&&`, `;`, `>`, `<`) or comment. A
/// word holding an expansion (`$AGENT`, `"$(cat ...)"`) becomes `VALUE`:
/// the parser sees a value where the shell would put one.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut expanded = false;
    let mut chars = line.chars().peekable();
    let mut quote: Option<char> = None;
    let finish = |word: &mut String, in_word: &mut bool, expanded: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(if *expanded { "VALUE".to_owned() } else { std::mem::take(word) });
        }
        word.clear();
        *in_word = false;
        *expanded = false;
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '$') => {
                expanded = true;
                word.push(c);
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                    in_word = true;
                }
            }
            (None, '$') => {
                expanded = true;
                in_word = true;
                word.push(c);
            }
            (None, c) if c.is_whitespace() => finish(&mut word, &mut in_word, &mut expanded, &mut words),
            (None, '#') if !in_word => break,
            (None, '|' | '&' | ';' | '>' | '<') => break,
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    finish(&mut word, &mut in_word, &mut expanded, &mut words);
    words
}

/// The volce-lab command a code line runs, if any: argv with argv[0]
/// `volce-lab` or `volce-lab-host`, after `sudo`, `VAR=value` words and the
/// ssh login that may lead it; `cargo run ... --` is `volce-lab`.
fn volce_lab_argv(line: &str) -> Option<Vec<String>> {
    let words = shell_words(line);
    let start = words.iter().position(|w| {
        let name = w.rsplit('/').next().unwrap();
        name == "volce-lab" || name == "volce-lab-host"
    });
    let start = match start {
        Some(start) => start,
        None => {
            let cargo = words.iter().position(|w| !w.contains('='))?;
            if words[cargo] != "cargo" || words.get(cargo + 1).is_none_or(|w| w != "run") {
                return None;
            }
            let dashes = words.iter().position(|w| w == "--")?;
            let mut argv = vec!["volce-lab".to_owned()];
            argv.extend(words[dashes + 1..].iter().cloned());
            return Some(argv);
        }
    };
    // Only a command that runs the program: what comes before it is sudo,
    // env assignments, or `ssh HOST sudo` (never `man volce-lab`, `which ...`).
    let before_ok = words[..start].iter().all(|w| {
        w == "sudo" || w == "ssh" || w == "exec" || w == "env" || w.contains('=') || w.starts_with('-')
    }) || (words.first().is_some_and(|w| w == "ssh")
        && words[..start].iter().any(|w| w == "sudo"));
    if !before_ok {
        return None;
    }
    let mut argv: Vec<String> = words[start..].to_vec();
    argv[0] = argv[0].rsplit('/').next().unwrap().to_owned();
    Some(argv)
}

/// Every `volce-lab` and `volce-lab-host` command line in a code block of
/// every Markdown file parses with today's CLI (the clap definitions the
/// binary uses). Placeholders such as `PLAN_ID` parse as the strings they
/// are; a command whose words hold `...` (a template, such as
/// `sudo volce-lab-host ...`) is the one kind skipped.
#[test]
fn every_command_line_in_a_code_block_parses() {
    use clap::CommandFactory as _;
    let mut checked = 0;
    let mut refused = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let (_, blocks) = fences(&text);
        for (info, lines) in blocks {
            if !matches!(info.as_str(), "" | "sh" | "bash" | "console" | "shell") {
                continue;
            }
            // Join continuation lines as the shell does.
            let mut joined = Vec::new();
            let mut current = String::new();
            for line in lines {
                let line = line.trim();
                let line = line.strip_prefix("$ ").unwrap_or(line);
                if let Some(head) = line.strip_suffix('\\') {
                    current.push_str(head);
                    current.push(' ');
                } else {
                    current.push_str(line);
                    joined.push(std::mem::take(&mut current));
                }
            }
            for line in joined {
                let Some(argv) = volce_lab_argv(&line) else { continue };
                if argv.iter().any(|word| word.contains("...")) {
                    continue;
                }
                let command = if argv[0] == "volce-lab-host" {
                    volce_lab::cli::HostCli::command()
                } else {
                    volce_lab::cli::Cli::command()
                };
                checked += 1;
                if let Err(error) = command.try_get_matches_from(&argv) {
                    use clap::error::ErrorKind;
                    if !matches!(error.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                        refused.push(format!("{}: {line}\n  {}", relative(&file), error.kind()));
                    }
                }
            }
        }
    }
    assert!(checked > 30, "only {checked} command lines found: the finder is broken");
    assert!(refused.is_empty(), "command lines today's CLI refuses:\n{}", refused.join("\n"));
}

/// docs/troubleshooting.md has one row per refusal code under "Refusal
/// codes", and those rows are exactly the codes of `vocab::Code`.
#[test]
fn troubleshooting_explains_exactly_the_refusal_codes() {
    use strum::VariantArray as _;
    let text = read("docs/troubleshooting.md");
    let table = text.split("\n## Refusal codes\n").nth(1).expect("a section \"Refusal codes\"");
    let mut documented = BTreeSet::new();
    let mut twice = Vec::new();
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        let code = row[3..].split('`').next().unwrap();
        let cells = row.split(" | ").count();
        assert_eq!(cells, 3, "a row is code | meaning | next step: {row}");
        if !documented.insert(code.to_owned()) {
            twice.push(code.to_owned());
        }
    }
    let codes: BTreeSet<String> =
        volce_lab::vocab::Code::VARIANTS.iter().map(|c| c.as_str().to_owned()).collect();
    let missing: Vec<_> = codes.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&codes).collect();
    assert!(missing.is_empty(), "codes docs/troubleshooting.md does not explain: {missing:?}");
    assert!(unknown.is_empty(), "codes docs/troubleshooting.md names that do not exist: {unknown:?}");
    assert!(twice.is_empty(), "codes with two rows: {twice:?}");
}

/// The entries (`### \`KEY\``) of one `## ` section of docs/policy.md, each
/// with its text.
fn entries(text: &str, section: &str) -> BTreeMap<String, String> {
    let body =
        text.split(&format!("\n## {section}\n")).nth(1).unwrap_or_else(|| panic!("no section {section}"));
    let body = body.split("\n## ").next().unwrap();
    let mut out = BTreeMap::new();
    for entry in body.split("\n### `").skip(1) {
        let (key, rest) = entry.split_once('`').unwrap();
        assert!(out.insert(key.to_owned(), rest.to_owned()).is_none(), "{key} has two entries");
    }
    out
}

/// The key paths of the policy's schema: `capacity.min_free_disk_mib`, and
/// a catalog entry's keys as `catalog.KEY.image`.
fn schema_keys(schema: &serde_json::Value) -> BTreeMap<String, serde_json::Value> {
    fn resolve<'a>(schema: &'a serde_json::Value, node: &'a serde_json::Value) -> &'a serde_json::Value {
        match node.get("$ref").and_then(|r| r.as_str()) {
            Some(reference) => {
                let name = reference.strip_prefix("#/$defs/").expect("a local $ref");
                &schema["$defs"][name]
            }
            None => node,
        }
    }
    fn walk(
        schema: &serde_json::Value,
        node: &serde_json::Value,
        prefix: &str,
        out: &mut BTreeMap<String, serde_json::Value>,
    ) {
        let Some(properties) = node.get("properties").and_then(|p| p.as_object()) else { return };
        for (key, value) in properties {
            let path = format!("{prefix}{key}");
            let value = resolve(schema, value);
            out.insert(path.clone(), value.clone());
            walk(schema, value, &format!("{path}."), out);
            // A map of named objects (the accessories): each name's keys.
            if let Some(reference) = value.pointer("/additionalProperties/$ref")
                && reference.as_str().is_some_and(|r| r != "#/$defs/template")
            {
                let named = resolve(schema, &value["additionalProperties"]);
                walk(schema, named, &format!("{path}.NAME."), out);
            }
            // The catalog's values: a pinned string or an entry object.
            if let Some(choices) = value.pointer("/additionalProperties/oneOf").and_then(|c| c.as_array()) {
                for choice in choices {
                    walk(schema, resolve(schema, choice), &format!("{path}.KEY."), out);
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(schema, schema, "", &mut out);
    out
}

/// docs/policy.md documents every key of policy/policy.schema.json, each
/// once, with the schema's range and default; and every key of the targets
/// file (the fields `src/config/targets.rs` parses).
#[test]
fn policy_page_documents_every_key_of_the_schema_and_the_targets_file() {
    let text = read("docs/policy.md");
    let schema: serde_json::Value = serde_json::from_str(&read("policy/policy.schema.json")).unwrap();
    let keys = schema_keys(&schema);
    let documented = entries(&text, "policy.json");
    let named: BTreeSet<&String> = keys.keys().collect();
    let written: BTreeSet<&String> = documented.keys().collect();
    assert_eq!(named, written, "docs/policy.md's policy.json entries and the schema's keys differ");
    let mut wrong = Vec::new();
    for (key, spec) in &keys {
        let entry = &documented[key];
        if let Some(default) = spec.get("default") {
            let stated = entry
                .split("Default: `")
                .nth(1)
                .and_then(|rest| rest.split('`').next())
                .and_then(|value| serde_json::from_str::<serde_json::Value>(value).ok());
            if stated.as_ref() != Some(default) {
                wrong.push(format!("{key}: the schema's default is {default}, the entry says {stated:?}"));
            }
        }
        if let (Some(min), Some(max)) = (spec.get("minimum"), spec.get("maximum"))
            && !entry.contains(&format!("{min} to {max}"))
        {
            wrong.push(format!("{key}: the entry does not say the schema's range {min} to {max}"));
        }
    }
    assert!(wrong.is_empty(), "docs/policy.md disagrees with the schema:\n{}", wrong.join("\n"));

    let source = read("src/config/targets.rs");
    let shape = source
        .split("struct TableShape {")
        .nth(1)
        .expect("the targets table's shape")
        .split('}')
        .next()
        .unwrap();
    let fields: BTreeSet<String> = shape
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.starts_with("//") && l.contains(':'))
        .map(|l| l.split(':').next().unwrap().trim().trim_start_matches("pub ").to_owned())
        .collect();
    let targets: BTreeSet<String> = entries(&text, "targets.toml").into_keys().collect();
    assert_eq!(fields, targets, "docs/policy.md's targets.toml entries and the file's keys differ");
}

/// README stays the short entry the issue asked for; the rest lives in docs/.
#[test]
fn readme_stays_short() {
    let lines = read("README.md").lines().count();
    assert!(lines <= 160, "README.md has {lines} lines: move detail to docs/");
}

/// The upgrade table of docs/server-install.md names, for this package's
/// version, the state schema this build writes: it said 12 while `doctor`
/// printed 14 (issue 37).
#[test]
fn upgrade_table_states_the_schema_this_version_writes() {
    let setup = read("docs/server-install.md");
    let version = env!("CARGO_PKG_VERSION");
    let row = setup
        .lines()
        .find(|l| l.starts_with(&format!("| {version} |")))
        .unwrap_or_else(|| panic!("docs/server-install.md's upgrade table has no row for {version}"));
    let schema = row.split(" | ").nth(1).unwrap().split(' ').next().unwrap();
    assert_eq!(schema.parse::<i64>().ok(), Some(volce_lab::store::Store::supported_version()), "{row}");
}

/// Every Markdown file the code, the benches, the scripts or the packaging
/// names exists: a bare page name (`server-install.md`, as messages and man
/// pages give it, the package installing docs/ flat) in docs/, a path from
/// the repository's root. Messages named HOST-SETUP.md for a while after it
/// was split (issue 37).
#[test]
fn every_page_the_code_names_exists() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for dir in ["src", "benches", "scripts", "packaging", "examples", "tests/real", "tests/support"] {
        walk(&root().join(dir), &mut files);
    }
    files.extend(
        ["Cargo.toml", "policy/policy.example.jsonc", "policy/policy.schema.json"].map(|f| root().join(f)),
    );
    let mut missing = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let words = text.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '-')));
        for word in words.filter(|w| w.ends_with(".md") && w.len() > 3) {
            let word = word.trim_start_matches("./");
            // An installed path (usr/share/doc/volce-lab/README.md) names the
            // file by its base name.
            let name = word.rsplit('/').next().unwrap();
            let found = root().join(word).exists()
                || root().join("docs").join(name).exists()
                || root().join(name).exists();
            if !found && word.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) {
                missing.push(format!("{}: {word}", relative(&file)));
            }
        }
    }
    assert!(missing.is_empty(), "pages named but missing:\n{}", missing.join("\n"));
}
