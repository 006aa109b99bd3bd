//! Certificates from a real ACME server (issue 39): Debian's lego, run by
//! `volce_lab::docker::acme` exactly as the host helper runs it, against
//! Debian's pebble, with pebble-challtestsrv as pebble's only DNS (every
//! name under `acme.test` resolves to 127.0.0.1 there, and nowhere else:
//! lego answers HTTP-01 by writing files and resolves no name). The test
//! serves the webroot on 127.0.0.1 itself, standing in for the edge.
//! Suite `host_acme` in scripts/test, which installs lego and pebble.
//!
//! Everything listens on 127.0.0.1 only, on fixed ports (pebble's HTTP-01
//! port is configured, not chosen): the suite's tests that start pebble
//! hold [`PEBBLE_LOCK`]. Every wait is bounded; pebble, its DNS stub and
//! the webroot server are stopped when dropped.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use volce_lab::docker::acme;
use volce_lab::vocab::{AcmeContact, AcmeDirectory, AcmeError, AcmeSpec, Renewal, ServerName};

const DIRECTORY_PORT: u16 = 14780;
const MANAGEMENT_PORT: u16 = 14781;
const DNS_PORT: u16 = 14782;
const STUB_MANAGEMENT_PORT: u16 = 14783;
/// Where pebble's VA fetches `/.well-known/acme-challenge/` (the edge's
/// port 80 in production).
const HTTP_PORT: u16 = 15002;
const OPENSSL: &str = "/usr/bin/openssl";

pub(crate) static PEBBLE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// pebble and its DNS stub, with a CA of the test's own for pebble's TLS
/// (Debian's package ships no test certificate); killed when dropped.
pub(crate) struct Pebble {
    dir: tempfile::TempDir,
    children: Vec<Child>,
}

impl Pebble {
    fn start() -> Pebble {
        Pebble::start_with(HTTP_PORT)
    }

    /// pebble asking the HTTP-01 answers on 127.0.0.1:`http_port` (the
    /// edge's plain HTTP port in the edge's test).
    pub(crate) fn start_with(http_port: u16) -> Pebble {
        assert!(
            nix::unistd::geteuid().is_root(),
            "suite host_acme runs lego as root: run it through scripts/test"
        );
        for program in [acme::LEGO, "/usr/bin/pebble", "/usr/bin/pebble-challtestsrv", OPENSSL] {
            assert!(
                Path::new(program).is_file(),
                "{program} is missing: scripts/test installs lego and pebble"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        tls_certificate(dir.path());
        let config = serde_json::json!({"pebble": {
            "listenAddress": format!("127.0.0.1:{DIRECTORY_PORT}"),
            "managementListenAddress": format!("127.0.0.1:{MANAGEMENT_PORT}"),
            "certificate": dir.path().join("tls.pem"),
            "privateKey": dir.path().join("tls.key"),
            "httpPort": http_port,
            "tlsPort": http_port + 1,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false,
        }});
        std::fs::write(dir.path().join("pebble.json"), config.to_string()).unwrap();
        let mut pebble = Pebble { children: Vec::new(), dir };
        // The stub answers A queries with 127.0.0.1, no AAAA, and serves no
        // challenge itself (the test's webroot server has the HTTP port).
        let dns = format!("127.0.0.1:{DNS_PORT}");
        let stub_management = format!("127.0.0.1:{STUB_MANAGEMENT_PORT}");
        let stub = [
            "-defaultIPv4",
            "127.0.0.1",
            "-defaultIPv6",
            "",
            "-dns01",
            &dns,
            "-http01",
            "",
            "-https01",
            "",
            "-tlsalpn01",
            "",
            "-management",
            &stub_management,
        ];
        pebble.spawn("/usr/bin/pebble-challtestsrv", &stub, "challtestsrv.log");
        let config = pebble.dir.path().join("pebble.json").display().to_string();
        pebble.spawn("/usr/bin/pebble", &["-config", &config, "-dnsserver", &dns], "pebble.log");
        wait_listening(DIRECTORY_PORT);
        wait_listening(MANAGEMENT_PORT);
        pebble
    }

    /// Starts `program` with a cleared environment but pebble's switches:
    /// no random validation delays, no nonces rejected on purpose, and no
    /// authorization reused, so every order validates every name.
    fn spawn(&mut self, program: &str, args: &[&str], log: &str) {
        let log = std::fs::File::create(self.dir.path().join(log)).unwrap();
        let child = Command::new(program)
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .env("PEBBLE_AUTHZREUSE", "0")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| panic!("{program} does not start: {error}"));
        self.children.push(child);
    }

    pub(crate) fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    pub(crate) fn directory() -> AcmeDirectory {
        AcmeDirectory::parse(&format!("https://127.0.0.1:{DIRECTORY_PORT}/dir")).unwrap()
    }

    /// pebble's root, from its management API (it makes a new one at
    /// each start).
    pub(crate) fn root(&self) -> PathBuf {
        let root = self.dir.path().join("root.pem");
        let url = format!("https://127.0.0.1:{MANAGEMENT_PORT}/roots/0");
        let ca = self.ca().display().to_string();
        let out = path_of(&root);
        run(Command::new("/usr/bin/curl").args([
            "-fsS",
            "--max-time",
            "10",
            "--cacert",
            &ca,
            "-o",
            &out,
            &url,
        ]));
        root
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn path_of(path: &Path) -> String {
    path.display().to_string()
}

/// Runs a test tool, which must succeed.
fn run(command: &mut Command) -> String {
    let out = command.stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{command:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A CA and a certificate for 127.0.0.1 signed by it: pebble's TLS, which
/// lego trusts through the spec's `directory_ca`.
fn tls_certificate(dir: &Path) {
    let at = |name: &str| path_of(&dir.join(name));
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    run(Command::new(OPENSSL).args(["req", "-x509"]).args(ec).args([
        "-keyout",
        &at("ca.key"),
        "-out",
        &at("ca.pem"),
        "-days",
        "2",
        "-subj",
        "/CN=volce-lab test pebble CA",
    ]));
    run(Command::new(OPENSSL).arg("req").args(ec).args([
        "-keyout",
        &at("tls.key"),
        "-out",
        &at("tls.csr"),
        "-subj",
        "/CN=127.0.0.1",
    ]));
    std::fs::write(dir.join("san.cnf"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    run(Command::new(OPENSSL).args(["x509", "-req", "-days", "2", "-CAcreateserial"]).args([
        "-in",
        &at("tls.csr"),
        "-CA",
        &at("ca.pem"),
        "-CAkey",
        &at("ca.key"),
        "-out",
        &at("tls.pem"),
        "-extfile",
        &at("san.cnf"),
    ]));
}

/// Waits (at most 30 s) until something accepts on 127.0.0.1:`port`.
fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on 127.0.0.1:{port} after 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The edge's stand-in: serves the files lego writes under the webroot's
/// `/.well-known/acme-challenge/` on 127.0.0.1:[`HTTP_PORT`], until dropped.
struct WebrootServer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl WebrootServer {
    fn start(webroot: &Path) -> WebrootServer {
        let listener = TcpListener::bind(("127.0.0.1", HTTP_PORT)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (webroot, stopped) = (webroot.to_owned(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => serve(stream, &webroot),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        WebrootServer { stop, thread: Some(thread) }
    }
}

impl Drop for WebrootServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One request: a token's file with 200, anything else 404.
fn serve(stream: TcpStream, webroot: &Path) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(&stream);
    let mut request = String::new();
    if reader.read_line(&mut request).is_err() {
        return;
    }
    let token = request
        .split_whitespace()
        .nth(1)
        .and_then(|path| path.strip_prefix("/.well-known/acme-challenge/"))
        .filter(|token| {
            !token.is_empty() && token.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
        });
    let body =
        token.and_then(|token| std::fs::read(webroot.join(".well-known/acme-challenge").join(token)).ok());
    let mut stream = &stream;
    let _ = match body {
        Some(body) => {
            let head =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&body))
        }
        None => stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
    };
}

fn names(names: &[&str]) -> Vec<ServerName> {
    names.iter().map(|name| ServerName::parse(name).unwrap()).collect()
}

/// A spec on a fresh state directory (root's 0700, as the helper makes
/// it) and webroot.
fn spec(root: &Path, names_: &[&str], directory_ca: Option<PathBuf>) -> AcmeSpec {
    AcmeSpec {
        directory: Pebble::directory(),
        contact: AcmeContact::parse("ops@example.com").unwrap(),
        names: names(names_),
        webroot: root.join("webroot"),
        state_dir: root.join("acme"),
        directory_ca,
    }
}

/// Every file under `dir` is root's 0600 and every directory root's 0700
/// (a link fails it: lego's staging directory, whose `accounts` is one,
/// must be gone).
fn assert_private(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let expected = if meta.is_dir() { 0o700 } else { 0o600 };
        assert_eq!((meta.uid(), meta.mode() & 0o7777), (0, expected), "{}", path.display());
        if meta.is_dir() {
            assert_private(&path);
        }
    }
}

/// The challenge files lego left in the webroot (none once it is done).
fn challenge_files(webroot: &Path) -> usize {
    std::fs::read_dir(webroot.join(".well-known/acme-challenge")).map_or(0, |entries| entries.count())
}

#[test]
#[ignore = "suite host_acme: root, lego and pebble (scripts/test)"]
fn certificates_are_issued_verified_renewed_and_failures_are_named() {
    let _lock = PEBBLE_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let pebble = Pebble::start();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("webroot")).unwrap();
    let spec = spec(root.path(), &["a.acme.test", "www.a.acme.test"], Some(pebble.ca()));
    let webroot = WebrootServer::start(&spec.webroot);

    let started = Instant::now();
    let issued = acme::obtain(&spec).expect("a certificate for both names");
    eprintln!("host_acme: first certificate issued in {} ms", started.elapsed().as_millis());
    let names: Vec<&str> = issued.facts.names.iter().map(|name| name.as_str()).collect();
    assert_eq!(names, ["a.acme.test", "www.a.acme.test"]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!(issued.facts.not_before <= now + 60 && issued.facts.not_after > now + 365 * 86_400);
    assert!(issued.facts.issuer.as_str().starts_with("Pebble Intermediate CA"), "{:?}", issued.facts.issuer);
    assert_eq!(issued.files, acme::files(&spec.state_dir, spec.primary()));
    assert_eq!(acme::certificate(&spec).unwrap(), issued, "the facts read back are the same");
    let verified = run(Command::new(OPENSSL).args(["verify", "-CAfile"]).args([
        path_of(&pebble.root()),
        "-untrusted".to_owned(),
        path_of(&issued.files.issuer),
        path_of(&issued.files.certificate),
    ]));
    assert!(verified.trim_end().ends_with(": OK"), "{verified}");
    assert_private(&spec.state_dir);
    assert_eq!(challenge_files(&spec.webroot), 0, "lego removes its challenge files");

    // Not due: more days left than asked, nothing changes.
    match acme::renew(&spec, 30).unwrap() {
        Renewal::NotDue { certificate } => assert_eq!(certificate, issued),
        other => panic!("a certificate with 5 years left was renewed at 30 days: {other:?}"),
    }
    // Due: pebble's 5 years are fewer days than asked.
    let renewed = match acme::renew(&spec, 3650).unwrap() {
        Renewal::Renewed { certificate } => certificate,
        other => panic!("a certificate with 5 years left was not renewed at 3650 days: {other:?}"),
    };
    assert_ne!(renewed.facts.serial, issued.facts.serial);
    assert_eq!(renewed.facts.names, issued.facts.names);
    assert!(renewed.facts.not_after >= issued.facts.not_after);
    assert_private(&spec.state_dir);

    // The edge does not answer: the challenge fails, naming the name, and
    // nothing is left of the certificate that was not issued, nor of the
    // challenge; a renewal that fails keeps the certificate in place.
    drop(webroot);
    let down = AcmeSpec { names: self::names(&["down.acme.test"]), ..spec.clone() };
    let failed = acme::obtain(&down).unwrap_err();
    assert_eq!(failed, AcmeError::ChallengeFailed { name: down.names[0].clone() });
    let files = acme::files(&down.state_dir, down.primary());
    for path in [&files.certificate, &files.key, &files.issuer] {
        assert!(!path.exists(), "{} was written", path.display());
    }
    assert_eq!(challenge_files(&spec.webroot), 0);
    let failed = acme::renew(&spec, 3650).unwrap_err();
    assert!(matches!(failed, AcmeError::ChallengeFailed { .. }), "{failed:?}");
    assert_eq!(acme::certificate(&spec).unwrap(), renewed, "a failed renewal keeps the certificate");
    assert_private(&spec.state_dir);
}

#[test]
#[ignore = "suite host_acme: root and lego (scripts/test)"]
fn a_directory_that_does_not_listen_is_unreachable() {
    assert!(Path::new(acme::LEGO).is_file(), "lego is missing: scripts/test installs it");
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("webroot")).unwrap();
    // A port that was free a moment ago, on loopback: nothing answers.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let directory = AcmeDirectory::parse(&format!("https://127.0.0.1:{port}/dir")).unwrap();
    let spec = AcmeSpec { directory, ..spec(root.path(), &["a.acme.test"], None) };
    let started = Instant::now();
    assert_eq!(acme::obtain(&spec).unwrap_err(), AcmeError::UnreachableDirectory);
    assert!(started.elapsed() < Duration::from_secs(30), "refused connections are not waited on");
    assert!(!acme::files(&spec.state_dir, spec.primary()).certificate.exists());
    assert_private(&spec.state_dir);
}

#[test]
#[ignore = "suite host_acme: root and lego (scripts/test)"]
fn a_state_directory_others_may_enter_is_refused_before_lego_runs() {
    use std::os::unix::fs::PermissionsExt as _;
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("webroot")).unwrap();
    let spec = spec(root.path(), &["a.acme.test"], None);
    std::fs::create_dir(&spec.state_dir).unwrap();
    std::fs::set_permissions(&spec.state_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(acme::obtain(&spec).unwrap_err(), AcmeError::UnsafeState);
    assert_eq!(std::fs::read_dir(&spec.state_dir).unwrap().count(), 0, "lego never ran");
}
