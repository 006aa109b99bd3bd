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

/// Standard base64, padded: the one test encoder (`transformed.rs`).
fn base64(bytes: &[u8]) -> String {
    super::transformed::base64_in(bytes, super::transformed::STANDARD)
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

    /// A configured value, or a run of 12 or more of its characters, in
    /// any of the forms `configured` knows (case folded, hex, percent,
    /// reversed, spaced out, JSON-escaped, base64 of either alphabet after
    /// 0 to 5 bytes of other text), between words: no 12-character run of
    /// it can be read back, and it is counted.
    #[test]
    fn no_run_of_a_configured_value_leaves_in_any_form(
        value in "[A-Za-z0-9!#$*.~_/+=@:?\"-]{9,37}",
        form in 0u8..11,
        cut in any::<(prop::sample::Index, prop::sample::Index)>(),
        prefix in "[a-z]{0,5}",
        before in "[a-z ]{0,20}",
        after in "[a-z ]{0,20}",
    ) {
        let secret = format!("S3c{value}");
        let chars: Vec<char> = secret.chars().collect();
        let len = 12 + cut.0.index(chars.len() - 11);
        let start = cut.1.index(chars.len() - len + 1);
        let run: String = chars[start..start + len].iter().collect();
        let windows: Vec<String> = (0..=run.len() - 12).map(|k| run[k..k + 12].to_owned()).collect();
        let fold = |text: &str| text.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_ascii_lowercase();
        let percent = |text: &str| text.bytes().map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { char::from(b).to_string() } else { format!("%{b:02X}") }).collect::<String>();
        // Exactly the enclosing quotes: trim_matches also took an escaped
        // quote's `"` at the end, printing `\` alone (a run that ends in `"`).
        let json = |text: &str| {
            let quoted = serde_json::to_string(text).unwrap();
            quoted[1..quoted.len() - 1].to_owned()
        };
        let transform: fn(&str) -> String = match form {
            0 => |w| w.to_owned(),
            1 => |w| w.to_uppercase(),
            2 => |w| w.to_lowercase(),
            3 => super::transformed::hex,
            4 => |w| super::transformed::hex(w).to_uppercase(),
            5 => |w| w.chars().rev().collect(),
            6 => |w| w.chars().map(String::from).collect::<Vec<_>>().join(" "),
            _ => |w| w.to_owned(),
        };
        let printed = match form {
            7 => percent(&run),
            8 => json(&run),
            9 => super::transformed::base64_in(format!("{prefix}{secret}").as_bytes(), super::transformed::STANDARD),
            10 => super::transformed::base64_in(format!("{prefix}{secret}").as_bytes(), super::transformed::URL_SAFE),
            _ => transform(&run),
        };
        let (lines, count) = super::transformed::stage(&[&format!("{before} {printed} {after}")], &[&secret]);
        prop_assert!(count >= 1, "{printed} of {secret}: {lines:?}");
        let out = fold(&lines[0]);
        if form >= 9 {
            super::transformed::assert_base64_cut(&lines[0], &format!("{before} "), &printed, &format!(" {after}"), prefix.len());
        } else {
            for window in &windows {
                let spelled = match form { 7 => percent(window), 8 => json(window), _ => transform(window) };
                prop_assert!(!out.contains(&fold(&spelled)), "{spelled} of {secret} in {lines:?}");
            }
        }
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
