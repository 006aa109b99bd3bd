//! Reading root's `allowed_signers` line by line, only so that the doctor
//! can list who may sign approvals (issue 42). Pure; runs as root inside
//! `volce-lab-host doctor`.
//!
//! Verification never uses this: ssh-keygen reads the file itself
//! (`crate::host::signed::keygen`). So this reader follows OpenSSH's format
//! (sshd's `ssh-keygen(1)` "ALLOWED SIGNERS") only as far as listing
//! needs, and says so when a line is beyond it: principals (one word, or
//! a double-quoted string), then optionally comma-separated options
//! (`cert-authority`, `namespaces="..."`, `valid-after="..."`,
//! `valid-before="..."`, names in any case), then the key type and its
//! base64 blob, then an optional comment. Blank lines and `#` lines are
//! skipped. Nothing read here is printed unescaped: the checks pass every
//! word through `crate::text::for_terminal`.

use crate::host::signed::sshsig::{self, KeyFacts};

/// One line of the file that is not blank or a comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Its number in the file, from 1.
    pub number: usize,
    /// What it says, or why it could not be read.
    pub entry: Result<Entry, &'static str>,
}

/// A key line as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The comma-separated principals, as written (patterns included).
    pub principals: Vec<String>,
    /// The `namespaces` option's list; `None` when the line has none.
    pub namespaces: Option<Vec<String>>,
    pub cert_authority: bool,
    pub valid_after: Option<String>,
    pub valid_before: Option<String>,
    /// The key's type (as the blob names it, which the line's type word
    /// must equal) and fingerprint.
    pub key: KeyFacts,
}

/// Every non-blank, non-comment line of `text`, in order.
pub fn parse(text: &str) -> Vec<Line> {
    text.lines()
        .enumerate()
        .filter_map(|(index, line)| {
            let line = line.trim_start_matches(WHITESPACE);
            if line.is_empty() || line.starts_with('#') {
                return None;
            }
            Some(Line { number: index + 1, entry: entry(line) })
        })
        .collect()
}

const WHITESPACE: [char; 3] = [' ', '\t', '\r'];

fn entry(line: &str) -> Result<Entry, &'static str> {
    let (principals, rest) = principals(line)?;
    let (first, after_first) = word(rest);
    let (second, _) = word(after_first);
    // As OpenSSH does: if the next two words are not a key, they start
    // with options.
    let (options, key) = match key(first, second) {
        Some(key) => (None, key),
        None => {
            let (options, rest) = options_word(rest)?;
            let (key_type, rest) = word(rest);
            let (blob, _) = word(rest);
            (Some(options), key(key_type, blob).ok_or("it has no valid public key after its options")?)
        }
    };
    let mut entry = Entry {
        principals,
        namespaces: None,
        cert_authority: false,
        valid_after: None,
        valid_before: None,
        key,
    };
    for option in options.map(split_options).unwrap_or_default() {
        apply_option(&mut entry, &option)?;
    }
    Ok(entry)
}

/// The principals word, quoted or not, and what follows it.
fn principals(line: &str) -> Result<(Vec<String>, &str), &'static str> {
    let (list, rest) = match line.strip_prefix('"') {
        Some(quoted) => {
            let end = quoted.find('"').ok_or("its principals' quote is not closed")?;
            (&quoted[..end], &quoted[end + 1..])
        }
        None => word(line),
    };
    if list.is_empty() || rest.trim_start_matches(WHITESPACE).is_empty() {
        return Err("it has principals but no key");
    }
    Ok((list.split(',').map(str::to_owned).collect(), rest))
}

/// The next whitespace-separated word and what follows it.
fn word(text: &str) -> (&str, &str) {
    let text = text.trim_start_matches(WHITESPACE);
    let end = text.find(WHITESPACE).unwrap_or(text.len());
    (&text[..end], &text[end..])
}

fn key(key_type: &str, blob: &str) -> Option<KeyFacts> {
    sshsig::public_key(blob).filter(|key| key.key_type == key_type)
}

/// The options word: up to the first whitespace outside double quotes,
/// where a backslash escapes the next character.
fn options_word(text: &str) -> Result<(&str, &str), &'static str> {
    let text = text.trim_start_matches(WHITESPACE);
    let (mut quoted, mut escaped) = (false, false);
    for (at, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ' ' | '\t' | '\r' if !quoted => return Ok((&text[..at], &text[at..])),
            _ => {}
        }
    }
    Err(if quoted { "a quote in its options is not closed" } else { "it has no key after its options" })
}

/// The options word split at the commas outside quotes.
fn split_options(options: &str) -> Vec<String> {
    let (mut parts, mut current) = (Vec::new(), String::new());
    let (mut quoted, mut escaped) = (false, false);
    for c in options.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts
}

fn apply_option(entry: &mut Entry, option: &str) -> Result<(), &'static str> {
    if option.eq_ignore_ascii_case("cert-authority") {
        entry.cert_authority = true;
        return Ok(());
    }
    let (name, value) = option.split_once('=').ok_or("it has an option ssh-keygen does not support")?;
    let value = dequote(value).ok_or("an option's value is not in double quotes")?;
    match name.to_ascii_lowercase().as_str() {
        "namespaces" => entry.namespaces = Some(value.split(',').map(str::to_owned).collect()),
        "valid-after" => entry.valid_after = Some(value),
        "valid-before" => entry.valid_before = Some(value),
        _ => return Err("it has an option ssh-keygen does not support"),
    }
    Ok(())
}

/// `"value"` without its quotes, a backslash-escaped quote kept as `"`.
fn dequote(value: &str) -> Option<String> {
    let inner = value.strip_prefix('"')?.strip_suffix('"')?;
    Some(inner.replace("\\\"", "\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real ed25519 public key (made once with ssh-keygen).
    const KEY: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIKwWvPrB/KzFwp/aakDnNs46nQ6EYO+dN7KslmtW1X/p";
    const FINGERPRINT: &str = "SHA256:ifT1V4+2QKjHXQG66gSO93UYkqo3SjDlpyn/3dsO3CI";

    fn one(line: &str) -> Result<Entry, &'static str> {
        let lines = parse(line);
        assert_eq!(lines.len(), 1, "{line}");
        lines[0].entry.clone()
    }

    #[test]
    fn a_plain_line_gives_its_principal_key_type_and_fingerprint() {
        let entry = one(&format!("alice ssh-ed25519 {KEY} alice@laptop")).unwrap();
        assert_eq!(entry.principals, ["alice"]);
        assert_eq!(
            (entry.key.key_type.as_str(), entry.key.fingerprint.as_str()),
            ("ssh-ed25519", FINGERPRINT)
        );
        assert_eq!(entry.namespaces, None);
    }

    #[test]
    fn options_and_quoted_principals_are_read() {
        let line = format!(
            "  \"alice,bob\" cert-authority,NAMESPACES=\"volce-lab-approval,file\",valid-after=\"20250101\" \
             ssh-ed25519 {KEY}"
        );
        let entry = one(&line).unwrap();
        assert_eq!(entry.principals, ["alice", "bob"]);
        assert_eq!(entry.namespaces.unwrap(), ["volce-lab-approval", "file"]);
        assert!(entry.cert_authority);
        assert_eq!(entry.valid_after.as_deref(), Some("20250101"));
        assert_eq!(entry.valid_before, None);
    }

    #[test]
    fn comments_and_blank_lines_are_skipped_and_numbers_kept() {
        let text = format!("# who signs\n\n   \nalice ssh-ed25519 {KEY}\n\t# more\nbob nonsense\n");
        let lines = parse(&text);
        assert_eq!(lines.iter().map(|l| l.number).collect::<Vec<_>>(), [4, 6]);
        assert!(lines[0].entry.is_ok() && lines[1].entry.is_err());
    }

    #[test]
    fn what_is_not_a_key_line_says_why() {
        for line in [
            "alice".to_owned(),
            format!("\"alice ssh-ed25519 {KEY}"),
            format!("alice ssh-rsa {KEY}"),
            format!("alice ssh-ed25519 {}", &KEY[..20]),
            format!("alice unknown-option ssh-ed25519 {KEY}"),
            format!("alice namespaces=volce-lab-approval ssh-ed25519 {KEY}"),
            format!("alice namespaces=\"volce-lab-approval ssh-ed25519 {KEY}"),
        ] {
            assert!(one(&line).is_err(), "{line}");
        }
    }
}
