//! A copy of every committed audit row for the host's syslog, so a daemon
//! that forwards it off the host keeps a record the host's root cannot
//! quietly change later. Runs as root inside the host helper.
//!
//! Invariants enforced here:
//! - a row is sent only after its transaction committed, never before: a
//!   rolled-back row was never part of the trail;
//! - best effort and never blocking: one datagram per row on a
//!   non-blocking unix socket; no listener, a full queue or any other error
//!   drops the copy silently (the row in the database is the record; the
//!   fail-closed rule is about that row, not this copy);
//! - the message is the row's JSON (metadata only, like the row) with its
//!   hash, under a fixed tag, facility `authpriv` and severity `info`.

use std::os::unix::net::UnixDatagram;
use std::path::Path;

use super::chain::Content;

/// The syslog socket of the shipped helper.
pub const DEV_LOG: &str = "/dev/log";

/// `<86>`: facility authpriv (10) * 8 + severity info (6), RFC 3164.
const PRIORITY: &str = "<86>";

/// The message for one row: priority, tag, the row's canonical JSON with
/// its hash.
pub(super) fn message(content: &Content<'_>, hash: &str) -> String {
    let mut value = serde_json::to_value(content).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("hash".into(), hash.into());
    }
    format!("{PRIORITY}volce-lab-host: {}", crate::control::canonical::to_string(&value).unwrap_or_default())
}

/// Sends each message as one datagram to `socket`, dropping any that
/// cannot be sent at once.
pub(super) fn send(socket: &Path, messages: &[String]) {
    if messages.is_empty() {
        return;
    }
    let Ok(sender) = UnixDatagram::unbound() else { return };
    if sender.set_nonblocking(true).is_err() || sender.connect(socket).is_err() {
        return;
    }
    for message in messages {
        let _ = sender.send(message.as_bytes());
    }
}
