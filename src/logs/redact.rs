//! Secret-shaped values of log lines replaced by [`REDACTED`]: the scanners
//! of `super::shapes` run on every normalised view of a line
//! (`super::normal`), and what they find is mapped back to the line as it
//! was printed. Pure; runs as root inside the host helper, on text an
//! application printed.

use std::ops::Range;

use super::shapes::{self, Next};
use super::{REDACTED, after_stamp, normal, shape};

/// How deep a base64 token inside decoded base64 is still decoded.
const MAX_BASE64_DEPTH: usize = 2;

/// What a line's scan found: line ranges to redact and, when the line ended
/// with a key whose value is still to come, what comes and where (a line
/// byte offset) that key starts.
struct Found {
    ranges: Vec<Range<usize>>,
    next: Option<(Next, usize)>,
}

/// Replaces the secret-looking values of one cleaned line by [`REDACTED`]
/// and counts them (one per merged stretch). Each view of the line
/// (`normal::views`: NFKC, unescaped, percent-decoded) is searched for:
/// - `NAME=value`, `NAME: value`, `"NAME": "value"`, `NAME => value`,
///   `NAME := value` where NAME is in `shapes::ALWAYS` or `ALWAYS_WORD`
///   (`DB_PASSWORD`, `api_key`, `DB_PASS`, `PWD`, `pw`); an
///   `Authorization:` value keeps its scheme word (`Bearer`, `Basic`); a
///   quoted value runs to its closing quote, past escaped ones;
/// - `NAME value` for the names in `shapes::SPACED` (`PASSWORD hunter2`),
///   unless the value is a word of prose (`password reset`);
/// - after a NAME ending in key or token (`=`, `:` or a space), a value of
///   20 or more credential characters that looks random;
/// - `Bearer <16 or more credential characters>` anywhere;
/// - AWS access key ids: `AKIA` or `ASIA` and 16 of `[0-9A-Z]`, standing alone;
/// - the password of a URL (`postgres://app:PASSWORD@db`), or its whole
///   user part when that looks random (`https://TOKEN@github.com`);
/// - a private key's BEGIN line and all after it, when only a decoded view
///   spells it (`-----BEGIN%20PRIVATE%20KEY`);
/// - a base64 token whose decoded text holds any of the above: the whole
///   token goes, because decoded bytes do not map back to single
///   characters (the safe side).
pub fn redact_line(line: &str, redactions: &mut u32) -> String {
    replace(line, scan(line, 0).ranges, redactions)
}

/// A key whose value is on the following line(s).
struct Pending {
    next: Next,
    /// The shape (`super::shape`) of what stood before the key on its line
    /// after docker's time, less trailing spaces: a logger's prefix that
    /// the value's line carries too.
    prefix: String,
    /// The spaces between that prefix and the key.
    indent: usize,
}

/// Lines in order, each redacted, and a key's value on the next line
/// (`password:` then `hunter2`), or a YAML block after it (`password: |`),
/// redacted whole: such a line's content after docker's time, the key
/// line's prefix and the indentation becomes [`REDACTED`]. Where indentation
/// cannot be compared (the next line lacks the key line's prefix, as after
/// a prompt `Enter password:`), the next line is the value: the safe side.
pub(super) fn redact_lines(lines: &[String], redactions: &mut u32) -> Vec<String> {
    let mut out = Vec::with_capacity(lines.len());
    let mut pending: Option<Pending> = None;
    for line in lines {
        if let Some(key) = pending.take() {
            let body = after_stamp(line);
            let width = key.prefix.chars().count();
            let lead = body.char_indices().nth(width).map_or(body.len(), |(at, _)| at);
            let prefixed = shape(&body[..lead]) == key.prefix;
            let rest = if prefixed { &body[lead..] } else { body };
            let depth = rest.len() - rest.trim_start_matches(' ').len();
            let blank = rest.trim().is_empty();
            // A value is indented at least as deep as its key: a shallower
            // line means the key's mapping ended (YAML), and a block holds
            // only deeper lines.
            let continued = match key.next {
                Next::Value => !blank && (!prefixed || depth >= key.indent),
                Next::Block => prefixed && (blank || depth > key.indent),
            };
            if continued {
                let content = rest.trim_start_matches(' ');
                if blank || content.starts_with(REDACTED) {
                    out.push(line.clone());
                } else {
                    out.push(format!("{}{REDACTED}", &line[..line.len() - content.len()]));
                    *redactions += 1;
                }
                if key.next == Next::Block {
                    pending = Some(key);
                }
                continue;
            }
        }
        let found = scan(line, 0);
        out.push(replace(line, found.ranges, redactions));
        pending = found.next.map(|(next, at)| {
            let body = after_stamp(line);
            let lead = &body[..at.saturating_sub(line.len() - body.len()).min(body.len())];
            let prefix = lead.trim_end_matches(' ');
            Pending { next, prefix: shape(prefix), indent: lead.len() - prefix.len() }
        });
    }
    out
}

/// `line` with each of `ranges` (merged where they overlap) replaced by
/// [`REDACTED`], one count each.
pub(super) fn replace(line: &str, mut ranges: Vec<Range<usize>>, redactions: &mut u32) -> String {
    ranges.retain(|r| !r.is_empty());
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match merged.last_mut() {
            Some(last) if range.start < last.end => last.end = last.end.max(range.end),
            _ => merged.push(range),
        }
    }
    let mut out = String::with_capacity(line.len());
    let mut at = 0;
    for Range { mut start, mut end } in merged {
        // Every range ends on a character boundary (views map whole
        // characters); widening keeps slicing panic-free regardless.
        start = start.min(line.len());
        while !line.is_char_boundary(start) {
            start -= 1;
        }
        end = end.min(line.len());
        while !line.is_char_boundary(end) {
            end += 1;
        }
        out.push_str(&line[at..start.max(at)]);
        out.push_str(REDACTED);
        *redactions += 1;
        at = end.max(at);
    }
    out.push_str(&line[at..]);
    out
}

/// Every view of `line` scanned, the finds mapped back to `line`.
fn scan(line: &str, depth: usize) -> Found {
    let Some(views) = normal::views(line) else {
        return Found { ranges: std::iter::once(0..line.len()).collect(), next: None };
    };
    let mut found = Found { ranges: Vec::new(), next: None };
    for view in &views {
        let mut ranges = Vec::new();
        let next = shapes::key_values(&view.text, &mut ranges);
        if found.next.is_none() {
            found.next = next.map(|(next, at)| (next, view.source(at..at + 1).start));
        }
        shapes::url_credentials(&view.text, &mut ranges);
        shapes::encoded_key_block(view, line, &mut ranges);
        if depth < MAX_BASE64_DEPTH {
            let holds_secret = |text: &str| !scan(text, depth + 1).ranges.is_empty();
            shapes::base64_tokens(&view.text, holds_secret, &mut ranges);
        }
        found.ranges.extend(ranges.into_iter().map(|r| view.source(r)));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins the widening loops of `replace` (issue 38, mutation testing):
    /// no view yields a range inside a character today, so only a direct
    /// call shows that such a range grows to the whole character instead
    /// of panicking or leaving half of it.
    #[test]
    fn a_range_inside_a_multi_byte_character_widens_to_the_whole_character() {
        // "é" is bytes 1..3 of "aé b".
        let mut n = 0;
        let mut one = |range: Range<usize>| replace("aé b", vec![range], &mut n);
        assert_eq!(one(2..3), format!("a{REDACTED} b"));
        assert_eq!(one(0..2), format!("{REDACTED} b"));
        assert_eq!(one(2..2), "aé b", "an empty range redacts nothing");
        assert_eq!(n, 2);
    }
}
