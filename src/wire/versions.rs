//! Which volce-lab a server runs, and the rule for what a workstation may
//! send it (issue 27). Written once for both ends; pure, no I/O.
//!
//! The rule, for a workstation and a helper of any two versions:
//! - a helper serves every request of every protocol up to its own, in the
//!   shape that protocol gave it: a newer helper answers an older
//!   workstation's requests unchanged, and answer types tolerate fields they
//!   do not know (`super::answers`), so the old workstation reads what it
//!   knows of a newer answer;
//! - a workstation sends a request only when the server's protocol has
//!   everything in it ([`Request::needs`] against [`ServerVersion`]); else
//!   it answers `server_too_old` itself, naming the server, both versions
//!   and the upgrade, and sends nothing the helper could misread;
//! - the workstation learns the server's version from the gate's identity
//!   answer, once per ssh master ([`super::gate::version_line`]). A gate of
//!   protocol 1 says nothing, and neither does a login shell without the
//!   gate: then the server is taken to be protocol 1, which every helper
//!   serves, so the guess can refuse a request but never misread one.
//!
//! No request carries a version: protocol 1's bytes stay what they were,
//! and the helper refuses any field or operation it does not know
//! (`deny_unknown_fields`), so even a request sent on a wrong guess changes
//! nothing on an older helper.

use serde::{Deserialize, Serialize};

use super::Request;
use crate::vocab::{Code, Refusal};

/// This build's protocol. What each one added is [`ADDITIONS`].
pub const PROTOCOL_VERSION: u32 = 2;

/// What each protocol added, oldest first: the table HOST-SETUP.md's
/// compatibility section repeats. A change to a request, an operation, an
/// action or a field adds a row here and makes [`Request::needs`] say so.
pub const ADDITIONS: &[(u32, &str)] = &[
    (1, "the six operations, the seven actions and their parameters (0.1.0)"),
    (
        2,
        "the gate's identity answer names the helper's version and protocol; plan views carry `failure` and \
         the rejection's `reason`, the inventory `helper` (0.2.0); no request changed",
    ),
];

/// Which volce-lab a server runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelperVersion {
    /// The package's upstream version (Cargo.toml's), e.g. `0.2.0`.
    pub version: String,
    /// Its host protocol ([`PROTOCOL_VERSION`]).
    pub protocol: u32,
}

impl HelperVersion {
    /// This build's.
    pub fn this() -> HelperVersion {
        HelperVersion { version: env!("CARGO_PKG_VERSION").to_owned(), protocol: PROTOCOL_VERSION }
    }
}

/// What a workstation knows of a server's helper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerVersion {
    /// No identity answer yet (or none since the server was last reached).
    Unknown,
    /// A login shell answered identity: the server has no ssh gate for this
    /// key, so it cannot say (HOST-SETUP.md, the ssh gate).
    NoGate,
    /// A gate answered without a version: a release before 0.2.0.
    Before020,
    /// The gate named it.
    Known(HelperVersion),
}

impl ServerVersion {
    /// The protocol requests are held to: 1 unless the gate named one.
    pub fn protocol(&self) -> u32 {
        match self {
            ServerVersion::Known(helper) => helper.protocol,
            ServerVersion::Unknown | ServerVersion::NoGate | ServerVersion::Before020 => 1,
        }
    }

    /// One phrase for `targets`, `inspect` and refusals.
    pub fn describe(&self) -> String {
        match self {
            ServerVersion::Unknown => "not known yet (no identity answer)".into(),
            ServerVersion::NoGate => "not known (no ssh gate; protocol 1 assumed)".into(),
            ServerVersion::Before020 => "older than 0.2.0 (protocol 1)".into(),
            ServerVersion::Known(helper) => format!("{} (protocol {})", helper.version, helper.protocol),
        }
    }
}

impl Request {
    /// The oldest protocol that serves this request as it is. Every request
    /// of this build is protocol 1's (no request changed in protocol 2).
    pub fn needs(&self) -> u32 {
        match self {
            Request::GatewayStatus {}
            | Request::Inventory {}
            | Request::Plan { .. }
            | Request::Execute { .. }
            | Request::Logs { .. }
            | Request::GateRefusal { .. } => 1,
        }
    }
}

/// Whether a workstation may send a request that `needs` a protocol to
/// `server` (called `target`): else the `server_too_old` refusal, which
/// names both versions and the upgrade.
pub fn may_send(needs: u32, server: &ServerVersion, target: &str) -> Result<(), Refusal> {
    if needs <= server.protocol() {
        return Ok(());
    }
    let this = HelperVersion::this();
    Err(Refusal::new(
        Code::ServerTooOld,
        format!(
            "Target {target} runs volce-lab {}, and this request needs protocol {needs}, which this \
             workstation ({}, protocol {}) speaks; nothing was sent. Upgrade the server's package \
             (HOST-SETUP.md, Upgrading: `apt-get install ./volce-lab_{}_amd64.deb`).",
            server.describe(),
            this.version,
            this.protocol,
            this.version,
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::VariantArray as _;

    fn known(protocol: u32) -> ServerVersion {
        ServerVersion::Known(HelperVersion { version: format!("0.{protocol}.0"), protocol })
    }

    /// Tried: a request of protocol N against servers of N-1, N and N+1,
    /// for N from 1 to this build's, and servers that gave no version.
    #[test]
    fn a_request_is_sent_only_to_a_server_whose_protocol_has_it() {
        for needs in 1..=PROTOCOL_VERSION {
            assert!(may_send(needs, &known(needs), "web-1").is_ok());
            assert!(may_send(needs, &known(needs + 1), "web-1").is_ok(), "a newer server serves it");
            let older = may_send(needs, &known(needs - 1), "web-1");
            if needs > 1 {
                let refusal = older.unwrap_err();
                assert_eq!(refusal.code, Code::ServerTooOld);
                let message = refusal.message;
                assert!(message.starts_with("Target web-1 runs volce-lab "), "{message}");
                assert!(message.contains(&format!("protocol {}", needs - 1)), "{message}");
                assert!(message.contains(env!("CARGO_PKG_VERSION")), "{message}");
                assert!(message.contains("nothing was sent"), "{message}");
            }
        }
        for unknown in [ServerVersion::Unknown, ServerVersion::NoGate, ServerVersion::Before020] {
            assert_eq!(unknown.protocol(), 1, "{unknown:?}");
            assert!(may_send(1, &unknown, "web-1").is_ok());
            assert_eq!(may_send(2, &unknown, "web-1").unwrap_err().code, Code::ServerTooOld);
        }
    }

    /// Every operation of this build is protocol 1's: a helper of any
    /// release serves it, and a 0.1.0 server is sent all of them.
    #[test]
    fn every_request_of_this_build_needs_protocol_1() {
        let requests = [
            Request::GatewayStatus {},
            Request::Inventory {},
            Request::plan(crate::control::plan::Action::Stop, serde_json::Map::new()),
            Request::execute(&crate::vocab::PlanId::parse("0123456789abcdef0123456789abcdef").unwrap()),
            Request::logs("web", crate::wire::ContainerRole::App, 5, None),
            crate::wire::gate::RefusalRecord::of(crate::wire::gate::RefusalReason::NoCommand, None).request(),
        ];
        let operations: Vec<_> = requests.iter().map(Request::operation).collect();
        assert_eq!(operations, super::super::Operation::VARIANTS, "one request per operation");
        for request in &requests {
            assert_eq!(request.needs(), 1, "{request:?}");
            assert!(may_send(request.needs(), &ServerVersion::Before020, "web-1").is_ok());
        }
        assert_eq!(ADDITIONS.last().map(|(protocol, _)| *protocol), Some(PROTOCOL_VERSION));
    }
}
