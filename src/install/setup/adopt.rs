//! An existing account named by `setup --agent`: what setup would change
//! in it, refused unless `--adopt` is given; with it, what the account was
//! before ([`Adopted`], kept in the manifest), which `setup --undo` puts
//! back. Runs as root inside `volce-lab-host setup`.
//!
//! Why: setup makes the agent's account safe to hand to a key (the gate as
//! its shell, the password `*`, the home and its dotfiles root's). On an
//! account of someone's that is a change they must agree to, and one that
//! `--undo` must reverse, not leave behind.
//!
//! The password field is kept as `/etc/shadow` holds it (a hash, `!`...),
//! in the manifest (root's, 0600, in the 0700 state directory: as
//! protected as the shadow file), and restored through `chpasswd -e` on
//! stdin, never on a command line another user could read.

use std::fs;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{SetupError, run, say, step_failed};
use crate::host::HostPaths;

/// The shell setup gives the agent: the gate itself. sshd runs a session's
/// command as `SHELL -c COMMAND`, so the gate starts with no shell between
/// (before 0.2.0, `/bin/sh`, which read no rc file and started the gate
/// once more per call), and whatever command a key line forces, or none,
/// only the gate runs (docs/security.md).
pub(super) const SHELL: &str = HostPaths::HELPER;

/// The password field setup gives the agent: no password matches it, and
/// sshd (UsePAM no) still accepts key logins, which a locked `!` would not.
pub(super) const PASSWORD: &str = "*";

/// An existing account as it was before setup adopted it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Adopted {
    pub name: String,
    pub shell: PathBuf,
    /// The `/etc/shadow` password field; `None` when the account has no
    /// shadow line.
    pub password: Option<String>,
    pub home: PathBuf,
    /// The home and each dotfile in it, as setup found them.
    pub entries: Vec<Ownership>,
    /// Whether `~/.ssh` was there: if setup made it, undo removes it once empty.
    pub ssh_dir_existed: bool,
}

/// Owner, group and mode of one path, before setup made it root's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Ownership {
    pub path: PathBuf,
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
    pub symlink: bool,
}

/// The password field of `name` in `shadow` (the file's text).
fn password_field(shadow: &str, name: &str) -> Option<String> {
    shadow.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        (fields.next() == Some(name)).then(|| fields.next().unwrap_or_default().to_owned())
    })
}

fn ownership(path: &Path) -> Option<Ownership> {
    let meta = fs::symlink_metadata(path).ok()?;
    Some(Ownership {
        path: path.to_owned(),
        uid: meta.uid(),
        gid: meta.gid(),
        mode: meta.mode() & 0o7777,
        symlink: meta.file_type().is_symlink(),
    })
}

/// What `user` is now, as far as setup changes it.
pub(super) fn observe(user: &nix::unistd::User) -> Result<Adopted, SetupError> {
    let shadow = fs::read_to_string("/etc/shadow").map_err(|e| step_failed("agent account", e))?;
    let home = user.dir.clone();
    let mut entries: Vec<Ownership> = ownership(&home).into_iter().collect();
    if let Ok(listing) = fs::read_dir(&home) {
        let mut dotfiles: Vec<PathBuf> = listing
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().starts_with('.'))
            .map(|entry| entry.path())
            .collect();
        dotfiles.sort();
        entries.extend(dotfiles.iter().filter_map(|path| ownership(path)));
    }
    Ok(Adopted {
        name: user.name.clone(),
        shell: user.shell.clone(),
        password: password_field(&shadow, &user.name),
        ssh_dir_existed: fs::symlink_metadata(home.join(".ssh")).is_ok(),
        home,
        entries,
    })
}

/// What setup would change in `before`, one clause each, for the refusal.
pub(super) fn changes(before: &Adopted) -> Vec<String> {
    let mut changes = Vec::new();
    if before.shell != Path::new(SHELL) {
        changes.push(format!("its shell {} becomes {SHELL}", before.shell.display()));
    }
    if before.password.as_deref() != Some(PASSWORD) {
        changes.push(format!(
            "its password becomes `{PASSWORD}` (key login only: a password no longer logs it in)"
        ));
    }
    let home = before.home.display();
    if before.entries.iter().any(|e| e.uid != 0 || e.gid != 0 || (!e.symlink && e.mode & 0o022 != 0)) {
        changes.push(format!(
            "its home {home} and the dotfiles in it become root's, without group or other write"
        ));
    }
    changes.push(format!("{home}/.ssh/authorized_keys gets the agent's key, bound to the ssh gate"));
    changes
}

/// The refusal of an existing account without `--adopt`.
pub(super) fn refusal(before: &Adopted) -> SetupError {
    SetupError::BadArgument(format!(
        "--agent {}: the account exists, and setup would change it: {}. Run setup again with --adopt to \
         let it (setup --undo then puts back what it was), or name an account that does not exist yet \
         for setup to create",
        before.name,
        changes(before).join("; ")
    ))
}

/// `setup --undo` for an adopted account: its shell, password, and the
/// owner and mode of its home and dotfiles as they were; `~/.ssh` removed
/// when setup made it and it is empty now. Paths gone since are skipped.
pub(super) fn restore(before: &Adopted) -> Result<(), SetupError> {
    let name = before.name.as_str();
    if nix::unistd::User::from_name(name).ok().flatten().is_none() {
        say(false, "undo", format!("the adopted account {name} is gone; nothing to restore"));
        return Ok(());
    }
    let shell = before.shell.to_string_lossy();
    run("undo", "/usr/sbin/usermod", &["--shell", &shell, "--", name], None)?;
    if let Some(password) = &before.password {
        let line = format!("{name}:{password}\n");
        run("undo", "/usr/sbin/chpasswd", &["-e"], Some(line.as_bytes()))?;
    }
    if !before.ssh_dir_existed {
        // Only an empty one: the key file setup wrote is gone by now,
        // anything else in it is someone's.
        if fs::remove_dir(before.home.join(".ssh")).is_ok() {
            say(true, "undo", format!("removed {}/.ssh", before.home.display()));
        }
    }
    for entry in &before.entries {
        if fs::symlink_metadata(&entry.path).is_err() {
            continue;
        }
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            &entry.path,
            Some(nix::unistd::Uid::from_raw(entry.uid)),
            Some(nix::unistd::Gid::from_raw(entry.gid)),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(|e| step_failed("undo", e))?;
        if !entry.symlink {
            fs::set_permissions(&entry.path, fs::Permissions::from_mode(entry.mode))
                .map_err(|e| step_failed("undo", e))?;
        }
    }
    say(
        true,
        "undo",
        format!(
            "restored {name}: shell {shell}, its password, and the owners and modes of {} and its dotfiles",
            before.home.display()
        ),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adopted(shell: &str, password: Option<&str>, entries: Vec<Ownership>) -> Adopted {
        Adopted {
            name: "alice".into(),
            shell: shell.into(),
            password: password.map(str::to_owned),
            home: "/home/alice".into(),
            entries,
            ssh_dir_existed: true,
        }
    }

    fn owned(path: &str, uid: u32, mode: u32) -> Ownership {
        Ownership { path: path.into(), uid, gid: uid, mode, symlink: false }
    }

    #[test]
    fn the_shadow_field_is_found_by_exact_name() {
        let shadow = "root:*:19000:0:::::\nalice2:$y$x:1::::::\nalice:$y$j9T$abc:19000:0:99999:7:::\n";
        assert_eq!(password_field(shadow, "alice").as_deref(), Some("$y$j9T$abc"));
        assert_eq!(password_field(shadow, "ali"), None);
        assert_eq!(password_field("bob:!:1::\n", "bob").as_deref(), Some("!"));
    }

    #[test]
    fn the_refusal_says_each_change_setup_would_make() {
        let before = adopted("/bin/bash", Some("$y$hash"), vec![owned("/home/alice", 1000, 0o750)]);
        let text = refusal(&before).to_string();
        for clause in [
            "--agent alice: the account exists",
            "its shell /bin/bash becomes /usr/local/bin/volce-lab-host",
            "its password becomes `*`",
            "its home /home/alice and the dotfiles in it become root's",
            "/home/alice/.ssh/authorized_keys gets the agent's key",
            "--adopt",
            "setup --undo then puts back",
        ] {
            assert!(text.contains(clause), "missing {clause:?}: {text}");
        }
        assert!(!text.contains("$y$hash"), "the hash is never printed: {text}");
        // What setup already made so needs no word (the key still does).
        let done = adopted(SHELL, Some("*"), vec![owned("/home/alice", 0, 0o755)]);
        assert_eq!(
            changes(&done),
            ["/home/alice/.ssh/authorized_keys gets the agent's key, bound to the ssh gate"]
        );
    }
}
