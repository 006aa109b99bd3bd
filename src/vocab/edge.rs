//! The HTTPS edge (issue 39): the one container volce-lab owns that
//! answers on the addresses the operator's policy names and sends each
//! exposed app's names to that app's gateway. The policy's [`EdgeConfig`],
//! what an app's exposure records ([`Exposure`]), and the fixed names and
//! ports of the edge. Pure data and its validation.
//!
//! The edge runs as [`EDGE_UID`], a uid no account of a Debian system has,
//! so the private keys it reads (copies the helper makes, readable by that
//! uid only) are readable by no host account but root.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{AcmeContact, AcmeDirectory, HealthPath, PlanId, ServerName};

/// The edge's container and the network its ports are published on. The
/// underscore keeps them apart from every app's names (`vl-<app>...`: an
/// app name has no underscore), so no app can be named onto them.
pub const EDGE_CONTAINER: &str = "vl_edge";
pub const EDGE_NETWORK: &str = "vl_edge";
/// The value of `io.volce-lab.role` on the edge's container and network.
pub const EDGE_ROLE: &str = "edge";
/// The uid and gid the edge's nginx runs as: outside Debian's system
/// (100-999) and dynamic (1000-59999) ranges, below nobody's 65534.
pub const EDGE_UID: u32 = 64_039;
/// Where nginx listens inside the edge: plain HTTP, HTTPS, and the probe
/// (plain HTTP, published on 127.0.0.1 only, on a port docker chooses):
/// the helper asks through it that each exposed name reaches its app.
pub const EDGE_HTTP_PORT: u16 = 8080;
pub const EDGE_HTTPS_PORT: u16 = 8443;
pub const EDGE_PROBE_PORT: u16 = 8081;

/// The policy's `edge` object. Absent, nothing listens beyond loopback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeConfig {
    /// Where the edge answers plain HTTP (the redirect), e.g. `0.0.0.0:80`.
    pub http: SocketAddr,
    /// Where it answers HTTPS, e.g. `0.0.0.0:443`.
    pub https: SocketAddr,
    /// The certificate of each name, as files the operator keeps (PEM,
    /// root-owned; the key 0600). A name with none cannot be exposed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub certificates: BTreeMap<ServerName, CertificateFiles>,
    /// Whether plain HTTP answers with a redirect to HTTPS (the default)
    /// or serves the exposed names too.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub redirect_http: bool,
    /// Whether HTTPS answers carry `Strict-Transport-Security` (one year).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hsts: bool,
    /// Where a name without a file of `certificates` gets one (RFC 8555,
    /// HTTP-01 through the edge's plain HTTP address). Absent, every name
    /// needs its files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acme: Option<AcmeConfig>,
}

/// The policy's `edge.acme`: the CA's directory and the account's contact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcmeConfig {
    pub directory: AcmeDirectory,
    pub contact: AcmeContact,
    /// The CA certificates lego trusts for the directory's own TLS, for a
    /// private CA (a test's pebble); absent, the system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory_ca: Option<PathBuf>,
}

fn yes() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

impl EdgeConfig {
    /// What is wrong with a parsed `edge`, in the operator's words.
    pub fn problem(&self) -> Option<String> {
        if self.http.port() == 0 || self.https.port() == 0 {
            return Some("edge.http and edge.https need a port other than 0".into());
        }
        if self.http == self.https {
            return Some("edge.http and edge.https must be different addresses".into());
        }
        if let Some(ca) = self.acme.as_ref().and_then(|a| a.directory_ca.as_ref())
            && !ca.to_str().is_some_and(|t| t.starts_with('/') && !t.split('/').any(|p| p == ".."))
        {
            return Some("edge.acme.directory_ca must be an absolute path without '..'".into());
        }
        self.certificates.iter().find_map(|(name, files)| {
            (!files.is_absolute()).then(|| {
                format!("edge.certificates.{name}: cert and key must be absolute paths without '..'")
            })
        })
    }

    /// The port the redirect names, left out at 443.
    pub fn https_port_suffix(&self) -> String {
        match self.https.port() {
            443 => String::new(),
            port => format!(":{port}"),
        }
    }
}

/// An operator's certificate for one name: the chain and its key (PEM).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertificateFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertificateFiles {
    fn is_absolute(&self) -> bool {
        [&self.cert, &self.key].iter().all(|path| {
            let text = path.to_str().unwrap_or_default();
            text.starts_with('/')
                && !text.chars().any(char::is_control)
                && !text.split('/').any(|part| part == "..")
        })
    }
}

/// One name an exposure serves and where its certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExposedName {
    pub name: ServerName,
    pub source: CertSource,
}

/// One certificate to obtain from the policy's ACME directory for these
/// names (primary first); the engine adds where lego keeps its state and
/// where the edge serves the challenges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcmeOrder {
    pub acme: AcmeConfig,
    pub names: Vec<ServerName>,
}

/// Where an exposed name's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CertSource {
    /// The operator's files, and the sha256 of the certificate's bytes when
    /// the plan was made (a certificate replaced since voids the plan).
    File { files: CertificateFiles, cert_sha256: String },
    /// The policy's ACME directory: obtained when the plan executes,
    /// renewed by `volce-lab-host edge renew`.
    Acme { directory: AcmeDirectory },
}

impl CertSource {
    /// The source in the operator's words, for `show` and `edge status`.
    pub fn describe(&self) -> String {
        match self {
            CertSource::File { files, cert_sha256 } => format!(
                "certificate {} (sha256 {}), key {}",
                files.cert.display(),
                &cert_sha256[..16.min(cert_sha256.len())],
                files.key.display()
            ),
            CertSource::Acme { directory } => format!("a certificate from ACME at {directory}"),
        }
    }
}

impl CertSource {
    /// Which kind of source, without its details (what the agent sees).
    pub fn kind(&self) -> CertKind {
        match self {
            CertSource::File { .. } => CertKind::File,
            CertSource::Acme { .. } => CertKind::Acme,
        }
    }
}

/// Where a certificate comes from, as the inventory says it: the
/// operator's files (whose paths stay on the host) or ACME.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CertKind {
    File,
    Acme,
}

/// What a request for an exposed name through the edge's HTTPS address
/// got (web_status, through `gateway_status`): one closed set, from curl's
/// exit code and status, never its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HttpsAnswer {
    /// A 2xx or 3xx, over TLS verified for the name against the
    /// certificate volce-lab installed for it.
    Ok,
    /// The TLS handshake or the certificate's check failed (wrong name,
    /// expired, not the one installed).
    TlsFailed,
    /// No answer in time, the connection refused, or another status.
    NoAnswer,
    /// Not asked: curl is not installed on the server (`apt-get install curl`).
    NotChecked,
}

/// What the edge holds for one name (read-only, for the inventory and
/// web_status): the facts of its certificate copy, absent when there is
/// none or it cannot be read, and the last failed ACME order for it that
/// no order has succeeded since.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EdgeNameFacts {
    pub certificate: Option<super::CertificateFacts>,
    pub acme_failure: Option<super::AcmeFailure>,
}

/// What an app's record keeps of its exposure: each of its names with its
/// certificate, in the order the app serves them (primary first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exposure {
    pub names: Vec<ExposedName>,
}

impl Exposure {
    /// The names, comma separated, for a sentence.
    pub fn describe(&self) -> String {
        self.names.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// The names whose certificate comes from ACME, primary first.
    pub fn acme_names(&self) -> Vec<ServerName> {
        self.names
            .iter()
            .filter(|n| matches!(n.source, CertSource::Acme { .. }))
            .map(|n| n.name.clone())
            .collect()
    }
}

/// What an expose or unexpose asks of the edge (the engine's
/// `edge_apply`), derived by the controller from the app's record, the
/// policy and the records of the other exposed apps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeChange {
    pub plan_id: PlanId,
    /// The edge's whole new nginx.conf.
    pub config: String,
    /// The certificates to copy in first (expose): the operator's files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install: Vec<ExposedName>,
    /// The names to obtain one certificate for from ACME first (expose),
    /// primary first, and from where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub obtain: Option<AcmeOrder>,
    /// The names whose copies go once the new config serves (unexpose).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<ServerName>,
    /// The app's edge network, joined before the new config is loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<String>,
    /// The app's edge network, left once the new config serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disconnect: Option<String>,
    /// The names that must reach their app through the edge afterwards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probe: Vec<ServerName>,
    /// What the probe asks (the app's health path).
    #[serde(default, skip_serializing_if = "HealthPath::is_root")]
    pub health_path: HealthPath,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(value: serde_json::Value) -> Result<EdgeConfig, String> {
        let config: EdgeConfig = serde_json::from_value(value).map_err(|e| e.to_string())?;
        match config.problem() {
            Some(problem) => Err(problem),
            None => Ok(config),
        }
    }

    #[test]
    fn an_edge_names_two_addresses_and_defaults_to_the_redirect() {
        let edge = config(serde_json::json!({"http": "0.0.0.0:80", "https": "[::]:443"})).unwrap();
        assert!(edge.redirect_http);
        assert!(!edge.hsts);
        assert_eq!(edge.https_port_suffix(), "");
        // The defaults are left out, so the policy hashes as written.
        assert_eq!(
            serde_json::to_value(&edge).unwrap(),
            serde_json::json!({"http": "0.0.0.0:80", "https": "[::]:443"})
        );
        let edge =
            config(serde_json::json!({"http": "127.0.0.1:18080", "https": "127.0.0.1:18443"})).unwrap();
        assert_eq!(edge.https_port_suffix(), ":18443");
    }

    #[test]
    fn bad_edges_are_refused() {
        // What was tried: a name instead of an address, no port, port 0,
        // one address twice, a relative certificate path, an unknown key.
        for bad in [
            serde_json::json!({"http": "example.com:80", "https": "0.0.0.0:443"}),
            serde_json::json!({"http": "0.0.0.0", "https": "0.0.0.0:443"}),
            serde_json::json!({"http": "0.0.0.0:0", "https": "0.0.0.0:443"}),
            serde_json::json!({"http": "0.0.0.0:443", "https": "0.0.0.0:443"}),
            serde_json::json!({"http": "0.0.0.0:80", "https": "0.0.0.0:443",
                "certificates": {"shop.example.com": {"cert": "certs/a.pem", "key": "/k"}}}),
            serde_json::json!({"http": "0.0.0.0:80", "https": "0.0.0.0:443",
                "certificates": {"shop.example.com": {"cert": "/a/../b.pem", "key": "/k"}}}),
            serde_json::json!({"http": "0.0.0.0:80", "https": "0.0.0.0:443",
                "certificates": {"Shop.Example.com": {"cert": "/a.pem", "key": "/k"}}}),
            serde_json::json!({"http": "0.0.0.0:80", "https": "0.0.0.0:443", "acme": {}}),
        ] {
            assert!(config(bad.clone()).is_err(), "{bad}");
        }
    }
}
