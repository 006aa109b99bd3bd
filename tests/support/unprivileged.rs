//! The binary under test, where an unprivileged account can run it. As root
//! the build directory may sit under a 0700 home that `nobody` cannot
//! traverse, so tests that drop privileges run a copy in a world-readable
//! temporary directory instead (made once per test binary). And the host
//! name that local mode, run as that account, must report.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

pub fn binary() -> &'static Path {
    static COPY: std::sync::OnceLock<(tempfile::TempDir, PathBuf)> = std::sync::OnceLock::new();
    let original = Path::new(env!("CARGO_BIN_EXE_volce-lab"));
    if !nix::unistd::geteuid().is_root() {
        return original;
    }
    let (_, path) = COPY.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().join("volce-lab");
        std::fs::copy(original, &path).expect("copy the binary");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        (dir, path)
    });
    path
}

/// This machine's host name, as local mode must report it.
pub fn hostname() -> String {
    let output = std::process::Command::new("/usr/bin/hostname").output().expect("hostname runs");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}
