//! Link-time settings of the `volce-lab` executable; the library needs none.
//!
//! Why: the executable is started once per gated check, per management call
//! and per MCP session, so what the dynamic loader does before `main` is paid
//! every time (docs/benchmarks.md). Packed relative relocations (DT_RELR)
//! keep the executable position-independent, so ASLR holds for the
//! root-owned helper, while the loader reads 7 KiB of relocations instead of
//! about 270 KiB of `.rela.dyn`. Only glibc 2.36's loader (Debian 12) reads
//! them, and the linker then marks the executable as needing it, so a build
//! against an older glibc (a workstation's `cargo install`) leaves them out
//! rather than fail to link or to start.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if target_os == "linux" && target_env == "gnu" && glibc_at_least(2, 36) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether the glibc this build links against is at least `major.minor`,
/// read from the version `ldd --version` ends its first line with (for
/// example `ldd (Debian GLIBC 2.36-9+deb12u14) 2.36`); unknown is no.
fn glibc_at_least(major: u32, minor: u32) -> bool {
    let Ok(output) = Command::new("ldd").arg("--version").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text.lines().next().and_then(|line| line.split_whitespace().last()).unwrap_or("");
    let mut parts = version.split('.').map(|part| part.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(have_major), Some(have_minor)) => (have_major, have_minor) >= (major, minor),
        _ => false,
    }
}
