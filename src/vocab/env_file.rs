//! An app's configuration as the operator holds it: a catalog entry's
//! `env_file` (a file name under [`ENV_DIR`]), what a plan records of it
//! ([`EnvFileUse`]: the path docker reads and the file's sha256, never a
//! value), and the strict `NAME=value` parser ([`Configuration::parse`]).
//! Pure; the bytes come from `crate::host::env_files`, which checks owner
//! and mode on the opened file.
//!
//! Security invariant: a value never leaves this type but through
//! [`Configuration::values`] (which only the log redaction calls) and the
//! file docker reads itself; `Debug` prints names only, and every error
//! names a line, never its text.
//!
//! Why this grammar: docker's `--env-file` (the CLI's kvfile reader) is
//! what gives the values to the container, and the operator must get what
//! they wrote, byte for byte. Docker skips empty lines and lines starting
//! with `#`, trims leading whitespace of a line, cuts at the first `=`,
//! passes the value through untouched (no quotes, no escapes, no
//! expansion: `A="x"` is the three characters `"x"`), strips a trailing CR
//! and a leading BOM, and takes a name without `=` from its own environment.
//! Everything where two readers could differ is refused here instead:
//! leading whitespace, CR, a BOM, other control characters, a line without
//! `=`, a name outside `[A-Za-z_][A-Za-z0-9_]*`, a name given twice.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where every env file lives: root's directory beside the policy.
pub const ENV_DIR: &str = "/etc/volce-lab/apps";
/// An env file larger than this is refused rather than read.
pub const ENV_FILE_MAX_BYTES: usize = 32 * 1024;
/// At most this many variables per file.
pub const ENV_FILE_MAX_VARIABLES: usize = 64;
/// The longest variable name.
pub const ENV_NAME_MAX: usize = 64;

/// A validated env file name: `[a-z0-9][a-z0-9._-]{0,63}`, no `..`, so
/// joined to [`ENV_DIR`] it names a file directly in it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct EnvFileName(String);

impl EnvFileName {
    pub fn parse(name: &str) -> Option<EnvFileName> {
        let bytes = name.as_bytes();
        let first_ok = bytes.first().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        let rest_ok =
            bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(b));
        (first_ok && rest_ok && bytes.len() <= 64 && !name.contains(".."))
            .then(|| EnvFileName(name.to_owned()))
    }

    /// The policy's form: an absolute path directly in [`ENV_DIR`].
    pub fn from_policy_path(path: &str) -> Option<EnvFileName> {
        path.strip_prefix(ENV_DIR)?.strip_prefix('/').and_then(EnvFileName::parse)
    }

    /// The path the policy names (and the operator edits).
    pub fn policy_path(&self) -> String {
        format!("{ENV_DIR}/{}", self.0)
    }
}

super::string_form::string_form!(EnvFileName, "an env file name: [a-z0-9][a-z0-9._-]{0,63}");

/// What a plan records of an env file: where docker reads it at create and
/// the keyed hash of its bytes when the plan was made. Execute and approve
/// compare the hash with the file as it is then; a difference voids the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvFileUse {
    pub path: PathBuf,
    /// [`env_file_hmac`] under the host's key, never a bare hash (a bare
    /// one could be tested against guessed values by whoever reads the plan).
    pub hmac_sha256: String,
}

/// Why an env file's text was refused: a line number, never the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EnvFileError {
    #[error("it is larger than {ENV_FILE_MAX_BYTES} bytes")]
    TooLarge,
    #[error("it sets more than {ENV_FILE_MAX_VARIABLES} variables")]
    TooManyVariables,
    #[error("it is not UTF-8 text")]
    NotUtf8,
    #[error(
        "line {0} starts with whitespace or a byte-order mark (write NAME=value at the start of the line)"
    )]
    LeadingSpace(usize),
    #[error(
        "line {0} holds a carriage return or another control character (save the file with Unix line ends)"
    )]
    ControlCharacter(usize),
    #[error("line {0} has no '=' (write NAME=value)")]
    NoEquals(usize),
    #[error("line {0}'s name is not [A-Za-z_][A-Za-z0-9_]* of at most {ENV_NAME_MAX} characters")]
    BadName(usize),
    #[error("line {0} sets a name an earlier line sets already")]
    Duplicate(usize),
}

/// The variables of one env file, in file order.
#[derive(Clone, PartialEq, Eq)]
pub struct Configuration {
    variables: Vec<(String, String)>,
}

/// Names only: a value must not reach a log or a panic message.
impl fmt::Debug for Configuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

pub(super) fn is_env_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.first().is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_')
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
        && bytes.len() <= ENV_NAME_MAX
}

impl Configuration {
    /// Parses an env file's bytes (see the module header for the grammar).
    pub fn parse(bytes: &[u8]) -> Result<Configuration, EnvFileError> {
        if bytes.len() > ENV_FILE_MAX_BYTES {
            return Err(EnvFileError::TooLarge);
        }
        let text = std::str::from_utf8(bytes).map_err(|_| EnvFileError::NotUtf8)?;
        let mut variables: Vec<(String, String)> = Vec::new();
        for (index, line) in text.split('\n').enumerate() {
            let number = index + 1;
            if line.chars().any(|c| (c.is_control() && c != '\t') || c == '\u{feff}') {
                if line.starts_with('\u{feff}') {
                    return Err(EnvFileError::LeadingSpace(number));
                }
                return Err(EnvFileError::ControlCharacter(number));
            }
            if line.starts_with(char::is_whitespace) {
                return Err(EnvFileError::LeadingSpace(number));
            }
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((name, value)) = line.split_once('=') else {
                return Err(EnvFileError::NoEquals(number));
            };
            if !is_env_name(name) {
                return Err(EnvFileError::BadName(number));
            }
            if variables.iter().any(|(known, _)| known == name) {
                return Err(EnvFileError::Duplicate(number));
            }
            if variables.len() == ENV_FILE_MAX_VARIABLES {
                return Err(EnvFileError::TooManyVariables);
            }
            variables.push((name.to_owned(), value.to_owned()));
        }
        Ok(Configuration { variables })
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.variables.iter().map(|(name, _)| name.as_str())
    }

    /// The values: for the log redaction only (module header).
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.variables.iter().map(|(_, value)| value.as_str())
    }

    pub fn len(&self) -> usize {
        self.variables.len()
    }

    pub fn is_empty(&self) -> bool {
        self.variables.is_empty()
    }
}

/// The host's secret key for [`env_file_hmac`] (`crate::host::env_files`
/// keeps it); `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct HashKey(pub [u8; 32]);

impl fmt::Debug for HashKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HashKey(..)")
    }
}

/// HMAC-SHA256 (RFC 2104) of an env file's bytes under `key`, lowercase
/// hex: what a plan records ([`EnvFileUse::hmac_sha256`]).
pub fn env_file_hmac(key: &HashKey, bytes: &[u8]) -> String {
    use sha2::Digest as _;
    let (mut inner_pad, mut outer_pad) = ([0x36u8; 64], [0x5cu8; 64]);
    for (i, byte) in key.0.iter().enumerate() {
        inner_pad[i] ^= byte;
        outer_pad[i] ^= byte;
    }
    let inner = sha2::Sha256::new().chain_update(inner_pad).chain_update(bytes).finalize();
    let outer = sha2::Sha256::new().chain_update(outer_pad).chain_update(inner).finalize();
    outer.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::{Configuration, ENV_FILE_MAX_BYTES, ENV_FILE_MAX_VARIABLES, EnvFileError, EnvFileName};

    fn parse(text: &str) -> Result<Configuration, EnvFileError> {
        Configuration::parse(text.as_bytes())
    }

    /// Tried: names, comments, empty lines, an empty value, '=' and quotes
    /// and spaces inside a value: each value is what follows the first '='.
    #[test]
    fn values_are_taken_verbatim_after_the_first_equals() {
        let config =
            parse("# db\nDATABASE_URL=postgres://a:b@db/x?y=1\n\nQUOTED=\"x y\" \nEMPTY=\n_k9=\tt\n")
                .unwrap();
        assert_eq!(config.names().collect::<Vec<_>>(), ["DATABASE_URL", "QUOTED", "EMPTY", "_k9"]);
        assert_eq!(config.values().collect::<Vec<_>>(), ["postgres://a:b@db/x?y=1", "\"x y\" ", "", "\tt"]);
        assert_eq!(parse("A=1").unwrap().len(), 1, "a last line without a newline counts");
        assert!(parse("").unwrap().is_empty());
    }

    /// Tried: every line shape two readers could take differently; each is
    /// refused naming its line.
    #[test]
    fn ambiguous_lines_are_refused_with_their_line_number() {
        assert_eq!(parse("A=1\n B=2").unwrap_err(), EnvFileError::LeadingSpace(2));
        assert_eq!(parse("\u{feff}A=1").unwrap_err(), EnvFileError::LeadingSpace(1));
        assert_eq!(parse("A=1\r\n").unwrap_err(), EnvFileError::ControlCharacter(1));
        assert_eq!(parse("A=x\u{1b}[2J").unwrap_err(), EnvFileError::ControlCharacter(1));
        assert_eq!(parse("A=1\nB").unwrap_err(), EnvFileError::NoEquals(2));
        assert_eq!(parse("export A=1").unwrap_err(), EnvFileError::BadName(1));
        assert_eq!(parse("1A=1").unwrap_err(), EnvFileError::BadName(1));
        assert_eq!(parse("A-B=1").unwrap_err(), EnvFileError::BadName(1));
        assert_eq!(parse("=1").unwrap_err(), EnvFileError::BadName(1));
        assert_eq!(parse(&format!("{}=1", "N".repeat(65))).unwrap_err(), EnvFileError::BadName(1));
        assert_eq!(parse("A=1\nB=2\nA=3").unwrap_err(), EnvFileError::Duplicate(3));
        assert_eq!(Configuration::parse(b"A=\xff").unwrap_err(), EnvFileError::NotUtf8);
    }

    /// Tried: one byte past the size bound, one variable past the count
    /// bound; both refused, the bounds themselves accepted.
    #[test]
    fn size_and_count_are_bounded() {
        let at_bound = format!("A={}", "x".repeat(ENV_FILE_MAX_BYTES - 2));
        assert!(parse(&at_bound).is_ok());
        assert_eq!(parse(&format!("{at_bound}x")).unwrap_err(), EnvFileError::TooLarge);
        let many = |n: usize| (0..n).map(|i| format!("V{i}=1\n")).collect::<String>();
        assert!(parse(&many(ENV_FILE_MAX_VARIABLES)).is_ok());
        assert_eq!(parse(&many(ENV_FILE_MAX_VARIABLES + 1)).unwrap_err(), EnvFileError::TooManyVariables);
    }

    /// Tried: printing a configuration and every error: no value appears.
    #[test]
    fn debug_and_errors_never_show_a_value() {
        let config = parse("TOKEN=s3cr3t-value").unwrap();
        assert_eq!(format!("{config:?}"), r#"["TOKEN"]"#);
        for text in [
            "TOKEN=s3cr3t-value\nTOKEN=s3cr3t-value",
            "TOKEN=s3cr3t-value\r",
            "TOKEN=s3cr3t-value\ns3cr3t-value",
        ] {
            let error = parse(text).unwrap_err().to_string();
            assert!(!error.contains("s3cr3t"), "{error}");
        }
    }

    /// Tried: the policy's path forms: only a plain name directly in the
    /// fixed directory is one.
    #[test]
    fn only_a_file_directly_in_the_env_dir_is_an_env_file() {
        let name = EnvFileName::from_policy_path("/etc/volce-lab/apps/shop.env").unwrap();
        assert_eq!(name.as_str(), "shop.env");
        assert_eq!(name.policy_path(), "/etc/volce-lab/apps/shop.env");
        for path in [
            "shop.env",
            "/etc/volce-lab/apps/",
            "/etc/volce-lab/apps/../policy.json",
            "/etc/volce-lab/apps/sub/shop.env",
            "/etc/volce-lab/appsx/shop.env",
            "/etc/volce-lab/apps/.hidden",
            "/etc/volce-lab/apps/Shop.env",
            "/tmp/shop.env",
        ] {
            assert!(EnvFileName::from_policy_path(path).is_none(), "{path}");
        }
    }
}
