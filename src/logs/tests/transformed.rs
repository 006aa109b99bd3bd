//! A configured value printed transformed (issue 38): its base64 (standard
//! and URL-safe, at each of the three byte alignments, as inside
//! `Authorization: Basic`), its hex in either case, its case folded,
//! percent-encoded, reversed, spaced out, or cut into runs of 12 or more
//! characters. Each test drives the configured values' stage alone (so a
//! pattern of `shapes` cannot be what hid it), and a few go through the
//! whole render of `service_logs` and a failed plan's `app_log`.

use super::super::*;

/// 24 characters whose base64 holds a `+` or a `/` at every alignment, so
/// that the URL-safe spelling differs from the standard one at each.
const SECRET: &str = "o~SX72Gt~CD?riaWSZ?TrzdH";

pub(super) const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
pub(super) const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Padded base64 of `bytes` in `alphabet`.
pub(super) fn base64_in(bytes: &[u8], alphabet: &[u8; 64]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (k, b)| n | u32::from(*b) << (16 - 8 * k));
        for k in 0..4 {
            out.push(if k <= chunk.len() {
                char::from(alphabet[(n >> (18 - 6 * k) & 63) as usize])
            } else {
                '='
            });
        }
    }
    out
}

pub(super) fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The configured values' stage alone on `lines` (cleaned first, as
/// `render_knowing` does), and its count.
pub(super) fn stage(lines: &[&str], values: &[&str]) -> (Vec<String>, u32) {
    let mut lines: Vec<String> = lines.iter().map(|line| clean(line)).collect();
    let count = redact_configured_for_tests(&mut lines, values);
    (lines, count)
}

fn one(line: &str) -> String {
    let (mut lines, count) = stage(&[line], &[SECRET]);
    assert_eq!(count, 1, "{lines:?}");
    lines.remove(0)
}

/// `out` is `lead` + `token` + `tail` with one stretch of `token` made one
/// marker, such that no character wholly of the secret's bits is left: of
/// the token's start at most the characters of the `prefix_bytes` encoded
/// before the secret and the one character it shares with them, of its
/// end at most the one character the secret shares with what follows and
/// the padding (`suffix_bytes` is 0: the secret ends the encoded text).
pub(super) fn assert_base64_cut(out: &str, lead: &str, token: &str, tail: &str, prefix_bytes: usize) {
    let at = out.find(REDACTED).unwrap_or_else(|| panic!("no marker in {out:?}"));
    assert_eq!(out.matches(REDACTED).count(), 1, "one stretch: {out:?}");
    let (before, after) = (&out[..at], &out[at + REDACTED.len()..]);
    let kept_start = before.strip_prefix(lead).unwrap_or_else(|| panic!("{out:?}"));
    let kept_end = after.strip_suffix(tail).unwrap_or_else(|| panic!("{out:?}"));
    assert!(token.starts_with(kept_start) && token.ends_with(kept_end), "{out:?} from {token}");
    assert!(kept_start.len() <= (8 * prefix_bytes).div_ceil(6), "kept {kept_start:?} of {token}");
    assert!(kept_end.trim_end_matches('=').len() <= 1, "kept {kept_end:?} of {token}");
}

/// Tried: the value's standard base64 after 0, 1 and 2 bytes of other text
/// (each alignment), padded or not: the secret's characters go.
#[test]
fn standard_base64_at_each_alignment_is_redacted() {
    for prefix in ["", "a", "ab", "abc", "user:"] {
        let token = base64_in(format!("{prefix}{SECRET}").as_bytes(), STANDARD);
        assert!(token.contains(['+', '/']), "{token}");
        for token in [token.clone(), token.trim_end_matches('=').to_owned()] {
            let out = one(&format!("cached {token} ok"));
            assert_base64_cut(&out, "cached ", &token, " ok", prefix.len());
        }
    }
}

/// Tried: the same in the URL-safe alphabet (`-` and `_`), as JWTs and
/// URL parameters carry it.
#[test]
fn url_safe_base64_at_each_alignment_is_redacted() {
    for prefix in ["", "a", "ab"] {
        let token = base64_in(format!("{prefix}{SECRET}").as_bytes(), URL_SAFE);
        assert_ne!(token, base64_in(format!("{prefix}{SECRET}").as_bytes(), STANDARD));
        let token = token.trim_end_matches('=');
        let out = one(&format!("GET /cb?state={token}&x=1"));
        assert_base64_cut(&out, "GET /cb?state=", token, "&x=1", prefix.len());
    }
}

/// Tried: `Authorization: Basic base64("admin:" + secret)`, the common
/// case, and the same with a user of 1 and 2 characters (the other two
/// alignments); through the stage, and through `service_logs`' render and
/// a failed plan's `app_log` in a line no pattern of `shapes` reads.
#[test]
fn a_basic_auth_header_is_redacted_whatever_the_user_name() {
    for user in ["admin", "a", "ab", ""] {
        let token = base64_in(format!("{user}:{SECRET}").as_bytes(), STANDARD);
        let out = one(&format!("Authorization: Basic {token}"));
        assert_base64_cut(&out, "Authorization: Basic ", &token, "", user.len() + 1);

        let line = format!("2026-12-01T10:00:00.000000001Z upstream said 401 to {token}\n");
        let logs = render_knowing(line.as_bytes(), b"", &[SECRET]);
        assert_base64_cut(
            &logs.lines[0],
            "2026-12-01T10:00:00.000000001Z upstream said 401 to ",
            &token,
            "",
            user.len() + 1,
        );
        let app_log = AppLog::render(b"", line.as_bytes(), &["/usr/bin", SECRET]);
        assert_eq!(app_log.lines, logs.lines);
        assert_eq!(app_log.redactions, 1);
    }
}

/// Tried: the value's hex, lower and upper case, alone and inside a dump.
#[test]
fn hex_in_either_case_is_redacted() {
    let lower = hex(SECRET);
    assert_eq!(one(&format!("key bytes {lower}")), format!("key bytes {REDACTED}"));
    let upper = lower.to_uppercase();
    assert_eq!(one(&format!("key bytes {upper}")), format!("key bytes {REDACTED}"));
    assert_eq!(one(&format!("dump:0000{upper}0a0d")), format!("dump:0000{REDACTED}0a0d"));
}

/// Tried: the value upper-cased, lower-cased, and with its case swapped.
#[test]
fn the_value_with_its_case_folded_is_redacted() {
    let swapped: String = SECRET
        .chars()
        .map(|c| if c.is_ascii_uppercase() { c.to_ascii_lowercase() } else { c.to_ascii_uppercase() })
        .collect();
    for form in [SECRET.to_uppercase(), SECRET.to_lowercase(), swapped] {
        assert_eq!(one(&format!("token={form};")), format!("token={REDACTED};"), "{form}");
    }
}

/// Tried: the value percent-encoded (`?` as `%3F`, and `%3f`), a value with
/// `/`, `@`, `:` and a space (as `%20` and as a form's `+`).
#[test]
fn percent_encoded_values_are_redacted() {
    let encoded = SECRET.replace('?', "%3F");
    assert_eq!(one(&format!("GET /cb?s={encoded} 200")), format!("GET /cb?s={REDACTED} 200"));
    assert_eq!(
        one(&format!("GET /cb?s={} 200", encoded.to_lowercase())),
        format!("GET /cb?s={REDACTED} 200")
    );
    let value = "p@ss/w0rd: with space";
    for printed in ["p%40ss%2Fw0rd%3A%20with%20space", "p%40ss%2Fw0rd%3A+with+space"] {
        let (lines, count) = stage(&[&format!("body=user%3Dapp%26pw%3D{printed}")], &[value]);
        assert_eq!((lines, count), (vec![format!("body=user%3Dapp%26pw%3D{REDACTED}")], 1), "{printed}");
    }
}

/// Tried: the value reversed.
#[test]
fn the_value_reversed_is_redacted() {
    let reversed: String = SECRET.chars().rev().collect();
    assert_eq!(one(&format!("olleh {reversed} dlrow")), format!("olleh {REDACTED} dlrow"));
}

/// Tried: the value in two 12-character halves on separate lines, a
/// 15-character prefix, a 12-character run from the middle; an
/// 11-character run stays (below the length that counts as the value).
#[test]
fn runs_of_twelve_characters_or_more_are_redacted() {
    let (lines, count) =
        stage(&[&format!("first {}", &SECRET[..12]), &format!("then {}.", &SECRET[12..])], &[SECRET]);
    assert_eq!(lines, [format!("first {REDACTED}"), format!("then {REDACTED}.")]);
    assert_eq!(count, 2);
    assert_eq!(one(&format!("prefix {} only", &SECRET[..15])), format!("prefix {REDACTED} only"));
    assert_eq!(one(&format!("mid:{}:", &SECRET[6..18])), format!("mid:{REDACTED}:"));
    let (lines, count) = stage(&[&format!("short {} run", &SECRET[..11])], &[SECRET]);
    assert_eq!((lines, count), (vec![format!("short {} run", &SECRET[..11])], 0));
}

/// Tried: the value spaced out (one space, two spaces, a tab between its
/// characters) and printed in groups.
#[test]
fn the_value_spaced_out_is_redacted() {
    let spaced = |gap: &str| SECRET.chars().map(String::from).collect::<Vec<_>>().join(gap);
    for gap in [" ", "  ", "\t"] {
        assert_eq!(one(&format!("[{}]", spaced(gap))), format!("[{REDACTED}]"), "{gap:?}");
    }
    let grouped = format!("{} {} {} {}", &SECRET[..6], &SECRET[6..12], &SECRET[12..18], &SECRET[18..]);
    assert_eq!(one(&format!("code: {grouped} end")), format!("code: {REDACTED} end"));
}

/// Overlapping finds (two values sharing characters, the value next to its
/// own base64) are one marker each stretch.
#[test]
fn overlapping_finds_merge_into_one_marker() {
    let (lines, count) =
        stage(&["x abcdefghijklmnopqrstuvwxyz y"], &["abcdefghijklmnop", "ijklmnopqrstuvwxyz"]);
    assert_eq!((lines, count), (vec![format!("x {REDACTED} y")], 1));
}

/// Tried: a value of 8 to 11 characters is matched whole in every form but
/// not by its runs; one of 7 is not matched (the floor, as before).
#[test]
fn short_values_are_matched_whole_in_every_form() {
    let short = "k3Y-9aZq!"; // 9 characters
    let forms = [
        short.to_owned(),
        short.to_uppercase(),
        hex(short),
        base64_in(format!("u:{short}").as_bytes(), STANDARD),
        short.chars().rev().collect(),
        short.replace('!', "%21"),
    ];
    for form in &forms {
        let (lines, count) = stage(&[&format!("v {form} .")], &[short]);
        assert_eq!(count, 1, "{form}: {lines:?}");
        assert!(
            !lines[0].contains(&short[1..8]) && !lines[0].contains(&hex(&short[1..8])),
            "{form}: {lines:?}"
        );
    }
    let (lines, count) = stage(&[&format!("part {} stays", &short[..8])], &[short]);
    assert_eq!((lines, count), (vec![format!("part {} stays", &short[..8])], 0));
    let (lines, count) = stage(&["seven 1234567 stays"], &["1234567"]);
    assert_eq!((lines, count), (vec!["seven 1234567 stays".to_owned()], 0));
}

/// Tried: values with multi-byte characters, a run of them between other
/// multi-byte characters, their base64 and hex: no panic, whole
/// characters only, the neighbours kept.
#[test]
fn multi_byte_values_are_cut_on_character_boundaries() {
    let value = "pässwörd-€-geheimnis-ß";
    let run: String = value.chars().skip(2).take(13).collect();
    assert_eq!(stage(&[&format!("é{run}é")], &[value]), (vec![format!("é{REDACTED}é")], 1));
    let token = base64_in(format!("ab{value}").as_bytes(), STANDARD);
    let (lines, _) = stage(&[&format!("€ {token} €")], &[value]);
    assert_base64_cut(&lines[0], "€ ", &token, " €", 2);
    let (lines, _) = stage(&[&format!("€{}€", hex(value).to_uppercase())], &[value]);
    assert_eq!(lines, [format!("€{REDACTED}€")]);
    // Upper-casing is ASCII only: `PÄSSWÖRD` is not a spelling of it, but
    // the runs of ASCII letters around it still are, and `ä` stays whole.
    let (lines, _) = stage(&["x-€-GEHEIMNIS-ß!"], &[value]);
    assert_eq!(lines, [format!("x{REDACTED}!")]);
}

/// A value longer than the windows one value may take is still matched by
/// every run a little longer than 12 characters
/// (`configured::MAX_WINDOWS`), all of it but at most `stride - 1`
/// characters at either end, and whole.
#[test]
fn a_very_long_value_is_matched_by_slightly_longer_runs() {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut state = 38u64;
    let value: String = (0..10_000)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            char::from(ALNUM[(state >> 33) as usize % ALNUM.len()])
        })
        .collect();
    let stride = (value.len() - 11).div_ceil(configured::MAX_WINDOWS);
    let run = 12 + stride - 1;
    assert!(stride > 1);
    for start in [0, 1, 2, 4321, value.len() - run] {
        let (lines, count) = stage(&[&format!("<{}>", &value[start..start + run])], &[&value]);
        let (before, after) = lines[0].split_once(REDACTED).unwrap();
        assert!(before.len() <= stride && after.len() <= stride && count == 1, "{start}: {lines:?}");
    }
    assert_eq!(stage(&[&value], &[&value]), (vec![REDACTED.to_owned()], 1));
}

/// A value that is a location (an absolute path, or a `:` list of them:
/// `PATH`, `JAVA_HOME` from the image's `ENV`) is matched whole, as
/// printed, as before: its runs are every stack trace's paths.
#[test]
fn a_path_value_is_matched_whole_only() {
    let path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    let home = "/usr/local/openjdk-17";
    let (lines, count) = stage(
        &[
            &format!("PATH is {path}"),
            "exec /usr/local/bin/node server.js",
            "at /usr/local/openjdk-17/lib/rt.jar",
        ],
        &[path, home],
    );
    assert_eq!(count, 2);
    assert_eq!(
        lines,
        [
            format!("PATH is {REDACTED}"),
            "exec /usr/local/bin/node server.js".to_owned(),
            "at /usr/local/openjdk-17/lib/rt.jar".replace(home, REDACTED)
        ]
    );
    // A secret that happens to start with `/` is no location: base64 has
    // capitals, and a run of it goes.
    let slashed = "/9j/4AAQSkZJRgABAQEAYABgAAD";
    assert_eq!(stage(&[&format!("k={}", &slashed[3..17])], &[slashed]), (vec![format!("k={REDACTED}")], 1));
}

/// The runs of a URL value go wherever they stand, its user and host
/// included: the safe side for a value that holds a password.
#[test]
fn the_runs_of_a_url_value_go_with_its_password() {
    let url = "postgres://app:o~SX72Gt@db:5432/app";
    let (lines, _) = stage(&["connecting to postgres://app@db:5432/app", "db:5432/app is up"], &[url]);
    assert_eq!(lines, [format!("connecting to {REDACTED}{REDACTED}"), "db:5432/app is up".to_owned()]);
}

/// A realistic log in which no configured value and no run of one stands
/// comes out as it went in, with several values configured.
#[test]
fn a_log_without_a_secret_is_unchanged() {
    let values = [
        SECRET,
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "4f9c2e7a1b8d3f6e0a5c9b2d7e4f1a8c",
        "short-ok",
    ];
    let log = [
        "2026-12-01T10:00:00.000000001Z 172.18.0.3 - - [01/Dec/2026:10:00:00 +0000] \"GET /api/v1/orders?page=2 HTTP/1.1\" 200 512 \"-\" \"curl/8.5.0\"",
        "{\"level\":\"info\",\"msg\":\"request done\",\"path\":\"/api/v1/items\",\"status\":200,\"request_id\":\"9f8e7d6c-1a2b-4c3d\"}",
        "INFO  [worker-3] com.example.OrderService - processed order 48213 in 35 ms",
        "  File \"/usr/local/lib/python3.12/site-packages/app/views.py\", line 88, in handler",
        "exec /usr/local/bin/node server.js (pid 1)",
        "session id 4f9c2e7a1b8 rotated; token dGhpcyBpcyBub3QgYSBzZWNyZXQ= accepted",
        "échec: données invalides — réessayer",
    ];
    let (lines, count) = stage(&log, &values);
    assert_eq!((lines, count), (log.iter().map(|l| (*l).to_owned()).collect(), 0));
}
