//! The doctor's rules on the Docker engine itself: what volce-lab cannot
//! guarantee on the running engine. Each is a warning, not a failure: the
//! installation is not broken, but a promise of docs/docker-policy.md is weaker
//! than written until the operator changes the engine. Pure, on facts the
//! probe gathered (`system.rs`: `docker version`, `docker info`, dockerd's
//! command line and configuration file, `docker network inspect`); runs as
//! root inside `volce-lab-host doctor`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{Finding, ok, warn};
use crate::docker::client::{INHIBIT_IPV4_OPTION, NO_MASQUERADE_OPTION};

/// What the engine's daemon says of itself and how it was started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineFacts {
    /// `docker info`'s `Warnings`, as the daemon reports them, or why they
    /// could not be read. The daemon warns there about each TCP address it
    /// serves without TLS client verification.
    pub warnings: Result<Vec<String>, String>,
    /// dockerd's command line after the program, when its process was found.
    pub daemon_args: Option<Vec<String>>,
    /// dockerd's configuration file (`--config-file`, else
    /// `/etc/docker/daemon.json`) and its text, when it exists.
    pub daemon_config: Option<(PathBuf, String)>,
    /// Whether the raw table's PREROUTING chain drops packets for
    /// 127.0.0.0/8 that did not arrive on `lo` (the mitigation the old
    /// engine's warning names), read with `iptables -t raw -S PREROUTING`;
    /// `None` when it could not be read.
    pub loopback_guard: Option<bool>,
}

/// Whether `rules` (`iptables -S` lines) hold the guard against packets for
/// 127.0.0.0/8 from other interfaces: a DROP of `-d 127.0.0.0/8` with `! -i lo`.
pub fn has_loopback_guard(rules: &str) -> bool {
    rules.lines().any(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        let has = |pair: &[&str]| words.windows(pair.len()).any(|w| w == pair);
        words.first() == Some(&"-A")
            && words.get(1) == Some(&"PREROUTING")
            && has(&["!", "-i", "lo"])
            && (has(&["-d", "127.0.0.0/8"]) || has(&["-d", "127.0.0.0/255.0.0.0"]))
            && has(&["-j", "DROP"])
    })
}

/// One network of a managed app as the engine shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppNetwork {
    pub app: String,
    pub name: String,
    /// The edge network (the gateway's, which publishes), else the app's
    /// internal one.
    pub edge: bool,
    /// The driver options it was created with (`docker network inspect`).
    pub options: BTreeMap<String, String>,
}

/// The first engine version whose published 127.0.0.1 ports hosts on the
/// same L2 segment cannot reach (28.0 drops such packets before NAT).
pub const FIRST_SAFE_MAJOR: u32 = 28;

/// The engine's major version (`20` of `20.10.24+dfsg1`), if it has one.
pub fn major_version(version: &str) -> Option<u32> {
    version.trim().split('.').next()?.parse().ok()
}

/// The findings of [`check_engine`] alone, for tests on a real engine.
#[doc(hidden)]
#[cfg(any(test, feature = "test-hatches"))]
pub fn engine_findings_for_tests(version: &str, facts: Option<&EngineFacts>) -> Vec<Finding> {
    let mut findings = Vec::new();
    check_engine(version, facts, &mut findings);
    findings
}

/// The findings of [`check_app_networks`] alone, for tests on a real engine.
#[doc(hidden)]
#[cfg(any(test, feature = "test-hatches"))]
pub fn app_network_findings_for_tests(networks: Result<Vec<AppNetwork>, String>) -> Vec<Finding> {
    let mut findings = Vec::new();
    check_app_networks(networks, &mut findings);
    findings
}

/// The version, TCP and iptables rules; nothing when the probe has no facts.
pub(super) fn check_engine(version: &str, facts: Option<&EngineFacts>, findings: &mut Vec<Finding>) {
    let guarded = facts.and_then(|f| f.loopback_guard) == Some(true);
    match major_version(version) {
        Some(major) if major >= FIRST_SAFE_MAJOR => findings.push(ok(
            "docker version",
            format!("{version}: ports published on 127.0.0.1 are not reachable from other hosts"),
        )),
        // The engine carries the risk, and the rule the warning names is in
        // place: say both, and that nothing is left to do for it.
        _ if guarded => findings.push(ok(
            "docker version",
            format!(
                "engine {} is older than {FIRST_SAFE_MAJOR} (a host on the same L2 segment could reach ports \
                 published on 127.0.0.1), and the raw-table rule that drops packets for 127.0.0.0/8 from \
                 other interfaces is in place",
                crate::text::for_terminal(version)
            ),
        )),
        _ => findings.push(warn(
            "docker version",
            format!(
                "engine {} is older than {FIRST_SAFE_MAJOR}: before {FIRST_SAFE_MAJOR}, a host on the same L2 \
                 segment can reach ports published on 127.0.0.1 (every app's gateway) by sending packets for \
                 127.0.0.1 to this host",
                crate::text::for_terminal(version)
            ),
            format!(
                "upgrade the engine to {FIRST_SAFE_MAJOR} or later; until then keep the host off shared L2 \
                 segments, or drop such packets before Docker's NAT sees them (doctor recognises the rule \
                 and stops warning): iptables -t raw -I PREROUTING ! -i lo -d 127.0.0.0/8 -j DROP"
            ),
        )),
    }
    let Some(facts) = facts else { return };
    check_tcp(facts, findings);
    check_iptables(facts, findings);
}

/// The daemon's settings as its command line and configuration file give
/// them: TCP hosts, and where `iptables` is turned off.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DaemonSettings {
    pub tcp_hosts: Vec<String>,
    pub iptables_off: Vec<String>,
    /// The configuration file could not be parsed: what it says is unknown.
    pub config_unreadable: Option<String>,
}

/// Reads dockerd's flags (`-H`/`--host`, `--iptables`) and its
/// configuration file's `hosts` and `iptables`. Pure.
pub fn daemon_settings(args: &[String], config: Option<&(PathBuf, String)>) -> DaemonSettings {
    let mut settings = DaemonSettings::default();
    let mut words = args.iter().peekable();
    while let Some(word) = words.next() {
        let (flag, inline) = match word.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_owned())),
            // `-Htcp://...`: the short flag with its value attached.
            None if word.starts_with("-H") && word.len() > 2 => ("-H", Some(word[2..].to_owned())),
            None => (word.as_str(), None),
        };
        match flag {
            "-H" | "--host" => {
                if let Some(value) = inline.or_else(|| words.next().cloned())
                    && value.starts_with("tcp://")
                {
                    settings.tcp_hosts.push(value);
                }
            }
            "--iptables" => {
                // A boolean flag: `--iptables=false`, or `--iptables false`.
                let value = inline.or_else(|| words.next_if(|w| *w == "false" || *w == "true").cloned());
                if value.as_deref() == Some("false") {
                    settings.iptables_off.push("--iptables=false on dockerd's command line".to_owned());
                }
            }
            _ => {}
        }
    }
    if let Some((path, text)) = config {
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(json) => {
                for host in json["hosts"].as_array().into_iter().flatten().filter_map(|h| h.as_str()) {
                    if host.starts_with("tcp://") {
                        settings.tcp_hosts.push(host.to_owned());
                    }
                }
                if json["iptables"] == serde_json::Value::Bool(false) {
                    settings.iptables_off.push(format!("\"iptables\": false in {}", path.display()));
                }
            }
            Err(_) => settings.config_unreadable = Some(path.display().to_string()),
        }
    }
    settings
}

fn check_tcp(facts: &EngineFacts, findings: &mut Vec<Finding>) {
    let settings =
        daemon_settings(facts.daemon_args.as_deref().unwrap_or_default(), facts.daemon_config.as_ref());
    let mut seen: Vec<String> = settings.tcp_hosts;
    match &facts.warnings {
        Ok(warnings) => seen.extend(
            warnings
                .iter()
                .filter(|w| w.contains("API is accessible on"))
                .filter_map(|w| w.lines().next())
                .map(|w| w.trim().trim_start_matches("WARNING:").trim().to_owned()),
        ),
        Err(why) => findings.push(warn(
            "docker api",
            format!("docker info could not be read ({why}): whether the daemon listens on TCP is unchecked"),
            "run docker info and read its warnings",
        )),
    }
    if !seen.is_empty() {
        let seen: Vec<String> = seen.iter().map(|s| crate::text::for_terminal(s)).collect();
        findings.push(warn(
            "docker api",
            format!(
                "the daemon listens on TCP ({}): whoever reaches that address controls the engine, which is \
                 root on this host, past every volce-lab rule",
                seen.join("; ")
            ),
            "remove every tcp:// host from dockerd's -H flags and from \"hosts\" in /etc/docker/daemon.json, \
             keep unix:///var/run/docker.sock only, and restart the engine",
        ));
    } else if facts.daemon_args.is_some() && facts.warnings.is_ok() {
        findings.push(ok(
            "docker api",
            "the daemon listens on no TCP address (docker info, dockerd's flags, daemon.json)",
        ));
    }
    if facts.daemon_args.is_none() {
        findings.push(warn(
            "docker daemon",
            "dockerd's process was not found: its command line (-H, --iptables) is unchecked",
            "check that /var/run/docker.pid names the running dockerd",
        ));
    }
    if let Some(path) = settings.config_unreadable {
        findings.push(warn(
            "docker daemon",
            format!("{path} is not valid JSON: its hosts and iptables settings are unchecked"),
            format!("correct {path} (dockerd refuses to start with it)"),
        ));
    }
}

fn check_iptables(facts: &EngineFacts, findings: &mut Vec<Finding>) {
    let Some(args) = &facts.daemon_args else { return };
    let settings = daemon_settings(args, facts.daemon_config.as_ref());
    if settings.iptables_off.is_empty() {
        findings.push(ok(
            "docker iptables",
            "the daemon manages its firewall rules (iptables is not turned off)",
        ));
        return;
    }
    findings.push(warn(
        "docker iptables",
        format!(
            "{}: the daemon installs no firewall rules, so an --internal app network is not isolated from \
             other networks or the outside, and nothing Docker would drop is dropped",
            settings.iptables_off.join(" and ")
        ),
        "remove the iptables=false setting and restart the engine (or write equivalent rules yourself: \
         docker-policy.md says what volce-lab relies on)",
    ));
}

/// What an app's networks lack of the options deploy gives them today.
pub(super) fn check_app_networks(networks: Result<Vec<AppNetwork>, String>, findings: &mut Vec<Finding>) {
    let networks = match networks {
        Ok(networks) => networks,
        Err(why) => {
            findings.push(warn(
                "app networks",
                format!("cannot be inspected: {why}"),
                "see the docker finding; docker network inspect vl-<app> shows the options",
            ));
            return;
        }
    };
    if networks.is_empty() {
        return;
    }
    let mut lacking: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for network in &networks {
        let (key, value, why) = if network.edge {
            let (key, value) = NO_MASQUERADE_OPTION;
            (key, value, "its gateway's connections are NATed to the outside")
        } else {
            let (key, value) = INHIBIT_IPV4_OPTION;
            (key, value, "its containers reach the host's services through the bridge's address")
        };
        if network.options.get(key).map(String::as_str) != Some(value) {
            lacking
                .entry(&network.app)
                .or_default()
                .push(format!("{} lacks {key}={value}: {why}", network.name));
        }
    }
    if lacking.is_empty() {
        findings.push(ok(
            "app networks",
            format!("{} network(s) of managed apps carry today's isolation options", networks.len()),
        ));
    }
    for (app, what) in lacking {
        let app = crate::text::for_terminal(app);
        findings.push(warn(
            format!("app {app}"),
            format!("deployed by an older volce-lab: {}", what.join("; ")),
            format!(
                "an approved remove_app plan for {app}, then a deploy, recreates both networks with the \
                 options (an update keeps the networks it finds); the agent plans them, you approve them"
            ),
        ));
    }
}

#[cfg(test)]
mod tests;
