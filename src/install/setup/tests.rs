//! The pure parts of setup: which names and key files it accepts, the exact
//! line it binds the key with, and the policy skeleton. The steps that
//! create accounts and files run as root in the real suite `package`.

use super::manifest::sha256;
use super::*;

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB3Kc0v3oY3W0m7Xb9Gx9mR1c8b6yqkQm8uVZk7b5n2Q someone@laptop";

#[test]
fn a_key_from_ssh_keygen_is_accepted_and_its_comment_replaced() {
    let (kind, blob) = parse_public_key(&format!("{KEY}\n")).unwrap();
    assert_eq!(kind, "ssh-ed25519");
    assert_eq!(
        authorized_keys_line(&kind, &blob),
        format!(
            "restrict,command=\"exec /usr/local/bin/volce-lab-host ssh-gate\" ssh-ed25519 {blob} volce-lab-agent\n"
        )
    );
}

#[test]
fn the_sudoers_drop_in_is_the_one_rule_and_options_for_the_rpc_alone() {
    let text = crate::install::sudoers_file("vl-agent");
    assert_eq!(
        text,
        "# volce-lab: the agent may run the helper's rpc only (docs/server-install.md)\n\
         Cmnd_Alias VOLCE_LAB_RPC = /usr/local/bin/volce-lab-host rpc\n\
         Defaults!VOLCE_LAB_RPC !use_pty, !pam_session, !pam_setcred\n\
         vl-agent ALL=(root) NOPASSWD: /usr/local/bin/volce-lab-host rpc\n"
    );
    // One grant, and no option that widens what the caller can pass.
    assert_eq!(text.matches("NOPASSWD").count(), 1);
    for widening in ["setenv", "env_keep", "SETENV", "!env_reset", "ALL, ", "!authenticate"] {
        assert!(!text.contains(widening), "{widening} in {text}");
    }
}

#[test]
fn key_files_that_could_smuggle_options_or_lines_are_refused() {
    for (what, text) in [
        ("empty file", String::new()),
        ("two keys", format!("{KEY}\n{KEY}\n")),
        ("options in front", format!("command=\"/bin/sh\" {KEY}")),
        ("restrict turned off by a leading option", format!("no-restrict {KEY}")),
        ("a private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n".to_owned()),
        ("no key after the type", "ssh-ed25519".to_owned()),
        ("a quote in the key", "ssh-ed25519 AAAAC3NzaC1lZDI1\"NTE5AAAAIB3".to_owned()),
        ("an unknown type", "ssh-dss AAAAB3NzaC1kc3MAAACBAP".to_owned()),
    ] {
        let refused = parse_public_key(&text).expect_err(what);
        assert!(refused.to_string().starts_with("--key: "), "{what}: {refused}");
    }
}

#[test]
fn account_names_are_checked_before_any_program_runs() {
    for good in ["vl-agent", "_agent", "a", "agent2"] {
        check_account("agent", good).unwrap();
    }
    for bad in ["root", "", "Agent", "-agent", "1agent", "a;b", "a b", "../x", &"a".repeat(33), "agent$"] {
        let refused = check_account("agent", bad).expect_err(bad);
        assert!(matches!(refused, SetupError::BadArgument(_)), "{bad}: {refused}");
        assert!(refused.to_string().contains("--agent"), "{bad}: {refused}");
    }
}

#[test]
fn the_policy_skeleton_parses_and_names_only_the_operator() {
    let skeleton = policy_skeleton("carol");
    let policy = crate::control::policy::Policy::from_json(skeleton.as_bytes()).unwrap();
    assert_eq!(policy.approvers, ["carol"]);
    assert!(!skeleton.contains("//"), "comments are stripped");
    // Issue 37: the skeleton's placeholder keys took two `catalog remove`
    // runs, and the last could not go. It starts empty now.
    assert!(policy.catalog.is_empty(), "no placeholder entries: {skeleton}");
}

#[test]
fn the_manifest_round_trips_and_an_unreadable_one_is_empty() {
    let manifest = Manifest {
        created_account: Some("vl-agent".into()),
        created_home: Some("/home/vl-agent".into()),
        files: vec![WrittenFile { path: SUDOERS.into(), sha256: sha256(b"rule\n") }],
        agent: Some("vl-agent".into()),
        adopted: None,
    };
    let json = serde_json::to_vec(&manifest).unwrap();
    assert_eq!(serde_json::from_slice::<Manifest>(&json).unwrap(), manifest);
    assert_eq!(Manifest::default().files, []);
    // A manifest written before `agent` and `adopted` were recorded still reads.
    let old = br#"{"created_account":"vl-agent","created_home":"/home/vl-agent","files":[]}"#;
    let read: Manifest = serde_json::from_slice(old).unwrap();
    assert_eq!((read.agent, read.adopted), (None, None));
}

/// Setup writes no allowed_signers (undo can therefore never take one):
/// its line says signed approvals are off without the file, and points at
/// doctor's list with it.
#[test]
fn the_allowed_signers_line_says_whether_signed_approvals_can_be_on() {
    let path = HostPaths::fixed().allowed_signers();
    let absent = signers_note(&path, false);
    assert!(absent.starts_with("/etc/volce-lab/allowed_signers does not exist"), "{absent}");
    assert!(absent.contains("terminal only") && absent.contains("Approve from your own device"), "{absent}");
    let present = signers_note(&path, true);
    assert!(present.contains("left as it is") && present.contains("doctor lists"), "{present}");
}
