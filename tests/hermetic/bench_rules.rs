//! The rules every benchmark under `benches/` keeps, read from their source
//! (a bench is a program that needs root, an engine or an installation, so
//! it cannot run here): it touches an installed helper only when asked with
//! `--installed-host`, and a missed target prints FAILED. Hermetic; reads
//! files only.

use std::path::Path;

/// Each bench's name and source.
fn benches() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches");
    let mut found: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .map(|path| {
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&path).unwrap(),
            )
        })
        .collect();
    found.sort();
    assert!(found.len() >= 5, "the benches are where this test looks: {found:?}");
    found
}

/// A bench that reaches the installed paths (`/etc/volce-lab`) needs the
/// flag first: on an installed host a plain `cargo bench` must not leave
/// rows in its audit trail. `soak` and `management_call` are the
/// exceptions: each writes its own `/etc/volce-lab` inside a private mount
/// namespace (`unshare --mount`) and never sees the machine's.
#[test]
fn a_bench_reaches_an_installed_helper_only_with_installed_host() {
    for (name, source) in benches() {
        if name == "soak.rs" || name == "management_call.rs" {
            assert!(source.contains("\"--mount\""), "{name}'s exception holds only inside its namespace");
            continue;
        }
        if source.contains("/etc/volce-lab") {
            assert!(
                source.contains("\"--installed-host\""),
                "{name} reaches /etc/volce-lab without --installed-host"
            );
        }
    }
}

/// A bench that prints a target prints FAILED when it misses it, so a
/// reader of the output cannot take a miss for a figure.
#[test]
fn a_bench_with_a_target_prints_failed_when_it_misses() {
    for (name, source) in benches() {
        if source.contains("(target") {
            assert!(source.contains("FAILED"), "{name} prints a target but never FAILED");
            assert!(!source.contains("NOT met"), "{name} says NOT met instead of FAILED");
        }
    }
}
