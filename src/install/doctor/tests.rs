//! Doctor rules on a temporary installation owned by the test's own user,
//! with a fake probe. Each broken variant changes one thing and must turn
//! exactly the matching finding into a failure.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt as _, symlink};

use super::*;

fn plan_id(id: &str) -> crate::vocab::PlanId {
    crate::vocab::PlanId::parse(id).unwrap()
}

const GATEWAY: &str = "127.0.0.1:15000/gateway@sha256:";

struct FakeProbe {
    docker: Result<String, String>,
    images_present: bool,
    sudoers_valid: bool,
    groups: Option<Vec<String>>,
    policy: Result<PolicyFacts, String>,
    /// Accounts the fake account database does not know (besides `groups:
    /// None`, which makes every account unknown but the operator's).
    missing_accounts: Vec<String>,
    store: Result<Option<StoreHealth>, String>,
    drift: Result<Vec<AppDrift>, String>,
    /// What `leftovers` answers for every plan.
    leftovers: Option<Result<Vec<String>, String>>,
    /// What `stopped_claimer` answers for every plan.
    stopped: Option<crate::host::StoppedClaimer>,
    engine: Option<engine::EngineFacts>,
    networks: Result<Vec<engine::AppNetwork>, String>,
    system_log: Option<bool>,
    asked_groups_for: RefCell<Vec<String>>,
}

impl Default for FakeProbe {
    fn default() -> Self {
        FakeProbe {
            docker: Ok("20.10".into()),
            images_present: true,
            sudoers_valid: true,
            groups: Some(vec!["vl-agent".into()]),
            policy: Ok(PolicyFacts {
                images: vec![
                    "127.0.0.1:15000/web@sha256:".to_owned() + &"a".repeat(64),
                    GATEWAY.to_owned() + &"b".repeat(64),
                ],
                catalog_entries: 1,
                gateway: GATEWAY.to_owned() + &"b".repeat(64),
                env_files: vec![],
                approvers: vec!["vl-operator".into()],
                has_data: false,
                signed_approvals: None,
                backup: None,
                edge: false,
            }),
            missing_accounts: vec![],
            store: Ok(Some(StoreHealth {
                integrity_ok: true,
                schema_version: 1,
                expected_schema_version: 1,
                stuck_plans: vec![],
                audit_rows: 0,
                audit_break: None,
            })),
            drift: Ok(vec![]),
            leftovers: None,
            stopped: None,
            engine: None,
            networks: Ok(vec![]),
            system_log: None,
            asked_groups_for: RefCell::new(vec![]),
        }
    }
}

impl DoctorProbe for FakeProbe {
    fn docker_version(&self) -> Result<String, String> {
        self.docker.clone()
    }
    /// Images that fit their template: the app runs as 1000 with a
    /// command, the gateway as 101 with nginx in the foreground.
    fn image_config(&self, reference: &str) -> Option<ImageConfig> {
        if !self.images_present {
            return None;
        }
        let words = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect();
        Some(if reference.starts_with(GATEWAY) {
            ImageConfig {
                user: "101:101".into(),
                cmd: words(&["/usr/sbin/nginx", "-g", "daemon off;"]),
                entrypoint: vec![],
                ..Default::default()
            }
        } else {
            ImageConfig {
                user: "1000".into(),
                cmd: words(&["/bin/httpd", "-f"]),
                entrypoint: vec![],
                ..Default::default()
            }
        })
    }
    fn sudoers_valid(&self, _path: &Path) -> bool {
        self.sudoers_valid
    }
    fn groups_of(&self, user: &str) -> Option<Vec<String>> {
        self.asked_groups_for.borrow_mut().push(user.to_owned());
        if self.missing_accounts.iter().any(|missing| missing == user) {
            return None;
        }
        if user == "vl-operator" {
            return Some(vec!["vl-operator".into()]);
        }
        self.groups.clone()
    }
    fn policy(&self, _path: &Path) -> Result<PolicyFacts, String> {
        self.policy.clone()
    }
    fn store(&self, _state_dir: &Path) -> Result<Option<StoreHealth>, String> {
        self.store.clone()
    }
    fn drift(&self, _state_dir: &Path) -> Result<Vec<AppDrift>, String> {
        self.drift.clone()
    }
    fn leftovers(&self, _state_dir: &Path, _plan: &str) -> Option<Result<Vec<String>, String>> {
        self.leftovers.clone()
    }
    fn stopped_claimer(&self, _state_dir: &Path, _plan: &str) -> Option<crate::host::StoppedClaimer> {
        self.stopped
    }
    fn engine(&self) -> Option<engine::EngineFacts> {
        self.engine.clone()
    }
    fn app_networks(&self, _state_dir: &Path) -> Result<Vec<engine::AppNetwork>, String> {
        self.networks.clone()
    }
    fn system_log(&self) -> Option<bool> {
        self.system_log
    }
}

/// Tried: a plan whose claimer died left a container and a network; and a
/// plan still executing (its claimer may be stopped). The first finding
/// names both objects and the documented path; the second's fix is one
/// that can work (continue or kill the claimer), not a resolve that refuses.
#[test]
fn a_stuck_plan_names_what_carries_its_label_and_an_executing_one_the_way_out() {
    let install = install();
    let (dead, executing) = ("ab".repeat(16), "cd".repeat(16));
    let probe = FakeProbe {
        store: Ok(Some(StoreHealth {
            integrity_ok: true,
            schema_version: 1,
            expected_schema_version: 1,
            stuck_plans: vec![
                (plan_id(&dead), crate::vocab::PlanState::NeedsInspection),
                (plan_id(&executing), crate::vocab::PlanState::Executing),
            ],
            audit_rows: 0,
            audit_break: None,
        })),
        leftovers: Some(Ok(vec![
            format!("container {} vl-web-app (running)", "1".repeat(64)),
            format!("network {} vl-web", "2".repeat(64)),
        ])),
        ..Default::default()
    };
    let findings = diagnose(&install.paths, &probe);
    let of = |plan: &str| findings.iter().find(|f| f.detail.starts_with(plan)).unwrap().clone();
    let dead_finding = of(&dead);
    assert!(dead_finding.failed());
    assert!(dead_finding.detail.contains("vl-web-app (running)"), "{dead_finding}");
    assert!(dead_finding.detail.contains("network") && dead_finding.detail.contains("io.volce-lab.plan="));
    let fix = dead_finding.fix.unwrap();
    assert!(fix.contains(&format!("resolve {dead}")) && fix.contains("remove_app"), "{fix}");
    let fix = of(&executing).fix.unwrap();
    assert!(fix.contains("kill -CONT") && fix.contains("kill -KILL"), "{fix}");
    // The executing plan's claimer stopped: named with its pid and both ways out.
    let stopped = crate::host::StoppedClaimer::stopped(4242, true);
    let probe = FakeProbe { stopped: Some(stopped), ..probe };
    let findings = diagnose(&install.paths, &probe);
    let finding = findings.iter().find(|f| f.detail.starts_with(&executing)).unwrap();
    assert!(finding.detail.contains("process 4242, is STOPPED"), "{finding}");
    let fix = finding.fix.as_deref().unwrap();
    assert!(fix.contains("kill -CONT 4242") && fix.contains("kill -KILL -- -4242"), "{fix}");
    // Stuck on an unread stdout: named as such, never "finishes by itself".
    let stuck = crate::host::StoppedClaimer { hold: crate::host::Hold::StuckOnOutput, ..stopped };
    let probe = FakeProbe { stopped: Some(stuck), ..probe };
    let findings = diagnose(&install.paths, &probe);
    let finding = findings.iter().find(|f| f.detail.starts_with(&executing)).unwrap();
    assert!(finding.detail.contains("process 4242, is STUCK writing its output"), "{finding}");
    let fix = finding.fix.as_deref().unwrap();
    assert!(fix.contains("/proc/4242/fd/1") && fix.contains("kill -KILL -- -4242"), "{fix}");
    assert!(!fix.contains("finishes by itself") && !fix.contains("kill -CONT"), "{fix}");
    // The engine down: said, not hidden.
    let probe = FakeProbe { leftovers: Some(Err("no socket".into())), ..probe };
    let findings = diagnose(&install.paths, &probe);
    assert!(
        findings.iter().any(|f| f.detail.contains("could not be asked what carries its label: no socket"))
    );
}

struct Install {
    _dir: tempfile::TempDir,
    paths: DoctorPaths,
    binary: PathBuf,
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A complete, correct installation under a temporary directory.
fn install() -> Install {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    chmod(root, 0o755);
    let lib = root.join("lib");
    std::fs::create_dir(&lib).unwrap();
    let binary = lib.join("volce-lab");
    std::fs::write(&binary, b"#!binary").unwrap();
    chmod(&binary, 0o755);
    // The link lives apart from the binary, as /usr/local/bin does from
    // /usr/local/lib, so each directory above either is checked on its own.
    let bin = root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    chmod(&bin, 0o755);
    let helper_link = bin.join("volce-lab-host");
    symlink(&binary, &helper_link).unwrap();
    let etc = root.join("etc");
    std::fs::create_dir(&etc).unwrap();
    chmod(&etc, 0o755);
    let policy = etc.join("policy.json");
    std::fs::write(&policy, b"{}").unwrap();
    chmod(&policy, 0o600);
    let state_dir = root.join("state");
    std::fs::create_dir(&state_dir).unwrap();
    chmod(&state_dir, 0o700);
    let sudoers = root.join("sudoers");
    std::fs::write(
        &sudoers,
        format!("# volce-lab: the agent may run the helper's rpc only\n{}\n", sudoers_rule("vl-agent")),
    )
    .unwrap();
    chmod(&sudoers, 0o440);
    let paths =
        DoctorPaths { helper_link, policy, state_dir, sudoers, owner_uid: nix::unistd::geteuid().as_raw() };
    Install { _dir: dir, paths, binary }
}

fn failures(findings: &[Finding]) -> Vec<String> {
    findings.iter().filter(|f| f.failed()).map(|f| f.subject.clone()).collect()
}

#[test]
fn a_good_installation_passes_every_check() {
    let install = install();
    let probe = FakeProbe::default();
    let findings = diagnose(&install.paths, &probe);
    assert_eq!(failures(&findings), Vec::<String>::new(), "{findings:#?}");
    assert_eq!(probe.asked_groups_for.borrow().as_slice(), ["vl-agent", "vl-operator"]);
    let (text, healthy) = report(&findings);
    assert!(healthy);
    assert!(text.ends_with("all checks passed\n"));
}

/// This machine's engine: 20.10, with an old app network, a TCP listener
/// and iptables off. Each is a WARN line with its fix; none fails the run.
#[test]
fn engine_warnings_are_printed_and_do_not_fail_the_run() {
    let install = install();
    let facts = engine::EngineFacts {
        warnings: Ok(vec![
            "WARNING: API is accessible on http://0.0.0.0:2375 without encryption.\n  Access".into(),
        ]),
        daemon_args: Some(vec!["--iptables=false".into()]),
        daemon_config: None,
        loopback_guard: None,
    };
    let old = engine::AppNetwork {
        app: "web".into(),
        name: "vl-web".into(),
        edge: false,
        options: BTreeMap::new(),
    };
    let probe = FakeProbe {
        docker: Ok("20.10.24+dfsg1".into()),
        engine: Some(facts),
        networks: Ok(vec![old]),
        ..Default::default()
    };
    let findings = diagnose(&install.paths, &probe);
    assert_eq!(failures(&findings), Vec::<String>::new(), "{findings:#?}");
    let warned: Vec<&str> =
        findings.iter().filter(|f| f.level == Level::Warn).map(|f| f.subject.as_str()).collect();
    assert_eq!(warned, ["docker version", "docker api", "docker iptables", "app web"]);
    let (text, healthy) = report(&findings);
    assert!(healthy, "warnings leave the exit status 0");
    assert!(text.contains("WARN docker version: engine 20.10.24+dfsg1 is older than 28"), "{text}");
    assert!(text.contains("4 warning(s)") && text.ends_with("all checks passed\n"), "{text}");
}

/// Issue 37: `show` printed "the syslog line ... could not be sent" on every
/// plan of a host without a system logger. Doctor says it once: a WARN with
/// the way to start one, or an OK line when something listens.
#[test]
fn a_host_without_a_system_logger_is_one_warning_in_doctor() {
    let install = install();
    let silent = FakeProbe { system_log: Some(false), ..Default::default() };
    let findings = diagnose(&install.paths, &silent);
    assert_eq!(failures(&findings), Vec::<String>::new(), "a warning, not a failure");
    let warned: Vec<&Finding> = findings.iter().filter(|f| f.subject == "system log").collect();
    assert_eq!(warned.len(), 1, "{findings:#?}");
    assert_eq!(warned[0].level, Level::Warn);
    assert!(
        warned[0].detail.contains("/dev/log")
            && warned[0].fix.as_deref().is_some_and(|f| f.contains("systemd-journald")),
        "{:?}",
        warned[0]
    );
    let listening = FakeProbe { system_log: Some(true), ..Default::default() };
    let findings = diagnose(&install.paths, &listening);
    let line = findings.iter().find(|f| f.subject == "system log").expect("one line");
    assert_eq!(line.level, Level::Ok);
}

/// The real question on real sockets: a bound datagram socket listens, a
/// path with nothing bound does not.
#[test]
fn listening_tells_a_bound_socket_from_an_empty_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    assert!(!crate::host::alert::listening(&path));
    let _bound = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    assert!(crate::host::alert::listening(&path));
}

#[test]
fn each_broken_file_variant_fails_its_own_check() {
    type Break = fn(&Install);
    let variants: &[(&str, Break, &str)] = &[
        ("policy writable by others", |i| chmod(&i.paths.policy, 0o666), "policy file"),
        ("policy missing", |i| std::fs::remove_file(&i.paths.policy).unwrap(), "policy file"),
        ("binary group-writable", |i| chmod(&i.binary, 0o775), "helper binary"),
        ("link dangling", |i| std::fs::remove_file(&i.binary).unwrap(), "helper binary"),
        ("binary directory world-writable", |i| chmod(i.binary.parent().unwrap(), 0o777), "helper directory"),
        (
            "link directory world-writable",
            |i| chmod(i.paths.helper_link.parent().unwrap(), 0o777),
            "helper directory",
        ),
        ("state directory open to others", |i| chmod(&i.paths.state_dir, 0o755), "state directory"),
        ("state directory missing", |i| std::fs::remove_dir(&i.paths.state_dir).unwrap(), "state directory"),
        (
            "sudoers rule too broad",
            |i| {
                std::fs::write(
                    &i.paths.sudoers,
                    "vl-agent ALL=(root) NOPASSWD: /usr/local/bin/volce-lab-host *\n",
                )
                .unwrap()
            },
            "sudoers rule",
        ),
        (
            "sudoers with a second rule",
            |i| {
                let rule = sudoers_rule("vl-agent");
                std::fs::write(&i.paths.sudoers, format!("{rule}\nvl-agent ALL=(root) NOPASSWD: ALL\n"))
                    .unwrap()
            },
            "sudoers rule",
        ),
        (
            "sudoers for root",
            |i| std::fs::write(&i.paths.sudoers, sudoers_rule("root") + "\n").unwrap(),
            "sudoers rule",
        ),
        ("sudoers writable by others", |i| chmod(&i.paths.sudoers, 0o666), "sudoers drop-in"),
        ("sudoers missing", |i| std::fs::remove_file(&i.paths.sudoers).unwrap(), "sudoers drop-in"),
    ];
    for (name, breaks, subject) in variants {
        let install = install();
        breaks(&install);
        let findings = diagnose(&install.paths, &FakeProbe::default());
        let failed = failures(&findings);
        assert!(failed.contains(&subject.to_string()), "{name}: expected {subject} to fail, got {failed:?}");
        assert!(!report(&findings).1, "{name}: the report must not be healthy");
        for finding in findings.iter().filter(|f| f.failed()) {
            assert!(finding.fix.is_some(), "{name}: every failure says how to fix it");
        }
    }
}

#[test]
fn each_broken_probe_variant_fails_its_own_check() {
    let install = install();
    let stuck = StoreHealth {
        integrity_ok: true,
        schema_version: 1,
        expected_schema_version: 1,
        stuck_plans: vec![(plan_id(&"ab".repeat(16)), crate::vocab::PlanState::NeedsInspection)],
        audit_rows: 0,
        audit_break: None,
    };
    let variants: Vec<(&str, FakeProbe, &str)> = vec![
        ("docker down", FakeProbe { docker: Err("no socket".into()), ..Default::default() }, "docker"),
        ("visudo rejects", FakeProbe { sudoers_valid: false, ..Default::default() }, "sudoers syntax"),
        (
            "agent in docker group",
            FakeProbe { groups: Some(vec!["vl-agent".into(), "docker".into()]), ..Default::default() },
            "agent account",
        ),
        ("agent missing", FakeProbe { groups: None, ..Default::default() }, "agent account"),
        (
            "agent in lxd group",
            FakeProbe { groups: Some(vec!["vl-agent".into(), "lxd".into()]), ..Default::default() },
            "agent account",
        ),
        (
            "policy refused",
            FakeProbe { policy: Err("nginx_image is not pinned".into()), ..Default::default() },
            "policy content",
        ),
        (
            "database unreadable",
            FakeProbe { store: Err("not a database".into()), ..Default::default() },
            "database",
        ),
        (
            "database damaged",
            FakeProbe {
                store: Ok(Some(StoreHealth { integrity_ok: false, stuck_plans: vec![], ..stuck.clone() })),
                ..Default::default()
            },
            "database",
        ),
        (
            "audit chain broken",
            FakeProbe {
                store: Ok(Some(StoreHealth {
                    audit_break: Some(crate::store::Break::Altered { seq: 3, at: 1000 }),
                    stuck_plans: vec![],
                    ..stuck.clone()
                })),
                ..Default::default()
            },
            "audit chain",
        ),
        (
            "schema newer",
            FakeProbe {
                store: Ok(Some(StoreHealth { schema_version: 9, stuck_plans: vec![], ..stuck.clone() })),
                ..Default::default()
            },
            "schema",
        ),
        ("plan stuck", FakeProbe { store: Ok(Some(stuck.clone())), ..Default::default() }, "plan"),
        (
            "app started by hand after a stop",
            FakeProbe {
                drift: Ok(vec![AppDrift {
                    app: "shop".into(),
                    reason: crate::wire::answers::app_state::DriftReason::RecordStoppedButRunning,
                    message: "one runs again: vl-shop-app (running)".into(),
                }]),
                ..Default::default()
            },
            "app shop",
        ),
        (
            "engine unreadable for drift",
            FakeProbe { drift: Err("no socket".into()), ..Default::default() },
            "apps",
        ),
        (
            "approver is no account",
            FakeProbe { missing_accounts: vec!["vl-operator".into()], ..Default::default() },
            "approver",
        ),
        (
            "the agent approves",
            FakeProbe {
                policy: Ok(PolicyFacts {
                    images: vec![],
                    catalog_entries: 0,
                    gateway: String::new(),
                    approvers: vec!["vl-operator".into(), "vl-agent".into()],
                    env_files: vec![],
                    has_data: false,
                    signed_approvals: None,
                    backup: None,
                    edge: false,
                }),
                ..Default::default()
            },
            "approver",
        ),
    ];
    for (name, probe, subject) in variants {
        let findings = diagnose(&install.paths, &probe);
        assert_eq!(failures(&findings), [subject.to_string()], "{name}");
    }
}

#[test]
fn system_probe_reads_the_account_database() {
    let probe = SystemProbe { policy: load_policy_facts, store: |_| Ok(None) };
    let groups = probe.groups_of("root").expect("every system has root");
    assert!(groups.contains(&"root".to_owned()), "{groups:?}");
    assert_eq!(probe.groups_of("volce-lab-no-such-user"), None);
}

#[test]
fn store_health_reads_a_real_database_without_changing_it() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(read_store_health(dir.path()), Ok(None), "a fresh installation has no database yet");
    drop(crate::store::Store::open(&dir.path().join("state.db")).unwrap());
    let before = std::fs::read(dir.path().join("state.db")).unwrap();
    let health = read_store_health(dir.path()).unwrap().expect("the database exists");
    assert!(health.integrity_ok);
    assert_eq!(health.schema_version, health.expected_schema_version);
    assert!(health.stuck_plans.is_empty());
    assert_eq!(std::fs::read(dir.path().join("state.db")).unwrap(), before);

    std::fs::write(dir.path().join("state.db"), b"not a database at all, just bytes").unwrap();
    assert!(read_store_health(dir.path()).is_err());
}

#[test]
fn policy_facts_come_from_the_helpers_own_parser() {
    let example =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("policy/policy.example.jsonc"))
            .unwrap();
    // Installed the way docs/server-install.md says: comment lines stripped.
    let json: String = example
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .map(|l| format!("{l}\n"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let installed = dir.path().join("example.json");
    std::fs::write(&installed, json).unwrap();
    let PolicyFacts { images, gateway, approvers, .. } = load_policy_facts(&installed).unwrap();
    assert_eq!(images.last(), Some(&gateway), "the gateway's image comes last");
    assert!(images.len() >= 2, "{images:?}");
    assert!(images.iter().all(|image| image.contains("@sha256:")));
    assert!(!approvers.is_empty(), "the example names its approvers");
    let bad = dir.path().join("policy.json");
    std::fs::write(&bad, br#"{"catalog":{"web":"nginx:latest"}}"#).unwrap();
    assert!(load_policy_facts(&bad).is_err());
}

#[test]
fn a_fresh_installation_without_a_database_is_healthy() {
    let install = install();
    let probe = FakeProbe { store: Ok(None), ..Default::default() };
    assert_eq!(failures(&diagnose(&install.paths, &probe)), Vec::<String>::new());
}

#[test]
fn drift_is_a_finding_that_names_the_reviewed_fix() {
    let install = install();
    let probe = FakeProbe {
        drift: Ok(vec![AppDrift {
            app: "shop".into(),
            reason: crate::wire::answers::app_state::DriftReason::ContainersMissing,
            message: "gone: the app container 0123456789ab (missing)".into(),
        }]),
        ..Default::default()
    };
    let findings = diagnose(&install.paths, &probe);
    let finding = findings.iter().find(|f| f.subject == "app shop").expect("a drift finding");
    assert!(finding.failed());
    assert!(finding.detail.contains("containers_missing"), "{}", finding.detail);
    assert!(finding.detail.contains("0123456789ab (missing)"), "names the container: {}", finding.detail);
    let fix = finding.fix.as_deref().unwrap();
    assert!(fix.contains("remove_app") && fix.contains("volce-lab-host list"), "{fix}");
}

#[test]
fn drift_asks_no_engine_when_nothing_is_managed_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(read_drift(dir.path()), Ok(vec![]), "no database yet");
    drop(crate::store::Store::open(&dir.path().join("state.db")).unwrap());
    let before = std::fs::read(dir.path().join("state.db")).unwrap();
    assert_eq!(read_drift(dir.path()), Ok(vec![]), "no app recorded");
    assert_eq!(std::fs::read(dir.path().join("state.db")).unwrap(), before);
}

/// Issue 37: setup's skeleton now starts with an empty catalog, which is
/// valid. Tried: a policy with no catalog entry and a gateway image not
/// pulled (the skeleton's placeholder): doctor passes with a warning that
/// says nothing can be deployed and names `catalog pin`, and the gateway's
/// warning names `catalog gateway-image`.
#[test]
fn an_empty_catalog_and_a_missing_gateway_image_are_warnings_naming_the_pin_commands() {
    let install = install();
    let mut probe = FakeProbe { images_present: false, ..Default::default() };
    if let Ok(facts) = &mut probe.policy {
        facts.images.remove(0);
        facts.catalog_entries = 0;
    }
    let findings = diagnose(&install.paths, &probe);
    let content = findings.iter().find(|f| f.subject == "policy content").unwrap();
    assert_eq!(content.level, Level::Warn, "{content:?}");
    assert!(content.detail.contains("the catalog is empty"), "{content:?}");
    assert!(
        content.fix.as_deref().unwrap().contains("sudo volce-lab-host catalog pin KEY IMAGE"),
        "{content:?}"
    );
    let gateway = findings.iter().find(|f| f.subject == "image").unwrap();
    assert!(gateway.fix.as_deref().unwrap().contains("catalog gateway-image IMAGE"), "{gateway:?}");
    assert!(report(&findings).1, "warnings alone pass");

    // The skeleton's own placeholder (walked on a clean machine: its fix
    // began with a `docker pull` of an image no registry serves): said as
    // such, and the fix is only the pin.
    let placeholder = crate::install::setup::policy_skeleton("alice");
    let gateway_image: serde_json::Value = serde_json::from_str(&placeholder).unwrap();
    let gateway_image = gateway_image["nginx_image"].as_str().unwrap().to_owned();
    assert!(gateway_image.starts_with(crate::install::setup::PLACEHOLDER_REGISTRY), "{gateway_image}");
    if let Ok(facts) = &mut probe.policy {
        facts.images = vec![gateway_image.clone()];
        facts.gateway = gateway_image;
    }
    let findings = diagnose(&install.paths, &probe);
    let gateway = findings.iter().find(|f| f.subject == "image").unwrap();
    assert!(gateway.detail.contains("the policy skeleton's placeholder"), "{gateway:?}");
    let fix = gateway.fix.as_deref().unwrap();
    assert!(!fix.contains("docker pull") && fix.contains("catalog gateway-image IMAGE"), "{gateway:?}");
}

/// An image not pulled yet, or built for another user or command, is a
/// warning: doctor still passes (a fresh server pulls at the first deploy).
#[test]
fn catalog_images_that_are_missing_or_do_not_fit_are_warnings() {
    let install = install();
    let missing = diagnose(&install.paths, &FakeProbe { images_present: false, ..Default::default() });
    // The fake engine is a 20.10 one, whose own warning is not this test's.
    let warned: Vec<&Finding> =
        missing.iter().filter(|f| f.level == Level::Warn && f.subject == "image").collect();
    assert_eq!(warned.len(), 2, "{missing:#?}");
    assert!(warned.iter().all(|f| f.detail.contains("not in the local engine")));
    let (text, healthy) = report(&missing);
    assert!(healthy, "warnings alone pass:\n{text}");
    assert!(
        text.contains("WARN image: ") && text.contains("warning(s)") && text.ends_with("all checks passed\n"),
        "{text}"
    );

    struct Misfit(FakeProbe, ImageConfig);
    impl DoctorProbe for Misfit {
        fn docker_version(&self) -> Result<String, String> {
            self.0.docker_version()
        }
        fn image_config(&self, _reference: &str) -> Option<ImageConfig> {
            Some(self.1.clone())
        }
        fn sudoers_valid(&self, path: &Path) -> bool {
            self.0.sudoers_valid(path)
        }
        fn groups_of(&self, user: &str) -> Option<Vec<String>> {
            self.0.groups_of(user)
        }
        fn policy(&self, path: &Path) -> Result<PolicyFacts, String> {
            self.0.policy(path)
        }
        fn store(&self, dir: &Path) -> Result<Option<StoreHealth>, String> {
            self.0.store(dir)
        }
        fn drift(&self, dir: &Path) -> Result<Vec<AppDrift>, String> {
            self.0.drift(dir)
        }
    }
    let words = |words: &[&str]| -> Vec<String> { words.iter().map(|w| (*w).to_owned()).collect() };
    for (config, app_says, gateway_says) in [
        // Root by default: neither fits.
        (
            ImageConfig {
                user: String::new(),
                cmd: words(&["nginx", "-g", "daemon off;"]),
                entrypoint: vec![],
                ..Default::default()
            },
            Some("its USER is root (no USER), but volce-lab runs it as 1000:1000"),
            Some("its USER is root (no USER), but volce-lab runs it as 101:101"),
        ),
        // A name, not the uid volce-lab passes.
        (
            ImageConfig {
                user: "www-data".into(),
                cmd: words(&["/bin/app"]),
                entrypoint: vec![],
                ..Default::default()
            },
            Some("its USER is `www-data`"),
            Some("does not start nginx in the foreground"),
        ),
        // The app's uid and no command at all.
        (
            ImageConfig { user: "1000:1000".into(), cmd: vec![], entrypoint: vec![], ..Default::default() },
            Some("it has no CMD or ENTRYPOINT"),
            Some("runs it as 101:101"),
        ),
        // nginx, but daemonizing: the container would exit at once.
        (
            ImageConfig {
                user: "101".into(),
                cmd: words(&["/usr/sbin/nginx"]),
                entrypoint: vec![],
                ..Default::default()
            },
            Some("runs it as 1000:1000"),
            Some("does not start nginx in the foreground"),
        ),
        // The official image's shape with the unprivileged user fits the gateway.
        (
            ImageConfig {
                user: "101".into(),
                cmd: words(&["nginx", "-g", "daemon off;"]),
                entrypoint: words(&["/docker-entrypoint.sh"]),
                ..Default::default()
            },
            Some("runs it as 1000:1000"),
            None,
        ),
    ] {
        let findings = diagnose(&install.paths, &Misfit(FakeProbe::default(), config.clone()));
        assert!(report(&findings).1, "{config:?}: misfits are warnings only");
        let images: Vec<&Finding> = findings.iter().filter(|f| f.subject == "image").collect();
        for (finding, says) in images.iter().zip([app_says, gateway_says]) {
            match says {
                Some(says) => assert!(
                    finding.level == Level::Warn && finding.detail.contains(says),
                    "{config:?}: want a warning with {says:?}, got {finding}"
                ),
                None => assert_eq!(finding.level, Level::Ok, "{config:?}: {finding}"),
            }
        }
    }
}

/// Tried: a catalog naming an env file that is good, then group-readable,
/// then has a line without '=', then missing: the good one is an ok
/// finding with its count, each other a failure naming the file (and the
/// line), with the chown/chmod fix, and never the value.
#[test]
fn each_env_file_is_checked_for_owner_mode_and_text() {
    let install = install();
    let dir = install.paths.policy.parent().unwrap().join("apps");
    std::fs::create_dir(&dir).unwrap();
    chmod(&dir, 0o755);
    let file = dir.join("web.env");
    std::fs::write(&file, "TOKEN=s3cr3t-value\nDEBUG=1\n").unwrap();
    chmod(&file, 0o600);
    let mut facts = FakeProbe::default().policy.unwrap();
    facts.env_files = vec![crate::vocab::EnvFileName::parse("web.env").unwrap()];
    let probe = FakeProbe { policy: Ok(facts), ..Default::default() };
    let finding = |probe: &FakeProbe| {
        diagnose(&install.paths, probe)
            .into_iter()
            .find(|f| f.subject == "env file")
            .expect("an env file finding")
    };
    let good = finding(&probe);
    assert!(!good.failed() && good.detail.contains("mode 0600, 2 variable(s)"), "{good}");
    chmod(&file, 0o640);
    let readable = finding(&probe);
    assert!(readable.failed() && readable.detail.contains("has mode 0640"), "{readable}");
    assert!(
        readable.fix.as_deref().unwrap().contains(&format!("chmod 600 {}", file.display())),
        "{readable}"
    );
    chmod(&file, 0o600);
    std::fs::write(&file, "TOKEN=s3cr3t-value\ns3cr3t-value\n").unwrap();
    let bad = finding(&probe);
    assert!(bad.failed() && bad.detail.contains("line 2 has no '='"), "{bad}");
    assert!(!bad.to_string().contains("s3cr3t"), "{bad}");
    std::fs::remove_file(&file).unwrap();
    let missing = finding(&probe);
    assert!(missing.failed() && missing.detail.contains("does not exist"), "{missing}");
}

/// Tried: an app with data mounted (ok), one recorded running whose data
/// is not mounted (warn: a restart plan), a stopped one not mounted (ok:
/// kept), and one whose image is gone (fail, with the way out).
#[test]
fn each_apps_data_is_a_finding_with_its_way_out() {
    use super::data::{DataFacts, check_data};
    use crate::control::app_record::AppState;
    let facts = |app: &str, state, image_ok, mounted| DataFacts {
        app: app.into(),
        owner: app.into(),
        image: format!("/var/lib/volce-lab/data/{app}.ext4").into(),
        max_mib: 64,
        state,
        image_ok,
        mounted,
        backup: Some(Default::default()),
        staged: None,
    };
    let mut findings = Vec::new();
    let all = vec![
        facts("up", AppState::Running, true, true),
        facts("rebooted", AppState::Running, true, false),
        facts("parked", AppState::Stopped, true, false),
        facts("lost", AppState::Running, false, false),
        DataFacts {
            staged: Some("/var/lib/volce-lab/data/cut.ext4.restore".into()),
            ..facts("cut", AppState::Stopped, true, false)
        },
    ];
    check_data(Some(Ok(all)), true, &mut findings);
    let (text, _) = super::report(&findings);
    assert!(text.contains("data of up") && text.contains("(64 MiB) is mounted"), "{text}");
    assert!(text.contains("is not mounted although the app should run"), "{text}");
    assert!(text.contains("approve a restart plan of the app"), "{text}");
    assert!(text.contains("is kept, not mounted while the app is stopped"), "{text}");
    assert!(text.contains("lost.ext4 is missing or not a root-owned regular file"), "{text}");
    assert!(text.contains("cut.ext4.restore is left by a restore that stopped"), "{text}");
    assert!(text.contains("next restore plan or its remove_app removes it"), "{text}");
    let mut none = Vec::new();
    check_data(Some(Ok(vec![])), false, &mut none);
    assert!(none.is_empty(), "nothing to say without data: {none:?}");
}

mod signers;

/// The drop-in setup writes since issue 44 (the rpc's options and the
/// rule) is the agent's, as the one-line rule of before is; anything else
/// is not. Tried: both forms, comments and blank lines around them, the
/// file for root, an extra rule, a changed option, the options alone.
#[test]
fn the_sudoers_drop_in_is_setups_file_or_the_one_line_rule_of_before() {
    let file = crate::install::sudoers_file("vl-agent");
    assert_eq!(super::sudoers_agent(&file).as_deref(), Some("vl-agent"));
    assert_eq!(
        super::sudoers_agent(&format!("# a comment\n\n{}\n", sudoers_rule("vl-agent"))).as_deref(),
        Some("vl-agent")
    );
    assert_eq!(
        super::sudoers_agent(&format!("{file}\n# kept by the operator\n")).as_deref(),
        Some("vl-agent")
    );
    let extra = format!("{file}vl-agent ALL=(root) NOPASSWD: /bin/sh\n");
    let changed = file.replace("!pam_session", "pam_session");
    let options_alone: String = file.lines().take(3).map(|l| format!("{l}\n")).collect();
    for bad in [extra, changed, options_alone, String::new()] {
        assert_eq!(super::sudoers_agent(&bad), None, "{bad}");
    }
    // For root it is the agent's own shape, refused by check_sudoers.
    assert_eq!(super::sudoers_agent(&crate::install::sudoers_file("root")).as_deref(), Some("root"));
}

/// Tried: a scheduled app never backed up (late), one backed up an hour
/// ago on a daily schedule (ok), one whose last attempt failed after its
/// last success (warn, naming the step), and a password file others may
/// read (fail); an app backed up by dumps only, its record on its
/// accessory's data (warn when late, by the app's name), and an
/// accessory's data without the record (no finding).
#[test]
fn each_scheduled_backup_is_a_finding_and_a_late_or_failed_one_says_what_to_do() {
    use super::data::{DataFacts, check_backups};
    use crate::vocab::{BackupDone, BackupMissed, BackupRecord, SnapshotId};
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("backup.password");
    std::fs::write(&password, "x\n").unwrap();
    std::fs::set_permissions(&password, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let config: crate::vocab::BackupConfig = serde_json::from_value(serde_json::json!({
        "repository": "/srv/backup", "password_file": password, "keep": {"last": 3},
        "schedule": {"never": "daily", "fresh": "daily", "broken": "hourly", "dumped": "daily"}
    }))
    .unwrap();
    let done =
        |at| BackupDone { at, snapshot: SnapshotId::parse("0123abcd").unwrap(), bytes: 1, added_bytes: 1 };
    let facts = |app: &str, backup| DataFacts {
        app: app.into(),
        owner: app.split('@').next().unwrap().into(),
        image: format!("/var/lib/volce-lab/data/{app}.ext4").into(),
        max_mib: 64,
        state: crate::control::app_record::AppState::Running,
        image_ok: true,
        mounted: true,
        backup: Some(backup),
        staged: None,
    };
    let now = 1_000_000;
    let all = vec![
        facts("never", BackupRecord::default()),
        facts("fresh", BackupRecord { last_success: Some(done(now - 3600)), last_failure: None }),
        facts(
            "broken",
            BackupRecord {
                last_success: Some(done(now - 60)),
                last_failure: Some(BackupMissed { at: now - 30, step: "restic backup".into() }),
            },
        ),
        // An app backed up by its database's dumps only: its record is on
        // its accessory's data, named APP@NAME, scheduled by the app's name.
        facts("dumped@db", BackupRecord::default()),
        DataFacts { backup: None, ..facts("fresh@db", BackupRecord::default()) },
    ];
    let mut findings = Vec::new();
    check_backups(&config, &all, now, &mut findings);
    let text: Vec<String> = findings.iter().map(|f| format!("{f:?}")).collect();
    let about = |subject: &str| text.iter().find(|t| t.contains(subject)).cloned().unwrap_or_default();
    assert!(
        about("backup of never").contains("Warn") && about("backup of never").contains("never"),
        "{text:?}"
    );
    assert!(about("backup of fresh").contains("Ok"), "{text:?}");
    assert!(about("backup of broken").contains("restic backup"), "{text:?}");
    assert!(about("backup of dumped").contains("Warn"), "late like any scheduled app: {text:?}");
    assert!(!text.iter().any(|t| t.contains("fresh@db")), "no record on it: {text:?}");
    assert!(text.iter().any(|t| t.contains("Fail") && t.contains("group or others")), "{text:?}");
}
