//! Reads the operator's env files (`/etc/volce-lab/apps/<name>`, see
//! `crate::vocab::Configuration` for the text): the controller hashes one
//! into a plan (keyed, [`EnvDir::used`]), the log redaction takes its
//! values, the doctor checks it.
//! Runs as root inside the host helper.
//!
//! Security invariant: a file is trusted only when only root could have
//! written it and nobody else can read it: the directory as the policy's
//! (`paths::open_dir`: owned by root, not group- or world-writable, not a
//! symlink), the file opened relative to that handle with `O_NOFOLLOW`, a
//! regular file owned by root with no permission bit for group or others
//! (0600 or stricter), checked on the opened handle, then read bounded.
//! A refusal names the path and what is wrong, never a line's text.

use std::cell::OnceCell;
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use super::paths::HostPaths;
use crate::vocab::{
    Code, Configuration, ENV_FILE_MAX_BYTES, EnvFileName, EnvFileUse, HashKey, Refusal, env_file_hmac,
};

/// The key's file name in the state directory.
const KEY_FILE: &str = "env-hash.key";

/// Where env files are read, who must own them, and the host's key their
/// hashes are made with. [`EnvDir::of`] the fixed paths is `/etc/volce-lab/apps`
/// and `/var/lib/volce-lab/env-hash.key`; a test's paths put both in its
/// temporary directories.
#[derive(Debug, Clone)]
pub struct EnvDir {
    pub dir: PathBuf,
    pub owner_uid: u32,
    key_path: PathBuf,
    key: OnceCell<HashKey>,
}

impl EnvDir {
    /// Beside the policy (`<policy dir>/apps`), the key in the state directory.
    pub fn of(paths: &HostPaths) -> EnvDir {
        let etc = paths.policy.parent().unwrap_or(Path::new("/etc/volce-lab"));
        EnvDir {
            dir: etc.join("apps"),
            owner_uid: paths.owner_uid,
            key_path: paths.state_dir.join(KEY_FILE),
            key: OnceCell::new(),
        }
    }

    pub fn fixed() -> EnvDir {
        let env = EnvDir::of(&HostPaths::fixed());
        debug_assert_eq!(env.dir, Path::new(HostPaths::ENV_DIR));
        env
    }

    pub fn path(&self, name: &EnvFileName) -> PathBuf {
        self.dir.join(name.as_str())
    }

    /// The file's variables, after every check of the module header
    /// (`service_logs`' redaction, the doctor).
    pub fn configuration(&self, name: &EnvFileName) -> Result<Configuration, Refusal> {
        self.text(name).map(|(_, _, configuration)| configuration)
    }

    /// What a plan records of the file now: its path and its keyed hash.
    ///
    /// Why keyed (HMAC-SHA256 under the host's random key, not a bare
    /// sha256): the plan, and so its hash, reaches the agent in the plan
    /// view; a bare hash of `PIN=1234` is found by trying guesses, a keyed
    /// one cannot be tested without the key, which only root reads.
    pub fn used(&self, name: &EnvFileName) -> Result<EnvFileUse, Refusal> {
        let (path, bytes, _) = self.text(name)?;
        Ok(EnvFileUse { hmac_sha256: env_file_hmac(self.key()?, &bytes), path })
    }

    fn text(&self, name: &EnvFileName) -> Result<(PathBuf, Vec<u8>, Configuration), Refusal> {
        let path = self.path(name);
        let bytes = self.bytes(&path, name)?;
        // "does not parse:" makes one sentence of the path and the parser's
        // reason ("line 3 has no '='", "it is larger than ..."), issue 38.
        let configuration =
            Configuration::parse(&bytes).map_err(|e| invalid(&path, &format!("does not parse: {e}")))?;
        Ok((path, bytes, configuration))
    }

    fn bytes(&self, path: &Path, name: &EnvFileName) -> Result<Vec<u8>, Refusal> {
        let dir = super::paths::open_dir(&self.dir, self.owner_uid)
            .map_err(|refusal| Refusal::new(Code::EnvFileInvalid, refusal.message))?;
        let fd = openat(
            &dir,
            name.as_str(),
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            nix::errno::Errno::ENOENT => invalid(path, "does not exist"),
            nix::errno::Errno::ELOOP => invalid(path, "is a symlink"),
            _ => invalid(path, "cannot be opened"),
        })?;
        let file = File::from(fd);
        let meta = file.metadata().map_err(|_| invalid(path, "cannot be inspected"))?;
        if !meta.is_file() {
            return Err(invalid(path, "is not a regular file"));
        }
        if meta.uid() != self.owner_uid {
            return Err(invalid(path, &format!("is owned by uid {}, not {}", meta.uid(), self.owner_uid)));
        }
        // Secrets: not even readable by group or others.
        if meta.mode() & 0o077 != 0 {
            return Err(invalid(
                path,
                &format!(
                    "has mode {:04o}; it must be 0600 (chmod 600 {})",
                    meta.mode() & 0o7777,
                    path.display()
                ),
            ));
        }
        let mut bytes = Vec::new();
        file.take(ENV_FILE_MAX_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|_| invalid(path, "cannot be read"))?;
        Ok(bytes)
    }

    /// The host's hash key: read from the state directory, or made there
    /// on first use (32 bytes of /dev/urandom, written to a private file
    /// and linked into place, so two helpers racing both end up with the
    /// one that won). A lost key only voids pending plans with an env file.
    fn key(&self) -> Result<&HashKey, Refusal> {
        if let Some(key) = self.key.get() {
            return Ok(key);
        }
        let key = match read_key(&self.key_path, self.owner_uid) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                make_key(&self.key_path)?;
                read_key(&self.key_path, self.owner_uid)
            }
            other => other,
        }
        .map_err(|_| {
            Refusal::new(
                Code::UnsafePath,
                format!(
                    "{} is not root's private 32-byte key; nothing was changed. Remove it: the helper makes a new one.",
                    self.key_path.display()
                ),
            )
        })?;
        Ok(self.key.get_or_init(|| key))
    }
}

fn read_key(path: &Path, owner: u32) -> std::io::Result<HashKey> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC).bits())
        .open(path)?;
    let meta = file.metadata()?;
    let mut key = [0u8; 32];
    if !meta.is_file() || meta.uid() != owner || meta.mode() & 0o077 != 0 || meta.len() != 32 {
        return Err(std::io::Error::other("not a private key file"));
    }
    file.read_exact(&mut key)?;
    Ok(HashKey(key))
}

fn make_key(path: &Path) -> Result<(), Refusal> {
    let failed = || {
        Refusal::new(
            Code::StateUnavailable,
            format!("{} cannot be made; nothing was changed.", path.display()),
        )
    };
    let mut key = [0u8; 32];
    File::open("/dev/urandom").and_then(|mut random| random.read_exact(&mut key)).map_err(|_| failed())?;
    let draft = path.with_extension(format!("{}.new", std::process::id()));
    let _ = std::fs::remove_file(&draft);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(&draft)
        .and_then(|mut file| file.write_all(&key).and_then(|()| file.sync_all()));
    let linked = written.and_then(|()| std::fs::hard_link(&draft, path));
    let _ = std::fs::remove_file(&draft);
    match linked {
        Ok(()) => Ok(()),
        // Another helper made it first: theirs is the key.
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(_) => Err(failed()),
    }
}

fn invalid(path: &Path, why: &str) -> Refusal {
    Refusal::new(Code::EnvFileInvalid, format!("The env file {} {why}; nothing was changed.", path.display()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

    use super::EnvDir;
    use crate::host::HostPaths;
    use crate::vocab::{Code, EnvFileName};

    fn me() -> u32 {
        nix::unistd::geteuid().as_raw()
    }

    fn layout(text: &str, mode: u32) -> (tempfile::TempDir, EnvDir, EnvFileName) {
        let root = tempfile::tempdir().unwrap();
        let state = root.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let paths = HostPaths { policy: root.path().join("policy.json"), state_dir: state, owner_uid: me() };
        let dir = root.path().join("apps");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = dir.join("shop.env");
        std::fs::write(&file, text).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let env = EnvDir::of(&paths);
        assert_eq!(env.dir, dir);
        (root, env, EnvFileName::parse("shop.env").unwrap())
    }

    /// Tried: a good 0600 file: parsed, and hashed under a key made on
    /// first use (root's, 0600): the hash is not the bare sha256, stays the
    /// same for the same bytes, and changes with them.
    #[test]
    fn a_private_file_is_read_and_hashed_under_the_hosts_key() {
        use sha2::Digest as _;
        let (root, env, name) = layout("TOKEN=abc\n", 0o600);
        let config = env.configuration(&name).unwrap();
        assert_eq!(config.names().collect::<Vec<_>>(), ["TOKEN"]);
        let used = env.used(&name).unwrap();
        assert_eq!(used.path, env.dir.join("shop.env"));
        let bare: String = sha2::Sha256::digest(b"TOKEN=abc\n").iter().map(|b| format!("{b:02x}")).collect();
        assert_ne!(used.hmac_sha256, bare);
        let key = root.path().join("state/env-hash.key");
        let meta = std::fs::metadata(&key).unwrap();
        assert_eq!((meta.len(), meta.mode() & 0o777), (32, 0o600));
        // Another helper (a fresh EnvDir) reads the same key.
        let again = EnvDir { key: Default::default(), ..env.clone() };
        assert_eq!(again.used(&name).unwrap(), used);
        std::fs::write(env.dir.join("shop.env"), "TOKEN=abd\n").unwrap();
        assert_ne!(again.used(&name).unwrap(), used);
    }

    /// Tried: group- or world-readable, a symlink, a missing file, a
    /// foreign owner, a group-writable directory, text that does not
    /// parse: each refused `env_file_invalid`, naming the path, never a value.
    #[test]
    fn unsafe_or_bad_files_are_refused() {
        for mode in [0o640, 0o604, 0o660] {
            let (_root, env, name) = layout("TOKEN=abc\n", mode);
            let refusal = env.configuration(&name).unwrap_err();
            assert_eq!(refusal.code, Code::EnvFileInvalid);
            assert!(refusal.message.contains("chmod 600"), "{}", refusal.message);
        }
        let (_root, env, name) = layout("TOKEN=abc\n", 0o600);
        std::fs::rename(env.dir.join("shop.env"), env.dir.join("real.env")).unwrap();
        std::os::unix::fs::symlink(env.dir.join("real.env"), env.dir.join("shop.env")).unwrap();
        assert!(env.configuration(&name).unwrap_err().message.contains("is a symlink"));
        let missing = EnvFileName::parse("none.env").unwrap();
        assert!(env.configuration(&missing).unwrap_err().message.contains("does not exist"));
        let foreign = EnvDir { owner_uid: me() + 1, ..env.clone() };
        assert_eq!(foreign.configuration(&name).unwrap_err().code, Code::EnvFileInvalid);
        std::fs::set_permissions(&env.dir, std::fs::Permissions::from_mode(0o775)).unwrap();
        assert_eq!(env.configuration(&name).unwrap_err().code, Code::EnvFileInvalid);

        let (_root, env, name) = layout("TOKEN=s3cr3t\r\n", 0o600);
        let refusal = env.configuration(&name).unwrap_err();
        assert!(
            refusal.message.contains("line 1") && !refusal.message.contains("s3cr3t"),
            "{}",
            refusal.message
        );
        // One sentence: the path, then why it does not parse.
        let (_root, env, name) = layout("TOKEN\n", 0o600);
        let path = env.dir.join("shop.env");
        assert_eq!(
            env.configuration(&name).unwrap_err().message,
            format!(
                "The env file {} does not parse: line 1 has no '=' (write NAME=value); nothing was changed.",
                path.display()
            )
        );
    }
}
