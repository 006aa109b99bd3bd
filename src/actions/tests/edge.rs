//! expose and unexpose (issue 39): what the agent can and cannot name, and
//! what the plan seals from the policy, the app's record and the edge.

use super::*;
use crate::actions::{Expose, Unexpose};
use crate::vocab::{
    AcmeConfig, AcmeContact, AcmeDirectory, CertSource, CertificateFiles, EDGE_ROLE, EdgeConfig,
};

/// `demo` recorded, the policy's edge with a file for its one name, and an
/// edge of ours running.
fn edged() -> World {
    let mut world = World::with_demo();
    let files = CertificateFiles {
        cert: "/etc/volce-lab/certs/demo.pem".into(),
        key: "/etc/volce-lab/certs/demo.key".into(),
    };
    world.policy.edge = Some(EdgeConfig {
        http: "0.0.0.0:80".parse().unwrap(),
        https: "0.0.0.0:443".parse().unwrap(),
        certificates: [(ServerName::parse("demo.example.com").unwrap(), files)].into(),
        redirect_http: true,
        hsts: false,
        acme: None,
    });
    let mut edge = container('e', "/vl_edge", None, "running", None);
    edge.labels.insert(crate::vocab::LABEL_ROLE.into(), EDGE_ROLE.into());
    world.snapshot.containers.push(edge);
    world
}

#[test]
fn an_expose_seals_each_names_certificate_and_the_edges_new_config() {
    let world = edged();
    let (payload, impact) = world.derive(Action::Expose, json!({"app": "demo"})).unwrap();
    let Payload::Expose(Expose { exposure, change, .. }) = payload else { panic!("expose payload") };
    assert_eq!(exposure.names.len(), 1);
    assert!(
        matches!(&exposure.names[0].source, CertSource::File { cert_sha256, .. } if *cert_sha256 == "ab".repeat(32))
    );
    assert_eq!(change.connect.as_deref(), Some("vl-demo_edge"));
    assert_eq!(change.install, exposure.names);
    assert!(change.obtain.is_none());
    assert!(
        change.config.contains("server_name demo.example.com;") && change.config.contains("vl-demo-gateway")
    );
    assert!(impact.target.contains("demo.example.com") && impact.target.contains("0.0.0.0:443"));
    assert!(world.policy.requires_approval(Action::Expose), "always the operator's");
}

/// A name without files, with the policy's ACME: obtained at execute.
#[test]
fn a_name_without_files_is_ordered_from_the_policys_acme() {
    let mut world = edged();
    let edge = world.policy.edge.as_mut().unwrap();
    edge.certificates.clear();
    edge.acme = Some(AcmeConfig {
        directory: AcmeDirectory::parse("https://acme.example/dir").unwrap(),
        contact: AcmeContact::parse("ops@example.com").unwrap(),
        directory_ca: None,
    });
    let (payload, _) = world.derive(Action::Expose, json!({"app": "demo"})).unwrap();
    let Payload::Expose(Expose { change, .. }) = payload else { panic!("expose payload") };
    assert!(change.install.is_empty());
    let order = change.obtain.unwrap();
    assert_eq!(order.names, [ServerName::parse("demo.example.com").unwrap()]);
}

/// Tried: no `edge` in the policy, no edge running, a name without a
/// certificate (and no ACME), a certificate file that fails its checks, the
/// same exposure twice, an unexpose of an app not exposed, an address named
/// by the agent (a stray parameter): each refused with its own code.
#[test]
fn expose_and_unexpose_are_refused_where_the_edge_cannot_serve() {
    let mut world = edged();
    world.policy.edge = None;
    assert_eq!(world.code(Action::Expose, json!({"app": "demo"})), Code::EdgeNotConfigured);

    let mut world = edged();
    world.snapshot.containers.retain(|c| c.name != "/vl_edge");
    assert_eq!(world.code(Action::Expose, json!({"app": "demo"})), Code::EdgeNotEnabled);

    let mut world = edged();
    world.policy.edge.as_mut().unwrap().certificates.clear();
    let refusal = world.derive(Action::Expose, json!({"app": "demo"})).unwrap_err();
    assert_eq!(refusal.code, Code::EdgeCertificateInvalid);
    assert!(refusal.message.contains("demo.example.com has no entry"), "{}", refusal.message);

    let mut world = edged();
    let files = world.policy.edge.as_mut().unwrap().certificates.values_mut().next().unwrap();
    files.cert = "/etc/volce-lab/certs/missing.pem".into();
    assert_eq!(world.code(Action::Expose, json!({"app": "demo"})), Code::EdgeCertificateInvalid);

    let mut world = edged();
    let (payload, _) = world.derive(Action::Expose, json!({"app": "demo"})).unwrap();
    let Payload::Expose(Expose { exposure, .. }) = payload else { panic!("expose payload") };
    world.apps.get_mut("demo").unwrap().exposed = Some(exposure);
    assert_eq!(world.code(Action::Expose, json!({"app": "demo"})), Code::AlreadyExposed);
    let (payload, _) = world.derive(Action::Unexpose, json!({"app": "demo"})).unwrap();
    let Payload::Unexpose(Unexpose { change: Some(change), .. }) = payload else {
        panic!("unexpose payload")
    };
    assert_eq!(change.disconnect.as_deref(), Some("vl-demo_edge"));
    assert!(!change.config.contains("demo.example.com"));

    let world = edged();
    assert_eq!(world.code(Action::Unexpose, json!({"app": "demo"})), Code::AppNotExposed);
    assert_eq!(
        world.code(Action::Expose, json!({"app": "demo", "https": "0.0.0.0:8443"})),
        Code::InvalidParameters
    );
}

/// `demo` exposed on `edged()`'s edge.
fn exposed() -> World {
    let mut world = edged();
    let (payload, _) = world.derive(Action::Expose, json!({"app": "demo"})).unwrap();
    let Payload::Expose(Expose { exposure, .. }) = payload else { panic!("expose payload") };
    world.apps.get_mut("demo").unwrap().exposed = Some(exposure);
    world
}

/// Tried: the edge's container removed by hand while `demo` is exposed.
/// Nothing routes its names any more, so unexpose and remove_app only make
/// the record forget them (no edge change); a stopped edge is still
/// refused, since it would route them again once started.
#[test]
fn without_any_edge_container_only_the_record_forgets_the_names() {
    let mut world = exposed();
    world.snapshot.containers.retain(|c| c.name != "/vl_edge");
    let (payload, impact) = world.derive(Action::Unexpose, json!({"app": "demo"})).unwrap();
    let Payload::Unexpose(Unexpose { change, .. }) = payload else { panic!("unexpose payload") };
    assert!(change.is_none());
    assert!(impact.containers_touched.is_empty(), "{:?}", impact.containers_touched);
    let (payload, _) = world.derive(Action::RemoveApp, json!({"app": "demo"})).unwrap();
    let Payload::RemoveApp(removal) = payload else { panic!("remove_app payload") };
    assert!(removal.edge.is_none());

    let mut world = exposed();
    for c in world.snapshot.containers.iter_mut().filter(|c| c.name == "/vl_edge") {
        c.state = "exited".into();
    }
    assert_eq!(world.code(Action::Unexpose, json!({"app": "demo"})), Code::EdgeNotEnabled);
    assert_eq!(world.code(Action::RemoveApp, json!({"app": "demo"})), Code::EdgeNotEnabled);
}
