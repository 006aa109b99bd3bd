//! The helper's progress lines: what a long `execute` (deploy, start, restart,
//! update, rollback) has done so far, printed one line per step on stdout before the
//! reply. Written once for both ends: the helper prints [`Progress::to_line`],
//! the workstation reads lines as they arrive ([`LineReader`]) and finds the
//! reply after them ([`reply_bytes`]). Pure: no I/O.
//!
//! ```text
//! {"progress":"pulled"}
//! {"progress":"network"}
//! ...
//! {"operation":"execute","result":{...},"status":"ok"}      <- the reply, always last
//! ```
//!
//! Invariants enforced here:
//! - a progress line carries one word of a closed set ([`Step`], from the
//!   shared vocabulary) and nothing else (`deny_unknown_fields`), so no text
//!   of the server's reaches the client through it, and it can never be
//!   mistaken for a reply (a reply always has `status`);
//! - the helper prints at most [`MAX_PROGRESS_LINES`] of them, each well
//!   under [`MAX_PROGRESS_LINE_BYTES`]. The reader forwards only lines of
//!   exactly that shape, at most that many;
//! - for the reply, only the leading progress lines (at most
//!   [`MAX_PROGRESS_LINES`]) are skipped. Anything else before the reply
//!   (a malformed progress line, one too many) stays in front of it, so the
//!   bytes are not one object and the workstation says `unknown`: a helper
//!   that prints outside the contract is not trusted to have replied.
//!   An older helper prints no progress lines: its stdout is the reply, as it
//!   always was.

use serde::{Deserialize, Serialize};

use crate::vocab::Step;

/// The most progress lines one reply may be preceded by. An update, the
/// longest action, prints six.
pub const MAX_PROGRESS_LINES: usize = 16;
/// The longest line the reader looks at as a progress line (newline
/// included); the longest real one is 32 bytes.
pub const MAX_PROGRESS_LINE_BYTES: usize = 64;

/// One progress line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Progress {
    pub progress: Step,
}

impl Progress {
    /// The line the helper prints, newline included.
    pub fn to_line(self) -> String {
        let mut line = serde_json::to_string(&self).expect("a progress line serializes");
        line.push('\n');
        line
    }

    /// One line (with or without its newline) as a progress line, or `None`.
    pub fn parse_line(line: &[u8]) -> Option<Progress> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        if line.len() >= MAX_PROGRESS_LINE_BYTES || line.first() != Some(&b'{') {
            return None;
        }
        serde_json::from_slice(line).ok()
    }
}

/// The reply after the leading progress lines (see the module's invariants).
pub fn reply_bytes(stdout: &[u8]) -> &[u8] {
    let mut rest = stdout;
    for _ in 0..MAX_PROGRESS_LINES {
        let Some(end) = rest.iter().position(|&b| b == b'\n') else { break };
        if Progress::parse_line(&rest[..end]).is_none() {
            break;
        }
        rest = &rest[end + 1..];
    }
    rest
}

/// Splits stdout into lines as its bytes arrive, and yields the progress
/// lines among them, at most [`MAX_PROGRESS_LINES`]. Other lines (the ssh
/// gate's header, the reply) are passed over; a line longer than
/// [`MAX_PROGRESS_LINE_BYTES`] is not buffered, only skipped to its end.
#[derive(Debug, Default)]
pub struct LineReader {
    line: Vec<u8>,
    too_long: bool,
    seen: usize,
}

impl LineReader {
    /// Feeds one chunk; returns the progress lines it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Step> {
        let mut steps = Vec::new();
        for &byte in chunk {
            if byte == b'\n' {
                if !self.too_long
                    && self.seen < MAX_PROGRESS_LINES
                    && let Some(progress) = Progress::parse_line(&self.line)
                {
                    self.seen += 1;
                    steps.push(progress.progress);
                }
                self.line.clear();
                self.too_long = false;
            } else if self.line.len() < MAX_PROGRESS_LINE_BYTES {
                self.line.push(byte);
            } else {
                self.too_long = true;
            }
        }
        steps
    }
}

#[cfg(test)]
mod tests {
    use strum::VariantArray as _;

    use super::*;
    use crate::wire::Reply;

    #[test]
    fn every_step_round_trips_as_one_short_line() {
        for step in Step::VARIANTS {
            let line = Progress { progress: *step }.to_line();
            assert_eq!(line, format!("{{\"progress\":\"{}\"}}\n", step.as_str()));
            assert!(line.len() < MAX_PROGRESS_LINE_BYTES, "{line}");
            assert_eq!(Progress::parse_line(line.as_bytes()), Some(Progress { progress: *step }));
        }
    }

    #[test]
    fn a_progress_line_is_never_a_reply_and_a_reply_never_progress() {
        let line = Progress { progress: Step::Pulled }.to_line();
        assert!(Reply::parse(line.as_bytes()).is_err());
        let reply = Reply::Ok { operation: crate::wire::Operation::Execute, result: serde_json::json!({}) };
        assert_eq!(Progress::parse_line(reply.to_line().as_bytes()), None);
    }

    #[test]
    fn lines_outside_the_shape_are_not_progress() {
        for bad in [
            &b"{\"progress\":\"rebooted\"}"[..], // a step this build does not know
            b"{\"progress\":\"pulled\",\"note\":\"x\"}", // an extra field
            b"{\"progress\":\"pulled\",\"progress\":\"x\"}", // a repeated key
            b" {\"progress\":\"pulled\"}",       // not starting with the object
            b"[\"pulled\"]",
            b"volce-lab-gate 1 match web-1 vl-agent",
        ] {
            assert_eq!(Progress::parse_line(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn the_reply_is_what_follows_the_leading_progress_lines() {
        let reply = b"{\"status\":\"rejected\",\"code\":\"busy\",\"message\":\"m\"}\n";
        // An older helper: no progress lines, the reply untouched.
        assert_eq!(reply_bytes(reply), reply);
        let mut out = Vec::new();
        for step in Step::VARIANTS {
            out.extend_from_slice(Progress { progress: *step }.to_line().as_bytes());
        }
        out.extend_from_slice(reply);
        assert_eq!(reply_bytes(&out), reply);
        assert!(Reply::parse(reply_bytes(&out)).is_ok());
    }

    #[test]
    fn a_malformed_or_extra_progress_line_stays_in_front_of_the_reply() {
        let reply = b"{\"status\":\"rejected\",\"code\":\"busy\",\"message\":\"m\"}\n";
        let mut malformed = b"{\"progress\":\"pulled\"}\n{\"progress\":1}\n".to_vec();
        malformed.extend_from_slice(reply);
        assert!(Reply::parse(reply_bytes(&malformed)).is_err());
        let mut many =
            Progress { progress: Step::Pulled }.to_line().repeat(MAX_PROGRESS_LINES + 1).into_bytes();
        many.extend_from_slice(reply);
        assert!(Reply::parse(reply_bytes(&many)).is_err());
    }

    #[test]
    fn the_line_reader_yields_progress_split_across_chunks_and_nothing_else() {
        let mut reader = LineReader::default();
        let stream = b"volce-lab-gate 1 match h u\n{\"progress\":\"pul";
        assert_eq!(reader.feed(stream), vec![]);
        assert_eq!(reader.feed(b"led\"}\n{\"progress\":\"network\"}\n"), vec![Step::Pulled, Step::Network]);
        let long = format!("{{\"progress\":\"switched\"{}}}\n", " ".repeat(200));
        assert_eq!(reader.feed(long.as_bytes()), vec![]);
        assert_eq!(reader.feed(b"{\"status\":\"ok\"}\n"), vec![]);
        let many = Progress { progress: Step::HealthCheck }.to_line().repeat(MAX_PROGRESS_LINES + 4);
        assert_eq!(reader.feed(many.as_bytes()).len(), MAX_PROGRESS_LINES - 2);
    }
}
