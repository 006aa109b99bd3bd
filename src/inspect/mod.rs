//! Read-only checks of one configured server, behind an identity gate.
//! Runs unprivileged on the workstation (or on the server, in local mode).
//!
//! Invariants enforced here:
//! - no check but `identity` runs before the identity was verified, and every
//!   later check verifies it again first, in the same critical section;
//! - a mismatch clears the verified state, resets the transport, and hides
//!   whatever the unexpected target returned; it sticks: every later call
//!   answers `identity_mismatch` without running anything, until an
//!   `identity` call matches again;
//! - checks on one target are serialized by one async mutex: none is dropped
//!   or interleaved;
//! - through the server's ssh gate (`gated`, learned from each identity
//!   answer) a check's one session carries its identity proof: the gate
//!   runs the check only on the expected host and account, and its reply's
//!   header is compared here again before any output is used; a reply that
//!   does not prove it is a mismatch as above. Without a gate, every check
//!   is preceded by its own identity session;
//! - the identity state lives in this process only; it is not a token;
//! - what a person running `inspect` is told beyond the result (which part
//!   of the identity differed, why ssh gave up) is a [`Diagnosis`]: a closed
//!   set, never the target's words or ssh's stderr, not `Serialize`, and
//!   never part of a [`CheckResult`], so no MCP result or audit line can
//!   carry it.
//!
//! Over 450 lines on purpose: the identity gate and the checks it guards share
//! one lock and stay together, so the gate is read in one place.

pub mod gated;
pub mod report;
pub mod ssh_mux;
pub mod transport;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::config::{Config, Mode};
use crate::exec::{self, CHECK_OUTPUT_LIMIT, Execution, ExecutionStatus, Outcome};
use crate::wire::answers::Open;
use crate::wire::answers::app_state::EngineState;
use crate::wire::answers::gateways::{Gateway, GatewayStatus};
use gated::{Link, Sessions};
use ssh_mux::MultiplexedSsh;
use transport::{CommandCarrier, LocalTransport, RemoteCommand, RunLimits, SshFailure, SshTransport};

/// The closed set of read-only checks. One name table (strum) for
/// `as_str`; serde's names are tested to be the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Check {
    Identity,
    Disk,
    WebStatus,
}

impl Check {
    /// Every check, in the order they are run and listed (tested to be
    /// the declaration order, `VariantArray::VARIANTS`).
    pub const ALL: [Check; 3] = [Check::Identity, Check::Disk, Check::WebStatus];
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Every status a result can carry. One set for all tools, so an agent
/// learns each word once. One name table (strum) for `as_str` and the
/// published list; serde's names are tested to be the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Status {
    /// The check ran and the target is healthy.
    Ok,
    /// Call `identity` first; nothing was run.
    IdentityRequired,
    /// The target is not the expected host/user; its answer is withheld.
    IdentityMismatch,
    /// ssh could not reach the target (or the remote command exited 255).
    ConnectionFailed,
    /// The query worked and the answer is unhealthy (a diagnosis, not an error).
    CheckFailed,
    /// The host helper could not be asked: not installed, sudo refused, or no valid answer.
    HelperUnavailable,
    Timeout,
    OutputLimit,
    /// The ssh client could not be started.
    SshUnavailable,
    /// A local program could not be started or ended abnormally.
    ExecutionFailed,
    /// Demo mode: management tools run nothing.
    DemoOnly,
    /// Management tools are off (`VOLCE_LAB_MANAGEMENT` is not `enabled`).
    ManagementDisabled,
    /// The host helper refused the request with a stable code.
    Rejected,
    /// We cannot know what happened on the server: inspect before any retry.
    Unknown,
    /// The host helper says an execute reached the engine and failed or is
    /// uncertain: the operator must inspect the plan before anything else.
    NeedsInspection,
    /// The tool arguments were refused; nothing ran.
    InvalidArguments,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The result of one check, as the agent and the report see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckResult {
    pub request_id: String,
    /// UTC, RFC 3339.
    pub timestamp: String,
    pub is_demo: bool,
    pub mode: String,
    pub target: String,
    pub check: Check,
    pub status: Status,
    pub exit_code: Option<i32>,
    /// What the target printed, at most 8 KiB; empty when withheld.
    pub output: String,
    /// Facts of the process that ran; null when nothing ran.
    pub execution: Option<Execution>,
}

/// A fresh request id.
pub fn request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Now, UTC, RFC 3339 with milliseconds.
pub fn timestamp() -> String {
    crate::text::rfc3339_millis_now()
}

/// Where the checks go.
enum Backend {
    Demo,
    Real(Arc<dyn CommandCarrier>),
}

/// The identity state of one inspector. It lives in this process only and
/// is not a token: restarting the server starts again at `Unverified`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    /// No identity check matched yet: other calls answer `identity_required`.
    Unverified,
    /// The last identity check matched.
    Verified,
    /// An identity check saw another host or user: other calls answer
    /// `identity_mismatch` until an identity check matches again.
    Mismatched,
}

/// Which part of the identity answer differed. Only which part: what the
/// target said stays withheld, from the person too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mismatch {
    Host,
    User,
    Both,
    /// Not the two lines `hostname` and `id -un` print (a login script that
    /// prints, or another program answering).
    NotTwoLines,
}

/// What `volce-lab inspect` tells the person who runs it beyond the result.
/// Deliberately not `Serialize` and not in [`CheckResult`]: the MCP server
/// drops it (see [`Inspector::check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Diagnosis {
    IdentityMismatch(Mismatch),
    Ssh(SshFailure),
}

/// Why a gated call did not get to run.
#[derive(Debug, Clone, PartialEq)]
pub struct GateRefusal {
    pub status: Status,
    pub execution: Option<Execution>,
}

/// Runs checks against one target, holding the identity state.
pub struct Inspector {
    config: Config,
    backend: Backend,
    /// The three-state identity gate, held for the whole of each gated call:
    /// calls are serialized, and none runs on a verdict another call is
    /// changing.
    gate: Mutex<Gate>,
    /// How checks reach the target (learned from each identity answer), and
    /// the mismatch a gated check's reply showed. Only touched while `gate`
    /// is held.
    link: std::sync::Mutex<Link>,
}

impl Inspector {
    /// The inspector the configuration asks for.
    pub fn new(config: Config) -> Inspector {
        let backend = match config.mode {
            Mode::Demo => Backend::Demo,
            Mode::Local => Backend::Real(Arc::new(LocalTransport)),
            // One ssh master per target; fresh connections when no private
            // directory for its socket can be had (see ssh_mux).
            Mode::Ssh => Backend::Real(Arc::new(MultiplexedSsh::new(SshTransport {
                alias: config.ssh_alias.clone(),
                config_file: config.ssh_config.clone(),
                connect_timeout: config.timeout.min(Duration::from_secs(8)),
                auth_sock: config.ssh_auth_sock.clone(),
            }))),
        };
        Inspector {
            config,
            backend,
            gate: Mutex::new(Gate::Unverified),
            link: std::sync::Mutex::new(Link::NEW),
        }
    }

    /// An inspector that reaches its target through `transport`. The binary
    /// never calls this; tests and benchmarks use it to put real stand-in
    /// processes behind the same gate.
    #[doc(hidden)]
    pub fn with_transport_for_tests(config: Config, transport: Arc<dyn CommandCarrier>) -> Inspector {
        Inspector {
            config,
            backend: Backend::Real(transport),
            gate: Mutex::new(Gate::Unverified),
            link: std::sync::Mutex::new(Link::NEW),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn is_demo(&self) -> bool {
        matches!(self.backend, Backend::Demo)
    }

    fn limits(&self) -> RunLimits {
        RunLimits { output: CHECK_OUTPUT_LIMIT, timeout: self.config.timeout }
    }

    fn result(
        &self,
        check: Check,
        status: Status,
        output: String,
        execution: Option<Execution>,
    ) -> CheckResult {
        CheckResult {
            request_id: request_id(),
            timestamp: timestamp(),
            is_demo: self.is_demo(),
            mode: self.config.mode.as_str().to_owned(),
            target: self.config.target().to_owned(),
            check,
            status,
            exit_code: execution.as_ref().and_then(|e| e.exit_code),
            output,
            execution,
        }
    }

    /// Runs one check behind the identity gate: the result the agent gets.
    pub async fn check(&self, check: Check) -> CheckResult {
        self.check_diagnosed(check).await.0
    }

    /// [`Inspector::check`] plus, for the person at the terminal, what the
    /// result withholds in a form safe to show.
    pub async fn check_diagnosed(&self, check: Check) -> (CheckResult, Option<Diagnosis>) {
        let mut gate = self.gate.lock().await;
        if check == Check::Identity {
            return match self.verify(&mut gate).await {
                Ok((output, execution)) => (self.result(check, Status::Ok, output, Some(execution)), None),
                Err((refusal, diagnosis)) => {
                    (self.result(check, refusal.status, String::new(), refusal.execution), diagnosis)
                }
            };
        }
        if let Err((refusal, diagnosis)) = self.reverify(&mut gate).await {
            return (self.result(check, refusal.status, String::new(), refusal.execution), diagnosis);
        }
        let (status, output, execution, ssh) = match check {
            Check::Identity => unreachable!("handled above"),
            Check::Disk => self.disk().await,
            Check::WebStatus => self.web_status().await,
        };
        // Through the gate the check's own session carried the identity
        // proof: a reply that did not prove it stops this and every later
        // call, as a failed identity check does, and shows nothing.
        if let Some(mismatch) = self.take_trip() {
            *gate = Gate::Mismatched;
            self.reset();
            let result = self.result(check, Status::IdentityMismatch, String::new(), Some(execution));
            return (result, Some(Diagnosis::IdentityMismatch(mismatch)));
        }
        let diagnosis = ssh.filter(|_| status == Status::ConnectionFailed).map(Diagnosis::Ssh);
        (self.result(check, status, output, Some(execution)), diagnosis)
    }

    /// Verifies identity, then runs the host helper with `request` on stdin,
    /// all under the same lock as the checks. For the management tools.
    pub async fn host_rpc(&self, request: &[u8], limits: RunLimits) -> Result<Outcome, GateRefusal> {
        self.host_rpc_watched(request, limits, None).await
    }

    /// [`Inspector::host_rpc`], with `tap` seeing the helper's stdout as it
    /// arrives (the progress lines of a long execute).
    pub async fn host_rpc_watched(
        &self,
        request: &[u8],
        limits: RunLimits,
        tap: Option<exec::StdoutTap>,
    ) -> Result<Outcome, GateRefusal> {
        let mut gate = self.gate.lock().await;
        self.reverify(&mut gate).await.map_err(|(refusal, _)| refusal)?;
        let (outcome, _) = self.run_watched(RemoteCommand::HostRpc, Some(request), limits, tap).await;
        // Through the gate: a mismatch means the gate ran nothing.
        if self.take_trip().is_some() {
            *gate = Gate::Mismatched;
            self.reset();
            return Err(GateRefusal { status: Status::IdentityMismatch, execution: Some(outcome.execution) });
        }
        if outcome.execution.completion == exec::Completion::Unconfirmed {
            self.reset();
        }
        Ok(outcome)
    }

    /// Why a gated call would be refused right now without running anything
    /// (`identity_required` or `identity_mismatch`), or `None` when the gate
    /// is open (identity is still verified again before the call runs).
    pub async fn gate_refusal(&self) -> Option<Status> {
        match *self.gate.lock().await {
            Gate::Unverified => Some(Status::IdentityRequired),
            Gate::Mismatched => Some(Status::IdentityMismatch),
            Gate::Verified => None,
        }
    }

    /// The gate in front of every call but `identity`: refuses without
    /// running anything unless identity was verified, then verifies again,
    /// because an earlier match is not a lease (the alias may point
    /// elsewhere now). Through the ssh gate that second check is the gate's
    /// own, in the check's session, checked again by [`Inspector::run`].
    async fn reverify(&self, gate: &mut Gate) -> Result<(), DiagnosedRefusal> {
        if *gate == Gate::Verified && self.sessions() == Sessions::Gated {
            return Ok(());
        }
        match *gate {
            Gate::Unverified => {
                Err((GateRefusal { status: Status::IdentityRequired, execution: None }, None))
            }
            Gate::Mismatched => {
                Err((GateRefusal { status: Status::IdentityMismatch, execution: None }, None))
            }
            Gate::Verified => self.verify(gate).await.map(|_| ()),
        }
    }

    fn reset(&self) {
        // The next identity answer says again whether a gate is there.
        self.link().sessions = Sessions::Unknown;
        if let Backend::Real(transport) = &self.backend {
            transport.reset();
        }
    }

    /// Runs the identity command and moves the gate: only a match opens it,
    /// and only a match clears an earlier mismatch.
    async fn verify(&self, gate: &mut Gate) -> Result<(String, Execution), DiagnosedRefusal> {
        if *gate == Gate::Verified {
            *gate = Gate::Unverified;
        }
        let (outcome, ssh) = self.run(RemoteCommand::Identity, None, self.limits()).await;
        // A gate's frame names what it observed (and checked) itself; a shell
        // prints the two lines. Either way the names are compared here. A
        // gate that saw another identity says so and exits 1.
        let framed = match gated::identity_answer(&outcome.stdout) {
            gated::IdentityAnswer::Framed(header) => Some(header),
            gated::IdentityAnswer::Plain => None,
        };
        let gate_said_mismatch = framed.as_ref().is_some_and(|header| !header.matched)
            && outcome.execution.execution_status == ExecutionStatus::NonzeroExit;
        if outcome.execution.execution_status != ExecutionStatus::Ok && !gate_said_mismatch {
            self.reset();
            let status = match outcome.execution.execution_status {
                ExecutionStatus::Timeout => Status::Timeout,
                ExecutionStatus::OutputLimit => Status::OutputLimit,
                ExecutionStatus::LaunchFailed if self.config.mode == Mode::Ssh => Status::SshUnavailable,
                ExecutionStatus::LaunchFailed | ExecutionStatus::Signaled
                    if self.config.mode != Mode::Ssh =>
                {
                    Status::ExecutionFailed
                }
                _ => Status::ConnectionFailed,
            };
            let diagnosis = ssh.filter(|_| status == Status::ConnectionFailed).map(Diagnosis::Ssh);
            return Err((GateRefusal { status, execution: Some(outcome.execution) }, diagnosis));
        }
        self.link().sessions = if framed.is_some() { Sessions::Gated } else { Sessions::TwoPerCheck };
        let text = match &framed {
            Some(header) if header.matched => format!("{}\n{}\n", header.host, header.user),
            Some(_) => String::new(),
            None => String::from_utf8_lossy(&outcome.stdout).into_owned(),
        };
        let lines: Vec<&str> = text.lines().collect();
        if lines != [self.config.expected_host.as_str(), self.config.expected_user.as_str()] {
            // Do not pass on what an unexpected target said about itself:
            // the diagnosis says only which part differed.
            let mismatch = match (&framed, &lines[..]) {
                (Some(header), _) => {
                    gated::mismatch_of(header, &self.config.expected_host, &self.config.expected_user)
                        .unwrap_or(Mismatch::NotTwoLines)
                }
                (None, [host, user]) => {
                    match (*host != self.config.expected_host, *user != self.config.expected_user) {
                        (true, true) => Mismatch::Both,
                        (true, false) => Mismatch::Host,
                        _ => Mismatch::User,
                    }
                }
                (None, _) => Mismatch::NotTwoLines,
            };
            self.reset();
            *gate = Gate::Mismatched;
            let refusal =
                GateRefusal { status: Status::IdentityMismatch, execution: Some(outcome.execution) };
            return Err((refusal, Some(Diagnosis::IdentityMismatch(mismatch))));
        }
        *gate = Gate::Verified;
        Ok((text, outcome.execution))
    }

    async fn disk(&self) -> (Status, String, Execution, Option<SshFailure>) {
        let (outcome, ssh) = self.run(RemoteCommand::Disk, None, self.limits()).await;
        let status = match outcome.execution.execution_status {
            ExecutionStatus::Ok => Status::Ok,
            ExecutionStatus::NonzeroExit => Status::CheckFailed,
            other => self.failure_status(other),
        };
        (status, output_text(&outcome, status), outcome.execution, ssh)
    }

    async fn web_status(&self) -> (Status, String, Execution, Option<SshFailure>) {
        let request = crate::wire::Request::GatewayStatus {}.to_bytes();
        let (outcome, ssh) = self.run(RemoteCommand::HostRpc, Some(&request), self.limits()).await;
        let status = match outcome.execution.execution_status {
            ExecutionStatus::Ok => match gateways_healthy(&outcome.stdout) {
                Some(true) => Status::Ok,
                Some(false) => Status::CheckFailed,
                None => Status::HelperUnavailable,
            },
            // sudo refused, helper missing, or the helper rejected the request.
            ExecutionStatus::NonzeroExit => Status::HelperUnavailable,
            // Locally, a missing sudo means there is no way to the helper.
            ExecutionStatus::LaunchFailed if self.config.mode != Mode::Ssh => Status::HelperUnavailable,
            other => self.failure_status(other),
        };
        (status, output_text(&outcome, status), outcome.execution, ssh)
    }

    fn failure_status(&self, status: ExecutionStatus) -> Status {
        match status {
            ExecutionStatus::Timeout => Status::Timeout,
            ExecutionStatus::OutputLimit => Status::OutputLimit,
            ExecutionStatus::SshOrRemote255 => Status::ConnectionFailed,
            ExecutionStatus::LaunchFailed if self.config.mode == Mode::Ssh => Status::SshUnavailable,
            ExecutionStatus::Signaled if self.config.mode == Mode::Ssh => Status::ConnectionFailed,
            _ => Status::ExecutionFailed,
        }
    }

    /// Runs a command's processes in order; outputs are concatenated and the
    /// first run that is not ok ends the sequence. When that is an ssh client
    /// that exited 255, also why ssh gave up, classified from its stderr here
    /// and now (the stderr itself goes no further).
    async fn run(
        &self,
        command: RemoteCommand,
        stdin: Option<&[u8]>,
        limits: RunLimits,
    ) -> (Outcome, Option<SshFailure>) {
        self.run_watched(command, stdin, limits, None).await
    }

    async fn run_watched(
        &self,
        command: RemoteCommand,
        stdin: Option<&[u8]>,
        limits: RunLimits,
        tap: Option<exec::StdoutTap>,
    ) -> (Outcome, Option<SshFailure>) {
        let transport = match &self.backend {
            Backend::Demo => return (demo_outcome(&self.config, command), None),
            Backend::Real(transport) => transport,
        };
        let (specs, framed) = self.specs_for(transport.as_ref(), command, stdin, limits);
        let mut combined: Option<Outcome> = None;
        let mut ssh = None;
        for mut spec in specs {
            spec.stdout_tap = tap.clone();
            let (outcome, tail) = exec::run_with_stderr_tail(&spec).await;
            if outcome.execution.execution_status == ExecutionStatus::SshOrRemote255 {
                ssh = Some(SshFailure::classify(tail.bytes()));
            }
            let ok = outcome.execution.execution_status == ExecutionStatus::Ok;
            combined = Some(match combined {
                None => outcome,
                Some(mut previous) => {
                    previous.stdout.extend_from_slice(&outcome.stdout);
                    let duration = previous.execution.duration_ms + outcome.execution.duration_ms;
                    previous.execution = Execution { duration_ms: duration, ..outcome.execution };
                    previous.stderr_len += outcome.stderr_len;
                    previous
                }
            });
            if !ok {
                break;
            }
        }
        // A run we killed or cannot account for (timeout, overflow, ssh 255)
        // may have left the connection in any state: drop it, so the next
        // call starts afresh (with ssh multiplexing: a new master).
        if combined.as_ref().is_some_and(|o| o.execution.completion == exec::Completion::Unconfirmed) {
            self.reset();
        }
        let mut outcome = combined.unwrap_or_else(|| Outcome {
            execution: Execution::not_started(ExecutionStatus::LaunchFailed),
            stdout: Vec::new(),
            stderr_len: 0,
        });
        if framed {
            self.unframe(&mut outcome);
        }
        (outcome, ssh)
    }
}

/// A gate refusal, and what the person at the terminal may be told about it.
type DiagnosedRefusal = (GateRefusal, Option<Diagnosis>);

/// The output a result may show: what the target printed, unless the run
/// failed in a way that makes it meaningless.
fn output_text(outcome: &Outcome, status: Status) -> String {
    match status {
        Status::Ok | Status::CheckFailed => String::from_utf8_lossy(&outcome.stdout).into_owned(),
        _ => String::new(),
    }
}

/// The helper's `gateway_status` reply (`{"status":"ok","result":{"gateways":
/// [...]}}`): healthy only when the list is non-empty and every gateway is
/// healthy ([`healthy`]). `None` when the answer is not such a reply.
pub fn gateways_healthy(stdout: &[u8]) -> Option<bool> {
    let gateways = gateway_states(stdout)?;
    Some(!gateways.is_empty() && gateways.iter().all(healthy))
}

/// An app that should run runs and its gateway answers; an app stopped on
/// purpose is fine as it is. Drift is never healthy, and neither is a state
/// this build does not know (an older helper's docker word, say `exited`).
/// A gateway from a helper older than drift carries `state` alone, and is
/// judged by it, as it always was.
pub fn healthy(gateway: &Gateway) -> bool {
    match gateway.state {
        Open::Known(EngineState::Running) => gateway.answers != Some(false),
        Open::Known(EngineState::Stopped) => gateway.stopped_on_purpose,
        Open::Known(EngineState::Drifted) | Open::Other(_) => false,
    }
}

/// Every gateway in a `gateway_status` reply.
/// The reply is read by the one contract (`crate::wire`): an `ok` that names
/// another operation is not an answer to this request.
pub fn gateway_states(stdout: &[u8]) -> Option<Vec<Gateway>> {
    match crate::wire::Reply::parse(stdout).ok()? {
        crate::wire::Reply::Ok { operation: crate::wire::Operation::GatewayStatus, result } => {
            let status: GatewayStatus = serde_json::from_value(result).ok()?;
            Some(status.gateways)
        }
        _ => None,
    }
}

/// Simulated answers: the same shapes a real server gives.
fn demo_outcome(config: &Config, command: RemoteCommand) -> Outcome {
    let stdout = match command {
        RemoteCommand::Identity => format!("{}\n{}\n", config.expected_host, config.expected_user),
        RemoteCommand::Disk => "Filesystem      Size  Used Avail Use% Mounted on\n\
                                /dev/demo        20G  2.0G   18G  10% /\n"
            .to_owned(),
        RemoteCommand::HostRpc => {
            let reply = r#"{"status":"ok","operation":"gateway_status","result":{"gateways":[{"answers":true,"app":"demo","container_state":"running","drift":null,"name":"vl-demo-gateway","state":"running","stopped_on_purpose":false}]}}"#;
            format!("{reply}\n")
        }
    };
    let mut execution = Execution::not_started(ExecutionStatus::Ok);
    execution.exit_code = Some(0);
    Outcome { execution, stdout: stdout.into_bytes(), stderr_len: 0 }
}

#[cfg(test)]
mod tests;
