//! The targets file (`VOLCE_LAB_TARGETS`): the servers one workstation
//! speaks to, each with its own expected identity, management switch and
//! groups. Pure parsing and validation; reading the file is the caller's.
//!
//! Invariants enforced here:
//! - every safety fact is per target: a target's expected host and user
//!   come from its own table, never from another's or from a default;
//! - names and aliases follow the alias rule of `VOLCE_LAB_SSH_ALIAS`, so
//!   they can never be an ssh option or a `user@host`; no two targets share
//!   an alias, in any case (two names for one server would let one name's
//!   facts stand for the other's; ssh lowercases the name it dials);
//! - a refusal is one sentence naming the file, the line and the key, and
//!   nothing runs (the caller exits 2).

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::{MANAGEMENT_WORDS, is_alias, is_identifier, management_word};

/// At most this many targets: a fan-out runs at most 8 at once, and a file
/// longer than this is more likely a mistake than a fleet.
pub const MAX_TARGETS: usize = 64;

/// One target as the file gives it, before the shared variables join it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetEntry {
    pub name: String,
    pub ssh_alias: String,
    pub expected_host: String,
    pub expected_user: String,
    pub management: bool,
    pub groups: Vec<String>,
    /// The 1-based line of the target's table, for later refusals (the
    /// ssh_config check) that name it.
    pub line: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    #[serde(default)]
    targets: BTreeMap<Spanned<String>, Spanned<TableShape>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableShape {
    ssh_alias: Option<Spanned<String>>,
    expected_host: Spanned<String>,
    expected_user: Spanned<String>,
    /// A TOML boolean or one of [`MANAGEMENT_WORDS`] ([`management`]).
    management: Option<Spanned<toml::Value>>,
    #[serde(default)]
    groups: Vec<Spanned<String>>,
}

/// The file being parsed: its path and text, to name lines in refusals.
struct Source<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Source<'_> {
    /// The 1-based line a byte span starts on.
    fn line_of(&self, span: Range<usize>) -> usize {
        self.text[..span.start.min(self.text.len())].matches('\n').count() + 1
    }

    /// A refusal naming the file, the line of `span` and `key`.
    fn at(&self, span: Range<usize>, key: &str, why: &str) -> String {
        format!("{}, line {}, key {key}: {why}", self.path.display(), self.line_of(span))
    }
}

/// Parses the text of the targets file at `path` (named in refusals).
pub fn parse(path: &Path, text: &str) -> Result<Vec<TargetEntry>, String> {
    let source = Source { path, text };
    let shape: FileShape = toml::from_str(text).map_err(|error| {
        let line = error.span().map_or(1, |span| source.line_of(span));
        // toml's own message names the key (missing, unknown or mistyped);
        // only its first line, without the excerpt of the file it appends.
        let why = error.message().lines().next().unwrap_or("not valid TOML").trim_end_matches('.');
        format!("{}, line {line}: {why}; see README.md, \"Many servers\".", path.display())
    })?;
    if shape.targets.is_empty() {
        return Err(format!(
            "{}, line 1, key targets: the file names no target; add a [targets.NAME] table with \
             expected_host and expected_user for each server.",
            path.display()
        ));
    }
    if shape.targets.len() > MAX_TARGETS {
        return Err(format!(
            "{}, line 1, key targets: the file names {} targets, more than {MAX_TARGETS}; split the fleet \
             into several MCP server entries.",
            path.display(),
            shape.targets.len()
        ));
    }
    let mut entries: Vec<TargetEntry> = Vec::with_capacity(shape.targets.len());
    for (name, table) in shape.targets {
        let entry = target(&source, name, table, &entries)?;
        entries.push(entry);
    }
    Ok(entries)
}

/// One `[targets.NAME]` table, checked on its own and against the targets
/// before it (`earlier`: no two share an alias).
fn target(
    source: &Source,
    name: Spanned<String>,
    table: Spanned<TableShape>,
    earlier: &[TargetEntry],
) -> Result<TargetEntry, String> {
    let key = |field: &str| format!("targets.{}.{field}", name.get_ref());
    if !is_alias(name.get_ref()) {
        return Err(source.at(
            name.span(),
            &format!("targets.{}", name.get_ref().escape_debug()),
            "a target's name must be a letter or digit, then up to 63 letters, digits, '_' or '-'.",
        ));
    }
    let line = source.line_of(table.span());
    let table = table.into_inner();
    let ssh_alias = match table.ssh_alias {
        None => name.get_ref().clone(),
        Some(alias) if is_alias(alias.get_ref()) => alias.into_inner(),
        Some(alias) => {
            return Err(source.at(
                alias.span(),
                &key("ssh_alias"),
                "must be an ssh_config alias: a letter or digit, then up to 63 letters, digits, '_' or '-'.",
            ));
        }
    };
    // In any case: ssh lowercases a name before it dials it, so `RT-A`
    // and `rt-a` reach one server unless two Host blocks say otherwise,
    // and a name that differs only in case is more likely a slip.
    if let Some(first) = earlier.iter().find(|e| e.ssh_alias.eq_ignore_ascii_case(&ssh_alias)) {
        return Err(format!(
            "{}, line {line}, key {}: the alias {ssh_alias} is also target {}'s ({}, line {}; aliases \
             are compared in any case); one server is one target.",
            source.path.display(),
            key("ssh_alias"),
            first.name,
            first.ssh_alias,
            first.line
        ));
    }
    for (field, value) in [("expected_host", &table.expected_host), ("expected_user", &table.expected_user)] {
        if !is_identifier(value.get_ref()) {
            return Err(source.at(
                value.span(),
                &key(field),
                "must be a simple name: letters, digits, '_', '.' or '-', not starting with '.' or '-'.",
            ));
        }
    }
    // The agent's account must not be root: every boundary of the
    // design (sudoers rule, root-owned state) means nothing to root.
    if table.expected_user.get_ref() == "root" {
        return Err(source.at(
            table.expected_user.span(),
            &key("expected_user"),
            "must not be root; use an unprivileged account for the agent.",
        ));
    }
    let groups = groups(source, table.groups, &key("groups"))?;
    let management = management(source, table.management, &key("management"))?;
    Ok(TargetEntry {
        name: name.into_inner(),
        ssh_alias,
        expected_host: table.expected_host.into_inner(),
        expected_user: table.expected_user.into_inner(),
        management,
        groups,
        line,
    })
}

/// A target's `management`: off when absent; `true`/`false`, or the words
/// `VOLCE_LAB_MANAGEMENT` takes as a string, so one spelling works in both
/// places (issue 37).
fn management(source: &Source, given: Option<Spanned<toml::Value>>, key: &str) -> Result<bool, String> {
    let Some(given) = given else { return Ok(false) };
    let on = match given.get_ref() {
        toml::Value::Boolean(on) => Some(*on),
        toml::Value::String(word) => management_word(word),
        _ => None,
    };
    on.ok_or_else(|| {
        source.at(
            given.span(),
            key,
            &format!("must be true or false, or as a string one of {MANAGEMENT_WORDS} (default false)."),
        )
    })
}

/// A target's groups, each an alias-shaped name, duplicates dropped.
fn groups(source: &Source, given: Vec<Spanned<String>>, key: &str) -> Result<Vec<String>, String> {
    let mut groups = Vec::with_capacity(given.len());
    for group in given {
        if !is_alias(group.get_ref()) {
            return Err(source.at(
                group.span(),
                key,
                "a group's name must be a letter or digit, then up to 63 letters, digits, '_' or '-'.",
            ));
        }
        if !groups.contains(group.get_ref()) {
            groups.push(group.into_inner());
        }
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Vec<TargetEntry>, String> {
        parse(Path::new("/home/u/targets.toml"), text)
    }

    const TWO: &str = r#"
# two servers
[targets.web-1]
ssh_alias = "web-1"            # default: the table's name
expected_host = "web-1.internal"
expected_user = "vl-agent"
management = true
groups = ["prod"]

[targets.db]
expected_host = "db.internal"
expected_user = "vl-agent"
groups = ["prod", "data", "prod"]
"#;

    #[test]
    fn a_file_with_comments_gives_one_entry_per_table_with_its_own_facts() {
        let entries = parsed(TWO).unwrap();
        assert_eq!(entries.len(), 2);
        let db = &entries[0];
        assert_eq!((db.name.as_str(), db.ssh_alias.as_str()), ("db", "db"), "the alias defaults to the name");
        assert_eq!(db.expected_host, "db.internal");
        assert!(!db.management, "management defaults to off");
        assert_eq!(db.groups, ["prod", "data"], "a repeated group counts once");
        assert_eq!(db.line, 10);
        let web = &entries[1];
        assert_eq!((web.expected_host.as_str(), web.management), ("web-1.internal", true));
        assert_eq!(web.line, 3);
    }

    /// Each bad file: what was tried, and the line and key the refusal must name.
    #[test]
    fn every_bad_file_is_one_sentence_naming_the_file_the_line_and_the_key() {
        let cases: &[(&str, &str, &str)] = &[
            ("", "line 1, key targets", "an empty file"),
            ("# nothing\n", "line 1, key targets", "only a comment"),
            ("[targets]\n", "line 1, key targets", "a targets table with no target"),
            (
                "[targets.a]\nexpected_host = \"h\"\nexpected_user = \"u\"\nmanagment = true\n",
                "line 4",
                "an unknown key (a typo of management)",
            ),
            ("[targets.a]\nexpected_host = \"h\"\n", "line 1", "a missing expected_user"),
            (
                "[targets.a]\nexpected_host = \"h\"\nexpected_user = \"root\"\n",
                "line 3, key targets.a.expected_user",
                "root as the agent's account",
            ),
            (
                "[targets.a]\nexpected_host = \"h\"\nexpected_user = \"u\"\n[targets.b]\nssh_alias = \"a\"\nexpected_host = \"h2\"\nexpected_user = \"u\"\n",
                "line 4, key targets.b.ssh_alias",
                "a duplicate alias",
            ),
            (
                "[targets.a]\nssh_alias = \"rt-a\"\nexpected_host = \"h\"\nexpected_user = \"u\"\n\
                 [targets.b]\nssh_alias = \"RT-A\"\nexpected_host = \"h2\"\nexpected_user = \"u\"\n",
                "line 5, key targets.b.ssh_alias",
                "an alias that differs from another only in case (issue 38)",
            ),
            (
                "[targets.a]\nssh_alias = \"-oProxyCommand=id\"\nexpected_host = \"h\"\nexpected_user = \"u\"\n",
                "line 2, key targets.a.ssh_alias",
                "an alias that is an ssh option",
            ),
            (
                "[targets.\"a b\"]\nexpected_host = \"h\"\nexpected_user = \"u\"\n",
                "line 1, key targets.a b",
                "a name with a space",
            ),
            (
                "[targets.a]\nexpected_host = \"h;x\"\nexpected_user = \"u\"\n",
                "line 2, key targets.a.expected_host",
                "a host name with a semicolon",
            ),
            (
                "[targets.a]\nexpected_host = \"h\"\nexpected_user = \"u\"\ngroups = [\"@prod\"]\n",
                "line 4, key targets.a.groups",
                "a group name with @",
            ),
            ("[targets.a]\nexpected_host = 7\nexpected_user = \"u\"\n", "line 2", "a number as host"),
            ("[targets.a\n", "line 1", "broken TOML"),
            ("title = \"x\"\n", "line 1", "a key outside targets"),
        ];
        for (text, place, tried) in cases {
            let error = parsed(text).expect_err(tried);
            assert!(error.starts_with("/home/u/targets.toml, "), "{tried}: {error}");
            assert!(error.contains(place), "{tried}: {error}");
            assert!(error.ends_with('.') && !error.contains('\n'), "{tried}: one sentence: {error:?}");
        }
    }

    /// Issue 37: `management` took only a boolean while the variable took
    /// only enabled/disabled. Tried: every word either place takes, as a
    /// string and as a boolean; a guess (`"yes"`, `1`, `"on"`): refused at
    /// the key's line, listing what is accepted.
    #[test]
    fn management_takes_a_boolean_or_the_words_the_variable_takes() {
        let with = |value: &str| {
            parsed(&format!(
                "[targets.a]\nexpected_host = \"h\"\nexpected_user = \"u\"\nmanagement = {value}\n"
            ))
        };
        for (value, on) in [
            ("true", true),
            ("false", false),
            ("\"enabled\"", true),
            ("\"disabled\"", false),
            ("\"true\"", true),
            ("\"false\"", false),
        ] {
            assert_eq!(with(value).unwrap()[0].management, on, "{value}");
        }
        for value in ["\"yes\"", "1", "\"on\"", "\"Enabled\"", "[true]"] {
            let error = with(value).expect_err(value);
            assert!(error.contains("line 4, key targets.a.management: must be true or false"), "{error}");
            assert!(error.contains("enabled, disabled, true or false"), "{error}");
            assert!(error.ends_with('.') && !error.contains('\n'), "{error}");
        }
    }

    #[test]
    fn more_than_the_limit_is_refused() {
        let text: String = (0..=MAX_TARGETS)
            .map(|i| format!("[targets.t{i}]\nexpected_host = \"h{i}\"\nexpected_user = \"u\"\n"))
            .collect();
        assert!(parsed(&text).unwrap_err().contains("more than 64"));
    }
}
