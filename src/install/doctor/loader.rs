//! The doctor's rule on every sudoers rule that grants the helper, whoever
//! it names: none may let the caller hand it a loader variable. Runs as root
//! on the server; reads only (`sudo -n -l -U USER` for each local account,
//! through [`SshProbe`]).
//!
//! Why: the helper is a dynamically linked program run as root. A rule that
//! grants it with the `SETENV` tag (or under `Defaults setenv`), or a
//! `Defaults env_keep` that keeps `LD_PRELOAD`, `LD_LIBRARY_PATH` or another
//! `LD_` variable, lets the caller load their own library into it: root,
//! whatever arguments the rule allows. The agent's own rule is checked
//! exactly by `ssh.rs`; this check covers the rules an operator added for
//! anyone else. Accounts the local account database does not list (LDAP,
//! sssd) are not enumerated, and a rule is recognised by the helper's fixed
//! path in it: a rule on another path to the same file (a symlink) or on
//! `ALL` is not this check's (an `ALL` rule is root anyway).

use super::ssh::SshProbe;
use super::{Finding, fail, ok};
use crate::host::HostPaths;

/// What one `sudo -l -U USER` listing says: the defaults that apply to the
/// user (global and command-specific) and the rules it may run.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Listing {
    pub defaults: Vec<String>,
    pub rules: Vec<String>,
}

/// Splits `sudo -l` output into its defaults and its rules, each trimmed,
/// one entry per comma-separated default and one per rule line.
pub fn parse_listing(text: &str) -> Listing {
    let mut listing = Listing::default();
    // Which section a line belongs to, from the heading before it.
    let mut in_rules = false;
    for line in text.lines() {
        if line.contains("may run the following commands") {
            in_rules = true;
            continue;
        }
        if line.contains("Defaults entries for") || line.contains("specific defaults for") {
            in_rules = false;
            continue;
        }
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if in_rules {
            listing.rules.push(line.to_owned());
        } else {
            listing.defaults.extend(line.split(',').map(|d| d.trim().to_owned()).filter(|d| !d.is_empty()));
        }
    }
    listing
}

/// Why `listing` lets its user hand the helper a loader variable, or `None`.
pub fn loader_risk(listing: &Listing) -> Option<String> {
    let helper_rules: Vec<&String> =
        listing.rules.iter().filter(|rule| rule.contains(HostPaths::HELPER)).collect();
    if helper_rules.is_empty() {
        return None;
    }
    if let Some(rule) = helper_rules.iter().find(|rule| rule.contains("SETENV:")) {
        return Some(format!("the rule `{rule}` carries SETENV"));
    }
    let words =
        |d: &str| d.split(|c: char| c.is_whitespace() || c == '"').map(str::to_owned).collect::<Vec<_>>();
    for default in &listing.defaults {
        // A command-specific default for another command does not reach the helper.
        if default.starts_with("Defaults!") && !default.contains(HostPaths::HELPER) {
            continue;
        }
        let words = words(default);
        if words.iter().any(|w| w == "setenv") {
            return Some(format!("the default `{default}` lets it set any variable"));
        }
        if default.contains("env_keep") && words.iter().any(|w| w.contains("LD_")) {
            return Some(format!("the default `{default}` keeps a loader variable"));
        }
    }
    None
}

/// One finding over every local account's sudo listing: failed when any
/// account's rule for the helper lets it pass a loader variable.
pub fn check_loader_rules(probe: &dyn SshProbe, findings: &mut Vec<Finding>) {
    let mut risks = Vec::new();
    let mut unread = Vec::new();
    for user in probe.accounts() {
        match probe.sudo_listing(&user) {
            Ok(text) => risks.extend(loader_risk(&parse_listing(&text)).map(|why| format!("{user}: {why}"))),
            Err(_) => unread.push(user),
        }
    }
    if !risks.is_empty() {
        findings.push(fail(
            "helper loader variables",
            format!(
                "a sudo rule lets its caller pass LD_PRELOAD or another loader variable to {} (root): {}",
                HostPaths::HELPER,
                risks.join("; ")
            ),
            "remove SETENV from these rules and setenv or any LD_ variable from their Defaults (visudo), then run \
             doctor again",
        ));
    } else if !unread.is_empty() {
        findings.push(fail(
            "helper loader variables",
            format!("sudo -l could not be read for {}", unread.join(", ")),
            "run sudo -n -l -U USER for each of them as root and read it, then run doctor again",
        ));
    } else {
        findings.push(ok(
            "helper loader variables",
            "no sudo rule lets its caller pass a loader variable to the helper",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::install::doctor::ssh::Account;

    /// Listings by user, as `sudo -n -l -U USER` prints them.
    struct Fake(Vec<(&'static str, String)>);

    impl SshProbe for Fake {
        fn account(&self, _user: &str) -> Option<Account> {
            None
        }
        fn sudo_rules(&self, user: &str) -> Result<Vec<String>, String> {
            self.sudo_listing(user).map(|text| parse_listing(&text).rules)
        }
        fn accounts(&self) -> Vec<String> {
            self.0.iter().map(|(user, _)| (*user).to_owned()).collect()
        }
        fn sudo_listing(&self, user: &str) -> Result<String, String> {
            let found = self.0.iter().find(|(name, _)| *name == user).map(|(_, text)| text.clone());
            found.ok_or_else(|| format!("sudo -l -U {user} failed"))
        }
    }

    fn listing(user: &str, extra_default: &str, rule: &str) -> String {
        format!(
            "Matching Defaults entries for {user} on srv:\n    env_reset, mail_badpass, \
             secure_path=/usr/sbin\\:/usr/bin{extra_default}\n\nUser {user} may run the following commands on \
             srv:\n    {rule}\n"
        )
    }

    fn finding(fake: &Fake) -> Finding {
        let mut findings = Vec::new();
        check_loader_rules(fake, &mut findings);
        assert_eq!(findings.len(), 1);
        findings.remove(0)
    }

    const AGENT_RULE: &str = "(root) NOPASSWD: /usr/local/bin/volce-lab-host rpc";

    #[test]
    fn a_setenv_rule_on_the_helper_fails_whoever_it_names() {
        let fake = Fake(vec![
            ("vl-agent", listing("vl-agent", "", AGENT_RULE)),
            ("ops", listing("ops", "", "(root) SETENV: NOPASSWD: /usr/local/bin/volce-lab-host")),
        ]);
        let found = finding(&fake);
        assert!(found.failed(), "{found}");
        assert!(found.detail.contains("ops: the rule") && found.detail.contains("SETENV"), "{found}");
        assert!(!found.detail.contains("vl-agent"), "{found}");
        assert!(found.fix.as_deref().is_some_and(|fix| fix.contains("remove SETENV")), "{found}");
    }

    #[test]
    fn a_kept_loader_variable_or_setenv_default_fails_for_a_helper_rule() {
        for default in [", env_keep+=LD_PRELOAD", ", env_keep+=\"LANG LD_LIBRARY_PATH\"", ", setenv"] {
            let fake = Fake(vec![("ops", listing("ops", default, AGENT_RULE))]);
            let found = finding(&fake);
            assert!(found.failed() && found.detail.starts_with("a sudo rule lets"), "{default}: {found}");
        }
        let specific = "Runas and Command-specific defaults for ops:\n    Defaults!/usr/local/bin/volce-lab-host \
                        setenv\n\n";
        let fake = Fake(vec![("ops", format!("{specific}{}", listing("ops", "", AGENT_RULE)))]);
        assert!(finding(&fake).failed());
    }

    #[test]
    fn rules_without_the_helper_or_without_a_loader_path_pass() {
        let fake = Fake(vec![
            ("vl-agent", listing("vl-agent", ", !setenv", AGENT_RULE)),
            ("admin", listing("admin", ", env_keep+=LD_PRELOAD", "(ALL : ALL) SETENV: /usr/bin/apt")),
            ("nobody", "User nobody is not allowed to run sudo on srv.\n".to_owned()),
        ]);
        let found = finding(&fake);
        assert!(!found.failed(), "{found}");
    }

    #[test]
    fn an_unreadable_listing_fails_and_names_the_account() {
        let fake = Fake(vec![("ops", listing("ops", "", AGENT_RULE))]);
        struct Missing(Fake);
        impl SshProbe for Missing {
            fn account(&self, _user: &str) -> Option<Account> {
                None
            }
            fn sudo_rules(&self, user: &str) -> Result<Vec<String>, String> {
                self.0.sudo_rules(user)
            }
            fn accounts(&self) -> Vec<String> {
                vec!["ops".into(), "ghost".into()]
            }
            fn sudo_listing(&self, user: &str) -> Result<String, String> {
                self.0.sudo_listing(user)
            }
        }
        let mut findings = Vec::new();
        check_loader_rules(&Missing(fake), &mut findings);
        assert!(findings[0].failed() && findings[0].detail.contains("ghost"), "{}", findings[0]);
    }

    /// `sudo -l -U vl-agent` under the drop-in setup writes (sudo 1.9.13,
    /// Debian 12, as the real suite host_sudo_rule reads it): the
    /// command's options wrap onto a second line and carry no loader risk.
    #[test]
    fn the_drop_in_setup_writes_lists_one_rule_and_no_loader_risk() {
        let text = "Matching Defaults entries for vl-agent on vm:\n    env_reset, mail_badpass,\n    \
                    secure_path=/usr/local/sbin\\:/usr/local/bin\\:/usr/sbin\\:/usr/bin\\:/sbin\\:/bin,\n    use_pty\n\n\
                    Runas and Command-specific defaults for vl-agent:\n    \
                    Defaults!/usr/local/bin/volce-lab-host rpc !use_pty, !pam_session,\n    !pam_setcred\n\n\
                    User vl-agent may run the following commands on vm:\n    \
                    (root) NOPASSWD: /usr/local/bin/volce-lab-host rpc\n";
        let parsed = parse_listing(text);
        assert_eq!(parsed.rules, [AGENT_RULE]);
        assert_eq!(loader_risk(&parsed), None, "{:?}", parsed.defaults);
    }

    #[test]
    fn the_listing_splits_defaults_from_rules() {
        let parsed = parse_listing(&listing("ops", ", env_keep+=LD_PRELOAD", AGENT_RULE));
        assert_eq!(parsed.rules, [AGENT_RULE]);
        assert!(parsed.defaults.contains(&"env_keep+=LD_PRELOAD".to_owned()), "{:?}", parsed.defaults);
    }
}
