//! Hermetic tests of stop's and remove_app's first change refused by
//! docker: verified by a fresh inspect before it is called one (nothing
//! changed), and only for the very first change.

use super::*;

fn ids() -> [ContainerId; 2] {
    [ContainerId::parse(&hex('a')).unwrap(), ContainerId::parse(&hex('b')).unwrap()]
}

/// A runner whose `fail` (the first word(s) of the argv) exits 1, and
/// whose inspect of a container prints `inspect`.
fn refusing(fail: String, inspect: Option<&'static str>) -> DockerClient<Fake> {
    let fake = Fake::new(move |args| {
        let line = args.join(" ");
        if line.starts_with(&fail) {
            return Err(1);
        }
        match (args[0].as_str(), inspect) {
            ("inspect", Some(out)) => Ok(out.to_owned()),
            ("inspect", None) => Err(1),
            _ => Ok(String::new()),
        }
    });
    DockerClient::with_runner(fake, "/nonexistent")
}

const INSPECT: &str =
    "inspect --type container --format {{.HostConfig.RestartPolicy.Name}} {{.State.Status}} --";

#[test]
fn a_refused_first_disable_restart_with_the_policy_untouched_is_refused() {
    let engine = refusing(format!("update --restart=no {}", hex('a')), Some("unless-stopped running\n"));
    assert_eq!(engine.stop(&ids()), Err(EngineError::Refused { step: "disable restart" }));
    assert_eq!(
        engine.runner().argv(),
        [format!("update --restart=no {}", hex('a')), format!("{INSPECT} {}", hex('a'))],
        "nothing else was asked"
    );
}

/// Tried: the policy is `no` afterwards (the change may have happened),
/// the container is gone, and a refusal of the second container's change
/// (the first was stopped already): none is verified.
#[test]
fn a_refusal_that_may_have_changed_something_stays_the_calls_error() {
    for inspect in [Some("no running"), None, Some("")] {
        let engine = refusing(format!("update --restart=no {}", hex('a')), inspect);
        let result = engine.stop(&ids());
        assert!(
            matches!(result, Err(EngineError::Call { step: "disable restart", .. })),
            "{inspect:?}: {result:?}"
        );
    }
    let engine = refusing(format!("update --restart=no {}", hex('b')), Some("unless-stopped running"));
    let result = engine.stop(&ids());
    assert!(matches!(result, Err(EngineError::Call { step: "disable restart", .. })), "{result:?}");
    assert!(
        !engine.runner().argv().iter().any(|c| c.starts_with("inspect")),
        "no verification after a change"
    );
}

#[test]
fn remove_app_verifies_a_refused_first_rm_only_when_nothing_was_stopped() {
    let dir = app_dir_with("x");
    let app = AppName::parse("shop").unwrap();
    let containers = ids();
    let removal = |running: &'static [ContainerId]| AppRemoval {
        accessory_data: &[],
        app: &app,
        containers: &containers,
        running,
        networks: &[],
        app_dir: dir.path(),
        data: None,
        purge_data: false,
    };
    let engine = refusing(format!("rm {}", hex('a')), Some("no running"));
    assert_eq!(
        engine.remove_app(&removal(&[])),
        Err(EngineError::Refused { step: "remove app container" }),
        "a container started by hand refuses its rm; nothing changed"
    );
    assert!(dir.path().join("nginx.conf").exists(), "the directory is untouched");
    for state in ["removing", "dead"] {
        let inspect: &'static str = if state == "dead" { "no dead" } else { "no removing" };
        let engine = refusing(format!("rm {}", hex('a')), Some(inspect));
        let result = engine.remove_app(&removal(&[]));
        assert!(matches!(result, Err(EngineError::Call { .. })), "{state}: {result:?}");
    }
    // The second container's rm comes after the first was removed.
    let engine = refusing(format!("rm {}", hex('b')), Some("no running"));
    assert!(matches!(engine.remove_app(&removal(&[])), Err(EngineError::Call { .. })));
}
