//! Small text helpers both ends share: lowercase hex, RFC 3339 times, and the
//! three ways text that came from someone else is made harmless before a
//! person or a model reads it. Pure; runs wherever it is called.
//!
//! Security invariant: text an agent, a server or an MCP client chose cannot
//! move a terminal's cursor, change its colours, hide itself or reorder what a
//! person sees. Every control character (C0, DEL, C1) and every bidi,
//! zero-width or line-breaking format character counts as hidden; the three
//! routines below differ only in what they put in its place:
//! - [`for_terminal`]: a visible `\u{..}` escape, a backslash doubled so an
//!   escape cannot be faked (the operator must see exactly what was sent);
//! - [`for_model`]: dropped, and the text capped (a sentence from the server
//!   passed on to the agent; nothing in it is evidence);
//! - [`quoted`]: escaped as for the terminal, capped and put in backticks
//!   (a client's field name or value quoted back in a refusal).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Lowercase hex of a byte string.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(DIGITS[usize::from(byte >> 4)] as char);
        out.push(DIGITS[usize::from(byte & 0xf)] as char);
    }
    out
}

/// Whether `value` is exactly `len` lowercase hex digits (ids and digests).
pub fn is_lower_hex(value: &str, len: usize) -> bool {
    value.len() == len && value.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Unix seconds as RFC 3339 UTC, to the second (times before 1970 are 1970).
pub fn rfc3339_seconds(unix_secs: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_secs(unix_secs.max(0) as u64);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// Now, RFC 3339 UTC with milliseconds.
pub fn rfc3339_millis_now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// Characters that change how the surrounding text is shown without being
/// shown themselves.
fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{061C}'                 // Arabic letter mark
        | '\u{00AD}'               // soft hyphen
        | '\u{180E}'               // Mongolian vowel separator
        | '\u{200B}'..='\u{200F}'  // zero-width space/joiners, LRM, RLM
        | '\u{2028}'..='\u{202E}'  // line/paragraph separators, LRE, RLE, PDF, LRO, RLO
        | '\u{2060}'..='\u{206F}'  // word joiner, invisible operators, LRI, RLI, FSI, PDI, ...
        | '\u{FEFF}'               // zero-width no-break space
        | '\u{FFF9}'..='\u{FFFB}'  // interlinear annotation
    )
}

/// Whether `c` must never reach a reader as itself.
fn is_hidden(c: char) -> bool {
    c.is_control() || is_invisible_format(c)
}

/// `text` made safe to print on a terminal, on one line.
pub fn for_terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\\' {
            out.push_str("\\\\");
        } else if is_hidden(c) {
            out.push_str(&format!("\\u{{{:04x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Like [`for_terminal`] but keeps line breaks, for multi-line text that is
/// ours in shape (a rendered nginx.conf) yet carries agent-chosen values.
pub fn for_terminal_lines(text: &str) -> String {
    text.split('\n').map(for_terminal).collect::<Vec<_>>().join("\n")
}

/// Serialized JSON made safe to print on a terminal without changing what
/// it means: every hidden character becomes a `\uXXXX` escape. serde_json
/// escapes C0 controls inside strings itself, so a raw tab or line break in
/// its output is layout between tokens and stays; what it leaves raw (DEL,
/// C1, bidi and zero-width characters) can only be inside strings, and all
/// of it is in the Basic Multilingual Plane, so the result parses to the
/// same value.
pub fn json_for_terminal(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if is_hidden(c) && !matches!(c, '\n' | '\r' | '\t') {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// The first `max_chars` characters of `text` (`...` marks a cut), every
/// hidden character dropped: for a server's sentence handed on to a model.
pub fn for_model(text: &str, max_chars: usize) -> String {
    let mut out: String = text.chars().filter(|c| !is_hidden(*c)).take(max_chars).collect();
    if text.chars().filter(|c| !is_hidden(*c)).nth(max_chars).is_some() {
        out.push_str("...");
    }
    out
}

/// A client-supplied name or value, quoted back in a refusal: the first
/// `max_chars` characters escaped as for the terminal, in backticks.
pub fn quoted(text: &str, max_chars: usize) -> String {
    let head: String = text.chars().take(max_chars).collect();
    let cut = if text.chars().nth(max_chars).is_some() { "..." } else { "" };
    format!("`{}{cut}`", for_terminal(&head))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase_and_checked_strictly() {
        assert_eq!(hex(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
        assert!(is_lower_hex("00ff", 4));
        assert!(!is_lower_hex("00FF", 4));
        assert!(!is_lower_hex("00ff", 5));
        assert!(!is_lower_hex("00fg", 4));
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339_seconds(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_seconds(-5), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_seconds(1_800_000_000), "2027-01-15T08:00:00Z");
        let now = rfc3339_millis_now();
        assert!(now.ends_with('Z') && now.len() == "2026-12-01T08:00:00.000Z".len(), "{now}");
    }

    #[test]
    fn plain_text_is_unchanged() {
        assert_eq!(for_terminal("demo.example.com 18001 é"), "demo.example.com 18001 é");
        assert_eq!(for_model("demo.example.com 18001 é", 300), "demo.example.com 18001 é");
    }

    #[test]
    fn control_characters_are_made_visible() {
        assert_eq!(for_terminal("a\x1b[31mred"), "a\\u{001b}[31mred");
        assert_eq!(for_terminal("a\rb\nc\td\x7f\u{9b}"), "a\\u{000d}b\\u{000a}c\\u{0009}d\\u{007f}\\u{009b}");
    }

    #[test]
    fn bidi_overrides_and_isolates_are_made_visible_or_dropped() {
        for c in [
            '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}', '\u{2067}', '\u{2068}',
            '\u{2069}', '\u{200E}', '\u{200F}', '\u{061C}',
        ] {
            let escaped = for_terminal(&format!("x{c}y"));
            assert!(!escaped.contains(c), "{c:?} must not survive");
            assert_eq!(escaped, format!("x\\u{{{:04x}}}y", c as u32));
            assert_eq!(for_model(&format!("x{c}y"), 10), "xy");
            assert!(!quoted(&format!("x{c}y"), 10).contains(c));
        }
    }

    #[test]
    fn zero_width_characters_are_made_visible() {
        assert_eq!(for_terminal("a\u{200B}b\u{FEFF}"), "a\\u{200b}b\\u{feff}");
    }

    #[test]
    fn a_backslash_cannot_fake_an_escape() {
        assert_eq!(for_terminal("\\u{202e}"), "\\\\u{202e}");
    }

    #[test]
    fn json_for_a_terminal_hides_nothing_and_means_the_same() {
        let value = serde_json::json!({"app": "a\u{202e}b\u{7f}c\u{9b}d\u{1b}e\\u{202e}"});
        let text = json_for_terminal(&serde_json::to_string_pretty(&value).unwrap());
        assert!(text.chars().all(|c| c == '\n' || !is_hidden(c)), "{text:?}");
        assert!(text.contains("\\u202e") && text.contains("\\u007f") && text.contains("\\u009b"), "{text}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), value);
    }

    #[test]
    fn lines_keep_their_breaks_but_nothing_else() {
        assert_eq!(for_terminal_lines("a\nb\x1b"), "a\nb\\u{001b}");
    }

    #[test]
    fn text_for_a_model_drops_hidden_characters_and_is_capped() {
        assert_eq!(for_model("a\u{1b}[2J\u{202e}b\nc", 300), "a[2Jbc");
        assert_eq!(for_model(&"x".repeat(301), 300), format!("{}...", "x".repeat(300)));
        assert_eq!(for_model(&"x".repeat(300), 300), "x".repeat(300));
    }

    #[test]
    fn quoted_values_are_escaped_capped_and_fenced() {
        assert_eq!(quoted("disk", 40), "`disk`");
        assert_eq!(quoted("a\nb", 40), "`a\\u{000a}b`");
        assert_eq!(quoted(&"y".repeat(41), 40), format!("`{}...`", "y".repeat(40)));
    }
}
