//! The files behind an accessory (issue 40): its generated credential
//! beside its data (`<app>@<name>.secret`), and the two rendered env files
//! docker reads in the app's directory. File handling only, no docker;
//! runs as root in the host helper, under the state directory.
//!
//! Security invariants enforced here: the credential comes from the
//! kernel's random source, is written once (`O_EXCL`, 0600) and read back
//! only from a regular file of ours that nobody else can read, never
//! through a symlink; an env file holding it is a new file (0600, never
//! overwriting), and nothing here ever puts the credential in an error, a
//! log or a return value other than the [`Secret`] itself.

use std::fs::OpenOptions;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

use nix::fcntl::OFlag;

use super::EngineError;
use crate::vocab::Secret;

/// The accessory's credential: read when its file exists (kept with its
/// data), else made now. `true` when made now, so a failed deploy removes
/// it again with the data it was made for.
pub fn ensure_secret(path: &Path) -> Result<(Secret, bool), EngineError> {
    match read_secret(path) {
        Ok(secret) => return Ok((secret, false)),
        Err(ReadError::Missing) => {}
        Err(ReadError::Unsafe) => return Err(EngineError::Host { step: "read the accessory's credential" }),
    }
    Ok((new_secret(path)?, true))
}

/// The credential kept at `path`, which must be there.
pub fn existing_secret(path: &Path) -> Result<Secret, EngineError> {
    read_secret(path).map_err(|_| EngineError::Host { step: "read the accessory's credential" })
}

/// A new credential from the kernel's random source, written to `path`,
/// which must not exist yet.
pub fn new_secret(path: &Path) -> Result<Secret, EngineError> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .map_err(|_| EngineError::Host { step: "generate the accessory's credential" })?;
    let secret = Secret::from_random(&bytes);
    write_private(path, secret.expose().as_bytes(), "write the accessory's credential")?;
    Ok(secret)
}

/// Removes a credential a failed deploy made, or another file of ours
/// holding one (whether it is gone).
pub fn remove_secret(path: &Path) -> bool {
    match std::fs::remove_file(path) {
        Ok(()) => true,
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// Writes a rendered env file: a new regular file, 0600, synced.
pub fn write_env(path: &Path, text: &str) -> Result<(), EngineError> {
    write_private(path, text.as_bytes(), "write an accessory env file")
}

/// Puts `text` in place of the env file at `path` in one step: written
/// to `<path>.new` (0600, synced; a copy a stopped helper left is ours and
/// goes first), then renamed over it.
pub fn replace_env(path: &Path, text: &str) -> Result<(), EngineError> {
    let mut staged = path.as_os_str().to_owned();
    staged.push(".new");
    let staged = std::path::PathBuf::from(staged);
    remove_secret(&staged);
    write_env(&staged, text)?;
    std::fs::rename(&staged, path).map_err(|_| EngineError::Host { step: "replace an accessory env file" })
}

/// The text of an env file of ours, for a rotation to put back.
pub fn read_env(path: &Path) -> Result<String, EngineError> {
    let step = "read an accessory env file";
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(path)
        .map_err(|_| EngineError::Host { step })?;
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(|_| EngineError::Host { step })?;
    Ok(text)
}

enum ReadError {
    Missing,
    Unsafe,
}

fn read_secret(path: &Path) -> Result<Secret, ReadError> {
    let mut file = match OpenOptions::new().read(true).custom_flags(OFlag::O_NOFOLLOW.bits()).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ReadError::Missing),
        Err(_) => return Err(ReadError::Unsafe),
    };
    let meta = file.metadata().map_err(|_| ReadError::Unsafe)?;
    let ours = meta.uid() == nix::unistd::geteuid().as_raw() && meta.mode() & 0o077 == 0;
    if !meta.is_file() || !ours || meta.len() > 128 {
        return Err(ReadError::Unsafe);
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|_| ReadError::Unsafe)?;
    Secret::parse(&bytes).ok_or(ReadError::Unsafe)
}

fn write_private(path: &Path, bytes: &[u8], step: &'static str) -> Result<(), EngineError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(path)
        .map_err(|_| EngineError::Host { step })?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(|_| {
        // A part of a credential is no credential, and would stand in the
        // way of the next try: it goes.
        let _ = std::fs::remove_file(path);
        EngineError::Host { step }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_is_made_once_private_and_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app@db.secret");
        let (made, new) = ensure_secret(&path).unwrap();
        assert!(new);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        let (read, new) = ensure_secret(&path).unwrap();
        assert!(!new);
        assert_eq!(read.expose(), made.expose());
        // Tried: a file others can read, and one that is not a credential.
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        assert!(ensure_secret(&path).is_err());
        std::fs::write(dir.path().join("x.secret"), "short").unwrap();
        assert!(ensure_secret(&dir.path().join("x.secret")).is_err());
        assert!(remove_secret(&path) && remove_secret(&path));
    }
}
