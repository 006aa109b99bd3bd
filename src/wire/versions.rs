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
//! - from protocol 2 a request may say the workstation's protocol
//!   (`protocol`, beside the operation's fields): the workstation adds it
//!   only for a server whose gate named protocol 2 or later
//!   ([`Request::to_bytes_for`]), so a 0.1.0 helper, which refuses any field
//!   it does not know, is sent protocol 1's bytes exactly. The helper reads
//!   a request without it as protocol 1's ([`admit`]): it answers every
//!   protocol from its oldest served one to its own, refuses an older one
//!   `client_too_old` and a newer one `server_too_old` (a backstop: the
//!   workstation's own check comes first), both naming both versions.
//!
//! What each protocol added is written per feature ([`Feature::since`]:
//! operations, actions, parameters and fields, in exhaustive matches, so a
//! new variant cannot ship without its protocol), and the tests hold every
//! request of this build against helpers one protocol older and newer
//! ([`Helper`] switches the helper's parser by protocol).

use serde::{Deserialize, Serialize};

use super::{Operation, Request, RequestId};
use crate::vocab::{ALSO_SERVER_NAMES, Action};
use crate::vocab::{Code, Refusal};

/// This build's protocol. What each one added is [`ADDITIONS`].
pub const PROTOCOL_VERSION: u32 = 2;

/// What each protocol added, oldest first: the table docs/server-install.md's
/// compatibility section repeats. A change to a request, an operation, an
/// action or a field adds a row here and makes [`Request::needs`] say so.
pub const ADDITIONS: &[(u32, &str)] = &[
    (1, "the six operations, the seven actions and their parameters (0.1.0)"),
    (
        2,
        "the gate's identity answer names the helper's version and protocol; a request may name its protocol; \
         a deploy may leave out `container_port` when the catalog entry gives it; the `restart` and \
         `rollback` actions; plan views carry `failure` and the rejection's `reason`, the inventory `helper`, \
         each app's `kept_versions`, each catalog entry's port and health path and the offer's \
         `gateway_access_log`; a deploy's or update's spec names the entry's env file and its keyed hash \
         (`env_file`, never a value) and the inventory says `has_configuration`; a rolled-back execute's refusal \
         and its plan view carry the failed app container's last lines (`app_log`: redacted, bounded, \
         untrusted); a catalog entry's `data` directory (the inventory's `has_data`, each app's `data`, a \
         deploy's, update's, start's and restart's spec), and remove_app's `purge_data` and its result's `data`; deploy and \
         nginx_config take `also_server_names` (at most three names the gateway serves besides \
         `server_name`), which the deploy's spec, the nginx_config payload and the inventory's app carry \
         when there are any; the `statement` and `signed_approval` operations (an approval signed on the \
         operator's own device, carried by the agent, verified by the host); the `run_task` action (a task \
         the catalog entry declares, run once; its execute result's `task` carries the exit code and the \
         redacted, untrusted output); a request may carry the audit head the workstation witnessed \
         (`witness`), and a reply to a protocol-2 request carries the host's audit head and the rows that \
         prove it extends the witnessed one (`audit`); `logs` may name one of the app's accessories as its \
         `container`; `signed_approval` also takes a rollout's statement, which approves the plan its line \
         for this host names (0.2.0)",
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
    /// key, so it cannot say (docs/server-install.md, the ssh gate).
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

/// The oldest workstation protocol this helper still answers. Raising it
/// retires a protocol: its workstations get `client_too_old`.
pub const OLDEST_CLIENT: u32 = 1;

/// One thing a request can use that some protocol added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    Operation(Operation),
    Action(Action),
    /// A `plan` parameter of an action.
    Parameter(Action, &'static str),
    /// A parameter of an action left out because the helper may take it
    /// from elsewhere: deploy's `container_port` from the catalog entry
    /// (`Action::optional_parameters`; issue 25).
    Omitted(Action, &'static str),
    /// `logs`' optional `since_minutes`.
    SinceMinutes,
    /// `logs` of an accessory by its name (issue 40): a helper of protocol
    /// 1 refuses any `container` but `app` and `gateway`.
    AccessoryLogs,
    /// The `request_id` beside the operation's fields.
    RequestId,
    /// The request's `protocol` field: the workstation's protocol.
    ProtocolField,
    /// The request's `witness` field: the audit head the workstation
    /// witnessed (`super::witness`).
    WitnessField,
}

impl Feature {
    /// The protocol that added it.
    pub fn since(self) -> u32 {
        match self {
            Feature::Operation(
                Operation::GatewayStatus
                | Operation::Inventory
                | Operation::Plan
                | Operation::Execute
                | Operation::Logs
                | Operation::GateRefusal,
            ) => 1,
            // A helper of protocol 1 refuses either as an unknown operation.
            Feature::Operation(Operation::Statement | Operation::SignedApproval) => 2,
            Feature::Action(
                Action::Deploy
                | Action::NginxConfig
                | Action::Stop
                | Action::RemoveImage
                | Action::RemoveApp
                | Action::Start
                | Action::Update,
            ) => 1,
            // A helper of protocol 1 answers it `unknown_action`.
            Feature::Action(
                Action::Restart
                | Action::Rollback
                | Action::RunTask
                | Action::Backup
                | Action::Restore
                | Action::Expose
                | Action::Unexpose
                | Action::UpdateAccessory
                | Action::RotateCredential,
            ) => 2,
            // A helper of protocol 1 refuses either as a stray parameter: never
            // kept data where a purge was asked, nor one name where more were.
            Feature::Parameter(Action::RemoveApp, "purge_data")
            | Feature::Parameter(Action::Deploy | Action::NginxConfig, ALSO_SERVER_NAMES) => 2,
            // Every other parameter so far came with its action.
            Feature::Parameter(action, _) => Feature::Action(action).since(),
            // Left out, either is what every protocol knows (data kept, one name).
            Feature::Omitted(Action::RemoveApp, "purge_data") | Feature::Omitted(_, ALSO_SERVER_NAMES) => 1,
            // A helper of protocol 1 refuses a deploy without its port.
            Feature::Omitted(..) => 2,
            Feature::SinceMinutes | Feature::RequestId => 1,
            Feature::ProtocolField | Feature::WitnessField | Feature::AccessoryLogs => 2,
        }
    }
}

/// The features `request` uses (the request id and the protocol field
/// aside, which travel beside it): its operation, its action and parameters
/// when they are names this build knows (an unknown one is the helper's to
/// refuse, `unknown_action`), and its optional fields.
pub fn features(request: &Request) -> Vec<Feature> {
    let mut used = vec![Feature::Operation(request.operation())];
    match request {
        Request::Plan { action, parameters } => {
            if let Ok(action) = Action::parse(action) {
                used.push(Feature::Action(action));
                let given = |name: &str| parameters.as_object().is_some_and(|map| map.contains_key(name));
                for known in action.parameters() {
                    if given(known) {
                        used.push(Feature::Parameter(action, known));
                    } else if action.optional_parameters().contains(known) {
                        used.push(Feature::Omitted(action, known));
                    }
                }
            }
        }
        Request::Logs { since_minutes, container, .. } => {
            if since_minutes.is_some() {
                used.push(Feature::SinceMinutes);
            }
            if super::ContainerRole::parse(container).is_none() {
                used.push(Feature::AccessoryLogs);
            }
        }
        _ => {}
    }
    used
}

impl Request {
    /// The oldest protocol that serves this request as it is: the newest of
    /// its features'.
    pub fn needs(&self) -> u32 {
        features(self).into_iter().map(Feature::since).max().unwrap_or(1)
    }

    /// The request's bytes for `server`: with the request id when there is
    /// one, and with this workstation's `protocol` only when the server's
    /// protocol reads it (else exactly protocol 1's bytes).
    pub fn to_bytes_for(&self, id: Option<&RequestId>, server: &ServerVersion) -> Vec<u8> {
        self.to_bytes_witnessed(id, server, None)
    }

    /// [`Request::to_bytes_for`] with the audit head the workstation
    /// witnessed, for a server whose protocol reads it (else left out).
    pub fn to_bytes_witnessed(
        &self,
        id: Option<&RequestId>,
        server: &ServerVersion,
        witness: Option<&super::witness::Witnessed>,
    ) -> Vec<u8> {
        let mut value = serde_json::to_value(self).expect("a request serializes");
        if let serde_json::Value::Object(map) = &mut value {
            if let Some(id) = id {
                map.insert("request_id".into(), id.as_str().into());
            }
            if Feature::ProtocolField.since() <= server.protocol() {
                map.insert("protocol".into(), PROTOCOL_VERSION.min(server.protocol()).into());
            }
            if let Some(witness) = witness.filter(|_| Feature::WitnessField.since() <= server.protocol()) {
                map.insert("witness".into(), serde_json::to_value(witness).expect("a witness serializes"));
            }
        }
        serde_json::to_vec(&value).expect("a JSON value serializes")
    }
}

/// What a helper speaks: its own protocol and the oldest workstation
/// protocol it still answers. A parameter, so that tests build the helpers
/// of the protocols around this one from the same source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Helper {
    pub protocol: u32,
    pub oldest_client: u32,
}

impl Helper {
    /// This build's helper.
    pub const THIS: Helper = Helper { protocol: PROTOCOL_VERSION, oldest_client: OLDEST_CLIENT };

    /// Whether this helper knows `feature`; if not, the code that helper
    /// refused it with: an unknown action `unknown_action`, an unknown
    /// parameter `invalid_parameters`, anything else `invalid_request` (its
    /// parser refuses unknown fields and operations).
    pub fn knows(self, feature: Feature) -> Result<(), Code> {
        if feature.since() <= self.protocol {
            return Ok(());
        }
        Err(match feature {
            Feature::Action(_) => Code::UnknownAction,
            // Its logs refuse a container that is neither app nor gateway.
            Feature::Parameter(..) | Feature::Omitted(..) | Feature::AccessoryLogs => Code::InvalidParameters,
            Feature::Operation(_)
            | Feature::SinceMinutes
            | Feature::RequestId
            | Feature::ProtocolField
            | Feature::WitnessField => Code::InvalidRequest,
        })
    }
}

/// The first release of each protocol, oldest first.
pub const RELEASES: &[(u32, &str)] = &[(1, "0.1.0"), (2, "0.2.0")];

/// The first release that speaks `protocol` (the newest known for a
/// protocol this build has not heard of).
pub fn first_release(protocol: u32) -> &'static str {
    RELEASES.iter().find(|(p, _)| *p >= protocol).or(RELEASES.last()).map_or("?", |(_, v)| v)
}

/// Whether some release this build knows of speaks `protocol`.
fn released(protocol: u32) -> bool {
    RELEASES.iter().any(|(p, _)| *p == protocol)
}

/// The helper's rule: which protocol the request's `protocol` field says
/// (`None`: absent, protocol 1), or why it is not answered.
pub fn admit(client: Option<u32>, helper: Helper) -> Result<u32, Refusal> {
    let client = client.unwrap_or(1);
    let this = |protocol: u32| {
        if protocol == PROTOCOL_VERSION { env!("CARGO_PKG_VERSION") } else { first_release(protocol) }
    };
    let runs = format!("This server runs volce-lab {} (protocol {})", this(helper.protocol), helper.protocol);
    // Each sentence says what is true of the number sent (issue 38): an
    // upgrade is named only when a known release would answer it.
    if client > helper.protocol {
        let upgrade = if released(client) {
            format!("Upgrade the server's package to volce-lab {} or later", first_release(client))
        } else {
            "No release this server knows of speaks it: upgrade the server's package to the release \
             the workstation runs"
                .to_owned()
        };
        return Err(Refusal::new(
            Code::ServerTooOld,
            format!(
                "{runs} and the request is protocol {client}; nothing was done. {upgrade} \
                 (server-install.md, Upgrading)."
            ),
        ));
    }
    if client < helper.oldest_client {
        let message = if client == 0 {
            format!(
                "{runs}, and the request is protocol 0, which no volce-lab ever spoke (protocols start at \
                 1); nothing was done."
            )
        } else {
            format!(
                "{runs}, which no longer answers protocol {client}; nothing was done. Upgrade the \
                 workstation's volce-lab to {} or later (server-install.md, Upgrading).",
                first_release(helper.oldest_client),
            )
        };
        return Err(Refusal::new(Code::ClientTooOld, message));
    }
    Ok(client)
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
             (server-install.md, Upgrading: `apt-get install ./volce-lab_{}-1_amd64.deb`).",
            server.describe(),
            this.version,
            this.protocol,
            this.version,
        ),
    ))
}

#[cfg(test)]
mod meet;

#[cfg(test)]
mod tests {
    use super::*;
    use strum::VariantArray as _;

    fn known(protocol: u32) -> ServerVersion {
        ServerVersion::Known(HelperVersion { version: format!("0.{protocol}.0"), protocol })
    }

    /// Issue 46: the refusal named `volce-lab_0.2.0_amd64.deb`, a file
    /// scripts/package never writes (cargo-deb adds the Debian revision:
    /// `volce-lab_0.2.0-1_amd64.deb`). Tried: the refusal to a 0.1.0 server.
    #[test]
    fn server_too_old_names_the_package_file_scripts_package_writes() {
        let refusal = may_send(PROTOCOL_VERSION, &known(PROTOCOL_VERSION - 1), "web-1").unwrap_err();
        let file = format!("./volce-lab_{}-1_amd64.deb", HelperVersion::this().version);
        assert!(refusal.message.contains(&file), "{}", refusal.message);
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

    /// Every operation of this build but the two of signed approvals is
    /// protocol 1's: a helper of any release serves it, and a 0.1.0 server
    /// is sent all of them; `statement` and `signed_approval` need protocol
    /// 2, and a 0.1.0 server is sent neither (`server_too_old`).
    #[test]
    fn every_request_of_this_build_needs_protocol_1() {
        let id = crate::vocab::PlanId::parse("0123456789abcdef0123456789abcdef").unwrap();
        let signed = Request::SignedApproval { plan_id: id.as_str().into(), approval: String::new() };
        for request in [Request::statement(&id), signed] {
            assert_eq!(request.needs(), 2, "{request:?}");
            let refused = may_send(request.needs(), &ServerVersion::Before020, "web-1").unwrap_err();
            assert_eq!(refused.code, Code::ServerTooOld);
        }
        let requests = [
            Request::GatewayStatus {},
            Request::Inventory {},
            Request::plan(crate::vocab::Action::Stop, serde_json::Map::new()),
            Request::execute(&crate::vocab::PlanId::parse("0123456789abcdef0123456789abcdef").unwrap()),
            Request::logs("web", crate::wire::ContainerRole::App, 5, None),
            crate::wire::gate::RefusalRecord::of(crate::wire::gate::RefusalReason::NoCommand, None).request(),
        ];
        let operations: Vec<_> = requests.iter().map(Request::operation).collect();
        assert_eq!(operations, super::super::Operation::VARIANTS[..6], "one request per operation");
        for request in &requests {
            assert_eq!(request.needs(), 1, "{request:?}");
            assert!(may_send(request.needs(), &ServerVersion::Before020, "web-1").is_ok());
        }
        assert_eq!(ADDITIONS.last().map(|(protocol, _)| *protocol), Some(PROTOCOL_VERSION));
    }

    /// Tried: a restart (issue 25) against a protocol-1 server (refused
    /// `server_too_old`, nothing sent) and helper (`unknown_action`), and a
    /// protocol-2 server (sent).
    #[test]
    fn a_restart_needs_protocol_2() {
        use crate::vocab::Action;
        let parameters: serde_json::Map<String, serde_json::Value> =
            [("app".to_owned(), "web".into())].into_iter().collect();
        let restart = Request::plan(Action::Restart, parameters);
        assert_eq!(restart.needs(), 2);
        assert!(features(&restart).contains(&Feature::Parameter(Action::Restart, "app")));
        for old in [ServerVersion::Before020, ServerVersion::NoGate, known(1)] {
            let refusal = may_send(restart.needs(), &old, "web-1").unwrap_err();
            assert_eq!(refusal.code, Code::ServerTooOld, "{old:?}");
        }
        assert!(may_send(restart.needs(), &known(2), "web-1").is_ok());
        let old = Helper { protocol: 1, oldest_client: 1 };
        assert_eq!(old.knows(Feature::Action(Action::Restart)), Err(Code::UnknownAction));
        assert_eq!(Helper::THIS.knows(Feature::Action(Action::Restart)), Ok(()));
    }

    /// Tried: a rollback (issue 25), as a restart: refused `server_too_old`
    /// by the workstation for a protocol-1 server, `unknown_action` by a
    /// protocol-1 helper.
    #[test]
    fn a_rollback_needs_protocol_2() {
        use crate::vocab::Action;
        let parameters: serde_json::Map<String, serde_json::Value> =
            [("app".to_owned(), "web".into())].into_iter().collect();
        let rollback = Request::plan(Action::Rollback, parameters);
        assert_eq!(rollback.needs(), 2);
        for old in [ServerVersion::Before020, ServerVersion::NoGate, known(1)] {
            let refusal = may_send(rollback.needs(), &old, "web-1").unwrap_err();
            assert_eq!(refusal.code, Code::ServerTooOld, "{old:?}");
        }
        assert!(may_send(rollback.needs(), &known(2), "web-1").is_ok());
        let old = Helper { protocol: 1, oldest_client: 1 };
        assert_eq!(old.knows(Feature::Action(Action::Rollback)), Err(Code::UnknownAction));
        assert_eq!(Helper::THIS.knows(Feature::Action(Action::Rollback)), Ok(()));
    }

    /// Tried: a deploy that leaves `container_port` to the catalog entry
    /// (issue 25), against a protocol-1 server and helper, and the same
    /// deploy with the port.
    #[test]
    fn a_deploy_without_its_port_needs_protocol_2() {
        use crate::vocab::Action;
        let mut parameters: serde_json::Map<String, serde_json::Value> =
            ["app", "image", "host_port", "server_name"]
                .iter()
                .map(|k| (k.to_string(), "x".into()))
                .collect();
        let without = Request::plan(Action::Deploy, parameters.clone());
        assert_eq!(without.needs(), 2);
        assert!(features(&without).contains(&Feature::Omitted(Action::Deploy, "container_port")));
        let refusal = may_send(without.needs(), &ServerVersion::Before020, "web-1").unwrap_err();
        assert_eq!(refusal.code, Code::ServerTooOld);
        let old = Helper { protocol: 1, oldest_client: 1 };
        assert_eq!(
            old.knows(Feature::Omitted(Action::Deploy, "container_port")),
            Err(Code::InvalidParameters)
        );
        parameters.insert("container_port".into(), 8080.into());
        assert_eq!(Request::plan(Action::Deploy, parameters).needs(), 1);
    }
}
