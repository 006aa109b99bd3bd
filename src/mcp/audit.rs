//! The workstation's own audit trail: one JSON line per tool call in
//! `$XDG_STATE_HOME/volce-lab/audit.jsonl` (default
//! `~/.local/state/volce-lab/audit.jsonl`). Runs unprivileged.
//!
//! Invariants enforced here:
//! - a line holds only fixed words and numbers we produced (tool, check or
//!   action, status, exit code, execution status, a validated plan id, the
//!   request id, time, duration, the process outcome category): never arguments' free text, commands,
//!   output, stderr or messages. [`Record`] has no field that could carry them;
//! - the directory is created 0700 and the file 0600 (and tightened if they
//!   were looser); a symlink in place of the file is refused;
//! - a failure to write is reported on stderr and never stops the server:
//!   this log is best effort. Every host rpc carries this line's
//!   `request_id` (`crate::wire::RequestId`), and every row the host helper
//!   writes for it carries the same id, so the two trails join on it. Calls
//!   refused here (arguments, demo mode, identity, management off) and the
//!   read-only checks never reach the server and are only in this log.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

use crate::exec::{ExecutionStatus, ProcessOutcome};
use crate::vocab::PlanId;

/// One audit line. Every field is a fixed word, a number, or an id we
/// generated or validated.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub time: String,
    pub request_id: String,
    /// The configured target's name; `None` for a fan-out (its checks are
    /// read-only) or a call refused before a target was chosen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// `None` when the client named a tool that does not exist.
    pub tool: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<&'static str>,
    /// Only ever a validated 32-hex plan id: the type admits nothing else.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<PlanId>,
    pub status: &'static str,
    pub exit_code: Option<i32>,
    pub execution_status: Option<ExecutionStatus>,
    /// The fixed category of a run that did not exit 0, in the same words
    /// as the host's audit rows (`crate::exec::ProcessOutcome`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_outcome: Option<ProcessOutcome>,
    pub duration_ms: u64,
}

/// Where audit lines go.
pub struct Audit {
    path: Option<PathBuf>,
    file: Mutex<Option<File>>,
}

impl Audit {
    /// The log at the path the environment gives: `$XDG_STATE_HOME` when it
    /// is absolute (as the XDG spec requires), else `$HOME/.local/state`.
    pub fn from_env() -> Audit {
        let absolute = |name: &str| std::env::var_os(name).map(PathBuf::from).filter(|p| p.is_absolute());
        let base =
            absolute("XDG_STATE_HOME").or_else(|| absolute("HOME").map(|home| home.join(".local/state")));
        match base {
            Some(base) => Audit::at(base.join("volce-lab").join("audit.jsonl")),
            None => {
                eprintln!("volce-lab: neither XDG_STATE_HOME nor HOME is set; the local audit log is off");
                Audit::disabled()
            }
        }
    }

    /// A log at `path` (its parent directory is created 0700).
    pub fn at(path: PathBuf) -> Audit {
        Audit { path: Some(path), file: Mutex::new(None) }
    }

    /// Where the log is, if it is on (the witness lives beside it).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// No local audit log.
    pub fn disabled() -> Audit {
        Audit { path: None, file: Mutex::new(None) }
    }

    /// Appends one line; reports a failure on stderr and carries on.
    pub fn append(&self, record: &Record) {
        let Some(path) = &self.path else { return };
        let Ok(mut line) = serde_json::to_vec(record) else { return };
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if file.is_none() {
            match open(path) {
                Ok(opened) => *file = Some(opened),
                Err(error) => {
                    eprintln!("volce-lab: cannot open the audit log {}: {error}", path.display());
                    return;
                }
            }
        }
        // One write of a whole line on an O_APPEND file: lines from two
        // servers sharing the log never interleave.
        if let Some(handle) = file.as_mut()
            && let Err(error) = handle.write_all(&line)
        {
            eprintln!("volce-lab: cannot write the audit log {}: {error}", path.display());
            *file = None;
        }
    }
}

fn open(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        if let Some(base) = dir.parent() {
            std::fs::create_dir_all(base)?;
        }
        match DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(error),
        }
        let metadata = std::fs::symlink_metadata(dir)?;
        if !metadata.is_dir() {
            return Err(std::io::Error::other("the audit directory is not a directory"));
        }
        if metadata.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(dir, Permissions::from_mode(0o700))?;
        }
    }
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_CLOEXEC.bits())
        .open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(std::io::Error::other("the audit log is not a regular file"));
    }
    if metadata.permissions().mode() & 0o077 != 0 {
        file.set_permissions(Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            time: "2026-01-01T00:00:00.000Z".into(),
            request_id: "r".into(),
            target: Some("web-1".into()),
            tool: Some("cloud_check"),
            check: Some("disk"),
            action: None,
            plan_id: None,
            status: "ok",
            exit_code: Some(0),
            execution_status: Some(ExecutionStatus::Ok),
            process_outcome: None,
            duration_ms: 3,
        }
    }

    #[test]
    fn creates_private_directory_and_file_and_appends_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/volce-lab/audit.jsonl");
        let audit = Audit::at(path.clone());
        audit.append(&record());
        audit.append(&record());
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2);
        let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(line["check"], "disk");
        assert!(line.get("process_outcome").is_none(), "a clean run has no failure category");
        assert_eq!(line["execution_status"], "ok");
        assert!(line.get("action").is_none());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn loose_permissions_are_tightened() {
        let dir = tempfile::tempdir().unwrap();
        let log_dir = dir.path().join("volce-lab");
        std::fs::create_dir(&log_dir).unwrap();
        std::fs::set_permissions(&log_dir, Permissions::from_mode(0o755)).unwrap();
        let path = log_dir.join("audit.jsonl");
        std::fs::write(&path, "").unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        Audit::at(path.clone()).append(&record());
        assert_eq!(std::fs::metadata(&log_dir).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn a_symlink_in_place_of_the_log_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let log_dir = dir.path().join("volce-lab");
        std::fs::create_dir(&log_dir).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "").unwrap();
        std::os::unix::fs::symlink(&elsewhere, log_dir.join("audit.jsonl")).unwrap();
        Audit::at(log_dir.join("audit.jsonl")).append(&record());
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "", "nothing written through the link");
    }
}

#[cfg(test)]
mod process_outcome_tests {
    use super::*;

    #[test]
    fn a_failed_run_is_logged_with_the_hosts_words() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("volce-lab/audit.jsonl");
        let mut line = tests_record();
        line.execution_status = Some(ExecutionStatus::SshOrRemote255);
        line.process_outcome = ProcessOutcome::of_status(ExecutionStatus::SshOrRemote255);
        Audit::at(path.clone()).append(&line);
        let value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(value["process_outcome"], "SSH_OR_REMOTE_EXIT_255");
    }

    fn tests_record() -> Record {
        Record {
            time: "2026-01-01T00:00:00.000Z".into(),
            request_id: "r".into(),
            target: None,
            tool: Some("cloud_manage"),
            check: None,
            action: None,
            plan_id: None,
            status: "unknown",
            exit_code: Some(255),
            execution_status: None,
            process_outcome: None,
            duration_ms: 3,
        }
    }
}
