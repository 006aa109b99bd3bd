//! The approve question: what the operator types to confirm an approval
//! ([`Confirmation`]), their answer ([`Decision`]), and asking it on the
//! terminal ([`ask`]); the catalog commands' question ([`ask_word`]).
//! Runs as root inside `volce-lab-host approve` and `catalog pin|remove`.

use std::io::{BufRead, Write};

/// What the operator types to confirm an approval: the plan's app name,
/// or the first 8 characters of its digest (a remove_image plan has no app).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmation {
    pub app: Option<String>,
    pub digest_prefix: String,
}

/// The operator's answer to [`Confirmation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Confirmed,
    Declined,
}

impl Confirmation {
    pub(super) fn of(stored: &crate::store::StoredPlan) -> Confirmation {
        Confirmation {
            app: stored.plan.payload.app().map(str::to_owned),
            digest_prefix: stored.plan.digest.as_str().chars().take(8).collect(),
        }
    }

    /// The question, naming what may be typed but not its value: the
    /// operator reads that in the summary above it.
    pub fn prompt(&self) -> &'static str {
        if self.app.is_some() {
            "To approve, type the app name or the first 8 characters of the digest"
        } else {
            "To approve, type the first 8 characters of the digest"
        }
    }

    /// Whether `typed` (one line, surrounding whitespace ignored) confirms.
    pub fn decide(&self, typed: &str) -> Decision {
        let typed = typed.trim();
        let confirmed =
            !typed.is_empty() && (typed == self.digest_prefix || self.app.as_deref() == Some(typed));
        if confirmed { Decision::Confirmed } else { Decision::Declined }
    }
}

/// Prints the summary, then (unless `yes`) the question, and reads one
/// line of at most 256 bytes as the answer. A failed read or write
/// declines.
pub fn ask(
    input: impl BufRead,
    output: impl Write,
    shown: &str,
    expected: &Confirmation,
    yes: bool,
) -> Decision {
    ask_with(input, output, shown, expected.prompt(), yes, |typed| expected.decide(typed))
}

/// [`ask`] for another command's question (`catalog pin`, `catalog
/// remove`): confirmed when the line, surrounding whitespace ignored, is
/// exactly `word`.
pub fn ask_word(
    input: impl BufRead,
    output: impl Write,
    shown: &str,
    prompt: &str,
    word: &str,
    yes: bool,
) -> Decision {
    ask_with(input, output, shown, prompt, yes, |typed| {
        let typed = typed.trim();
        if !typed.is_empty() && typed == word { Decision::Confirmed } else { Decision::Declined }
    })
}

fn ask_with(
    input: impl BufRead,
    mut output: impl Write,
    shown: &str,
    prompt: &str,
    yes: bool,
    decide: impl FnOnce(&str) -> Decision,
) -> Decision {
    let printed = output.write_all(shown.as_bytes()).and_then(|()| output.flush());
    if yes {
        return Decision::Confirmed;
    }
    if printed.is_err() || write!(output, "\n{prompt}: ").and_then(|()| output.flush()).is_err() {
        return Decision::Declined;
    }
    let mut line = String::new();
    match input.take(256).read_line(&mut line) {
        Ok(_) => decide(&line),
        Err(_) => Decision::Declined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approve_asks_after_the_summary_and_reads_one_line() {
        let expected = Confirmation { app: Some("web".into()), digest_prefix: "0123abcd".into() };
        let mut out = Vec::new();
        assert_eq!(ask(&b"web\nmore"[..], &mut out, "SUMMARY\n", &expected, false), Decision::Confirmed);
        let out = String::from_utf8(out).unwrap();
        assert!(out.starts_with("SUMMARY\n\nTo approve, type the app name"), "{out}");
        assert!(!out.contains("0123abcd"), "the question does not hand over the answer: {out}");
        let mut out = Vec::new();
        assert_eq!(ask(&b"0123abcd\r\n"[..], &mut out, "", &expected, false), Decision::Confirmed);
        // End of input, a second line's text, an over-long line: declined.
        for typed in [&b""[..], b"\nweb\n", &[b'w'; 300][..]] {
            assert_eq!(ask(typed, Vec::new(), "", &expected, false), Decision::Declined, "{typed:?}");
        }
        // --yes: printed, not asked, nothing read.
        let mut out = Vec::new();
        assert_eq!(ask(&b"nope\n"[..], &mut out, "SUMMARY\n", &expected, true), Decision::Confirmed);
        assert_eq!(out, b"SUMMARY\n");
        let no_app = Confirmation { app: None, digest_prefix: "0123abcd".into() };
        assert_eq!(no_app.decide("web"), Decision::Declined);
        assert!(!no_app.prompt().contains("app name"));
    }

    /// Pins the 256-byte bound (issue 38, mutation testing): the answer is
    /// the line's first 256 bytes, so a reply that fills them is read whole
    /// and a byte past them is never read.
    #[test]
    fn the_answer_is_at_most_the_first_256_bytes_of_the_line() {
        let expected = Confirmation { app: Some("web".into()), digest_prefix: "0123abcd".into() };
        let answer = |tail: &str| format!("{}web{tail}", " ".repeat(253)).into_bytes();
        // 256 bytes, then "x": the x is not part of the answer.
        assert_eq!(ask(&answer("x\n")[..], Vec::new(), "", &expected, false), Decision::Confirmed);
        // One space more pushes the "b" past the bound: "we", declined.
        let longer = [&b" "[..], &answer("x\n")[..]].concat();
        assert_eq!(ask(&longer[..], Vec::new(), "", &expected, false), Decision::Declined);
    }

    #[test]
    fn a_catalog_change_is_confirmed_by_its_key_alone() {
        let ask = |typed: &[u8], yes| ask_word(typed, Vec::new(), "", "type the key", "web", yes);
        assert_eq!(ask(b"web\n", false), Decision::Confirmed);
        assert_eq!(ask(b" web \r\n", false), Decision::Confirmed);
        for typed in [&b""[..], b"\n", b"we\n", b"web2\n", b"y\n"] {
            assert_eq!(ask(typed, false), Decision::Declined, "{typed:?}");
        }
        assert_eq!(ask(b"", true), Decision::Confirmed);
    }
}
