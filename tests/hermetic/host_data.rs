//! `volce-lab-host data list|mount|purge` in library form on a temporary
//! world (the harness's store and state directory, owner the test's uid)
//! with fake mounts (mounting needs root): list names every image, its
//! size, whether it is mounted and who holds it; mount mounts every
//! recorded app's kept image and never makes one; purge deletes only kept
//! data no record holds and no open plan names, and every refusal changes
//! nothing. Hermetic; tests/real/host_real_lifecycle.rs runs them on a real
//! loop image.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use serde_json::json;
use volce_lab::control::app_record::AppState;
use volce_lab::docker::EngineError;
use volce_lab::docker::data_volume::Mounted;
use volce_lab::install::data::{self, DataMounts};
use volce_lab::store::read_apps;
use volce_lab::vocab::{AppName, Code, DataPath, DataUse};

use crate::support::harness::{Harness, START, deploy_params};

const MIB: u64 = 1024 * 1024;

/// Mounts that exist only in the test's mind, and every call made.
#[derive(Default)]
struct FakeMounts {
    mounted: RefCell<BTreeSet<PathBuf>>,
    used: BTreeMap<PathBuf, u64>,
    /// Mount points whose mount fails.
    broken: BTreeSet<PathBuf>,
    calls: RefCell<Vec<String>>,
}

impl FakeMounts {
    fn with_mounted(mounts: &[&Path]) -> FakeMounts {
        let fake = FakeMounts::default();
        fake.mounted.borrow_mut().extend(mounts.iter().map(|m| m.to_path_buf()));
        fake
    }
    fn changes(&self) -> Vec<String> {
        self.calls.borrow().iter().filter(|c| !c.starts_with("mounted?")).cloned().collect()
    }
}

impl DataMounts for FakeMounts {
    fn mounted(&self, mount: &Path) -> Result<bool, EngineError> {
        self.calls.borrow_mut().push(format!("mounted? {}", mount.display()));
        Ok(self.mounted.borrow().contains(mount))
    }
    fn used_mib(&self, mount: &Path) -> Result<u64, EngineError> {
        Ok(self.used.get(mount).copied().unwrap_or(1))
    }
    fn mount_kept(&self, image: &Path, mount: &Path) -> Result<Mounted, EngineError> {
        self.calls.borrow_mut().push(format!("mount {} {}", image.display(), mount.display()));
        assert!(image.is_file(), "mount_kept is asked only for an image that is there");
        if self.broken.contains(mount) {
            return Err(EngineError::Host { step: "mount the data image" });
        }
        Ok(if self.mounted.borrow_mut().insert(mount.to_path_buf()) {
            Mounted::Now
        } else {
            Mounted::Already
        })
    }
    fn unmount(&self, mount: &Path) -> Result<(), EngineError> {
        self.calls.borrow_mut().push(format!("unmount {}", mount.display()));
        self.mounted.borrow_mut().remove(mount);
        Ok(())
    }
}

fn data_dir(h: &Harness) -> PathBuf {
    h.paths.data_dir()
}

fn image(h: &Harness, app: &str) -> PathBuf {
    data_dir(h).join(format!("{app}.ext4"))
}

fn mount(h: &Harness, app: &str) -> PathBuf {
    data_dir(h).join(app)
}

/// A kept image of `mib` MiB and its mount point, as a deploy leaves them.
fn keep_image(h: &Harness, app: &str, mib: u64) {
    let dir = data_dir(h);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::File::create(image(h, app)).unwrap().set_len(mib * MIB).unwrap();
    std::fs::create_dir_all(mount(h, app)).unwrap();
}

/// Records `app` as a managed app whose data is its image under `data/`
/// (a copy of the harness's `legacy` record, which satisfies the store's
/// plan reference).
fn record_with_data(h: &Harness, app: &str, state: AppState) {
    let mut record = read_apps(&h.paths.database()).unwrap()["legacy"].clone();
    record.app = AppName::parse(app).unwrap();
    record.state = state;
    // Each record has its own host port (the store holds them unique).
    static PORT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(19100);
    record.host_port = PORT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    record.data = Some(DataUse {
        path: DataPath::parse("/data").unwrap(),
        image: image(h, app),
        mount: mount(h, app),
        max_mib: 16,
    });
    h.controller().store_for_tests().write(|tx| tx.put_app(&record, START)).unwrap();
}

/// Every name, kind and size under `data/`: what a refusal must not change.
fn tree(h: &Harness) -> Vec<(String, bool, u64)> {
    let mut out: Vec<_> = std::fs::read_dir(data_dir(h))
        .map(|entries| {
            entries
                .map(|e| {
                    let e = e.unwrap();
                    let meta = e.metadata().unwrap();
                    (e.file_name().into_string().unwrap(), meta.is_dir(), meta.len())
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn now(h: &Harness) -> i64 {
    volce_lab::control::Clock::now(&h.clock)
}

/// `app`'s line of `data list`, its column padding squeezed to two spaces.
fn line(listed: &str, app: &str) -> String {
    let prefix = format!("  {app} ");
    let line = listed
        .lines()
        .find(|line| line.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {app}:\n{listed}"));
    let mut squeezed = line.to_owned();
    while squeezed.contains("   ") {
        squeezed = squeezed.replace("   ", "  ");
    }
    squeezed
}

#[test]
fn list_names_every_image_its_size_mount_and_holder() {
    let h = Harness::new();
    let fake = FakeMounts::default();
    assert_eq!(
        data::list(&h.paths, &fake).unwrap(),
        format!("No data images in {}.\n", data_dir(&h).display())
    );

    keep_image(&h, "shop", 16);
    record_with_data(&h, "shop", AppState::Running);
    keep_image(&h, "blog", 64);
    let kept_for =
        volce_lab::vocab::KeptFor { entry: "static".into(), path: DataPath::parse("/www").unwrap() };
    volce_lab::docker::data_volume::bind_kept(&image(&h, "blog"), &kept_for).unwrap();
    keep_image(&h, "notes", 8);
    record_with_data(&h, "api", AppState::Stopped);
    keep_image(&h, "legacy", 32);
    std::fs::create_dir(image(&h, "odd")).unwrap();
    std::fs::write(data_dir(&h).join("Not_An_App.ext4"), b"").unwrap();
    std::fs::write(data_dir(&h).join("notes.txt"), b"").unwrap();
    let fake = FakeMounts {
        used: [(mount(&h, "shop"), 3)].into(),
        ..FakeMounts::with_mounted(&[&mount(&h, "shop")])
    };
    let listed = data::list(&h.paths, &fake).unwrap();
    println!("{listed}");
    assert!(listed.starts_with(&format!("5 data images in {}:\n", data_dir(&h).display())), "{listed}");
    assert_eq!(line(&listed, "shop"), "  shop  16 MiB  mounted, 3 MiB used  app shop (running)");
    assert_eq!(
        line(&listed, "blog"),
        "  blog  64 MiB  not mounted  kept, no app, for catalog entry static at /www: `volce-lab-host data purge \
         blog` deletes it"
    );
    // Kept by an older version, with no record: the list says no deploy
    // re-attaches it (issue 38, item 2), so the way out is the purge.
    assert!(
        line(&listed, "notes").contains("no record of its catalog entry (no deploy re-attaches it)"),
        "{listed}"
    );
    assert!(
        line(&listed, "api").contains("image missing  not mounted  app api (stopped): restore"),
        "{listed}"
    );
    assert!(line(&listed, "legacy").contains("the app legacy runs without data"), "{listed}");
    assert!(line(&listed, "odd").contains("not a data image volce-lab made"), "{listed}");
    assert_eq!(listed.lines().count(), 7, "names no app could have are not ours to list:\n{listed}");
    assert!(fake.changes().is_empty(), "list changes nothing: {:?}", fake.changes());
}

#[test]
fn mount_mounts_every_recorded_apps_image_and_never_makes_one() {
    let h = Harness::new();
    let fake = FakeMounts::default();
    let report = data::mount_all(&h.paths, &fake).unwrap();
    assert_eq!((report.text.as_str(), report.failed), ("No app has data: nothing to mount.\n", 0));
    assert!(report.refusal().is_none());

    keep_image(&h, "shop", 16);
    record_with_data(&h, "shop", AppState::Running);
    keep_image(&h, "wiki", 16);
    record_with_data(&h, "wiki", AppState::NeedsInspection);
    keep_image(&h, "blog", 64);
    record_with_data(&h, "api", AppState::Running);
    let report = data::mount_all(&h.paths, &fake).unwrap();
    println!("{}", report.text);
    assert!(
        report.text.contains(&format!(
            "shop: mounted {} on {}.\n",
            image(&h, "shop").display(),
            mount(&h, "shop").display()
        )),
        "{}",
        report.text
    );
    assert!(report.text.contains("wiki: mounted"), "{}", report.text);
    assert!(report.text.contains("api: NOT MOUNTED: its image"), "{}", report.text);
    assert!(report.text.contains("nothing was made in its place"), "{}", report.text);
    assert!(!report.text.contains("blog"), "kept data with no app stays unmounted: {}", report.text);
    assert!(report.text.ends_with("Mounted 2, already mounted 0, failed 1.\n"), "{}", report.text);
    assert!(!image(&h, "api").exists(), "a missing image is never made");
    let refusal = report.refusal().unwrap();
    assert_eq!(refusal.code, Code::DataActionFailed);
    assert!(refusal.message.contains("1 app could not") && refusal.message.ends_with("again."));

    // Again: nothing more to mount; a failing mount names its step.
    let fake =
        FakeMounts { broken: [mount(&h, "wiki")].into(), ..FakeMounts::with_mounted(&[&mount(&h, "shop")]) };
    let report = data::mount_all(&h.paths, &fake).unwrap();
    assert!(report.text.contains("shop: already mounted on"), "{}", report.text);
    assert!(report.text.contains("wiki: NOT MOUNTED: could not mount the data image"), "{}", report.text);
    assert!(report.text.ends_with("Mounted 0, already mounted 1, failed 2.\n"), "{}", report.text);
}

/// Each refusal of purge: its code, a whole sentence, and nothing under
/// `data/` or in the mounts changed.
#[test]
fn every_purge_refusal_has_its_code_and_changes_nothing() {
    let h = Harness::new();
    keep_image(&h, "shop", 16);
    record_with_data(&h, "shop", AppState::Stopped);
    keep_image(&h, "blog", 64);
    std::fs::create_dir(image(&h, "odd")).unwrap();
    // A pending deploy of `pend` would re-attach its kept data.
    keep_image(&h, "pend", 16);
    let request =
        json!({"operation": "plan", "action": "deploy", "parameters": deploy_params("pend", 18001)});
    let reply = h.rpc("agent", request.to_string().as_bytes()).to_json();
    assert_eq!(reply["status"], "ok", "{reply}");
    let plan_id = reply["result"]["id"].as_str().unwrap().to_owned();

    let before = tree(&h);
    let fake = FakeMounts::with_mounted(&[&mount(&h, "blog")]);
    let cases: Vec<(&str, Code, &str)> = vec![
        ("nope", Code::DataNotFound, "data list"),
        ("Shop", Code::InvalidAppName, "not an app name"),
        ("../state", Code::InvalidAppName, "not an app name"),
        ("blog/../shop", Code::InvalidAppName, "not an app name"),
        ("", Code::InvalidAppName, "not an app name"),
        ("shop", Code::DataHeld, "remove_app plan with purge_data: true"),
        ("pend", Code::DataPlanOpen, &plan_id),
        ("odd", Code::DataInvalid, "move it away by hand"),
    ];
    for (app, code, says) in cases {
        let refusal = data::prepare_purge(&h.paths, &fake, app, now(&h)).unwrap_err();
        assert_eq!(refusal.code, code, "{app:?}: {refusal:?}");
        assert!(refusal.message.contains(says), "{app:?}: {}", refusal.message);
        assert!(refusal.message.ends_with('.'), "a whole sentence: {}", refusal.message);
        assert!(refusal.message.contains("othing was deleted"), "{app:?}: {}", refusal.message);
        assert!(!code.fix().is_empty());
        assert_eq!(tree(&h), before, "{app:?}: nothing changed");
    }
    assert!(fake.changes().is_empty(), "no mount was touched: {:?}", fake.changes());
    assert_eq!(fake.mounted.borrow().len(), 1);
}

#[test]
fn purge_unmounts_kept_data_then_deletes_the_image_and_its_mount_point() {
    let h = Harness::new();
    keep_image(&h, "blog", 64);
    keep_image(&h, "shop", 16);
    record_with_data(&h, "shop", AppState::Running);
    let fake = FakeMounts {
        used: [(mount(&h, "blog"), 40)].into(),
        ..FakeMounts::with_mounted(&[&mount(&h, "blog")])
    };
    let prepared = data::prepare_purge(&h.paths, &fake, "blog", now(&h)).unwrap();
    println!("{}", prepared.shown);
    assert_eq!((prepared.app.as_str(), prepared.mib), ("blog", 64));
    assert!(prepared.shown.contains("kept with no app") && prepared.shown.contains("(64 MiB)"));
    assert!(prepared.shown.contains("(40 MiB used): it will be unmounted"), "{}", prepared.shown);
    assert!(image(&h, "blog").exists() && fake.changes().is_empty(), "prepare changes nothing");

    let done = data::purge(&h.paths, &fake, &prepared, now(&h)).unwrap();
    println!("{done}");
    assert_eq!(fake.changes(), [format!("unmount {}", mount(&h, "blog").display())]);
    assert!(done.starts_with(&format!("Unmounted {}.\n", mount(&h, "blog").display())), "{done}");
    assert!(done.contains(&format!("Deleted {} (64 MiB)", image(&h, "blog").display())), "{done}");
    assert!(!image(&h, "blog").exists() && !mount(&h, "blog").exists());
    assert!(image(&h, "shop").exists() && mount(&h, "shop").exists(), "other data is left alone");
    assert_eq!(
        data::prepare_purge(&h.paths, &fake, "blog", now(&h)).unwrap_err().code,
        Code::DataNotFound,
        "purged once is purged"
    );

    // Not mounted: no unmount, just the delete.
    keep_image(&h, "wiki", 16);
    let fake = FakeMounts::default();
    let prepared = data::prepare_purge(&h.paths, &fake, "wiki", now(&h)).unwrap();
    assert!(!prepared.shown.contains("unmounted"), "{}", prepared.shown);
    let done = data::purge(&h.paths, &fake, &prepared, now(&h)).unwrap();
    assert!(done.starts_with("Deleted") && fake.changes().is_empty(), "{done}");
    assert!(!image(&h, "wiki").exists());
}

/// What changed while the operator was asked stops the purge: an app
/// recorded with the data, or a deploy planned that re-attaches it.
#[test]
fn purge_checks_again_after_the_confirmation() {
    let h = Harness::new();
    keep_image(&h, "blog", 64);
    let fake = FakeMounts::default();
    let prepared = data::prepare_purge(&h.paths, &fake, "blog", now(&h)).unwrap();
    let request =
        json!({"operation": "plan", "action": "deploy", "parameters": deploy_params("blog", 18002)});
    assert_eq!(h.rpc("agent", request.to_string().as_bytes()).to_json()["status"], "ok");
    let refusal = data::purge(&h.paths, &fake, &prepared, now(&h)).unwrap_err();
    assert_eq!(refusal.code, Code::DataPlanOpen, "{refusal:?}");

    record_with_data(&h, "blog", AppState::Running);
    let refusal = data::purge(&h.paths, &fake, &prepared, now(&h)).unwrap_err();
    assert_eq!(refusal.code, Code::DataHeld, "{refusal:?}");
    assert!(image(&h, "blog").exists() && mount(&h, "blog").exists());
    assert!(fake.changes().is_empty());
}

/// A `data/` that is a symlink (or not the owner's) is not read, let alone
/// deleted from.
#[test]
fn a_data_directory_that_is_a_symlink_is_refused() {
    let h = Harness::new();
    let elsewhere = h.root.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::File::create(elsewhere.join("blog.ext4")).unwrap().set_len(16 * MIB).unwrap();
    std::fs::create_dir_all(&h.paths.state_dir).unwrap();
    std::os::unix::fs::symlink(&elsewhere, data_dir(&h)).unwrap();
    let fake = FakeMounts::default();
    assert_eq!(data::list(&h.paths, &fake).unwrap_err().code, Code::UnsafePath);
    assert_eq!(data::mount_all(&h.paths, &fake).unwrap_err().code, Code::UnsafePath);
    assert_eq!(data::prepare_purge(&h.paths, &fake, "blog", now(&h)).unwrap_err().code, Code::UnsafePath);
    assert!(elsewhere.join("blog.ext4").exists());
}

/// Issue 40. Tried: an accessory's data (`shop@db.ext4` and its
/// credential) held by the app `shop`, then kept with no app. `data list`
/// names it `shop@db`, `data mount` mounts it while its app holds it, a
/// purge of it is refused `data_held` then; kept with no app, the purge
/// deletes the image, its mount point and its credential, and nothing of
/// the app's own data; the backup record of an app backed up by dumps
/// only goes with its last data, not before.
#[test]
fn an_accessorys_data_is_listed_mounted_and_purged_by_app_at_name() {
    let h = Harness::new();
    keep_image(&h, "shop", 16);
    keep_image(&h, "shop@db", 32);
    let secret = data_dir(&h).join("shop@db.secret");
    std::fs::write(&secret, "ab".repeat(32)).unwrap();
    record_with_data(&h, "shop", AppState::Running);
    let mut record = read_apps(&h.paths.database()).unwrap()["shop"].clone();
    record.accessories = vec![
        serde_json::from_value(json!({
            "name": "db", "image": format!("pg.example/pg@sha256:{}", "3".repeat(64)), "port": 5432,
            "container_name": "vl-shop-db",
            "data": {"path": "/srv/pgdata", "image": image(&h, "shop@db"), "mount": mount(&h, "shop@db"), "max_mib": 32},
            "health": ["/usr/bin/pg_isready"]
        }))
        .unwrap(),
    ];
    h.controller().store_for_tests().write(|tx| tx.put_app(&record, START)).unwrap();

    let fake = FakeMounts::default();
    let listed = data::list(&h.paths, &fake).unwrap();
    assert!(line(&listed, "shop@db").contains("32 MiB  not mounted  app shop (running)"), "{listed}");
    let mounted = data::mount_all(&h.paths, &fake).unwrap();
    assert!(mounted.text.contains("shop@db: mounted"), "{}", mounted.text);
    let held = data::prepare_purge(&h.paths, &fake, "shop@db", now(&h)).unwrap_err();
    assert_eq!(held.code, Code::DataHeld, "{}", held.message);

    // The app gone (its remove_app kept the data): the purge takes it.
    h.controller().store_for_tests().write(|tx| tx.delete_app("shop")).unwrap();
    let fake = FakeMounts::default();
    let prepared = data::prepare_purge(&h.paths, &fake, "shop@db", now(&h)).unwrap();
    data::purge(&h.paths, &fake, &prepared, now(&h)).unwrap();
    assert!(!image(&h, "shop@db").exists() && !mount(&h, "shop@db").exists() && !secret.exists());
    assert!(image(&h, "shop").exists(), "the app's own data is another's purge");

    // Issue 41: an app backed up by its dumps only (no data of its own)
    // keeps its record as `<app>.backup`; the purge of its last data
    // deletes it, and not before.
    keep_image(&h, "news@db", 16);
    keep_image(&h, "news@cache", 16);
    let record = data_dir(&h).join("news.backup");
    std::fs::write(&record, "{}").unwrap();
    let prepared = data::prepare_purge(&h.paths, &fake, "news@db", now(&h)).unwrap();
    let done = data::purge(&h.paths, &fake, &prepared, now(&h)).unwrap();
    assert!(record.exists() && !done.contains("backup record"), "news@cache is left: {done}");
    let prepared = data::prepare_purge(&h.paths, &fake, "news@cache", now(&h)).unwrap();
    let done = data::purge(&h.paths, &fake, &prepared, now(&h)).unwrap();
    assert!(!record.exists() && done.contains("Deleted the backup record"), "{done}");
    let refused = data::prepare_purge(&h.paths, &fake, "shop@Db", now(&h)).unwrap_err();
    assert_eq!(refused.code, Code::InvalidAppName, "{}", refused.message);
}
