//! Reads the operator's env files (`/etc/volce-lab/apps/<name>`, see
//! `crate::vocab::Configuration` for the text): the controller hashes one
//! into a plan, the log redaction takes its values, the doctor checks it.
//! Runs as root inside the host helper.
//!
//! Security invariant: a file is trusted only when only root could have
//! written it and nobody else can read it: the directory as the policy's
//! (`paths::open_dir`: owned by root, not group- or world-writable, not a
//! symlink), the file opened relative to that handle with `O_NOFOLLOW`, a
//! regular file owned by root with no permission bit for group or others
//! (0600 or stricter), checked on the opened handle, then read bounded.
//! A refusal names the path and what is wrong, never a line's text.

use std::fs::File;
use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use crate::vocab::{
    Code, Configuration, ENV_DIR, ENV_FILE_MAX_BYTES, EnvFileName, EnvFileUse, Refusal, env_file_sha256,
};

/// Where env files are read and who must own them: [`EnvDir::fixed`] in
/// the shipped binary; tests point it at a temporary directory they own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvDir {
    pub dir: PathBuf,
    pub owner_uid: u32,
}

impl EnvDir {
    pub fn fixed() -> EnvDir {
        EnvDir { dir: PathBuf::from(ENV_DIR), owner_uid: 0 }
    }

    pub fn path(&self, name: &EnvFileName) -> PathBuf {
        self.dir.join(name.as_str())
    }

    /// The file's bytes after every check of the module header, parsed:
    /// what a plan records of it and its variables.
    pub fn read(&self, name: &EnvFileName) -> Result<(EnvFileUse, Configuration), Refusal> {
        let path = self.path(name);
        let bytes = self.bytes(&path, name)?;
        let configuration = Configuration::parse(&bytes).map_err(|e| invalid(&path, &e.to_string()))?;
        Ok((EnvFileUse { sha256: env_file_sha256(&bytes), path }, configuration))
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
}

fn invalid(path: &Path, why: &str) -> Refusal {
    Refusal::new(Code::EnvFileInvalid, format!("The env file {} {why}; nothing was changed.", path.display()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::EnvDir;
    use crate::vocab::{Code, EnvFileName};

    fn me() -> u32 {
        nix::unistd::geteuid().as_raw()
    }

    fn layout(text: &str, mode: u32) -> (tempfile::TempDir, EnvDir, EnvFileName) {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("apps");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = dir.join("shop.env");
        std::fs::write(&file, text).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        (root, EnvDir { dir, owner_uid: me() }, EnvFileName::parse("shop.env").unwrap())
    }

    /// Tried: a good 0600 file: read, hashed, parsed.
    #[test]
    fn a_private_file_is_read_and_hashed() {
        let (_root, env, name) = layout("TOKEN=abc\n", 0o600);
        let (used, config) = env.read(&name).unwrap();
        assert_eq!(used.path, env.dir.join("shop.env"));
        assert_eq!(used.sha256, crate::vocab::env_file_sha256(b"TOKEN=abc\n"));
        assert_eq!(config.names().collect::<Vec<_>>(), ["TOKEN"]);
    }

    /// Tried: group- or world-readable, a symlink, a missing file, a
    /// foreign owner, a group-writable directory, text that does not
    /// parse: each refused `env_file_invalid`, naming the path, never a value.
    #[test]
    fn unsafe_or_bad_files_are_refused() {
        for mode in [0o640, 0o604, 0o660] {
            let (_root, env, name) = layout("TOKEN=abc\n", mode);
            let refusal = env.read(&name).unwrap_err();
            assert_eq!(refusal.code, Code::EnvFileInvalid);
            assert!(refusal.message.contains("chmod 600"), "{}", refusal.message);
        }
        let (_root, env, name) = layout("TOKEN=abc\n", 0o600);
        std::fs::rename(env.dir.join("shop.env"), env.dir.join("real.env")).unwrap();
        std::os::unix::fs::symlink(env.dir.join("real.env"), env.dir.join("shop.env")).unwrap();
        assert!(env.read(&name).unwrap_err().message.contains("is a symlink"));
        let missing = EnvFileName::parse("none.env").unwrap();
        assert!(env.read(&missing).unwrap_err().message.contains("does not exist"));
        let foreign = EnvDir { owner_uid: me() + 1, ..env.clone() };
        assert_eq!(foreign.read(&name).unwrap_err().code, Code::EnvFileInvalid);
        std::fs::set_permissions(&env.dir, std::fs::Permissions::from_mode(0o775)).unwrap();
        assert_eq!(env.read(&name).unwrap_err().code, Code::EnvFileInvalid);

        let (_root, env, name) = layout("TOKEN=s3cr3t\r\n", 0o600);
        let refusal = env.read(&name).unwrap_err();
        assert!(
            refusal.message.contains("line 1") && !refusal.message.contains("s3cr3t"),
            "{}",
            refusal.message
        );
    }
}
