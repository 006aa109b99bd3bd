//! The scope of each action (`PlanAction::scope`): which changes of the
//! engine void a plan.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::actions::{Deploy, NginxConfig, Payload, RemoveImage, Restart, Stop};
use crate::control::scope;

/// The scoped digest of `payload`'s scope of `snapshot`.
fn digest(snapshot: &Snapshot, payload: &Payload) -> String {
    scope::digest(snapshot, &payload.scope())
}
use crate::vocab::{
    AppName, Container, ContainerId, ContainerLimits, DeploySpec, ImageId, ImageRef, LABEL_APP, LABEL_PLAN,
    LABEL_ROLE, PlanId, PublishedPort, ServerName, Snapshot,
};

fn id(c: char) -> ContainerId {
    ContainerId::parse(&c.to_string().repeat(64)).unwrap()
}
fn image(c: char) -> ImageId {
    ImageId::parse(&format!("sha256:{}", c.to_string().repeat(64))).unwrap()
}
fn port(host_port: u16) -> PublishedPort {
    PublishedPort { host_ip: "127.0.0.1".into(), host_port, container_port: 8080, protocol: "tcp".into() }
}

fn container(c: char, name: &str, app: Option<&str>, role: &str) -> Container {
    let labels = app
        .map(|app| {
            BTreeMap::from([
                (LABEL_APP.to_owned(), app.to_owned()),
                (LABEL_ROLE.to_owned(), role.to_owned()),
                (LABEL_PLAN.to_owned(), "1".repeat(32)),
            ])
        })
        .unwrap_or_default();
    Container {
        id: id(c),
        name: name.into(),
        image_id: image(c),
        state: "running".into(),
        labels,
        ports: vec![],
    }
}

/// Two apps of ours (shop: a, b; blog: c, d), a foreign `prod` (0) on port
/// 80 and a foreign `loop` (1), plus an unused image 9.
fn world() -> Snapshot {
    let mut gateway = container('b', "vl-shop-gateway", Some("shop"), "gateway");
    gateway.ports = vec![port(18001)];
    let mut prod = container('0', "prod", None, "");
    prod.ports = vec![port(80)];
    Snapshot {
        containers: vec![
            container('a', "vl-shop-app", Some("shop"), "app"),
            gateway,
            container('c', "vl-blog-app", Some("blog"), "app"),
            container('d', "vl-blog-gateway", Some("blog"), "gateway"),
            prod,
            container('1', "loop", None, ""),
        ],
        images: vec![image('a'), image('b'), image('0'), image('1'), image('9')],
        networks: vec!["vl-shop".into(), "vl-shop_edge".into()],
    }
    .normalize()
}

fn app(name: &str) -> AppName {
    AppName::parse(name).unwrap()
}

fn stop_shop() -> Payload {
    Payload::Stop(Stop { app: app("shop"), containers: vec![id('a'), id('b')], container_names: vec![] })
}

fn nginx_shop() -> Payload {
    Payload::NginxConfig(NginxConfig {
        app: app("shop"),
        gateway: id('b'),
        app_dir: PathBuf::from("/state/apps/shop"),
        previous_server_name: "shop.example".into(),
        previous_also_server_names: vec![],
        server_name: ServerName::parse("new.example").unwrap(),
        also_server_names: vec![],
        previous_config: String::new(),
        new_config: String::new(),
    })
}

fn deploy_web(host_port: u16) -> Payload {
    let reference = ImageRef::parse(&format!("r/web@sha256:{}", "a".repeat(64))).unwrap();
    let spec = DeploySpec {
        accessories: Vec::new(),
        plan_id: PlanId::parse(&"2".repeat(32)).unwrap(),
        app: app("web"),
        app_image: reference.clone(),
        gateway_image: reference,
        host_port,
        container_port: 8080,
        health_path: Default::default(),
        server_name: ServerName::parse("web.example").unwrap(),
        also_server_names: vec![],
        nginx_config: String::new(),
        app_dir: PathBuf::from("/state/apps/web"),
        limits: ContainerLimits {
            memory_bytes: 1,
            millicpus: 1,
            pids: 1,
            log_max_size_bytes: 1,
            log_max_files: 1,
        },
        env_file: None,
        data: None,
        before_start: None,
    };
    Payload::Deploy(Deploy { image_key: "web".into(), network: "vl-web".into(), containers: vec![], spec })
}

fn remove_9() -> Payload {
    Payload::RemoveImage(RemoveImage { image_id: image('9'), used_by: vec!["old".into()] })
}

fn restart_shop() -> Payload {
    let spec = crate::vocab::StartSpec {
        accessories: Vec::new(),
        app_container: id('a'),
        gateway: id('b'),
        host_port: 18001,
        server_name: ServerName::parse("shop.example").unwrap(),
        health_path: Default::default(),
        data: None,
    };
    Payload::Restart(Restart {
        app: app("shop"),
        containers: vec![id('a'), id('b')],
        container_names: vec![],
        spec,
    })
}

fn every_payload() -> Vec<Payload> {
    vec![stop_shop(), nginx_shop(), deploy_web(18002), remove_9(), restart_shop()]
}

/// Whether `change` applied to the world changes the digest of `payload`.
fn voids(payload: &Payload, change: impl FnOnce(&mut Snapshot)) -> bool {
    let before = world();
    let mut after = before.clone();
    change(&mut after);
    digest(&before, payload) != digest(&after.normalize(), payload)
}

fn find<'a>(s: &'a mut Snapshot, name: &str) -> &'a mut Container {
    s.containers.iter_mut().find(|c| c.name == name).unwrap()
}

#[test]
fn the_digest_is_stable_and_ignores_order() {
    for payload in every_payload() {
        let mut reversed = world();
        reversed.containers.reverse();
        reversed.images.reverse();
        assert_eq!(digest(&world(), &payload), digest(&reversed, &payload));
        assert!(!voids(&payload, |_| {}));
    }
}

#[test]
fn a_foreign_container_restarting_created_or_removed_voids_no_plan() {
    for payload in every_payload() {
        assert!(!voids(&payload, |s| find(s, "loop").state = "restarting".into()), "{payload:?}");
        assert!(!voids(&payload, |s| find(s, "prod").state = "exited".into()), "{payload:?}");
        assert!(!voids(&payload, |s| s.containers.retain(|c| c.name != "loop")), "{payload:?}");
        assert!(
            !voids(&payload, |s| s.containers.push(container('5', "new-foreign", None, ""))),
            "{payload:?}"
        );
    }
}

#[test]
fn another_app_of_ours_changing_in_any_way_voids_no_plan_about_this_one() {
    // Before issue 22 each of these voided every plan: an approval-free
    // deploy of one app voided a pending approval of another.
    for payload in every_payload() {
        assert!(!voids(&payload, |s| find(s, "vl-blog-app").state = "restarting".into()), "{payload:?}");
        assert!(!voids(&payload, |s| find(s, "vl-blog-app").id = id('e')), "{payload:?}");
        assert!(!voids(&payload, |s| find(s, "vl-blog-app").image_id = image('e')), "{payload:?}");
        assert!(!voids(&payload, |s| find(s, "vl-blog-gateway").ports.push(port(18005))), "{payload:?}");
        assert!(!voids(&payload, |s| s.containers.retain(|c| c.app() != Some("blog"))), "{payload:?}");
        // A new app deployed beside it: its containers and its two networks.
        assert!(
            !voids(&payload, |s| {
                s.containers.push(container('7', "vl-news-app", Some("news"), "app"));
                s.containers.push(container('8', "vl-news-gateway", Some("news"), "gateway"));
                s.networks.extend(["vl-news".into(), "vl-news_edge".into()]);
            }),
            "{payload:?}"
        );
    }
}

#[test]
fn another_app_of_ours_taking_what_a_plan_needs_voids_it() {
    // The conflicts stay targets: a container of another app on the
    // deploy's host port or its image, a network on the app's names.
    assert!(voids(&deploy_web(18002), |s| find(s, "vl-blog-gateway").ports.push(port(18002))));
    assert!(voids(&remove_9(), |s| find(s, "vl-blog-app").image_id = image('9')));
    assert!(voids(&stop_shop(), |s| s.networks.retain(|n| n != "vl-shop_edge")));
    assert!(voids(&deploy_web(18002), |s| s.networks.push("vl-web_edge".into())));
}

#[test]
fn stop_is_void_when_its_app_changes_in_any_way() {
    let stop = stop_shop();
    assert!(voids(&stop, |s| find(s, "vl-shop-app").state = "exited".into()));
    assert!(voids(&stop, |s| find(s, "vl-shop-gateway").state = "restarting".into()));
    assert!(voids(&stop, |s| s.containers.retain(|c| c.name != "vl-shop-app")));
    // A foreign container slipped in under the app's label or one of its names.
    assert!(voids(&stop, |s| s.containers.push(container('6', "sneaky", Some("shop"), "app"))));
    assert!(voids(&stop, |s| s.containers.push(container('6', "vl-shop-check", None, ""))));
}

#[test]
fn restart_ignores_its_own_containers_states_but_nothing_else_of_its_app() {
    let restart = restart_shop();
    // A crash loop, or an operator stopping or starting one by hand: what
    // the restart is for; it stops whatever runs and starts both.
    assert!(!voids(&restart, |s| find(s, "vl-shop-app").state = "restarting".into()));
    assert!(!voids(&restart, |s| find(s, "vl-shop-gateway").state = "exited".into()));
    assert!(voids(&restart, |s| s.containers.retain(|c| c.name != "vl-shop-app")));
    assert!(voids(&restart, |s| find(s, "vl-shop-app").image_id = image('e')));
    assert!(voids(&restart, |s| find(s, "vl-shop-gateway").ports.push(port(18005))));
    assert!(voids(&restart, |s| s.containers.push(container('6', "sneaky", Some("shop"), "app"))));
    // A squatter on its names is digested whole, its state included.
    let squatter = |s: &mut Snapshot| s.containers.push(container('6', "vl-shop-check", None, ""));
    assert!(voids(&restart, squatter));
    let mut with_squatter = world();
    squatter(&mut with_squatter);
    let mut flapped = with_squatter.clone();
    find(&mut flapped, "vl-shop-check").state = "exited".into();
    assert_ne!(digest(&with_squatter.normalize(), &restart), digest(&flapped.normalize(), &restart));
}

#[test]
fn nginx_config_is_void_when_its_gateway_changes_state() {
    let nginx = nginx_shop();
    assert!(voids(&nginx, |s| find(s, "vl-shop-gateway").state = "exited".into()));
    // The app container is not the target: the digest ignores it (a
    // replaced app container is refused at execute by re-deriving the plan,
    // whose record check no longer matches).
    assert!(!voids(&nginx, |s| find(s, "vl-shop-app").state = "restarting".into()));
    assert!(!voids(&nginx, |s| find(s, "vl-shop-app").id = id('7')));
}

#[test]
fn deploy_is_void_when_a_foreign_container_takes_its_name_or_port() {
    let deploy = deploy_web(18002);
    assert!(voids(&deploy, |s| s.containers.push(container('6', "vl-web-app", None, ""))));
    assert!(voids(&deploy, |s| {
        let mut squatter = container('6', "elsewhere", None, "");
        squatter.ports = vec![port(18002)];
        s.containers.push(squatter);
    }));
    assert!(voids(&deploy, |s| s.networks.push("vl-web".into())));
    // The same foreign container on another port and name is none of its business.
    assert!(!voids(&deploy, |s| {
        let mut other = container('6', "elsewhere", None, "");
        other.ports = vec![port(18003)];
        s.containers.push(other);
    }));
}

#[test]
fn remove_image_is_void_when_the_image_or_a_container_referencing_it_changes() {
    let remove = remove_9();
    assert!(voids(&remove, |s| s.images.retain(|i| *i != image('9'))));
    let mut user = container('6', "uses-nine", None, "");
    user.image_id = image('9');
    assert!(voids(&remove, |s| s.containers.push(user)));
    // Other images coming and going do not matter to it.
    assert!(!voids(&remove, |s| s.images.push(image('8'))));
}
