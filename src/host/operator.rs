//! Who is at the terminal: the person an `approve`, `reject`, `resolve` or
//! `audit prune` is recorded for. Runs as root inside the host helper's
//! operator commands; reads the environment sudo set, the account
//! database, `/proc/self/loginuid` and the session facts of `session`, and
//! decides in a pure function.
//!
//! Security invariant: neither `SUDO_USER` nor `SUDO_UID` is trusted. A
//! sudo rule with `SETENV` (or `sudo VAR=value` where the rule allows it)
//! lets a caller set both to anyone. The name must agree with `SUDO_UID`
//! through the account database both ways (name -> uid and uid -> name, as
//! sudo itself derives the name); then the uid must be confirmed by facts no
//! environment carries: the real uid of the `sudo` that started the helper
//! (sudo is set-uid root: its real uid is whoever ran it), the owner of that
//! sudo's controlling terminal (approval is done at a terminal, and a login's
//! terminal belongs to the account that logged in), and, where the kernel
//! keeps a login uid for the session (set at login by pam_loginuid, and no
//! later sudo, su or runuser changes it), that too. A fact that disagrees,
//! or a sudo or terminal that is absent, refuses with `caller_mismatch`
//! naming which, and nothing is recorded.
//!
//! Root itself (neither variable set: root ran the helper, not through
//! sudo) is recorded as `root`; only the login uid is checked there (`su`
//! from someone's login is refused so that the record names them). Root
//! needs no terminal: it could write the database directly anyway.

use std::ffi::OsStr;

use super::session::{SudoRun, Terminal};
use crate::vocab::{Code, Refusal};

/// The kernel's "no login uid" value in `/proc/self/loginuid`.
pub const LOGINUID_UNSET: u32 = u32::MAX;

/// The verified person behind an operator command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    /// A plain unix user name: what the store records.
    pub name: String,
    pub uid: u32,
    /// The session's login uid, when the kernel keeps one.
    pub login_uid: Option<u32>,
}

/// The facts [`verify`] decides on, gathered by `entry::operator_check` in
/// the binary and injected by tests.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub sudo_user: Option<&'a OsStr>,
    pub sudo_uid: Option<&'a OsStr>,
    /// `None` when unset or unreadable: the check is skipped.
    pub login_uid: Option<u32>,
    /// The sudo that started the helper (`session::observe`); `None` when
    /// no sudo is among its ancestors.
    pub sudo: Option<&'a SudoRun>,
}

/// The account database, as far as [`verify`] needs it.
pub trait Accounts {
    fn uid_of(&self, name: &str) -> Option<u32>;
    fn name_of(&self, uid: u32) -> Option<String>;
}

/// The real account database (NSS through nix). A lookup error counts as
/// "no such account", so it refuses.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemAccounts;

impl Accounts for SystemAccounts {
    fn uid_of(&self, name: &str) -> Option<u32> {
        nix::unistd::User::from_name(name).ok().flatten().map(|user| user.uid.as_raw())
    }
    fn name_of(&self, uid: u32) -> Option<String> {
        nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok().flatten().map(|user| user.name)
    }
}

/// The login uid of this process's session, if the kernel keeps one.
pub fn login_uid() -> Option<u32> {
    let text = std::fs::read_to_string("/proc/self/loginuid").ok()?;
    parse_login_uid(&text)
}

fn parse_login_uid(text: &str) -> Option<u32> {
    text.trim().parse::<u32>().ok().filter(|uid| *uid != LOGINUID_UNSET)
}

fn mismatch(why: String) -> Refusal {
    Refusal::new(Code::CallerMismatch, format!("{why}; nothing was recorded."))
}

/// The next step of a refusal on the session facts.
const AT_YOUR_TERMINAL: &str =
    "run the command as `sudo volce-lab-host ...` at your own terminal, logged in as yourself";

/// Confirms `uid` (already consistent with `name` in the account
/// database) with the sudo that started the helper and its terminal.
fn confirm_session(name: &str, uid: u32, sudo: Option<&SudoRun>) -> Result<(), Refusal> {
    let Some(sudo) = sudo else {
        return Err(mismatch(format!(
            "SUDO_USER and SUDO_UID name {name} (uid {uid}), but no {} process started this command, so \
             nothing confirms them; {AT_YOUR_TERMINAL}",
            super::session::SUDO
        )));
    };
    if let Some(other) = sudo.real_uids.iter().find(|real| **real != uid) {
        return Err(mismatch(format!(
            "SUDO_UID says {uid} ({name}), but the sudo that started this command was run by uid {other}; \
             {AT_YOUR_TERMINAL}"
        )));
    }
    match &sudo.terminal {
        Terminal::Owned { uid: owner, .. } if *owner == uid => Ok(()),
        Terminal::Owned { path, uid: owner } => Err(mismatch(format!(
            "the terminal of the sudo that started this command, {}, belongs to uid {owner}, not to {name} \
             (uid {uid}); {AT_YOUR_TERMINAL}",
            path.display()
        ))),
        Terminal::None => Err(mismatch(format!(
            "the sudo that started this command has no controlling terminal, and operator commands are \
             done at a terminal; {AT_YOUR_TERMINAL}"
        ))),
        Terminal::Unnamed { major, minor } => Err(mismatch(format!(
            "the terminal of the sudo that started this command (device {major}:{minor}) is not a node \
             under /dev/pts or /dev/tty*, so its owner cannot be checked; {AT_YOUR_TERMINAL}"
        ))),
    }
}

/// Decides who the operator is, or refuses. Pure.
///
/// - Neither variable set: root itself ran the command (not through sudo);
///   the operator is `root`, uid 0, and a login uid other than 0 means
///   someone became root with `su`: refused, they should use sudo from
///   their own account so the record names them.
/// - Both set: the name is a plain user name, the uid plain decimal digits,
///   the account database maps each to the other, the login uid (if any)
///   is that uid, and so are the real uid of the sudo that started the
///   helper and the owner of its terminal (both required).
/// - One without the other: refused.
pub fn verify(facts: Facts<'_>, accounts: &impl Accounts) -> Result<Operator, Refusal> {
    let (name, uid, through_sudo) = match (facts.sudo_user, facts.sudo_uid) {
        (None, None) => ("root".to_owned(), 0, false),
        (Some(user), Some(uid)) => {
            let name = super::caller(Some(user))?;
            let uid = uid
                .to_str()
                .filter(|text| {
                    !text.is_empty() && text.len() <= 10 && text.bytes().all(|b| b.is_ascii_digit())
                })
                .and_then(|text| text.parse::<u32>().ok())
                .ok_or_else(|| mismatch("SUDO_UID is not a plain uid".to_owned()))?;
            match accounts.uid_of(&name) {
                Some(found) if found == uid => {}
                Some(found) => {
                    return Err(mismatch(format!(
                        "SUDO_USER {name} is uid {found} in the account database, but SUDO_UID says {uid}"
                    )));
                }
                None => return Err(mismatch(format!("SUDO_USER {name} names no account"))),
            }
            match accounts.name_of(uid) {
                Some(found) if found == name => {}
                _ => {
                    return Err(mismatch(format!(
                        "uid {uid} is not the account {name} in the account database"
                    )));
                }
            }
            (name, uid, true)
        }
        _ => return Err(mismatch("SUDO_USER and SUDO_UID must both be set by sudo, or neither".to_owned())),
    };
    if let Some(login) = facts.login_uid
        && login != uid
    {
        return Err(mismatch(format!(
            "this session was opened by uid {login}, not by {name} (uid {uid}); run the command through \
             sudo from your own login"
        )));
    }
    if through_sudo {
        confirm_session(&name, uid, facts.sudo)?;
    }
    Ok(Operator { name, uid, login_uid: facts.login_uid })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// alice is 1000, bob 1001, and `toor` shares uid 0 with root.
    struct Table;

    impl Accounts for Table {
        fn uid_of(&self, name: &str) -> Option<u32> {
            match name {
                "root" | "toor" => Some(0),
                "alice" => Some(1000),
                "bob" => Some(1001),
                _ => None,
            }
        }
        fn name_of(&self, uid: u32) -> Option<String> {
            match uid {
                0 => Some("root".into()),
                1000 => Some("alice".into()),
                1001 => Some("bob".into()),
                _ => None,
            }
        }
    }

    /// The sudo a uid's own login starts: run by it, at its own pts.
    fn own_sudo(uid: u32) -> SudoRun {
        SudoRun { real_uids: vec![uid, uid], terminal: Terminal::Owned { path: "/dev/pts/3".into(), uid } }
    }

    /// The variables and login uid as given; the session facts those of
    /// SUDO_UID's own sudo at its own terminal (or none, for a non-number).
    fn check(user: Option<&str>, uid: Option<&str>, login: Option<u32>) -> Result<Operator, Refusal> {
        let sudo = uid.and_then(|uid| uid.parse().ok()).map(own_sudo);
        check_session(user, uid, login, sudo.as_ref())
    }

    fn check_session(
        user: Option<&str>,
        uid: Option<&str>,
        login: Option<u32>,
        sudo: Option<&SudoRun>,
    ) -> Result<Operator, Refusal> {
        let facts =
            Facts { sudo_user: user.map(OsStr::new), sudo_uid: uid.map(OsStr::new), login_uid: login, sudo };
        verify(facts, &Table)
    }

    fn refused(result: Result<Operator, Refusal>) -> Refusal {
        let refusal = result.unwrap_err();
        assert!(refusal.message.contains("nothing was recorded"), "{}", refusal.message);
        refusal
    }

    #[test]
    fn a_consistent_sudo_caller_is_accepted_with_both_uids() {
        let alice = check(Some("alice"), Some("1000"), Some(1000)).unwrap();
        assert_eq!(alice, Operator { name: "alice".into(), uid: 1000, login_uid: Some(1000) });
        // No login uid kept by the kernel: that check is skipped.
        assert_eq!(check(Some("alice"), Some("1000"), None).unwrap().login_uid, None);
    }

    #[test]
    fn root_without_sudo_is_root_unless_the_session_belongs_to_someone_else() {
        assert_eq!(check(None, None, None).unwrap().name, "root");
        assert_eq!(check(None, None, Some(0)).unwrap().uid, 0);
        // `su -` from alice's login, then approve as root: refused.
        assert_eq!(refused(check(None, None, Some(1000))).code, Code::CallerMismatch);
    }

    #[test]
    fn a_forged_sudo_user_is_refused() {
        // bob (1001) sets SUDO_USER=alice with a SETENV rule; sudo's SUDO_UID stays his.
        let refusal = refused(check(Some("alice"), Some("1001"), None));
        assert_eq!(refusal.code, Code::CallerMismatch);
        assert!(
            refusal.message.contains("uid 1000") && refusal.message.contains("1001"),
            "{}",
            refusal.message
        );
        // Both forged consistently: only the login uid of bob's session tells.
        assert_eq!(refused(check(Some("alice"), Some("1000"), Some(1001))).code, Code::CallerMismatch);
        // A name with no account, a uid with no account.
        assert_eq!(refused(check(Some("mallory"), Some("1000"), None)).code, Code::CallerMismatch);
        assert_eq!(refused(check(Some("alice"), Some("4242"), None)).code, Code::CallerMismatch);
    }

    #[test]
    fn an_alias_sharing_a_uid_is_not_the_name_sudo_would_set() {
        // sudo derives SUDO_USER from the uid: for uid 0 that is root, never toor.
        assert_eq!(refused(check(Some("toor"), Some("0"), None)).code, Code::CallerMismatch);
    }

    #[test]
    fn half_set_or_malformed_variables_are_refused() {
        assert_eq!(refused(check(Some("alice"), None, None)).code, Code::CallerMismatch);
        assert_eq!(refused(check(None, Some("1000"), None)).code, Code::CallerMismatch);
        for uid in ["", "+1000", " 1000", "1000 ", "0x3e8", "-1", "99999999999", "1e3"] {
            assert_eq!(refused(check(Some("alice"), Some(uid), None)).code, Code::CallerMismatch, "{uid:?}");
        }
        // A name that is not a plain user name keeps its own code.
        assert_eq!(check(Some("al ice"), Some("1000"), None).unwrap_err().code, Code::InvalidCaller);
    }

    #[test]
    fn both_variables_forged_consistently_are_refused_by_the_session_facts() {
        // bob (1001) under a SETENV rule: SUDO_USER=alice SUDO_UID=1000, at his own terminal.
        let bobs = own_sudo(1001);
        let refusal = refused(check_session(Some("alice"), Some("1000"), None, Some(&bobs)));
        assert_eq!(refusal.code, Code::CallerMismatch);
        assert!(refusal.message.contains("run by uid 1001"), "{}", refusal.message);
        assert!(refusal.message.contains("sudo volce-lab-host"), "the next step: {}", refusal.message);
        // bob's sudo, started from a process of his left on alice's terminal.
        let on_alices = SudoRun {
            real_uids: vec![1001],
            terminal: Terminal::Owned { path: "/dev/pts/3".into(), uid: 1000 },
        };
        let refusal = refused(check_session(Some("alice"), Some("1000"), None, Some(&on_alices)));
        assert!(refusal.message.contains("run by uid 1001"), "{}", refusal.message);
        // Nested: alice's sudo runs bob's sudo (`sudo -u bob sudo ...`): every sudo of the run counts.
        let nested = SudoRun { real_uids: vec![1001, 1000], ..own_sudo(1000) };
        assert_eq!(
            refused(check_session(Some("alice"), Some("1000"), None, Some(&nested))).code,
            Code::CallerMismatch
        );
        // alice's own sudo, but a terminal owned by bob (her process on his pts).
        let bobs_tty = SudoRun {
            real_uids: vec![1000],
            terminal: Terminal::Owned { path: "/dev/pts/7".into(), uid: 1001 },
        };
        let refusal = refused(check_session(Some("alice"), Some("1000"), None, Some(&bobs_tty)));
        assert!(
            refusal.message.contains("/dev/pts/7") && refusal.message.contains("belongs to uid 1001"),
            "{}",
            refusal.message
        );
    }

    #[test]
    fn an_absent_sudo_or_terminal_is_refused_and_says_which() {
        // Root with both variables set by hand, no sudo at all.
        let refusal = refused(check_session(Some("alice"), Some("1000"), None, None));
        assert!(refusal.message.contains("no /usr/bin/sudo process"), "{}", refusal.message);
        // A script's sudo, without a terminal.
        let headless = SudoRun { real_uids: vec![1000], terminal: Terminal::None };
        let refusal = refused(check_session(Some("alice"), Some("1000"), None, Some(&headless)));
        assert!(refusal.message.contains("no controlling terminal"), "{}", refusal.message);
        let unnamed = SudoRun { real_uids: vec![1000], terminal: Terminal::Unnamed { major: 5, minor: 1 } };
        let refusal = refused(check_session(Some("alice"), Some("1000"), None, Some(&unnamed)));
        assert!(refusal.message.contains("device 5:1"), "{}", refusal.message);
        // Root itself needs neither.
        assert_eq!(check_session(None, None, None, None).unwrap().name, "root");
    }

    #[test]
    fn the_unset_login_uid_means_none() {
        assert_eq!(parse_login_uid("4294967295"), None);
        assert_eq!(parse_login_uid("1000\n"), Some(1000));
        assert_eq!(parse_login_uid("x"), None);
    }
}
