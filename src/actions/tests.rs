//! One test per validation rule, on a fake probe and hand-built snapshots.
//! Over 450 lines on purpose: every rule gets its own short test on the
//! one shared `World`; splitting the file would only split that world.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::control::app_record::{AppRecord, AppState};
use crate::control::policy::tests::sample_policy;
use crate::control::validate::{Context, HostFacts, MIB};
use crate::vocab::{AppName, Capacity, ContainerId, ImageHolds, ImageId, ImageRef, ServerName, Snapshot};
use crate::vocab::{Container, LABEL_APP, LABEL_PLAN, PublishedPort, is_server_name};

struct FakeProbe {
    port_free: bool,
    dir_exists: bool,
    capacity: Capacity,
    asked_capacity: Cell<bool>,
    /// What `image_volumes` answers, by reference; absent: not pulled yet.
    volumes: BTreeMap<String, Vec<String>>,
    /// What `image_holds` answers, by image; absent: nothing holds it.
    holds: BTreeMap<ImageId, Option<ImageHolds>>,
    /// What `env_file` answers: the file's hash, or refused.
    env_sha256: Option<String>,
    kept_data_mib: Option<u32>,
    /// What `kept_data_for` answers: the record beside the kept image.
    kept_for: Option<crate::vocab::KeptFor>,
    /// What the backup repository holds (`backup_snapshot` finds by prefix).
    snapshots: Vec<crate::vocab::SnapshotFacts>,
}

impl Default for FakeProbe {
    fn default() -> Self {
        FakeProbe {
            port_free: true,
            dir_exists: false,
            capacity: Capacity { free_memory_bytes: 8 << 30, free_disk_bytes: 64 << 30 },
            asked_capacity: Cell::new(false),
            volumes: BTreeMap::new(),
            holds: BTreeMap::new(),
            env_sha256: Some("e".repeat(64)),
            kept_data_mib: None,
            kept_for: None,
            snapshots: Vec::new(),
        }
    }
}

impl HostFacts for FakeProbe {
    fn kept_data_mib(&self, _image: &Path) -> Result<Option<u32>, Refusal> {
        Ok(self.kept_data_mib)
    }
    fn kept_data_for(&self, _image: &Path) -> Result<Option<crate::vocab::KeptFor>, Refusal> {
        Ok(self.kept_for.clone())
    }
    fn host_port_free(&self, _port: u16) -> bool {
        self.port_free
    }
    fn certificate(&self, files: &crate::vocab::CertificateFiles) -> Result<String, String> {
        match files.cert.to_str() {
            Some(path) if path.contains("missing") => Err(format!("{path} does not exist")),
            _ => Ok("ab".repeat(32)),
        }
    }
    fn backup_snapshot(
        &self,
        _config: &crate::vocab::BackupConfig,
        _app: &AppName,
        id: &crate::vocab::SnapshotId,
    ) -> Result<Option<crate::vocab::SnapshotFacts>, Refusal> {
        Ok(self.snapshots.iter().find(|s| s.id.as_str().starts_with(id.as_str())).cloned())
    }
    fn capacity(&self) -> Result<Capacity, Refusal> {
        self.asked_capacity.set(true);
        Ok(self.capacity)
    }
    fn app_dir_exists(&self, _app: &str) -> bool {
        self.dir_exists
    }
    fn image_volumes(&self, reference: &ImageRef) -> Result<Option<Vec<String>>, Refusal> {
        Ok(self.volumes.get(reference.as_str()).cloned())
    }
    fn env_file(&self, name: &crate::vocab::EnvFileName) -> Result<crate::vocab::EnvFileUse, Refusal> {
        match &self.env_sha256 {
            Some(sha256) => {
                Ok(crate::vocab::EnvFileUse { path: name.policy_path().into(), hmac_sha256: sha256.clone() })
            }
            None => refuse(Code::EnvFileInvalid, "The env file has mode 0644; nothing was changed."),
        }
    }
    fn image_holds(&self, image: &ImageId) -> Result<Option<ImageHolds>, Refusal> {
        Ok(self
            .holds
            .get(image)
            .cloned()
            .unwrap_or(Some(ImageHolds { references_removable: true, ..ImageHolds::default() })))
    }
}

fn id(c: char) -> ContainerId {
    ContainerId::parse(&c.to_string().repeat(64)).unwrap()
}
fn image(c: char) -> ImageId {
    ImageId::parse(&format!("sha256:{}", c.to_string().repeat(64))).unwrap()
}

fn container(idc: char, name: &str, app: Option<&str>, state: &str, port: Option<u16>) -> Container {
    let mut labels = BTreeMap::new();
    if let Some(app) = app {
        labels.insert(LABEL_APP.to_owned(), app.to_owned());
    }
    Container {
        id: id(idc),
        name: name.into(),
        image_id: image('9'),
        state: state.into(),
        labels,
        ports: port
            .map(|p| {
                vec![PublishedPort {
                    host_ip: "0.0.0.0".into(),
                    host_port: p,
                    container_port: 80,
                    protocol: "tcp".into(),
                }]
            })
            .unwrap_or_default(),
    }
}

/// An unmanaged production container on port 80 and one image in use.
fn base_snapshot() -> Snapshot {
    Snapshot {
        containers: vec![container('0', "prod", None, "running", Some(80))],
        images: vec![image('9'), image('c')],
        networks: vec![],
    }
}

fn record(app: &str, port: u16, state: AppState) -> AppRecord {
    AppRecord {
        accessories: Vec::new(),
        app: AppName::parse(app).unwrap(),
        state,
        host_port: port,
        container_port: 8080,
        server_name: ServerName::parse("demo.example.com").unwrap(),
        also_server_names: vec![],
        image_key: "web".into(),
        app_image: ImageRef::parse(&format!("old.example/web@sha256:{}", "1".repeat(64))).unwrap(),
        gateway_image: ImageRef::parse(&format!("old.example/gateway@sha256:{}", "2".repeat(64))).unwrap(),
        nginx_config: crate::nginx::render("demo.example.com", 8080, crate::nginx::AccessLog::Off),
        app_dir: format!("/state/apps/{app}").into(),
        containers: vec![id('a'), id('b')],
        app_container: Some(id('a')),
        gateway_container: Some(id('b')),
        plan_id: PlanId::parse(&"0".repeat(32)).unwrap(),
        image_ids: vec![],
        upstream: None,
        image_history: vec![],
        configuration: None,
        kept_versions: vec![],
        health_path: None,
        data: None,
        exposed: None,
    }
}

/// The snapshot with `demo` deployed (containers a and b).
fn deployed_snapshot() -> Snapshot {
    let mut snapshot = base_snapshot();
    snapshot.containers.push(container('a', "vl-demo-app", Some("demo"), "running", None));
    snapshot.containers.push(container('b', "vl-demo-gateway", Some("demo"), "running", Some(18001)));
    snapshot.networks.push("vl-demo".into());
    snapshot
}

struct World {
    policy: crate::control::policy::Policy,
    snapshot: Snapshot,
    apps: BTreeMap<String, AppRecord>,
    retired: BTreeMap<ImageId, String>,
    probe: FakeProbe,
    plan_id: PlanId,
}

impl World {
    fn empty() -> World {
        World {
            policy: sample_policy(),
            snapshot: base_snapshot(),
            apps: BTreeMap::new(),
            retired: BTreeMap::new(),
            probe: FakeProbe::default(),
            plan_id: PlanId::parse(&"f".repeat(32)).unwrap(),
        }
    }
    fn with_demo() -> World {
        let mut world = World::empty();
        world.snapshot = deployed_snapshot();
        world.apps.insert("demo".into(), record("demo", 18001, AppState::Running));
        world
    }
    fn derive(&self, action: Action, params: Value) -> Result<(Payload, Impact), Refusal> {
        let ctx = Context {
            policy: &self.policy,
            snapshot: &self.snapshot,
            apps: &self.apps,
            retired: &self.retired,
            apps_dir: Path::new("/state/apps"),
            data_dir: Path::new("/state/data"),
            plan_id: &self.plan_id,
        };
        derive(action, &params, &ctx, &self.probe)
    }
    fn code(&self, action: Action, params: Value) -> Code {
        self.derive(action, params.clone()).expect_err(&format!("{params} must be refused")).code
    }
}

#[test]
fn app_state_strings_are_the_shipped_ones_and_serde_agrees() {
    use strum::VariantArray as _;
    let strings: Vec<&str> = AppState::VARIANTS.iter().map(|s| s.as_str()).collect();
    assert_eq!(strings, ["running", "stopped", "needs_inspection"]);
    for &state in AppState::VARIANTS {
        assert_eq!(serde_json::to_value(state).unwrap(), state.as_str());
        assert_eq!(serde_json::from_value::<AppState>(state.as_str().into()).unwrap(), state);
    }
}

fn deploy_params() -> Value {
    json!({"app": "web1", "image": "web", "host_port": 18002, "container_port": 8080, "server_name": "web1.example.com"})
}

fn patched(patch: &[(&str, Value)]) -> Value {
    let mut params = deploy_params();
    for (key, value) in patch {
        params[*key] = value.clone();
    }
    params
}

#[test]
fn deploy_with_valid_parameters_derives_pinned_images_config_and_specs() {
    let world = World::empty();
    let (payload, impact) = world.derive(Action::Deploy, deploy_params()).unwrap();
    let Payload::Deploy(Deploy { image_key, network, containers, spec }) = payload else {
        panic!("deploy payload")
    };
    assert_eq!(image_key, "web");
    assert_eq!(network, "vl-web1");
    assert_eq!(spec.app_image, world.policy.catalog["web"].image);
    assert_eq!(spec.gateway_image, world.policy.nginx_image);
    assert_eq!(
        spec.nginx_config,
        crate::nginx::render("web1.example.com", 8080, crate::nginx::AccessLog::Off)
    );
    assert_eq!(spec.app_dir, Path::new("/state/apps/web1"));
    assert_eq!(spec.plan_id, world.plan_id);
    assert_eq!(containers[0].name, "vl-web1-app");
    assert_eq!(containers[0].publish, None);
    assert_eq!(containers[1].publish.as_deref(), Some("127.0.0.1:18002:8080"));
    assert_eq!(containers[1].labels[LABEL_PLAN], world.plan_id.as_str());
    assert!(!impact.data_volumes_deleted && !impact.shared_nginx_changed);
    assert!(world.probe.asked_capacity.get());
}

#[test]
fn the_policys_gateway_access_log_reaches_the_configs_that_deploy_and_nginx_config_render() {
    // Tried: a deploy and an nginx_config of the demo app, under a policy
    // with gateway_access_log on.
    let mut world = World::empty();
    world.policy.gateway_access_log = true;
    let (payload, _) = world.derive(Action::Deploy, deploy_params()).unwrap();
    let Payload::Deploy(Deploy { spec, .. }) = payload else { panic!("deploy payload") };
    let on = crate::nginx::AccessLog::Stdout;
    assert_eq!(spec.nginx_config, crate::nginx::render("web1.example.com", 8080, on));
    let mut world = World::with_demo();
    world.policy.gateway_access_log = true;
    let params = json!({"app": "demo", "server_name": "new.example.com"});
    let (payload, _) = world.derive(Action::NginxConfig, params).unwrap();
    let Payload::NginxConfig(NginxConfig { new_config, .. }) = payload else {
        panic!("nginx_config payload")
    };
    assert!(new_config.contains("access_log /dev/stdout combined;"), "{new_config}");
}

#[test]
fn parameters_must_be_an_object() {
    assert_eq!(World::empty().code(Action::Deploy, json!(["app"])), Code::InvalidParameters);
}

#[test]
fn unknown_deploy_parameters_are_refused() {
    for key in ["command", "compose", "volumes", "network_mode", "nginx_config", "approved", "privileged"] {
        assert_eq!(
            World::empty().code(Action::Deploy, patched(&[(key, json!("x"))])),
            Code::InvalidParameters
        );
    }
}

#[test]
fn missing_deploy_parameters_are_refused() {
    let mut params = deploy_params();
    params.as_object_mut().unwrap().remove("server_name");
    assert_eq!(World::empty().code(Action::Deploy, params), Code::InvalidParameters);
}

#[test]
fn deploy_app_name_must_match_the_pattern() {
    for bad in
        [json!("../production"), json!("Web"), json!("1web"), json!(""), json!(5), json!("a".repeat(32))]
    {
        let code = World::empty().code(Action::Deploy, patched(&[("app", bad.clone())]));
        assert!(matches!(code, Code::InvalidAppName | Code::InvalidParameters), "{bad}: {code}");
    }
}

#[test]
fn deploy_image_must_be_a_catalog_key_not_a_reference() {
    for bad in [
        json!("nginx:latest"),
        json!(format!("127.0.0.1:15000/volce-lab/web@sha256:{}", "a".repeat(64))),
        json!("other"),
    ] {
        assert_eq!(World::empty().code(Action::Deploy, patched(&[("image", bad)])), Code::ImageNotInCatalog);
    }
}

fn refusal(world: &World, params: Value) -> Refusal {
    world.derive(Action::Deploy, params.clone()).expect_err(&format!("{params} must be refused"))
}

#[test]
fn image_not_in_catalog_names_the_offered_keys_and_never_the_agents_text() {
    // Tried: an image reference where a key belongs, with a terminal escape in it.
    let refused = refusal(&World::empty(), patched(&[("image", json!("nginx:latest\u{1b}[2J"))]));
    assert_eq!(refused.code, Code::ImageNotInCatalog);
    assert_eq!(
        refused.message,
        "image must be a key of the operator's catalog, not an image reference; the catalog offers `web`."
    );
    // Tried: an unknown key against a catalog of nine keys: six are named, the rest counted.
    let mut world = World::empty();
    let pinned = world.policy.catalog["web"].clone();
    for key in ["api", "batch", "cache", "docs", "edge", "feed", "gate", "hub"] {
        world.policy.catalog.insert(key.into(), pinned.clone());
    }
    let refused = refusal(&world, patched(&[("image", json!("other"))]));
    assert_eq!(refused.code, Code::ImageNotInCatalog);
    assert_eq!(
        refused.message,
        "image must be a key of the operator's catalog, not an image reference; the catalog offers `api`, \
         `batch`, `cache`, `docs`, `edge`, `feed` and 3 more."
    );
    assert!(refused.message.chars().count() < 300, "the agent sees it whole");
}

#[test]
fn ports_must_be_integers_not_booleans_or_floats_or_strings() {
    for key in ["host_port", "container_port"] {
        for bad in [json!(true), json!(false), json!(18002.0), json!("18002"), json!(null), json!(-1)] {
            assert_eq!(World::empty().code(Action::Deploy, patched(&[(key, bad)])), Code::InvalidPort);
        }
    }
}

#[test]
fn ports_must_be_between_1024_and_65535() {
    assert_eq!(
        World::empty().code(Action::Deploy, patched(&[("container_port", json!(80))])),
        Code::InvalidPort
    );
    assert_eq!(
        World::empty().code(Action::Deploy, patched(&[("container_port", json!(65536))])),
        Code::InvalidPort
    );
    assert_eq!(
        World::empty().code(Action::Deploy, patched(&[("host_port", json!(1023))])),
        Code::InvalidPort
    );
    assert!(World::empty().derive(Action::Deploy, patched(&[("container_port", json!(1024))])).is_ok());
}

#[test]
fn host_port_must_be_inside_the_policy_range() {
    assert_eq!(
        World::empty().code(Action::Deploy, patched(&[("host_port", json!(19000))])),
        Code::PortOutOfRange
    );
    assert_eq!(
        World::empty().code(Action::Deploy, patched(&[("host_port", json!(17999))])),
        Code::PortOutOfRange
    );
    // Tried: 19000, one past the sample policy's range: the sentence gives the range in words.
    let refused = refusal(&World::empty(), patched(&[("host_port", json!(19000))]));
    assert_eq!(refused.code, Code::PortOutOfRange);
    assert_eq!(refused.message, "host_port must be between 18000 and 18999, the operator's port range.");
}

#[test]
fn host_port_must_be_free_on_loopback() {
    let mut world = World::empty();
    world.probe.port_free = false;
    assert_eq!(world.code(Action::Deploy, deploy_params()), Code::PortInUse);
}

#[test]
fn host_port_must_not_be_published_by_any_container() {
    let mut world = World::empty();
    world.snapshot.containers.push(container('7', "someone-else", None, "exited", Some(18002)));
    assert_eq!(world.code(Action::Deploy, deploy_params()), Code::PortPublished);
    // Tried: 18002, published by a stopped foreign container: the fix is another port.
    let refused = refusal(&world, deploy_params());
    assert_eq!(
        refused.message,
        "A container already publishes port 18002: choose another host_port between 18000 and 18999."
    );
}

#[test]
fn host_port_must_not_be_reserved_by_another_app() {
    let mut world = World::empty();
    world.apps.insert("old".into(), record("old", 18002, AppState::Stopped));
    assert_eq!(world.code(Action::Deploy, deploy_params()), Code::PortReserved);
}

#[test]
fn server_name_must_be_a_lowercase_dns_name() {
    for bad in [
        "x; include /etc/*;",
        "Demo.example.com",
        "demo example.com",
        "demo.example.com{",
        "demo\"x",
        "demo'x",
        "-demo.com",
        "demo..com",
        "demo.com.",
        "",
        "a\u{202e}b",
    ] {
        assert_eq!(
            World::empty().code(Action::Deploy, patched(&[("server_name", json!(bad))])),
            Code::InvalidServerName,
            "{bad:?}"
        );
    }
    assert!(is_server_name("localhost"));
    assert!(is_server_name("a-b.c1.example"));
    assert!(!is_server_name(&format!("{}.com", "a".repeat(64))));
}

#[test]
fn deploy_refuses_an_existing_app_record() {
    let world = World::with_demo();
    assert_eq!(
        world.code(Action::Deploy, patched(&[("app", json!("demo")), ("host_port", json!(18005))])),
        Code::AppExists
    );
    // Tried: deploying `demo` again while it is recorded: remove_app frees the name.
    let refused = refusal(&world, patched(&[("app", json!("demo")), ("host_port", json!(18005))]));
    assert_eq!(
        refused.message,
        "The app demo already exists: choose another name, or free this one with a remove_app plan for demo \
         that the operator approves."
    );
}

#[test]
fn deploy_refuses_an_existing_directory() {
    let mut world = World::empty();
    world.probe.dir_exists = true;
    assert_eq!(world.code(Action::Deploy, deploy_params()), Code::AppExists);
    // Tried: web1 with a leftover directory and no record: remove_app cannot help, another name can.
    assert_eq!(
        refusal(&world, deploy_params()).message,
        "A directory for web1 already exists on the host but volce-lab has no record of it: choose another \
         name (only an operator can remove that directory)."
    );
}

#[test]
fn deploy_refuses_existing_vl_resources() {
    let mut world = World::empty();
    world.snapshot.containers.push(container('5', "vl-web1-app", None, "exited", None));
    assert_eq!(world.code(Action::Deploy, deploy_params()), Code::AppExists);
    assert_eq!(
        refusal(&world, deploy_params()).message,
        "Docker already has containers or a network for web1 that volce-lab did not record: choose another \
         name (only an operator can remove them)."
    );
    let mut world = World::empty();
    world.snapshot.containers.push(container('5', "unrelated", Some("web1"), "exited", None));
    assert_eq!(world.code(Action::Deploy, deploy_params()), Code::AppExists);
    let mut world = World::empty();
    world.snapshot.networks.push("vl-web1".into());
    assert_eq!(world.code(Action::Deploy, deploy_params()), Code::AppExists);
    let mut world = World::empty();
    world.snapshot.networks.push("vl-web1_edge".into());
    assert_eq!(world.code(Action::Deploy, deploy_params()), Code::AppExists);
    let mut world = World::empty();
    world.snapshot.containers.push(container('5', "vl-web1-check", None, "exited", None));
    assert_eq!(world.code(Action::Deploy, deploy_params()), Code::AppExists);
    // Another app's names are no obstacle.
    let mut world = World::empty();
    world.snapshot.networks.push("vl-web10".into());
    world.snapshot.containers.push(container('5', "vl-web1-app-x", None, "exited", None));
    assert!(world.derive(Action::Deploy, deploy_params()).is_ok());
}

#[test]
fn deploy_enforces_the_app_quota() {
    let mut world = World::empty();
    for (i, app) in ["a", "b", "c", "d"].iter().enumerate() {
        world.apps.insert((*app).into(), record(app, 18100 + i as u16, AppState::Stopped));
    }
    assert_eq!(world.code(Action::Deploy, deploy_params()), Code::AppQuotaReached);
    // Tried: a fifth app under max_apps 4: remove_app or a higher max_apps frees a slot.
    assert_eq!(
        refusal(&world, deploy_params()).message,
        "The operator allows at most 4 apps (the policy's max_apps) and all are taken: a remove_app plan the \
         operator approves frees a slot, or the operator raises max_apps."
    );
}

#[test]
fn deploy_enforces_the_memory_floor() {
    let mut world = World::empty();
    world.probe.capacity.free_memory_bytes = 1535 * MIB;
    assert_eq!(world.code(Action::Deploy, deploy_params()), Code::InsufficientCapacity);
}

#[test]
fn deploy_enforces_the_disk_floor() {
    let mut world = World::empty();
    world.probe.capacity.free_disk_bytes = 3071 * MIB;
    assert_eq!(world.code(Action::Deploy, deploy_params()), Code::InsufficientCapacity);
}

#[test]
fn deploy_refuses_a_catalog_image_that_declares_volumes() {
    let mut world = World::empty();
    let reference = world.policy.catalog["web"].image.as_str().to_owned();
    world.probe.volumes.insert(reference, vec!["/data".into(), "/var/cache/x".into()]);
    let refusal = world.derive(Action::Deploy, deploy_params()).unwrap_err();
    assert_eq!(refusal.code, Code::ImageDeclaresVolumes);
    assert!(
        refusal.message.contains("`web`") && refusal.message.contains("/data, /var/cache/x"),
        "{refusal:?}"
    );
    assert!(refusal.message.contains("rebuild the image without VOLUME"), "{refusal:?}");
}

#[test]
fn deploy_refuses_a_gateway_image_that_declares_volumes() {
    let mut world = World::empty();
    let reference = world.policy.nginx_image.as_str().to_owned();
    world.probe.volumes.insert(reference, vec!["/var/log/nginx".into()]);
    let refusal = world.derive(Action::Deploy, deploy_params()).unwrap_err();
    assert_eq!(refusal.code, Code::ImageDeclaresVolumes);
    assert!(refusal.message.contains("gateway image"), "{refusal:?}");
}

#[test]
fn deploy_of_images_without_volumes_or_not_yet_pulled_is_not_refused_for_volumes() {
    let mut world = World::empty();
    let reference = world.policy.catalog["web"].image.as_str().to_owned();
    // The app image is local and declares none; the gateway image is not
    // local yet (the deploy checks it after its pull).
    world.probe.volumes.insert(reference, vec![]);
    assert!(world.derive(Action::Deploy, deploy_params()).is_ok());
}

#[test]
fn nginx_config_of_a_running_owned_app_is_derived() {
    let world = World::with_demo();
    let (payload, _) =
        world.derive(Action::NginxConfig, json!({"app": "demo", "server_name": "new.example.com"})).unwrap();
    let Payload::NginxConfig(NginxConfig { gateway, new_config, previous_config, .. }) = payload else {
        panic!()
    };
    assert_eq!(gateway, id('b'));
    assert_eq!(new_config, crate::nginx::render("new.example.com", 8080, crate::nginx::AccessLog::Off));
    assert_eq!(previous_config, crate::nginx::render("demo.example.com", 8080, crate::nginx::AccessLog::Off));
}

#[test]
fn nginx_config_takes_exactly_app_and_server_name() {
    let world = World::with_demo();
    assert_eq!(world.code(Action::NginxConfig, json!({"app": "demo"})), Code::InvalidParameters);
    assert_eq!(
        world.code(Action::NginxConfig, json!({"app": "demo", "server_name": "a.b", "nginx_config": "x"})),
        Code::InvalidParameters
    );
    assert_eq!(
        world.code(Action::NginxConfig, json!({"app": "demo", "server_name": "a b"})),
        Code::InvalidServerName
    );
}

#[test]
fn nginx_config_refuses_an_app_we_do_not_own() {
    let world = World::with_demo();
    assert_eq!(
        world.code(Action::NginxConfig, json!({"app": "prod", "server_name": "a.b"})),
        Code::AppNotFound
    );
}

#[test]
fn nginx_config_refuses_an_app_that_is_not_running() {
    let mut world = World::with_demo();
    world.apps.get_mut("demo").unwrap().state = AppState::Stopped;
    assert_eq!(
        world.code(Action::NginxConfig, json!({"app": "demo", "server_name": "a.b"})),
        Code::AppNotRunning
    );
}

#[test]
fn nginx_config_refuses_a_changed_container_set() {
    let mut world = World::with_demo();
    world.snapshot.containers.push(container('e', "intruder", Some("demo"), "running", None));
    assert_eq!(
        world.code(Action::NginxConfig, json!({"app": "demo", "server_name": "a.b"})),
        Code::ContainerSetChanged
    );
    let mut world = World::with_demo();
    world.snapshot.containers.retain(|c| c.id != id('a'));
    assert_eq!(
        world.code(Action::NginxConfig, json!({"app": "demo", "server_name": "a.b"})),
        Code::ContainerSetChanged
    );
}

#[test]
fn stop_of_a_running_owned_app_names_exactly_its_recorded_containers() {
    let world = World::with_demo();
    let (payload, impact) = world.derive(Action::Stop, json!({"app": "demo"})).unwrap();
    assert_eq!(
        payload,
        Payload::Stop(Stop {
            app: AppName::parse("demo").unwrap(),
            containers: vec![id('a'), id('b')],
            container_names: vec!["vl-demo-app".into(), "vl-demo-gateway".into()],
        })
    );
    assert!(!impact.containers_touched.iter().any(|c| c.contains("prod")));
}

#[test]
fn stop_refuses_an_unmanaged_container() {
    let world = World::with_demo();
    assert_eq!(world.code(Action::Stop, json!({"app": "prod"})), Code::AppNotFound);
}

#[test]
fn stop_refuses_an_app_that_is_not_running() {
    // Tried: an app that needs inspection, then one whose containers all exited.
    let mut world = World::with_demo();
    world.apps.get_mut("demo").unwrap().state = AppState::NeedsInspection;
    assert_eq!(world.code(Action::Stop, json!({"app": "demo"})), Code::AppNotRunning);
    let mut world = World::with_demo();
    for c in &mut world.snapshot.containers {
        if c.app() == Some("demo") {
            c.state = "exited".into();
        }
    }
    assert_eq!(world.code(Action::Stop, json!({"app": "demo"})), Code::AppNotRunning);
}

#[test]
fn stop_takes_exactly_app() {
    let world = World::with_demo();
    assert_eq!(world.code(Action::Stop, json!({"app": "demo", "force": true})), Code::InvalidParameters);
    assert_eq!(world.code(Action::Stop, json!({})), Code::InvalidParameters);
}

/// A world where the stopped app `old`, whose containers are gone, ran image c.
fn with_claim_on_c() -> World {
    let mut world = World::empty();
    let mut old = record("old", 18003, AppState::Stopped);
    old.containers.clear();
    old.image_ids = vec![image('c')];
    world.apps.insert("old".into(), old);
    world
}

#[test]
fn remove_image_of_an_unused_image_we_deployed_is_derived() {
    let world = with_claim_on_c();
    let (payload, impact) =
        world.derive(Action::RemoveImage, json!({"image_id": image('c').as_str()})).unwrap();
    assert_eq!(
        payload,
        Payload::RemoveImage(RemoveImage { image_id: image('c'), used_by: vec!["old".into()] })
    );
    assert!(impact.target.contains("used by app old"), "{}", impact.target);
}

#[test]
fn remove_image_of_an_image_no_app_of_ours_used_is_refused() {
    // Unused, present, but nobody's claim: an unrelated image on the host.
    let code = World::empty().code(Action::RemoveImage, json!({"image_id": image('c').as_str()}));
    assert_eq!(code, Code::ImageNotManaged);
    // Another app's claim on a different image does not count.
    let mut world = with_claim_on_c();
    world.snapshot.images.push(image('d'));
    assert_eq!(
        world.code(Action::RemoveImage, json!({"image_id": image('d').as_str()})),
        Code::ImageNotManaged
    );
}

#[test]
fn remove_image_needs_a_full_id() {
    for bad in
        [json!("c".repeat(64)), json!("sha256:cccc"), json!(format!("sha256:{}", "C".repeat(64))), json!(7)]
    {
        let code = World::empty().code(Action::RemoveImage, json!({ "image_id": bad }));
        assert!(matches!(code, Code::InvalidImageId | Code::InvalidParameters), "{code}");
    }
}

#[test]
fn remove_image_needs_an_existing_image() {
    assert_eq!(
        World::empty().code(Action::RemoveImage, json!({"image_id": image('d').as_str()})),
        Code::ImageNotFound
    );
}

#[test]
fn remove_image_refuses_an_image_used_by_a_running_or_stopped_container() {
    for state in ["running", "exited", "created"] {
        let mut world = with_claim_on_c();
        world.apps.get_mut("old").unwrap().image_ids.push(image('9'));
        world.snapshot.containers[0].state = state.into();
        assert_eq!(
            world.code(Action::RemoveImage, json!({"image_id": image('9').as_str()})),
            Code::ImageInUse
        );
    }
}

#[test]
fn remove_image_refuses_an_image_other_images_are_built_on_naming_count_and_id() {
    let mut world = with_claim_on_c();
    let holds = ImageHolds {
        children: vec![image('e'), image('f')],
        references_removable: true,
        ..Default::default()
    };
    world.probe.holds.insert(image('c'), Some(holds));
    let refusal = world.derive(Action::RemoveImage, json!({"image_id": image('c').as_str()})).unwrap_err();
    assert_eq!(refusal.code, Code::ImageHasChildren);
    assert!(refusal.message.contains("2 other local image(s)"), "{}", refusal.message);
    assert!(refusal.message.contains(image('e').as_str()), "{}", refusal.message);
    assert!(refusal.message.contains("nothing was changed"), "{}", refusal.message);
}

#[test]
fn remove_image_refuses_references_docker_does_not_drop_by_id() {
    let mut world = with_claim_on_c();
    let holds = ImageHolds { tags: 2, digests: 1, references_removable: false, ..Default::default() };
    world.probe.holds.insert(image('c'), Some(holds));
    let refusal = world.derive(Action::RemoveImage, json!({"image_id": image('c').as_str()})).unwrap_err();
    assert_eq!(refusal.code, Code::ImageHasReferences);
    assert!(refusal.message.contains("2 tag(s) and 1 digest reference(s)"), "{}", refusal.message);
}

#[test]
fn remove_image_of_an_image_gone_since_the_snapshot_is_not_found() {
    let mut world = with_claim_on_c();
    world.probe.holds.insert(image('c'), None);
    assert_eq!(
        world.code(Action::RemoveImage, json!({"image_id": image('c').as_str()})),
        Code::ImageNotFound
    );
}

#[test]
fn remove_image_takes_exactly_image_id() {
    let code =
        World::empty().code(Action::RemoveImage, json!({"image_id": image('c').as_str(), "force": true}));
    assert_eq!(code, Code::InvalidParameters);
}

/// Plans sealed by the code before the validated newtypes (issue 10), byte
/// for byte as the store keeps them.
const GOLDEN: [(Action, &str); 3] = [
    (Action::Deploy, include_str!("golden/deploy.json")),
    (Action::NginxConfig, include_str!("golden/nginx_config.json")),
    (Action::Stop, include_str!("golden/stop.json")),
];

#[test]
fn plans_sealed_before_the_newtypes_still_verify_and_derive_byte_identically() {
    use crate::actions::plan::Plan;
    let id = PlanId::parse(&"7".repeat(32)).unwrap();
    for (action, golden) in GOLDEN {
        let stored = Plan::from_stored(golden).expect("a stored plan still parses and matches its digest");
        assert_eq!(stored.action, action);
        assert_eq!(stored.compute_digest(), stored.digest);
        assert_eq!(stored.canonical_json(), golden, "re-serialized byte for byte");

        // The same request in the same world derives the same sealed bytes.
        let mut world = if action == Action::Deploy { World::empty() } else { World::with_demo() };
        world.plan_id = id.clone();
        let (payload, impact) = world.derive(action, stored.parameters.clone()).unwrap();
        let again = Plan::seal(
            id.clone(),
            stored.parameters.clone(),
            payload,
            impact,
            "d".repeat(64),
            world.policy.terms(action, &world.policy.hash()),
            "agent".into(),
            1_800_000_000,
        );
        if matches!(action, Action::Deploy | Action::Stop) {
            // Issue 11 reworded deploy's rollback promise (a verified
            // rollback now removes the app directory too) and stop's (it
            // names the start plan that undoes it); everything else
            // derives as it was sealed. An old pending deploy plan is then
            // refused at execute as changed, which is the safe side.
            assert_eq!(again.payload, stored.payload);
            let mut impact = again.impact.clone();
            impact.rollback = stored.impact.rollback.clone();
            assert_eq!(impact, stored.impact);
            let promise = if action == Action::Deploy { "verified" } else { "start plan" };
            assert!(again.impact.rollback.contains(promise), "{}", again.impact.rollback);
        } else {
            assert_eq!(again.canonical_json(), golden, "{action:?}");
        }
    }
}

#[test]
fn a_stored_plan_with_a_bad_name_is_corrupt_even_with_a_matching_digest() {
    // Rewrite a golden plan's app name and re-seal it by hand: the digest
    // matches, but deserializing validates the name, so it is never trusted.
    for (_, golden) in GOLDEN {
        let mut value: Value = serde_json::from_str(golden).unwrap();
        let payload = &mut value["payload"];
        let app =
            if payload.get("spec").is_some() { &mut payload["spec"]["app"] } else { &mut payload["app"] };
        *app = json!("Demo; rm");
        value.as_object_mut().unwrap().remove("digest");
        let digest = crate::control::canonical::sha256_hex(&value).unwrap();
        value["digest"] = json!(digest);
        let body = crate::control::canonical::to_string(&value).unwrap();
        let refusal = crate::actions::plan::Plan::from_stored(&body).unwrap_err();
        assert_eq!(refusal.code, Code::PlanCorrupt);
    }
}

/// A world whose `web` entry is an object: port 3000, checked at `/healthz`.
fn world_with_catalog_port() -> World {
    let mut world = World::empty();
    let entry = world.policy.catalog.get_mut("web").unwrap();
    entry.container_port = Some(3000);
    entry.health_path = crate::vocab::HealthPath::parse("/healthz").unwrap();
    world
}

#[test]
fn a_catalog_port_is_used_when_the_agent_leaves_container_port_out() {
    let world = world_with_catalog_port();
    let mut params = deploy_params();
    params.as_object_mut().unwrap().remove("container_port");
    let (payload, _) = world.derive(Action::Deploy, params).unwrap();
    let Payload::Deploy(Deploy { spec, .. }) = payload else { panic!("deploy payload") };
    assert_eq!(spec.container_port, 3000);
    assert_eq!(spec.health_path.as_str(), "/healthz");
    assert_eq!(
        spec.nginx_config,
        crate::nginx::render("web1.example.com", 3000, crate::nginx::AccessLog::Off)
    );
    // The same port given explicitly is accepted too.
    let (payload, _) = world.derive(Action::Deploy, patched(&[("container_port", json!(3000))])).unwrap();
    let Payload::Deploy(Deploy { spec, .. }) = payload else { panic!("deploy payload") };
    assert_eq!(spec.container_port, 3000);
}

#[test]
fn an_agent_port_that_differs_from_the_catalogs_is_refused_naming_the_right_one() {
    let world = world_with_catalog_port();
    let refused = refusal(&world, patched(&[("container_port", json!(8080))]));
    assert_eq!(refused.code, Code::ContainerPortMismatch);
    assert_eq!(
        refused.message,
        "The catalog entry `web` listens on container_port 3000, not 8080: plan again with 3000, or leave \
         container_port out."
    );
}

#[test]
fn a_bare_entry_still_needs_the_agents_port_and_checks_the_root() {
    let world = World::empty();
    let mut params = deploy_params();
    params.as_object_mut().unwrap().remove("container_port");
    let refused = refusal(&world, params);
    assert_eq!(refused.code, Code::InvalidParameters);
    assert!(refused.message.contains("deploy needs container_port"), "{}", refused.message);
    let (payload, _) = world.derive(Action::Deploy, deploy_params()).unwrap();
    let Payload::Deploy(Deploy { spec, .. }) = payload else { panic!("deploy payload") };
    assert!(spec.health_path.is_root());
    // The sealed spec of a bare entry has no health_path key: the bytes of
    // a plan are what they were before health paths existed.
    assert!(serde_json::to_value(&spec).unwrap().get("health_path").is_none());
}

/// Tried: a deploy of an entry with an env file: the plan records the
/// file's path and hash (never a value), and the gateway gets nothing.
#[test]
fn a_deploy_of_an_entry_with_configuration_records_the_files_hash() {
    let mut world = World::empty();
    world.policy.catalog.get_mut("web").unwrap().env_file = crate::vocab::EnvFileName::parse("web.env");
    let (payload, _) = world.derive(Action::Deploy, deploy_params()).unwrap();
    let Payload::Deploy(Deploy { spec, .. }) = payload else { panic!("deploy payload") };
    let used = spec.env_file.expect("the plan records the env file");
    assert_eq!(used.path, Path::new("/etc/volce-lab/apps/web.env"));
    assert_eq!(used.hmac_sha256, "e".repeat(64));
    // An entry without one records nothing (and hashes as before).
    let (payload, _) = World::empty().derive(Action::Deploy, deploy_params()).unwrap();
    let Payload::Deploy(Deploy { spec, .. }) = payload else { panic!("deploy payload") };
    assert!(spec.env_file.is_none());
}

/// Tried: the env file refused by its checks: the deploy is refused with
/// `env_file_invalid`, nothing derived.
#[test]
fn a_deploy_whose_env_file_is_refused_is_refused() {
    let mut world = World::empty();
    world.policy.catalog.get_mut("web").unwrap().env_file = crate::vocab::EnvFileName::parse("web.env");
    world.probe.env_sha256 = None;
    assert_eq!(world.code(Action::Deploy, deploy_params()), Code::EnvFileInvalid);
}

/// Tried: a rollback of an app whose catalog entry names an env file, to a
/// kept version of that key and to one whose key the catalog no longer
/// has: the new container gets the env file as it is now (the kept key's,
/// else the running key's), since no version keeps configuration, and
/// the plan says so.
#[test]
fn a_rollback_gets_the_configuration_the_catalog_names_now() {
    use crate::control::app_record::KeptVersion;
    let mut world = World::with_demo();
    world.policy.catalog.get_mut("web").unwrap().env_file = crate::vocab::EnvFileName::parse("web.env");
    let kept = |key: &str| KeptVersion {
        image_key: key.into(),
        app_image: ImageRef::parse(&format!("old.example/web@sha256:{}", "9".repeat(64))).unwrap(),
        image_id: None,
        container_port: 8080,
        health_path: Default::default(),
    };
    for key in ["web", "gone"] {
        world.apps.get_mut("demo").unwrap().kept_versions = vec![kept(key)];
        let (payload, impact) = world.derive(Action::Rollback, json!({"app": "demo"})).unwrap();
        let Payload::Rollback(Rollback { spec, .. }) = payload else { panic!("rollback payload") };
        let used = spec.env_file.expect("the env file of the entry, as it is now");
        assert_eq!(used.path, Path::new("/etc/volce-lab/apps/web.env"), "{key}");
        assert!(impact.target.ends_with(", with the configuration of its env file as it is now"), "{key}");
    }
    // The env file refused by its checks: so is the rollback.
    world.probe.env_sha256 = None;
    assert_eq!(world.code(Action::Rollback, json!({"app": "demo"})), Code::EnvFileInvalid);
}

/// A world whose `web` entry has a data directory of 64 MiB at `/data`.
fn world_with_data() -> World {
    let mut world = World::empty();
    world.policy.catalog.get_mut("web").unwrap().data =
        Some(crate::vocab::DataSpec { path: crate::vocab::DataPath::parse("/data").unwrap(), max_mib: 64 });
    world
}

/// Data of `mib` kept at the app's image path, recorded as `entry`'s at `path`.
fn keep_data(world: &mut World, mib: u32, entry: &str, path: &str) {
    world.probe.kept_data_mib = Some(mib);
    world.probe.kept_for = Some(crate::vocab::KeptFor {
        entry: entry.into(),
        path: crate::vocab::DataPath::parse(path).unwrap(),
    });
}

/// Issue 38 (item 2): kept data followed the app's name, not the entry it
/// was made for. Tried: web1's data kept by a remove_app of web1 under
/// `web` (at /data), then a deploy of web1 under `static` (a file server
/// whose data is at /www): it re-attached the old app's files there, a
/// database among them, to be served. Fails on the code before (the
/// deploy was accepted, "kept from before ... re-attached at /www").
/// Also tried: the same entry at another path, and data kept with no
/// record (an earlier build): each refused `data_entry_mismatch`, naming
/// the entry it belongs to and `data purge`; the same entry and path is
/// accepted. Derive runs at prepare and again at execute, so a record
/// that changed between the two voids the plan the same way.
#[test]
fn kept_data_is_re_attached_only_under_the_entry_and_path_it_was_kept_for() {
    let mut world = world_with_data();
    let mut file_server = world.policy.catalog["web"].clone();
    file_server.data =
        Some(crate::vocab::DataSpec { path: crate::vocab::DataPath::parse("/www").unwrap(), max_mib: 64 });
    world.policy.catalog.insert("static".into(), file_server);
    keep_data(&mut world, 32, "web", "/data");
    let refused = refusal(&world, patched(&[("image", json!("static"))]));
    assert_eq!(refused.code, Code::DataEntryMismatch, "{}", refused.message);
    for named in ["belongs to catalog entry `web` at /data", "not to `static` at /www", "data purge web1"] {
        assert!(refused.message.contains(named), "{named}: {}", refused.message);
    }
    assert!(world.derive(Action::Deploy, deploy_params()).is_ok(), "its own entry re-attaches it");

    keep_data(&mut world, 32, "web", "/srv/old");
    assert_eq!(refusal(&world, deploy_params()).code, Code::DataEntryMismatch, "another path");
    world.probe.kept_for = None;
    let unrecorded = refusal(&world, deploy_params());
    assert_eq!(unrecorded.code, Code::DataEntryMismatch);
    assert!(unrecorded.message.contains("no record of the catalog entry"), "{}", unrecorded.message);
    assert!(unrecorded.message.contains("data purge web1"), "{}", unrecorded.message);
    // Nothing kept: new data under any entry, the record not asked for.
    world.probe.kept_data_mib = None;
    assert!(world.derive(Action::Deploy, patched(&[("image", json!("static"))])).is_ok());
}

/// Tried: a deploy of an entry with data and none kept (new, the entry's
/// size, under the state directory's data/), with data kept from before
/// (re-attached at the kept image's size, and the impact says so), and an
/// entry without data (nothing recorded: the plan's bytes are as before).
#[test]
fn a_deploy_of_an_entry_with_data_records_where_it_lives_and_whether_it_was_kept() {
    let mut world = world_with_data();
    let (payload, impact) = world.derive(Action::Deploy, deploy_params()).unwrap();
    let Payload::Deploy(Deploy { spec, .. }) = payload else { panic!("deploy payload") };
    let data = spec.data.expect("the plan records the data");
    assert_eq!(data.image, Path::new("/state/data/web1.ext4"));
    assert_eq!(data.mount, Path::new("/state/data/web1"));
    assert_eq!((data.path.as_str(), data.max_mib), ("/data", 64));
    assert!(
        impact
            .containers_touched
            .iter()
            .any(|t| t == "data /state/data/web1.ext4 (new, 64 MiB, mounted at /data)")
    );
    assert!(impact.rollback.contains("New data is deleted with the rest"), "{}", impact.rollback);

    keep_data(&mut world, 32, "web", "/data");
    let (payload, impact) = world.derive(Action::Deploy, deploy_params()).unwrap();
    let Payload::Deploy(Deploy { spec, .. }) = payload else { panic!("deploy payload") };
    assert_eq!(spec.data.unwrap().max_mib, 32, "a kept image keeps its size");
    assert!(
        impact
            .containers_touched
            .iter()
            .any(|t| t.contains("kept from before, 32 MiB: re-attached at /data"))
    );

    let (payload, _) = World::empty().derive(Action::Deploy, deploy_params()).unwrap();
    let Payload::Deploy(Deploy { spec, .. }) = payload else { panic!("deploy payload") };
    assert!(serde_json::to_value(&spec).unwrap().get("data").is_none());
}

/// Tried: new data that the free disk cannot cover on top of the floor is
/// refused `insufficient_capacity`, naming both figures; the same disk
/// suffices when the data is kept (it is on the disk already).
#[test]
fn new_data_is_counted_in_the_capacity_check() {
    let mut world = world_with_data();
    let floor = world.policy.capacity.min_free_disk_mib;
    world.probe.capacity.free_disk_bytes = (floor + 63) << 20;
    let refused = refusal(&world, deploy_params());
    assert_eq!(refused.code, Code::InsufficientCapacity);
    assert!(
        refused.message.contains(&format!("needs 64 MiB of disk on top of the {floor} MiB")),
        "{}",
        refused.message
    );
    keep_data(&mut world, 64, "web", "/data");
    assert!(world.derive(Action::Deploy, deploy_params()).is_ok());
}

/// Tried: an image declaring VOLUME /data (also written /data/) with data
/// at /data is accepted; one declaring /data and /cache is refused naming
/// /cache only; without data, /data is refused as before.
#[test]
fn a_volume_at_exactly_the_data_path_is_covered_and_others_are_still_refused() {
    let mut world = world_with_data();
    let web = world.policy.catalog["web"].image.as_str().to_owned();
    for declared in ["/data", "/data/"] {
        world.probe.volumes.insert(web.clone(), vec![declared.into()]);
        assert!(world.derive(Action::Deploy, deploy_params()).is_ok(), "{declared}");
    }
    world.probe.volumes.insert(web.clone(), vec!["/cache".into(), "/data".into()]);
    let refused = refusal(&world, deploy_params());
    assert_eq!(refused.code, Code::ImageDeclaresVolumes);
    assert!(
        refused.message.contains("VOLUME `/cache`") && !refused.message.contains("/data"),
        "{}",
        refused.message
    );
    let mut bare = World::empty();
    bare.probe.volumes.insert(web, vec!["/data".into()]);
    assert_eq!(bare.code(Action::Deploy, deploy_params()), Code::ImageDeclaresVolumes);
}

/// The data of the demo app: 64 MiB at /data, under /state/data.
fn demo_data() -> crate::vocab::DataUse {
    crate::vocab::DataUse {
        path: crate::vocab::DataPath::parse("/data").unwrap(),
        image: "/state/data/demo.ext4".into(),
        mount: "/state/data/demo".into(),
        max_mib: 64,
    }
}

/// Tried: remove_app of an app with data, with purge_data left out, false,
/// true, and a string: kept twice, deleted once (the impact says so), and
/// the string refused; purge_data on an app without data deletes nothing.
#[test]
fn remove_app_keeps_data_unless_purge_data_is_true() {
    let mut world = World::with_demo();
    let data = demo_data();
    world.apps.get_mut("demo").unwrap().data = Some(data.clone());
    for (params, purge) in [
        (json!({"app": "demo"}), false),
        (json!({"app": "demo", "purge_data": false}), false),
        (json!({"app": "demo", "purge_data": true}), true),
    ] {
        let (payload, impact) = world.derive(Action::RemoveApp, params.clone()).unwrap();
        let Payload::RemoveApp(RemoveApp { data: planned, purge_data, .. }) = payload else {
            panic!("remove_app payload")
        };
        assert_eq!(
            (planned.as_ref(), purge_data, impact.data_volumes_deleted),
            (Some(&data), purge, purge),
            "{params}"
        );
    }
    assert_eq!(
        world.code(Action::RemoveApp, json!({"app": "demo", "purge_data": "yes"})),
        Code::InvalidParameters
    );
    world.apps.get_mut("demo").unwrap().data = None;
    let (payload, impact) =
        world.derive(Action::RemoveApp, json!({"app": "demo", "purge_data": true})).unwrap();
    let Payload::RemoveApp(RemoveApp { purge_data, .. }) = payload else { panic!("remove_app payload") };
    assert!(!purge_data && !impact.data_volumes_deleted);
}

mod accessories;
mod backup;
mod edge;
mod scope;
mod server_names;

/// Tried: a restart and an update of an app with data, first with its
/// image gone (refused `data_not_found`), then there: each plan carries
/// the app's data (so the engine mounts it first) and its impact says so;
/// the same app without data carries none and says nothing of it.
#[test]
fn the_plans_that_start_an_apps_container_carry_its_data() {
    let mut world = World::with_demo();
    let data = demo_data();
    world.apps.get_mut("demo").unwrap().data = Some(data.clone());
    // Its image gone: refused, never replaced by an empty one.
    for (action, params) in
        [(Action::Restart, json!({"app": "demo"})), (Action::Update, json!({"app": "demo", "image": "web"}))]
    {
        let refused = world.derive(action, params).unwrap_err();
        assert_eq!(refused.code, Code::DataNotFound, "{action:?}");
        assert!(refused.message.contains("never replaces it with an empty one"), "{}", refused.message);
    }
    world.probe.kept_data_mib = Some(64);
    let line = "data /state/data/demo.ext4 (the app's, at /data: mounted first if it is not)";
    let (payload, impact) = world.derive(Action::Restart, json!({"app": "demo"})).unwrap();
    let Payload::Restart(Restart { spec, .. }) = payload else { panic!("restart payload") };
    assert_eq!(spec.data.as_ref(), Some(&data));
    assert!(impact.containers_touched.iter().any(|t| t == line), "{:?}", impact.containers_touched);
    let (payload, impact) = world.derive(Action::Update, json!({"app": "demo", "image": "web"})).unwrap();
    let Payload::Update(Update { spec, .. }) = payload else { panic!("update payload") };
    assert_eq!(spec.data.as_ref(), Some(&data));
    assert!(impact.containers_touched.iter().any(|t| t == line), "{:?}", impact.containers_touched);
    world.apps.get_mut("demo").unwrap().data = None;
    let (payload, impact) = world.derive(Action::Restart, json!({"app": "demo"})).unwrap();
    let Payload::Restart(Restart { spec, .. }) = payload else { panic!("restart payload") };
    assert!(spec.data.is_none() && !impact.containers_touched.iter().any(|t| t.starts_with("data ")));
}
