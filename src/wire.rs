//! The host RPC contract, written once for both ends. The workstation
//! (`crate::mcp::rpc`, unprivileged) serializes a [`Request`] and parses the
//! [`Reply`]; the root helper (`crate::host::rpc`, `volce-lab-host rpc`)
//! parses the same [`Request`] type with [`parse_request`] and prints the
//! same [`Reply`] type. Pure: no I/O.
//!
//! The exchange: one compact JSON object of at most [`MAX_REQUEST_BYTES`] on
//! the helper's stdin; one JSON object and a newline on its stdout, exit 0
//! for `ok` and exit 1 for everything else. A long `execute` may print
//! progress lines before the reply ([`progress`]): the reply stays the last line.
//! The body of an `ok` reply is one type per operation ([`answers`]), built
//! by the helper and read by the workstation.
//!
//! ```text
//! {"operation":"gateway_status"} | {"operation":"inventory"}
//! {"action":"stop","operation":"plan","parameters":{"app":"web"}}
//! {"operation":"execute","plan_id":"<32 hex>"}
//! {"app":"web","container":"app","operation":"logs","since_minutes":30,"tail":50}
//! {"command_bytes":6,"command_sha256":"<64 hex>","operation":"gate_refusal","reason":"not_a_fixed_request"}
//! -> {"operation":"inventory","result":{...},"status":"ok"}
//! -> {"code":"plan_expired","message":"...","status":"rejected"}
//! -> {"code":"needs_inspection","message":"...","plan_id":"<32 hex>","status":"needs_inspection"}
//! ```
//!
//! Security invariants enforced here:
//! - the request is exactly the fields of one of eight operations
//!   (`deny_unknown_fields`, duplicates refused, nothing but one object);
//!   the only approval the agent can send is one it carries for the
//!   operator (`signed_approval`): a statement and an OpenSSH signature the
//!   host verifies against its own `allowed_signers` and its own rendering
//!   of the plan, so nothing the agent can make approves;
//! - both directions go through serde_json from typed values: nothing is
//!   spliced into text, and the request travels on stdin, never in argv;
//! - a reply that does not parse as [`Reply`] means nothing: the
//!   workstation treats it as `unknown` (see `crate::mcp::rpc::interpret`).

pub mod answers;
pub mod gate;
pub mod progress;
pub mod remote;
pub mod rollout;
pub mod signed;
pub mod versions;
pub mod witness;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::exit::Exit;
use crate::logs::AppLog;
use crate::vocab::Action;
use crate::vocab::{Code, PlanId, Refusal};

/// This build's protocol; what each version added and what a workstation
/// may send a server of another one is [`versions`].
pub use versions::PROTOCOL_VERSION;

/// The most request bytes the helper reads from stdin.
pub const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// Where the root helper is installed on every server: the workstation runs
/// `sudo -n <this> rpc` and the sudoers rule allows exactly that, so both
/// ends must agree on it. `HostPaths::HELPER` is this path.
pub const HELPER_PATH: &str = "/usr/local/bin/volce-lab-host";

/// The names of the eight operations: the request's tag and the `operation`
/// of an `ok` reply (`gate_refusal` is never answered `ok`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, strum::IntoStaticStr, strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Operation {
    GatewayStatus,
    Inventory,
    Plan,
    Execute,
    /// Read-only: safe lines of one managed container's log.
    Logs,
    /// Sent by the ssh gate (`crate::host::gate`), never by the
    /// workstation: record that the gate refused a remote command.
    GateRefusal,
    /// Read-only: the approval statement the host renders for one of the
    /// caller's pending plans, which the operator signs (issue 42).
    Statement,
    /// Carries an operator's signed statement ([`signed::SignedApproval`]);
    /// the host records the approval only if it verifies (`host::signed`).
    SignedApproval,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The closed set of requests. Empty struct variants (not unit variants)
/// so that `deny_unknown_fields` refuses extra fields on every one of them.
///
/// `action`, `parameters` and `plan_id` are deliberately loose here: the
/// helper checks them itself and answers with a precise code
/// (`unknown_action`, `invalid_parameters`, `invalid_plan_id`, ...), which a
/// stricter type would turn into a bare `invalid_request`. The workstation
/// builds them from validated values only ([`Request::plan`],
/// [`Request::execute`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "operation", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    GatewayStatus {},
    Inventory {},
    Plan {
        action: String,
        parameters: Value,
    },
    Execute {
        plan_id: String,
    },
    /// `tail` and `since_minutes` are loose for the same reason as `plan`'s
    /// fields: the helper refuses a bad value with a sentence naming it.
    Logs {
        app: String,
        container: String,
        tail: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since_minutes: Option<Value>,
    },
    /// The ssh gate's record of one refusal: why, and the remote command's
    /// length and sha256, never its text ([`gate::RefusalRecord`], which
    /// the helper checks before it records). Changes nothing but the
    /// audit trail, and is always answered `rejected` with `gate_refused`.
    GateRefusal {
        reason: gate::RefusalReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command_bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command_sha256: Option<String>,
    },
    Statement {
        plan_id: String,
    },
    /// `approval` is the text `volce-lab approve` printed: checked by the
    /// helper ([`signed::SignedApproval::parse`]), never trusted as given.
    SignedApproval {
        plan_id: String,
        approval: String,
    },
}

/// Which of a managed app's two containers: the app's own, or its gateway.
/// The one container `logs` reads; the role of each container an answer
/// lists ([`answers::app_state::ContainerView`]).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ContainerRole {
    App,
    Gateway,
}

impl ContainerRole {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
    pub fn parse(text: &str) -> Option<ContainerRole> {
        text.parse().ok()
    }
}

/// The one container `logs` reads: the app's own, its gateway, or one of
/// its accessories by name (issue 40; an accessory is never called `app`
/// or `gateway`, `crate::vocab::accessory_name_ok`). Its string form is
/// the word or the name, so an answer about the app or the gateway reads
/// as it did when this was [`ContainerRole`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum LogContainer {
    Role(ContainerRole),
    Accessory(crate::vocab::AccessoryName),
}

impl LogContainer {
    pub fn parse(text: &str) -> Option<LogContainer> {
        ContainerRole::parse(text)
            .map(LogContainer::Role)
            .or_else(|| crate::vocab::AccessoryName::parse(text).map(LogContainer::Accessory))
    }

    pub fn as_str(&self) -> &str {
        match self {
            LogContainer::Role(role) => role.as_str(),
            LogContainer::Accessory(name) => name.as_str(),
        }
    }
}

impl From<ContainerRole> for LogContainer {
    fn from(role: ContainerRole) -> LogContainer {
        LogContainer::Role(role)
    }
}

impl TryFrom<String> for LogContainer {
    type Error = &'static str;
    fn try_from(text: String) -> Result<LogContainer, &'static str> {
        LogContainer::parse(&text).ok_or("a log container is app, gateway or an accessory's name")
    }
}

impl From<LogContainer> for String {
    fn from(container: LogContainer) -> String {
        container.as_str().to_owned()
    }
}

/// The lines `logs` may ask for, and the minutes `since_minutes` may go back.
pub const LOG_TAIL: std::ops::RangeInclusive<u64> = 1..=200;
pub const LOG_SINCE_MINUTES: std::ops::RangeInclusive<u64> = 1..=1440;
/// `tail` when the agent gives none.
pub const LOG_TAIL_DEFAULT: u64 = 50;

impl Request {
    pub fn plan(action: Action, parameters: Map<String, Value>) -> Request {
        Request::Plan { action: action.as_str().to_owned(), parameters: Value::Object(parameters) }
    }

    pub fn execute(plan_id: &PlanId) -> Request {
        Request::Execute { plan_id: plan_id.as_str().to_owned() }
    }

    pub fn statement(plan_id: &PlanId) -> Request {
        Request::Statement { plan_id: plan_id.as_str().to_owned() }
    }

    pub fn signed_approval(plan_id: &PlanId, approval: &signed::SignedApproval) -> Request {
        Request::SignedApproval { plan_id: plan_id.as_str().to_owned(), approval: approval.to_text() }
    }

    /// Built from validated values only (`crate::mcp::tools::validate`).
    pub fn logs(
        app: &str,
        container: impl Into<LogContainer>,
        tail: u64,
        since_minutes: Option<u64>,
    ) -> Request {
        Request::Logs {
            app: app.to_owned(),
            container: container.into().as_str().to_owned(),
            tail: Value::from(tail),
            since_minutes: since_minutes.map(Value::from),
        }
    }

    pub fn operation(&self) -> Operation {
        match self {
            Request::GatewayStatus {} => Operation::GatewayStatus,
            Request::Inventory {} => Operation::Inventory,
            Request::Plan { .. } => Operation::Plan,
            Request::Execute { .. } => Operation::Execute,
            Request::Logs { .. } => Operation::Logs,
            Request::GateRefusal { .. } => Operation::GateRefusal,
            Request::Statement { .. } => Operation::Statement,
            Request::SignedApproval { .. } => Operation::SignedApproval,
        }
    }

    /// The request bytes: one compact JSON object on one line. It goes
    /// through `Value`, whose keys are sorted, so the bytes do not depend on
    /// the order of fields in this file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let value = serde_json::to_value(self).expect("a request serializes");
        serde_json::to_vec(&value).expect("a JSON value serializes")
    }
}

/// The id the workstation gives one request: also in its `audit.jsonl` line
/// and in every host audit row the request writes, so the two can be
/// joined. 1 to 64 characters of `[A-Za-z0-9-]` (a UUID is 36).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct RequestId(String);

impl RequestId {
    pub fn parse(text: &str) -> Option<RequestId> {
        let shaped =
            (1..=64).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        shaped.then(|| RequestId(text.to_owned()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The request as it travels: the operation's fields, plus an optional
/// `request_id` beside them. Without one, the bytes are exactly version 1's,
/// so an older workstation's request still parses; an older helper refuses a
/// request that carries one (`invalid_request`), which the workstation
/// reports like any refusal.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    request_id: Option<String>,
    /// The workstation's protocol (`versions`); absent means 1.
    #[serde(default)]
    protocol: Option<u32>,
    /// The audit head the workstation witnessed (protocol 2, `witness`).
    #[serde(default)]
    witness: Option<witness::Witnessed>,
    #[serde(flatten)]
    request: Request,
}

/// A request as the helper received it: the operation, and what travels
/// beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    pub request: Request,
    pub id: Option<RequestId>,
    /// The workstation's protocol, as admitted ([`versions::admit`]).
    pub protocol: u32,
    /// The audit head the workstation witnessed ([`witness`]).
    pub witness: Option<witness::Witnessed>,
}

impl Request {
    /// [`Request::to_bytes`] with the request id beside the fields.
    pub fn to_bytes_with_id(&self, id: &RequestId) -> Vec<u8> {
        let mut value = serde_json::to_value(self).expect("a request serializes");
        if let Value::Object(map) = &mut value {
            map.insert("request_id".into(), Value::String(id.0.clone()));
        }
        serde_json::to_vec(&value).expect("a JSON value serializes")
    }
}

/// Parses exactly one request and its optional request id, as the helper
/// does. A request id of the wrong shape refuses the whole request, and so
/// does a `protocol` this helper does not answer ([`versions::admit`]).
pub fn parse_envelope(bytes: &[u8]) -> Result<(Request, Option<RequestId>), Refusal> {
    parse_envelope_as(bytes, versions::Helper::THIS)
}

/// [`parse_envelope`] with everything beside the operation: what the
/// shipped helper reads.
pub fn receive(bytes: &[u8]) -> Result<Received, Refusal> {
    receive_as(bytes, versions::Helper::THIS)
}

/// [`parse_envelope`] as a helper of `helper`'s protocol reads it: what that
/// protocol did not have yet is refused as that helper refused it
/// (`versions::Helper::knows`). The shipped helper is
/// [`versions::Helper::THIS`]; tests build the others.
pub fn parse_envelope_as(
    bytes: &[u8],
    helper: versions::Helper,
) -> Result<(Request, Option<RequestId>), Refusal> {
    receive_as(bytes, helper).map(|received| (received.request, received.id))
}

/// [`receive`] as a helper of `helper`'s protocol reads it.
pub fn receive_as(bytes: &[u8], helper: versions::Helper) -> Result<Received, Refusal> {
    let (request, id, protocol, witness) = parse_envelope_fields(bytes)?;
    let refused = |code: Code| match code {
        Code::UnknownAction => Action::parse("").unwrap_err(),
        Code::InvalidParameters => Refusal::new(
            Code::InvalidParameters,
            "The plan's parameters name one this helper does not know; nothing was done.",
        ),
        _ => shape_refusal(),
    };
    let beside = [
        (id.is_some(), versions::Feature::RequestId),
        (protocol.is_some(), versions::Feature::ProtocolField),
        (witness.is_some(), versions::Feature::WitnessField),
    ];
    for (_, feature) in beside.iter().filter(|(present, _)| *present) {
        helper.knows(*feature).map_err(refused)?;
    }
    for feature in versions::features(&request) {
        helper.knows(feature).map_err(refused)?;
    }
    let protocol = versions::admit(protocol, helper)?;
    Ok(Received { request, id, protocol, witness })
}

/// The envelope's parts: the request, its id, the protocol it names and
/// the witnessed audit head.
type Fields = (Request, Option<RequestId>, Option<u32>, Option<witness::Witnessed>);

fn parse_envelope_fields(bytes: &[u8]) -> Result<Fields, Refusal> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(Refusal::new(Code::InvalidRequest, "The request must be one JSON object."));
    }
    // The operation's fields are flattened beside the id: unknown and
    // repeated fields are still refused by `Request`'s own derive (tests).
    let envelope = serde_json::from_slice::<Envelope>(bytes).map_err(|_| shape_refusal())?;
    let id = match envelope.request_id {
        None => None,
        Some(text) => Some(RequestId::parse(&text).ok_or_else(|| {
            Refusal::new(
                Code::InvalidRequest,
                "The request_id must be 1 to 64 letters, digits or hyphens; nothing was done.",
            )
        })?),
    };
    if envelope.witness.as_ref().is_some_and(|w| !w.is_shaped()) {
        return Err(Refusal::new(
            Code::InvalidRequest,
            "The witness must be a seq of 1 or more and its 64 lowercase hex hash; nothing was done.",
        ));
    }
    // Without an id, a protocol and a witness, exactly version 1's parser decides.
    let request = match (&id, envelope.protocol, &envelope.witness) {
        (None, None, None) => parse_request(bytes)?,
        _ => envelope.request,
    };
    Ok((request, id, envelope.protocol, envelope.witness))
}

fn shape_refusal() -> Refusal {
    Refusal::new(
        Code::InvalidRequest,
        "The request's \"operation\" key must be gateway_status, inventory, plan (with action and \
         parameters), execute (with plan_id), logs (with app, container, tail and optionally \
         since_minutes), gate_refusal (the ssh gate's, with reason and optionally command_bytes and \
         command_sha256), statement (with plan_id) or signed_approval (with plan_id and approval), and no \
         other field may be present.",
    )
}

/// Parses exactly one request, as the helper does.
pub fn parse_request(bytes: &[u8]) -> Result<Request, Refusal> {
    // Refuse anything that is not an object before serde sees it, so the
    // message does not depend on serde's wording for odd inputs.
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(Refusal::new(Code::InvalidRequest, "The request must be one JSON object."));
    }
    serde_json::from_slice::<Request>(bytes).map_err(|_| shape_refusal())
}

/// The one reply the helper prints, and what the workstation parses.
///
/// A `rejected` reply parses only with a code of this build's [`Code`]
/// table. The workstation and the server are installed separately, so a
/// newer helper may name a code this build lacks: the workstation then
/// still reads the reply as a refusal (`crate::mcp::rpc` keeps any
/// well-formed code), never as `unknown`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Reply {
    /// `result` is always an object; the workstation checks that it is.
    Ok { operation: Operation, result: Value },
    /// A refusal; for an execute whose plan ran, failed and was rolled
    /// back, with the failed app container's last lines beside it
    /// (`app_log`, protocol 2: absent from older helpers, ignored by older
    /// workstations, and read as absent when it is not an [`AppLog`], so
    /// it can never make a refusal `unknown`).
    Rejected {
        #[serde(flatten)]
        refusal: Refusal,
        #[serde(default, deserialize_with = "app_log_if_valid", skip_serializing_if = "Option::is_none")]
        app_log: Option<AppLog>,
    },
    /// An execute reached Docker and failed or is uncertain.
    NeedsInspection {
        code: NeedsInspectionCode,
        /// Always present from the helper. A reader that finds it missing or
        /// malformed keeps the rest of the reply and drops only the id.
        #[serde(default, deserialize_with = "plan_id_if_valid", skip_serializing_if = "Option::is_none")]
        plan_id: Option<PlanId>,
        message: String,
    },
}

/// The fixed `code` of a `needs_inspection` reply; any other is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NeedsInspectionCode {
    NeedsInspection,
}

fn app_log_if_valid<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<AppLog>, D::Error> {
    let value = Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).ok())
}

fn plan_id_if_valid<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<PlanId>, D::Error> {
    let value = Value::deserialize(deserializer)?;
    Ok(value.as_str().and_then(|text| PlanId::parse(text).ok()))
}

impl Reply {
    pub fn needs_inspection(plan_id: PlanId, message: String) -> Reply {
        Reply::NeedsInspection { code: NeedsInspectionCode::NeedsInspection, plan_id: Some(plan_id), message }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a reply serializes")
    }

    /// One line, no trailing data but the newline.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(&self.to_json()).expect("a JSON value serializes");
        line.push('\n');
        line
    }

    /// What the helper's stdout means. One object on one line: trailing
    /// whitespace is the only slack. Parsed as a `Value` first, so a
    /// repeated key counts once (the last), as it always has.
    pub fn parse(stdout: &[u8]) -> Result<Reply, NotAReply> {
        match serde_json::from_slice::<Value>(stdout.trim_ascii_end()) {
            Ok(value @ Value::Object(_)) => {
                Reply::deserialize(value).map_err(|_| NotAReply::OutsideTheContract)
            }
            _ => Err(NotAReply::NotOneObject),
        }
    }

    pub fn exit(&self) -> Exit {
        match self {
            Reply::Ok { .. } => Exit::Ok,
            _ => Exit::Failure,
        }
    }
}

/// A reply with the host's audit proof beside it (`audit`, protocol 2:
/// [`witness::AuditProof`]), as the helper prints it to a request of
/// protocol 2 or later. A reply printed without a proof is exactly the
/// [`Reply`]'s line.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub reply: Reply,
    pub audit: Option<witness::AuditProof>,
}

impl Answered {
    /// One line: the reply's object with `audit` beside `status`.
    pub fn to_line(&self) -> String {
        let mut value = self.reply.to_json();
        if let (Value::Object(map), Some(audit)) = (&mut value, &self.audit) {
            map.insert("audit".into(), serde_json::to_value(audit).expect("a proof serializes"));
        }
        let mut line = serde_json::to_string(&value).expect("a JSON value serializes");
        line.push('\n');
        line
    }

    pub fn exit(&self) -> Exit {
        self.reply.exit()
    }
}

impl From<Reply> for Answered {
    fn from(reply: Reply) -> Answered {
        Answered { reply, audit: None }
    }
}

/// Why stdout is not a [`Reply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAReply {
    /// Empty, not JSON, not an object, or followed by more than whitespace.
    NotOneObject,
    /// An object, but not one of the three replies (an unknown status or
    /// operation, a code this build does not know, a missing field, ...).
    OutsideTheContract,
}

impl From<Refusal> for Reply {
    fn from(refusal: Refusal) -> Reply {
        Reply::Rejected { refusal, app_log: None }
    }
}

#[cfg(test)]
mod tests;
