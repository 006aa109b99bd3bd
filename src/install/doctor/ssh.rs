//! The doctor's ssh-side rules: the agent's key is bound to the ssh gate in
//! a file the agent cannot change, the account's shell is the gate, its
//! home and dotfiles are not its own to write, and `sudo -l -U AGENT`
//! lists exactly the one rule (and, a warning only, the rpc's options of
//! the drop-in setup writes). Runs as root on the server; reads only.
//!
//! The key files checked are the places sshd reads them from in the setups
//! docs/server-install.md describes: `/etc/ssh/authorized_keys/AGENT` (an
//! `AuthorizedKeysFile /etc/ssh/authorized_keys/%u` in a `Match User`
//! block) and `~AGENT/.ssh/authorized_keys` (and `authorized_keys2`). Every
//! one that exists must pass; at least one must hold a key. A custom
//! `AuthorizedKeysFile` elsewhere is not seen: the finding names the files
//! it read.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use super::{Finding, fail, ok, warn};
use crate::host::HostPaths;
use crate::install::{gate_key_options, legacy_gate_key_options};

/// What the account database says about the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub uid: u32,
    pub home: PathBuf,
    pub shell: PathBuf,
}

/// The facts these rules need from outside the file system.
pub trait SshProbe {
    fn account(&self, user: &str) -> Option<Account>;
    /// The rules `sudo -l -U USER` lists for `user`, one per entry, trimmed.
    fn sudo_rules(&self, user: &str) -> Result<Vec<String>, String>;
    /// Every account name the local account database lists.
    fn accounts(&self) -> Vec<String>;
    /// What `sudo -n -l -U USER` prints for `user`, whole.
    fn sudo_listing(&self, user: &str) -> Result<String, String>;
}

/// Which of the gate's exact options a key line carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateKeyForm {
    /// `exec` the gate: what setup writes.
    Exec,
    /// The gate without `exec`, as setup wrote it before 0.2.0: as safe, one
    /// shell fork more per call.
    Legacy,
}

/// Whether `line` is one key bound to the gate, and in which form: the
/// exact options, a key type, its base64, an optional comment.
pub fn gate_key_form(line: &str) -> Option<GateKeyForm> {
    [(GateKeyForm::Exec, gate_key_options()), (GateKeyForm::Legacy, legacy_gate_key_options())]
        .into_iter()
        .find_map(|(form, options)| {
            let rest = line.strip_prefix(options.as_str())?.strip_prefix(' ')?;
            is_key(rest).then_some(form)
        })
}

/// A key type, its base64, an optional comment.
fn is_key(rest: &str) -> bool {
    let mut words = rest.split(' ');
    let kind = words.next().unwrap_or("");
    let key = words.next().unwrap_or("");
    (kind.starts_with("ssh-") || kind.starts_with("ecdsa-") || kind.starts_with("sk-"))
        && !key.is_empty()
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
}

/// Not writable by `agent_uid`: owned by `owner_uid` (root) and not
/// writable by group or others; `None` when it is, else why not.
fn not_agents(path: &Path, owner_uid: u32, agent_uid: u32) -> Option<String> {
    match std::fs::symlink_metadata(path) {
        Err(_) => Some(format!("{} cannot be read", path.display())),
        Ok(meta) if meta.file_type().is_symlink() => Some(format!("{} is a symlink", path.display())),
        Ok(meta) if meta.uid() == agent_uid || meta.uid() != owner_uid => {
            Some(format!("{} is owned by uid {}, not root", path.display(), meta.uid()))
        }
        Ok(meta) if meta.mode() & 0o022 != 0 => Some(format!(
            "{} is writable by group or others (mode {:o})",
            path.display(),
            meta.mode() & 0o7777
        )),
        Ok(_) => None,
    }
}

/// The ssh-side findings for `agent`.
pub fn check_ssh(agent: &str, owner_uid: u32, probe: &dyn SshProbe, findings: &mut Vec<Finding>) {
    let Some(account) = probe.account(agent) else {
        findings.push(fail("agent ssh", format!("`{agent}` is not an account"), "see server-install.md"));
        return;
    };
    findings.push(shell_finding(agent, &account.shell));
    check_home(agent, owner_uid, &account, findings);
    check_keys(agent, owner_uid, &account, findings);
    let rule = format!("(root) NOPASSWD: {} rpc", HostPaths::HELPER);
    match probe.sudo_rules(agent) {
        Ok(rules) if rules == [rule.clone()] => findings.push(ok("sudo -l", format!("exactly `{rule}`"))),
        Ok(rules) => findings.push(fail(
            "sudo -l",
            format!("sudo -l -U {agent} lists {} rule(s), not exactly `{rule}`", rules.len()),
            format!("remove every other rule for {agent} from /etc/sudoers and /etc/sudoers.d"),
        )),
        Err(why) => findings.push(fail("sudo -l", why, format!("run sudo -l -U {agent} and read it"))),
    }
    if let Ok(listing) = probe.sudo_listing(agent) {
        check_rpc_options(&listing, findings);
    }
}

/// The account's login shell: the gate itself, as setup makes it (sshd's
/// session starts the gate with no shell between, whatever command a key
/// line forces); `/bin/sh`, as setup made it before 0.2.0, a warning (as
/// safe: no rc file is read for a forced command, one shell start more per
/// call); anything else fails (bash reads `~/.bashrc` for ssh commands).
fn shell_finding(agent: &str, shell: &Path) -> Finding {
    let helper = HostPaths::HELPER;
    if shell == Path::new(helper) {
        return ok("agent shell", "the gate (sshd starts it with no shell between)");
    }
    let fix = format!(
        "run volce-lab-host setup again with the same arguments, or usermod --shell {helper} {agent}, then run \
         doctor again"
    );
    if shell == Path::new("/bin/sh") {
        return warn(
            "agent shell",
            "/bin/sh, setup's shell before 0.2.0: as safe (no rc file is read for a forced command), with one \
             shell start more per call",
            fix,
        );
    }
    fail(
        "agent shell",
        format!(
            "{} (bash reads ~/.bashrc for ssh commands; setup makes the gate the shell)",
            shell.display()
        ),
        fix,
    )
}

/// The options of the drop-in setup writes ([`crate::install::RPC_DEFAULTS`])
/// that `listing` (`sudo -l`) does not show in force for the rpc: the last
/// `Defaults!` entry naming the rpc that sets an option decides it, as
/// sudo applies them in order.
pub fn rpc_options_missing(listing: &str) -> Vec<&'static str> {
    let flat = listing.split_whitespace().collect::<Vec<_>>().join(" ");
    let marker = format!("Defaults!{} rpc ", HostPaths::HELPER);
    // Each entry for the rpc, up to the next entry or the rules' heading.
    let entries: Vec<&str> = flat
        .split(marker.as_str())
        .skip(1)
        .map(|rest| rest.split(" Defaults").next().unwrap_or(rest))
        .map(|rest| rest.split(" User ").next().unwrap_or(rest))
        .collect();
    crate::install::RPC_DEFAULTS
        .split(", ")
        .filter(|wanted| {
            let name = wanted.trim_start_matches('!');
            let last = entries
                .iter()
                .flat_map(|entry| entry.split([',', ' ']))
                .rfind(|word| word.trim_start_matches('!') == name);
            last != Some(*wanted)
        })
        .collect()
}

/// A warning, not a failure: without the options every call still works,
/// but sudo forks and waits, opens a PAM session, and the helper starts
/// twice (docs/server-install.md, step 4).
fn check_rpc_options(listing: &str, findings: &mut Vec<Finding>) {
    let missing = rpc_options_missing(listing);
    if missing.is_empty() {
        findings.push(ok("sudo options", format!("the rpc runs with {}", crate::install::RPC_DEFAULTS)));
    } else {
        findings.push(warn(
            "sudo options",
            format!(
                "the rpc runs without {}: sudo forks and waits and the helper starts twice per call (slower, \
                 as safe)",
                missing.join(", ")
            ),
            "run volce-lab-host setup again with the same arguments (it replaces the rule it wrote), or write \
             the file of docs/server-install.md step 4 with visudo, then run doctor again",
        ));
    }
}

fn check_home(agent: &str, owner_uid: u32, account: &Account, findings: &mut Vec<Finding>) {
    let mut problems: Vec<String> = not_agents(&account.home, owner_uid, account.uid).into_iter().collect();
    if let Ok(entries) = std::fs::read_dir(&account.home) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with('.') {
                problems.extend(not_agents(&entry.path(), owner_uid, account.uid));
            }
        }
    }
    if problems.is_empty() {
        findings.push(ok("agent home", format!("{} and its dotfiles are root's", account.home.display())));
    } else {
        findings.push(fail(
            "agent home",
            problems.join("; "),
            format!(
                "chown root:root {} and its dotfiles; chmod go-w them (server-install.md)",
                account.home.display()
            ),
        ));
    }
    let _ = agent;
}

fn check_keys(agent: &str, owner_uid: u32, account: &Account, findings: &mut Vec<Finding>) {
    let candidates = [
        PathBuf::from("/etc/ssh/authorized_keys").join(agent),
        account.home.join(".ssh/authorized_keys"),
        account.home.join(".ssh/authorized_keys2"),
    ];
    let options = gate_key_options();
    let (mut keys, mut legacy) = (0, 0);
    let mut problems = Vec::new();
    for path in candidates.iter().filter(|p| std::fs::symlink_metadata(p).is_ok()) {
        problems.extend(not_agents(path, owner_uid, account.uid));
        if let Some(dir) = path.parent() {
            problems.extend(not_agents(dir, owner_uid, account.uid));
        }
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            match gate_key_form(line) {
                Some(form) => {
                    keys += 1;
                    legacy += usize::from(form == GateKeyForm::Legacy);
                }
                None => problems.push(format!(
                    "{} has a key without exactly `{options}` (or the form before 0.2.0, without `exec`)",
                    path.display()
                )),
            }
        }
    }
    let read: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
    if keys == 0 {
        problems.push(format!("no key bound to the gate in {}", read.join(", ")));
    }
    if problems.is_empty() && legacy > 0 {
        findings.push(warn(
            "agent key",
            format!(
                "{keys} key(s) in root-owned files, {legacy} of them with `{}`, the options before `exec`: as \
                 safe, with one shell fork more per call while the agent's shell is /bin/sh",
                legacy_gate_key_options()
            ),
            "run volce-lab-host setup again with the same arguments (it rewrites the key file it wrote), or \
             put `exec ` before the helper's path in each such line, then run doctor again",
        ));
    } else if problems.is_empty() {
        findings.push(ok("agent key", format!("{keys} key(s), each `{options}`, in root-owned files")));
    } else {
        findings.push(fail(
            "agent key",
            problems.join("; "),
            format!("one line `{options} ssh-ed25519 ...` in /etc/ssh/authorized_keys/{agent}, root 0644 (server-install.md)"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    struct Fake {
        account: Account,
        rules: Vec<String>,
    }

    impl SshProbe for Fake {
        fn account(&self, _user: &str) -> Option<Account> {
            Some(self.account.clone())
        }
        fn sudo_rules(&self, _user: &str) -> Result<Vec<String>, String> {
            Ok(self.rules.clone())
        }
        fn accounts(&self) -> Vec<String> {
            Vec::new()
        }
        fn sudo_listing(&self, _user: &str) -> Result<String, String> {
            Ok(String::new())
        }
    }

    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ8w+x/y= vl-agent";
    /// What docs/server-install.md tells the operator to write.
    const GATE_OPTIONS: &str = "restrict,command=\"exec /usr/local/bin/volce-lab-host ssh-gate\"";
    /// What setup wrote before 0.2.0.
    const LEGACY_OPTIONS: &str = "restrict,command=\"/usr/local/bin/volce-lab-host ssh-gate\"";

    fn setup() -> (tempfile::TempDir, Fake, u32) {
        let me = nix::unistd::geteuid().as_raw();
        let temp = tempfile::tempdir().unwrap();
        let home = temp.path().join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/authorized_keys"), format!("{GATE_OPTIONS} {KEY}\n")).unwrap();
        std::fs::write(home.join(".profile"), "").unwrap();
        for path in [&home, &home.join(".ssh")] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let fake = Fake {
            // The "agent" is another uid than the files' owner.
            account: Account { uid: me + 1, home, shell: HostPaths::HELPER.into() },
            rules: vec!["(root) NOPASSWD: /usr/local/bin/volce-lab-host rpc".into()],
        };
        (temp, fake, me)
    }

    fn findings(fake: &Fake, owner: u32) -> Vec<Finding> {
        let mut findings = Vec::new();
        check_ssh("vl-agent", owner, fake, &mut findings);
        findings
    }

    fn failed(findings: &[Finding]) -> Vec<&str> {
        findings.iter().filter(|f| f.failed()).map(|f| f.subject.as_str()).collect()
    }

    #[test]
    fn a_gated_key_in_root_owned_files_passes() {
        let (_temp, fake, me) = setup();
        let all = findings(&fake, me);
        assert_eq!(failed(&all), Vec::<&str>::new(), "{all:?}");
    }

    /// Tried: each thing the agent's account could use to bend its key.
    #[test]
    fn each_way_out_of_the_gate_is_named() {
        let (_temp, mut fake, me) = setup();
        let keys = fake.account.home.join(".ssh/authorized_keys");
        for line in [
            KEY.to_owned(),
            format!("restrict {KEY}"),
            format!("command=\"/usr/local/bin/volce-lab-host ssh-gate\" {KEY}"),
        ] {
            std::fs::write(&keys, format!("{GATE_OPTIONS} {KEY}\n{line}\n")).unwrap();
            assert_eq!(failed(&findings(&fake, me)), ["agent key"], "{line}");
        }
        std::fs::remove_file(&keys).unwrap();
        assert_eq!(failed(&findings(&fake, me)), ["agent key"], "no key at all");
        std::fs::write(&keys, format!("{GATE_OPTIONS} {KEY}\n")).unwrap();
        std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(failed(&findings(&fake, me)), ["agent key"], "a writable key file");
        std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o644)).unwrap();

        // The files are the agent's own (its uid owns them).
        fake.account.uid = me;
        assert_eq!(failed(&findings(&fake, me)), ["agent home", "agent key"]);
        fake.account.uid = me + 1;

        fake.account.shell = "/bin/bash".into();
        assert_eq!(failed(&findings(&fake, me)), ["agent shell"]);
        // Setup's shell before 0.2.0: a warning with its fix, nothing failed.
        fake.account.shell = "/bin/sh".into();
        let found = findings(&fake, me);
        assert!(failed(&found).is_empty());
        let shell = found.iter().find(|f| f.subject == "agent shell").unwrap();
        assert_eq!(shell.level, super::super::Level::Warn, "{shell:?}");
        assert!(shell.fix.as_deref().unwrap_or_default().contains("setup again"), "{shell:?}");
        fake.account.shell = HostPaths::HELPER.into();

        fake.rules.push("(ALL) NOPASSWD: /usr/bin/id".into());
        assert_eq!(failed(&findings(&fake, me)), ["sudo -l"]);
    }

    /// `sudo -l` under the drop-in setup writes (sudo 1.9.13 wraps it), under
    /// the one-line rule of before, and with a later entry turning one back on.
    #[test]
    fn the_rpc_options_are_read_from_the_last_entry_that_sets_each() {
        let head = "Matching Defaults entries for vl-agent on vm:\n    env_reset, use_pty\n\n\
                    Runas and Command-specific defaults for vl-agent:\n";
        let tail = "\nUser vl-agent may run the following commands on vm:\n    \
                    (root) NOPASSWD: /usr/local/bin/volce-lab-host rpc\n";
        let ours =
            "    Defaults!/usr/local/bin/volce-lab-host rpc !use_pty, !pam_session,\n    !pam_setcred\n";
        assert_eq!(rpc_options_missing(&format!("{head}{ours}{tail}")), Vec::<&str>::new());
        assert_eq!(
            rpc_options_missing(&format!("{head}{tail}")),
            ["!use_pty", "!pam_session", "!pam_setcred"],
            "the one-line rule: only the global use_pty"
        );
        let again = "    Defaults!/usr/local/bin/volce-lab-host rpc use_pty\n";
        assert_eq!(rpc_options_missing(&format!("{head}{ours}{again}{tail}")), ["!use_pty"]);
        let other = "    Defaults!/usr/bin/true !use_pty, !pam_session, !pam_setcred\n";
        assert_eq!(rpc_options_missing(&format!("{head}{other}{tail}")).len(), 3, "another command's");
        let mut findings = Vec::new();
        check_rpc_options(&format!("{head}{tail}"), &mut findings);
        assert!(
            !findings[0].failed() && findings[0].fix.as_deref().is_some_and(|f| f.contains("setup again"))
        );
    }

    #[test]
    fn key_lines_are_matched_exactly() {
        assert_eq!(gate_key_options(), GATE_OPTIONS);
        assert_eq!(legacy_gate_key_options(), LEGACY_OPTIONS);
        assert_eq!(gate_key_form(&format!("{GATE_OPTIONS} {KEY}")), Some(GateKeyForm::Exec));
        assert_eq!(gate_key_form(&format!("{GATE_OPTIONS} ssh-ed25519 AAAA")), Some(GateKeyForm::Exec));
        assert_eq!(gate_key_form(&format!("{LEGACY_OPTIONS} {KEY}")), Some(GateKeyForm::Legacy));
        for bad in [
            format!("{GATE_OPTIONS},port-forwarding {KEY}"),
            format!("{GATE_OPTIONS}  {KEY}"),
            format!("{LEGACY_OPTIONS},port-forwarding {KEY}"),
            format!("restrict,command=\"/usr/local/bin/volce-lab-host ssh-gate x\" {KEY}"),
            format!("restrict,command=\"exec /usr/local/bin/volce-lab-host ssh-gate x\" {KEY}"),
            format!("restrict,command=\"exec  /usr/local/bin/volce-lab-host ssh-gate\" {KEY}"),
            format!("restrict,command=\"exec /usr/local/bin/volce-lab-host ssh-gate; sh\" {KEY}"),
            format!("{GATE_OPTIONS} ssh-ed25519"),
            format!("{GATE_OPTIONS} ssh-ed25519 AA$A"),
        ] {
            assert_eq!(gate_key_form(&bad), None, "{bad}");
        }
    }

    /// Tried: a key file setup wrote before 0.2.0, then the same with one
    /// line of each form, then the current form alone.
    #[test]
    fn a_key_without_exec_is_a_warning_that_names_the_way_to_the_current_form() {
        let (_temp, fake, me) = setup();
        let keys = fake.account.home.join(".ssh/authorized_keys");
        for text in
            [format!("{LEGACY_OPTIONS} {KEY}\n"), format!("{GATE_OPTIONS} {KEY}\n{LEGACY_OPTIONS} {KEY}\n")]
        {
            std::fs::write(&keys, &text).unwrap();
            let all = findings(&fake, me);
            assert_eq!(failed(&all), Vec::<&str>::new(), "{text}");
            let key = all.iter().find(|f| f.subject == "agent key").unwrap();
            assert!(
                key.detail.contains("1 of them") && key.detail.contains("one shell fork more"),
                "{key:?}"
            );
            assert!(key.fix.as_deref().is_some_and(|fix| fix.contains("setup again")), "{key:?}");
        }
        std::fs::write(&keys, format!("{GATE_OPTIONS} {KEY}\n")).unwrap();
        let all = findings(&fake, me);
        let key = all.iter().find(|f| f.subject == "agent key").unwrap();
        assert!(key.fix.is_none(), "{key:?}");
    }
}
