//! Certificates for the HTTPS edge from an ACME directory (issue 39), by
//! Debian's lego: [`obtain`] one certificate for a set of names, [`renew`]
//! it when it is due (the host's timer calls this), and [`certificate`]
//! reads what one in place says of itself. Runs as root in the host
//! helper; lego and openssl are fixed paths with argv from validated
//! values, through `crate::exec` (no shell, environment cleared, bounded
//! time and output).
//!
//! Why lego: a well-kept ACME client packaged in Debian, one static binary
//! that answers HTTP-01 by writing files into a webroot the edge serves
//! (so no second process listens on port 80), and keeps its account and
//! certificates in one directory we name (`--path`).
//!
//! Why `openssl x509` and not a crate to read a certificate: Debian's
//! openssl is already on every host, prints each fact we need on a line
//! of its own with one fixed argv, and parsing X.509 stays in the code the
//! whole system already trusts for TLS; an X.509 crate would bring a DER
//! parser and its dependencies into the root helper for five fields.
//!
//! Invariants enforced here:
//! - lego's stderr never leaves this module: its last lines are matched
//!   against lego's fixed phrases ([`classify`]) into the closed
//!   [`AcmeError`], naming only one of the spec's own names;
//! - the state directory (account key, certificate keys) is root's 0700
//!   directory before lego runs, and after every run each file in it is
//!   0600 and each directory 0700 (lego 4.9 writes the account key 0644);
//!   nothing there is followed through a link;
//! - the live certificate files change only by rename, once lego has
//!   finished well: lego works in a staging directory (`.lego-run`), so
//!   a run that fails, times out or is killed leaves them as they were,
//!   and a reader never sees a file half-written;
//! - one lego run at a time per state directory (an flock on its `.lock`);
//! - the CA bundle for the directory's own TLS (`LEGO_CA_CERTIFICATES`) is
//!   set only when the spec names one (tests, with pebble); otherwise lego
//!   trusts the system's roots.
//!
//! lego registers the account with `--accept-tos`: an operator who names
//! a directory in the policy accepts its terms of service (the policy's
//! documentation must say so).

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::Path;
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};

use crate::exec::{ExecutionStatus, ProcessSpec, minimal_env};
use crate::vocab::{
    AcmeError, AcmeFiles, AcmeSpec, CertFingerprint, CertName, CertSerial, Certificate, CertificateFacts,
    IssuerName, RENEW_DAYS_MAX, Renewal, ServerName,
};

pub const LEGO: &str = "/usr/bin/lego";
pub const OPENSSL: &str = "/usr/bin/openssl";
/// How long one lego run may take: inside the 240 s the MCP client waits
/// for the helper's reply. lego waits 5 s after each challenge it answers
/// (one name after another), so four names take about 30 s.
pub const LEGO_TIMEOUT: Duration = Duration::from_secs(180);
/// lego's own bounds: each HTTP request to the directory, and the wait for
/// the certificate once the order is valid.
const LEGO_HTTP_TIMEOUT: &str = "30";
const LEGO_CERT_TIMEOUT: &str = "60";
/// What lego may print: a few KiB of log per name.
const LEGO_OUTPUT: usize = 256 << 10;

/// Obtains one certificate for the spec's names (answering HTTP-01 from
/// its webroot) and returns it with its facts read back.
pub fn obtain(spec: &AcmeSpec) -> Result<Certificate, AcmeError> {
    let _held = prepare(spec)?;
    staged(spec, |path| obtain_args(spec, path))?;
    certificate(spec)
}

/// Renews the spec's certificate when it has fewer than `days` days left
/// (lego's `renew --days`); otherwise leaves it as it is. Which of the two
/// happened is read from the certificate itself, before and after. The
/// new certificate covers the old one's names and the spec's (lego merges
/// them): a name set that changed is a new [`obtain`].
pub fn renew(spec: &AcmeSpec, days: u32) -> Result<Renewal, AcmeError> {
    if !(1..=RENEW_DAYS_MAX).contains(&days) {
        return Err(AcmeError::InvalidSpec);
    }
    let _held = prepare(spec)?;
    let before = certificate(spec)?;
    staged(spec, |path| renew_args(spec, path, days))?;
    let after = certificate(spec)?;
    Ok(match after.facts.sha256 == before.facts.sha256 {
        true => Renewal::NotDue { certificate: after },
        false => Renewal::Renewed { certificate: after },
    })
}

/// The spec's certificate as lego keeps it: its files and its facts.
pub fn certificate(spec: &AcmeSpec) -> Result<Certificate, AcmeError> {
    let files = files(&spec.state_dir, spec.primary());
    let facts = facts(&files.certificate)?;
    Ok(Certificate { facts, files })
}

/// Where lego keeps the certificate filed under `primary` (its first name;
/// lego would rewrite `*` and `:`, which no server name has).
pub fn files(state_dir: &Path, primary: &ServerName) -> AcmeFiles {
    let dir = state_dir.join("certificates");
    let name = primary.as_str();
    AcmeFiles {
        certificate: dir.join(format!("{name}.crt")),
        key: dir.join(format!("{name}.key")),
        issuer: dir.join(format!("{name}.issuer.crt")),
    }
}

/// Before lego runs: a valid spec, lego installed, the webroot a real
/// directory, the state directory root's 0700 (made so when missing), and
/// its lock held (returned: held until dropped).
fn prepare(spec: &AcmeSpec) -> Result<Flock<File>, AcmeError> {
    if !spec.valid() {
        return Err(AcmeError::InvalidSpec);
    }
    if !Path::new(LEGO).is_file() {
        return Err(AcmeError::LegoMissing);
    }
    let webroot = std::fs::symlink_metadata(&spec.webroot).map_err(|_| AcmeError::UnsafeState)?;
    if !webroot.is_dir() {
        return Err(AcmeError::UnsafeState);
    }
    if std::fs::symlink_metadata(&spec.state_dir).is_err() {
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&spec.state_dir);
    }
    state_dir_ok(&spec.state_dir, nix::unistd::geteuid().as_raw())?;
    lock(&spec.state_dir, LOCK_WAIT)
}

/// The lock file in the state directory: one lego run at a time (a
/// renewal by the timer and an obtain by a plan share the account and the
/// staging directory).
const LOCK: &str = ".lock";
/// How long a run waits for another to finish before it gives up.
const LOCK_WAIT: Duration = Duration::from_secs(60);

/// Takes the state directory's lock, waiting at most `wait` for it.
fn lock(state_dir: &Path, wait: Duration) -> Result<Flock<File>, AcmeError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(state_dir.join(LOCK))
        .map_err(|_| AcmeError::UnsafeState)?;
    let deadline = std::time::Instant::now() + wait;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(held) => return Ok(held),
            Err((back, nix::errno::Errno::EWOULDBLOCK)) if std::time::Instant::now() < deadline => {
                file = back;
                std::thread::sleep(Duration::from_millis(200));
            }
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => return Err(AcmeError::Busy),
            Err(_) => return Err(AcmeError::UnsafeState),
        }
    }
}

/// Whether `path` is a directory (not a link) of `owner` that no one else
/// may enter: the account key and every certificate's key are inside.
pub fn state_dir_ok(path: &Path, owner: u32) -> Result<(), AcmeError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() && meta.uid() == owner && meta.mode() & 0o077 == 0 => Ok(()),
        _ => Err(AcmeError::UnsafeState),
    }
}

/// Makes every file under the state directory 0600 and every directory
/// 0700, never through a link (inside a directory only root may enter, so
/// nothing can swap an entry between the look and the change).
fn restrict(dir: &Path) {
    restrict_below(dir, 0);
}

fn restrict_below(dir: &Path, depth: usize) {
    // lego's layout is four levels deep (accounts/<host>/<email>/keys).
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten().take(10_000) {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        let mode = if meta.is_dir() {
            0o700
        } else if meta.is_file() {
            0o600
        } else {
            continue;
        };
        if meta.mode() & 0o7777 != mode {
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode));
        }
        if meta.is_dir() && depth < 6 {
            restrict_below(&path, depth + 1);
        }
    }
}

/// The directory lego works in, inside the state directory: its
/// `accounts` is a link to the state directory's own, its `certificates`
/// starts as a copy of the live files of the spec's certificate.
const STAGING: &str = ".lego-run";
/// What lego keeps of one certificate, the certificate last (the file a
/// reader looks at first).
const LEGO_FILES: [&str; 4] = [".key", ".issuer.crt", ".json", ".crt"];

/// Runs lego (with the argv `args` gives for a working directory) in the
/// staging directory, and on success moves what it wrote into the live
/// `certificates/`, one rename per file: a run killed or failed midway
/// leaves the live files as they were, and none is ever half-written
/// (lego itself rewrites files in place).
fn staged(spec: &AcmeSpec, args: impl FnOnce(&Path) -> Vec<String>) -> Result<(), AcmeError> {
    let staging = spec.state_dir.join(STAGING);
    let live = spec.state_dir.join("certificates");
    // What a run killed earlier left (a link inside is removed, not followed).
    let _ = std::fs::remove_dir_all(&staging);
    let made = stage(spec, &staging, &live);
    let ran = made.and_then(|()| lego(spec, &args(&staging)));
    let installed = ran.and_then(|()| install(&staging.join("certificates"), &live, spec.primary()));
    let _ = std::fs::remove_dir_all(&staging);
    restrict(&spec.state_dir);
    installed
}

/// Makes the staging directory: `accounts` linked, the live certificate's
/// files copied (0600, as the originals).
fn stage(spec: &AcmeSpec, staging: &Path, live: &Path) -> Result<(), AcmeError> {
    let unsafe_state = |_| AcmeError::UnsafeState;
    let mut private = std::fs::DirBuilder::new();
    private.mode(0o700).recursive(true);
    private.create(spec.state_dir.join("accounts")).map_err(unsafe_state)?;
    private.create(staging.join("certificates")).map_err(unsafe_state)?;
    std::os::unix::fs::symlink("../accounts", staging.join("accounts")).map_err(unsafe_state)?;
    for suffix in LEGO_FILES {
        let name = format!("{}{suffix}", spec.primary().as_str());
        if std::fs::symlink_metadata(live.join(&name)).is_ok_and(|meta| meta.is_file()) {
            std::fs::copy(live.join(&name), staging.join("certificates").join(&name))
                .map_err(unsafe_state)?;
        }
    }
    Ok(())
}

/// Moves the certificate lego wrote in `staged` into `live`, when it is a
/// new one (its `.crt` differs): each file synced, then renamed over the
/// old, the certificate last, then the directory synced.
fn install(staged: &Path, live: &Path, primary: &ServerName) -> Result<(), AcmeError> {
    let failed = |_| AcmeError::CertificateUnreadable;
    let certificate = format!("{}.crt", primary.as_str());
    let new = std::fs::read(staged.join(&certificate)).map_err(failed)?;
    if std::fs::read(live.join(&certificate)).is_ok_and(|old| old == new) {
        return Ok(());
    }
    std::fs::DirBuilder::new().mode(0o700).recursive(true).create(live).map_err(failed)?;
    for suffix in LEGO_FILES {
        let name = format!("{}{suffix}", primary.as_str());
        let from = staged.join(&name);
        if std::fs::symlink_metadata(&from).is_ok_and(|meta| meta.is_file()) {
            std::fs::File::open(&from).and_then(|file| file.sync_all()).map_err(failed)?;
            std::fs::rename(&from, live.join(&name)).map_err(failed)?;
        }
    }
    std::fs::File::open(live).and_then(|dir| dir.sync_all()).map_err(failed)
}

/// The options every lego run takes: the directory, the account, where
/// it works (`path`, the staging directory), HTTP-01 through the webroot, lego's own time bounds, and
/// the names (the first names the files).
fn global_args(spec: &AcmeSpec, path: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "--server",
        spec.directory.as_str(),
        "--accept-tos",
        "--email",
        spec.contact.as_str(),
        "--path",
        &path.display().to_string(),
        "--key-type",
        "ec256",
        "--http",
        "--http.webroot",
        &spec.webroot.display().to_string(),
        "--http-timeout",
        LEGO_HTTP_TIMEOUT,
        "--cert.timeout",
        LEGO_CERT_TIMEOUT,
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect();
    for name in &spec.names {
        args.extend(["--domains".to_owned(), name.as_str().to_owned()]);
    }
    args
}

/// `run`: register the account if it is new, then obtain.
fn obtain_args(spec: &AcmeSpec, path: &Path) -> Vec<String> {
    let mut args = global_args(spec, path);
    args.push("run".to_owned());
    args
}

/// `renew --days N --no-random-sleep`: lego sleeps up to 8 minutes before
/// a renewal when not at a terminal, to spread load on the CA; the host's
/// timer spreads its start instead, and our run has a time bound.
fn renew_args(spec: &AcmeSpec, path: &Path, days: u32) -> Vec<String> {
    let mut args = global_args(spec, path);
    args.extend(["renew".to_owned(), "--days".to_owned(), days.to_string(), "--no-random-sleep".to_owned()]);
    args
}

/// lego with `args`, the minimal environment and, for a test directory,
/// the CA bundle it trusts; then the state directory made private again,
/// and the run's end read: nothing wrong, or one [`AcmeError`].
fn lego(spec: &AcmeSpec, args: &[String]) -> Result<(), AcmeError> {
    let mut process = ProcessSpec::new(LEGO, args.iter().cloned());
    process.env = minimal_env();
    if let Some(bundle) = &spec.directory_ca {
        process.env.push(("LEGO_CA_CERTIFICATES".into(), bundle.clone().into_os_string()));
    }
    process.timeout = LEGO_TIMEOUT;
    process.stdout_limit = LEGO_OUTPUT;
    process.stderr_limit = LEGO_OUTPUT;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let (out, tail) =
        runtime.map_err(|_| AcmeError::Unknown)?.block_on(crate::exec::run_with_stderr_tail(&process));
    restrict(&spec.state_dir);
    match out.execution.execution_status {
        ExecutionStatus::Ok => Ok(()),
        ExecutionStatus::Timeout => Err(AcmeError::Timeout),
        ExecutionStatus::LaunchFailed => Err(AcmeError::LegoMissing),
        ExecutionStatus::NonzeroExit => Err(classify(tail.bytes(), &spec.names)),
        _ => Err(AcmeError::Unknown),
    }
}

/// Why lego failed, from the end of its stderr: lego 4.9's fixed phrases
/// and the RFC 8555 error types the directory answered. Only one of
/// `names` is ever named, and only the line lego tags with it counts.
pub fn classify(stderr_tail: &[u8], names: &[ServerName]) -> AcmeError {
    let text = String::from_utf8_lossy(stderr_tail);
    for line in text.lines() {
        let Some((name, error)) = line.strip_prefix('[').and_then(|rest| rest.split_once("] acme: error:"))
        else {
            continue;
        };
        let Some(name) = names.iter().find(|known| known.as_str() == name) else { continue };
        let kind = error.split(" :: ").find_map(|part| part.trim().strip_prefix(ACME_ERROR));
        return match kind {
            Some("rateLimited") => AcmeError::RateLimited,
            Some("rejectedIdentifier" | "caa") => AcmeError::NameRejected { name: name.clone() },
            _ => AcmeError::ChallengeFailed { name: name.clone() },
        };
    }
    if text.contains("urn:ietf:params:acme:error:rateLimited") {
        AcmeError::RateLimited
    } else if text.contains("Could not create client: get directory at") {
        match text.contains("x509: ") || text.contains("tls: ") {
            true => AcmeError::UntrustedDirectory,
            false => AcmeError::UnreachableDirectory,
        }
    } else if text.contains("Could not complete registration") {
        AcmeError::AccountRefused
    } else if ["connect: connection refused", "i/o timeout", "no such host", "connection reset"]
        .iter()
        .any(|phrase| text.contains(phrase))
    {
        AcmeError::UnreachableDirectory
    } else {
        AcmeError::Unknown
    }
}

/// The prefix of every RFC 8555 error type.
const ACME_ERROR: &str = "urn:ietf:params:acme:error:";

/// What the certificate at `path` (PEM, its first block) says of itself,
/// read by `openssl x509`. The file must be a regular file, not a link.
pub fn facts(path: &Path) -> Result<CertificateFacts, AcmeError> {
    let unreadable = AcmeError::CertificateUnreadable;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() && meta.len() <= 1 << 20 => {}
        _ => return Err(unreadable),
    }
    let mut process = ProcessSpec::new(OPENSSL, x509_args(path));
    process.env = minimal_env();
    process.timeout = Duration::from_secs(10);
    process.stdout_limit = 64 << 10;
    let out = crate::exec::run_blocking(&process);
    if out.execution.execution_status != ExecutionStatus::Ok {
        return Err(unreadable);
    }
    parse_x509(&String::from_utf8_lossy(&out.stdout)).ok_or(unreadable)
}

/// `openssl x509` printing each fact on its own line: dates as ISO 8601
/// UTC, names as RFC 2253.
fn x509_args(path: &Path) -> Vec<String> {
    let path = path.display().to_string();
    let args = ["x509", "-in", &path, "-noout", "-serial", "-startdate", "-enddate", "-issuer"];
    let more = ["-nameopt", "RFC2253", "-dateopt", "iso_8601", "-fingerprint", "-sha256"];
    let last = ["-ext", "subjectAltName"];
    args.iter().chain(&more).chain(&last).map(|arg| (*arg).to_owned()).collect()
}

/// The facts in `openssl x509`'s output (see [`x509_args`]); `None` when
/// one is missing or does not pass its type's check.
fn parse_x509(out: &str) -> Option<CertificateFacts> {
    let field = |key: &str| out.lines().find_map(|line| line.strip_prefix(key));
    let serial = CertSerial::parse(&field("serial=")?.trim().to_ascii_lowercase())?;
    let not_before = iso_seconds(field("notBefore=")?)?;
    let not_after = iso_seconds(field("notAfter=")?)?;
    let issuer = IssuerName::parse(&common_name(field("issuer=")?)?)?;
    let sha256 = field("sha256 Fingerprint=")?.trim().replace(':', "").to_ascii_lowercase();
    let sha256 = CertFingerprint::parse(&sha256)?;
    // The names follow the extension's heading, on the next line.
    let mut lines = out.lines().skip_while(|line| !line.starts_with("X509v3 Subject Alternative Name"));
    let sans = lines.nth(1)?;
    let mut names = Vec::new();
    for entry in sans.split(',').map(str::trim) {
        match entry.strip_prefix("DNS:") {
            Some(name) => names.push(CertName::parse(name)?),
            // An address or any other kind of name is not one the edge serves.
            None => continue,
        }
    }
    names.sort();
    (!names.is_empty()).then_some(CertificateFacts { names, not_before, not_after, issuer, serial, sha256 })
}

/// `2026-12-06 19:42:51Z` as Unix seconds.
fn iso_seconds(value: &str) -> Option<i64> {
    let at = humantime::parse_rfc3339(&value.trim().replacen(' ', "T", 1)).ok()?;
    at.duration_since(std::time::UNIX_EPOCH).ok().map(|since| since.as_secs() as i64)
}

/// The `CN` of an RFC 2253 name (`CN=R11,O=Let's Encrypt,C=US`): the
/// first one, its escapes (`\,`) undone.
fn common_name(rfc2253: &str) -> Option<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = rfc2253.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => current.push(chars.next()?),
            ',' | '+' => parts.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    parts.push(current);
    parts.into_iter().find_map(|part| part.strip_prefix("CN=").map(str::to_owned))
}

#[cfg(test)]
mod tests;
