//! Property tests of `render`: a known secret written in a family of
//! generated formats (key spellings x separators x encodings) never leaves,
//! any bytes keep the limits and never panic, and prose stays as it was.

use proptest::prelude::*;

use super::super::*;
use super::render;

const KEYS: [&str; 16] = [
    "password",
    "PASSWORD",
    "db_password",
    "DB_PASS",
    "dbPass",
    "passwd",
    "passphrase",
    "PWD",
    "pw",
    "api_key",
    "X-Api-Key",
    "client_secret",
    "access_token",
    "AUTH_TOKEN",
    "private_key",
    "user.pw",
];
/// Separators every key takes; a space alone only after password-like names.
const SEPARATORS: [&str; 7] = ["=", ": ", ":", " = ", " => ", " := ", "="];

fn percent_all(text: &str) -> String {
    text.bytes().map(|b| format!("%{b:02X}")).collect()
}

fn fullwidth(text: &str) -> String {
    text.chars()
        .map(|c| if ('!'..='~').contains(&c) { char::from_u32(c as u32 + 0xFEE0).unwrap() } else { c })
        .collect()
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (k, b)| n | u32::from(*b) << (16 - 8 * k));
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * k) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The log text for one generated case, and the spellings of the secret in
/// it that must not come out.
fn written(key: &str, sep: &str, format: u8, value: &str) -> (String, Vec<String>) {
    let pair = format!("{key}{sep}{value}");
    let plain = vec![value.to_owned()];
    match format {
        0 => (pair, plain),
        1 => (format!("{key}{sep}\"{value}\""), plain),
        2 => (format!("{{\"{key}\":\"{value}\",\"n\":1}}"), plain),
        3 => (format!("{{\\\"{key}\\\":\\\"{value}\\\"}}"), plain),
        4 => (format!("msg=\"{{\\\\\\\"{key}\\\\\\\":\\\\\\\"{value}\\\\\\\"}}\""), plain),
        5 => (format!("GET /cb?a=1&{key}={value}&b=2 200"), plain),
        6 => (percent_all(&pair), vec![value.to_owned(), percent_all(value)]),
        7 => (format!("{key}%3D{value}"), plain),
        8 => (format!("{key}\\u003d{value}"), plain),
        9 => (fullwidth(&pair), vec![value.to_owned(), fullwidth(value)]),
        10 => {
            let token = base64(pair.as_bytes());
            (format!("cfg {token} loaded"), vec![value.to_owned(), token])
        }
        11 => (format!("{key}:\n    {value}\nnext: 1"), plain),
        12 => (format!("{key}: |\n  {value}\n  more\nnext: 1"), plain),
        _ => (format!("connecting to postgres://app:{value}@db:5432/app"), plain),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// No generated spelling of a secret reaches the reply, with or without
    /// docker's time and a logger's prefix, and each is counted.
    #[test]
    fn render_never_outputs_a_known_secret(
        key in 0..KEYS.len(),
        sep in 0..SEPARATORS.len() + 1,
        format in 0u8..14,
        value in "[A-Za-z0-9!#$*.~_-]{5,12}",
        stamped in any::<bool>(),
        prefix in prop::sample::select(vec!["", "INFO app: ", "[worker-3] "]),
    ) {
        let key = KEYS[key];
        let spaced = ["password", "PASSWORD", "db_password", "passwd", "passphrase"].contains(&key);
        let sep = SEPARATORS.get(sep).copied().unwrap_or(if spaced { " " } else { "=" });
        let value = format!("S3c{value}");
        let (text, secrets) = written(key, sep, format, &value);
        let stamp = if stamped { "2026-12-01T10:00:00.000000001Z " } else { "" };
        let raw: String = text.lines().map(|line| format!("{stamp}{prefix}{line}\n")).collect();
        let logs = render(raw.as_bytes());
        for line in &logs.lines {
            for secret in &secrets {
                prop_assert!(!line.contains(secret.as_str()), "{secret} in {line:?} from {raw:?}");
            }
        }
        prop_assert!(logs.redactions >= 1, "{raw:?}");
    }

    /// Any bytes: no panic, the limits hold, nothing hidden comes out.
    #[test]
    fn render_keeps_its_limits_on_any_bytes(raw in prop::collection::vec(any::<u8>(), 0..512)) {
        check_limits(&render(&raw));
    }

    /// Text made of what the decoders and scanners react to: no panic, the limits hold.
    #[test]
    fn render_keeps_its_limits_on_escape_soup(
        text in "([\\\\%u0-9a-fA-FxX=:\"' \n@/|+-]|pass|word|key|token|://|ｐ|\u{301}|-----BEGIN PRIVATE KEY-----){0,80}"
    ) {
        check_limits(&render(text.as_bytes()));
    }

    /// Lines of lower-case words, numbers and paths: nothing is redacted.
    #[test]
    fn prose_stays_as_it_was(words in prop::collection::vec("[a-z]{1,12}|[0-9]{1,5}|/[a-z]{1,8}/[a-z0-9]{1,10}", 1..12)) {
        let line = words.join(" ");
        let logs = render(line.as_bytes());
        prop_assert_eq!(logs.redactions, 0, "{}", line);
        prop_assert_eq!(logs.lines, vec![line]);
    }
}

fn check_limits(logs: &SafeLogs) {
    let bytes: usize = logs.lines.iter().map(|l| l.len() + 1).sum();
    assert!(bytes <= MAX_TEXT_BYTES);
    for line in &logs.lines {
        assert!(line.chars().count() <= MAX_LINE_CHARS + 3);
        assert!(!line.chars().any(|c| c.is_control()), "{line:?}");
    }
}
