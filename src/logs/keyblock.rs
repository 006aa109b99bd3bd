//! Private key blocks printed across lines (`-----BEGIN ... PRIVATE KEY-----`
//! to `-----END ...`), made one marker. Pure; runs as root inside the host
//! helper, on text an application printed.
//!
//! A block holds only what a PEM key can hold: base64 lines, the headers
//! of an encrypted traditional key (`Proc-Type:`, `DEK-Info:`) and blank
//! lines. Lines that cannot belong to it come through where they stand but
//! do not end it: docker merges an application's stdout and stderr by the
//! time it read each line, and a threaded application interleaves its own
//! writers, so a key printed on one stream can have lines of the other
//! between its BEGIN and its body (seen on a real engine: a stdout line
//! between BEGIN and the first base64 line on stderr). The block ends only
//! at its END line or at another BEGIN. A BEGIN without an END (a truncated
//! dump, or an application hiding its own output) therefore hides every
//! later key-shaped line of the tail, never a line with a space or other
//! punctuation: what it costs is one-word lines in base64's alphabet
//! (`ready`) and blank lines after it.

use super::{REDACTED, after_stamp, shape};

fn is_begin_key(line: &str) -> bool {
    line.contains("-----BEGIN") && line.contains("PRIVATE KEY")
}

fn is_end_key(line: &str) -> bool {
    line.contains("-----END") && line.contains("PRIVATE KEY")
}

/// A private key block becomes one marker on its BEGIN line (what came
/// before BEGIN on that line stays): its body and END line are dropped,
/// one redaction per block. An END with no BEGIN before it (the tail began
/// inside a block) becomes the marker, and every line before it that can
/// belong to a block is dropped.
pub(super) fn redact_key_blocks(lines: &mut Vec<String>, redactions: &mut u32) {
    let mut out = Vec::with_capacity(lines.len());
    if let Some(end) = lines.iter().position(|l| is_end_key(l) || is_begin_key(l))
        && !is_begin_key(&lines[end])
    {
        let prefix = lines[end].find("-----END").map(|at| prefix_shape(&lines[end], at)).unwrap_or_default();
        out.extend(lines.drain(..end).filter(|line| !belongs(line, &prefix)));
        lines.remove(0);
        out.push(format!("{REDACTED} (the end of a private key block)"));
        *redactions += 1;
    }
    // The prefix shape of the open block's BEGIN line, while one is open.
    let mut open: Option<String> = None;
    for line in lines.drain(..) {
        if let Some(prefix) = &open {
            if is_end_key(&line) {
                open = None;
                continue;
            }
            if belongs(&line, prefix) {
                continue;
            }
        }
        if let Some(at) = line.find("-----BEGIN")
            && line[at..].contains("PRIVATE KEY")
        {
            out.push(format!("{}{REDACTED} (private key block)", &line[..at]));
            *redactions += 1;
            open = (!line[at..].contains("-----END")).then(|| prefix_shape(&line, at));
            continue;
        }
        // Not key text: it comes through, and an open block stays open.
        out.push(line);
    }
    *lines = out;
}

/// The shape (`super::shape`) of what stands before byte `at` of `line`, after
/// docker's time: a logger's prefix that every line of the block may carry
/// too (`INFO `, `10:00:01 app | `).
fn prefix_shape(line: &str, at: usize) -> String {
    let body = after_stamp(line);
    let skipped = line.len() - body.len();
    body.get(..at.saturating_sub(skipped)).map(shape).unwrap_or_default()
}

/// Whether `line` can be part of a key block whose boundary line had a
/// prefix of `prefix`'s shape: after docker's time, blank, a base64 line or
/// a PEM header, whole or after a prefix of the same shape.
fn belongs(line: &str, prefix: &str) -> bool {
    let body = after_stamp(line);
    let key_text = |text: &str| {
        let text = text.trim();
        is_base64_line(text) || text.starts_with("Proc-Type:") || text.starts_with("DEK-Info:")
    };
    if body.trim().is_empty() || key_text(body) {
        return true;
    }
    let width = prefix.chars().count();
    width > 0
        && body
            .char_indices()
            .nth(width)
            .is_some_and(|(at, _)| shape(&body[..at]) == prefix && key_text(&body[at..]))
}

fn is_base64_line(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
}
