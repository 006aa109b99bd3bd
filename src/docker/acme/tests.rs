//! The lego runner's pure parts: its exact argv, the reading of its stderr
//! into causes (from stderr lego 4.9 printed against pebble 2.4, captured
//! 2026-12-06), and the reading of `openssl x509`'s output.

use super::*;
use crate::vocab::{AcmeContact, AcmeDirectory};

fn spec(names: &[&str]) -> AcmeSpec {
    AcmeSpec {
        directory: AcmeDirectory::parse("https://127.0.0.1:14780/dir").unwrap(),
        contact: AcmeContact::parse("ops@example.com").unwrap(),
        names: names.iter().map(|name| ServerName::parse(name).unwrap()).collect(),
        webroot: "/var/lib/volce-lab/edge/webroot".into(),
        state_dir: "/var/lib/volce-lab/edge/acme".into(),
        directory_ca: None,
    }
}

const GLOBAL: &[&str] = &[
    "--server",
    "https://127.0.0.1:14780/dir",
    "--accept-tos",
    "--email",
    "ops@example.com",
    "--path",
    "/var/lib/volce-lab/edge/acme/.lego-run",
    "--key-type",
    "ec256",
    "--http",
    "--http.webroot",
    "/var/lib/volce-lab/edge/webroot",
    "--http-timeout",
    "30",
    "--cert.timeout",
    "60",
    "--domains",
    "a.example",
    "--domains",
    "www.a.example",
];

#[test]
fn obtain_runs_lego_run_with_the_exact_argv() {
    let mut expected: Vec<&str> = GLOBAL.to_vec();
    expected.push("run");
    let staging = Path::new("/var/lib/volce-lab/edge/acme/.lego-run");
    assert_eq!(obtain_args(&spec(&["a.example", "www.a.example"]), staging), expected);
}

#[test]
fn renew_runs_lego_renew_with_days_and_no_random_sleep() {
    let mut expected: Vec<&str> = GLOBAL.to_vec();
    expected.extend(["renew", "--days", "30", "--no-random-sleep"]);
    let staging = Path::new("/var/lib/volce-lab/edge/acme/.lego-run");
    assert_eq!(renew_args(&spec(&["a.example", "www.a.example"]), staging, 30), expected);
}

#[test]
fn a_renewal_asks_for_one_to_ten_years_of_days() {
    // Refused before anything is looked at or run.
    for days in [0, RENEW_DAYS_MAX + 1] {
        assert_eq!(renew(&spec(&["a.example"]), days), Err(AcmeError::InvalidSpec));
    }
    assert_eq!(obtain(&spec(&[])), Err(AcmeError::InvalidSpec));
}

#[test]
fn the_files_are_named_after_the_first_name() {
    let files = files(Path::new("/s"), &ServerName::parse("a.example").unwrap());
    assert_eq!(files.certificate, Path::new("/s/certificates/a.example.crt"));
    assert_eq!(files.key, Path::new("/s/certificates/a.example.key"));
    assert_eq!(files.issuer, Path::new("/s/certificates/a.example.issuer.crt"));
}

fn names(names: &[&str]) -> Vec<ServerName> {
    names.iter().map(|name| ServerName::parse(name).unwrap()).collect()
}

/// The webroot was not served: both names' challenges failed.
const CONNECTION_REFUSED: &str = "\
2026/12/06 19:42:55 [INFO] [c.acme.test] acme: Trying to solve HTTP-01
2026/12/06 19:42:55 [INFO] [d.acme.test] acme: Trying to solve HTTP-01
2026/12/06 19:42:55 [INFO] Deactivating auth: https://127.0.0.1:15443/authZ/RW-i6KkAOb8xqtl9EwBVu-EHZUX8o9Q-8ICB0vgfJ2E
2026/12/06 19:42:55 [INFO] Deactivating auth: https://127.0.0.1:15443/authZ/acv_ymZIrYP90j0q0J13acngmZGVTeua8OZ0Ct_kRS0
2026/12/06 19:42:55 Could not obtain certificates:
\terror: one or more domains had a problem:
[c.acme.test] acme: error: 400 :: urn:ietf:params:acme:error:connection :: Get \"http://c.acme.test:15002/.well-known/acme-challenge/-Re1HTikTfNVcQXtn1wpVYupI2tFCbf4tk27s2_nu58\": dial tcp 127.0.0.1:15002: connect: connection refused
[d.acme.test] acme: error: 400 :: urn:ietf:params:acme:error:connection :: Get \"http://d.acme.test:15002/.well-known/acme-challenge/z4-c1YecCIpEfbskIJg8ro32uWmcbRqf5EfyS9XU0Sk\": dial tcp 127.0.0.1:15002: connect: connection refused
";

/// Another server answered on the port: the token was not there.
const NOT_FOUND: &str = "\
2026/12/06 19:43:40 Could not obtain certificates:
\terror: one or more domains had a problem:
[e.acme.test] acme: error: 403 :: urn:ietf:params:acme:error:unauthorized :: Non-200 status code from HTTP: http://e.acme.test:15002/.well-known/acme-challenge/R317bvJOR7jxjg2XwfcRLhleY2bbOraoz0DN56VafUg returned 404
";

const DIRECTORY_DOWN: &str = "\
2026/12/06 19:42:55 No key found for account ops@example.com. Generating a P256 key.
2026/12/06 19:42:55 Saved key to /tmp/acmex/state/accounts/127.0.0.1_15999/ops@example.com/keys/ops@example.com.key
2026/12/06 19:42:55 Could not create client: get directory at 'https://127.0.0.1:15999/dir': Get \"https://127.0.0.1:15999/dir\": dial tcp 127.0.0.1:15999: connect: connection refused
";

const DIRECTORY_UNTRUSTED: &str = "\
2026/12/06 19:42:55 Could not create client: get directory at 'https://127.0.0.1:15443/dir': Get \"https://127.0.0.1:15443/dir\": x509: certificate signed by unknown authority
";

const NOT_A_DIRECTORY: &str = "\
2026/12/06 19:42:55 Could not create client: get directory at 'https://127.0.0.1:15443/nodir': 404 ::GET :: https://127.0.0.1:15443/nodir :: invalid character 'p' after top-level value :: 404 page not found
";

/// Not from pebble, which has no rate limits: lego's format for an error
/// on the new-order request, with Let's Encrypt's type and detail.
const RATE_LIMITED: &str = "\
2026/12/06 20:01:02 Could not obtain certificates:
\tacme: error: 429 :: POST :: https://acme-v02.api.letsencrypt.org/acme/new-order :: urn:ietf:params:acme:error:rateLimited :: Error creating new order :: too many certificates (5) already issued for this exact set of domains in the last 168 hours
";

/// Not from pebble either: a CAA record that names another CA, in lego's
/// per-name format.
const CAA: &str = "\
[a.example] acme: error: 403 :: urn:ietf:params:acme:error:caa :: CAA record for a.example prevents issuance
";

#[test]
fn a_failed_challenge_names_the_first_name_lego_tags() {
    let spec_names = names(&["c.acme.test", "d.acme.test"]);
    let expected = AcmeError::ChallengeFailed { name: spec_names[0].clone() };
    assert_eq!(classify(CONNECTION_REFUSED.as_bytes(), &spec_names), expected);
    let only_d = names(&["d.acme.test"]);
    assert_eq!(
        classify(CONNECTION_REFUSED.as_bytes(), &only_d),
        AcmeError::ChallengeFailed { name: only_d[0].clone() },
        "a name that is not the spec's is never named",
    );
    let e = names(&["e.acme.test"]);
    assert_eq!(classify(NOT_FOUND.as_bytes(), &e), AcmeError::ChallengeFailed { name: e[0].clone() });
}

#[test]
fn the_directory_failing_is_told_apart_from_a_challenge() {
    let any = names(&["a.example"]);
    assert_eq!(classify(DIRECTORY_DOWN.as_bytes(), &any), AcmeError::UnreachableDirectory);
    assert_eq!(classify(NOT_A_DIRECTORY.as_bytes(), &any), AcmeError::UnreachableDirectory);
    assert_eq!(classify(DIRECTORY_UNTRUSTED.as_bytes(), &any), AcmeError::UntrustedDirectory);
    assert_eq!(classify(RATE_LIMITED.as_bytes(), &any), AcmeError::RateLimited);
    assert_eq!(classify(CAA.as_bytes(), &any), AcmeError::NameRejected { name: any[0].clone() });
    let registration = "2026/12/06 Could not complete registration\n\tacme: error: 400 :: POST :: \
                        https://x/new-acct :: urn:ietf:params:acme:error:invalidContact :: bad";
    assert_eq!(classify(registration.as_bytes(), &any), AcmeError::AccountRefused);
    assert_eq!(classify(b"", &any), AcmeError::Unknown);
    assert_eq!(classify(b"panic: runtime error\n\xff\xfe", &any), AcmeError::Unknown);
}

/// `openssl x509` with [`x509_args`] on a certificate pebble issued.
const X509: &str = "\
serial=4CC656F8A96E1950
notBefore=2026-12-06 19:42:51Z
notAfter=2031-12-06 19:42:50Z
issuer=CN=Pebble Intermediate CA 0a4b98
sha256 Fingerprint=56:AB:15:F6:C3:4C:84:94:29:68:B4:8F:A4:38:64:CB:31:03:6F:4E:E5:A1:36:5A:BA:61:3A:A8:01:9A:10:B1
X509v3 Subject Alternative Name: 
    DNS:b.acme.test, DNS:a.acme.test
";

#[test]
fn openssl_output_gives_the_certificate_facts() {
    let facts = parse_x509(X509).unwrap();
    let names: Vec<&str> = facts.names.iter().map(CertName::as_str).collect();
    assert_eq!(names, ["a.acme.test", "b.acme.test"]);
    assert_eq!(facts.not_before, 1_796_586_171);
    assert_eq!(facts.not_after, 1_954_352_570);
    assert_eq!(facts.issuer.as_str(), "Pebble Intermediate CA 0a4b98");
    assert_eq!(facts.serial.as_str(), "4cc656f8a96e1950");
    assert_eq!(facts.sha256.as_str(), "56ab15f6c34c84942968b48fa43864cb31036f4ee5a1365aba613aa8019a10b1");
    let with_ip = X509.replace("DNS:a.acme.test", "IP Address:127.0.0.1");
    assert_eq!(parse_x509(&with_ip).unwrap().names.len(), 1, "an address is not a name");
    for broken in [
        X509.replace("DNS:b.acme.test, DNS:a.acme.test", "IP Address:127.0.0.1"),
        X509.replace("DNS:a.acme.test", "DNS:A\u{1b}[2J"),
        X509.replace("notAfter=2031-12-06 19:42:50Z", "notAfter=Dec  6 19:42:50 2031 GMT"),
        X509.replace("serial=", "serial:"),
        X509.lines().take(5).collect::<Vec<_>>().join("\n"),
    ] {
        assert!(parse_x509(&broken).is_none(), "{broken}");
    }
}

#[test]
fn the_issuer_is_the_common_name_of_an_rfc2253_name() {
    assert_eq!(common_name("CN=R11,O=Let's Encrypt,C=US").as_deref(), Some("R11"));
    assert_eq!(common_name("C=US,O=A\\, Inc.,CN=Our CA").as_deref(), Some("Our CA"));
    assert_eq!(common_name("O=No CN"), None);
}

#[test]
fn the_state_directory_must_be_private() {
    let dir = tempfile::tempdir().unwrap();
    let me = nix::unistd::geteuid().as_raw();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(state_dir_ok(dir.path(), me), Err(AcmeError::UnsafeState));
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(state_dir_ok(dir.path(), me), Ok(()));
    assert_eq!(state_dir_ok(dir.path(), me + 1), Err(AcmeError::UnsafeState));
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(dir.path(), &link).unwrap();
    assert_eq!(state_dir_ok(&link, me), Err(AcmeError::UnsafeState));
}

#[test]
fn restrict_makes_files_0600_and_directories_0700_without_following_links() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("accounts/h/ops@example.com/keys");
    std::fs::create_dir_all(&keys).unwrap();
    let key = keys.join("ops@example.com.key");
    std::fs::write(&key, "key").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let outside = tempfile::NamedTempFile::new().unwrap();
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("accounts/link")).unwrap();
    restrict(dir.path());
    let mode = |path: &Path| std::fs::symlink_metadata(path).unwrap().mode() & 0o7777;
    assert_eq!(mode(&key), 0o600);
    assert_eq!(mode(&keys), 0o700);
    assert_eq!(mode(&dir.path().join("accounts")), 0o700);
    assert_eq!(mode(outside.path()), 0o644, "a link is not followed");
}

#[test]
fn only_a_new_certificate_is_installed_and_its_files_move_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (staged, live) = (dir.path().join("staged"), dir.path().join("live"));
    std::fs::create_dir(&staged).unwrap();
    let primary = ServerName::parse("a.example").unwrap();
    for (suffix, body) in [(".crt", "cert 1"), (".key", "key 1"), (".issuer.crt", "issuer"), (".json", "{}")]
    {
        std::fs::write(staged.join(format!("a.example{suffix}")), body).unwrap();
    }
    install(&staged, &live, &primary).unwrap();
    assert_eq!(std::fs::read_to_string(live.join("a.example.key")).unwrap(), "key 1");
    assert!(!staged.join("a.example.crt").exists(), "moved, not copied");
    assert_eq!(std::fs::symlink_metadata(&live).unwrap().mode() & 0o777, 0o700);

    // The same certificate (a renewal that was not due): nothing moves.
    std::fs::write(staged.join("a.example.crt"), "cert 1").unwrap();
    std::fs::write(staged.join("a.example.key"), "key 2").unwrap();
    install(&staged, &live, &primary).unwrap();
    assert_eq!(std::fs::read_to_string(live.join("a.example.key")).unwrap(), "key 1");
    // No certificate staged: nothing to install.
    std::fs::remove_file(staged.join("a.example.crt")).unwrap();
    assert_eq!(install(&staged, &live, &primary), Err(AcmeError::CertificateUnreadable));
    assert_eq!(std::fs::read_to_string(live.join("a.example.crt")).unwrap(), "cert 1");
}

#[test]
fn one_run_at_a_time_holds_the_state_directory() {
    let dir = tempfile::tempdir().unwrap();
    let held = lock(dir.path(), Duration::ZERO).unwrap();
    assert_eq!(lock(dir.path(), Duration::from_millis(300)).unwrap_err(), AcmeError::Busy);
    drop(held);
    assert!(lock(dir.path(), Duration::ZERO).is_ok());
    let mode = std::fs::symlink_metadata(dir.path().join(LOCK)).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // A link in the lock's place is never followed.
    let other = tempfile::tempdir().unwrap();
    std::fs::remove_file(dir.path().join(LOCK)).unwrap();
    std::os::unix::fs::symlink(other.path().join("target"), dir.path().join(LOCK)).unwrap();
    assert_eq!(lock(dir.path(), Duration::ZERO).unwrap_err(), AcmeError::UnsafeState);
    assert!(!other.path().join("target").exists());
}
