//! Terminal escaping for text that an agent wrote and an operator will read
//! (`volce-lab-host show`). Pure.
//!
//! Security invariant: nothing the agent chose can move the cursor, change
//! colours, hide itself, or reorder what the operator sees. Every control
//! character (C0, DEL, C1), every bidi control, every zero-width or
//! line-breaking format character becomes a visible `\u{..}` escape, and a
//! backslash is doubled so an escape cannot be faked.

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

/// `text` made safe to print on a terminal, on one line.
pub fn for_terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\\' {
            out.push_str("\\\\");
        } else if c.is_control() || is_invisible_format(c) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_unchanged() {
        assert_eq!(for_terminal("demo.example.com 18001 é"), "demo.example.com 18001 é");
    }

    #[test]
    fn control_characters_are_made_visible() {
        assert_eq!(for_terminal("a\x1b[31mred"), "a\\u{001b}[31mred");
        assert_eq!(for_terminal("a\rb\nc\td\x7f\u{9b}"), "a\\u{000d}b\\u{000a}c\\u{0009}d\\u{007f}\\u{009b}");
    }

    #[test]
    fn bidi_overrides_and_isolates_are_made_visible() {
        for c in [
            '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}', '\u{2067}', '\u{2068}',
            '\u{2069}', '\u{200E}', '\u{200F}', '\u{061C}',
        ] {
            let escaped = for_terminal(&format!("x{c}y"));
            assert!(!escaped.contains(c), "{c:?} must not survive");
            assert_eq!(escaped, format!("x\\u{{{:04x}}}y", c as u32));
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
    fn lines_keep_their_breaks_but_nothing_else() {
        assert_eq!(for_terminal_lines("a\nb\x1b"), "a\nb\\u{001b}");
    }
}
