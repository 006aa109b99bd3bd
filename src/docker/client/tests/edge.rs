//! The edge's change (issue 39) through the fake runner: a configuration
//! the edge's nginx refuses is undone, and only then called rolled back.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::vocab::{EdgeChange, PlanId};

/// What the fake answers about a running edge of ours; `nginx -t` in it
/// refuses the first time (the new config) and accepts after.
fn edge_script(tests: &'static AtomicUsize) -> impl Fn(&[String]) -> Result<String, i32> + Sync {
    move |args: &[String]| {
        let line = args.join(" ");
        match args[0].as_str() {
            "ps" => Ok(format!("{}\n", hex('e'))),
            "inspect" => Ok("edge\ttrue\tvl_edge \n".to_owned()),
            "port" => Ok("127.0.0.1:1\n".to_owned()),
            "exec" if line.ends_with("nginx -t") => {
                if tests.fetch_add(1, Ordering::SeqCst) == 0 {
                    Err(1)
                } else {
                    Ok(String::new())
                }
            }
            _ => Ok(String::new()),
        }
    }
}

#[test]
fn a_config_the_edge_refuses_is_put_back_reloaded_and_its_network_left() {
    static TESTS: AtomicUsize = AtomicUsize::new(0);
    let dir = tempfile::tempdir().unwrap();
    let edge = crate::docker::edge_files::edge_dir(dir.path());
    std::fs::create_dir(&edge).unwrap();
    std::fs::set_permissions(&edge, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(edge.join("nginx.conf"), "old config\n").unwrap();
    let engine = DockerClient::with_runner(Fake::new(edge_script(&TESTS)), dir.path());
    let change = EdgeChange {
        plan_id: PlanId::random(),
        config: "new config\n".into(),
        install: vec![],
        obtain: None,
        remove: vec![],
        connect: Some("vl-shop_edge".into()),
        disconnect: None,
        probe: vec![],
        health_path: Default::default(),
    };
    let error = engine.edge_apply(&change).unwrap_err();
    assert!(
        matches!(&error, EngineError::RolledBack { cause, .. } if **cause == EngineError::NginxRejected),
        "{error:?}"
    );
    assert_eq!(std::fs::read_to_string(edge.join("nginx.conf")).unwrap(), "old config\n");
    let id = hex('e');
    let calls = engine.runner().argv();
    let expected = [
        format!("network connect vl-shop_edge {id}"),
        format!("exec {id} /usr/sbin/nginx -t"),
        format!("exec {id} /usr/sbin/nginx -t"),
        format!("exec {id} /usr/sbin/nginx -s reload"),
        format!("network disconnect vl-shop_edge {id}"),
    ];
    let changes: Vec<&String> =
        calls.iter().filter(|c| c.starts_with("network") || c.starts_with("exec")).collect();
    assert_eq!(changes, expected.iter().collect::<Vec<_>>(), "{calls:#?}");
}
