//! backup's derivation (issue 41): what the agent can and cannot name, and
//! what the plan seals from the policy and the app's record.

use super::*;
use crate::vocab::{BackupConfig, BackupRepository, DataPath, DataUse, Retention};

fn configured(world: &mut World) {
    world.policy.backup = Some(BackupConfig {
        repository: BackupRepository::parse("/srv/backup/volce-lab").unwrap(),
        password_file: "/etc/volce-lab/backup.password".into(),
        keep: Retention { daily: Some(7), ..Retention::default() },
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
    assert_eq!(spec.data.mount, Path::new("/state/data/demo"));
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
