//! The helper's fixed files and the checks that make them trustworthy.
//! Runs as root inside the host helper.
//!
//! Security invariant: root trusts only files that only root can change.
//! The policy file, its directory and the state directory must be owned by
//! the expected owner (root in the shipped binary), not group- or
//! world-writable, and not symlinks; every check is made on the opened handle
//! (`O_NOFOLLOW`, then `fstat`), so nothing can be swapped in between the
//! check and the use. The shipped binary only ever uses [`HostPaths::fixed`];
//! no flag or environment variable relocates these files.

use std::fs::{File, OpenOptions};
use std::io::Read as _;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use crate::control::policy::Policy;
use crate::vocab::{Code, Refusal};

/// The policy file is small; a larger one is refused rather than read.
pub const POLICY_MAX_BYTES: u64 = 256 * 1024;

/// Where the helper's files are, and who must own them.
///
/// The one table of the installation's fixed paths: the constants below
/// are what the shipped binary uses, and setup, undo, the doctor, the ssh
/// gate and the workstation's local transport derive theirs from them
/// (the e2e scripts keep a copy, which a test holds against this table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPaths {
    pub policy: PathBuf,
    pub state_dir: PathBuf,
    /// root (0) in the shipped binary; tests pass their own uid so they can
    /// run unprivileged on temporary directories.
    pub owner_uid: u32,
}

impl HostPaths {
    /// The helper as the sudoers rule names it: the rule allows exactly
    /// `<this> rpc`, and the agent's key runs `<this> ssh-gate`. A symlink
    /// to the package's executable; its file name selects host mode.
    pub const HELPER: &'static str = crate::wire::HELPER_PATH;
    /// The one `sudo` whose rule reaches the helper and whose processes
    /// count as an operator's session; the workstation's local transport
    /// and the ssh gate run it too, so its home is the wire contract.
    pub const SUDO: &'static str = crate::wire::remote::SUDO_PATH;
    /// The operator's policy.
    pub const POLICY: &'static str = "/etc/volce-lab/policy.json";
    /// The apps' env files, beside the policy: the policy names them by
    /// this path, so its home is the shared vocabulary (`crate::vocab`,
    /// which the pure policy code can import and this table cannot).
    pub const ENV_DIR: &'static str = crate::vocab::ENV_DIR;
    /// The file name of [`HostPaths::allowed_signers`].
    pub const ALLOWED_SIGNERS: &'static str = "allowed_signers";
    /// The state directory: the database, the apps' files, setup's manifest.
    pub const STATE_DIR: &'static str = "/var/lib/volce-lab";
    /// The agent's one sudoers rule.
    pub const SUDOERS: &'static str = "/etc/sudoers.d/volce-lab";
    /// Where setup writes the rule for `visudo -cf` first: sudo's
    /// `@includedir` skips a name with a dot in it, so the candidate is
    /// never in force before visudo accepted it.
    pub const SUDOERS_CANDIDATE: &'static str = "/etc/sudoers.d/.volce-lab.setup";
    /// The database's file name in the state directory.
    const DATABASE: &'static str = "state.db";

    /// The only paths the shipped binary uses.
    pub fn fixed() -> HostPaths {
        HostPaths {
            policy: PathBuf::from(Self::POLICY),
            state_dir: PathBuf::from(Self::STATE_DIR),
            owner_uid: 0,
        }
    }
    pub fn database(&self) -> PathBuf {
        Self::database_in(&self.state_dir)
    }
    /// The database of the state directory `state_dir`: the one place its
    /// file name is joined (the doctor's probes take a state directory).
    pub fn database_in(state_dir: &Path) -> PathBuf {
        state_dir.join(Self::DATABASE)
    }
    pub fn apps_dir(&self) -> PathBuf {
        self.state_dir.join("apps")
    }
    /// The apps' data images and their mount points, made at the first
    /// deploy that has data (`crate::docker::data_volume`).
    pub fn data_dir(&self) -> PathBuf {
        Self::data_dir_in(&self.state_dir)
    }
    pub fn data_dir_in(state_dir: &Path) -> PathBuf {
        state_dir.join("data")
    }
    /// What setup made, so that `setup --undo` removes exactly that.
    pub fn setup_manifest(&self) -> PathBuf {
        self.state_dir.join("setup.json")
    }

    /// Who may sign approvals on their own device (issue 42): an OpenSSH
    /// `allowed_signers` file beside the policy, under the same checks.
    pub fn allowed_signers(&self) -> PathBuf {
        self.policy.with_file_name(Self::ALLOWED_SIGNERS)
    }
}

fn unsafe_path(path: &Path, why: &str) -> Refusal {
    Refusal::new(Code::UnsafePath, format!("{} {why}; refusing to use it.", path.display()))
}

/// Checks an opened handle: kind, owner, and no group/world write bit.
pub(crate) fn check_handle(file: &File, path: &Path, want_dir: bool, owner: u32) -> Result<(), Refusal> {
    let meta = file.metadata().map_err(|_| unsafe_path(path, "cannot be inspected"))?;
    if want_dir && !meta.is_dir() {
        return Err(unsafe_path(path, "is not a directory"));
    }
    if !want_dir && !meta.is_file() {
        return Err(unsafe_path(path, "is not a regular file"));
    }
    if meta.uid() != owner {
        return Err(unsafe_path(path, &format!("is owned by uid {}, not {owner}", meta.uid())));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(unsafe_path(
            path,
            &format!("is writable by group or others (mode {:04o})", meta.mode() & 0o7777),
        ));
    }
    Ok(())
}

/// Opens a directory without following a symlink and checks the handle.
pub fn open_dir(path: &Path, owner: u32) -> Result<File, Refusal> {
    let file = open_dir_nofollow(path)?;
    check_handle(&file, path, true, owner)?;
    Ok(file)
}

/// Opens a directory without following a symlink; checks nothing else.
fn open_dir_nofollow(path: &Path) -> Result<File, Refusal> {
    OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC).bits())
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(code)
                if code == nix::errno::Errno::ELOOP as i32 || code == nix::errno::Errno::ENOTDIR as i32 =>
            {
                unsafe_path(path, "is a symlink or not a directory")
            }
            _ if e.kind() == std::io::ErrorKind::NotFound => unsafe_path(path, "does not exist"),
            _ => unsafe_path(path, "cannot be opened"),
        })
}

/// Reads and validates the policy after checking its directory and itself.
pub fn load_policy(paths: &HostPaths) -> Result<Policy, Refusal> {
    let bytes = read_policy_bytes(paths)?;
    Policy::from_json(&bytes)
        .map_err(|e| Refusal::new(Code::PolicyInvalid, format!("{}: {e}.", paths.policy.display())))
}

/// The policy file's bytes, read under [`load_policy`]'s checks (its
/// directory and itself owned by the owner, not group- or world-writable,
/// no symlink, at most 256 KiB), not yet parsed: `catalog pin` edits them.
pub fn read_policy_bytes(paths: &HostPaths) -> Result<Vec<u8>, Refusal> {
    let path = &paths.policy;
    let file = open_owned_file(path, paths.owner_uid)?.ok_or_else(|| unsafe_path(path, "does not exist"))?;
    let mut bytes = Vec::new();
    file.take(POLICY_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| unsafe_path(path, "cannot be read"))?;
    if bytes.len() as u64 > POLICY_MAX_BYTES {
        return Err(Refusal::new(Code::PolicyInvalid, format!("{} is larger than 256 KiB.", path.display())));
    }
    Ok(bytes)
}

/// Opens a file of the operator's configuration under the policy's checks:
/// its directory and itself owned by `owner`, neither group- nor
/// world-writable, no symlink. `None` when it does not exist.
pub fn open_owned_file(path: &Path, owner: u32) -> Result<Option<File>, Refusal> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(unsafe_path(path, "is not a file path"));
    };
    let dir_handle = open_dir(dir, owner)?;
    // Open the file relative to the checked directory handle.
    let fd = match openat(
        &dir_handle,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(nix::errno::Errno::ENOENT) => return Ok(None),
        Err(nix::errno::Errno::ELOOP) => return Err(unsafe_path(path, "is a symlink")),
        Err(_) => return Err(unsafe_path(path, "cannot be opened")),
    };
    let file = File::from(fd);
    check_handle(&file, path, false, owner)?;
    Ok(Some(file))
}

/// The policy's mode as setup writes it and `catalog pin` rewrites it.
pub const POLICY_MODE: u32 = 0o600;

/// The state directory's rule on its mode, the one the helper
/// ([`prepare_state`]) and the doctor both apply: no permission bit for
/// group or others (0700). It holds the database and its write-ahead log,
/// whose reader sees every plan and the whole audit trail, so a readable
/// directory is as wrong as a writable one.
pub fn state_dir_mode_ok(mode: u32) -> bool {
    mode & 0o077 == 0
}

/// Makes sure the state directory (0700) and its `apps/` (0755, readable by
/// the gateway's uid through the bind mount) exist and are safe. A state
/// directory of another mode is refused (`unsafe_path`) naming its mode and
/// the `chmod` that fixes it, before anything in it is opened.
pub fn prepare_state(paths: &HostPaths) -> Result<(), Refusal> {
    create_if_missing(&paths.state_dir, 0o700)?;
    // The mode first, so that a group-writable directory too is answered
    // with its mode and the fix; then the owner and kind as for any path.
    let dir = open_dir_nofollow(&paths.state_dir)?;
    let mode =
        dir.metadata().map_err(|_| unsafe_path(&paths.state_dir, "cannot be inspected"))?.mode() & 0o7777;
    if !state_dir_mode_ok(mode) {
        return Err(Refusal::new(
            Code::UnsafePath,
            format!(
                "{0} has mode {mode:04o}, and the state directory must be root's alone (mode 0700); nothing was \
                 read or changed. Run `chmod 0700 {0}`.",
                paths.state_dir.display()
            ),
        ));
    }
    check_handle(&dir, &paths.state_dir, true, paths.owner_uid)?;
    let apps = paths.apps_dir();
    create_if_missing(&apps, 0o755)?;
    open_dir(&apps, paths.owner_uid)?;
    // The database itself: SQLite opens it with NOFOLLOW; its owner is ours.
    let db = paths.database();
    match std::fs::symlink_metadata(&db) {
        Ok(meta) if !meta.is_file() => return Err(unsafe_path(&db, "is not a regular file")),
        Ok(meta) if meta.uid() != paths.owner_uid => return Err(unsafe_path(&db, "has the wrong owner")),
        _ => {}
    }
    Ok(())
}

fn create_if_missing(path: &Path, mode: u32) -> Result<(), Refusal> {
    match std::fs::DirBuilder::new().mode(mode).create(path) {
        Ok(()) => {
            // The umask (077) would strip the 0755 the gateway needs.
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .map_err(|_| unsafe_path(path, "cannot be given its mode"))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(_) => Err(unsafe_path(path, "cannot be created")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn me() -> u32 {
        nix::unistd::geteuid().as_raw()
    }

    fn layout() -> (tempfile::TempDir, HostPaths) {
        let root = tempfile::tempdir().unwrap();
        let etc = root.path().join("etc");
        std::fs::create_dir(&etc).unwrap();
        std::fs::set_permissions(&etc, std::fs::Permissions::from_mode(0o755)).unwrap();
        let policy = etc.join("policy.json");
        std::fs::write(&policy, crate::control::policy::tests::sample().to_string()).unwrap();
        std::fs::set_permissions(&policy, std::fs::Permissions::from_mode(0o600)).unwrap();
        let paths = HostPaths { policy, state_dir: root.path().join("state"), owner_uid: me() };
        (root, paths)
    }

    #[test]
    fn fixed_paths_are_the_documented_ones() {
        let fixed = HostPaths::fixed();
        assert_eq!(fixed.policy, Path::new("/etc/volce-lab/policy.json"));
        assert_eq!(fixed.database(), Path::new("/var/lib/volce-lab/state.db"));
        assert_eq!(fixed.apps_dir(), Path::new("/var/lib/volce-lab/apps"));
        assert_eq!(fixed.setup_manifest(), Path::new("/var/lib/volce-lab/setup.json"));
        assert_eq!(fixed.owner_uid, 0);
        assert_eq!(HostPaths::HELPER, "/usr/local/bin/volce-lab-host");
        assert_eq!(HostPaths::SUDOERS, "/etc/sudoers.d/volce-lab");
        assert_eq!(HostPaths::SUDO, "/usr/bin/sudo");
        assert_eq!(Path::new(HostPaths::ENV_DIR), fixed.policy.parent().unwrap().join("apps"));
        // The wire's fixed rpc line names the same helper (a literal there:
        // the contract is pure and spells its lines out byte for byte).
        assert_eq!(crate::wire::gate::LEGACY_RPC, format!("sudo -n {} rpc", HostPaths::HELPER));
    }

    /// The e2e scripts run before the binary is installed (they refuse to
    /// touch an installation they did not make), so they keep their own
    /// copy of the paths; it must be this table.
    #[test]
    fn the_e2e_scripts_name_the_same_paths() {
        let fixed = HostPaths::fixed();
        let etc = fixed.policy.parent().unwrap().to_str().unwrap().to_owned();
        let expected = [
            ("HOST_LINK", HostPaths::HELPER.to_owned()),
            ("ETC_DIR", etc),
            ("STATE_DIR", HostPaths::STATE_DIR.to_owned()),
            ("SUDOERS", HostPaths::SUDOERS.to_owned()),
        ];
        for (script, text) in [
            ("e2e-setup", include_str!("../../scripts/e2e-setup")),
            ("e2e-teardown", include_str!("../../scripts/e2e-teardown")),
        ] {
            let mut seen = 0;
            for line in text.lines() {
                let Some((name, value)) = line.split_once('=') else { continue };
                if let Some((_, want)) = expected.iter().find(|(n, _)| *n == name) {
                    assert_eq!(value, want, "scripts/{script}: {name}");
                    seen += 1;
                }
            }
            assert_eq!(seen, expected.len(), "scripts/{script} names each path once");
        }
    }

    #[test]
    fn a_safe_layout_loads_and_prepares() {
        let (_root, paths) = layout();
        load_policy(&paths).unwrap();
        prepare_state(&paths).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&paths.state_dir), 0o700);
        assert_eq!(mode(&paths.apps_dir()), 0o755);
        prepare_state(&paths).unwrap();
    }

    #[test]
    fn a_group_writable_policy_is_refused_naming_the_path() {
        let (_root, paths) = layout();
        std::fs::set_permissions(&paths.policy, std::fs::Permissions::from_mode(0o620)).unwrap();
        let refusal = load_policy(&paths).unwrap_err();
        assert_eq!(refusal.code, Code::UnsafePath);
        assert!(refusal.message.contains(&paths.policy.display().to_string()), "{}", refusal.message);
    }

    #[test]
    fn a_world_writable_policy_directory_is_refused() {
        let (_root, paths) = layout();
        std::fs::set_permissions(paths.policy.parent().unwrap(), std::fs::Permissions::from_mode(0o757))
            .unwrap();
        assert_eq!(load_policy(&paths).unwrap_err().code, Code::UnsafePath);
    }

    #[test]
    fn a_symlinked_policy_is_refused() {
        let (root, paths) = layout();
        let real = root.path().join("real.json");
        std::fs::rename(&paths.policy, &real).unwrap();
        symlink(&real, &paths.policy).unwrap();
        assert!(load_policy(&paths).unwrap_err().message.contains("symlink"));
    }

    #[test]
    fn a_symlinked_policy_directory_is_refused() {
        let (root, mut paths) = layout();
        let link = root.path().join("etc-link");
        symlink(root.path().join("etc"), &link).unwrap();
        paths.policy = link.join("policy.json");
        assert_eq!(load_policy(&paths).unwrap_err().code, Code::UnsafePath);
    }

    #[test]
    fn a_wrong_owner_is_refused() {
        let (_root, mut paths) = layout();
        paths.owner_uid = me() + 1;
        assert!(load_policy(&paths).unwrap_err().message.contains("owned by uid"));
        assert_eq!(prepare_state(&paths).unwrap_err().code, Code::UnsafePath);
    }

    #[test]
    fn a_symlinked_state_directory_is_refused() {
        let (root, mut paths) = layout();
        let real = root.path().join("real-state");
        std::fs::create_dir(&real).unwrap();
        let link = root.path().join("state-link");
        symlink(&real, &link).unwrap();
        paths.state_dir = link;
        assert_eq!(prepare_state(&paths).unwrap_err().code, Code::UnsafePath);
    }

    #[test]
    fn a_bad_policy_is_refused_with_its_reason() {
        let (_root, paths) = layout();
        std::fs::write(&paths.policy, br#"{"catalog":{},"nginx_image":"x","approvers":[]}"#).unwrap();
        let refusal = load_policy(&paths).unwrap_err();
        assert_eq!(refusal.code, Code::PolicyInvalid);
        assert!(refusal.message.contains("nginx_image is not pinned"), "{}", refusal.message);
    }
}
