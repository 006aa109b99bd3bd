//! Operator-declared tasks (issue 40): a catalog entry may name commands
//! with fixed argv ([`TaskName`] → [`TaskArgv`]); a `run_task` plan runs one
//! of them once, in a new container of the app's current image
//! (`super::TaskSpec`, with the engine's other specs). Pure data and its
//! validation.
//!
//! Why the argv is validated so narrowly: it is the operator's, but it
//! travels in a sealed plan, in `show` and in docker's argv (one element
//! each, never a shell); a control character would let it hide part of
//! itself from the operator reviewing it, and an element starting with `-`
//! in the first place would be read by docker as an option.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The most tasks one catalog entry declares.
pub const MAX_TASKS: usize = 16;
/// The most elements of one task's argv, and the most bytes of one.
pub const TASK_ARGV_MAX: usize = 32;
pub const TASK_ARG_MAX_BYTES: usize = 256;
/// How long a task may run before it is stopped and removed. The whole
/// `run_task` (create, start, wait, read, remove) must end inside the 240 s
/// the MCP client waits for the helper's reply, as a deploy must
/// (`crate::docker::client::DEPLOY_BUDGET`).
pub const TASK_TIMEOUT: Duration = Duration::from_secs(150);

/// A task's name as the catalog declares it: 1 to 32 of lowercase letters,
/// digits, `-` and `_`, starting with a letter.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TaskName(String);

impl TaskName {
    pub fn parse(name: &str) -> Option<TaskName> {
        let mut bytes = name.bytes();
        let first_ok = bytes.next().is_some_and(|b| b.is_ascii_lowercase());
        let rest_ok = bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        (first_ok && rest_ok && name.len() <= 32).then(|| TaskName(name.to_owned()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TaskName {
    type Error = String;
    fn try_from(name: String) -> Result<TaskName, String> {
        TaskName::parse(&name).ok_or_else(|| format!("{name:?} is not a task name"))
    }
}

impl From<TaskName> for String {
    fn from(name: TaskName) -> String {
        name.0
    }
}

impl std::fmt::Display for TaskName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A task's argv: 1 to [`TASK_ARGV_MAX`] elements of 1 to
/// [`TASK_ARG_MAX_BYTES`] bytes each, printable (no control character), the
/// first not starting with `-`. The first becomes the container's
/// entrypoint, the rest its arguments: exactly this argv runs, whatever the
/// image's own ENTRYPOINT and CMD say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<String>", into = "Vec<String>")]
pub struct TaskArgv(Vec<String>);

impl TaskArgv {
    pub fn parse(args: Vec<String>) -> Option<TaskArgv> {
        let element_ok = |arg: &String| {
            (1..=TASK_ARG_MAX_BYTES).contains(&arg.len()) && !arg.chars().any(char::is_control)
        };
        let ok = (1..=TASK_ARGV_MAX).contains(&args.len())
            && args.iter().all(element_ok)
            && !args[0].starts_with('-');
        ok.then_some(TaskArgv(args))
    }
    /// The program, then its arguments.
    pub fn program(&self) -> &str {
        &self.0[0]
    }
    pub fn args(&self) -> &[String] {
        &self.0[1..]
    }
    pub fn all(&self) -> &[String] {
        &self.0
    }
}

impl TryFrom<Vec<String>> for TaskArgv {
    type Error = String;
    fn try_from(args: Vec<String>) -> Result<TaskArgv, String> {
        TaskArgv::parse(args).ok_or_else(|| "not a task argv".to_owned())
    }
}

impl From<TaskArgv> for Vec<String> {
    fn from(argv: TaskArgv) -> Vec<String> {
        argv.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tried: names with capitals, a leading digit or dash, a dot, 33
    /// bytes, empty; argv empty, 33 elements, an empty element, a
    /// newline, an escape, a leading `-`.
    #[test]
    fn names_and_argv_take_only_what_can_be_shown_and_run_as_written() {
        for good in ["migrate", "db-seed", "a", "x_1"] {
            assert!(TaskName::parse(good).is_some(), "{good}");
        }
        for bad in ["", "Migrate", "1st", "-x", "a.b", &"a".repeat(33)] {
            assert!(TaskName::parse(bad).is_none(), "{bad}");
        }
        let argv = |args: &[&str]| TaskArgv::parse(args.iter().map(|a| (*a).to_owned()).collect());
        let ok = argv(&["/app/bin/migrate", "--to", "latest"]).unwrap();
        assert_eq!((ok.program(), ok.args().len()), ("/app/bin/migrate", 2));
        assert!(argv(&[]).is_none());
        assert!(argv(&["/bin/x", ""]).is_none());
        assert!(argv(&["/bin/x", "a\nb"]).is_none());
        assert!(argv(&["/bin/x", "\u{1b}[2J"]).is_none());
        assert!(argv(&["--privileged"]).is_none());
        assert!(argv(&vec!["a"; TASK_ARGV_MAX + 1]).is_none());
        assert!(argv(&[&"a".repeat(TASK_ARG_MAX_BYTES + 1)]).is_none());
    }
}
