//! `volce-lab-host doctor` on the real installation scripts/e2e-setup built
//! (root-owned binary and symlink, policy, sudoers rule, agent account,
//! Docker), then on real broken variants, each undone afterwards. Runs as
//! root; ignored by plain `cargo test`.

use crate::support::e2e::*;

fn doctor() -> Ran {
    run(HOST_LINK, &["doctor"], None)
}

/// Makes the installation whole: the database exists (an inventory rpc
/// creates it) and every pinned image is present in the engine.
fn complete_installation() {
    let rpc = run(HOST_LINK, &["rpc"], Some(br#"{"operation":"inventory"}"#));
    assert!(rpc.ok(), "the helper answers an inventory: {rpc:?}");
    let policy: serde_json::Value = serde_json::from_slice(&std::fs::read(POLICY).unwrap()).unwrap();
    let mut images: Vec<&str> =
        policy["catalog"].as_object().unwrap().values().filter_map(|v| v.as_str()).collect();
    images.push(policy["nginx_image"].as_str().unwrap());
    for image in images {
        let pull = run(DOCKER, &["pull", "-q", image], None);
        assert!(pull.ok(), "pull {image}: {pull:?}");
    }
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn doctor_passes_a_good_installation_and_names_each_real_breakage() {
    require_setup();
    require_docker_and_policy();
    let _serial = serial();
    // Other suites remove their apps' containers by hand and leave the
    // records: drift, which the doctor rightly reports. A good installation
    // starts from the helper's fresh state.
    fresh_host_state(&[]);
    complete_installation();

    let good = doctor();
    assert_eq!(good.code, Some(0), "a good installation passes:\n{}", good.stdout);
    assert!(good.stdout.ends_with("all checks passed\n"), "{}", good.stdout);
    assert!(!good.stdout.contains("FAIL"), "{}", good.stdout);

    // The policy readable and writable by everyone.
    run("/bin/chmod", &["0666", POLICY], None);
    let broken = doctor();
    run("/bin/chmod", &["0600", POLICY], None);
    assert_eq!(broken.code, Some(1), "{}", broken.stdout);
    assert!(broken.stdout.contains("FAIL policy file"), "{}", broken.stdout);
    assert!(broken.stdout.contains("fix: chmod 0600"), "{}", broken.stdout);

    // The agent account in the docker group: the boundary is gone.
    assert!(run("/usr/bin/gpasswd", &["-a", AGENT, "docker"], None).ok());
    let broken = doctor();
    assert!(run("/usr/bin/gpasswd", &["-d", AGENT, "docker"], None).ok());
    assert_eq!(broken.code, Some(1), "{}", broken.stdout);
    assert!(broken.stdout.contains("FAIL agent account"), "{}", broken.stdout);

    // A sudoers rule broader than the one line.
    let sudoers = "/etc/sudoers.d/volce-lab";
    let original = std::fs::read(sudoers).unwrap();
    std::fs::write(sudoers, format!("{AGENT} ALL=(root) NOPASSWD: {HOST_LINK} *\n")).unwrap();
    let broken = doctor();
    std::fs::write(sudoers, &original).unwrap();
    assert_eq!(broken.code, Some(1), "{}", broken.stdout);
    assert!(broken.stdout.contains("FAIL sudoers rule"), "{}", broken.stdout);

    // The agent's key file back in the account's hands, or without the
    // gate; its shell bash; one more sudo rule anywhere.
    let keys = format!("/home/{AGENT}/.ssh/authorized_keys");
    let original_keys = std::fs::read(&keys).unwrap();
    assert!(run("/bin/chown", &[AGENT, &keys], None).ok());
    let broken = doctor();
    assert!(run("/bin/chown", &["root", &keys], None).ok());
    assert!(broken.stdout.contains("FAIL agent key"), "{}", broken.stdout);
    let ungated = String::from_utf8(original_keys.clone()).unwrap().replacen(
        "restrict,command=\"exec /usr/local/bin/volce-lab-host ssh-gate\"",
        "restrict",
        1,
    );
    std::fs::write(&keys, ungated).unwrap();
    let broken = doctor();
    std::fs::write(&keys, &original_keys).unwrap();
    assert!(broken.stdout.contains("FAIL agent key"), "{}", broken.stdout);
    assert!(run("/usr/sbin/usermod", &["--shell", "/bin/bash", AGENT], None).ok());
    let broken = doctor();
    // setup's shell before 0.2.0: a warning with its fix, not a failure.
    assert!(run("/usr/sbin/usermod", &["--shell", "/bin/sh", AGENT], None).ok());
    let old_shell = doctor();
    assert!(run("/usr/sbin/usermod", &["--shell", HOST_LINK, AGENT], None).ok());
    assert!(broken.stdout.contains("FAIL agent shell"), "{}", broken.stdout);
    assert!(old_shell.stdout.contains("WARN agent shell: /bin/sh"), "{}", old_shell.stdout);
    assert!(!old_shell.stdout.contains("FAIL agent shell"), "{}", old_shell.stdout);
    {
        let _extra = SudoersDropIn::install(
            "volce-lab-e2e-broad",
            &format!("{AGENT} ALL=(root) NOPASSWD: /usr/bin/id"),
        );
        let broken = doctor();
        assert!(broken.stdout.contains("FAIL sudo -l"), "{}", broken.stdout);
    }

    // Everything restored: healthy again.
    let again = doctor();
    assert_eq!(again.code, Some(0), "restored:\n{}", again.stdout);
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn doctor_refuses_to_run_as_the_agent() {
    require_setup();
    let ran = as_agent("sudo -n /usr/local/bin/volce-lab-host doctor", None);
    assert_ne!(ran.code, Some(0), "the agent's sudo rule allows rpc only: {ran:?}");
    assert!(!ran.stdout.contains("all checks passed"));
}
