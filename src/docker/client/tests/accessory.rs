//! Hermetic tests of update_accessory's switch through the fake runner:
//! what it refuses to touch. The switch itself, and its way back from a
//! build that never starts, run on the real engine
//! (`host_real_engine_rules::accessories`).

use super::*;
use crate::docker::NoProgress;
use crate::vocab::{AccessoryName, AccessoryUpdateSpec, AccessoryUse, DataUse, EnvTemplate, TaskArgv};

const PLAN: &str = "0123456789abcdef0123456789abcdef";

fn accessory_spec(data_dir: &Path, port: u16) -> AccessoryUpdateSpec {
    let health = TaskArgv::parse(vec!["/usr/bin/pg_isready".into(), "-q".into()]).unwrap();
    AccessoryUpdateSpec {
        plan_id: PlanId::parse(PLAN).unwrap(),
        app: AppName::parse("shop").unwrap(),
        app_dir: data_dir.join("apps/shop"),
        limits: limits(),
        old: ContainerId::parse(&hex('c')).unwrap(),
        previous_image: image_ref(&format!("127.0.0.1:15000/volce-lab/pg@sha256:{}", hex('1'))),
        previous_health: health.clone(),
        accessory: AccessoryUse {
            name: AccessoryName::parse("db").unwrap(),
            image: image_ref(&format!("127.0.0.1:15000/volce-lab/pg2@sha256:{}", hex('2'))),
            port: 5432,
            container_name: "vl-shop-db".into(),
            data: DataUse {
                path: crate::vocab::DataPath::parse("/srv/pgdata").unwrap(),
                image: data_dir.join("shop@db.ext4"),
                mount: data_dir.join("shop@db"),
                max_mib: 128,
            },
            health,
            env: EnvTemplate::default(),
            app_env: EnvTemplate::default(),
        },
        host_port: port,
        server_name: ServerName::parse("shop.example").unwrap(),
        health_path: Default::default(),
    }
}

/// Tried: an update whose accessory's data image is gone (never made
/// again: only a deploy makes new data). The new image is pulled, then
/// the switch stops before the old container is stopped, set aside or
/// replaced; the old one is only asked to be up and ready, the app
/// answers, and the plan is rolled back with that cause.
#[test]
fn an_accessory_whose_data_image_is_gone_is_never_stopped_or_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let (port, _seen) = serve("200 OK", 1);
    let fake = Fake::new(|args| match args[0].as_str() {
        "image" => Ok("null\n".into()),
        _ => Ok(String::new()),
    });
    let engine = DockerClient::with_runner(fake, dir.path());
    let spec = accessory_spec(dir.path(), port);
    assert_eq!(
        engine.update_accessory(&spec, &NoProgress),
        Err(EngineError::RolledBack {
            cause: Box::new(EngineError::Host { step: "find the data image" }),
            app_log: None
        })
    );
    let (old, new) = (hex('c'), spec.accessory.image.as_str().to_owned());
    assert_eq!(
        engine.runner().argv(),
        [
            format!("pull --quiet {new}"),
            format!("image inspect --format {{{{json .Config.Volumes}}}} -- {new}"),
            format!("update --restart=unless-stopped {old}"),
            format!("start {old}"),
            format!("exec {old} /usr/bin/pg_isready -q"),
        ]
    );
}

/// Tried: a rotation while an earlier one's new credential is still
/// beside the data (a helper stopped mid-rotation): refused before any
/// docker call, the files as they were; without a credential at all,
/// refused too.
#[test]
fn a_rotation_never_starts_over_an_earlier_ones_new_credential() {
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let update = accessory_spec(dir.path(), free_port());
    let switch = super::lifecycle::update_spec(dir.path(), free_port());
    let spec = crate::vocab::RotationSpec {
        accessories: vec![update.accessory.clone()],
        accessory: update.accessory.clone(),
        container: update.old.clone(),
        rotate: TaskArgv::parse(vec!["/bin/rotate-pg".into()]).unwrap(),
        switch,
    };
    let engine = DockerClient::with_runner(Fake::new(|_| Ok(String::new())), dir.path());
    let unread = EngineError::Host { step: "read the accessory's credential" };
    assert_eq!(
        engine.rotate_credential(&spec, &NoProgress),
        Err(EngineError::RolledBack { cause: Box::new(unread), app_log: None }),
        "no credential to rotate: nothing changed"
    );
    let write = |path: &Path, text: &str| {
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).unwrap();
        std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
    };
    write(&spec.accessory.secret_of(), &"1".repeat(64));
    write(&spec.accessory.pending_secret_of(), &"2".repeat(64));
    assert_eq!(
        engine.rotate_credential(&spec, &NoProgress),
        Err(EngineError::RolledBack {
            cause: Box::new(EngineError::Host { step: "find no earlier rotation's new credential" }),
            app_log: None
        })
    );
    assert!(engine.runner().argv().is_empty(), "no docker call");
    assert_eq!(std::fs::read_to_string(spec.accessory.pending_secret_of()).unwrap(), "2".repeat(64));

    // Tried: the env files it renders anew cannot be read (here: never
    // written). Refused before the command runs, the new credential gone.
    std::fs::remove_file(spec.accessory.pending_secret_of()).unwrap();
    let unread = EngineError::Host { step: "read an accessory env file" };
    assert_eq!(
        engine.rotate_credential(&spec, &NoProgress),
        Err(EngineError::RolledBack { cause: Box::new(unread), app_log: None })
    );
    assert!(engine.runner().argv().is_empty(), "no docker call");
    assert!(!spec.accessory.pending_secret_of().exists(), "no new credential left behind");
}
