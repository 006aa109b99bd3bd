//! Workstation-side configuration, read from the environment once and
//! validated before anything runs. Runs unprivileged.
//!
//! Every value here ends up either in an ssh argv or in a comparison with what
//! a server says about itself, so each one is held to a strict shape: a bad
//! value stops the program with one sentence naming the variable.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

mod fleet;
mod ssh_hosts;
mod targets;

pub use fleet::{DEFAULT_FAN_OUT, Fleet, FleetTarget};
pub use ssh_hosts::SshConfigFiles;
pub use targets::{MAX_TARGETS, TargetEntry};

/// Where the checks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, strum::IntoStaticStr, strum::VariantArray)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Mode {
    /// Simulated answers; no process is started and no network is used.
    Demo,
    /// The checks run on this machine (an MCP server that lives on the server).
    Local,
    /// The checks run on the configured ssh alias.
    Ssh,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Validated configuration of the workstation side.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub mode: Mode,
    pub ssh_alias: String,
    pub ssh_config: Option<PathBuf>,
    pub expected_host: String,
    pub expected_user: String,
    pub timeout: Duration,
    pub management: bool,
    /// Where `management` is set: what a `management_disabled` answer
    /// tells the user to change.
    pub management_switch: ManagementSwitch,
    /// The ssh-agent socket ssh may use (`SSH_AUTH_SOCK`), for a key with a
    /// passphrase: kept only when the variable holds an absolute path to a
    /// socket, else dropped (a stale value must not stop the server, and
    /// ssh without an agent fails with the stable authentication code).
    /// No `VOLCE_LAB_*` switch opts into it: the variable reaches us only
    /// from the environment the MCP client was given, which the user wrote
    /// (its `env` block) or the session where they started the agent; a
    /// second switch would guard nothing, and ssh uses the socket only to
    /// authenticate (never forwarded: `ForwardAgent=no` in the argv).
    pub ssh_auth_sock: Option<PathBuf>,
}

/// Where a target's management switch is set. Issue 37: a call refused
/// `management_disabled` named `VOLCE_LAB_MANAGEMENT` to a user of a targets
/// file, where that variable must stay unset; the answer names this instead.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ManagementSwitch {
    /// `VOLCE_LAB_MANAGEMENT`, or its absence (one target).
    #[default]
    Variable,
    /// The `management` key of the target's table in the targets file.
    TargetsFile { path: PathBuf, target: String },
}

/// The words that set the management switch, in `VOLCE_LAB_MANAGEMENT` and
/// as a string for the targets file's `management` (which also takes a
/// TOML boolean): on or off, each spelled two ways, so that what one place
/// takes the other takes too (issue 37). Exactly these, lowercase: the
/// switch lets an agent change servers, so it is turned on only by a word
/// that means nothing else, and any other spelling (`yes`, `1`, `on`,
/// `TRUE`, ...) is refused with this list rather than guessed at.
pub const MANAGEMENT_WORDS: &str = "enabled, disabled, true or false";

/// Whether `word` switches management on (`Some(true)`), off, or is none
/// of [`MANAGEMENT_WORDS`] (`None`).
pub fn management_word(word: &str) -> Option<bool> {
    match word {
        "enabled" | "true" => Some(true),
        "disabled" | "false" => Some(false),
        _ => None,
    }
}

/// A configuration value that was refused, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub variable: &'static str,
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid configuration: {} {}", self.variable, self.reason)
    }
}

impl std::error::Error for ConfigError {}

pub const DEFAULT_ALIAS: &str = "course-demo";
pub const DEFAULT_TIMEOUT_SECS: f64 = 12.0;
const DEMO_HOST: &str = "demo-host";
const DEMO_USER: &str = "deploy";

impl Default for Config {
    /// The demo configuration a newcomer gets with no variables set.
    fn default() -> Self {
        Config {
            mode: Mode::Demo,
            ssh_alias: DEFAULT_ALIAS.to_owned(),
            ssh_config: None,
            expected_host: DEMO_HOST.to_owned(),
            expected_user: DEMO_USER.to_owned(),
            timeout: Duration::from_secs_f64(DEFAULT_TIMEOUT_SECS),
            management: false,
            management_switch: ManagementSwitch::Variable,
            ssh_auth_sock: None,
        }
    }
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|name| std::env::var_os(name))
    }

    /// Reads configuration through `lookup`, so tests can supply a table.
    /// Each variable is read and checked in turn; the first refused one is
    /// the error.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Result<Config, ConfigError> {
        let get = |variable: &'static str| variable_of(&lookup, variable);
        let mode = mode_of(get("VOLCE_LAB_MODE")?)?;
        let ssh_alias = alias_of(get("VOLCE_LAB_SSH_ALIAS")?)?;
        let ssh_config = get("VOLCE_LAB_SSH_CONFIG")?.map(|path| validate_ssh_config(&path)).transpose()?;
        let expected_host =
            expected_of("VOLCE_LAB_EXPECTED_HOST", get("VOLCE_LAB_EXPECTED_HOST")?, mode, DEMO_HOST)?;
        let expected_user =
            expected_of("VOLCE_LAB_EXPECTED_USER", get("VOLCE_LAB_EXPECTED_USER")?, mode, DEMO_USER)?;
        // The agent's account must not be root: every boundary of the design
        // (sudoers rule, root-owned state) means nothing to root.
        if expected_user == "root" {
            return Err(ConfigError {
                variable: "VOLCE_LAB_EXPECTED_USER",
                reason: "must not be root; use an unprivileged account for the agent".into(),
            });
        }
        let timeout = timeout_of(get("VOLCE_LAB_TIMEOUT")?)?;
        let management = management_of(get("VOLCE_LAB_MANAGEMENT")?)?;
        let ssh_auth_sock = lookup("SSH_AUTH_SOCK").map(PathBuf::from).filter(|path| is_agent_socket(path));
        Ok(Config {
            mode,
            ssh_alias,
            ssh_config,
            expected_host,
            expected_user,
            timeout,
            management,
            management_switch: ManagementSwitch::Variable,
            ssh_auth_sock,
        })
    }

    /// The name results use for the target: the alias in ssh mode.
    pub fn target(&self) -> &str {
        match self.mode {
            Mode::Ssh => &self.ssh_alias,
            Mode::Local => "localhost",
            Mode::Demo => "demo",
        }
    }
}

/// One variable as text: unset is `None`; set but empty, or not UTF-8, is
/// refused (an empty value is a mistake, not a way to unset).
fn variable_of(
    lookup: &impl Fn(&str) -> Option<OsString>,
    variable: &'static str,
) -> Result<Option<String>, ConfigError> {
    match lookup(variable) {
        None => Ok(None),
        Some(raw) => match raw.into_string() {
            Ok(value) if value.is_empty() => {
                Err(ConfigError { variable, reason: "is set but empty; unset it or give a value".into() })
            }
            Ok(value) => Ok(Some(value)),
            Err(_) => Err(ConfigError { variable, reason: "is not valid UTF-8".into() }),
        },
    }
}

/// `VOLCE_LAB_MODE`: demo unless set.
fn mode_of(value: Option<String>) -> Result<Mode, ConfigError> {
    let Some(text) = value else { return Ok(Mode::Demo) };
    <Mode as strum::VariantArray>::VARIANTS.iter().copied().find(|mode| mode.as_str() == text).ok_or_else(
        || ConfigError {
            variable: "VOLCE_LAB_MODE",
            reason: format!("must be demo, local or ssh (got {})", quoted(&text)),
        },
    )
}

/// `VOLCE_LAB_SSH_ALIAS`: [`DEFAULT_ALIAS`] unless set.
fn alias_of(value: Option<String>) -> Result<String, ConfigError> {
    match value {
        None => Ok(DEFAULT_ALIAS.to_owned()),
        Some(alias) if is_alias(&alias) => Ok(alias),
        Some(alias) => Err(ConfigError {
            variable: "VOLCE_LAB_SSH_ALIAS",
            reason: format!(
                "must be an ssh_config alias: a letter or digit, then up to 63 letters, digits, '_' or '-' (got {})",
                quoted(&alias)
            ),
        }),
    }
}

/// One half of the expected identity. Outside demo mode it must be stated:
/// inheriting a default would make the identity gate compare against a
/// guess.
fn expected_of(
    variable: &'static str,
    value: Option<String>,
    mode: Mode,
    demo_default: &str,
) -> Result<String, ConfigError> {
    let value = match value {
        Some(value) => value,
        None if mode == Mode::Demo => demo_default.to_owned(),
        None => {
            return Err(ConfigError {
                variable,
                reason: format!(
                    "is required in {} mode: the exact answer the server gives, checked before every call",
                    mode.as_str()
                ),
            });
        }
    };
    if !is_identifier(&value) {
        return Err(ConfigError {
            variable,
            reason: format!(
                "must be a simple name: letters, digits, '_', '.' or '-', not starting with '.' or '-' (got {})",
                quoted(&value)
            ),
        });
    }
    Ok(value)
}

/// `VOLCE_LAB_TIMEOUT`: seconds from 1 to 30, [`DEFAULT_TIMEOUT_SECS`]
/// unless set.
fn timeout_of(value: Option<String>) -> Result<Duration, ConfigError> {
    let Some(text) = value else { return Ok(Duration::from_secs_f64(DEFAULT_TIMEOUT_SECS)) };
    match text.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && (1.0..=30.0).contains(&secs) && text.trim() == text => {
            Ok(Duration::from_secs_f64(secs))
        }
        _ => Err(ConfigError {
            variable: "VOLCE_LAB_TIMEOUT",
            reason: format!("must be a number of seconds from 1 to 30 (got {})", quoted(&text)),
        }),
    }
}

/// `VOLCE_LAB_MANAGEMENT`: off unless set to `enabled` or `true`.
fn management_of(value: Option<String>) -> Result<bool, ConfigError> {
    let Some(text) = value else { return Ok(false) };
    management_word(&text).ok_or_else(|| ConfigError {
        variable: "VOLCE_LAB_MANAGEMENT",
        reason: format!("must be {MANAGEMENT_WORDS} (got {})", quoted(&text)),
    })
}

/// `^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`: never an option (`-F`), never a
/// `user@host` or anything ssh would parse beyond an alias.
pub fn is_alias(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
}

/// A host or user name as `hostname` and `id -un` print it.
pub fn is_identifier(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 253
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// `SSH_AUTH_SOCK` as ssh may be given it: an absolute path, no control
/// character, naming a unix socket. Nothing else of the caller's
/// environment reaches ssh (`crate::exec::minimal_env`).
pub fn is_agent_socket(path: &std::path::Path) -> bool {
    use std::os::unix::fs::FileTypeExt as _;
    path.is_absolute()
        && !path.as_os_str().as_encoded_bytes().iter().any(u8::is_ascii_control)
        && std::fs::metadata(path).is_ok_and(|meta| meta.file_type().is_socket())
}

fn validate_ssh_config(path: &str) -> Result<PathBuf, ConfigError> {
    let refuse = |reason: String| ConfigError { variable: "VOLCE_LAB_SSH_CONFIG", reason };
    if !path.starts_with('/') || path.chars().any(char::is_control) {
        return Err(refuse(format!("must be an absolute path to an ssh_config file (got {})", quoted(path))));
    }
    let metadata = std::fs::metadata(path)
        .map_err(|_| refuse(format!("names a file that cannot be read (got {})", quoted(path))))?;
    if !metadata.is_file() {
        return Err(refuse(format!("must name a regular file (got {})", quoted(path))));
    }
    Ok(PathBuf::from(path))
}

/// Shows a refused value safely: control characters escaped, length capped.
pub(crate) fn quoted(value: &str) -> String {
    let shown: String = value.chars().take(80).collect();
    let ellipsis = if value.chars().count() > 80 { "..." } else { "" };
    format!("\"{}{}\"", shown.escape_debug(), ellipsis)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let table: Vec<(String, String)> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_lookup(|name| table.iter().find(|(k, _)| k == name).map(|(_, v)| OsString::from(v)))
    }

    const SSH_OK: [(&str, &str); 3] = [
        ("VOLCE_LAB_MODE", "ssh"),
        ("VOLCE_LAB_EXPECTED_HOST", "web-1"),
        ("VOLCE_LAB_EXPECTED_USER", "agent"),
    ];

    fn ssh_with(variable: &str, value: &str) -> Result<Config, ConfigError> {
        let mut pairs: Vec<(&str, &str)> = SSH_OK.to_vec();
        pairs.retain(|(k, _)| *k != variable);
        pairs.push((variable, value));
        load(&pairs)
    }

    /// Issue 37: the targets file took `management = true` while the
    /// variable refused `true`. Tried: the four words both places take, and
    /// the spellings a user might guess (yes/no, 1/0, on/off, other cases,
    /// blanks around a word): refused, the error listing what is accepted.
    #[test]
    fn management_takes_enabled_disabled_true_and_false_and_lists_them_otherwise() {
        for (word, on) in [("enabled", true), ("true", true), ("disabled", false), ("false", false)] {
            let config = ssh_with("VOLCE_LAB_MANAGEMENT", word).unwrap();
            assert_eq!(config.management, on, "{word}");
            assert_eq!(config.management_switch, ManagementSwitch::Variable);
        }
        assert!(!load(&SSH_OK).unwrap().management, "off unless set");
        for word in ["yes", "no", "1", "0", "on", "off", "TRUE", "Enabled", " true", "enable"] {
            let error = ssh_with("VOLCE_LAB_MANAGEMENT", word).expect_err(word);
            assert!(error.reason.contains("must be enabled, disabled, true or false"), "{error}");
        }
    }

    /// SSH_AUTH_SOCK is kept only as an absolute path to a socket; any
    /// other value is dropped without refusing the configuration.
    #[test]
    fn ssh_auth_sock_is_kept_only_when_it_names_a_socket() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("agent.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, "").unwrap();
        let config = ssh_with("SSH_AUTH_SOCK", socket.to_str().unwrap()).unwrap();
        assert_eq!(config.ssh_auth_sock.as_deref(), Some(socket.as_path()));
        for dropped in [file.to_str().unwrap(), "agent.sock", "/nonexistent/agent.sock", ""] {
            let config = ssh_with("SSH_AUTH_SOCK", dropped).unwrap();
            assert_eq!(config.ssh_auth_sock, None, "{dropped:?}");
        }
        assert_eq!(load(&SSH_OK).unwrap().ssh_auth_sock, None);
    }

    #[test]
    fn no_variables_gives_demo() {
        let config = load(&[]).unwrap();
        assert_eq!(config, Config::default());
        assert_eq!(config.mode, Mode::Demo);
        assert_eq!(config.timeout, Duration::from_secs(12));
        assert!(!config.management);
    }

    #[test]
    fn valid_ssh_configuration_loads() {
        let config = ssh_with("VOLCE_LAB_TIMEOUT", "2.5").unwrap();
        assert_eq!(config.mode, Mode::Ssh);
        assert_eq!(config.ssh_alias, "course-demo");
        assert_eq!(config.expected_host, "web-1");
        assert_eq!(config.timeout, Duration::from_millis(2500));
        assert_eq!(config.target(), "course-demo");
    }

    #[test]
    fn every_bad_value_is_refused_naming_its_variable() {
        let table: &[(&str, &str)] = &[
            ("VOLCE_LAB_MODE", "prod"),
            ("VOLCE_LAB_MODE", "SSH"),
            ("VOLCE_LAB_MODE", ""),
            ("VOLCE_LAB_SSH_ALIAS", "-F"),
            ("VOLCE_LAB_SSH_ALIAS", "-oProxyCommand=id"),
            ("VOLCE_LAB_SSH_ALIAS", "user@host"),
            ("VOLCE_LAB_SSH_ALIAS", "host;id"),
            ("VOLCE_LAB_SSH_ALIAS", "../x"),
            ("VOLCE_LAB_SSH_ALIAS", "host\n"),
            ("VOLCE_LAB_SSH_ALIAS", "host name"),
            ("VOLCE_LAB_SSH_ALIAS", "_host"),
            ("VOLCE_LAB_SSH_ALIAS", &"a".repeat(65)),
            ("VOLCE_LAB_SSH_CONFIG", "relative/config"),
            ("VOLCE_LAB_SSH_CONFIG", "-F"),
            ("VOLCE_LAB_SSH_CONFIG", "/nonexistent/ssh_config"),
            ("VOLCE_LAB_SSH_CONFIG", "/"),
            ("VOLCE_LAB_EXPECTED_HOST", "host;id"),
            ("VOLCE_LAB_EXPECTED_HOST", "host\nother"),
            ("VOLCE_LAB_EXPECTED_HOST", "-host"),
            ("VOLCE_LAB_EXPECTED_HOST", "../x"),
            ("VOLCE_LAB_EXPECTED_HOST", "$(id)"),
            ("VOLCE_LAB_EXPECTED_USER", "root"),
            ("VOLCE_LAB_EXPECTED_USER", "user@host"),
            ("VOLCE_LAB_EXPECTED_USER", "a b"),
            ("VOLCE_LAB_TIMEOUT", "NaN"),
            ("VOLCE_LAB_TIMEOUT", "nan"),
            ("VOLCE_LAB_TIMEOUT", "inf"),
            ("VOLCE_LAB_TIMEOUT", "-inf"),
            ("VOLCE_LAB_TIMEOUT", "0"),
            ("VOLCE_LAB_TIMEOUT", "0.5"),
            ("VOLCE_LAB_TIMEOUT", "31"),
            ("VOLCE_LAB_TIMEOUT", "-5"),
            ("VOLCE_LAB_TIMEOUT", "12s"),
            ("VOLCE_LAB_TIMEOUT", " 12"),
            ("VOLCE_LAB_TIMEOUT", "1e9"),
            ("VOLCE_LAB_MANAGEMENT", "yes"),
        ];
        for (variable, value) in table {
            let error =
                ssh_with(variable, value).expect_err(&format!("{variable}={value:?} must be refused"));
            assert_eq!(&error.variable, variable, "{variable}={value:?}");
            assert!(error.to_string().contains(variable), "{error}");
            assert!(!error.to_string().contains('\n'), "one line: {error}");
        }
    }

    #[test]
    fn ssh_and_local_need_an_explicit_identity() {
        for mode in ["ssh", "local"] {
            let error = load(&[("VOLCE_LAB_MODE", mode), ("VOLCE_LAB_EXPECTED_USER", "agent")]).unwrap_err();
            assert_eq!(error.variable, "VOLCE_LAB_EXPECTED_HOST");
            let error = load(&[("VOLCE_LAB_MODE", mode), ("VOLCE_LAB_EXPECTED_HOST", "web")]).unwrap_err();
            assert_eq!(error.variable, "VOLCE_LAB_EXPECTED_USER");
        }
    }

    #[test]
    fn root_is_refused_as_expected_user_in_every_mode() {
        for mode in ["demo", "local", "ssh"] {
            let error = load(&[
                ("VOLCE_LAB_MODE", mode),
                ("VOLCE_LAB_EXPECTED_HOST", "web"),
                ("VOLCE_LAB_EXPECTED_USER", "root"),
            ])
            .unwrap_err();
            assert_eq!(error.variable, "VOLCE_LAB_EXPECTED_USER");
        }
    }

    #[test]
    fn refused_values_are_escaped_in_the_message() {
        let error = ssh_with("VOLCE_LAB_SSH_ALIAS", "a\u{1b}[31mb").unwrap_err();
        assert!(!error.to_string().contains('\u{1b}'));
    }

    #[test]
    fn boundaries_of_the_timeout_are_accepted() {
        assert_eq!(ssh_with("VOLCE_LAB_TIMEOUT", "1").unwrap().timeout, Duration::from_secs(1));
        assert_eq!(ssh_with("VOLCE_LAB_TIMEOUT", "30").unwrap().timeout, Duration::from_secs(30));
    }
}
