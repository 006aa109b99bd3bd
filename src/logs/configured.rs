//! The operator's configured values (an app's env file, its container's
//! environment) replaced by [`REDACTED`] wherever they stand in a log
//! line, no shape needed, so `DATABASE_URL`'s whole value goes even where
//! no pattern of `shapes` would see a secret, and in the forms an app
//! prints a value in besides as it is (issue 38). Pure; runs as root in the
//! host helper.
//!
//! What counts as a value, for each value of at least
//! [`MIN_CONFIGURED_CHARS`] characters:
//! - any run of [`RUN_CHARS`] or more of its characters (the whole value
//!   when it is shorter), so halves, prefixes and the middle of a token go
//!   ([`MAX_WINDOWS`] bounds what one very long value adds);
//! - each such run as printed (cleaned as the line was), JSON-escaped,
//!   reversed, percent-encoded (every byte outside `A-Z a-z 0-9 - . _ ~`
//!   as `%XX`, a space also as `+`), as hex, and as base64 in the standard
//!   and the URL-safe alphabet at each of the three byte alignments (below);
//! - ASCII case ignored (an upper-cased value, `%2f`, upper-case hex),
//!   except for base64, whose case is its content;
//! - whitespace ignored, in the line and in the value alike, so a value
//!   spaced out (`s e c r e t`) or printed in groups goes, and a tab in a
//!   value matches the space it became.
//!
//! Base64 of a value inside a longer text (`Authorization: Basic
//! base64("admin:" + password)`): the value's bytes start at some byte
//! offset, and only that offset modulo 3 decides how its bits fall into
//! base64's 6-bit characters. For each of the three alignments the pattern
//! is the characters made of the value's bits alone: those before the first
//! and after the last 6-bit boundary inside it are left out (they mix in
//! the text around it, and at most 4 of the value's bits each). Whatever
//! surrounds a run of 12 bytes, the 15 or 16 characters it alone decides
//! are one of these patterns.
//!
//! Not covered: a run shorter than [`RUN_CHARS`] characters of a value
//! longer than that; characters put between the value's characters other
//! than whitespace (`s-e-c-r-e-t`); upper-casing outside ASCII; any other
//! encoding (base32, the hex of the base64, a cipher). A value that is a
//! location ([`is_location`]: `PATH`, `JAVA_HOME`) is matched whole as
//! printed, as before, not by its runs: every stack trace prints them.
//!
//! How: one Aho-Corasick automaton over every pattern of every value,
//! built once per call, run once over each line with its whitespace taken
//! out, reporting overlapping finds; the finds are mapped back to the
//! line's bytes and merged, one marker each stretch. Linear in the log
//! whatever the values; the automaton's size is linear in the values'.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::ops::Range;

use aho_corasick::AhoCorasick;

use super::{REDACTED, clean};

/// The shortest configured value that is matched. Why a floor: an exact
/// match of `1`, `true`, `info` or a port blanks those words all over the
/// log, and where they are blanked tells the reader the value anyway
/// (`listening on [REDACTED]`); a value that short is a setting, not a
/// secret, and the patterns still catch `PASSWORD=x` shapes. Eight
/// characters is below any credential worth the name (docs/docker-policy.md).
pub const MIN_CONFIGURED_CHARS: usize = 8;

/// A run of this many characters of a value is the value: long enough that
/// a run of a random secret does not turn up by chance, short enough that
/// a secret cut in two halves of a 24-character one goes.
pub(super) const RUN_CHARS: usize = 12;

/// The most runs one value gives patterns for. A value of up to
/// `MAX_WINDOWS + RUN_CHARS - 1` characters (4,107) gives every run; a
/// longer one every `stride`-th (`ceil((chars - 11) / MAX_WINDOWS)`), and
/// its last, so that every run of `RUN_CHARS + stride - 1` characters
/// still holds one and goes, but for at most `stride - 1` characters at
/// either end: the automaton of a megabyte-long value stays a few
/// megabytes.
pub(super) const MAX_WINDOWS: usize = 4096;

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// What confirms a find of the automaton (which ignores ASCII case and
/// sees lines without their whitespace).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Check {
    /// Nothing more: the pattern is meant without case or whitespace.
    Folded,
    /// The very bytes, case included (base64).
    Exact,
    /// The line's own text from the find's first to last character is
    /// this, ASCII case aside: a form whose characters besides whitespace
    /// are fewer than [`MIN_CONFIGURED_CHARS`] (a value of spaced words),
    /// which without its whitespace would turn up by chance.
    Spelled(String),
}

/// The configured values' patterns, built once for a log.
pub(super) struct Configured {
    /// None when no value is long enough.
    automaton: Option<Result<AhoCorasick, ()>>,
    /// Each pattern (without whitespace; lower-cased unless `Exact`) and
    /// its check, by pattern id.
    patterns: Vec<(String, Check)>,
}

impl Configured {
    pub(super) fn new(values: &[&str]) -> Configured {
        let mut set = Patterns::default();
        for value in values.iter().filter(|v| v.chars().count() >= MIN_CONFIGURED_CHARS) {
            let cleaned = clean(value);
            if is_location(value) {
                set.folded(&cleaned);
                set.folded(&json_escaped(value));
                continue;
            }
            for run in windows(&cleaned) {
                set.folded(run);
                set.folded(&run.chars().rev().collect::<String>());
            }
            for run in windows(value) {
                set.folded(&json_escaped(run));
                set.folded(&percent(run, false));
                set.folded(&percent(run, true));
                set.folded(&run.bytes().fold(String::new(), |mut hex, b| {
                    let _ = write!(hex, "{b:02x}");
                    hex
                }));
                for alphabet in [STANDARD, URL_SAFE] {
                    for align in 0..3 {
                        set.exact(base64_at(run.as_bytes(), align, alphabet));
                    }
                }
            }
        }
        let Patterns { patterns, .. } = set;
        let automaton = (!patterns.is_empty()).then(|| {
            // Folded here rather than by the builder's
            // `ascii_case_insensitive`, which made the automaton of a
            // 3,272-character value build about twice as slowly.
            AhoCorasick::new(patterns.iter().map(|(pattern, _)| pattern.to_ascii_lowercase())).map_err(|_| ())
        });
        Configured { automaton, patterns }
    }

    /// Replaces, in each cleaned line, every stretch where a pattern stands
    /// (overlapping finds merged) by [`REDACTED`], one count each. Should
    /// the automaton not build (beyond its size limits, which
    /// [`MAX_WINDOWS`] keeps far off), every line goes whole: no line is
    /// called safe without its values.
    pub(super) fn redact(&self, lines: &mut [String], redactions: &mut u32) {
        let automaton = match &self.automaton {
            None => return,
            Some(Ok(automaton)) => automaton,
            Some(Err(())) => {
                for line in lines.iter_mut().filter(|line| !line.is_empty()) {
                    *line = REDACTED.to_owned();
                    *redactions += 1;
                }
                return;
            }
        };
        let mut squeezed = Squeezed::default();
        for line in lines.iter_mut() {
            squeezed.read(line);
            let mut ranges: Vec<Range<usize>> = Vec::new();
            for found in automaton.find_overlapping_iter(&squeezed.folded[..]) {
                let (pattern, check) = &self.patterns[found.pattern().as_usize()];
                // Patterns and lines are UTF-8, so a find starts and ends on
                // a character boundary, and so does its span in the line.
                // (`replace` would widen one that did not: the safe side.)
                let span = squeezed.source(found.start())..squeezed.source(found.end() - 1) + 1;
                let text = line.get(span.clone());
                let confirmed = match check {
                    Check::Folded => true,
                    Check::Exact => text
                        .is_none_or(|text| text.chars().filter(|c| !c.is_whitespace()).eq(pattern.chars())),
                    Check::Spelled(form) => text.is_none_or(|text| text.eq_ignore_ascii_case(form)),
                };
                if confirmed {
                    ranges.push(span);
                }
            }
            if !ranges.is_empty() {
                *line = super::redact::replace(line, ranges, redactions);
            }
        }
    }
}

/// One line as the automaton reads it: without its whitespace, ASCII
/// lower-cased, and where its bytes were.
#[derive(Default)]
struct Squeezed {
    folded: Vec<u8>,
    /// For each stretch of whitespace left out: the offset in `folded` it
    /// stood before, and the bytes left out up to and with it.
    gaps: Vec<(usize, usize)>,
}

impl Squeezed {
    fn read(&mut self, line: &str) {
        self.folded.clear();
        self.gaps.clear();
        for c in line.chars() {
            if c.is_whitespace() {
                let at = self.folded.len();
                match self.gaps.last_mut() {
                    Some((last, left_out)) if *last == at => *left_out += c.len_utf8(),
                    last => {
                        let before = last.map_or(0, |(_, left_out)| *left_out);
                        self.gaps.push((at, before + c.len_utf8()));
                    }
                }
            } else if c.is_ascii() {
                self.folded.push((c as u8).to_ascii_lowercase());
            } else {
                self.folded.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
            }
        }
    }

    /// The line's offset of byte `at` of `folded`.
    fn source(&self, at: usize) -> usize {
        let gaps = self.gaps.partition_point(|(before, _)| *before <= at);
        at + gaps.checked_sub(1).map_or(0, |last| self.gaps[last].1)
    }
}

/// The patterns so far, each once.
#[derive(Default)]
struct Patterns {
    patterns: Vec<(String, Check)>,
    seen: HashSet<(String, Check)>,
}

impl Patterns {
    /// `form` without its whitespace, ASCII case ignored; spelled out
    /// exactly when too little is left without the whitespace; nothing
    /// when even that is below the floor.
    fn folded(&mut self, form: &str) {
        let squeezed: String = form.chars().filter(|c| !c.is_whitespace()).collect();
        if squeezed.chars().count() >= MIN_CONFIGURED_CHARS {
            self.add(squeezed.to_ascii_lowercase(), Check::Folded);
            return;
        }
        let spelled = form.trim();
        if !squeezed.is_empty() && spelled.chars().count() >= MIN_CONFIGURED_CHARS {
            self.add(squeezed.to_ascii_lowercase(), Check::Spelled(spelled.to_ascii_lowercase()));
        }
    }

    /// `form` byte for byte (it has no whitespace: base64).
    fn exact(&mut self, form: String) {
        if form.len() >= MIN_CONFIGURED_CHARS {
            self.add(form, Check::Exact);
        }
    }

    fn add(&mut self, pattern: String, check: Check) {
        if self.seen.insert((pattern.clone(), check.clone())) {
            self.patterns.push((pattern, check));
        }
    }
}

/// The runs of `text` that stand for it: every [`RUN_CHARS`]-character
/// window (every `stride`-th of a very long text, see [`MAX_WINDOWS`],
/// and the last), or the whole text when it is no longer than that.
fn windows(text: &str) -> Vec<&str> {
    let bounds: Vec<usize> = text.char_indices().map(|(at, _)| at).chain([text.len()]).collect();
    let chars = bounds.len() - 1;
    if chars <= RUN_CHARS {
        return vec![text];
    }
    let count = chars - RUN_CHARS + 1;
    let stride = count.div_ceil(MAX_WINDOWS);
    let mut starts: Vec<usize> = (0..count).step_by(stride).collect();
    if starts.last() != Some(&(count - 1)) {
        starts.push(count - 1);
    }
    starts.into_iter().map(|k| &text[bounds[k]..bounds[k + RUN_CHARS]]).collect()
}

/// A location, not a credential: one absolute path or a `:` list of them,
/// of lower-case letters, digits and `/._+-` (`PATH`, `JAVA_HOME`,
/// `PHP_INI_DIR`). A base64 secret that starts with `/` has capitals.
fn is_location(value: &str) -> bool {
    value.split(':').all(|part| {
        part.starts_with('/')
            && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"/._+-".contains(&b))
    })
}

/// `text` as inside a JSON string (a JSON logger's `"a\"b"`).
fn json_escaped(text: &str) -> String {
    let json = serde_json::to_string(text).unwrap_or_default();
    json.get(1..json.len().saturating_sub(1)).unwrap_or_default().to_owned()
}

/// `text` percent-encoded: every byte but `A-Z a-z 0-9 - . _ ~` as `%XX`
/// (a space as `+` in a form's encoding).
fn percent(text: &str, form: bool) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(char::from(b)),
            b' ' if form => out.push('+'),
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

/// The base64 characters that `bytes` alone decide when they stand
/// `align` bytes past a multiple of 3 in the encoded text (module header).
fn base64_at(bytes: &[u8], align: usize, alphabet: &[u8; 64]) -> String {
    let mut stream = vec![0u8; align];
    stream.extend_from_slice(bytes);
    let end = 8 * stream.len();
    let mut out = String::new();
    let mut bit = (8 * align).div_ceil(6) * 6;
    while bit + 6 <= end {
        let at = bit / 8;
        let pair = u16::from(stream[at]) << 8 | u16::from(stream.get(at + 1).copied().unwrap_or(0));
        out.push(char::from(alphabet[usize::from(pair >> (10 - bit % 8) & 63)]));
        bit += 6;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The three alignments of one value, against a whole encoding.
    #[test]
    fn the_characters_a_value_alone_decides_at_each_alignment() {
        // base64("ab" + "hello world") = "YWJoZWxsbyB3b3JsZA==": bits 16..104
        // are the value's; characters 3 (bits 18..24) to 16 (bits 96..102).
        assert_eq!(base64_at(b"hello world", 2, STANDARD), "oZWxsbyB3b3JsZ");
        // base64("hello world") = "aGVsbG8gd29ybGQ=": bits 0..88, characters
        // 0 to 13 (bits 78..84); the 15th mixes in what follows.
        assert_eq!(base64_at(b"hello world", 0, STANDARD), "aGVsbG8gd29ybG");
        // base64("a" + "hello world") = "YWhlbGxvIHdvcmxk": bits 8..96,
        // characters 2 (bits 12..18) to 15 (bits 90..96).
        assert_eq!(base64_at(b"hello world", 1, STANDARD), "hlbGxvIHdvcmxk");
        assert_eq!(base64_at(&[0xfb, 0xff, 0xbf], 0, URL_SAFE), "-_-_");
    }

    #[test]
    fn windows_cover_every_run_and_thin_out_only_past_the_bound() {
        assert_eq!(windows("short"), ["short"]);
        assert_eq!(windows("abcdefghijklm"), ["abcdefghijkl", "bcdefghijklm"]);
        assert_eq!(windows("äbcdefghijklm"), ["äbcdefghijkl", "bcdefghijklm"]);
        let long = "x".repeat(MAX_WINDOWS + RUN_CHARS);
        assert_eq!(windows(&long).len(), MAX_WINDOWS / 2 + 1);
        assert!(is_location("/usr/local/sbin:/usr/bin") && is_location("/opt/java/openjdk-17"));
        assert!(!is_location("/9j/4AAQSkZJRg") && !is_location("relative/path") && !is_location("/a:b"));
    }
}
