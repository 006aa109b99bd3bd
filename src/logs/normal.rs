//! The normalised views of one cleaned log line that redaction matches on,
//! each able to say which bytes of the line a stretch of it came from. Pure;
//! runs as root inside the host helper, on text an application printed.
//!
//! A secret can be spelled in ways that do not look like `password=...`
//! until they are read the way a program or a person would read them:
//! fullwidth or other compatibility letters (`ｐａｓｓｗｏｒｄ`), JSON and
//! backslash escapes (`{\"password\":...}`, `\u003d`, `\x77`), percent
//! escapes (`pass%77ord=`, `password%3D`), and these nested inside each
//! other. [`views`] gives the line itself (NFKC) and then one view per
//! round of decoding, until a round changes nothing ([`MAX_ROUNDS`] at
//! most). Matching runs on every view, and what it finds is mapped back
//! through [`View::source`] to the line, which is what leaves: the reader
//! sees the application's own bytes with the secret replaced, never our
//! decoding of them.
//!
//! The mapping is sound because every view character comes from one
//! contiguous stretch of the line (one character, one escape, one run of
//! byte escapes that form one UTF-8 character) and views keep the line's
//! order; a stretch of a view maps to the smallest stretch of the line that
//! holds every source of it, so a match is never shrunk by the mapping.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// Decoding rounds after the first view: enough for an escape inside an
/// escape inside an escape (a JSON string logged inside JSON, inside a
/// percent-encoded query), few enough that a line costs a bounded multiple
/// of its length.
const MAX_ROUNDS: usize = 3;

/// A line as matching sees it.
pub(super) struct View {
    pub text: String,
    /// For each byte of `text`, the byte range of the line its character
    /// came from; `None` when `text` is the line itself.
    origin: Option<Vec<(u32, u32)>>,
}

impl View {
    /// The byte range of the line that `range` of this view came from.
    pub fn source(&self, range: std::ops::Range<usize>) -> std::ops::Range<usize> {
        match &self.origin {
            None => range,
            Some(_) if range.is_empty() => range,
            Some(origin) => origin[range.start].0 as usize..origin[range.end - 1].1 as usize,
        }
    }

    fn origin_of(&self, byte: usize) -> (u32, u32) {
        match &self.origin {
            // Identity views are only built for lines under u32::MAX bytes.
            None => (byte as u32, byte as u32 + 1),
            Some(origin) => origin[byte],
        }
    }
}

/// Appends characters to a new view, each with the line range it came from.
struct Builder {
    text: String,
    origin: Vec<(u32, u32)>,
}

impl Builder {
    fn with_capacity(len: usize) -> Self {
        Builder { text: String::with_capacity(len), origin: Vec::with_capacity(len) }
    }

    fn push(&mut self, c: char, from: (u32, u32)) {
        self.text.push(c);
        self.origin.extend(std::iter::repeat_n(from, c.len_utf8()));
    }

    fn view(self) -> View {
        View { text: self.text, origin: Some(self.origin) }
    }
}

/// The views of `line`: NFKC of the line, then NFKC of each decoding round
/// that changed something. `None` when the line is too long to map
/// (4 GiB; `docker logs` output is capped far below that): the caller then
/// redacts the whole line, the safe side.
pub(super) fn views(line: &str) -> Option<Vec<View>> {
    u32::try_from(line.len()).ok()?;
    let identity = View { text: line.to_owned(), origin: None };
    let mut last = nfkc(&identity).unwrap_or(identity);
    let mut out = Vec::new();
    for _ in 0..MAX_ROUNDS {
        let Some(decoded) = decode(&last) else { break };
        out.push(std::mem::replace(&mut last, nfkc(&decoded).unwrap_or(decoded)));
    }
    out.push(last);
    Some(out)
}

/// NFKC, one character at a time so each result keeps its one source, with
/// combining marks dropped: `password\u{301}` is still the word password to
/// a reader. `None` when the view is unchanged (ASCII always is). This
/// differs from whole-text NFKC only where a mark would compose with the
/// letter before it: whole-text NFKC makes that one non-ASCII letter (`e`
/// and U+0301 are `é`), this keeps the ASCII letter, so a mark cannot take
/// a key's last letter out of the (ASCII) scanners' sight.
fn nfkc(view: &View) -> Option<View> {
    if view.text.is_ascii() {
        return None;
    }
    let mut out = Builder::with_capacity(view.text.len());
    for (at, c) in view.text.char_indices() {
        let from = span(view, at, at + c.len_utf8());
        if c.is_ascii() {
            out.push(c, from);
            continue;
        }
        for d in std::iter::once(c).nfkc() {
            if !is_combining_mark(d) {
                out.push(d, from);
            }
        }
    }
    (out.text != view.text).then(|| out.view())
}

/// The line range of the view's bytes `start..end`.
fn span(view: &View, start: usize, end: usize) -> (u32, u32) {
    (view.origin_of(start).0, view.origin_of(end - 1).1)
}

/// One round of unescaping: `\"`, `\\`, `\/`, `\'`; `\n`, `\r`, `\t`, `\b`,
/// `\f` as a space (a separator to matching); `\uXXXX` (with surrogate
/// pairs); runs of `\xNN` and of `%NN` as the UTF-8 text they spell. An
/// escape that spells nothing valid stays as written. `None` when nothing
/// was decoded.
fn decode(view: &View) -> Option<View> {
    let text = &view.text;
    if !text.contains(['\\', '%']) {
        return None;
    }
    let bytes = text.as_bytes();
    let mut out = Builder::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let simple = match (bytes[i], bytes.get(i + 1)) {
            (b'\\', Some(&c @ (b'"' | b'\\' | b'/' | b'\''))) => Some(char::from(c)),
            (b'\\', Some(b'n' | b'r' | b't' | b'b' | b'f')) => Some(' '),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c, span(view, i, i + 2));
            i += 2;
            continue;
        }
        if bytes[i] == b'\\'
            && let Some((c, len)) = unicode_escape(&bytes[i..])
        {
            out.push(c, span(view, i, i + len));
            i += len;
            continue;
        }
        let escape = match bytes[i] {
            b'\\' if bytes.get(i + 1) == Some(&b'x') => Some((b"\\x".as_slice(), 4)),
            b'%' => Some((b"%".as_slice(), 3)),
            _ => None,
        };
        if let Some((lead, len)) = escape
            && byte_escape(bytes, i, lead, len).is_some()
        {
            i = byte_run(view, &mut out, i, lead, len);
            continue;
        }
        let c = text[i..].chars().next()?;
        out.push(c, span(view, i, i + c.len_utf8()));
        i += c.len_utf8();
    }
    (out.text != *text).then(|| out.view())
}

fn hex(digits: &[u8]) -> Option<u32> {
    if !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// `\uXXXX` at the start of `bytes`, or a surrogate pair of them: the
/// character and how many bytes spelled it.
fn unicode_escape(bytes: &[u8]) -> Option<(char, usize)> {
    let unit = |at: usize| match bytes.get(at..at + 2)? {
        b"\\u" => hex(bytes.get(at + 2..at + 6)?),
        _ => None,
    };
    let first = unit(0)?;
    if (0xD800..0xDC00).contains(&first) {
        let second = unit(6).filter(|s| (0xDC00..0xE000).contains(s))?;
        let c = char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))?;
        return Some((c, 12));
    }
    Some((char::from_u32(first)?, 6))
}

/// The byte a `lead` + two hex digits escape at `at` spells.
fn byte_escape(bytes: &[u8], at: usize, lead: &[u8], len: usize) -> Option<u8> {
    if bytes.get(at..at + lead.len())? != lead {
        return None;
    }
    u8::try_from(hex(bytes.get(at + lead.len()..at + len)?)?).ok()
}

/// Decodes the run of byte escapes starting at `at` into `out`: each valid
/// UTF-8 character they spell becomes that character, each byte that
/// starts none stays as its escape text. Returns where the run ends.
fn byte_run(view: &View, out: &mut Builder, at: usize, lead: &[u8], len: usize) -> usize {
    let bytes = view.text.as_bytes();
    let mut run = Vec::new();
    let mut i = at;
    while let Some(b) = byte_escape(bytes, i, lead, len) {
        run.push(b);
        i += len;
    }
    let mut k = 0;
    while k < run.len() {
        let width = match run[k] {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            _ => 4,
        };
        let start = at + k * len;
        if let Some(c) = run.get(k..k + width).and_then(|s| std::str::from_utf8(s).ok()?.chars().next()) {
            out.push(c, span(view, start, start + width * len));
            k += width;
        } else {
            for (offset, c) in view.text[start..start + len].char_indices() {
                out.push(c, span(view, start + offset, start + offset + 1));
            }
            k += 1;
        }
    }
    i
}

/// The text a token of base64 or base64url spells, when it spells text
/// (valid UTF-8 without control characters other than tab and newline):
/// what a secret base64-encoded into a log line looks like once decoded.
pub(super) fn base64_text(token: &str) -> Option<String> {
    let body = token.trim_end_matches('=');
    if body.len() % 4 == 1 || token.len() - body.len() > 2 {
        return None;
    }
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for b in body.bytes() {
        let value = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(value);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    let text = String::from_utf8(out).ok()?;
    text.chars().all(|c| !c.is_control() || c == '\t' || c == '\n').then_some(text)
}
