//! A broken state database: bytes overwritten in a copy, a schema newer
//! than this build, a write-ahead log cut short. Each time the helper's
//! rpc pipeline refuses with a stable code and changes no byte of the
//! files, and the doctor names the problem and the recovery (restore from
//! the backup docs/operator.md has the operator keep). Hermetic: the library
//! pipeline on the fake engine in a temporary state directory.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;
use volce_lab::host::rpc::Reply;
use volce_lab::install::doctor::{DoctorPaths, DoctorProbe, Finding, StoreHealth};
use volce_lab::vocab::Code;

use crate::support::harness::*;

const AGENT: &str = "agent";

/// Every file of the state directory (not the apps' directories), by name.
fn files(state_dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(state_dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .map(|path| (path.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&path).unwrap()))
        .collect()
}

/// A world with history (the seeded app and a completed deploy), every
/// connection closed so the database is one file.
fn world() -> Harness {
    let h = Harness::new();
    let mut c = h.controller();
    let plan = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap();
    c.execute(&plan.plan.id, AGENT).unwrap();
    drop(c);
    // One rpc through the pipeline, so its slot lock files exist before
    // the files are compared (they are the process guard's, not state).
    assert!(matches!(h.rpc(AGENT, br#"{"operation":"inventory"}"#), Reply::Ok { .. }));
    h
}

fn code(reply: Reply) -> Code {
    match reply {
        Reply::Rejected { refusal, .. } => refusal.code,
        other => panic!("must be refused: {other:?}"),
    }
}

/// Inventory and a prepare are both refused with `expected`, and not one
/// byte of the state directory changed (no file created either).
fn refused_without_change(h: &Harness, expected: Code) {
    let before = files(&h.paths.state_dir);
    let plan = json!({"operation": "plan", "action": "stop", "parameters": {"app": "demo"}});
    assert_eq!(code(h.rpc(AGENT, br#"{"operation":"inventory"}"#)), expected, "inventory");
    assert_eq!(code(h.rpc(AGENT, plan.to_string().as_bytes())), expected, "prepare");
    let after = files(&h.paths.state_dir);
    assert_eq!(before.keys().collect::<Vec<_>>(), after.keys().collect::<Vec<_>>(), "no file came or went");
    assert!(before == after, "no byte of the state directory changed");
}

/// The doctor's finding about the database, with the real store probe.
fn doctor_database(h: &Harness) -> Finding {
    doctor_findings(h)
        .into_iter()
        .find(|f| ["database", "schema"].contains(&f.subject.as_str()) && f.failed())
        .expect("the doctor fails the database or its schema")
}

/// Every finding of the doctor on this world, with the real store probe.
pub(crate) fn doctor_findings(h: &Harness) -> Vec<Finding> {
    struct StoreOnly;
    impl DoctorProbe for StoreOnly {
        fn docker_version(&self) -> Result<String, String> {
            Ok("test".into())
        }
        fn image_config(&self, _: &str) -> Option<volce_lab::install::doctor::ImageConfig> {
            None
        }
        fn sudoers_valid(&self, _: &Path) -> bool {
            true
        }
        fn groups_of(&self, _: &str) -> Option<Vec<String>> {
            None
        }
        fn policy(&self, _: &Path) -> Result<volce_lab::install::doctor::PolicyFacts, String> {
            Ok(volce_lab::install::doctor::PolicyFacts {
                images: vec![],
                catalog_entries: 0,
                gateway: String::new(),
                approvers: vec![],
                env_files: vec![],
                has_data: false,
                signed_approvals: None,
                backup: None,
                edge: false,
            })
        }
        fn store(&self, state_dir: &Path) -> Result<Option<StoreHealth>, String> {
            volce_lab::install::doctor::read_store_health(state_dir)
        }
        fn drift(&self, _: &Path) -> Result<Vec<volce_lab::install::doctor::AppDrift>, String> {
            Ok(vec![])
        }
    }
    let paths = DoctorPaths {
        helper_link: h.root.join("no-helper"),
        policy: h.paths.policy.clone(),
        state_dir: h.paths.state_dir.clone(),
        sudoers: h.root.join("no-sudoers"),
        owner_uid: nix::unistd::geteuid().as_raw(),
    };
    volce_lab::install::doctor::diagnose(&paths, &StoreOnly)
}

/// Issue 22: the helper served a state directory at 0755 that the doctor
/// failed, and at 0775 answered "database is full or read-only". Tried: the
/// directory at each mode with a bit for group or others. The helper and
/// the doctor apply one rule (`host::paths::state_dir_mode_ok`): the agent's
/// inventory and prepare are refused (`unsafe_path`, sent to the operator's
/// doctor) with no byte changed; the operator's `list` and the doctor name
/// the mode and the `chmod` that fixes it. Back at 0700 both are content.
#[test]
fn a_state_directory_not_0700_is_refused_by_the_helper_and_the_doctor_alike_naming_its_mode() {
    use std::os::unix::fs::PermissionsExt as _;
    let h = world();
    let chmod = |mode: u32| {
        std::fs::set_permissions(&h.paths.state_dir, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    let state_finding =
        || doctor_findings(&h).into_iter().find(|f| f.subject == "state directory").expect("a state finding");
    for mode in [0o755, 0o775, 0o750, 0o705, 0o701, 0o710] {
        chmod(mode);
        refused_without_change(&h, Code::UnsafePath);
        let Reply::Rejected { refusal: answer, .. } = h.rpc(AGENT, br#"{"operation":"inventory"}"#) else {
            unreachable!()
        };
        assert!(answer.message.contains("volce-lab-host doctor"), "{mode:o}: {}", answer.message);
        assert!(!answer.message.contains("full or read-only"), "{mode:o}: {}", answer.message);
        let listed = h.host().list("root", false).unwrap_err();
        assert_eq!(listed.code, Code::UnsafePath, "{mode:o}: {listed:?}");
        let named = format!("mode {mode:04o}");
        assert!(listed.message.contains(&named), "{mode:o}: {}", listed.message);
        assert!(listed.message.contains("chmod 0700"), "the next step: {}", listed.message);
        let finding = state_finding();
        assert!(finding.failed() && finding.detail.contains(&format!("{mode:04o}")), "{finding}");
    }
    chmod(0o700);
    assert!(matches!(h.rpc(AGENT, br#"{"operation":"inventory"}"#), Reply::Ok { .. }));
    assert!(!state_finding().failed());
}

#[test]
fn overwritten_pages_are_refused_as_state_corrupt_and_doctor_says_restore() {
    let h = world();
    let database = h.paths.database();
    let mut bytes = std::fs::read(&database).unwrap();
    // Every b-tree page after the first gets its page header overwritten,
    // as a bad disk or a stray write would: any table SQLite reads is damaged.
    let page = u16::from_be_bytes([bytes[16], bytes[17]]) as usize;
    for start in (page..bytes.len()).step_by(page) {
        bytes[start..start + 12].copy_from_slice(&[0xEE; 12]);
    }
    std::fs::write(&database, &bytes).unwrap();
    refused_without_change(&h, Code::StateCorrupt);
    let finding = doctor_database(&h);
    assert!(finding.fix.as_deref().unwrap().contains(".backup"), "{finding}");
    assert!(finding.fix.as_deref().unwrap().contains("state_corrupt"), "{finding}");
}

#[test]
fn a_file_that_is_not_a_database_is_refused_as_state_corrupt() {
    let h = world();
    let database = h.paths.database();
    let mut bytes = std::fs::read(&database).unwrap();
    bytes[..16].copy_from_slice(b"not sqlite at al");
    std::fs::write(&database, &bytes).unwrap();
    refused_without_change(&h, Code::StateCorrupt);
    assert!(doctor_database(&h).detail.contains("cannot be opened"));
}

#[test]
fn a_database_from_a_newer_schema_is_refused_untouched() {
    let h = world();
    let newer = volce_lab::store::Store::supported_version() + 1;
    rusqlite::Connection::open(h.paths.database())
        .unwrap()
        .pragma_update(None, "user_version", newer)
        .unwrap();
    refused_without_change(&h, Code::StateTooNew);
    let finding = doctor_database(&h);
    assert_eq!(finding.subject, "schema");
    assert!(finding.detail.contains(&format!("version {newer}")), "{finding}");
}

#[test]
fn a_write_ahead_log_cut_inside_a_frame_is_refused_and_kept() {
    let h = world();
    // A connection that stays open keeps its committed writes in the log
    // (no checkpoint at close while another connection holds the file);
    // copy the pair as a crash would leave it, then cut the log.
    let holder = rusqlite::Connection::open(h.paths.database()).unwrap();
    holder.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    let _: i64 = holder.query_row("SELECT count(*) FROM plans", [], |r| r.get(0)).unwrap();
    let mut c = h.controller();
    c.prepare("stop", &json!({"app": "demo"}), AGENT).unwrap();
    drop(c);
    let copy = tempfile::tempdir().unwrap();
    let mut moved = Harness::at(copy.path());
    moved.write_policy(&policy_json());
    std::fs::create_dir_all(&moved.paths.state_dir).unwrap();
    // Root's alone, as the helper and the doctor require (not the umask's 0755).
    std::fs::set_permissions(&moved.paths.state_dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .unwrap();
    for (name, bytes) in files(&h.paths.state_dir) {
        if name != "state.db-shm" {
            std::fs::write(moved.paths.state_dir.join(name), bytes).unwrap();
        }
    }
    drop(holder);
    let wal = moved.paths.state_dir.join("state.db-wal");
    let length = std::fs::metadata(&wal).unwrap().len();
    assert!(length > 32 + 2 * 4120, "the log holds frames: {length}");
    std::fs::OpenOptions::new().write(true).open(&wal).unwrap().set_len(length - 1000).unwrap();
    refused_without_change(&moved, Code::StateCorrupt);
    let finding = doctor_database(&moved);
    assert!(finding.detail.contains("cut short"), "{finding}");
    assert!(finding.fix.as_deref().unwrap().contains("state.db-wal"), "{finding}");
}
