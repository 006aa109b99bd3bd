//! The failed app container's last lines in a plan's outcome (issue 25):
//! what a deploy, update, start, restart or rollback that was rolled back
//! keeps of why the app did not answer. Pure; runs as root inside the host
//! helper, on the raw bytes of `docker logs` read before the rollback
//! removed or stopped the container.
//!
//! Security invariants enforced here: the lines are [`super::render_knowing`]'s
//! (escapes and hidden characters gone, secrets and the container's own
//! configured values redacted) before they are cut, and cut smaller than
//! `service_logs`' reply: at most [`APP_LOG_LINES`] lines and
//! [`APP_LOG_BYTES`] bytes, the newest that fit, so a plan row and the
//! agent's answer stay small; every [`AppLog`] carries [`super::UNTRUSTED`].

use serde::{Deserialize, Serialize};

/// The most lines an outcome keeps (`docker logs --tail` asks for no more).
pub const APP_LOG_LINES: u16 = 20;
/// The most bytes of those lines (each plus one newline).
pub const APP_LOG_BYTES: usize = 4 * 1024;

/// The failed app container's last lines, safe and bounded; or, when they
/// could not be read before the rollback, `read: false` and no line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppLog {
    /// False when the log could not be read (docker failed, the plan's
    /// time was spent, or the container's configured values could not be
    /// known, without which no line is called safe).
    pub read: bool,
    /// Oldest first, docker's time at the start of each.
    pub lines: Vec<String>,
    /// Older lines were left out to keep within the bounds.
    pub truncated: bool,
    /// How many values were replaced by [`super::REDACTED`].
    pub redactions: u32,
    /// Always [`super::UNTRUSTED`]: the text is what the app printed.
    pub untrusted: String,
}

impl AppLog {
    /// The raw streams made safe with the container's `configured` values
    /// (every value of its environment), then cut to the bounds.
    pub fn render(stdout: &[u8], stderr: &[u8], configured: &[&str]) -> AppLog {
        let safe = super::render_knowing(stdout, stderr, configured);
        let mut kept = Vec::new();
        let mut used = 0;
        for line in safe.lines.iter().rev() {
            if kept.len() == usize::from(APP_LOG_LINES) || used + line.len() + 1 > APP_LOG_BYTES {
                break;
            }
            used += line.len() + 1;
            kept.push(line.clone());
        }
        let truncated = safe.truncated || kept.len() < safe.lines.len();
        kept.reverse();
        AppLog {
            read: true,
            lines: kept,
            truncated,
            redactions: safe.redactions,
            untrusted: super::UNTRUSTED.to_owned(),
        }
    }

    /// The log could not be read: no line, and it says so.
    pub fn unreadable() -> AppLog {
        AppLog {
            read: false,
            lines: Vec::new(),
            truncated: false,
            redactions: 0,
            untrusted: super::UNTRUSTED.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_lines_within_both_bounds_are_kept_redacted_and_marked_untrusted() {
        let many: String = (0..30).map(|n| format!("line {n}\n")).collect();
        let log = AppLog::render(many.as_bytes(), b"", &[]);
        assert_eq!(log.lines.len(), 20);
        assert_eq!((log.lines[0].as_str(), log.truncated), ("line 10", true));
        assert_eq!(log.untrusted, crate::logs::UNTRUSTED);

        let wide = format!("{}\n", "x".repeat(900)).repeat(8);
        let log = AppLog::render(wide.as_bytes(), b"", &[]);
        assert!(log.lines.iter().map(|l| l.len() + 1).sum::<usize>() <= APP_LOG_BYTES);
        assert_eq!((log.lines.len(), log.truncated), (4, true));

        let log = AppLog::render(
            b"db=hunter2-secret-value\n\x1b[31mpassword: x1\n",
            b"",
            &["hunter2-secret-value"],
        );
        assert!(log.lines.iter().all(|l| !l.contains("hunter2") && !l.contains('\u{1b}')), "{log:?}");
        assert!(log.redactions >= 2 && log.read && !log.truncated, "{log:?}");
    }
}
