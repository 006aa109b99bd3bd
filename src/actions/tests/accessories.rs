//! Accessories (issue 40) as plans derive them: what a deploy records and
//! shows, that no credential is in any of it, and what an update, a start
//! and a remove_app do with them. The engine's side is proven on real
//! parts (`host_real_engine_rules::accessories`).

use super::*;
use crate::vocab::{AccessoryName, AccessorySpec, DataPath, DataSpec, EnvTemplate, TaskArgv};

fn template(pairs: &[(&str, &str)]) -> EnvTemplate {
    EnvTemplate::parse(pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()).unwrap()
}

fn url() -> EnvTemplate {
    template(&[("DATABASE_URL", "postgresql://app:{password}@{host}:{port}/app")])
}

/// The sample policy with an accessory `db` that the `web` entry needs.
fn world_with_db() -> World {
    let mut world = World::empty();
    let db = AccessoryName::parse("db").unwrap();
    world.policy.accessories.insert(
        db.clone(),
        AccessorySpec {
            image: ImageRef::parse(&format!("registry.example/pg@sha256:{}", "4".repeat(64))).unwrap(),
            port: 5432,
            data: DataSpec { path: DataPath::parse("/srv/pgdata").unwrap(), max_mib: 128 },
            health: TaskArgv::parse(vec!["/usr/bin/pg_isready".into(), "-q".into()]).unwrap(),
            env: template(&[("POSTGRES_PASSWORD", "{password}")]),
            rotate: Some(TaskArgv::parse(vec!["/bin/rotate-pg".into()]).unwrap()),
            dump: Some(TaskArgv::parse(vec!["/bin/dump-pg".into()]).unwrap()),
            load: Some(TaskArgv::parse(vec!["/bin/load-pg".into()]).unwrap()),
        },
    );
    world.policy.catalog.get_mut("web").unwrap().accessories.insert(db, url());
    world
}

/// Tried: a deploy of an entry that needs `db`. The plan records the
/// accessory under the app's own data paths and container name, shows
/// the operator its port, data, health command and the variables' names
/// (templates only), creates its container unpublished as the data's
/// owner; the credential is nowhere in it (the host makes it at execute),
/// and the app's containers get the accessories' env file by path.
#[test]
fn a_deploy_records_its_accessories_with_placeholders_only() {
    let world = world_with_db();
    let (payload, impact) = world.derive(Action::Deploy, deploy_params()).unwrap();
    let mut review = String::new();
    payload.review(&mut review);
    let sealed = serde_json::to_string(&payload).unwrap();
    let Payload::Deploy(Deploy { spec, containers, .. }) = payload else { panic!("deploy payload") };
    let [accessory] = &spec.accessories[..] else { panic!("one accessory: {:?}", spec.accessories) };
    assert_eq!(accessory.container_name, "vl-web1-db");
    assert_eq!(accessory.data.image, Path::new("/state/data/web1@db.ext4"));
    assert_eq!(accessory.data.mount, Path::new("/state/data/web1@db"));
    assert_eq!(accessory.secret_of(), Path::new("/state/data/web1@db.secret"));
    assert_eq!(spec.accessories_env().as_deref(), Some(Path::new("/state/apps/web1/accessories.env")));
    let plan = containers.iter().find(|c| c.role == "accessory").expect("the accessory's container");
    assert_eq!(
        (plan.name.as_str(), plan.user.as_str(), plan.publish.as_ref()),
        ("vl-web1-db", "1000:1000", None)
    );
    assert!(
        review.contains("accessory db: first, on the app's network as db:5432, data 128 MiB at /srv/pgdata")
    );
    assert!(review.contains("its variables: POSTGRES_PASSWORD; the app's: DATABASE_URL"), "{review}");
    assert!(sealed.contains("{password}"), "the template travels, never a value");
    assert!(impact.containers_touched.iter().any(|t| t.contains("vl-web1-db (new, accessory db")));
    assert!(impact.rollback.contains("A new accessory's credential goes with its new data."));
}

/// Tried: kept accessory data recorded for another accessory name, and
/// at another path: each refused `data_entry_mismatch` naming the
/// accessory; recorded for `db` at its path, re-attached.
#[test]
fn kept_accessory_data_is_re_attached_only_for_its_accessory_and_path() {
    let mut world = world_with_db();
    keep_data(&mut world, 128, "cache", "/srv/pgdata");
    let refused = world.derive(Action::Deploy, deploy_params()).unwrap_err();
    assert_eq!(refused.code, Code::DataEntryMismatch, "{}", refused.message);
    assert!(refused.message.contains("accessory `cache`"), "{}", refused.message);
    // The app's own data is not in play here; only the accessory's is kept.
    keep_data(&mut world, 128, "db", "/srv/pgdata");
    let (_, impact) = world.derive(Action::Deploy, deploy_params()).unwrap();
    assert!(impact.containers_touched.iter().any(|t| t.contains("kept from before: re-attached")));
}

/// Tried: an update of an app deployed with `db` to an entry without it,
/// and to one whose variables differ: refused `accessories_changed`; to
/// the entry it was deployed with, accepted, with the env file by path.
/// A start finds the accessory's container by its recorded name; renamed
/// by hand, it is refused. A remove_app keeps its data unless purged, and says so.
#[test]
fn an_update_keeps_the_accessories_of_the_deploy_and_a_start_starts_them() {
    let mut world = deployed_with_db();

    let (payload, _) = world.derive(Action::Update, json!({"app": "demo", "image": "web"})).unwrap();
    let Payload::Update(Update { spec, .. }) = payload else { panic!("update payload") };
    assert_eq!(spec.accessories_env.as_deref(), Some(Path::new("/state/apps/demo/accessories.env")));
    let entry = world.policy.catalog.get_mut("web").unwrap();
    entry.accessories.insert(AccessoryName::parse("db").unwrap(), template(&[("DB", "{host}")]));
    let refused = world.derive(Action::Update, json!({"app": "demo", "image": "web"})).unwrap_err();
    assert_eq!(refused.code, Code::AccessoriesChanged, "{}", refused.message);
    world.policy.catalog.get_mut("web").unwrap().accessories.clear();
    let refused = world.derive(Action::Update, json!({"app": "demo", "image": "web"})).unwrap_err();
    assert_eq!(refused.code, Code::AccessoriesChanged);
    assert!(refused.message.contains("accessories db") && refused.message.contains("names none"));

    for c in &mut world.snapshot.containers {
        c.state = "exited".into();
    }
    world.apps.get_mut("demo").unwrap().state = AppState::Stopped;
    let (payload, _) = world.derive(Action::Start, json!({"app": "demo"})).unwrap();
    let Payload::Start(start) = payload else { panic!("start payload") };
    assert_eq!(start.spec.accessories.len(), 1);
    assert_eq!(start.spec.accessories[0].container, id('c'));
    // Renamed by hand: the recorded id no longer stands under its name.
    world.snapshot.containers.retain(|c| c.id != id('c'));
    world.snapshot.containers.push(container('c', "vl-demo-renamed", Some("demo"), "exited", None));
    let refused = world.derive(Action::Start, json!({"app": "demo"})).unwrap_err();
    assert_eq!(refused.code, Code::ContainerSetChanged);
    assert!(refused.message.contains("vl-demo-db"), "{}", refused.message);
    world.snapshot.containers.retain(|c| c.id != id('c'));
    world.snapshot.containers.push(container('c', "vl-demo-db", Some("demo"), "exited", None));

    let (payload, impact) =
        world.derive(Action::RemoveApp, json!({"app": "demo", "purge_data": true})).unwrap();
    let Payload::RemoveApp(removal) = payload else { panic!("remove_app payload") };
    assert!(removal.purge_data && impact.data_volumes_deleted);
    assert_eq!(removal.accessory_data[0].image, Path::new("/state/data/demo@db.ext4"));
    assert!(impact.containers_touched.iter().any(|t| t.contains("and the accessory's credential")));
}

/// The sample world with `demo` deployed with `db`, its accessory's
/// container `c` running under its name.
fn deployed_with_db() -> World {
    let mut world = world_with_db();
    let (payload, _) = world.derive(Action::Deploy, patched(&[("app", json!("demo"))])).unwrap();
    let Payload::Deploy(Deploy { spec, .. }) = payload else { panic!("deploy payload") };
    let mut record = record("demo", 18001, AppState::Running);
    record.accessories = spec.accessories.clone();
    record.containers.push(id('c'));
    world.apps.insert("demo".into(), record);
    world.snapshot = deployed_snapshot();
    world.snapshot.containers.push(container('c', "vl-demo-db", Some("demo"), "running", None));
    world
}

fn pg_image(digit: &str) -> ImageRef {
    ImageRef::parse(&format!("registry.example/pg@sha256:{}", digit.repeat(64))).unwrap()
}

/// Tried: the policy still pinning the image `db` runs (`image_unchanged`);
/// an accessory the app does not have (`invalid_parameters`, naming `db`);
/// the policy's `db` with another port (`accessories_changed`), and no
/// longer declared; `db` stopped by hand (`app_not_running`). With a new
/// digest: the plan replaces container `c` by the policy's image on the
/// same data, shows the operator both images, and once done the record
/// holds the new container and image in the old one's place.
#[test]
fn update_accessory_moves_one_accessory_to_the_policys_image_and_nothing_else() {
    let mut world = deployed_with_db();
    let params = json!({"app": "demo", "accessory": "db"});
    let refused = world.derive(Action::UpdateAccessory, params.clone()).unwrap_err();
    assert_eq!(refused.code, Code::ImageUnchanged, "{}", refused.message);
    let db = AccessoryName::parse("db").unwrap();
    world.policy.accessories.get_mut(&db).unwrap().image = pg_image("5");
    let refused =
        world.derive(Action::UpdateAccessory, json!({"app": "demo", "accessory": "cache"})).unwrap_err();
    assert_eq!(refused.code, Code::InvalidParameters);
    assert!(refused.message.contains("its accessories: db"), "{}", refused.message);

    world.policy.accessories.get_mut(&db).unwrap().port = 5433;
    let refused = world.derive(Action::UpdateAccessory, params.clone()).unwrap_err();
    assert_eq!(refused.code, Code::AccessoriesChanged, "{}", refused.message);
    world.policy.accessories.get_mut(&db).unwrap().port = 5432;
    let spec = world.policy.accessories.remove(&db).unwrap();
    let refused = world.derive(Action::UpdateAccessory, params.clone()).unwrap_err();
    assert_eq!(refused.code, Code::AccessoriesChanged);
    world.policy.accessories.insert(db.clone(), spec);
    world.snapshot.containers.iter_mut().find(|c| c.id == id('c')).unwrap().state = "exited".into();
    let refused = world.derive(Action::UpdateAccessory, params.clone()).unwrap_err();
    assert_eq!(refused.code, Code::AppNotRunning, "{}", refused.message);
    world.snapshot.containers.iter_mut().find(|c| c.id == id('c')).unwrap().state = "running".into();

    let (payload, impact) = world.derive(Action::UpdateAccessory, params).unwrap();
    let mut review = String::new();
    payload.review(&mut review);
    let Payload::UpdateAccessory(update) = payload else { panic!("update_accessory payload") };
    let spec = &update.spec;
    assert_eq!((spec.old.clone(), spec.previous_image.clone()), (id('c'), pg_image("4")));
    assert_eq!(spec.accessory.image, pg_image("5"));
    assert_eq!(spec.accessory.data.image, Path::new("/state/data/demo@db.ext4"), "the same data");
    assert_eq!(spec.set_aside_name(), "vl-demo-db.old");
    assert!(review.contains(&format!("runs {} in container", pg_image("4").as_str())), "{review}");
    assert!(review.contains("on the same data (128 MiB at /srv/pgdata) and credential"), "{review}");
    assert!(impact.rollback.contains("back it up first"));

    let done_with = |result: Result<Effect, EngineError>| {
        let after = Snapshot {
            containers: vec![container('f', "vl-demo-db", Some("demo"), "running", None)],
            ..world.snapshot.clone()
        };
        let done = Done {
            plan_id: &world.plan_id,
            apps: &world.apps,
            result: &result,
            after: Some(&after),
            keep: 3,
            now: 1,
        };
        update.record(&done)
    };
    let [RecordChange::Put(record)] = &done_with(Ok(Effect::from(vec![id('f').to_string()])))[..] else {
        panic!("one record")
    };
    assert!(record.containers.contains(&id('f')) && !record.containers.contains(&id('c')));
    assert_eq!(record.accessories[0].image, pg_image("5"));
    assert_eq!(record.state, AppState::Running);
    let unknown = EngineError::Host { step: "x" };
    let [RecordChange::Put(record)] = &done_with(Err(unknown))[..] else { panic!("one record") };
    assert_eq!(record.state, AppState::NeedsInspection, "an unverified switch needs an operator");
}

/// Tried: the policy's `db` without a `rotate` command
/// (`rotation_not_declared`), and an accessory the app does not have. With
/// one: the plan runs it in `db`'s container, then switches the app to a
/// new container of the image it runs (its own env file and the
/// accessories' by path); the review names the command and the variables,
/// never a credential; once done the record holds the new app container.
#[test]
fn rotate_credential_runs_the_operators_command_then_switches_the_app_in_place() {
    let mut world = deployed_with_db();
    let db = AccessoryName::parse("db").unwrap();
    let params = json!({"app": "demo", "accessory": "db"});
    let rotate = world.policy.accessories.get_mut(&db).unwrap().rotate.take();
    let refused = world.derive(Action::RotateCredential, params.clone()).unwrap_err();
    assert_eq!(refused.code, Code::RotationNotDeclared, "{}", refused.message);
    assert!(refused.message.contains("accessories.db.rotate"), "{}", refused.message);
    world.policy.accessories.get_mut(&db).unwrap().rotate = rotate;
    let refused =
        world.derive(Action::RotateCredential, json!({"app": "demo", "accessory": "cache"})).unwrap_err();
    assert_eq!(refused.code, Code::InvalidParameters);

    let (payload, impact) = world.derive(Action::RotateCredential, params).unwrap();
    let mut review = String::new();
    payload.review(&mut review);
    let sealed = serde_json::to_string(&payload).unwrap();
    let Payload::RotateCredential(rotation) = payload else { panic!("rotate_credential payload") };
    let spec = &rotation.spec;
    assert_eq!(spec.container, id('c'));
    let record = &world.apps["demo"];
    assert_eq!(spec.switch.app_image, record.app_image, "the same version");
    assert_eq!(spec.switch.accessories_env.as_deref(), Some(Path::new("/state/apps/demo/accessories.env")));
    assert!(spec.switch.before_start.is_none(), "no task runs for a rotation");
    assert!(
        review.contains(r#"["/bin/rotate-pg"] (the policy's) run in it once with VOLCE_LAB_PASSWORD"#),
        "{review}"
    );
    assert!(impact.containers_touched[0].starts_with("vl-demo-db (runs the policy's rotate command once"));
    assert!(!sealed.contains("secret\"") && sealed.contains("{password}"), "templates only: {sealed}");

    let result = Ok(Effect::from(vec![id('f').to_string(), id('b').to_string()]));
    let done =
        Done { plan_id: &world.plan_id, apps: &world.apps, result: &result, after: None, keep: 3, now: 1 };
    let [RecordChange::Put(after)] = &rotation.record(&done)[..] else { panic!("one record") };
    assert_eq!(after.app_container, Some(id('f')));
    assert!(after.containers.contains(&id('f')) && !after.containers.contains(&spec.switch.old_app));
    assert_eq!(
        (after.app_image.clone(), after.image_history.len()),
        (record.app_image.clone(), record.image_history.len())
    );
}

/// `demo` with `db` deployed and a backup repository in the policy.
fn backed_up_with_db() -> World {
    let mut world = deployed_with_db();
    world.policy.backup = Some(crate::vocab::BackupConfig {
        repository: crate::vocab::BackupRepository::parse("/srv/backup/volce-lab").unwrap(),
        password_file: "/etc/volce-lab/backup.password".into(),
        keep: crate::vocab::Retention { last: Some(3), ..Default::default() },
        schedule: Default::default(),
        ssh_config: None,
    });
    world
}

/// Issue 41. Tried: a backup of `demo` (no data of its own, `db` declaring
/// dump and load): the plan seals one dump of `db` in its running
/// container with the policy's argv and says so; `db` stopped by hand
/// (`app_not_running`, which says to start it); `db` declaring no dump
/// (`app_has_no_data`: nothing to back up).
#[test]
fn a_backup_dumps_each_accessory_that_declares_how_and_needs_it_running() {
    let mut world = backed_up_with_db();
    let (payload, impact) = world.derive(Action::Backup, json!({"app": "demo"})).unwrap();
    let mut review = String::new();
    payload.review(&mut review);
    let Payload::Backup(backup) = payload else { panic!("backup payload") };
    let spec = &backup.spec;
    assert!(spec.data.is_none());
    let [dump] = &spec.dumps[..] else { panic!("one dump: {:?}", spec.dumps) };
    assert_eq!((dump.container.clone(), dump.dump.all()), (id('c'), &["/bin/dump-pg".to_owned()][..]));
    assert_eq!(dump.app_dir, Path::new("/state/apps/demo"));
    assert_eq!(dump.tag(), "accessory=db");
    assert_eq!(spec.record_image(), Path::new("/state/data/demo.ext4"), "the record is demo.backup");
    assert!(review.contains(r#"Dumps    accessory db with ["/bin/dump-pg"]"#), "{review}");
    assert!(review.contains("as demo@db.dump"), "{review}");
    assert!(
        impact.containers_touched[0].contains("its dump command runs in it and only reads"),
        "{impact:?}"
    );

    world.snapshot.containers.last_mut().unwrap().state = "exited".into();
    let refused = world.derive(Action::Backup, json!({"app": "demo"})).unwrap_err();
    assert_eq!(refused.code, Code::AppNotRunning);
    assert!(refused.message.contains("start the app first (a start or restart plan)"), "{}", refused.message);

    let mut world = backed_up_with_db();
    let db = AccessoryName::parse("db").unwrap();
    let spec = world.policy.accessories.get_mut(&db).unwrap();
    (spec.dump, spec.load) = (None, None);
    let refused = world.derive(Action::Backup, json!({"app": "demo"})).unwrap_err();
    assert_eq!(refused.code, Code::AppHasNoData);
    assert!(refused.message.contains("none of its accessories declares a dump"), "{}", refused.message);
}

/// A dump snapshot of `demo`'s `db` as the repository lists it.
fn dump_snapshot(accessory: &str, path: &str) -> crate::vocab::SnapshotFacts {
    crate::vocab::SnapshotFacts {
        id: crate::vocab::SnapshotId::parse(&format!("4567cdef{}", "e".repeat(56))).unwrap(),
        time: "2026-12-07T12:00:00Z".into(),
        tags: vec![
            "volce-lab".into(),
            "app=demo".into(),
            "entry=web".into(),
            "plan=p1".into(),
            format!("accessory={accessory}"),
        ],
        paths: vec![path.into()],
        files: 1,
        bytes: 2048,
    }
}

/// Issue 41. Tried: a restore of `db`'s dump (its database replaced by the
/// policy's load, the app stopped around it, the review naming both
/// commands); a dump of an accessory the app does not have, one at another
/// path (`data_entry_mismatch`); `db` no longer declaring dump and load
/// (`dump_not_declared`).
#[test]
fn a_restore_of_a_dump_loads_it_into_the_running_accessory() {
    let mut world = backed_up_with_db();
    world.probe.snapshots.push(dump_snapshot("db", "/demo@db.dump"));
    let params = json!({"app": "demo", "snapshot": "4567cdef"});
    let (payload, impact) = world.derive(Action::Restore, params.clone()).unwrap();
    let mut review = String::new();
    payload.review(&mut review);
    let Payload::Restore(restore) = payload else { panic!("restore payload") };
    let crate::vocab::Replaced::Dump(dump) = &restore.spec.replaced else { panic!("a dump restore") };
    assert_eq!(dump.load.all(), ["/bin/load-pg"]);
    assert_eq!(restore.spec.stop, [id('b'), id('a')], "the app stops; the database keeps running");
    assert!(restore.spec.safety_tags().contains(&"accessory=db".to_owned()));
    assert!(review.contains("REPLACES the database of accessory db"), "{review}");
    assert!(!review.contains("Room "), "no data image is made: {review}");
    assert!(impact.containers_touched.iter().any(|t| t.contains("its database replaced by the dump")));

    world.probe.snapshots[0] = dump_snapshot("cache", "/demo@cache.dump");
    assert_eq!(world.code(Action::Restore, params.clone()), Code::DataEntryMismatch);
    world.probe.snapshots[0] = dump_snapshot("db", "/other@db.dump");
    assert_eq!(world.code(Action::Restore, params.clone()), Code::DataEntryMismatch);
    world.probe.snapshots[0] = dump_snapshot("db", "/demo@db.dump");
    let db = AccessoryName::parse("db").unwrap();
    let spec = world.policy.accessories.get_mut(&db).unwrap();
    (spec.dump, spec.load) = (None, None);
    let refused = world.derive(Action::Restore, params).unwrap_err();
    assert_eq!(refused.code, Code::DumpNotDeclared);
    assert!(refused.message.contains("declares no `dump` and `load` now"), "{}", refused.message);
}
