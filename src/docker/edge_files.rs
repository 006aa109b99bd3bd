//! The edge's files on the host (issue 39): its directory under the state
//! directory, the operator's certificate files as we read them, and the
//! copies the edge reads. File handling only, no docker; runs as root in
//! the host helper.
//!
//! Security invariants enforced here:
//! - an operator's certificate or key is read only if it is a regular,
//!   root-owned file nobody else can write (a key: nobody else can read),
//!   never through a symlink, and bounded in size;
//! - the edge's copy of a key is readable by [`EDGE_UID`] alone (0400),
//!   a uid no account of the host has, in root's directory; the copy is
//!   written whole to a temporary file and renamed into place, so the edge
//!   never reads half a key;
//! - a copy is installed only if the certificate is still the one the plan
//!   sealed (its sha256).

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use sha2::{Digest as _, Sha256};

use super::EngineError;
use crate::nginx::edge::cert_files;
use crate::vocab::{AcmeFailure, CertSource, EDGE_UID, ExposedName, ServerName};

/// The largest certificate chain or key we read (a chain of a few
/// certificates is a few KiB).
const MAX_PEM_BYTES: u64 = 64 * 1024;

/// The edge's directory: its nginx.conf and `certs/`.
pub fn edge_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("edge")
}

/// Where the edge's copies of the certificates are (mounted read-only).
pub fn certs_dir(edge_dir: &Path) -> PathBuf {
    edge_dir.join("certs")
}

/// Where the edge serves the ACME challenges from (mounted read-only):
/// lego writes its answers here.
pub fn webroot(edge_dir: &Path) -> PathBuf {
    edge_dir.join("acme-webroot")
}

/// Where lego keeps the ACME account and the certificates it obtained
/// (root's, 0700: `crate::docker::acme`).
pub fn acme_state(edge_dir: &Path) -> PathBuf {
    edge_dir.join("acme")
}

/// Where the last failed ACME order of each name is kept (`<name>.json`,
/// root's 0600), beside lego's state so that it outlives `edge disable`
/// as the account does.
fn acme_failures(edge_dir: &Path) -> PathBuf {
    acme_state(edge_dir).join("volce-lab-failures")
}

/// Keeps `failure` as the last of each of `names`. Best effort: the order's
/// own result already carries the error; this is the inventory's memory.
pub(super) fn record_acme_failure(edge_dir: &Path, names: &[ServerName], failure: &AcmeFailure) {
    let dir = acme_failures(edge_dir);
    if DirBuilder::new().recursive(true).mode(0o700).create(&dir).is_err() {
        return;
    }
    let bytes = serde_json::to_vec(failure).expect("a failure serializes");
    for name in names {
        let _ = write_copy(&dir, &format!("{name}.json"), &bytes, 0o600, None);
    }
}

/// Forgets the failures of `names`: an order for them succeeded.
pub(super) fn clear_acme_failures(edge_dir: &Path, names: &[ServerName]) {
    for name in names {
        let _ = std::fs::remove_file(acme_failures(edge_dir).join(format!("{name}.json")));
    }
}

/// The last failed ACME order for `name` that none has succeeded since.
pub fn acme_failure(edge_dir: &Path, name: &ServerName) -> Option<AcmeFailure> {
    // In root's 0700 directory, written only by the helper: read as it is,
    // bounded (a failure is a few hundred bytes).
    let file = File::open(acme_failures(edge_dir).join(format!("{name}.json"))).ok()?;
    let mut bytes = Vec::new();
    file.take(4096).read_to_end(&mut bytes).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Why an operator's certificate file cannot be used, in the operator's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileProblem {
    #[error("{0} does not exist")]
    Missing(String),
    #[error("{0} is not a regular file (a symlink or a directory is never followed)")]
    NotRegular(String),
    #[error("{0} is not root's own file, or others can write it")]
    NotRoots(String),
    #[error("{0} is a private key that others can read (it must be mode 0600 or stricter)")]
    NotPrivate(String),
    #[error("{0} is larger than 64 KiB, more than a PEM certificate chain or key")]
    TooLarge(String),
    #[error("{0} cannot be read")]
    Unreadable(String),
    #[error("{0} holds no PEM {1}")]
    NotPem(String, &'static str),
}

/// Reads one of the operator's files: regular, root's, nobody else can
/// write it and, for a key (`private`), nobody else can read it; PEM.
pub fn read_operator_file(path: &Path, private: bool) -> Result<Vec<u8>, FileProblem> {
    let shown = path.display().to_string();
    let file = OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => FileProblem::Missing(shown.clone()),
            _ if e.raw_os_error() == Some(nix::libc::ELOOP) => FileProblem::NotRegular(shown.clone()),
            _ => FileProblem::Unreadable(shown.clone()),
        })?;
    let meta = file.metadata().map_err(|_| FileProblem::Unreadable(shown.clone()))?;
    if !meta.file_type().is_file() {
        return Err(FileProblem::NotRegular(shown));
    }
    if meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return Err(FileProblem::NotRoots(shown));
    }
    if private && meta.mode() & 0o077 != 0 {
        return Err(FileProblem::NotPrivate(shown));
    }
    if meta.len() > MAX_PEM_BYTES {
        return Err(FileProblem::TooLarge(shown));
    }
    let mut bytes = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| FileProblem::Unreadable(shown.clone()))?;
    let marker: &[u8] = if private { b"PRIVATE KEY-----" } else { b"-----BEGIN CERTIFICATE-----" };
    if !bytes.windows(marker.len()).any(|w| w == marker) {
        return Err(FileProblem::NotPem(shown, if private { "private key" } else { "certificate" }));
    }
    Ok(bytes)
}

/// The sha256 of a certificate's bytes, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    crate::text::hex(&Sha256::digest(bytes))
}

/// Makes the edge's directory and `certs/` (root's, 0755: the edge's uid
/// reads its files through the bind mounts); an existing one must be a
/// real directory of root's that nobody else can write.
pub(super) fn make_dirs(edge_dir: &Path) -> Result<(), EngineError> {
    for dir in [edge_dir.to_path_buf(), certs_dir(edge_dir), webroot(edge_dir)] {
        match std::fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                DirBuilder::new()
                    .mode(0o755)
                    .create(&dir)
                    .map_err(|_| EngineError::Host { step: "create the edge directory" })?;
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
                    .map_err(|_| EngineError::Host { step: "set the edge directory's mode" })?;
            }
            Ok(meta) if meta.is_dir() && meta.uid() == 0 && meta.mode() & 0o022 == 0 => {}
            _ => {
                return Err(EngineError::Host {
                    step: "check the edge directory (root's, not writable by others)",
                });
            }
        }
    }
    Ok(())
}

/// Installs the edge's copies of one name's certificate and key, once the
/// certificate is checked to be the one the plan sealed.
pub(super) fn install(certs: &Path, exposed: &ExposedName) -> Result<(), EngineError> {
    let CertSource::File { files, cert_sha256 } = &exposed.source else { return Ok(()) };
    let changed = EngineError::Host { step: "read the certificate the plan sealed (it changed or is gone)" };
    let cert = read_operator_file(&files.cert, false).map_err(|_| changed.clone())?;
    if sha256_hex(&cert) != *cert_sha256 {
        return Err(changed);
    }
    let key = read_operator_file(&files.key, true)
        .map_err(|_| EngineError::Host { step: "read the certificate's key" })?;
    let (cert_name, key_name) = cert_files(&exposed.name);
    write_copy(certs, &cert_name, &cert, 0o644, None)?;
    write_copy(certs, &key_name, &key, 0o400, Some(EDGE_UID))
}

/// Installs the edge's copies of an ACME certificate (lego's chain and
/// key, root's own files) for `name`.
pub(super) fn install_acme(
    certs: &Path,
    name: &ServerName,
    files: &crate::vocab::AcmeFiles,
) -> Result<(), EngineError> {
    let cert = read_operator_file(&files.certificate, false)
        .map_err(|_| EngineError::Host { step: "read the certificate lego obtained" })?;
    let key = read_operator_file(&files.key, true)
        .map_err(|_| EngineError::Host { step: "read the key of the certificate lego obtained" })?;
    let (cert_name, key_name) = cert_files(name);
    write_copy(certs, &cert_name, &cert, 0o644, None)?;
    write_copy(certs, &key_name, &key, 0o400, Some(EDGE_UID))
}

/// `edge disable`: the edge's files (its config and backups, the
/// certificate copies, the challenges' webroot), all ours; the ACME account
/// and certificates (`acme/`) stay, so enabling again asks the CA for
/// nothing. The directory goes when nothing else is left.
pub(super) fn remove_files(edge_dir: &Path) -> Result<(), EngineError> {
    let step = EngineError::Host { step: "remove the edge's files" };
    match std::fs::symlink_metadata(edge_dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Ok(meta) if meta.is_dir() && meta.uid() == 0 => {}
        _ => return Err(step),
    }
    for dir in [certs_dir(edge_dir), webroot(edge_dir)] {
        // Never follows a symlink: one would be removed itself.
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(step),
            _ => {}
        }
    }
    for entry in std::fs::read_dir(edge_dir).map_err(|_| step.clone())?.flatten() {
        let name = entry.file_name();
        let ours = name.to_str().is_some_and(|n| n == "nginx.conf" || n.starts_with("nginx.conf."));
        if ours && entry.file_type().is_ok_and(|t| t.is_file()) {
            std::fs::remove_file(entry.path()).map_err(|_| step.clone())?;
        }
    }
    match std::fs::remove_dir(edge_dir) {
        Err(_) if acme_state(edge_dir).exists() => Ok(()),
        other => other.map_err(|_| step),
    }
}

/// Removes the edge's copies of `name`'s certificate and key, if there.
pub(super) fn remove(certs: &Path, name: &ServerName) -> Result<(), EngineError> {
    let (cert_name, key_name) = cert_files(name);
    for file in [cert_name, key_name] {
        match std::fs::remove_file(certs.join(file)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(EngineError::Host { step: "remove a certificate copy of the edge" });
            }
            _ => {}
        }
    }
    Ok(())
}

/// Writes `bytes` to `dir/name` whole: a new temporary file with `mode`
/// (and `owner`), synced, then renamed over the old one.
fn write_copy(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    mode: u32,
    owner: Option<u32>,
) -> Result<(), EngineError> {
    let step = EngineError::Host { step: "write a file of the edge" };
    let temporary = dir.join(format!(".{name}.new"));
    let _ = std::fs::remove_file(&temporary);
    let mut file: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(&temporary)
        .map_err(|_| step.clone())?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    let owned = owner.map_or(Ok(()), |uid| {
        nix::unistd::fchown(&file, Some(uid.into()), Some(uid.into())).map_err(std::io::Error::from)
    });
    let moded = file.set_permissions(std::fs::Permissions::from_mode(mode));
    if written.and(owned).and(moded).is_err() || std::fs::rename(&temporary, dir.join(name)).is_err() {
        let _ = std::fs::remove_file(&temporary);
        return Err(step);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operator_file_is_read_only_when_it_is_a_pem_file_nobody_else_may_change() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("c.pem");
        std::fs::write(&cert, b"-----BEGIN CERTIFICATE-----\nMII\n-----END CERTIFICATE-----\n").unwrap();
        std::fs::set_permissions(&cert, std::fs::Permissions::from_mode(0o644)).unwrap();
        let root = nix::unistd::geteuid().is_root();
        // As root the file is root's own; as another user it never is.
        assert_eq!(read_operator_file(&cert, false).is_ok(), root);
        if !root {
            assert!(matches!(read_operator_file(&cert, false), Err(FileProblem::NotRoots(_))));
        }
        // What was tried besides: a missing file, a symlink, a directory.
        assert!(matches!(read_operator_file(&dir.path().join("none"), false), Err(FileProblem::Missing(_))));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&cert, &link).unwrap();
        assert!(matches!(read_operator_file(&link, false), Err(FileProblem::NotRegular(_))));
        assert!(matches!(
            read_operator_file(dir.path(), false),
            Err(FileProblem::NotRegular(_)) | Err(FileProblem::NotRoots(_))
        ));
    }
}
