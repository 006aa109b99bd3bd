//! The operator's pause of the agent's access: `volce-lab-host pause
//! [--reason TEXT]` and `resume`, and the check every rpc makes first. For
//! the way back to an older package (docs/server-install.md, Upgrading),
//! maintenance of the host, or an incident. Runs as root inside the host
//! helper.
//!
//! The pause is a file in the state directory (`paused`, root's, 0600),
//! not a row: an rpc must be refused before the store is opened, since an
//! open can migrate the database (the very thing a downgrade must avoid),
//! and a file needs no schema step.
//!
//! Invariants enforced here:
//! - while `paused` exists every rpc is refused `paused` (with the
//!   operator's reason) before the policy, a slot or the store is touched:
//!   nothing in the state database is opened or changed;
//! - a refused rpc cannot write its row without opening the store, so it
//!   is counted beside the pause instead (`counted.rs`) and the counts are
//!   written to the audit trail when the pause ends, one counted row per
//!   caller;
//! - the files are trusted only as root's, not writable by group or
//!   others, and never through a symlink (opened under the checked state
//!   directory's handle, `O_NOFOLLOW`); an unreadable pause file still
//!   pauses (fail closed);
//! - operator commands never look at the pause: they keep working.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;
use serde::{Deserialize, Serialize};

use super::counted::{self, Counts, Tally};
use super::paths::{self, HostPaths};
use super::request_row::{self, Caller, audit_unavailable};
use crate::store::{AuditOperation, Store};
use crate::vocab::{Code, Refusal};

/// The pause's file name in the state directory.
pub const PAUSE_FILE: &str = "paused";
/// A pause file is a few hundred bytes; a larger one is not read.
const MAX_PAUSE_BYTES: u64 = 4096;

/// A pause in force: who set it, when, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pause {
    pub reason: Option<String>,
    pub by: String,
    pub at: i64,
}

impl Pause {
    /// The refusal every rpc gets while it is in force.
    pub fn refusal(&self) -> Refusal {
        let reason = match &self.reason {
            Some(reason) => {
                format!(" (their reason, in their words: \"{}\")", crate::text::for_terminal(reason))
            }
            None => String::new(),
        };
        Refusal::new(
            Code::Paused,
            format!(
                "The operator paused volce-lab's agent access on this server{reason}; nothing was read or changed, \
                 and every request is refused until they run `sudo volce-lab-host resume`. Tell the user, and do \
                 not retry in a loop."
            ),
        )
    }
}

fn state_handle(paths: &HostPaths) -> Result<Option<File>, Refusal> {
    match std::fs::symlink_metadata(&paths.state_dir) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        _ => paths::open_dir(&paths.state_dir, paths.owner_uid).map(Some),
    }
}

/// The pause in force on `paths`, if any. An unsafe state directory or
/// pause file is refused (`unsafe_path`); an unreadable one pauses.
pub fn current(paths: &HostPaths) -> Result<Option<Pause>, Refusal> {
    let Some(dir) = state_handle(paths)? else { return Ok(None) };
    let path = paths.state_dir.join(PAUSE_FILE);
    let fd =
        match openat(&dir, PAUSE_FILE, OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty())
        {
            Ok(fd) => fd,
            Err(nix::errno::Errno::ENOENT) => return Ok(None),
            Err(_) => {
                return Err(Refusal::new(Code::UnsafePath, format!("{} cannot be opened.", path.display())));
            }
        };
    let file = File::from(fd);
    paths::check_handle(&file, &path, false, paths.owner_uid)?;
    let mut bytes = Vec::new();
    let read = file.take(MAX_PAUSE_BYTES).read_to_end(&mut bytes);
    let unreadable = Pause { reason: None, by: "unknown".into(), at: 0 };
    Ok(Some(read.ok().and_then(|_| serde_json::from_slice(&bytes).ok()).unwrap_or(unreadable)))
}

/// Writes the counted refusals and `command`'s row in one transaction of
/// `store` (pause, resume and restore end a pause's count this way).
pub fn record(
    store: &mut Store,
    caller: &Caller,
    command: AuditOperation,
    counts: &Counts,
    now: i64,
) -> Result<(), Refusal> {
    // The request's meta stamps the command's row with its operation and
    // the operator's uids (`record_state_command`).
    store.begin_request(caller.request(command));
    counted::write(store, Tally::Paused, counts, now, |tx| tx.record_state_command(now))
        .map_err(|_| audit_unavailable())
}

/// `pause [--reason TEXT]`: recorded, then in force. Pausing again
/// replaces the reason.
pub fn pause(paths: &HostPaths, caller: &Caller, reason: Option<&str>, now: i64) -> Result<String, Refusal> {
    super::controller::check_reason(reason)?;
    paths::prepare_state(paths)?;
    let again = current(paths)?.is_some();
    // Counts left from an earlier pause's last moments are not this one's.
    let counts = if again { Counts::default() } else { counted::take(paths, Tally::Paused) };
    if let Some(mut store) = request_row::open_for_rows(paths)? {
        record(&mut store, caller, AuditOperation::Pause, &counts, now)?;
    }
    let pause = Pause { reason: reason.map(str::to_owned), by: caller.name.clone(), at: now };
    write_pause(&paths.state_dir, &pause)?;
    let what = if again { "Paused again, with this reason" } else { "Paused" };
    Ok(format!(
        "{what}: every agent request (rpc) is now refused `paused`{}, before the state database is opened, and \
         counted in the audit trail when the pause ends. Your commands keep working. Lift it with \
         `sudo volce-lab-host resume`.\n",
        if reason.is_some() { " with your reason" } else { "" }
    ))
}

fn write_pause(state_dir: &Path, pause: &Pause) -> Result<(), Refusal> {
    let path = state_dir.join(PAUSE_FILE);
    let candidate = state_dir.join(format!(".{PAUSE_FILE}.new"));
    let failed = || {
        Refusal::new(
            Code::StateUnavailable,
            format!("{} could not be written; nothing is paused.", path.display()),
        )
    };
    let _ = std::fs::remove_file(&candidate);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(&candidate)
        .map_err(|_| failed())?;
    let json = serde_json::to_vec(pause).map_err(|_| failed())?;
    file.write_all(&json).and_then(|()| file.sync_all()).map_err(|_| failed())?;
    std::fs::rename(&candidate, &path).map_err(|_| failed())
}

/// Removes the pause (and what is left of its count): access resumes.
pub fn lift(paths: &HostPaths) -> Result<(), Refusal> {
    let path = paths.state_dir.join(PAUSE_FILE);
    match std::fs::remove_file(&path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(Refusal::new(
            Code::StateUnavailable,
            format!("{} could not be removed; the pause stays. Remove it by hand.", path.display()),
        )),
        _ => {
            let _ = std::fs::remove_file(paths.state_dir.join(Tally::Paused.file()));
            Ok(())
        }
    }
}

/// `resume`: the counted refusals and the resume recorded, then the pause
/// lifted. Not paused: says so and changes nothing.
pub fn resume(paths: &HostPaths, caller: &Caller, now: i64) -> Result<String, Refusal> {
    let Some(pause) = current(paths)? else {
        return Ok("volce-lab is not paused; nothing changed.\n".to_owned());
    };
    let counts = counted::take(paths, Tally::Paused);
    if let Some(mut store) = request_row::open_for_rows(paths)? {
        record(&mut store, caller, AuditOperation::Resume, &counts, now)?;
    }
    lift(paths)?;
    let refused = counts.total();
    Ok(format!(
        "Resumed: agent requests are served again. While paused (since {}, by {}), {}{refused} request{} {} \
         refused `paused`; the audit trail has the count.\n",
        crate::text::rfc3339_seconds(pause.at),
        crate::text::for_terminal(&pause.by),
        if counts.capped { "at least " } else { "" },
        if refused == 1 { "" } else { "s" },
        if refused == 1 { "was" } else { "were" },
    ))
}
