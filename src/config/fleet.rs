//! The fleet: every server one workstation speaks to, from the targets
//! file or from the single-target variables, each alias checked against
//! the ssh_config before any ssh runs. Reads files; runs unprivileged.

use std::ffi::OsString;
use std::path::PathBuf;

use super::{Config, ConfigError, ManagementSwitch, Mode, SshConfigFiles, quoted, targets};

/// One server of the workstation's fleet: its name (what tools take as
/// `target`), its groups (`@group` in a fan-out) and its own configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetTarget {
    pub name: String,
    pub groups: Vec<String>,
    pub config: Config,
}

/// The servers one `volce-lab mcp-serve` speaks to: the targets file's
/// (`VOLCE_LAB_TARGETS`), or the one target the single-target variables
/// give (named by its alias; local and demo mode are one target too).
#[derive(Debug, Clone, PartialEq)]
pub struct Fleet {
    targets: Vec<FleetTarget>,
    /// How many checks of a fan-out run at once (`VOLCE_LAB_FAN_OUT`).
    pub fan_out: usize,
}

/// The fan-out's default width, and its highest allowed value. A check over
/// masters already up costs the workstation one channel (about 0.2 ms of CPU
/// a target), so the width only bounds how many ssh logins start at once on
/// the first call; 20 makes a fleet of up to 20 servers one wave of round
/// trips instead of three of 8 (3.57x one target's time over 20, issue 44).
pub const DEFAULT_FAN_OUT: usize = 20;
const MAX_FAN_OUT: usize = 32;

/// The single-target variables a targets file replaces, per target.
const PER_TARGET: [&str; 4] =
    ["VOLCE_LAB_SSH_ALIAS", "VOLCE_LAB_EXPECTED_HOST", "VOLCE_LAB_EXPECTED_USER", "VOLCE_LAB_MANAGEMENT"];

impl Fleet {
    /// One target (what tests and the single-target variables give).
    pub fn one(config: Config) -> Fleet {
        let name = config.target().to_owned();
        Fleet { targets: vec![FleetTarget { name, groups: Vec::new(), config }], fan_out: DEFAULT_FAN_OUT }
    }

    /// Reads the process environment, the targets file and the ssh_config
    /// files it names; nothing is started.
    pub fn from_env() -> Result<Fleet, ConfigError> {
        Fleet::from_lookup(|name| std::env::var_os(name))
    }

    /// As [`Fleet::from_env`], through `lookup` (tests supply a table; the
    /// files it names are read).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Result<Fleet, ConfigError> {
        let fan_out = match lookup("VOLCE_LAB_FAN_OUT").map(|v| v.to_string_lossy().into_owned()) {
            None => DEFAULT_FAN_OUT,
            Some(text) => match text.parse::<usize>() {
                Ok(n) if (1..=MAX_FAN_OUT).contains(&n) => n,
                _ => {
                    return Err(ConfigError {
                        variable: "VOLCE_LAB_FAN_OUT",
                        reason: format!(
                            "must be a whole number from 1 to {MAX_FAN_OUT} (got {})",
                            quoted(&text)
                        ),
                    });
                }
            },
        };
        let home = lookup("HOME").map(PathBuf::from).filter(|h| h.is_absolute());
        let Some(file) = lookup("VOLCE_LAB_TARGETS") else {
            let config = Config::from_lookup(&lookup)?;
            if config.mode == Mode::Ssh {
                let files = SshConfigFiles::of(config.ssh_config.as_deref(), home.as_deref());
                if !files.declares(&config.ssh_alias) {
                    return Err(ConfigError {
                        variable: "VOLCE_LAB_SSH_ALIAS",
                        reason: undeclared(&config.ssh_alias, &files),
                    });
                }
            }
            return Ok(Fleet { fan_out, ..Fleet::one(config) });
        };
        let refuse = |reason: String| ConfigError { variable: "VOLCE_LAB_TARGETS", reason };
        let path = PathBuf::from(&file);
        if !path.is_absolute() {
            return Err(refuse(format!(
                "must be an absolute path to a TOML file (got {})",
                quoted(&path.to_string_lossy())
            )));
        }
        if let Some(mode) = lookup("VOLCE_LAB_MODE").filter(|mode| mode != "ssh") {
            return Err(refuse(format!(
                "names the servers of ssh mode, but VOLCE_LAB_MODE is {}; unset VOLCE_LAB_MODE or set it to ssh",
                quoted(&mode.to_string_lossy())
            )));
        }
        if let Some(variable) = PER_TARGET.iter().find(|v| lookup(v).is_some()) {
            return Err(refuse(format!(
                "is set together with {variable}, which the targets file gives per target; unset {variable}"
            )));
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| refuse(format!("names a file that cannot be read ({}: {e})", path.display())))?;
        let entries = targets::parse(&path, &text).map_err(refuse)?;
        let mut fleet = Fleet { targets: Vec::with_capacity(entries.len()), fan_out };
        for entry in entries {
            let management = if entry.management { "enabled" } else { "disabled" };
            let overlay = |name: &str| match name {
                "VOLCE_LAB_MODE" => Some(OsString::from("ssh")),
                "VOLCE_LAB_SSH_ALIAS" => Some(OsString::from(&entry.ssh_alias)),
                "VOLCE_LAB_EXPECTED_HOST" => Some(OsString::from(&entry.expected_host)),
                "VOLCE_LAB_EXPECTED_USER" => Some(OsString::from(&entry.expected_user)),
                "VOLCE_LAB_MANAGEMENT" => Some(OsString::from(management)),
                other => lookup(other),
            };
            let mut config = Config::from_lookup(overlay)?;
            config.management_switch =
                ManagementSwitch::TargetsFile { path: path.clone(), target: entry.name.clone() };
            let files = SshConfigFiles::of(config.ssh_config.as_deref(), home.as_deref());
            if !files.declares(&entry.ssh_alias) {
                return Err(refuse(format!(
                    "{}, line {}, key targets.{}.ssh_alias: {}",
                    path.display(),
                    entry.line,
                    entry.name,
                    undeclared(&entry.ssh_alias, &files)
                )));
            }
            fleet.targets.push(FleetTarget { name: entry.name, groups: entry.groups, config });
        }
        Ok(fleet)
    }

    pub fn targets(&self) -> &[FleetTarget] {
        &self.targets
    }

    /// The configured names, in the order tools and reports list them.
    pub fn names(&self) -> Vec<&str> {
        self.targets.iter().map(|t| t.name.as_str()).collect()
    }

    /// The names of the targets in `group`, in fleet order.
    pub fn group(&self, group: &str) -> Vec<&str> {
        self.targets.iter().filter(|t| t.groups.iter().any(|g| g == group)).map(|t| t.name.as_str()).collect()
    }

    /// Every group some target is in, sorted, once each.
    pub fn groups(&self) -> Vec<&str> {
        let mut groups: Vec<&str> =
            self.targets.iter().flat_map(|t| t.groups.iter().map(String::as_str)).collect();
        groups.sort_unstable();
        groups.dedup();
        groups
    }
}

/// The refusal of an alias no `Host` line declares.
fn undeclared(alias: &str, files: &SshConfigFiles) -> String {
    format!(
        "names {alias}, which no Host line of {} (or a file it includes) declares: ssh would resolve it through \
         DNS and dial it; add a Host {alias} block there, or set VOLCE_LAB_SSH_CONFIG to the file that has one",
        files.describe()
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// A home with an ssh_config declaring web-1, web-2 and db, and a
    /// targets file beside it.
    struct World {
        home: tempfile::TempDir,
    }

    impl World {
        fn new(targets: &str) -> World {
            let home = tempfile::tempdir().unwrap();
            std::fs::create_dir(home.path().join(".ssh")).unwrap();
            std::fs::write(home.path().join(".ssh/config"), "Host web-1 web-2\nHost db\nHost *\n").unwrap();
            std::fs::write(home.path().join("targets.toml"), targets).unwrap();
            World { home }
        }

        fn targets_file(&self) -> PathBuf {
            self.home.path().join("targets.toml")
        }

        fn load(&self, pairs: &[(&str, &str)]) -> Result<Fleet, ConfigError> {
            let mut table: Vec<(String, OsString)> =
                vec![("HOME".into(), self.home.path().as_os_str().to_owned())];
            table.extend(pairs.iter().map(|(k, v)| (k.to_string(), OsString::from(v))));
            Fleet::from_lookup(|name| table.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
        }

        fn load_file(&self, extra: &[(&str, &str)]) -> Result<Fleet, ConfigError> {
            let file = self.targets_file();
            let mut pairs = vec![("VOLCE_LAB_TARGETS", file.to_str().unwrap())];
            pairs.extend_from_slice(extra);
            self.load(&pairs)
        }
    }

    const TWO: &str = "[targets.web-1]\nexpected_host = \"web-1.internal\"\nexpected_user = \"vl-agent\"\n\
        management = true\ngroups = [\"prod\"]\n\n[targets.db]\nexpected_host = \"db.internal\"\n\
        expected_user = \"vl-db\"\ngroups = [\"prod\", \"data\"]\n";

    #[test]
    fn a_targets_file_gives_each_target_its_own_identity_and_switch() {
        let world = World::new(TWO);
        let fleet = world.load_file(&[("VOLCE_LAB_TIMEOUT", "5")]).unwrap();
        assert_eq!(fleet.names(), ["db", "web-1"]);
        let [db, web] = fleet.targets() else { panic!("two targets") };
        assert_eq!(
            (db.config.expected_host.as_str(), db.config.expected_user.as_str()),
            ("db.internal", "vl-db")
        );
        assert_eq!(web.config.expected_host, "web-1.internal");
        assert!(web.config.management && !db.config.management, "management is per target");
        // Where each switch is set, for management_disabled (issue 37).
        let switch = |target: &str| ManagementSwitch::TargetsFile {
            path: world.targets_file(),
            target: target.into(),
        };
        assert_eq!(
            (&db.config.management_switch, &web.config.management_switch),
            (&switch("db"), &switch("web-1"))
        );
        assert!(fleet.targets().iter().all(|t| t.config.mode == Mode::Ssh));
        assert!(
            fleet.targets().iter().all(|t| t.config.timeout.as_secs() == 5),
            "shared variables apply to all"
        );
        assert_eq!(fleet.group("prod"), ["db", "web-1"]);
        assert_eq!(fleet.group("data"), ["db"]);
        assert_eq!(fleet.groups(), ["data", "prod"]);
        assert_eq!(fleet.fan_out, DEFAULT_FAN_OUT);
    }

    #[test]
    fn the_single_target_variables_keep_working_as_one_target_named_by_its_alias() {
        let world = World::new("");
        let fleet = world
            .load(&[
                ("VOLCE_LAB_MODE", "ssh"),
                ("VOLCE_LAB_SSH_ALIAS", "web-2"),
                ("VOLCE_LAB_EXPECTED_HOST", "h"),
                ("VOLCE_LAB_EXPECTED_USER", "u"),
            ])
            .unwrap();
        assert_eq!(fleet.names(), ["web-2"]);
        assert_eq!(World::new("").load(&[]).unwrap().names(), ["demo"], "demo mode is one target");
        let local = world.load(&[
            ("VOLCE_LAB_MODE", "local"),
            ("VOLCE_LAB_EXPECTED_HOST", "h"),
            ("VOLCE_LAB_EXPECTED_USER", "u"),
        ]);
        assert_eq!(local.unwrap().names(), ["localhost"], "local mode is one target");
    }

    /// What was tried, and what the refusal must name; nothing runs after
    /// any of these (the caller exits 2).
    #[test]
    fn a_mistyped_alias_is_refused_with_the_file_it_was_looked_for_in() {
        let world = World::new(&TWO.replace("[targets.db]", "[targets.dbb]"));
        let error = world.load_file(&[]).unwrap_err();
        assert_eq!(error.variable, "VOLCE_LAB_TARGETS");
        let config = world.home.path().join(".ssh/config");
        assert!(error.reason.contains("line 7, key targets.dbb.ssh_alias: names dbb"), "{error}");
        assert!(error.reason.contains(&config.display().to_string()), "{error}");
        assert!(error.reason.contains("resolve it through DNS"), "{error}");

        let single = world.load(&[
            ("VOLCE_LAB_MODE", "ssh"),
            ("VOLCE_LAB_SSH_ALIAS", "web-l"),
            ("VOLCE_LAB_EXPECTED_HOST", "h"),
            ("VOLCE_LAB_EXPECTED_USER", "u"),
        ]);
        let error = single.unwrap_err();
        assert_eq!(error.variable, "VOLCE_LAB_SSH_ALIAS");
        assert!(error.reason.contains("names web-l, which no Host line"), "{error}");
        // VOLCE_LAB_SSH_CONFIG replaces the default files, as ssh -F does.
        let other = world.home.path().join("other_config");
        std::fs::write(&other, "Host web-l\n").unwrap();
        let fleet = world.load(&[
            ("VOLCE_LAB_MODE", "ssh"),
            ("VOLCE_LAB_SSH_ALIAS", "web-l"),
            ("VOLCE_LAB_SSH_CONFIG", other.to_str().unwrap()),
            ("VOLCE_LAB_EXPECTED_HOST", "h"),
            ("VOLCE_LAB_EXPECTED_USER", "u"),
        ]);
        assert_eq!(fleet.unwrap().names(), ["web-l"]);
    }

    #[test]
    fn the_targets_file_does_not_mix_with_the_single_target_variables() {
        let world = World::new(TWO);
        for (variable, value) in [
            ("VOLCE_LAB_SSH_ALIAS", "web-1"),
            ("VOLCE_LAB_EXPECTED_HOST", "x"),
            ("VOLCE_LAB_EXPECTED_USER", "x"),
            ("VOLCE_LAB_MANAGEMENT", "enabled"),
            ("VOLCE_LAB_MODE", "local"),
        ] {
            let error = world.load_file(&[(variable, value)]).unwrap_err();
            assert_eq!(error.variable, "VOLCE_LAB_TARGETS", "{variable}");
            assert!(error.reason.contains(variable), "{variable}: {error}");
        }
        assert!(world.load_file(&[("VOLCE_LAB_MODE", "ssh")]).is_ok());
        let relative = world.load(&[("VOLCE_LAB_TARGETS", "targets.toml")]).unwrap_err();
        assert!(relative.reason.contains("absolute path"), "{relative}");
        let missing = world.load(&[("VOLCE_LAB_TARGETS", "/nonexistent/targets.toml")]).unwrap_err();
        assert!(missing.reason.contains("cannot be read"), "{missing}");
        let bad = World::new("[targets.a]\nexpected_host = \"h\"\nexpected_user = \"root\"\n");
        let error = bad.load_file(&[]).unwrap_err();
        assert!(error.to_string().contains(&format!("{}, line 3", bad.targets_file().display())), "{error}");
        assert!(Path::new(&bad.targets_file()).exists());
    }

    #[test]
    fn the_fan_out_width_is_bounded() {
        let world = World::new(TWO);
        assert_eq!(world.load_file(&[("VOLCE_LAB_FAN_OUT", "3")]).unwrap().fan_out, 3);
        for bad in ["0", "33", "x", "-1"] {
            let error = world.load_file(&[("VOLCE_LAB_FAN_OUT", bad)]).unwrap_err();
            assert_eq!(error.variable, "VOLCE_LAB_FAN_OUT", "{bad}");
        }
    }
}
