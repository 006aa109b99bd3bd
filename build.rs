//! Link-time settings of the `volce-lab` executable; the library needs none.
//!
//! Why: the executable is started once per gated check, per management call
//! and per MCP session, so what the dynamic loader does before `main` is paid
//! every time (docs/benchmarks.md). Packed relative relocations (DT_RELR,
//! glibc 2.36, Debian 12) keep the executable position-independent, so ASLR
//! holds for the root-owned helper, while the loader reads a few KiB of
//! relocations instead of about 270 KiB of `.rela.dyn`.
fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if target_os == "linux" && target_env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
