//! Accessories (issue 40): a service an app needs beside it, a database
//! say, that the operator declares once in the policy ([`AccessorySpec`])
//! and an app's catalog entry names with the variables that tell the app
//! where it is ([`EnvTemplate`]). What a plan records of one is
//! [`AccessoryUse`]. Pure data and its validation.
//!
//! Why templates and not values: the accessory's credential is generated
//! on the host when its data is first made and never leaves it (not in a
//! plan, a result, the inventory or the audit). The policy says where it
//! goes (`{password}`), the helper fills it in as root into the two env
//! files docker reads, and everything the agent can see carries only the
//! placeholder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{AppName, DataUse, ImageRef, NAME_PREFIX, TaskArgv, is_name};

/// The role label of an accessory's container (`super::LABEL_ROLE`).
pub const ACCESSORY_ROLE: &str = "accessory";

/// The most accessories one policy declares, and one entry names.
pub const MAX_ACCESSORIES: usize = 8;
/// The most variables one template sets, and the most bytes of one value.
pub const TEMPLATE_MAX_VARIABLES: usize = 32;
pub const TEMPLATE_VALUE_MAX_BYTES: usize = 1024;
/// The placeholders a template value may hold, each filled in by the helper.
pub const PLACEHOLDERS: [&str; 3] = ["{password}", "{host}", "{port}"];

/// An accessory's name in the policy: `^[a-z][a-z0-9-]{0,23}$`. It is also
/// the accessory's network alias on the app's private network (`{host}`),
/// and part of its container's name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AccessoryName(String);

impl AccessoryName {
    pub fn parse(value: &str) -> Option<AccessoryName> {
        is_name(value, 24).then(|| AccessoryName(value.to_owned()))
    }
}

super::string_form::string_form!(
    AccessoryName,
    "an accessory name must be a lowercase letter, then at most 23 lowercase letters, digits and '-'"
);

/// Variables to set, each value a template of fixed text and
/// [`PLACEHOLDERS`]. A literal `{` or `}` elsewhere is refused, so a typo
/// in a placeholder is an error at policy load, never a variable that
/// silently lacks its password.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "BTreeMap<String, String>", into = "BTreeMap<String, String>")]
pub struct EnvTemplate(BTreeMap<String, String>);

impl EnvTemplate {
    /// `None` names what is wrong, in the policy's words.
    pub fn parse(variables: BTreeMap<String, String>) -> Result<EnvTemplate, String> {
        if variables.len() > TEMPLATE_MAX_VARIABLES {
            return Err(format!("it sets {} variables (at most {TEMPLATE_MAX_VARIABLES})", variables.len()));
        }
        for (name, value) in &variables {
            if !super::env_file::is_env_name(name) {
                return Err(format!("{name:?} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)"));
            }
            if value.len() > TEMPLATE_VALUE_MAX_BYTES || value.chars().any(char::is_control) {
                return Err(format!(
                    "the value of {name} is longer than {TEMPLATE_VALUE_MAX_BYTES} bytes or holds a control \
                     character"
                ));
            }
            let rest = PLACEHOLDERS.iter().fold(value.clone(), |rest, p| rest.replace(p, ""));
            if rest.contains(['{', '}']) {
                return Err(format!(
                    "the value of {name} holds a brace that is not one of {}",
                    PLACEHOLDERS.join(", ")
                ));
            }
        }
        Ok(EnvTemplate(variables))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// The env file's text with the placeholders filled in: `NAME=value`
    /// lines, the grammar docker's `--env-file` reads verbatim. The values
    /// hold no control character (checked at parse), the password is hex,
    /// the host a name and the port digits, so no line can break in two.
    pub fn render(&self, password: &Secret, host: &AccessoryName, port: u16) -> String {
        self.0
            .iter()
            .map(|(name, value)| {
                let value = value
                    .replace("{password}", password.expose())
                    .replace("{host}", host.as_str())
                    .replace("{port}", &port.to_string());
                format!("{name}={value}\n")
            })
            .collect()
    }
}

impl TryFrom<BTreeMap<String, String>> for EnvTemplate {
    type Error = String;
    fn try_from(variables: BTreeMap<String, String>) -> Result<EnvTemplate, String> {
        EnvTemplate::parse(variables)
    }
}

impl From<EnvTemplate> for BTreeMap<String, String> {
    fn from(template: EnvTemplate) -> BTreeMap<String, String> {
        template.0
    }
}

/// A generated credential: 32 random bytes as 64 lowercase hex characters
/// (safe in a URL, an env file and a connection string without quoting).
/// No `Debug`, `Display` or serde: it reaches a file and nothing else.
pub struct Secret(String);

impl Secret {
    /// Its length in characters.
    pub const CHARS: usize = 64;

    /// From the bytes of a secret file: exactly [`Secret::CHARS`] lowercase
    /// hex characters and an optional final newline.
    pub fn parse(bytes: &[u8]) -> Option<Secret> {
        let text = std::str::from_utf8(bytes).ok()?;
        let text = text.strip_suffix('\n').unwrap_or(text);
        crate::text::is_lower_hex(text, Secret::CHARS).then(|| Secret(text.to_owned()))
    }

    /// From 32 random bytes.
    pub fn from_random(bytes: &[u8; 32]) -> Secret {
        Secret(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// The policy's `accessories.<name>`: the pinned image, the port it
/// listens on (on the app's private network only, never published), its
/// data directory and cap, the command that says it is ready, and the
/// variables it needs (its credential among them, as `{password}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessorySpec {
    pub image: ImageRef,
    pub port: u16,
    pub data: super::DataSpec,
    pub health: TaskArgv,
    #[serde(default, skip_serializing_if = "EnvTemplate::is_empty")]
    pub env: EnvTemplate,
    /// The command that changes its credential in place (run in its
    /// container with the current and the new one as [`ROTATE_FROM`] and
    /// [`ROTATE_TO`]); without it no rotate_credential plan is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotate: Option<TaskArgv>,
    /// The command that writes its data to stdout as one dump (run in its
    /// container with its credential as [`CREDENTIAL`]), which a backup
    /// streams into the repository; `load` reads such a dump on stdin and
    /// puts it in place, all or nothing. The policy declares both or
    /// neither (docs/policy.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dump: Option<TaskArgv>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<TaskArgv>,
}

/// The variable that hands an accessory's own commands (`rotate`, `dump`,
/// `load`) the credential it has now.
pub const CREDENTIAL: &str = "VOLCE_LAB_PASSWORD";
/// The variables an accessory's `rotate` command gets: the credential it
/// has now, and the one it is to take.
pub const ROTATE_FROM: &str = CREDENTIAL;
pub const ROTATE_TO: &str = "VOLCE_LAB_NEW_PASSWORD";

/// What a plan records of one accessory of an app: everything the engine
/// needs to create it and to tell the app where it is, with the
/// credential's placeholder only. Derived by the controller from the
/// policy and the app's name; the paths are the app's own under the state
/// directory ([`AccessoryUse::secret_of`], [`AccessoryUse::env_file_of`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessoryUse {
    pub name: AccessoryName,
    pub image: ImageRef,
    pub port: u16,
    /// `vl-<app>-<name>`.
    pub container_name: String,
    pub data: DataUse,
    pub health: TaskArgv,
    /// The accessory's own variables.
    #[serde(default, skip_serializing_if = "EnvTemplate::is_empty")]
    pub env: EnvTemplate,
    /// The app's variables that say where this accessory is.
    #[serde(default, skip_serializing_if = "EnvTemplate::is_empty")]
    pub app_env: EnvTemplate,
}

impl AccessoryUse {
    /// `vl-<app>-<name>`: never one of the app's own container names, since
    /// those end in `-app`, `-gateway`, `-check` and `-task-<hex>`, which
    /// [`accessory_name_ok`] keeps an accessory from being called.
    pub fn container_name(app: &AppName, name: &AccessoryName) -> String {
        format!("{NAME_PREFIX}{app}-{name}")
    }

    /// The data image and mount point of `name` for `app` in `data_dir`:
    /// `<app>@<name>.ext4` on `<app>@<name>`, which no app's own can be
    /// (an app name has no `@`).
    pub fn data_paths(data_dir: &Path, app: &AppName, name: &AccessoryName) -> (PathBuf, PathBuf) {
        let base = AccessoryUse::data_key(app, name);
        (data_dir.join(format!("{base}.ext4")), data_dir.join(base))
    }

    /// `<app>@<name>`: what its data's files are called, and the name the
    /// operator's `data` commands and doctor give it.
    pub fn data_key(app: &AppName, name: &AccessoryName) -> String {
        format!("{app}@{name}")
    }

    /// The credential's file ([`secret_beside`] its data image).
    pub fn secret_of(&self) -> PathBuf {
        secret_beside(&self.data.image)
    }

    /// Where a rotation keeps the new credential until the app runs with
    /// it ([`pending_secret_beside`] its data image).
    pub fn pending_secret_of(&self) -> PathBuf {
        pending_secret_beside(&self.data.image)
    }

    /// The env file a rotation hands its `rotate` command, in the app's
    /// directory, only while the command runs.
    pub fn rotate_env_of(&self, app_dir: &Path) -> PathBuf {
        app_dir.join(format!("rotate-{}.env", self.name))
    }

    /// The env file a backup or a restore hands the `dump` or `load`
    /// command, in the app's directory, only while it runs.
    pub fn dump_env_of(&self, app_dir: &Path) -> PathBuf {
        app_dir.join(format!("dump-{}.env", self.name))
    }

    /// The accessory's rendered env file in the app's directory.
    pub fn env_file_of(&self, app_dir: &Path) -> PathBuf {
        app_dir.join(format!("accessory-{}.env", self.name))
    }
}

/// An accessory a start or restart starts before the app (after a stop
/// plan stopped it with the app): its recorded container and how to tell
/// it is ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessoryStart {
    pub container: super::ContainerId,
    pub accessory: AccessoryUse,
}

/// An accessory's credential file: beside the data image it unlocks
/// (`<app>@<name>.secret`), so it is kept and purged with it.
pub fn secret_beside(image: &Path) -> PathBuf {
    image.with_extension("secret")
}

/// A rotation's new credential until it is the credential
/// (`<app>@<name>.secret.new`): kept and purged with the data too.
pub fn pending_secret_beside(image: &Path) -> PathBuf {
    image.with_extension("secret.new")
}

/// The app's rendered env file of its accessories' variables, in the app's
/// directory: given to every container of the app's image (the app, its
/// tasks) after the operator's own env file.
pub fn accessories_env_of(app_dir: &Path) -> PathBuf {
    app_dir.join("accessories.env")
}

/// Whether a file name in an app's directory is one of the env files
/// above: what remove_app and a failed deploy's rollback may delete there.
pub fn is_accessory_env_file(name: &str) -> bool {
    // A rotation replaces each through a `.new` copy, and hands its
    // command a `rotate-<name>.env` (a dump or a load, `dump-<name>.env`):
    // a helper stopped in between leaves one.
    let name = name.strip_suffix(".new").unwrap_or(name);
    let of_accessory = |prefix: &str| {
        name.strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(".env"))
            .is_some_and(|accessory| AccessoryName::parse(accessory).is_some())
    };
    name == "accessories.env"
        || of_accessory("accessory-")
        || of_accessory("rotate-")
        || of_accessory("dump-")
}

/// Names an accessory may not take: those that would make its container's
/// name one of the app's own (`vl-<app>-app`, `-gateway`, `-check`, and the
/// task and update containers' `-task-...`, `-app-...`).
pub fn accessory_name_ok(name: &AccessoryName) -> bool {
    let n = name.as_str();
    !matches!(n, "app" | "gateway" | "check" | "task") && !n.starts_with("app-") && !n.starts_with("task-")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(pairs: &[(&str, &str)]) -> Result<EnvTemplate, String> {
        EnvTemplate::parse(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect())
    }

    #[test]
    fn a_template_fills_in_its_placeholders_and_refuses_stray_braces() {
        let url = template(&[("DATABASE_URL", "postgresql://app:{password}@{host}:{port}/app")]).unwrap();
        let secret = Secret::from_random(&[0xab; 32]);
        let host = AccessoryName::parse("db").unwrap();
        assert_eq!(
            url.render(&secret, &host, 5432),
            format!("DATABASE_URL=postgresql://app:{}@db:5432/app\n", "ab".repeat(32))
        );
        // Tried: a misspelt placeholder, a lone brace, a newline, a bad name.
        assert!(template(&[("URL", "x{passwd}")]).unwrap_err().contains("brace"));
        assert!(template(&[("URL", "x}")]).is_err());
        assert!(template(&[("URL", "a\nB=c")]).unwrap_err().contains("control"));
        assert!(template(&[("1URL", "x")]).unwrap_err().contains("variable name"));
    }

    #[test]
    fn a_secret_is_exactly_64_lowercase_hex() {
        let hex = "0f".repeat(32);
        assert_eq!(Secret::parse(format!("{hex}\n").as_bytes()).unwrap().expose(), hex);
        assert!(Secret::parse(hex.to_uppercase().as_bytes()).is_none());
        assert!(Secret::parse(&hex.as_bytes()[1..]).is_none());
    }

    /// Tried: each env file a deploy, a rotation or a dump writes in the app's
    /// directory, and names that only look like them.
    #[test]
    fn the_accessory_env_files_are_known_by_name() {
        for ours in [
            "accessories.env",
            "accessory-db.env",
            "rotate-db.env",
            "dump-db.env",
            "accessories.env.new",
            "accessory-db.env.new",
        ] {
            assert!(is_accessory_env_file(ours), "{ours}");
        }
        for other in [
            "nginx.conf",
            "accessory-.env",
            "rotate-Db.env",
            "dump-.env",
            "accessory-db.env.old",
            "db.env",
            "x.new",
        ] {
            assert!(!is_accessory_env_file(other), "{other}");
        }
    }

    #[test]
    fn an_accessory_never_takes_an_app_container_name() {
        for taken in ["app", "gateway", "check", "task", "app-1", "task-x"] {
            assert!(!accessory_name_ok(&AccessoryName::parse(taken).unwrap()), "{taken}");
        }
        assert!(accessory_name_ok(&AccessoryName::parse("postgres15").unwrap()));
        assert!(AccessoryName::parse("Db").is_none() && AccessoryName::parse(&"a".repeat(25)).is_none());
    }
}
