//! The CLI's parsing: host mode, the subcommands, rpc's help text.

use super::*;

#[test]
fn host_mode_needs_the_exact_file_name() {
    assert!(is_host_name(&"/usr/local/bin/volce-lab-host".into()));
    assert!(is_host_name(&"volce-lab-host".into()));
    assert!(!is_host_name(&"/usr/local/bin/volce-lab-host2".into()));
    assert!(!is_host_name(&"volce-lab-host.bak".into()));
    assert!(!is_host_name(&"volce-lab".into()));
    assert!(!is_host_name(&"/tmp/volce-lab-host/volce-lab".into()));
}

/// The front of rpc starts its worker under the name that selects host
/// mode, and with the subcommand this CLI parses.
#[test]
fn the_rpc_worker_is_started_under_the_host_name_and_parses() {
    assert_eq!(crate::host::front::HOST_NAME, HOST_NAME);
    let cli = HostCli::try_parse_from([HOST_NAME, crate::host::front::WORKER]).unwrap();
    assert!(matches!(cli.command, HostCommand::RpcWorker));
}

/// What the per-request match takes without clap: the argv the key line,
/// sshd (the gate as the login shell), sudo and the front give, each the
/// command clap would choose where clap parses it at all; anything else,
/// near misses included, is left to clap.
#[test]
fn per_request_argv_skip_clap_and_choose_what_clap_would() {
    let argv = |words: &[&str]| words.iter().map(OsString::from).collect::<Vec<_>>();
    let per = |words: &[&str]| per_request(&argv(words));
    for words in [
        &["/usr/local/bin/volce-lab-host", "ssh-gate"][..],
        &["/usr/local/bin/volce-lab-host", "rpc"],
        &["volce-lab-host", "rpc-worker"],
    ] {
        let clap = HostCli::try_parse_from(argv(words)).unwrap().command;
        assert_eq!(format!("{:?}", per(words).unwrap()), format!("{clap:?}"), "{words:?}");
    }
    // sshd: the shell's base name, -c and the forced command; a login.
    let gate = |words: &[&str]| matches!(per(words), Some(HostCommand::SshGate));
    assert!(gate(&["volce-lab-host", "-c", "exec /usr/local/bin/volce-lab-host ssh-gate"]));
    assert!(gate(&["volce-lab-host", "-c", "/usr/local/bin/volce-lab-host ssh-gate"]));
    assert!(
        gate(&["volce-lab-host", "-c", "ls /"]),
        "the command is never run: the gate answers SSH_ORIGINAL_COMMAND"
    );
    assert!(gate(&["-volce-lab-host"]));
    for near in [
        &["volce-lab-host"][..],
        &["volce-lab-host", "ssh-gate", "ls"],
        &["volce-lab-host", "rpc", "--help"],
        &["volce-lab-host", "-c"],
        &["volce-lab-host", "-c", "x", "y"],
        // sshd starts `~/.ssh/rc` as `SHELL -c ...` with the shell's whole
        // path for argv[0]: never the gate (and `restrict` turns rc off).
        &["/usr/local/bin/volce-lab-host", "-c", "x"],
        &["-volce-lab-host", "-c", "x"],
        &["-volce-lab"],
        &["volce-lab", "rpc"],
        &["volce-lab", "-c", "x"],
        &["/tmp/volce-lab-host2", "ssh-gate"],
    ] {
        assert!(per(near).is_none(), "{near:?} is clap's to parse");
    }
}

#[test]
fn rpc_help_names_every_operation_and_the_size_limit() {
    use strum::VariantArray as _;
    let help = rpc_help();
    for operation in crate::wire::Operation::VARIANTS {
        let key = format!("{{\"operation\":\"{}\"", operation.as_str());
        assert!(help.contains(&key), "{key} missing from rpc --help");
    }
    assert!(help.contains(&format!("{} KiB", crate::wire::MAX_REQUEST_BYTES / 1024)));
    let deadline = crate::host::process::REQUEST_DEADLINE.as_secs();
    assert!(help.contains(&format!("within {deadline} seconds")));
    assert!(help.contains(&format!("at most {} helpers", crate::host::process::RPC_SLOTS)));
    for action in crate::vocab::Action::ALL {
        assert!(help.contains(action.as_str()), "{} missing from rpc --help", action.as_str());
    }
    use crate::vocab::Step;
    use crate::wire::progress::MAX_PROGRESS_LINES;
    assert!(help.contains("{\"progress\":S}"));
    assert!(help.contains(&format!("at most {MAX_PROGRESS_LINES}")));
    for step in Step::VARIANTS {
        assert!(help.contains(step.as_str()), "{} missing from rpc --help", step.as_str());
    }
}

#[test]
fn host_commands_parse_with_the_list_alias() {
    let parse = |args: &[&str]| HostCli::try_parse_from(args).map(|cli| cli.command);
    assert!(matches!(
        parse(&["volce-lab-host", "list"]),
        Ok(HostCommand::List { json: false, watch: false, .. })
    ));
    assert!(matches!(
        parse(&["volce-lab-host", "pending", "--json"]),
        Ok(HostCommand::List { json: true, .. })
    ));
    assert!(matches!(parse(&["volce-lab-host", "reject", "abc"]), Ok(HostCommand::Reject { .. })));
    assert!(parse(&["volce-lab-host", "reject"]).is_err(), "reject needs a plan id");
    assert!(matches!(
        parse(&["volce-lab-host", "approve", "a", "b"]),
        Ok(HostCommand::Approve { yes: false, .. })
    ));
    assert!(matches!(
        parse(&["volce-lab-host", "approve", "a", "b", "--yes"]),
        Ok(HostCommand::Approve { yes: true, .. })
    ));
    assert!(parse(&["volce-lab-host", "approve", "a", "b", "--yes=no"]).is_err());
    assert!(matches!(
        parse(&["volce-lab-host", "audit", "verify"]),
        Ok(HostCommand::Audit(AuditCommand::Verify { from: None }))
    ));
    assert!(matches!(
        parse(&["volce-lab-host", "audit", "verify", "--from", "abc"]),
        Ok(HostCommand::Audit(AuditCommand::Verify { from: Some(_) }))
    ));
    assert!(matches!(
        parse(&["volce-lab-host", "audit", "head"]),
        Ok(HostCommand::Audit(AuditCommand::Head))
    ));
    assert!(matches!(
        parse(&["volce-lab-host", "audit", "prune", "--before", "2026-09-01T00:00:00Z"]),
        Ok(HostCommand::Audit(AuditCommand::Prune { .. }))
    ));
    assert!(matches!(
        parse(&["volce-lab-host", "audit", "export", "--json", "--since", "2026-12-01T00:00:00Z"]),
        Ok(HostCommand::Audit(AuditCommand::Export { json: true, since: Some(_) }))
    ));
    assert!(parse(&["volce-lab-host", "audit"]).is_err(), "audit needs a subcommand");
    assert!(matches!(
        parse(&["volce-lab-host", "catalog", "pin", "web", "r.example/web:1", "--container-port", "8080"]),
        Ok(HostCommand::Catalog(CatalogCommand::Pin { container_port: Some(8080), yes: false, .. }))
    ));
    assert!(parse(&["volce-lab-host", "catalog", "pin", "web"]).is_err(), "pin needs an image");
    assert!(parse(&["volce-lab-host", "catalog", "pin", "web", "x", "--container-port", "70000"]).is_err());
    assert!(matches!(
        parse(&["volce-lab-host", "catalog", "remove", "web", "--yes"]),
        Ok(HostCommand::Catalog(CatalogCommand::Remove { yes: true, .. }))
    ));
    assert!(matches!(
        parse(&["volce-lab-host", "catalog", "list"]),
        Ok(HostCommand::Catalog(CatalogCommand::List))
    ));
    // Issue 37: the gateway image and an entry's env file have commands.
    assert!(matches!(
        parse(&["volce-lab-host", "catalog", "gateway-image", "r.example/gw:1", "--yes"]),
        Ok(HostCommand::Catalog(CatalogCommand::GatewayImage { yes: true, .. }))
    ));
    assert!(matches!(
        parse(&["volce-lab-host", "catalog", "env-file", "web", "/etc/volce-lab/apps/web.env"]),
        Ok(HostCommand::Catalog(CatalogCommand::EnvFile { path: Some(_), none: false, .. }))
    ));
    assert!(matches!(
        parse(&["volce-lab-host", "catalog", "env-file", "web", "--none"]),
        Ok(HostCommand::Catalog(CatalogCommand::EnvFile { path: None, none: true, .. }))
    ));
    for args in [
        &["volce-lab-host", "catalog", "env-file", "web"][..],
        &["volce-lab-host", "catalog", "env-file", "web", "/etc/volce-lab/apps/web.env", "--none"],
        &["volce-lab-host", "catalog", "gateway-image"],
    ] {
        assert!(parse(args).is_err(), "{args:?}: a path or --none, exactly one; an image");
    }
    assert!(matches!(parse(&["volce-lab-host", "data", "list"]), Ok(HostCommand::Data(DataCommand::List))));
    assert!(matches!(parse(&["volce-lab-host", "data", "mount"]), Ok(HostCommand::Data(DataCommand::Mount))));
    assert!(matches!(
        parse(&["volce-lab-host", "data", "purge", "blog", "--yes"]),
        Ok(HostCommand::Data(DataCommand::Purge { yes: true, .. }))
    ));
    assert!(parse(&["volce-lab-host", "data", "purge"]).is_err(), "purge needs an app");
    assert!(parse(&["volce-lab-host", "data", "mount", "blog"]).is_err(), "mount takes no app");
    assert!(parse(&["volce-lab-host", "data"]).is_err(), "data needs a subcommand");
    // Issue 46: the pause and the state commands.
    assert!(matches!(
        parse(&["volce-lab-host", "pause", "--reason", "downgrade"]),
        Ok(HostCommand::Pause { reason: Some(_) })
    ));
    assert!(matches!(parse(&["volce-lab-host", "pause"]), Ok(HostCommand::Pause { reason: None })));
    assert!(matches!(parse(&["volce-lab-host", "resume"]), Ok(HostCommand::Resume)));
    assert!(parse(&["volce-lab-host", "resume", "now"]).is_err(), "resume takes nothing");
    assert!(matches!(
        parse(&["volce-lab-host", "state", "backup", "--into", "/root/b"]),
        Ok(HostCommand::State(StateCommand::Backup { into: Some(_) }))
    ));
    assert!(matches!(
        parse(&["volce-lab-host", "state", "restore", "/root/b", "--for-downgrade"]),
        Ok(HostCommand::State(StateCommand::Restore { for_downgrade: true, .. }))
    ));
    assert!(parse(&["volce-lab-host", "state", "restore"]).is_err(), "restore needs a backup");
    assert!(matches!(
        parse(&["volce-lab-host", "state", "diff"]),
        Ok(HostCommand::State(StateCommand::Diff))
    ));
    assert!(matches!(
        parse(&["volce-lab-host", "state", "remove-container", "vl-demo-app", "--yes"]),
        Ok(HostCommand::State(StateCommand::RemoveContainer { yes: true, .. }))
    ));
    assert!(parse(&["volce-lab-host", "state", "remove-container"]).is_err(), "it names one container");
    assert!(matches!(parse(&["volce-lab-host", "ssh-gate"]), Ok(HostCommand::SshGate)));
    assert!(parse(&["volce-lab-host", "ssh-gate", "ls"]).is_err(), "the gate takes no arguments");
}

#[test]
fn clap_definitions_are_consistent() {
    use clap::CommandFactory;
    Cli::command().debug_assert();
    HostCli::command().debug_assert();
}
