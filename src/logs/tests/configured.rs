//! The exact-match redaction of an app's configured values (`configured`).

use super::super::{MIN_CONFIGURED_CHARS, REDACTED, render_knowing};

/// Tried: a configured value printed bare, inside a URL, twice on a line,
/// JSON-escaped, and a value with a tab: each occurrence goes, nothing else.
#[test]
fn a_configured_value_is_redacted_wherever_it_stands() {
    let secret = "pg-Secret-42";
    let quoted = "say \"hi\" now";
    let tabbed = "tab\tbed-value";
    let raw = format!(
        "connecting to postgres://app@{secret}/db\n{secret} and {secret}\n{{\"note\":{}}}\ngot tab bed-value\nplain line\n",
        serde_json::to_string(quoted).unwrap()
    );
    let logs = render_knowing(raw.as_bytes(), b"", &[secret, quoted, tabbed]);
    assert_eq!(
        logs.lines,
        [
            format!("connecting to postgres://app@{REDACTED}/db"),
            format!("{REDACTED} and {REDACTED}"),
            format!("{{\"note\":\"{REDACTED}\"}}"),
            format!("got {REDACTED}"),
            "plain line".to_owned(),
        ]
    );
    assert_eq!(logs.redactions, 5);
}

/// Tried: values shorter than the floor (`8080`, `true`, `info`): they are
/// left alone, so ordinary words stay readable; one of exactly the floor goes.
#[test]
fn values_below_the_floor_are_not_matched() {
    let at_floor = "x".repeat(MIN_CONFIGURED_CHARS);
    let raw = format!("listening on 8080, debug true, level info, key {at_floor}\n");
    let logs = render_knowing(raw.as_bytes(), b"", &["8080", "true", "info", &at_floor]);
    assert_eq!(logs.lines, [format!("listening on 8080, debug true, level info, key {REDACTED}")]);
    assert_eq!(logs.redactions, 1);
}

/// Tried: one value containing another: the longer goes whole, and the
/// shorter one elsewhere too.
#[test]
fn a_value_that_contains_another_goes_whole() {
    let logs = render_knowing(
        b"token abcdefgh-ijklmnop, prefix abcdefgh\n",
        b"",
        &["abcdefgh", "abcdefgh-ijklmnop"],
    );
    assert_eq!(logs.lines, [format!("token {REDACTED}, prefix {REDACTED}")]);
}
