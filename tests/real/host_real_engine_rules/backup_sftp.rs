//! backup and restore with the repository on a second server over sftp
//! (issue 41): Debian's sshd on 127.0.0.1 stands in for the backup host,
//! with its own host key, one authorized key and the sftp subsystem only.
//! restic reaches it through the policy's `backup.ssh_config` (its key,
//! address, port and pinned host key, ending with the catch-all to
//! 127.0.0.1), so nothing of the machine's own /root/.ssh is read or
//! changed and no name reaches DNS.

use std::os::unix::fs::PermissionsExt as _;
use std::process::{Child, Command, Stdio};

use super::backups::{app_writes, backup, served_note};
use super::*;
use volce_lab::install::backup as operator;

const SSHD: &str = "/usr/sbin/sshd";
const SSH_KEYGEN: &str = "/usr/bin/ssh-keygen";

/// The backup host: an sshd on 127.0.0.1 that serves only sftp, to root
/// with one key; killed when dropped.
struct BackupHost {
    sshd: Child,
    port: u16,
    /// Where its keys and configuration are.
    dir: PathBuf,
    /// The private key it accepts.
    client_key: PathBuf,
}

impl Drop for BackupHost {
    fn drop(&mut self) {
        let _ = self.sshd.kill();
        let _ = self.sshd.wait();
    }
}

/// A new ed25519 key pair at `path` (and `path.pub`).
fn keygen(path: &Path) {
    let made = Command::new(SSH_KEYGEN)
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "volce-lab-test", "-f"])
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success(), "ssh-keygen {}", path.display());
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl BackupHost {
    /// Starts the sshd with its files under `dir`; `client_key` (a
    /// private key, beside its `.pub`) is the one key it accepts.
    fn start(dir: &Path, client_key: &Path) -> BackupHost {
        assert!(Path::new(SSHD).is_file(), "sshd is missing: scripts/test installs openssh-server");
        keygen(&dir.join("host_key"));
        std::fs::copy(client_key.with_extension("pub"), dir.join("authorized_keys")).unwrap();
        // sshd's privilege separation directory, as the Debian package's
        // service makes it at start.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let port = free_port();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "ListenAddress 127.0.0.1:{port}\nHostKey {dir}/host_key\nAuthorizedKeysFile {dir}/authorized_keys\n\
                 PidFile none\nStrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nAllowTcpForwarding no\n\
                 X11Forwarding no\nForceCommand internal-sftp\nSubsystem sftp internal-sftp\n",
                dir = dir.display()
            ),
        )
        .unwrap();
        let sshd = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let host = BackupHost { sshd, port, dir: dir.to_owned(), client_key: client_key.to_owned() };
        eventually("the backup host's sshd listens", || TcpStream::connect(("127.0.0.1", port)).is_ok());
        host
    }

    /// The `known_hosts` line that pins this host's key.
    fn known_hosts_line(&self) -> String {
        let key = std::fs::read_to_string(self.dir.join("host_key.pub")).unwrap();
        let mut fields = key.split_whitespace();
        let (kind, blob) = (fields.next().unwrap(), fields.next().unwrap());
        format!("[127.0.0.1]:{} {kind} {blob}\n", self.port)
    }
}

/// The ssh configuration the policy names for the backup host `vault`:
/// its address and port, root's key for it, its pinned host key, no
/// prompt; root's and not writable by others, as the helper requires.
fn ssh_config_for(host: &BackupHost, dir: &Path) -> PathBuf {
    let known_hosts = dir.join("known_hosts");
    std::fs::write(&known_hosts, host.known_hosts_line()).unwrap();
    let config = dir.join("backup.ssh_config");
    std::fs::write(
        &config,
        format!(
            "Host vault\n  HostName 127.0.0.1\n  Port {}\n  User root\n  IdentityFile {}\n  \
             IdentitiesOnly yes\n  BatchMode yes\n  StrictHostKeyChecking yes\n  \
             UserKnownHostsFile {}\n  GlobalKnownHostsFile /dev/null\n  ConnectTimeout 5\n\
             Host *\n  HostName 127.0.0.1\n",
            host.port,
            host.client_key.display(),
            known_hosts.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    config
}

/// Tried (issue 41, a repository on another server): `backup init` makes
/// the repository over sftp on the backup host; a backup of an app with
/// data completes while the app serves and `backup list` names its
/// snapshot; after the app wrote more, an approved restore of that
/// snapshot puts the old data back and the app serves it; then the backup
/// host goes away (its sshd stopped): the next backup ends `rejected` with
/// `backup_failed` naming restic's step, the app still serves its data and
/// the record says the last attempt failed. The repository's files are
/// only under the backup host's directory.
#[test]
#[ignore = "real parts: run by scripts/test"]
fn a_repository_on_another_server_over_sftp_backs_up_and_restores() {
    let _turn = take_turn();
    assert!(Path::new("/usr/bin/restic").is_file(), "restic is not installed: scripts/test installs it");
    assert!(Path::new("/usr/bin/ssh").is_file(), "the OpenSSH client is missing: scripts/test installs it");
    let lab = Lab::new("rsftp");
    let dir = tempfile::tempdir().unwrap();
    let vault = dir.path().join("vault");
    std::fs::create_dir(&vault).unwrap();
    let key = dir.path().join("client_key");
    keygen(&key);
    let vault_host = BackupHost::start(&vault, &key);

    let password = dir.path().join("backup.password");
    std::fs::write(&password, "a-long-random-backup-password\n").unwrap();
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o600)).unwrap();
    let repository = vault.join("restic");
    let mut policy = lab.policy.clone();
    let web = policy["catalog"]["web"].clone();
    policy["catalog"]["kept"] =
        json!({"image": web, "container_port": 8080, "data": {"path": "/www/data", "max_mib": 16}});
    policy["backup"] = json!({
        "repository": format!("sftp:root@vault:{}", repository.display()),
        "password_file": password,
        "keep": {"last": 3},
        "ssh_config": ssh_config_for(&vault_host, dir.path()),
    });
    let (host, _unmount, app_container) = super::tasks::deployed(lab, &policy, dir.path(), "kept");

    let made = operator::init(&host.paths).unwrap();
    assert!(made.contains("Made the backup repository"), "{made}");
    assert!(repository.join("config").is_file(), "the repository is on the backup host");
    app_writes(&app_container, "over-sftp");
    let done = backup(&host);
    assert_eq!(done["result"]["outcome"], "completed", "{done}");
    let snapshot = done["result"]["backup"]["snapshot"].as_str().unwrap().to_owned();
    let listed = operator::list(&host.paths, Some(&host.lab.app)).unwrap();
    assert!(listed.contains(&snapshot), "{listed}");

    app_writes(&app_container, "written-later");
    let id = host.planned("restore", json!({"app": host.lab.app, "snapshot": snapshot}));
    host.approve(&id);
    let restored = host.execute(&id);
    assert_eq!(restored["result"]["outcome"], "completed", "{restored}");
    assert_eq!(served_note(&host).as_deref(), Some("over-sftp"), "the app serves the restored data");

    let sshd = nix::unistd::Pid::from_raw(vault_host.sshd.id() as i32);
    nix::sys::signal::kill(sshd, nix::sys::signal::Signal::SIGTERM).unwrap();
    eventually("the backup host's sshd is gone", || {
        TcpStream::connect(("127.0.0.1", vault_host.port)).is_err()
    });
    let gone = backup(&host);
    assert_eq!(
        (gone["status"].as_str(), gone["code"].as_str()),
        (Some("rejected"), Some("backup_failed")),
        "the backup host is gone: {gone}"
    );
    assert!(gone["message"].as_str().unwrap().contains("'restic backup'"), "{gone}");
    assert_eq!(served_note(&host).as_deref(), Some("over-sftp"), "nothing of the app changed");
    assert!(host.app_record()["data"]["backup"]["last_failure_at"].is_string(), "{}", host.app_record());
}
