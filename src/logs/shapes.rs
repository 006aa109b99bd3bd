//! The scanners that find secret-shaped values in one normalised view of a
//! log line (`super::normal`), as byte ranges of that view; `super::redact`
//! runs them on every view and maps what they find back to the line. Pure;
//! runs as root inside the host helper, on text an application printed.
//!
//! Written by hand, without a regex crate: the shapes are few and simple,
//! each is a small scanner tested with its near-misses (`super::tests`).

use std::ops::Range;

use super::REDACTED;
use super::normal::{self, View};

/// What the line after a scanned one holds: a key at the end of a line
/// ([`key_values`]) leaves its value to the lines after it (`super::redact`
/// carries it there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// The value of a key this line ended with (`password:`).
    Value,
    /// A YAML block scalar (`password: |`): every following line indented
    /// deeper than the key.
    Block,
}

/// The shortest base64 token worth decoding: `pw=x` is eight characters.
const MIN_BASE64_CHARS: usize = 8;

/// Identifier characters of a key name (`DB_PASSWORD`, `X-Auth-Token`, `api.key`).
fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// Characters of an opaque credential (base64, base64url, JWT, hex).
fn is_credential(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-' | b'.' | b'~')
}

/// Key names whose value is always a secret, whatever it looks like: the
/// name, lowercased without `_`, `-` and `.`, ends in one of these
/// (`DB_PASSWORD`, `X-Api-Key`, `aws_secret_access_key`).
const ALWAYS: [&str; 10] = [
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "authorization",
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
];
/// Short names that are a secret's only as the name's whole last word
/// (`DB_PASS`, `dbPass`, `PWD`, `user.pw`): inside a word they are
/// something else (`bypass`, `passenger`). `PWD` is also the shell's
/// working directory, and `PWD=/srv/app` is redacted too: the cost is one
/// path the agent can learn otherwise, the alternative is guessing which
/// values are paths.
const ALWAYS_WORD: [&str; 3] = ["pass", "pwd", "pw"];
/// Names whose value may follow after a space alone (`PASSWORD hunter2`),
/// when it is not a word of prose ([`prose`]): `password reset` stays.
/// Not `pass` (`PASS src/app.test.js` is a test runner) nor `token`
/// (covered by [`IF_RANDOM`]).
const SPACED: [&str; 3] = ["password", "passwd", "passphrase"];
/// Key names whose value is redacted when it looks random ([`high_entropy`]).
const IF_RANDOM: [&str; 2] = ["key", "token"];

/// The letters a key word above (or `bearer`) ends in.
const LAST_LETTERS: [bool; 128] = {
    let lists: [&[&str]; 5] = [&ALWAYS, &ALWAYS_WORD, &SPACED, &IF_RANDOM, &["bearer"]];
    let mut set = [false; 128];
    let mut l = 0;
    while l < lists.len() {
        let mut w = 0;
        while w < lists[l].len() {
            let word = lists[l][w].as_bytes();
            set[word[word.len() - 1] as usize] = true;
            w += 1;
        }
        l += 1;
    }
    set
};

/// The last word of a key name: after its last `_`, `-` or `.`, and after
/// a camelCase boundary (`dbPass` -> `Pass`, `XMLPass` -> `Pass`, `PWD`).
fn last_word(name: &str) -> &str {
    let tail = name.rsplit(['_', '-', '.']).next().unwrap_or(name);
    let b = tail.as_bytes();
    let start = (1..b.len())
        .rev()
        .find(|&k| {
            b[k].is_ascii_uppercase()
                && (!b[k - 1].is_ascii_uppercase() || b.get(k + 1).is_some_and(u8::is_ascii_lowercase))
        })
        .unwrap_or(0);
    &tail[start..]
}

/// A word of prose after a space, not a value: letters only, lower case or
/// capitalised, with sentence punctuation around it (`reset`, `Changed.`).
fn prose(value: &str) -> bool {
    let word = value.trim_matches(['.', ',', '!', '?', ':', '(', ')', '[', ']']);
    let mut letters = word.bytes();
    letters.next().is_none_or(|b| b.is_ascii_alphabetic()) && letters.all(|b| b.is_ascii_lowercase())
}

/// The key-value scanner (see `super::redact_line`). Returns, when the
/// text ended with a secret's key and a colon (its value still to come),
/// what comes next and where that key starts (its opening quote included).
pub(super) fn key_values(text: &str, ranges: &mut Vec<Range<usize>>) -> Option<(Next, usize)> {
    let bytes = text.as_bytes();
    let mut next = None;
    let mut compact = String::new();
    let mut i = 0;
    while i < bytes.len() {
        if !is_ident(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_ident(bytes[i]) {
            i += 1;
        }
        // Identifier runs are maximal, so the key id stands alone.
        if let Some(range) = aws_key(bytes, start, i) {
            ranges.push(range);
            continue;
        }
        let Some(kind) = NameKind::of(&text[start..i], &mut compact) else { continue };
        if kind.bearer
            && let Some(range) = after_spaces_credential(bytes, i, 16)
        {
            ranges.push(range);
            continue;
        }
        if !kind.always && !kind.if_random {
            continue;
        }
        let Some(after) = After::name(bytes, start, i) else { continue };
        if kind.always && after.colon {
            // `password:` ends the line: the value is on the next (a
            // prompt, YAML, pretty JSON). `password=` is an empty value.
            let key = start - usize::from(start > 0 && matches!(bytes[start - 1], b'"' | b'\''));
            match text[after.value..].trim_end() {
                "" => next = Some((Next::Value, key)),
                "|" | "|-" | "|+" | ">" | ">-" | ">+" => {
                    next = Some((Next::Block, key));
                    continue;
                }
                _ => {}
            }
        }
        if let Some(range) = secret_value(text, i, &kind, &after) {
            i = range.end;
            ranges.push(range);
        }
    }
    next
}

/// What the words of a name make of it as a key.
struct NameKind {
    /// Its value is a secret whatever it looks like (`DB_PASSWORD`).
    always: bool,
    /// Its value may follow after a space alone (`PASSWORD hunter2`).
    spaced: bool,
    /// Its value is a secret when it looks random (`key`, `token`).
    if_random: bool,
    /// `Bearer`: a credential follows.
    bearer: bool,
    /// `Authorization`: its value keeps its scheme word.
    authorization: bool,
}

impl NameKind {
    /// `None` for the many names that end in no letter any key word ends
    /// in: skipped before the compact form is built (a long line has many
    /// names). `compact` is a buffer kept across names.
    fn of(name: &str, compact: &mut String) -> Option<NameKind> {
        let last = name.bytes().rev().find(u8::is_ascii_alphanumeric).unwrap_or(0);
        if !LAST_LETTERS[usize::from(last.to_ascii_lowercase() & 0x7f)] {
            return None;
        }
        compact.clear();
        compact.extend(
            name.bytes().filter(u8::is_ascii_alphanumeric).map(|b| char::from(b.to_ascii_lowercase())),
        );
        let ends = |words: &[&str]| words.iter().any(|w| compact.ends_with(w));
        Some(NameKind {
            always: ends(&ALWAYS) || ALWAYS_WORD.iter().any(|w| last_word(name).eq_ignore_ascii_case(w)),
            spaced: ends(&SPACED),
            if_random: ends(&IF_RANDOM),
            bearer: compact == "bearer",
            authorization: compact.ends_with("authorization"),
        })
    }
}

/// What follows a key's name: where its value starts and what separated
/// them.
struct After {
    /// The byte the value starts at (its opening quote, if any).
    value: usize,
    /// The separator's length: 0 (spaces only), 1 (`=`, `:`, a tag's `>`)
    /// or 2 (`=>`, `:=`).
    sep: usize,
    /// The separator is a single `:`.
    colon: bool,
    /// `<password>value</password>`: the tag's `>` separates, and the
    /// value runs to the next `<` as if that were its closing quote.
    xml: bool,
}

impl After {
    /// After the name at `start..end`: an optional closing quote, spaces, a
    /// separator. `None` when nothing at all follows the name.
    fn name(bytes: &[u8], start: usize, end: usize) -> Option<After> {
        let mut j = end;
        if j < bytes.len() && matches!(bytes[j], b'"' | b'\'') {
            j += 1;
        }
        j = skip_spaces(bytes, j);
        let xml = j == end && start > 0 && bytes[start - 1] == b'<' && bytes.get(j) == Some(&b'>');
        let sep = match (bytes.get(j), bytes.get(j + 1)) {
            _ if xml => 1,
            (Some(b'='), Some(b'>')) | (Some(b':'), Some(b'=')) => 2,
            (Some(b'=' | b':'), _) => 1,
            _ => 0,
        };
        let colon = sep == 1 && bytes[j] == b':';
        if sep > 0 {
            j = skip_spaces(bytes, j + sep);
        } else if j == end {
            return None;
        }
        Some(After { value: j, sep, colon, xml })
    }
}

/// The value after a key that is to be redacted, if it is one (the name
/// ends at `name_end`).
fn secret_value(text: &str, name_end: usize, kind: &NameKind, after: &After) -> Option<Range<usize>> {
    let bytes = text.as_bytes();
    let mut j = after.value;
    let quote = (j < bytes.len() && matches!(bytes[j], b'"' | b'\'')).then(|| bytes[j]);
    if quote.is_some() {
        j += 1;
    }
    let quote = if after.xml { Some(b'<') } else { quote };
    if kind.authorization && after.sep > 0 {
        // Keep the scheme word: `Authorization: Bearer [REDACTED]`.
        let word = bytes[j..].iter().take_while(|b| b.is_ascii_alphabetic()).count();
        if word > 0 && bytes.get(j + word) == Some(&b' ') {
            j += word + 1;
        }
    }
    // Where only a random-looking value would be redacted, its end is
    // the first non-credential character: an unclosed quote after every
    // `key` of a long line must not make each one scan to the end.
    let only_random = !(kind.spaced || (kind.always && after.sep > 0));
    let end = value_end(text, j, quote, only_random);
    let value = &text[j..end];
    if value.is_empty() || value == REDACTED {
        return None;
    }
    // The space must follow the name itself: in `"bad password"}` the
    // name's closing quote ends a sentence, not a key.
    let spaced_value = kind.spaced
        && after.sep == 0
        && bytes.get(name_end) == Some(&b' ')
        && (quote.is_some() || !prose(value));
    let secret = (kind.always && after.sep > 0) || spaced_value || (kind.if_random && high_entropy(value));
    secret.then_some(j..end)
}

fn skip_spaces(bytes: &[u8], from: usize) -> usize {
    from + bytes[from.min(bytes.len())..].iter().take_while(|b| **b == b' ').count()
}

/// Where a value starting at `from` ends: at its closing quote (an escaped
/// quote, `\"`, does not close it), or unquoted at a space or `, ; & " '`;
/// with `credential`, also at the first non-credential character.
fn value_end(text: &str, from: usize, quote: Option<u8>, credential: bool) -> usize {
    let bytes = text.as_bytes();
    let mut end = from;
    while end < bytes.len() {
        if credential && !is_credential(bytes[end]) {
            break;
        }
        match quote {
            Some(q) if bytes[end] == q => break,
            Some(_) if bytes[end] == b'\\' => {
                end += 1;
                end += text.get(end..).and_then(|rest| rest.chars().next()).map_or(0, char::len_utf8);
            }
            Some(_) => end += text[end..].chars().next().map_or(1, char::len_utf8),
            None if bytes[end].is_ascii_whitespace()
                || matches!(bytes[end], b',' | b';' | b'&' | b'"' | b'\'') =>
            {
                break;
            }
            None => end += 1,
        }
    }
    end.min(bytes.len())
}

/// Long, mixed and random-looking: a generated credential, not a word.
fn high_entropy(value: &str) -> bool {
    let bytes = value.as_bytes();
    if bytes.len() < 20 || !bytes.iter().all(|b| is_credential(*b)) {
        return false;
    }
    let lower = bytes.iter().any(u8::is_ascii_lowercase);
    let upper = bytes.iter().any(u8::is_ascii_uppercase);
    let digit = bytes.iter().any(u8::is_ascii_digit);
    let classes = [lower, upper, digit].iter().filter(|c| **c).count();
    let mut counts = [0u32; 256];
    for b in bytes {
        counts[usize::from(*b)] += 1;
    }
    let n = bytes.len() as f64;
    let entropy: f64 =
        counts.iter().filter(|c| **c > 0).map(|c| f64::from(*c) / n).map(|p| -p * p.log2()).sum();
    digit && (lower || upper) && entropy >= 3.0 && (classes == 3 || bytes.len() >= 32)
}

/// `AKIA`/`ASIA` and 16 of `[0-9A-Z]`, the whole identifier run.
fn aws_key(bytes: &[u8], start: usize, end: usize) -> Option<Range<usize>> {
    let word = &bytes[start..end];
    let shaped = word.len() == 20
        && (word.starts_with(b"AKIA") || word.starts_with(b"ASIA"))
        && word[4..].iter().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    shaped.then_some(start..end)
}

/// One or more spaces at `from`, then at least `min` credential characters.
fn after_spaces_credential(bytes: &[u8], from: usize, min: usize) -> Option<Range<usize>> {
    let start = skip_spaces(bytes, from);
    if start == from {
        return None;
    }
    let len = bytes[start..].iter().take_while(|b| is_credential(**b)).count();
    (len >= min).then_some(start..start + len)
}

/// `scheme://user:PASSWORD@host`: the password (the user stays, it names
/// the account); `scheme://USER@host`: the user part when it looks random
/// (a token used as the user). The authority ends at the first `/` (or
/// space or quote), so `https://example.com/a@b` has no user part; not at
/// `?` or `#`, which hand-written connection strings leave unescaped in
/// passwords (`app:s3c#?x@db`); its last `@` ends the user part, so an
/// unescaped `@` in a password (`root:p@ss@db`) stays inside too.
pub(super) fn url_credentials(text: &str, ranges: &mut Vec<Range<usize>>) {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(found) = text[from..].find("://") {
        let scheme_end = from + found;
        let authority = scheme_end + 3;
        from = authority;
        let schemed = scheme_end > 0 && is_ident(bytes[scheme_end - 1]);
        let len = bytes[authority..]
            .iter()
            .take_while(|b| {
                !b.is_ascii_whitespace() && !matches!(b, b'/' | b'"' | b'\'' | b'<' | b'>' | b'\\' | b'`')
            })
            .count();
        let Some(at_sign) = text[authority..authority + len].rfind('@') else { continue };
        if !schemed {
            continue;
        }
        let user = &text[authority..authority + at_sign];
        match user.find(':') {
            Some(colon) if !matches!(&user[colon + 1..], "" | REDACTED) => {
                ranges.push(authority + colon + 1..authority + at_sign);
            }
            None if high_entropy(user) => ranges.push(authority..authority + at_sign),
            _ => {}
        }
    }
}

/// A private key's BEGIN line spelled only in a decoded view: the rest of
/// the line from it. (Blocks the line spells itself are `super::keyblock`'s.)
pub(super) fn encoded_key_block(view: &View, line: &str, ranges: &mut Vec<Range<usize>>) {
    if let Some(at) = view.text.find("-----BEGIN")
        && view.text[at..].contains("PRIVATE KEY")
        && !(line.contains("-----BEGIN") && line.contains("PRIVATE KEY"))
    {
        ranges.push(at..view.text.len());
    }
}

/// Base64 tokens (`A-Za-z0-9+/-_`, up to two `=`) whose decoded text
/// `holds_secret`: the whole token. A token with `/` is also tried piece by
/// piece, since a path's slashes are base64 characters too (`/v1/<base64>`).
pub(super) fn base64_tokens(text: &str, holds_secret: impl Fn(&str) -> bool, ranges: &mut Vec<Range<usize>>) {
    let bytes = text.as_bytes();
    let is_b64 = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_');
    let secret = |range: &Range<usize>| {
        range.len() >= MIN_BASE64_CHARS
            && normal::base64_text(&text[range.clone()]).is_some_and(|t| holds_secret(&t))
    };
    let mut i = 0;
    while i < bytes.len() {
        if !is_b64(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_b64(bytes[i]) {
            i += 1;
        }
        let end = i + bytes[i..].iter().take(2).take_while(|b| **b == b'=').count();
        let whole = start..end;
        if secret(&whole) {
            ranges.push(whole);
        } else if text[start..i].contains('/') {
            let mut piece = start;
            for part in text[start..end].split('/') {
                let range = piece..piece + part.len();
                if secret(&range) {
                    ranges.push(range);
                }
                piece += part.len() + 1;
            }
        }
        i = end;
    }
}
