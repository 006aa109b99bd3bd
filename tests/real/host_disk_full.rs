//! A full disk: the state directory on a small tmpfs that the test mounts
//! (root), filled to the brim by a file beside the database. Prepares are
//! refused with `state_full` before anything is written, nothing already
//! stored is lost, and everything works again once the space is back.
//! The engine is the fake one (the real part here is the filesystem); the
//! helper's pipeline is the library's, exactly as `volce-lab-host rpc` runs
//! it. Suite `host_disk_full` in scripts/test; unmounts on every exit.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use volce_lab::host::rpc::Reply;
use volce_lab::store::space::{MIN_FREE_BYTES, free_bytes};

use crate::support::harness::*;

const AGENT: &str = "agent";

/// A tmpfs mounted on a directory of a temporary directory, unmounted
/// when dropped (before the directory goes).
struct SmallFilesystem {
    mountpoint: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallFilesystem {
    fn mount(size: &str) -> (SmallFilesystem, PathBuf) {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this suite mounts a tmpfs: run it as root through scripts/test"
        );
        let dir = tempfile::tempdir().unwrap();
        let mountpoint = dir.path().join("state");
        std::fs::create_dir(&mountpoint).unwrap();
        let status = Command::new("/usr/bin/mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700"), "tmpfs"])
            .arg(&mountpoint)
            .status()
            .expect("mount(8) runs");
        assert!(status.success(), "mount -t tmpfs failed: this suite needs root and mount(8)");
        let root = dir.path().to_owned();
        (SmallFilesystem { mountpoint, _dir: dir }, root)
    }
}

impl Drop for SmallFilesystem {
    fn drop(&mut self) {
        let status = Command::new("/usr/bin/umount").arg(&self.mountpoint).status();
        assert!(matches!(status, Ok(s) if s.success()) || std::thread::panicking(), "umount failed");
    }
}

/// Writes a file in `dir` until the filesystem has `leave` bytes or less free.
fn fill(dir: &Path, leave: u64) -> PathBuf {
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    let chunk = vec![0x5a; 4096];
    while free_bytes(dir).unwrap() > leave {
        if file.write_all(&chunk).is_err() {
            break;
        }
    }
    let _ = file.sync_all();
    path
}

fn reply(h: &Harness, request: Value) -> Value {
    serde_json::to_value(h.rpc(AGENT, request.to_string().as_bytes())).unwrap()
}

fn prepare(h: &Harness, action: &str, parameters: Value) -> Value {
    reply(h, json!({"operation": "plan", "action": action, "parameters": parameters}))
}

/// Every plan row as the store keeps it (id, state, digest), oldest first,
/// read from a copy of the database and its log on another filesystem
/// (opening the original needs room for the shared-memory file).
fn plans(state: &Path) -> Vec<(String, String, String)> {
    let copy = tempfile::tempdir().unwrap();
    for name in ["state.db", "state.db-wal"] {
        if state.join(name).exists() {
            std::fs::copy(state.join(name), copy.path().join(name)).unwrap();
        }
    }
    let db = rusqlite::Connection::open(copy.path().join("state.db")).unwrap();
    let mut query = db.prepare("SELECT id, state, digest FROM plans ORDER BY seq").unwrap();
    query.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect()
}

fn integrity(state: &Path) -> String {
    let db = rusqlite::Connection::open(state.join("state.db")).unwrap();
    db.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap()
}

#[test]
#[ignore = "real parts: root mounts a tmpfs (suite host_disk_full)"]
fn a_full_state_filesystem_refuses_prepares_loses_nothing_and_recovers() {
    let (fs, root) = SmallFilesystem::mount("4m");
    let mut h = Harness::at(&root);
    h.write_policy(&policy_json());
    // History before the disk fills: a completed deploy and a pending plan.
    let deploy = prepare(&h, "deploy", deploy_params("demo", 18001));
    assert_eq!(deploy["status"], "ok", "{deploy}");
    let id = deploy["result"]["id"].as_str().unwrap().to_owned();
    let executed = reply(&h, json!({"operation": "execute", "plan_id": id}));
    assert_eq!(executed["status"], "ok", "{executed}");
    let stop = prepare(&h, "stop", json!({"app": "demo"}));
    assert_eq!(stop["status"], "ok", "{stop}");
    let listed_before = h.list(true);

    for leave in [256 * 1024, 0] {
        let filler = fill(&fs.mountpoint, leave);
        assert!(free_bytes(&fs.mountpoint).unwrap() < MIN_FREE_BYTES);
        let before = plans(&fs.mountpoint);
        let refused = prepare(&h, "stop", json!({"app": "demo"}));
        assert_eq!(refused["status"], "rejected", "{leave} bytes left: {refused}");
        assert_eq!(refused["code"], "state_full", "{leave} bytes left: {refused}");
        assert!(refused["message"].as_str().unwrap().contains("frees space"), "{refused}");
        // No plan came or changed. The refusal's own audit row may be
        // written where it fits (every request leaves one, folded when
        // repeated); the plans are what a refused prepare must not touch.
        assert_eq!(plans(&fs.mountpoint), before, "{leave} bytes left: the refused prepare stored no plan");
        eprintln!("{leave} bytes left: inventory answers {}", {
            let r = reply(&h, json!({"operation": "inventory"}));
            format!("{} {}", r["status"], r["code"])
        });
        std::fs::remove_file(filler).unwrap();
        // Space is back: what was stored is all there, and prepares work.
        assert_eq!(integrity(&fs.mountpoint), "ok");
        assert_eq!(h.list(true), listed_before, "nothing stored was lost");
    }
    let inventory = reply(&h, json!({"operation": "inventory"}));
    assert_eq!(inventory["result"]["apps"].as_array().unwrap().len(), 1, "{inventory}");
    let again = prepare(&h, "stop", json!({"app": "demo"}));
    assert_eq!(again["status"], "ok", "{again}");
    assert!(matches!(h.rpc(AGENT, br#"{"operation":"inventory"}"#), Reply::Ok { .. }));
    drop(h);
    drop(fs);
}
