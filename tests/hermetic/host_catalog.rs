//! `volce-lab-host catalog pin|list|remove` in library form on a temporary
//! world (the harness's policy and store, owner the test's uid) with a
//! fake image source: the arguments and the image are checked, the policy's
//! other keys and entries are kept as they were, the written file has the
//! owner and mode the loader demands, every refusal writes nothing, and the
//! pending plans a change voids are named and then refused. Hermetic.

use std::cell::RefCell;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

use serde_json::{Value, json};
use volce_lab::docker::EngineError;
use volce_lab::docker::client::{LocalImage, PullFailure};
use volce_lab::install::catalog::{self, Change, ImageSource, PinArgs};
use volce_lab::install::doctor::ImageConfig;
use volce_lab::vocab::{Code, Refusal};

use crate::support::harness::{Harness, deploy_params};

const REPO: &str = "127.0.0.1:15000/team/shop";

fn hex(c: char) -> String {
    c.to_string().repeat(64)
}

/// An image source that answers from what the test says and records the
/// references it was asked for.
struct FakeSource {
    pull_ok: bool,
    image: Option<LocalImage>,
    asked: RefCell<Vec<String>>,
}

impl FakeSource {
    fn new(image: Option<LocalImage>) -> FakeSource {
        FakeSource { pull_ok: true, image, asked: RefCell::new(Vec::new()) }
    }
}

impl ImageSource for FakeSource {
    fn pull(&self, reference: &str) -> Result<(), PullFailure> {
        self.asked.borrow_mut().push(format!("pull {reference}"));
        if self.pull_ok { Ok(()) } else { Err(PullFailure::NoSuchImage) }
    }
    fn local_image(&self, reference: &str) -> Result<Option<LocalImage>, EngineError> {
        self.asked.borrow_mut().push(format!("inspect {reference}"));
        Ok(self.image.clone())
    }
}

/// An image that fits the app template: uid 1000, a command, port 8080,
/// pushed to the test registry.
fn fitting() -> LocalImage {
    LocalImage {
        config: ImageConfig {
            user: "1000:1000".into(),
            cmd: vec!["/bin/app".into()],
            exposed_ports: [("8080/tcp".to_owned(), json!({}))].into(),
            ..Default::default()
        },
        digests: vec![format!("{REPO}@sha256:{}", hex('c'))],
    }
}

fn pin_args(key: &str, image: &str) -> PinArgs {
    PinArgs { key: key.into(), image: image.into(), container_port: None, health_path: None, data: None }
}

/// A policy with keys an operator wrote by hand, all of which must survive.
fn handwritten() -> Value {
    json!({
        "catalog": {
            "web": format!("127.0.0.1:15000/volce-lab/web@sha256:{}", hex('a')),
            "api": {"image": format!("r.example/api@sha256:{}", hex('d')), "container_port": 9000, "health_path": "/up"}
        },
        "nginx_image": format!("127.0.0.1:15000/volce-lab/gateway@sha256:{}", hex('b')),
        "approvers": ["alice", "bob"],
        "max_apps": 6,
        "limits": {"memory_mib": 384, "cpus": 0.75},
        "approval_required": ["deploy", "nginx_config"],
        "retention_days": 30
    })
}

fn world() -> Harness {
    let mut h = Harness::new();
    h.write_policy(&handwritten());
    h
}

fn now(h: &Harness) -> i64 {
    volce_lab::control::Clock::now(&h.clock)
}

fn pin(h: &Harness, source: &FakeSource, args: &PinArgs) -> Result<Change, Refusal> {
    catalog::prepare_pin(&h.paths, source, args, now(h))
}

fn policy_on_disk(h: &Harness) -> Value {
    serde_json::from_slice(&std::fs::read(&h.paths.policy).unwrap()).unwrap()
}

#[test]
fn pin_writes_the_entry_keeps_every_other_key_and_the_loaders_owner_and_mode() {
    let h = world();
    let source = FakeSource::new(Some(fitting()));
    let change = pin(&h, &source, &pin_args("shop", &format!("{REPO}:1.2"))).unwrap();
    assert_eq!(*source.asked.borrow(), [format!("pull {REPO}:1.2"), format!("inspect {REPO}:1.2")]);
    let pinned = format!("{REPO}@sha256:{}", hex('c'));
    assert!(change.shown.contains("Pulled") && change.shown.contains("`shop` is new"), "{}", change.shown);
    assert!(
        change.shown.contains(&pinned) && change.shown.contains("No pending plan is voided"),
        "{}",
        change.shown
    );
    assert_eq!(policy_on_disk(&h), handwritten(), "nothing is written before the confirmation");

    println!("{}", catalog::write(&h.paths, &change).unwrap());
    let mut expected = handwritten();
    expected["catalog"]["shop"] = json!({"image": pinned, "container_port": 8080});
    assert_eq!(policy_on_disk(&h), expected, "every other key and entry means what it meant");
    let meta = std::fs::metadata(&h.paths.policy).unwrap();
    assert_eq!((meta.mode() & 0o7777, meta.uid()), (0o600, h.paths.owner_uid));
    let policy = volce_lab::host::paths::load_policy(&h.paths).unwrap();
    assert_eq!(policy.catalog["shop"].container_port, Some(8080));
    let candidates: Vec<_> = std::fs::read_dir(h.paths.policy.parent().unwrap()).unwrap().collect();
    assert_eq!(candidates.len(), 1, "no temporary file is left beside the policy");

    // The same pin again: nothing to write, nothing voided.
    let again = pin(&h, &source, &pin_args("shop", &format!("{REPO}:1.2"))).unwrap();
    assert_eq!(again.after, None, "{}", again.shown);
    assert!(again.shown.contains("already says this"));

    // A health path and an explicit port replace the entry; the old one is shown.
    let args = PinArgs {
        container_port: Some(3000),
        health_path: Some("/healthz".into()),
        ..pin_args("shop", REPO)
    };
    let change = pin(&h, &source, &args).unwrap();
    assert!(change.shown.contains("now: {"), "{}", change.shown);
    catalog::write(&h.paths, &change).unwrap();
    assert_eq!(
        policy_on_disk(&h)["catalog"]["shop"],
        json!({"image": format!("{REPO}@sha256:{}", hex('c')), "container_port": 3000, "health_path": "/healthz"})
    );
    let listed = catalog::list(&h.paths).unwrap();
    assert!(listed.contains("shop") && listed.contains("container_port 3000"), "{listed}");
    assert!(listed.contains("web") && listed.contains("apps: legacy"), "{listed}");
}

/// Issue 40: an entry's tasks and its before_start are the operator's,
/// written by hand; `catalog list` shows them with their argv, and a
/// re-pin of the entry (a new digest, a port) keeps both as written.
#[test]
fn a_repin_keeps_the_entrys_tasks_and_catalog_list_shows_them() {
    let mut h = Harness::new();
    let mut policy = handwritten();
    policy["catalog"]["shop"] = json!({
        "image": format!("{REPO}@sha256:{}", hex('d')), "container_port": 8080,
        "tasks": {"migrate": ["/bin/app", "migrate", "--to", "latest"], "seed": ["/bin/app", "seed"]},
        "before_start": "migrate"
    });
    h.write_policy(&policy);
    let listed = catalog::list(&h.paths).unwrap();
    assert!(
        listed.contains(r#"    task migrate: ["/bin/app", "migrate", "--to", "latest"]  (before_start)"#),
        "{listed}"
    );
    assert!(listed.contains(r#"    task seed: ["/bin/app", "seed"]"#), "{listed}");
    let source = FakeSource::new(Some(fitting()));
    let change = pin(&h, &source, &pin_args("shop", &format!("{REPO}:1.3"))).unwrap();
    catalog::write(&h.paths, &change).unwrap();
    let written = &policy_on_disk(&h)["catalog"]["shop"];
    assert_eq!(written["image"], json!(format!("{REPO}@sha256:{}", hex('c'))), "re-pinned: {written}");
    assert_eq!(written["tasks"], policy["catalog"]["shop"]["tasks"], "{written}");
    assert_eq!(written["before_start"], "migrate", "{written}");
}

/// Each refusal: its code, a sentence that ends in what to do or that
/// nothing was written, and the policy file unchanged.
#[test]
fn every_refusal_has_its_code_and_writes_nothing() {
    let h = world();
    let before = std::fs::read(&h.paths.policy).unwrap();
    let image = |change: &dyn Fn(&mut LocalImage)| {
        let mut image = fitting();
        change(&mut image);
        FakeSource::new(Some(image))
    };
    let shop = format!("{REPO}:1");
    let cases: Vec<(PinArgs, FakeSource, Code, &str)> = vec![
        (pin_args("Shop", &shop), FakeSource::new(Some(fitting())), Code::InvalidCatalogKey, "^[a-z]"),
        (pin_args("shop", "--privileged"), FakeSource::new(None), Code::InvalidImageReference, "lowercase"),
        (
            pin_args("shop", "shop:1;reboot"),
            FakeSource::new(None),
            Code::InvalidImageReference,
            "Nothing was pulled",
        ),
        (
            PinArgs { health_path: Some("/a/../b".into()), ..pin_args("shop", &shop) },
            FakeSource::new(Some(fitting())),
            Code::InvalidCatalogEntry,
            "--health-path",
        ),
        (
            PinArgs { container_port: Some(80), ..pin_args("shop", &shop) },
            FakeSource::new(Some(fitting())),
            Code::InvalidCatalogEntry,
            "1024",
        ),
        (
            pin_args("shop", &shop),
            FakeSource { pull_ok: false, ..FakeSource::new(None) },
            Code::ImagePullFailed,
            "could not be pulled: the registry answered that it has no such tag or digest",
        ),
        (
            pin_args("shop", &shop),
            image(&|i| i.digests.clear()),
            Code::ImageNotInRegistry,
            "Push it to a registry first",
        ),
        (
            pin_args("shop", &format!("{REPO}@sha256:{}", hex('e'))),
            FakeSource::new(Some(fitting())),
            Code::ImageNotInRegistry,
            "registry",
        ),
        (
            pin_args("shop", &shop),
            image(&|i| i.config.user.clear()),
            Code::ImageMisfitsTemplate,
            "root (no USER)",
        ),
        (pin_args("shop", &shop), image(&|i| i.config.cmd.clear()), Code::ImageMisfitsTemplate, "no CMD"),
        (
            pin_args("shop", &shop),
            image(&|i| {
                i.config.volumes.insert("/data".into(), json!({}));
            }),
            Code::ImageDeclaresVolumes,
            "/data",
        ),
        (
            pin_args("shop", &shop),
            image(&|i| {
                i.config.exposed_ports.insert("9000/tcp".into(), json!({}));
            }),
            Code::ContainerPortNeeded,
            "several ports (8080, 9000)",
        ),
        (
            pin_args("shop", &shop),
            image(&|i| i.config.exposed_ports.clear()),
            Code::ContainerPortNeeded,
            "--container-port",
        ),
    ];
    for (args, source, code, says) in cases {
        let refusal = pin(&h, &source, &args).unwrap_err();
        assert_eq!(refusal.code, code, "{args:?}: {refusal:?}");
        assert!(refusal.message.contains(says), "{args:?}: {}", refusal.message);
        assert!(refusal.message.ends_with('.'), "a whole sentence: {}", refusal.message);
        assert!(!code.fix().is_empty());
        if code == Code::ImageMisfitsTemplate {
            // Issue 37: it said what was wrong and not what to do.
            assert!(refusal.message.ends_with(code.fix()), "the next step: {}", refusal.message);
        }
        assert_eq!(std::fs::read(&h.paths.policy).unwrap(), before, "{code}: nothing written");
    }
    // A bad reference is refused before the engine is asked anything.
    let source = FakeSource::new(Some(fitting()));
    pin(&h, &source, &pin_args("shop", "-v")).unwrap_err();
    assert!(source.asked.borrow().is_empty());
}

#[test]
fn a_failed_pull_reads_the_local_image() {
    let h = world();
    let source = FakeSource { pull_ok: false, ..FakeSource::new(Some(fitting())) };
    let change = pin(&h, &source, &pin_args("shop", &format!("{REPO}:1"))).unwrap();
    assert!(change.shown.starts_with("Could not pull; read the local image"), "{}", change.shown);
    assert!(change.after.is_some());
}

#[test]
fn the_loaders_rules_hold_before_anything_is_pulled() {
    let h = world();
    std::fs::set_permissions(&h.paths.policy, std::fs::Permissions::from_mode(0o620)).unwrap();
    let source = FakeSource::new(Some(fitting()));
    let refusal = pin(&h, &source, &pin_args("shop", REPO)).unwrap_err();
    assert_eq!(refusal.code, Code::UnsafePath, "{refusal:?}");
    assert!(source.asked.borrow().is_empty());
    assert_eq!(catalog::prepare_remove(&h.paths, "api", now(&h)).unwrap_err().code, Code::UnsafePath);
}

#[test]
fn the_pending_plans_a_change_voids_are_named_and_then_refused() {
    let h = world();
    let request =
        json!({"operation": "plan", "action": "deploy", "parameters": deploy_params("shop", 18001)});
    let reply = h.rpc("agent", request.to_string().as_bytes()).to_json();
    assert_eq!(reply["status"], "ok", "{reply}");
    let id = reply["result"]["id"].as_str().unwrap().to_owned();
    let plan_id = volce_lab::vocab::PlanId::parse(&id).unwrap();
    let digest =
        serde_json::from_str::<Value>(&h.show_json(&plan_id)).unwrap()["digest"].as_str().unwrap().to_owned();

    let change = pin(&h, &FakeSource::new(Some(fitting())), &pin_args("shop", REPO)).unwrap();
    assert!(change.shown.contains("voids 1 pending plan"), "{}", change.shown);
    assert!(change.shown.contains(&format!("{id} deploy shop")), "{}", change.shown);
    catalog::write(&h.paths, &change).unwrap();
    let refused = h.approve(&plan_id, &digest, "alice").unwrap_err();
    assert_eq!(refused.code, Code::PolicyChanged, "{refused:?}");
}

#[test]
fn remove_is_refused_while_an_app_uses_the_key_and_may_empty_the_catalog() {
    let mut h = world();
    let at = now(&h);
    let in_use = catalog::prepare_remove(&h.paths, "web", at).unwrap_err();
    assert_eq!(in_use.code, Code::CatalogKeyInUse, "legacy uses web: {in_use:?}");
    assert!(in_use.message.contains("legacy"), "{}", in_use.message);
    let unknown = catalog::prepare_remove(&h.paths, "nope", at).unwrap_err();
    assert_eq!(unknown.code, Code::CatalogKeyNotFound);
    assert!(unknown.message.contains("api, web"), "{}", unknown.message);
    assert_eq!(catalog::prepare_remove(&h.paths, "Bad Key", at).unwrap_err().code, Code::InvalidCatalogKey);

    let change = catalog::prepare_remove(&h.paths, "api", at).unwrap();
    assert!(change.shown.contains("`api` will be removed"), "{}", change.shown);
    catalog::write(&h.paths, &change).unwrap();
    let mut expected = handwritten();
    expected["catalog"].as_object_mut().unwrap().remove("api");
    assert_eq!(policy_on_disk(&h), expected);

    // The last entry (issue 37: it could never go, so setup's placeholders
    // stayed): removed, and the empty catalog is a valid policy.
    let mut only = handwritten();
    only["catalog"] = json!({"solo": format!("r.example/solo@sha256:{}", hex('f'))});
    h.write_policy(&only);
    catalog::write(&h.paths, &catalog::prepare_remove(&h.paths, "solo", at).unwrap()).unwrap();
    assert_eq!(policy_on_disk(&h)["catalog"], json!({}));
}

/// Issue 37: with an empty catalog every reader says so and names
/// `catalog pin`. Tried: `catalog list`, `catalog remove` and `catalog
/// env-file` of a key, a deploy plan, and the inventory's offer (an empty
/// list); pinning from there works.
#[test]
fn an_empty_catalog_is_valid_and_every_reader_says_to_pin_an_image() {
    let mut h = world();
    let mut empty = handwritten();
    empty["catalog"] = json!({});
    h.write_policy(&empty);
    let at = now(&h);
    let list = catalog::list(&h.paths).unwrap();
    assert!(
        list.starts_with(
            "The catalog is empty; pin an image with `sudo volce-lab-host catalog pin KEY IMAGE`."
        ),
        "{list}"
    );
    assert!(list.contains("Gateway image (nginx_image): 127.0.0.1:15000/volce-lab/gateway@"), "{list}");
    for refusal in [
        catalog::prepare_remove(&h.paths, "web", at).unwrap_err(),
        catalog::prepare_env_file(&h.paths, "web", None, at).unwrap_err(),
    ] {
        assert_eq!(refusal.code, Code::CatalogKeyNotFound);
        assert!(refusal.message.contains("the catalog is empty; pin an image with"), "{}", refusal.message);
    }
    let deploy = h.controller().prepare("deploy", &deploy_params("shop", 18001), "agent").unwrap_err();
    assert_eq!(deploy.code, Code::ImageNotInCatalog);
    assert!(
        deploy.message.contains("the catalog is empty") && deploy.message.contains("catalog pin"),
        "{}",
        deploy.message
    );
    let inventory = h.controller().inventory("agent").unwrap();
    assert!(inventory.offer.catalog.is_empty());
    let source = FakeSource::new(Some(fitting()));
    catalog::write(&h.paths, &pin(&h, &source, &pin_args("shop", &format!("{REPO}:1"))).unwrap()).unwrap();
    assert!(catalog::list(&h.paths).unwrap().starts_with("1 catalog entry:"));
}

/// An image that fits the gateway template: uid 101, nginx in the foreground.
fn gateway_image() -> LocalImage {
    LocalImage {
        config: ImageConfig {
            user: "101".into(),
            cmd: vec!["nginx".into(), "-g".into(), "daemon off;".into()],
            ..Default::default()
        },
        digests: vec![format!("127.0.0.1:15000/team/gateway@sha256:{}", hex('e'))],
    }
}

/// Issue 37: the gateway image had no command, so the operator edited
/// policy.json by hand. Tried: a fitting image by tag (pinned by its
/// registry digest, every other key kept, the operator types `gateway`),
/// then refused ones that write nothing: a bad reference, an app-shaped
/// image (uid 1000), an image with a VOLUME, none at all.
#[test]
fn gateway_image_pins_nginx_image_by_its_registry_digest_and_checks_the_gateway_template() {
    let h = world();
    let source = FakeSource::new(Some(gateway_image()));
    let change =
        catalog::prepare_gateway_image(&h.paths, &source, "127.0.0.1:15000/team/gateway:1.27", now(&h))
            .unwrap();
    assert_eq!((change.key.as_str(), change.prompt), ("gateway", "To write the policy, type gateway"));
    let pinned = format!("127.0.0.1:15000/team/gateway@sha256:{}", hex('e'));
    assert!(change.shown.contains(&format!("It will be: {pinned}")), "{}", change.shown);
    assert_eq!(policy_on_disk(&h), handwritten(), "nothing before the confirmation");
    catalog::write(&h.paths, &change).unwrap();
    let mut expected = handwritten();
    expected["nginx_image"] = json!(pinned);
    assert_eq!(policy_on_disk(&h), expected);

    let before = std::fs::read(&h.paths.policy).unwrap();
    let mut app_shaped = gateway_image();
    app_shaped.config.user = "1000:1000".into();
    let mut volume = gateway_image();
    volume.config.volumes = [("/var/cache/nginx".to_owned(), json!({}))].into();
    let cases = [
        ("nginx latest", FakeSource::new(Some(gateway_image())), Code::InvalidImageReference),
        ("127.0.0.1:15000/team/gateway:1", FakeSource::new(Some(app_shaped)), Code::ImageMisfitsTemplate),
        ("127.0.0.1:15000/team/gateway:1", FakeSource::new(Some(volume)), Code::ImageDeclaresVolumes),
        ("127.0.0.1:15000/team/gateway:1", FakeSource::new(None), Code::ImagePullFailed),
    ];
    for (image, source, code) in cases {
        let refusal = catalog::prepare_gateway_image(&h.paths, &source, image, now(&h)).unwrap_err();
        assert_eq!(refusal.code, code, "{image}: {refusal:?}");
        if code == Code::ImageMisfitsTemplate {
            // The gateway's own next step, not the app's USER 1000:1000.
            assert!(refusal.message.ends_with("pin it again with catalog gateway-image."), "{refusal:?}");
        }
    }
    assert_eq!(std::fs::read(&h.paths.policy).unwrap(), before, "nothing was written");
}

/// Issue 37: an entry's env file had no command either. Tried: naming a
/// good file on a bare entry (it becomes an object, nothing else changes),
/// `--none` (the env file goes, the health path stays), and refusals that
/// write nothing: a path outside /etc/volce-lab/apps/, a name with `..`, a
/// file that is not there, one with a group-readable mode, an unknown key.
#[test]
fn env_file_names_or_drops_an_entrys_env_file_through_the_same_checks_as_deploy() {
    use std::os::unix::fs::PermissionsExt as _;
    let h = world();
    let dir = h.root.join("etc/apps");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let write = |name: &str, mode: u32| {
        std::fs::write(dir.join(name), "API_KEY=k\n").unwrap();
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    };
    write("web.env", 0o600);
    write("open.env", 0o640);
    let at = now(&h);
    let change = catalog::prepare_env_file(&h.paths, "web", Some("/etc/volce-lab/apps/web.env"), at).unwrap();
    assert_eq!((change.key.as_str(), change.prompt), ("web", catalog::PROMPT));
    catalog::write(&h.paths, &change).unwrap();
    let mut expected = handwritten();
    expected["catalog"]["web"] =
        json!({"image": handwritten()["catalog"]["web"], "env_file": "/etc/volce-lab/apps/web.env"});
    assert_eq!(policy_on_disk(&h), expected);

    let before = std::fs::read(&h.paths.policy).unwrap();
    let cases = [
        ("web", "/etc/web.env", Code::InvalidCatalogEntry),
        ("web", "/etc/volce-lab/apps/../shadow", Code::InvalidCatalogEntry),
        ("web", "apps/web.env", Code::InvalidCatalogEntry),
        ("web", "/etc/volce-lab/apps/missing.env", Code::EnvFileInvalid),
        ("web", "/etc/volce-lab/apps/open.env", Code::EnvFileInvalid),
        ("nope", "/etc/volce-lab/apps/web.env", Code::CatalogKeyNotFound),
        ("Bad", "/etc/volce-lab/apps/web.env", Code::InvalidCatalogKey),
    ];
    for (key, path, code) in cases {
        let refusal = catalog::prepare_env_file(&h.paths, key, Some(path), at).unwrap_err();
        assert_eq!(refusal.code, code, "{key} {path}: {refusal:?}");
        assert!(refusal.message.contains("Nothing was written"), "{}", refusal.message);
    }
    assert_eq!(std::fs::read(&h.paths.policy).unwrap(), before, "nothing was written");

    let mut with_env = handwritten();
    with_env["catalog"]["api"]["env_file"] = json!("/etc/volce-lab/apps/web.env");
    let mut h = h;
    h.write_policy(&with_env);
    catalog::write(&h.paths, &catalog::prepare_env_file(&h.paths, "api", None, at).unwrap()).unwrap();
    assert_eq!(policy_on_disk(&h), handwritten(), "--none drops only the env file");
}

#[test]
fn a_policy_changed_while_the_operator_was_asked_is_not_overwritten() {
    let mut h = world();
    let change = pin(&h, &FakeSource::new(Some(fitting())), &pin_args("shop", REPO)).unwrap();
    let mut edited = handwritten();
    edited["max_apps"] = json!(8);
    h.write_policy(&edited);
    let refused = catalog::write(&h.paths, &change).unwrap_err();
    assert_eq!(refused.code, Code::CatalogEditInvalid);
    assert!(refused.message.contains("changed while you were asked"), "{}", refused.message);
    assert_eq!(policy_on_disk(&h), edited);
}

/// Sixteen pins of sixteen keys at once, each written the moment all are
/// prepared, each retried as its refusal says ("run the command again"):
/// every pin that returned Ok has its key in the file, and in the end all
/// sixteen are there. Without the policy's lock two writers both found the
/// file unchanged and the later rename dropped the earlier key after it had
/// printed "Wrote"; with one fixed temporary name they removed each
/// other's file ("could not be written").
#[test]
fn concurrent_pins_never_lose_a_written_key() {
    const PINS: usize = 16;
    let h = world();
    let at = now(&h);
    let barrier = std::sync::Barrier::new(PINS);
    let reported: Vec<(String, usize)> = std::thread::scope(|scope| {
        let pins: Vec<_> = (0..PINS)
            .map(|i| {
                let (paths, barrier) = (&h.paths, &barrier);
                scope.spawn(move || {
                    let key = format!("k{i}");
                    let source = FakeSource::new(Some(fitting()));
                    for attempt in 0..PINS * 4 {
                        let change = catalog::prepare_pin(paths, &source, &pin_args(&key, REPO), at).unwrap();
                        if attempt == 0 {
                            barrier.wait();
                        }
                        match catalog::write(paths, &change) {
                            Ok(_) => {
                                let on_disk: Value =
                                    serde_json::from_slice(&std::fs::read(&paths.policy).unwrap()).unwrap();
                                // Other keys may arrive later; this one must be there now and stay.
                                assert!(
                                    on_disk["catalog"].get(&key).is_some(),
                                    "{key} printed Wrote but is absent"
                                );
                                return (key, attempt);
                            }
                            Err(refusal) => assert!(
                                refusal.message.contains("changed while you were asked"),
                                "{key}: {refusal:?}"
                            ),
                        }
                    }
                    panic!("{key} was never written");
                })
            })
            .collect();
        pins.into_iter().map(|pin| pin.join().unwrap()).collect()
    });
    let on_disk = policy_on_disk(&h);
    for (key, _) in &reported {
        assert!(on_disk["catalog"].get(key).is_some(), "{key} was written and then lost: {on_disk}");
    }
    assert_eq!(on_disk["catalog"].as_object().unwrap().len(), 2 + PINS);
    let leftovers: Vec<_> = std::fs::read_dir(h.paths.policy.parent().unwrap()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary file is left beside the policy");
}

/// The loader refuses a policy over 256 KiB: an edit that would grow the
/// file past it is refused, not written and then refused at every load.
#[test]
fn an_edit_past_the_loaders_size_limit_is_refused() {
    let mut h = world();
    let mut big = handwritten();
    for i in 0..2300 {
        big["catalog"][format!("k{i}")] = json!(format!("registry.example/team/app{i}@sha256:{}", hex('a')));
    }
    let compact = big.to_string();
    assert!(compact.len() < 256 * 1024, "{}", compact.len());
    h.write_policy(&big);
    let refusal = pin(&h, &FakeSource::new(Some(fitting())), &pin_args("shop", REPO)).unwrap_err();
    assert_eq!(refusal.code, Code::CatalogEditInvalid, "{refusal:?}");
    assert!(refusal.message.contains("256 KiB"), "{}", refusal.message);
    assert_eq!(std::fs::read_to_string(&h.paths.policy).unwrap(), compact);
}

/// Re-pinning a key keeps what the operator configured in its entry: the
/// env file, and the health path unless --health-path is given.
#[test]
fn a_repin_keeps_the_entrys_env_file_and_health_path() {
    let mut h = world();
    let mut policy = handwritten();
    policy["catalog"]["api"]["env_file"] = json!("/etc/volce-lab/apps/api.env");
    h.write_policy(&policy);
    let source = FakeSource::new(Some(fitting()));
    let change = pin(&h, &source, &pin_args("api", &format!("{REPO}:2"))).unwrap();
    catalog::write(&h.paths, &change).unwrap();
    let written = policy_on_disk(&h);
    assert_eq!(
        written["catalog"]["api"],
        json!({"image": format!("{REPO}@sha256:{}", hex('c')), "container_port": 8080, "health_path": "/up",
               "env_file": "/etc/volce-lab/apps/api.env"})
    );
    let args = PinArgs { health_path: Some("/".into()), ..pin_args("api", &format!("{REPO}:2")) };
    catalog::write(&h.paths, &pin(&h, &source, &args).unwrap()).unwrap();
    assert_eq!(policy_on_disk(&h)["catalog"]["api"].get("health_path"), None, "`/` is the default");
    assert_eq!(policy_on_disk(&h)["catalog"]["api"]["env_file"], "/etc/volce-lab/apps/api.env");
}

/// Tried: `--data /data:64` on an image that declares `VOLUME /data`: the
/// entry gets the data directory and the volume is covered; a re-pin
/// without `--data` keeps it (and still accepts the volume); an image with
/// another VOLUME is refused naming it; and each malformed `--data` (no
/// size, a size out of range, a path in /tmp, a relative path) is refused
/// `invalid_catalog_entry` before anything is pulled or written.
#[test]
fn pin_gives_the_entry_a_data_directory_that_covers_the_images_volume_at_that_path() {
    let mut h = world();
    h.write_policy(&handwritten());
    let mut image = fitting();
    image.config.volumes = [("/data".to_owned(), json!({}))].into();
    let source = FakeSource::new(Some(image.clone()));
    let args = PinArgs { data: Some("/data:64".into()), ..pin_args("db", &format!("{REPO}:1")) };
    catalog::write(&h.paths, &pin(&h, &source, &args).unwrap()).unwrap();
    assert_eq!(policy_on_disk(&h)["catalog"]["db"]["data"], json!({"path": "/data", "max_mib": 64}));
    let repin = pin(&h, &source, &pin_args("db", &format!("{REPO}:2"))).unwrap();
    catalog::write(&h.paths, &repin).unwrap();
    assert_eq!(policy_on_disk(&h)["catalog"]["db"]["data"], json!({"path": "/data", "max_mib": 64}), "kept");

    let before = std::fs::read(&h.paths.policy).unwrap();
    image.config.volumes = [("/cache".to_owned(), json!({}))].into();
    let other = FakeSource::new(Some(image));
    let refused = pin(&h, &other, &pin_args("db", &format!("{REPO}:3"))).unwrap_err();
    assert_eq!(refused.code, volce_lab::vocab::Code::ImageDeclaresVolumes);
    assert!(refused.message.contains("/cache"), "{}", refused.message);
    for bad in ["/data", "/data:8", "/data:99999999", "/tmp/x:64", "data:64", "/data:-1"] {
        let args = PinArgs { data: Some(bad.into()), ..pin_args("db", &format!("{REPO}:3")) };
        let untouched = FakeSource::new(Some(fitting()));
        let refused = pin(&h, &untouched, &args).unwrap_err();
        assert_eq!(refused.code, volce_lab::vocab::Code::InvalidCatalogEntry, "{bad}");
        assert!(refused.message.contains("must be PATH:MAX_MIB"), "{bad}: {}", refused.message);
        assert!(untouched.asked.borrow().is_empty(), "{bad}: nothing pulled");
    }
    assert_eq!(std::fs::read(&h.paths.policy).unwrap(), before, "nothing written by a refusal");
}
