//! Certificates from an ACME directory (issue 39): the directory's URL
//! ([`AcmeDirectory`]), the account's contact ([`AcmeContact`]), what the
//! host helper asks lego for ([`AcmeSpec`]), what a certificate says of
//! itself ([`CertificateFacts`]) and the closed set of ways getting one
//! fails ([`AcmeError`]). Pure data and its validation.
//!
//! Why the strings are validated so narrowly: the directory and the contact
//! are the operator's, but each reaches lego's argv (one element, never a
//! shell), names a directory lego makes under the account store
//! (`accounts/<host_port>/<email>/`), and is shown to the operator; a
//! control character could hide part of it, a leading `-` would be read as
//! an option, and userinfo in a URL would carry a secret into every log.
//! The certificate's facts come from `openssl x509` reading a file, and are
//! validated again so that nothing a CA chose to write reaches a person or
//! a model unchecked.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::ServerName;
use super::names::is_server_name;
use super::string_form::string_form;

/// The longest directory URL accepted.
pub const ACME_DIRECTORY_MAX: usize = 512;
/// The longest contact address accepted (RFC 5321's path limit).
pub const ACME_CONTACT_MAX: usize = 254;
/// The most names one certificate covers: an app's server name and its
/// `also_server_names` (one certificate per server name set).
pub const ACME_NAMES_MAX: usize = 1 + super::MAX_ALSO_SERVER_NAMES;
/// The most days before expiry a renewal may ask for (lego's `--days`):
/// ten years, more than any CA's validity, so a test can force a renewal.
pub const RENEW_DAYS_MAX: u32 = 3650;

/// Let's Encrypt's production directory, the documented default.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

/// An RFC 8555 directory: an `https://` URL of at most
/// [`ACME_DIRECTORY_MAX`] bytes, with a host (a DNS name, an IPv4 address
/// or a bracketed IPv6 one), an optional port, and a path of URL-safe
/// characters; no userinfo, query, fragment, whitespace or control.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AcmeDirectory(String);

impl AcmeDirectory {
    pub fn parse(value: &str) -> Option<AcmeDirectory> {
        if value.len() > ACME_DIRECTORY_MAX {
            return None;
        }
        let rest = value.strip_prefix("https://")?;
        let (authority, path) = rest.find('/').map_or((rest, ""), |at| rest.split_at(at));
        let path_ok = path.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~/%+=:,;!$'()*".contains(&b));
        (host_port_ok(authority) && path_ok).then(|| AcmeDirectory(value.to_owned()))
    }

    /// Let's Encrypt's production directory.
    pub fn lets_encrypt() -> AcmeDirectory {
        AcmeDirectory(LETS_ENCRYPT.to_owned())
    }
}

string_form!(AcmeDirectory, "not an ACME directory (an https:// URL without userinfo, query or spaces)");

/// `host[:port]`: a DNS name (any case), an IPv4 address or `[IPv6]`, and
/// a port 1 to 65535.
fn host_port_ok(authority: &str) -> bool {
    let (host_ok, port) = match authority.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((inside, after)) => (inside.parse::<std::net::Ipv6Addr>().is_ok(), after),
            None => return false,
        },
        None => {
            let (host, port) = authority.find(':').map_or((authority, ""), |at| authority.split_at(at));
            (is_server_name(&host.to_ascii_lowercase()), port)
        }
    };
    let port_ok = port.is_empty()
        || port.strip_prefix(':').is_some_and(|digits| {
            digits.bytes().all(|b| b.is_ascii_digit()) && digits.parse::<u16>().is_ok_and(|p| p > 0)
        });
    host_ok && port_ok
}

/// The account's contact: `local@domain`, ASCII only, the local part of
/// letters, digits and `.`, `_`, `+`, `-` (not first), the domain a DNS
/// name with at least one dot; at most [`ACME_CONTACT_MAX`] bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AcmeContact(String);

impl AcmeContact {
    pub fn parse(value: &str) -> Option<AcmeContact> {
        let (local, domain) = value.split_once('@')?;
        let local_ok = !local.is_empty()
            && local.len() <= 64
            && !local.starts_with(['-', '.'])
            && local.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b));
        let domain = domain.to_ascii_lowercase();
        let domain_ok = domain.contains('.') && is_server_name(&domain);
        (value.len() <= ACME_CONTACT_MAX && local_ok && domain_ok).then(|| AcmeContact(value.to_owned()))
    }
}

string_form!(AcmeContact, "not an ACME contact (an email address like ops@example.com)");

/// What the host helper asks lego for: one certificate for `names` (the
/// first names its files), from `directory`, for the account of `contact`,
/// the HTTP-01 challenges answered from files lego writes under `webroot`
/// (served by the edge at `/.well-known/acme-challenge/`), the account and
/// the certificates kept in `state_dir` (root's, 0700).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcmeSpec {
    pub directory: AcmeDirectory,
    pub contact: AcmeContact,
    pub names: Vec<ServerName>,
    pub webroot: PathBuf,
    pub state_dir: PathBuf,
    /// The CA bundle lego trusts for the directory's own TLS
    /// (`LEGO_CA_CERTIFICATES`): only tests set it, for pebble.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory_ca: Option<PathBuf>,
}

impl AcmeSpec {
    /// Whether the spec is one the runner accepts: 1 to [`ACME_NAMES_MAX`]
    /// distinct names, absolute paths.
    pub fn valid(&self) -> bool {
        let mut names: Vec<&str> = self.names.iter().map(ServerName::as_str).collect();
        names.sort_unstable();
        names.dedup();
        let paths = [Some(&self.webroot), Some(&self.state_dir), self.directory_ca.as_ref()];
        (1..=ACME_NAMES_MAX).contains(&self.names.len())
            && names.len() == self.names.len()
            && paths.into_iter().flatten().all(|path| path.is_absolute())
    }

    /// The name lego files the certificate under (the first).
    pub fn primary(&self) -> &ServerName {
        &self.names[0]
    }
}

/// A name a certificate covers: a server name, or `*.` and one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CertName(String);

impl CertName {
    pub fn parse(value: &str) -> Option<CertName> {
        is_server_name(value.strip_prefix("*.").unwrap_or(value)).then(|| CertName(value.to_owned()))
    }
}

string_form!(CertName, "not a certificate name (a lowercase DNS name, maybe *.)");

/// A certificate's issuer as its common name: 1 to 128 printable ASCII
/// characters (a CA's name reaches the operator and the agent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IssuerName(String);

impl IssuerName {
    pub fn parse(value: &str) -> Option<IssuerName> {
        let printable = value.bytes().all(|b| (b' '..=b'~').contains(&b));
        (printable && (1..=128).contains(&value.len())).then(|| IssuerName(value.to_owned()))
    }
}

string_form!(IssuerName, "not an issuer name (1 to 128 printable ASCII characters)");

/// The SHA-256 of a certificate's DER, as 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CertFingerprint(String);

impl CertFingerprint {
    pub fn parse(value: &str) -> Option<CertFingerprint> {
        crate::text::is_lower_hex(value, 64).then(|| CertFingerprint(value.to_owned()))
    }
}

string_form!(CertFingerprint, "not a certificate fingerprint (64 lowercase hex digits)");

/// A certificate's serial number, as 1 to 40 lowercase hex digits (RFC
/// 5280 caps it at 20 octets).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CertSerial(String);

impl CertSerial {
    pub fn parse(value: &str) -> Option<CertSerial> {
        let hex = value.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        (hex && (1..=40).contains(&value.len())).then(|| CertSerial(value.to_owned()))
    }
}

string_form!(CertSerial, "not a certificate serial (1 to 40 lowercase hex digits)");

/// What a certificate says of itself: the names it covers (its DNS subject
/// alternative names, sorted), its validity (Unix seconds), its issuer's
/// common name, its serial and the SHA-256 of its DER.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertificateFacts {
    pub names: Vec<CertName>,
    pub not_before: i64,
    pub not_after: i64,
    pub issuer: IssuerName,
    pub serial: CertSerial,
    pub sha256: CertFingerprint,
}

impl CertificateFacts {
    /// Whole days left at `now` (negative once expired).
    pub fn days_left(&self, now: i64) -> i64 {
        (self.not_after - now).div_euclid(86_400)
    }
}

/// Where lego keeps one certificate, all root's 0600 in the state
/// directory's `certificates/`: the certificate with its chain, its
/// private key, and the issuer's certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcmeFiles {
    pub certificate: PathBuf,
    pub key: PathBuf,
    pub issuer: PathBuf,
}

/// A certificate in place: its facts and its files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certificate {
    pub facts: CertificateFacts,
    pub files: AcmeFiles,
}

/// What a renewal did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "renewal", rename_all = "snake_case")]
pub enum Renewal {
    /// A new certificate replaced the old one.
    Renewed { certificate: Certificate },
    /// The certificate has more days left than asked: nothing changed.
    NotDue { certificate: Certificate },
}

/// Why a certificate could not be had: one closed set, each with a stable
/// code, read from lego's exit and the end of its stderr, never the
/// stderr itself (a CA's text is not ours to pass on).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum AcmeError {
    #[error("The ACME spec is not valid: 1 to 4 distinct names and absolute paths are needed.")]
    InvalidSpec,
    #[error("Lego is not installed at /usr/bin/lego: install Debian's package lego.")]
    LegoMissing,
    #[error("The ACME state directory is not root's 0700 directory: fix its owner and mode.")]
    UnsafeState,
    #[error("The ACME directory did not answer: check its URL and this host's outbound HTTPS.")]
    UnreachableDirectory,
    #[error("The ACME directory's TLS certificate is not trusted: check its URL.")]
    UntrustedDirectory,
    #[error("The ACME directory refused the account: check the contact address.")]
    AccountRefused,
    #[error(
        "The HTTP-01 challenge for {name} failed: check that its DNS points here and port 80 reaches the edge."
    )]
    ChallengeFailed { name: ServerName },
    #[error("The ACME directory refuses to issue for {name}: check the name and its CAA records.")]
    NameRejected { name: ServerName },
    #[error("The ACME directory's rate limit was reached: try again later (hours for Let's Encrypt).")]
    RateLimited,
    #[error("Another certificate run holds the ACME state directory: try again in a minute.")]
    Busy,
    #[error("Lego did not finish in time: try again, and check the directory's status.")]
    Timeout,
    #[error("The certificate in the ACME state directory is missing or cannot be read: obtain a new one.")]
    CertificateUnreadable,
    #[error("Lego failed for a reason volce-lab does not recognize: run it by hand to see why.")]
    Unknown,
}

impl AcmeError {
    /// The stable machine code (the serde tag).
    pub fn code(&self) -> &'static str {
        match self {
            AcmeError::InvalidSpec => "invalid_spec",
            AcmeError::LegoMissing => "lego_missing",
            AcmeError::UnsafeState => "unsafe_state",
            AcmeError::UnreachableDirectory => "unreachable_directory",
            AcmeError::UntrustedDirectory => "untrusted_directory",
            AcmeError::AccountRefused => "account_refused",
            AcmeError::ChallengeFailed { .. } => "challenge_failed",
            AcmeError::NameRejected { .. } => "name_rejected",
            AcmeError::RateLimited => "rate_limited",
            AcmeError::Busy => "busy",
            AcmeError::Timeout => "timeout",
            AcmeError::CertificateUnreadable => "certificate_unreadable",
            AcmeError::Unknown => "unknown",
        }
    }
}

/// The last failed order for a name (an expose's or a renewal's), kept
/// until an order for it succeeds: when, and why as the closed
/// [`AcmeError`] (nothing of the CA's own text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcmeFailure {
    /// Unix seconds.
    pub at: i64,
    pub error: AcmeError,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_an_https_url_without_userinfo_query_or_spaces() {
        for good in [
            LETS_ENCRYPT,
            "https://127.0.0.1:14000/dir",
            "https://[::1]:14000/dir",
            "https://[::1]",
            "https://ACME.Example.org",
            "https://acme.example.org:443/acme/directory",
        ] {
            assert!(AcmeDirectory::parse(good).is_some(), "{good}");
        }
        let long = format!("https://a.example/{}", "d".repeat(ACME_DIRECTORY_MAX));
        for bad in [
            "",
            "http://acme.example.org/dir",
            "https://",
            "https://user:pw@acme.example.org/dir",
            "https://acme.example.org/dir?x=1",
            "https://acme.example.org/dir#f",
            "https://acme.example.org/a b",
            "https://acme.example.org/a\nb",
            "https://acme.example.org:0/dir",
            "https://acme.example.org:99999/dir",
            "https://acme.example.org:/dir",
            "https://[::1/dir",
            "https://[nothost]:1/dir",
            "https://-x.example/dir",
            "-https://a.example",
            &long,
        ] {
            assert!(AcmeDirectory::parse(bad).is_none(), "{bad:?}");
            assert!(serde_json::from_value::<AcmeDirectory>(serde_json::json!(bad)).is_err(), "{bad:?}");
        }
        assert_eq!(serde_json::to_value(AcmeDirectory::lets_encrypt()).unwrap(), LETS_ENCRYPT);
    }

    #[test]
    fn a_contact_is_a_plain_email_address() {
        for good in ["ops@example.com", "first.last+acme@Mail.Example.org", "a_b-c@x.io"] {
            assert!(AcmeContact::parse(good).is_some(), "{good}");
        }
        for bad in [
            "",
            "ops",
            "ops@localhost",
            "@example.com",
            "-ops@example.com",
            ".ops@example.com",
            "o ps@example.com",
            "ops@exa mple.com",
            "ops@@example.com",
            "\"ops\"@example.com",
            "ops@example.com\n",
            "opé@example.com",
            &format!("{}@example.com", "a".repeat(65)),
        ] {
            assert!(AcmeContact::parse(bad).is_none(), "{bad:?}");
        }
    }

    fn spec(names: &[&str]) -> AcmeSpec {
        AcmeSpec {
            directory: AcmeDirectory::lets_encrypt(),
            contact: AcmeContact::parse("ops@example.com").unwrap(),
            names: names.iter().map(|name| ServerName::parse(name).unwrap()).collect(),
            webroot: "/var/lib/volce-lab/edge/webroot".into(),
            state_dir: "/var/lib/volce-lab/edge/acme".into(),
            directory_ca: None,
        }
    }

    #[test]
    fn a_spec_has_one_to_four_distinct_names_and_absolute_paths() {
        assert!(spec(&["a.example"]).valid());
        assert!(spec(&["a.example", "www.a.example", "b.example", "www.b.example"]).valid());
        assert!(!spec(&[]).valid());
        assert!(!spec(&["a.example", "b.example", "c.example", "d.example", "e.example"]).valid());
        assert!(!spec(&["a.example", "a.example"]).valid());
        let relative = AcmeSpec { webroot: "webroot".into(), ..spec(&["a.example"]) };
        assert!(!relative.valid());
        let ca = AcmeSpec { directory_ca: Some("ca.pem".into()), ..spec(&["a.example"]) };
        assert!(!ca.valid());
        assert_eq!(spec(&["a.example", "b.example"]).primary().as_str(), "a.example");
        let unknown = serde_json::json!({"directory": LETS_ENCRYPT, "contact": "ops@example.com",
            "names": ["a.example"], "webroot": "/w", "state_dir": "/s", "shell": "sh"});
        assert!(serde_json::from_value::<AcmeSpec>(unknown).is_err());
    }

    #[test]
    fn certificate_facts_round_trip_and_refuse_what_a_ca_should_not_write() {
        let facts = CertificateFacts {
            names: vec![CertName::parse("a.example").unwrap(), CertName::parse("*.b.example").unwrap()],
            not_before: 1_765_000_000,
            not_after: 1_765_000_000 + 90 * 86_400,
            issuer: IssuerName::parse("R11").unwrap(),
            serial: CertSerial::parse("4cc656f8a96e1950").unwrap(),
            sha256: CertFingerprint::parse(&"ab".repeat(32)).unwrap(),
        };
        let json = serde_json::to_value(&facts).unwrap();
        assert_eq!(json["names"], serde_json::json!(["a.example", "*.b.example"]));
        assert_eq!(serde_json::from_value::<CertificateFacts>(json).unwrap(), facts);
        assert_eq!(facts.days_left(1_765_000_000), 90);
        assert_eq!(facts.days_left(1_765_000_000 + 91 * 86_400), -1);
        assert!(CertName::parse("*.*.example").is_none());
        assert!(CertName::parse("A.example").is_none());
        assert!(IssuerName::parse("R11\u{1b}[2J").is_none());
        assert!(IssuerName::parse("").is_none());
        assert!(CertFingerprint::parse(&"AB".repeat(32)).is_none());
        assert!(CertSerial::parse(&"a".repeat(41)).is_none());
        assert!(CertSerial::parse("4C").is_none());
    }

    #[test]
    fn an_acme_error_is_a_code_and_a_sentence_with_the_next_step() {
        let name = ServerName::parse("a.example").unwrap();
        let failed = AcmeError::ChallengeFailed { name };
        assert_eq!(
            serde_json::to_value(&failed).unwrap(),
            serde_json::json!({"cause": "challenge_failed", "name": "a.example"})
        );
        let name = ServerName::parse("a.example").unwrap();
        let every = [
            AcmeError::InvalidSpec,
            AcmeError::LegoMissing,
            AcmeError::UnsafeState,
            AcmeError::UnreachableDirectory,
            AcmeError::UntrustedDirectory,
            AcmeError::AccountRefused,
            failed,
            AcmeError::NameRejected { name },
            AcmeError::RateLimited,
            AcmeError::Busy,
            AcmeError::Timeout,
            AcmeError::CertificateUnreadable,
            AcmeError::Unknown,
        ];
        for error in every {
            assert_eq!(serde_json::to_value(&error).unwrap()["cause"], error.code());
            let sentence = error.to_string();
            assert!(sentence.starts_with(char::is_uppercase) && sentence.ends_with('.'), "{sentence}");
        }
    }
}
