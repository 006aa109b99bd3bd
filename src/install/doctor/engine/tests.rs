//! The engine rules on fake facts: versions, TCP listeners from each
//! source, iptables turned off each way, and old app networks.

use super::*;
use crate::install::doctor::Level;

fn facts(warnings: &[&str], args: &[&str], config: Option<&str>) -> EngineFacts {
    EngineFacts {
        warnings: Ok(warnings.iter().map(|w| (*w).to_owned()).collect()),
        daemon_args: Some(args.iter().map(|a| (*a).to_owned()).collect()),
        daemon_config: config.map(|text| (PathBuf::from("/etc/docker/daemon.json"), text.to_owned())),
        loopback_guard: None,
    }
}

fn levels(version: &str, facts: Option<&EngineFacts>) -> Vec<(String, Level)> {
    let mut findings = Vec::new();
    check_engine(version, facts, &mut findings);
    findings.into_iter().map(|f| (f.subject, f.level)).collect()
}

fn level_of(version: &str, facts: &EngineFacts, subject: &str) -> Level {
    let found = levels(version, Some(facts));
    found.iter().find(|(s, _)| s == subject).unwrap_or_else(|| panic!("{subject} in {found:?}")).1
}

#[test]
fn engines_before_28_are_warned_about_and_28_on_are_not() {
    assert_eq!(major_version("20.10.24+dfsg1"), Some(20));
    assert_eq!(major_version("28.2.2"), Some(28));
    assert_eq!(major_version("unknown"), None);
    let clean = facts(&[], &["-H", "fd://"], None);
    for (version, level) in [
        ("20.10.24+dfsg1", Level::Warn),
        ("27.5.1", Level::Warn),
        ("28.0.0", Level::Ok),
        ("29.1.0", Level::Ok),
    ] {
        assert_eq!(level_of(version, &clean, "docker version"), level, "{version}");
    }
    // An unparsable version cannot be called safe.
    assert_eq!(level_of("dev", &clean, "docker version"), Level::Warn);
    let mut findings = Vec::new();
    check_engine("20.10.24", Some(&clean), &mut findings);
    let fix = findings[0].fix.as_deref().unwrap();
    assert!(fix.contains("iptables -t raw -I PREROUTING ! -i lo -d 127.0.0.0/8 -j DROP"), "{fix}");
}

/// Before issue 26 the old engine's warning stayed after its own
/// mitigation was in place, and could never be cleared on Debian 12.
#[test]
fn the_old_engines_warning_names_its_risk_and_clears_once_the_raw_rule_is_in_place() {
    let guarded = EngineFacts { loopback_guard: Some(true), ..facts(&[], &[], None) };
    let mut findings = Vec::new();
    check_engine("20.10.24+dfsg1", Some(&guarded), &mut findings);
    let version = findings.iter().find(|f| f.subject == "docker version").unwrap();
    assert_eq!(version.level, Level::Ok, "{version:?}");
    assert!(
        version.detail.contains("raw-table rule") && version.detail.contains("L2 segment"),
        "{version:?}"
    );
    // Without the rule, or when it cannot be read: the warning, once.
    for guard in [Some(false), None] {
        let facts = EngineFacts { loopback_guard: guard, ..facts(&[], &[], None) };
        let mut findings = Vec::new();
        check_engine("20.10.24+dfsg1", Some(&facts), &mut findings);
        let warned: Vec<_> = findings.iter().filter(|f| f.subject == "docker version").collect();
        assert_eq!(warned.len(), 1, "{guard:?}");
        assert_eq!(warned[0].level, Level::Warn, "{guard:?}");
    }
}

#[test]
fn the_raw_rule_is_recognised_as_iptables_prints_it() {
    let printed = "-P PREROUTING ACCEPT\n-A PREROUTING ! -i lo -d 127.0.0.0/8 -j DROP\n";
    assert!(has_loopback_guard(printed));
    for not_it in [
        "-P PREROUTING ACCEPT\n",
        "-A PREROUTING -d 127.0.0.0/8 -j DROP\n",
        "-A PREROUTING ! -i lo -d 127.0.0.0/8 -j ACCEPT\n",
        "-A OUTPUT ! -i lo -d 127.0.0.0/8 -j DROP\n",
        "# -A PREROUTING ! -i lo -d 127.0.0.0/8 -j DROP\n",
    ] {
        assert!(!has_loopback_guard(not_it), "{not_it}");
    }
}

#[test]
fn a_tcp_listener_is_warned_about_from_each_source() {
    let sources = [
        facts(&["WARNING: API is accessible on http://0.0.0.0:2375 without encryption.\n  more"], &[], None),
        facts(&[], &["-H", "tcp://127.0.0.1:2375"], None),
        facts(&[], &["--host=tcp://0.0.0.0:2376", "--tlsverify"], None),
        facts(&[], &["-Htcp://0.0.0.0:2375"], None),
        facts(&[], &[], Some(r#"{"hosts": ["unix:///var/run/docker.sock", "tcp://10.0.0.1:2375"]}"#)),
    ];
    for source in &sources {
        assert_eq!(level_of("28.0.0", source, "docker api"), Level::Warn, "{source:?}");
    }
    let mut findings = Vec::new();
    check_engine("28.0.0", Some(&sources[0]), &mut findings);
    let api = findings.iter().find(|f| f.subject == "docker api").unwrap();
    assert!(api.detail.contains("API is accessible on http://0.0.0.0:2375 without encryption."), "{api}");
    assert!(!api.detail.contains("more"), "one line per warning: {api}");
    let clean =
        facts(&["WARNING: No swap limit support"], &["-H", "fd://"], Some(r#"{"hosts": ["unix:///x"]}"#));
    assert_eq!(level_of("28.0.0", &clean, "docker api"), Level::Ok);
}

#[test]
fn iptables_turned_off_is_warned_about_from_the_flag_or_the_config() {
    for off in [
        facts(&[], &["--iptables=false"], None),
        facts(&[], &["--iptables", "false"], None),
        facts(&[], &[], Some(r#"{"iptables": false}"#)),
    ] {
        assert_eq!(level_of("28.0.0", &off, "docker iptables"), Level::Warn, "{off:?}");
    }
    for on in [
        facts(&[], &["--iptables=true"], None),
        facts(&[], &["--iptables"], None),
        facts(&[], &[], Some(r#"{"iptables": true, "mtu": 1400}"#)),
    ] {
        assert_eq!(level_of("28.0.0", &on, "docker iptables"), Level::Ok, "{on:?}");
    }
    // What cannot be read is said, not passed.
    let unknown = EngineFacts {
        warnings: Err("timeout".into()),
        daemon_args: None,
        daemon_config: None,
        loopback_guard: None,
    };
    let found = levels("28.0.0", Some(&unknown));
    assert!(found.contains(&("docker api".to_owned(), Level::Warn)), "{found:?}");
    assert!(found.contains(&("docker daemon".to_owned(), Level::Warn)), "{found:?}");
    assert!(!found.iter().any(|(s, _)| s == "docker iptables"), "{found:?}");
    let broken = facts(&[], &[], Some("{not json"));
    assert_eq!(level_of("28.0.0", &broken, "docker daemon"), Level::Warn);
}

fn network(app: &str, edge: bool, options: &[(&str, &str)]) -> AppNetwork {
    AppNetwork {
        app: app.into(),
        name: if edge { format!("vl-{app}_edge") } else { format!("vl-{app}") },
        edge,
        options: options.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
    }
}

#[test]
fn an_app_network_without_todays_options_is_named_with_the_way_out() {
    let today =
        [network("new", false, &[INHIBIT_IPV4_OPTION]), network("new", true, &[NO_MASQUERADE_OPTION])];
    let mut findings = Vec::new();
    check_app_networks(Ok(today.to_vec()), &mut findings);
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].level, Level::Ok, "{}", findings[0]);

    let old = vec![network("old", false, &[]), network("old", true, &[]), today[0].clone()];
    let mut findings = Vec::new();
    check_app_networks(Ok(old), &mut findings);
    assert_eq!(findings.len(), 1, "{findings:?}");
    let finding = &findings[0];
    assert_eq!((finding.subject.as_str(), finding.level), ("app old", Level::Warn));
    assert!(finding.detail.contains("vl-old lacks com.docker.network.bridge.inhibit_ipv4=true"), "{finding}");
    assert!(
        finding.detail.contains("vl-old_edge lacks com.docker.network.bridge.enable_ip_masquerade=false")
    );
    let fix = finding.fix.as_deref().unwrap();
    assert!(
        fix.contains("remove_app") && fix.contains("then a deploy") && fix.contains("update keeps"),
        "{fix}"
    );

    let mut findings = Vec::new();
    check_app_networks(Err("engine down".into()), &mut findings);
    assert_eq!(findings[0].level, Level::Warn);
}
