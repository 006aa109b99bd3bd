//! The operator's configured values (an app's env file) replaced by
//! [`REDACTED`] wherever they stand in a log line: exact match, no shape
//! needed, so `DATABASE_URL`'s whole value goes even where no pattern of
//! `shapes` would see a secret. Pure; runs as root in the host helper.

use super::{REDACTED, clean};

/// The shortest configured value that is matched. Why a floor: an exact
/// match of `1`, `true`, `info` or a port blanks those words all over the
/// log, and where they are blanked tells the reader the value anyway
/// (`listening on [REDACTED]`); a value that short is a setting, not a
/// secret, and the patterns still catch `PASSWORD=x` shapes. Eight
/// characters is below any credential worth the name (docs/docker-policy.md).
pub const MIN_CONFIGURED_CHARS: usize = 8;

/// Replaces, in each cleaned line, every occurrence of each value long
/// enough, in the two forms an app prints it in: as it is (cleaned the way
/// the line was, so a tab in a value matches the space it became) and
/// JSON-escaped (a JSON logger's `"a\"b"`). Longest first, so a value that
/// contains another goes whole. Counts one per replacement.
pub(super) fn redact(lines: &mut [String], configured: &[&str], redactions: &mut u32) {
    let mut needles: Vec<String> = Vec::new();
    for value in configured.iter().filter(|v| v.chars().count() >= MIN_CONFIGURED_CHARS) {
        let json = serde_json::to_string(value).unwrap_or_default();
        let escaped = json.get(1..json.len().saturating_sub(1)).unwrap_or_default().to_owned();
        for needle in [clean(value), escaped] {
            if needle.chars().count() >= MIN_CONFIGURED_CHARS && !needles.contains(&needle) {
                needles.push(needle);
            }
        }
    }
    needles.sort_by_key(|needle| std::cmp::Reverse(needle.len()));
    for line in lines.iter_mut() {
        for needle in &needles {
            let found = line.matches(needle.as_str()).count();
            if found > 0 {
                *line = line.replace(needle.as_str(), REDACTED);
                *redactions += found as u32;
            }
        }
    }
}
