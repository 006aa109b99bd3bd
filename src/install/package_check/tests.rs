use super::*;

const OWN: Version = Version(0, 3, 0);

#[test]
fn debian_versions_parse_to_their_upstream_part() {
    for (text, version) in [
        ("0.1.0-1", Version(0, 1, 0)),
        ("0:0.2.0-1", Version(0, 2, 0)),
        ("1.2.3", Version(1, 2, 3)),
        ("10.20.30-2+deb12u1", Version(10, 20, 30)),
    ] {
        assert_eq!(Version::parse_debian(text).unwrap(), version, "{text}");
    }
    // Tried: an epoch, two parts, a tilde pre-release, letters, a trailing
    // dash, an empty string, a sign, an overlong number, control bytes.
    for text in
        ["1:0.1.0-1", "0.1-1", "0.2.0~rc1-1", "a.b.c", "0.1.0-", "", "+1.0.0", "1.0.9999999999", "0.1.0\n-1"]
    {
        let refusal = Version::parse_debian(text).unwrap_err();
        assert_eq!(refusal.code, Code::InvalidParameters, "{text:?}");
        assert!(refusal.message.contains("nothing was checked"), "{}", refusal.message);
    }
}

#[test]
fn this_builds_version_is_newer_than_every_release_and_reads_at_least_their_schemas() {
    let this = Version::this();
    let supported = crate::store::Store::supported_version();
    let mut previous: Option<Release> = None;
    for release in RELEASES {
        assert!(release.version < this, "{} is released, so this build must be newer", release.version);
        assert!(release.schema <= supported);
        if let Some(previous) = previous {
            assert!(previous.version < release.version, "RELEASES is oldest first");
            assert!(previous.schema <= release.schema, "a later release never reads less");
        }
        previous = Some(*release);
    }
}

#[test]
fn upgrades_reinstalls_and_fresh_servers_are_never_refused() {
    for (to, state) in [(Version(0, 4, 0), Some(99)), (OWN, Some(99)), (Version(0, 1, 0), None)] {
        assert!(decide(OWN, to, state).is_ok(), "{to} over schema {state:?}");
    }
}

#[test]
fn a_downgrade_goes_on_only_to_a_version_that_reads_the_state() {
    let read_by_first = RELEASES[0].schema;
    let text = decide(OWN, RELEASES[0].version, Some(read_by_first)).unwrap();
    assert!(text.contains("may go on"), "{text}");

    let refusal = decide(OWN, RELEASES[0].version, Some(read_by_first + 1)).unwrap_err();
    assert_eq!(refusal.code, Code::DowngradeRefused);
    for words in [
        "0.1.0 reads state schemas up to 10",
        &format!("at schema {}", read_by_first + 1),
        "nothing changed: 0.3.0 stays installed",
        "server-install.md, Upgrading",
        // Issue 46: the order it named (restore, then the old package with
        // the check skipped) let any open migrate the restored database back.
        "state restore BACKUP --for-downgrade",
        "volce-lab-host pause",
    ] {
        assert!(refusal.message.contains(words), "{words:?} in {}", refusal.message);
    }
    // Older than every release: it reads no schema at all.
    assert_eq!(decide(OWN, Version(0, 0, 9), Some(1)).unwrap_err().code, Code::DowngradeRefused);
}

#[test]
fn the_check_reads_the_database_without_changing_it() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("state.db");
    // No database yet: any package may come.
    assert!(check(&database, "0.0.1-1").unwrap().contains("no state database yet"));
    drop(crate::store::Store::open(&database).unwrap());
    let before = std::fs::read(&database).unwrap();
    let current = crate::store::Store::supported_version();
    let result = check(&database, "0.1.0-1");
    if current > RELEASES[0].schema {
        assert_eq!(result.unwrap_err().code, Code::DowngradeRefused);
    } else {
        assert!(result.is_ok());
    }
    assert_eq!(std::fs::read(&database).unwrap(), before, "the database is byte for byte as it was");
}
