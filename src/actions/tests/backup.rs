//! backup's derivation (issue 41): what the agent can and cannot name, and
//! what the plan seals from the policy and the app's record.

use super::*;
use crate::actions::restore::Restore;
use crate::vocab::{BackupConfig, BackupRepository, DataPath, DataUse, Retention};

fn configured(world: &mut World) {
    world.policy.backup = Some(BackupConfig {
        repository: BackupRepository::parse("/srv/backup/volce-lab").unwrap(),
        password_file: "/etc/volce-lab/backup.password".into(),
        keep: Retention { daily: Some(7), ..Retention::default() },
        schedule: Default::default(),
        ssh_config: None,
    });
}

/// `demo` recorded with data at /data, kept on the host.
fn demo_with_data() -> World {
    let mut world = World::with_demo();
    configured(&mut world);
    world.apps.get_mut("demo").unwrap().data = Some(DataUse {
        path: DataPath::parse("/data").unwrap(),
        image: "/state/data/demo.ext4".into(),
        mount: "/state/data/demo".into(),
        max_mib: 64,
    });
    world.probe.kept_data_mib = Some(64);
    world
}

#[test]
fn a_backup_seals_the_policys_repository_and_the_apps_data_and_tags() {
    let world = demo_with_data();
    let (payload, impact) = world.derive(Action::Backup, json!({"app": "demo"})).unwrap();
    let Payload::Backup(Backup { containers, spec }) = payload else { panic!("backup payload") };
    assert_eq!(containers, [id('a'), id('b')]);
    assert_eq!(spec.config, world.policy.backup.clone().unwrap());
    assert_eq!(spec.data.as_ref().unwrap().mount, Path::new("/state/data/demo"));
    assert!(spec.dumps.is_empty(), "demo has no accessory");
    assert_eq!(
        spec.tags(),
        [
            "volce-lab".to_owned(),
            "app=demo".into(),
            "entry=web".into(),
            format!("image=sha256:{}", "1".repeat(64)),
            format!("plan={}", "f".repeat(32)),
        ]
    );
    assert!(!impact.data_volumes_deleted && impact.containers_touched[0].starts_with("none"));
    assert!(!world.policy.requires_approval(Action::Backup), "a backup reads only: no approval by default");
}

/// Tried: no `backup` in the policy, an app without data, data whose image
/// is gone, an app that needs inspection, an app not deployed, a
/// repository named by the agent (a stray parameter): each refused with its
/// own code.
#[test]
fn a_backup_is_refused_where_there_is_nowhere_or_nothing_to_copy() {
    let mut world = demo_with_data();
    world.policy.backup = None;
    assert_eq!(world.code(Action::Backup, json!({"app": "demo"})), Code::BackupNotConfigured);

    let mut world = World::with_demo();
    configured(&mut world);
    assert_eq!(world.code(Action::Backup, json!({"app": "demo"})), Code::AppHasNoData);

    let mut world = demo_with_data();
    world.probe.kept_data_mib = None;
    assert_eq!(world.code(Action::Backup, json!({"app": "demo"})), Code::DataNotFound);

    let mut world = demo_with_data();
    world.apps.get_mut("demo").unwrap().state = AppState::NeedsInspection;
    assert_eq!(world.code(Action::Backup, json!({"app": "demo"})), Code::AppNotRunning);

    let world = demo_with_data();
    assert_eq!(world.code(Action::Backup, json!({"app": "other"})), Code::AppNotFound);
    let stray = json!({"app": "demo", "repository": "/tmp/mine"});
    assert_eq!(world.code(Action::Backup, stray), Code::InvalidParameters);
}

/// `demo`'s snapshot `0123abcd…` as the repository lists it.
fn snapshot(entry: &str, path: &str) -> crate::vocab::SnapshotFacts {
    crate::vocab::SnapshotFacts {
        id: crate::vocab::SnapshotId::parse(&format!("0123abcd{}", "e".repeat(56))).unwrap(),
        time: "2026-12-06T16:14:45Z".into(),
        tags: vec!["volce-lab".into(), "app=demo".into(), format!("entry={entry}"), "plan=p1".into()],
        paths: vec![path.into()],
        files: 3,
        bytes: 4096,
    }
}

#[test]
fn a_restore_seals_the_snapshot_stops_and_starts_a_running_app_and_always_needs_an_operator() {
    let mut world = demo_with_data();
    world.probe.snapshots.push(snapshot("web", "/state/data/demo"));
    let (payload, impact) =
        world.derive(Action::Restore, json!({"app": "demo", "snapshot": "0123abcd"})).unwrap();
    let Payload::Restore(Restore { spec, .. }) = payload.clone() else { panic!("restore payload") };
    assert_eq!(spec.snapshot, world.probe.snapshots[0], "the full id and what the repository said");
    assert_eq!(spec.stop, [id('b'), id('a')], "gateway first, as a stop");
    assert_eq!(spec.start.as_ref().map(|s| s.host_port), Some(18001));
    assert!(Action::Restore.always_requires_approval());
    let mut review = String::new();
    payload.review(&mut review);
    assert!(
        review.contains("Restores snapshot 0123abcd") && review.contains("REPLACES everything"),
        "{review}"
    );
    assert!(impact.rollback.contains("safety snapshot"), "{impact:?}");

    // A stopped app is neither stopped nor started.
    world.apps.get_mut("demo").unwrap().state = AppState::Stopped;
    let (Payload::Restore(Restore { spec, .. }), _) =
        world.derive(Action::Restore, json!({"app": "demo", "snapshot": "0123abcd"})).unwrap()
    else {
        panic!("restore payload")
    };
    assert!(spec.stop.is_empty() && spec.start.is_none(), "{spec:?}");
}

/// Tried: an id that is no snapshot id, one the repository does not have,
/// a snapshot of another entry, one of another path, and a repository the
/// agent names: each refused with its code.
#[test]
fn a_restore_takes_only_a_snapshot_of_this_apps_data_under_its_entry() {
    let mut world = demo_with_data();
    world.probe.snapshots.push(snapshot("web", "/state/data/demo"));
    let code = |world: &World, snapshot: &str| {
        world.code(Action::Restore, json!({"app": "demo", "snapshot": snapshot}))
    };
    assert_eq!(code(&world, "latest"), Code::InvalidParameters);
    assert_eq!(code(&world, "0123ABCD"), Code::InvalidParameters);
    assert_eq!(code(&world, "feedbeef"), Code::SnapshotNotFound);
    world.probe.snapshots[0] = snapshot("static", "/state/data/demo");
    assert_eq!(code(&world, "0123abcd"), Code::DataEntryMismatch);
    world.probe.snapshots[0] = snapshot("web", "/elsewhere");
    assert_eq!(code(&world, "0123abcd"), Code::DataEntryMismatch);
    let stray = json!({"app": "demo", "snapshot": "0123abcd", "repository": "/tmp/mine"});
    assert_eq!(world.code(Action::Restore, stray), Code::InvalidParameters);
}
