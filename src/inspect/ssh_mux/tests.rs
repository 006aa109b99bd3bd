//! The multiplexer's pure parts: directory checks, master keys, argv.

use super::*;
use std::os::unix::fs::PermissionsExt as _;

fn ssh(config: Option<PathBuf>) -> SshTransport {
    SshTransport {
        alias: "course-demo".into(),
        config_file: config,
        connect_timeout: Duration::from_secs(8),
        auth_sock: None,
    }
}

fn limits() -> RunLimits {
    RunLimits { output: 8192, timeout: Duration::from_secs(12) }
}

fn argv(spec: &ProcessSpec) -> Vec<String> {
    spec.args.iter().map(|a| a.to_string_lossy().into_owned()).collect()
}

fn private_tempdir() -> tempfile::TempDir {
    let temp = tempfile::tempdir().unwrap();
    fs::set_permissions(temp.path(), fs::Permissions::from_mode(0o700)).unwrap();
    temp
}

#[test]
fn mux_options_go_before_the_alias_and_keep_the_hardened_argv() {
    let temp = private_tempdir();
    let mux = MultiplexedSsh::with_dir(ssh(None), temp.path().join("ssh"));
    let plain = argv(&mux.ssh().specs(RemoteCommand::Disk, None, limits())[0]);
    let spec = &mux.specs(RemoteCommand::Disk, None, limits())[0];
    let args = argv(spec);
    let path = mux.control_path().unwrap();
    let control = format!("ControlPath={}", path.display());
    for option in ["ControlMaster=auto", control.as_str(), "ControlPersist=60"] {
        let at = args.iter().position(|a| a == option).unwrap_or_else(|| panic!("{option} missing"));
        assert_eq!(args[at - 1], "-o");
    }
    // The plain argv is intact, in order, with the mux options added
    // before `--`: alias last but one, fixed command last.
    let without: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| !(a.starts_with("Control") || (*a == "-o" && args[i + 1].starts_with("Control"))))
        .map(|(_, a)| a)
        .collect();
    assert_eq!(without, plain.iter().collect::<Vec<_>>());
    assert_eq!(args[args.len() - 2], "course-demo");
    assert_eq!(args[args.len() - 1], "LC_ALL=C df -h /");
    assert!(args.iter().position(|a| a == "ControlMaster=auto") < args.iter().position(|a| a == "--"));
    assert_eq!(spec.program, PathBuf::from("/usr/bin/ssh"));
}

#[test]
fn control_directory_is_created_private() {
    let temp = private_tempdir();
    let dir = temp.path().join("a/b/ssh");
    private_dir(&dir).unwrap();
    let meta = fs::symlink_metadata(&dir).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o700);
    // Twice is fine.
    private_dir(&dir).unwrap();
}

#[test]
fn open_or_foreign_control_directories_are_refused_not_repaired() {
    let temp = private_tempdir();
    let open = temp.path().join("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
    assert!(private_dir(&open).is_err(), "0755 directory accepted");
    assert_eq!(fs::metadata(&open).unwrap().mode() & 0o777, 0o755, "must not be repaired");

    let target = temp.path().join("target");
    fs::create_dir(&target).unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o700)).unwrap();
    let link = temp.path().join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert!(private_dir(&link).is_err(), "symlink accepted");

    let file = temp.path().join("file");
    fs::write(&file, b"").unwrap();
    assert!(private_dir(&file).is_err(), "file accepted");

    let writable_parent = temp.path().join("shared");
    fs::create_dir(&writable_parent).unwrap();
    fs::set_permissions(&writable_parent, fs::Permissions::from_mode(0o777)).unwrap();
    assert!(private_dir(&writable_parent.join("ssh")).is_err(), "world-writable parent accepted");

    assert!(private_dir(Path::new("relative/ssh")).is_err());
}

#[test]
fn without_a_private_directory_checks_use_fresh_connections() {
    let temp = private_tempdir();
    let open = temp.path().join("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
    let mux = MultiplexedSsh::with_dir(ssh(None), open);
    assert!(matches!(mux.unavailable(), Some(MuxUnavailable::NoDirectory(_))));
    let spec = &mux.specs(RemoteCommand::Identity, None, limits())[0];
    assert_multiplexing_off(&argv(spec));
}

/// The argv of a run without multiplexing: no master, no control socket,
/// set on the command line so no ssh_config can bring either back.
fn assert_multiplexing_off(args: &[String]) {
    let end = args.iter().position(|a| a == "--").expect("our argv ends options with --");
    for option in ["ControlMaster=no", "ControlPath=none"] {
        let at =
            args.iter().position(|a| a == option).unwrap_or_else(|| panic!("{option} missing: {args:?}"));
        assert_eq!(args[at - 1], "-o");
        assert!(at < end, "{option} after --: {args:?}");
    }
    assert!(!args.iter().any(|a| a.starts_with("ControlPersist")), "{args:?}");
}

/// Issue 38: without a private directory the plain argv let ssh honour
/// the ControlPath of the user's ssh_config, where another local user
/// could have planted a socket (ssh connected to it and sent a mux
/// hello). What ssh makes of our argv is read from `ssh -G`, which
/// resolves the configuration and connects nowhere.
#[test]
fn without_a_private_directory_a_configured_control_path_is_never_used() {
    let temp = private_tempdir();
    let open = temp.path().join("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
    let config = temp.path().join("ssh_config");
    let planted = temp.path().join("planted");
    fs::write(
        &config,
        format!(
            "Host course-demo\n    HostName 192.0.2.1\n    ControlMaster auto\n    ControlPath {}\n",
            planted.display()
        ),
    )
    .unwrap();
    let mux = MultiplexedSsh::with_dir(ssh(Some(config)), open);
    let spec = &mux.specs(RemoteCommand::Identity, None, limits())[0];
    assert_multiplexing_off(&argv(spec));
    if !Path::new(SSH_PROGRAM).exists() {
        eprintln!("no {SSH_PROGRAM}: the argv is checked, ssh's reading of it is not");
        return;
    }
    let out = std::process::Command::new(SSH_PROGRAM)
        .arg("-G")
        .args(&spec.args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let resolved = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    let lines: Vec<&str> = resolved.lines().collect();
    assert!(lines.contains(&"hostname 192.0.2.1"), "the config was read: {resolved}");
    assert!(lines.contains(&"controlmaster false"), "{resolved}");
    // ssh -G prints no controlpath line at all when it is none.
    assert!(!resolved.contains(&planted.display().to_string().to_ascii_lowercase()), "{resolved}");
    assert!(lines.iter().all(|l| !l.starts_with("controlpath ") || *l == "controlpath none"), "{resolved}");
}

#[test]
fn a_socket_path_too_long_for_sun_path_disables_multiplexing() {
    let temp = private_tempdir();
    let long = temp.path().join("x".repeat(90));
    let mux = MultiplexedSsh::with_dir(ssh(None), long);
    assert!(matches!(mux.unavailable(), Some(MuxUnavailable::PathTooLong(_))));
    let spec = &mux.specs(RemoteCommand::Identity, None, limits())[0];
    assert_multiplexing_off(&argv(spec));
}

#[test]
fn a_changed_ssh_config_gets_another_master() {
    let temp = private_tempdir();
    let config = temp.path().join("ssh_config");
    fs::write(&config, "Host course-demo\n    User agent\n").unwrap();
    let mux = MultiplexedSsh::with_dir(ssh(Some(config.clone())), temp.path().join("ssh"));
    let first = mux.control_path().unwrap();
    assert_eq!(mux.control_path().unwrap(), first, "stable while nothing changes");
    fs::write(&config, "Host course-demo\n    User other\n").unwrap();
    let second = mux.control_path().unwrap();
    assert_ne!(first, second);
    let other_alias = MultiplexedSsh::with_dir(
        SshTransport { alias: "other".into(), ..ssh(Some(config)) },
        temp.path().join("ssh"),
    );
    assert_ne!(other_alias.control_path().unwrap(), second);
}

/// The master we last used, if any.
fn remembered(mux: &MultiplexedSsh) -> Option<PathBuf> {
    mux.master.lock().unwrap().as_ref().map(|m| m.path.clone())
}

#[test]
fn reset_without_a_master_is_harmless() {
    let temp = private_tempdir();
    let dir = temp.path().join("ssh");
    let mux = MultiplexedSsh::with_dir(ssh(None), dir.clone());
    mux.reset();
    assert_eq!(remembered(&mux), None);
    let _ = mux.specs(RemoteCommand::Identity, None, limits());
    let path = mux.control_path().unwrap();
    assert_eq!(remembered(&mux), Some(path.clone()), "specs chose the master");
    // No master is listening on the path: nothing to tell, nothing to
    // remove, but the master is forgotten so the next check starts afresh.
    mux.reset();
    assert_eq!(remembered(&mux), None, "reset forgets the master");
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 0, "nothing created");
    assert_eq!(mux.master_socket_present(), Some(false));
    // Only a socket is ever removed: a file that is not one stays.
    let _ = mux.specs(RemoteCommand::Identity, None, limits());
    fs::write(&path, "not a socket").unwrap();
    mux.reset();
    assert_eq!(remembered(&mux), None);
    assert_eq!(fs::read_to_string(&path).unwrap(), "not a socket");
    assert_eq!(mux.carried(), Carried { in_process: 0, by_client: 0 }, "nothing ran");
}

#[test]
fn exit_argv_reads_no_config_and_ends_with_the_alias() {
    let args: Vec<String> = exit_argv("course-demo", Path::new("/run/user/1/volce-lab-ssh/ab"))
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        args,
        [
            "-F",
            "/dev/null",
            "-o",
            "ControlPath=/run/user/1/volce-lab-ssh/ab",
            "-O",
            "exit",
            "--",
            "course-demo"
        ]
    );
}

/// Only our own argv over a socket of ours, directly in the checked
/// directory, is spoken to in-process; anything else goes to the client.
#[test]
fn only_our_argv_over_our_socket_in_the_private_directory_goes_in_process() {
    let temp = private_tempdir();
    let mux = MultiplexedSsh::with_dir(ssh(None), temp.path().join("ssh"));
    let spec = mux.specs(RemoteCommand::Disk, None, limits()).remove(0);
    assert_eq!(mux.session_of(&spec), None, "no master yet: the client starts it");
    let socket = mux.control_path().unwrap();
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    assert_eq!(mux.session_of(&spec), Some((socket.clone(), "LC_ALL=C df -h /".to_owned())));

    let mut other_alias = spec.clone();
    let at = other_alias.args.len() - 2;
    other_alias.args[at] = "elsewhere".into();
    assert_eq!(mux.session_of(&other_alias), None);
    let mut elsewhere = spec.clone();
    let outside = temp.path().join("outside");
    let _outside = std::os::unix::net::UnixListener::bind(&outside).unwrap();
    for arg in &mut elsewhere.args {
        if arg.to_string_lossy().starts_with("ControlPath=") {
            *arg = format!("ControlPath={}", outside.display()).into();
        }
    }
    assert_eq!(mux.session_of(&elsewhere), None, "a socket outside the control directory");
    // The directory opened to others since: refused, not used.
    fs::set_permissions(temp.path().join("ssh"), fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(mux.session_of(&spec), None);
    drop(listener);
}
