//! `also_server_names` (issue 25): the names a gateway serves besides
//! `server_name`, on deploy and nginx_config, kept by update and rollback.
//! On the shared `World` of `super`.

use super::*;

fn with_also(names: Value) -> Value {
    patched(&[("also_server_names", names)])
}

/// Tried: each way a list can be wrong, on deploy and on nginx_config:
/// refused with a stable code and a sentence naming the next step, and
/// nothing derived (validation is pure: a refusal returns no payload).
#[test]
fn a_wrong_list_of_names_is_refused_whole() {
    let cases: [(Value, Code, &str); 7] = [
        (json!("www.web1.example.com"), Code::InvalidParameters, "must be a list of strings"),
        (json!([1]), Code::InvalidServerName, "also_server_names[0] must be a lowercase DNS name"),
        (json!(["ok.example", "Bad_Name"]), Code::InvalidServerName, "also_server_names[1] must be"),
        (json!(["a.example; include /etc/*"]), Code::InvalidServerName, "plan again with a valid name"),
        (json!(["web1.example.com"]), Code::InvalidServerName, "repeats server_name web1.example.com"),
        (json!(["a.example", "b.example", "a.example"]), Code::InvalidServerName, "names a.example twice"),
        (json!(["a.example", "b.example", "c.example", "d.example"]), Code::InvalidServerName, "at most 3"),
    ];
    for (names, code, says) in cases {
        let refusal = World::empty().derive(Action::Deploy, with_also(names.clone())).unwrap_err();
        assert_eq!(refusal.code, code, "{names}");
        assert!(refusal.message.contains(says), "{names}: {}", refusal.message);
        assert!(refusal.message.ends_with('.'), "a whole sentence: {}", refusal.message);
        let mut params = json!({"app": "demo", "server_name": "web1.example.com"});
        params["also_server_names"] = names.clone();
        let refusal = World::with_demo().derive(Action::NginxConfig, params).unwrap_err();
        assert_eq!(refusal.code, code, "nginx_config {names}");
    }
}

#[test]
fn a_deploy_serves_every_name_on_one_server_name_line_and_checks_the_first() {
    let world = World::empty();
    let (payload, impact) =
        world.derive(Action::Deploy, with_also(json!(["www.web1.example.com", "old.example"]))).unwrap();
    let Payload::Deploy(Deploy { spec, .. }) = payload else { panic!("deploy payload") };
    assert_eq!(spec.server_name.as_str(), "web1.example.com", "the health check's Host");
    let also: Vec<&str> = spec.also_server_names.iter().map(ServerName::as_str).collect();
    assert_eq!(also, ["www.web1.example.com", "old.example"]);
    assert!(
        spec.nginx_config.contains("server_name web1.example.com www.web1.example.com old.example;\n"),
        "{}",
        spec.nginx_config
    );
    assert_eq!(
        impact.target,
        "new app web1 on 127.0.0.1:18002 for web1.example.com (also www.web1.example.com, old.example)"
    );
    let names = crate::nginx::server_names_of(&spec.nginx_config).unwrap();
    assert_eq!(names.len(), 3);
    assert_eq!(crate::nginx::server_name_of(&spec.nginx_config), Some(spec.server_name.clone()));
}

/// Tried: a deploy without the list, with an empty one, and with names:
/// the first two seal exactly the bytes a plan sealed before the list
/// existed (no `also_server_names` key anywhere), the last carries it.
#[test]
fn a_plan_with_one_name_seals_the_bytes_it_always_did() {
    let sealed = |params: Value| {
        let (payload, impact) = World::empty().derive(Action::Deploy, params).unwrap();
        (serde_json::to_string(&payload).unwrap(), impact)
    };
    let (without, impact) = sealed(deploy_params());
    assert!(!without.contains("also_server_names"), "{without}");
    assert_eq!(sealed(with_also(json!([]))), (without.clone(), impact));
    let (with, _) = sealed(with_also(json!(["www.web1.example.com"])));
    assert!(with.contains(r#""also_server_names":["www.web1.example.com"]"#), "{with}");
}

#[test]
fn nginx_config_sets_the_whole_list_anew_and_says_what_it_was() {
    let mut world = World::with_demo();
    world.apps.get_mut("demo").unwrap().also_server_names =
        vec![ServerName::parse("www.demo.example.com").unwrap()];
    let params =
        json!({"app": "demo", "server_name": "new.example.com", "also_server_names": ["demo.example.com"]});
    let (payload, impact) = world.derive(Action::NginxConfig, params).unwrap();
    let Payload::NginxConfig(NginxConfig {
        previous_also_server_names, also_server_names, new_config, ..
    }) = payload
    else {
        panic!("nginx_config payload")
    };
    assert_eq!(previous_also_server_names, [ServerName::parse("www.demo.example.com").unwrap()]);
    assert_eq!(also_server_names, [ServerName::parse("demo.example.com").unwrap()]);
    assert!(new_config.contains("server_name new.example.com demo.example.com;\n"), "{new_config}");
    assert_eq!(
        impact.target,
        "app demo: server_name demo.example.com (also www.demo.example.com) -> new.example.com (also demo.example.com)"
    );
    // Left out: one name again.
    let (payload, _) =
        world.derive(Action::NginxConfig, json!({"app": "demo", "server_name": "new.example.com"})).unwrap();
    let Payload::NginxConfig(NginxConfig { also_server_names, new_config, .. }) = payload else { panic!() };
    assert!(also_server_names.is_empty());
    assert!(new_config.contains("server_name new.example.com;\n"), "{new_config}");
}

/// Tried: an update and a rollback of an app that serves two names: the
/// staged config and the config after the switch serve both, and the
/// check name stays the only way to the new container.
#[test]
fn update_and_rollback_keep_every_name() {
    use crate::control::app_record::KeptVersion;
    let mut world = World::with_demo();
    let record = world.apps.get_mut("demo").unwrap();
    record.also_server_names = vec![ServerName::parse("www.demo.example.com").unwrap()];
    record.kept_versions = vec![KeptVersion {
        image_key: "web".into(),
        app_image: ImageRef::parse(&format!("old.example/web@sha256:{}", "9".repeat(64))).unwrap(),
        image_id: None,
        container_port: 8080,
        health_path: Default::default(),
    }];
    let line = "server_name demo.example.com www.demo.example.com;\n";
    let (payload, _) = world.derive(Action::Update, json!({"app": "demo", "image": "web"})).unwrap();
    let Payload::Update(Update { spec, .. }) = payload else { panic!("update payload") };
    assert!(spec.staged_config.contains(line) && spec.new_config.contains(line), "{}", spec.new_config);
    assert_eq!(spec.server_name.as_str(), "demo.example.com");
    let (payload, _) = world.derive(Action::Rollback, json!({"app": "demo"})).unwrap();
    let Payload::Rollback(Rollback { spec, .. }) = payload else { panic!("rollback payload") };
    assert!(spec.staged_config.contains(line) && spec.new_config.contains(line), "{}", spec.new_config);
}
