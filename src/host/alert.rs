//! The syslog line of a new plan that waits for approval, for the
//! operator's existing alerting (a `logcheck`, a journal watcher, a forwarder
//! that pages). Runs as root inside the host helper, after the plan is
//! committed.
//!
//! Invariants:
//! - sent after the plan's transaction committed, never before: a plan that
//!   was not stored is never announced;
//! - best effort and never blocking: one datagram on a non-blocking unix
//!   socket; a failure to send never fails the plan, it is recorded on the
//!   plan (`alerted = 0`); `doctor` says once whether the system log
//!   listens at all ([`listening`]), rather than `show` on every plan;
//! - every value the agent chose is escaped as for the terminal, so the
//!   line cannot forge a second line or hide part of itself.

use std::os::unix::net::UnixDatagram;
use std::path::Path;

use crate::store::StoredPlan;
use crate::text::for_terminal as esc;

/// `<85>`: facility authpriv (10) * 8 + severity notice (5), RFC 3164: a
/// person should look, unlike the `info` copies of the audit rows.
const PRIORITY: &str = "<85>";

/// The line for a plan that waits for approval, read at `now`.
pub fn line(stored: &StoredPlan, now: i64) -> String {
    let plan = &stored.plan;
    let app = plan.payload.app().map(|app| format!(" of app {}", esc(app))).unwrap_or_default();
    let left = (plan.expires_at - now).max(0);
    format!(
        "{PRIORITY}volce-lab-host: plan {} ({}{app}) on {} from {} waits for approval, {} min {} s left; \
         review it with: sudo volce-lab-host show {}",
        plan.id,
        plan.action.as_str(),
        esc(&plan.impact.target),
        esc(&plan.requester),
        left / 60,
        left % 60,
        plan.id
    )
}

/// Sends `line` as one datagram to `socket` without waiting for room.
pub fn send(socket: &Path, line: &str) -> std::io::Result<()> {
    let sender = UnixDatagram::unbound()?;
    sender.set_nonblocking(true)?;
    sender.connect(socket)?;
    sender.send(line.as_bytes()).map(|_| ())
}

/// Whether a system logger listens on `socket`: a datagram socket connects
/// to it (nothing is sent). The doctor's question, asked once per run.
pub fn listening(socket: &Path) -> bool {
    UnixDatagram::unbound().and_then(|sender| sender.connect(socket)).is_ok()
}
