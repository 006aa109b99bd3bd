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
//! The identity gate and the checks it guards share one lock and stay
//! together here, so the gate is read in one place. What a check answers is
//! results.rs; web_status's judgement of the helper's answer, web_status.rs;
//! demo mode's answers, demo.rs.

mod demo;
pub mod gated;
pub mod mux_client;
pub mod report;
mod results;
pub mod ssh_mux;
pub mod transport;
mod web_status;

use std::sync::Arc;

use tokio::sync::Mutex;

use crate::config::{Config, Mode};
use crate::exec::{self, CHECK_OUTPUT_LIMIT, Execution, ExecutionStatus, ProcessOutput};
use crate::wire::remote::RemoteCommand;
use crate::wire::witness::Witnessed;
use gated::{Link, Sessions};
use ssh_mux::MultiplexedSsh;
use transport::{CommandCarrier, LocalTransport, RunLimits, SshFailure, SshTransport};

pub use results::{Check, CheckResult, Diagnosis, GateRefusal, Mismatch, Status, request_id, timestamp};
pub use web_status::{
    Carried, WebReply, all_healthy, gateway_states, gateways_healthy, healthy, https_sentence_of,
    stopped_sentence, stopped_sentence_of, without_proof,
};

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

/// Runs checks against one target, holding the identity state.
pub struct Inspector {
    config: Config,
    /// The target's name in every result: its fleet name (the ssh alias,
    /// `localhost` or `demo` when no targets file names it).
    name: String,
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
            Mode::Ssh => Backend::Real(Arc::new(MultiplexedSsh::new(SshTransport::of(&config)))),
        };
        Inspector {
            name: config.target().to_owned(),
            config,
            backend,
            gate: Mutex::new(Gate::Unverified),
            link: std::sync::Mutex::new(Link::NEW),
        }
    }

    /// The same inspector, whose results name its target `name` (a
    /// targets file's name for it, which may differ from its ssh alias).
    pub fn named(mut self, name: &str) -> Inspector {
        name.clone_into(&mut self.name);
        self
    }

    /// An inspector that reaches its target through `transport`. The binary
    /// never calls this; tests and benchmarks use it to put real stand-in
    /// processes behind the same gate.
    #[doc(hidden)]
    #[cfg(any(test, feature = "test-hatches"))]
    pub fn with_transport_for_tests(config: Config, transport: Arc<dyn CommandCarrier>) -> Inspector {
        Inspector {
            name: config.target().to_owned(),
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
            target: self.name.clone(),
            check,
            status,
            exit_code: execution.as_ref().and_then(|e| e.exit_code),
            output,
            execution,
            reply: None,
            carried: None,
        }
    }

    /// Runs one check behind the identity gate: the result the agent gets.
    pub async fn check(&self, check: Check) -> CheckResult {
        self.check_diagnosed(check).await.0
    }

    /// [`Inspector::check`] whose helper request (web_status's) carries
    /// the audit head the workstation witnessed, as every rpc does; the
    /// proof the answer carried comes back in `carried`, for the MCP
    /// server's witness to check (`crate::mcp::witness`).
    pub async fn check_witnessed(&self, check: Check, witnessed: Option<&Witnessed>) -> CheckResult {
        self.checked(check, witnessed).await.0
    }

    /// [`Inspector::check`] plus, for the person at the terminal, what the
    /// result withholds in a form safe to show.
    pub async fn check_diagnosed(&self, check: Check) -> (CheckResult, Option<Diagnosis>) {
        self.checked(check, None).await
    }

    async fn checked(&self, check: Check, witnessed: Option<&Witnessed>) -> (CheckResult, Option<Diagnosis>) {
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
        let Ran { status, output, execution, ssh, reply, carried } = match check {
            Check::Identity => unreachable!("handled above"),
            Check::Disk => {
                let (status, output, execution, ssh) = self.disk().await;
                Ran { status, output, execution, ssh, reply: None, carried: None }
            }
            Check::WebStatus => self.web_status(witnessed).await,
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
        let result = CheckResult { reply, carried, ..self.result(check, status, output, Some(execution)) };
        (result, diagnosis)
    }

    /// Verifies identity, then runs the host helper with `request` on stdin,
    /// all under the same lock as the checks. For the management tools.
    pub async fn host_rpc(&self, request: &[u8], limits: RunLimits) -> Result<ProcessOutput, GateRefusal> {
        self.host_rpc_watched(request, limits, None).await
    }

    /// [`Inspector::host_rpc`], with `tap` seeing the helper's stdout as it
    /// arrives (the progress lines of a long execute).
    pub async fn host_rpc_watched(
        &self,
        request: &[u8],
        limits: RunLimits,
        tap: Option<exec::StdoutTap>,
    ) -> Result<ProcessOutput, GateRefusal> {
        let mut gate = self.gate.lock().await;
        self.reverify(&mut gate).await.map_err(|(refusal, _)| refusal)?;
        let (outcome, _) = self.run_watched(RemoteCommand::Rpc, Some(request), limits, tap).await;
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
        let answer = gated::identity_answer(&outcome.stdout);
        let framed = answer.header();
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
        self.link().helper = answer.server_version();
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

    /// The helper's `gateway_status`, judged; its reply, read once, goes
    /// with the result. The request carries `witnessed` (for a server
    /// whose protocol reads it, as `Request::to_bytes_witnessed` decides
    /// for every rpc) and the answer's proof goes up unjudged ([`Carried`]).
    async fn web_status(&self, witnessed: Option<&Witnessed>) -> Ran {
        let server = self.server_version();
        let request = crate::wire::Request::GatewayStatus {}.to_bytes_witnessed(None, &server, witnessed);
        // The proof beside a reply may hold up to 32 KiB of audit rows:
        // read as much as the rpc client reads, show at most 8 KiB of the rest.
        let limits = RunLimits { output: WEB_STATUS_READ, ..self.limits() };
        let (outcome, ssh) = self.run(RemoteCommand::Rpc, Some(&request), limits).await;
        let reply = WebReply::read(&outcome.stdout);
        let shown = without_proof(&outcome.stdout);
        let status = match (outcome.execution.execution_status, &reply) {
            (ExecutionStatus::Ok | ExecutionStatus::NonzeroExit, _) if shown.len() > CHECK_OUTPUT_LIMIT => {
                Status::OutputLimit
            }
            (ExecutionStatus::Ok, Some(WebReply::Gateways(gateways))) if all_healthy(gateways) => Status::Ok,
            (ExecutionStatus::Ok, Some(WebReply::Gateways(_))) => Status::CheckFailed,
            (ExecutionStatus::Ok, _) => Status::HelperUnavailable,
            // The helper refused (a policy it cannot read, a full state...):
            // the same code every tool gives for that cause. Otherwise sudo
            // refused or the helper is missing.
            (ExecutionStatus::NonzeroExit, Some(WebReply::Refused(_))) => Status::Rejected,
            (ExecutionStatus::NonzeroExit, _) => Status::HelperUnavailable,
            // Locally, a missing sudo means there is no way to the helper.
            (ExecutionStatus::LaunchFailed, _) if self.config.mode != Mode::Ssh => Status::HelperUnavailable,
            (other, _) => self.failure_status(other),
        };
        let output = match status {
            Status::Ok | Status::CheckFailed | Status::Rejected => {
                String::from_utf8_lossy(&shown).into_owned()
            }
            _ => String::new(),
        };
        // Demo mode runs no helper: nothing to witness.
        let carried = (!self.is_demo()).then(|| Carried {
            carries: crate::wire::versions::Feature::WitnessField.since() <= server.protocol(),
            ok: outcome.execution.execution_status == ExecutionStatus::Ok
                && matches!(reply, Some(WebReply::Gateways(_))),
            proof: crate::wire::witness::carried(&outcome.stdout),
        });
        Ran { status, output, execution: outcome.execution, ssh, reply, carried }
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
    ) -> (ProcessOutput, Option<SshFailure>) {
        self.run_watched(command, stdin, limits, None).await
    }

    async fn run_watched(
        &self,
        command: RemoteCommand,
        stdin: Option<&[u8]>,
        limits: RunLimits,
        tap: Option<exec::StdoutTap>,
    ) -> (ProcessOutput, Option<SshFailure>) {
        let transport = match &self.backend {
            Backend::Demo => return (demo::outcome(&self.config, command), None),
            Backend::Real(transport) => transport,
        };
        let (specs, framed) = self.specs_for(transport.as_ref(), command, stdin, limits);
        let mut combined: Option<ProcessOutput> = None;
        let mut ssh = None;
        for mut spec in specs {
            spec.stdout_tap = tap.clone();
            let (outcome, tail) = transport.run(&spec).await;
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
        let mut outcome = combined.unwrap_or_else(|| ProcessOutput {
            execution: Execution::not_started(ExecutionStatus::LaunchFailed),
            stdout: Vec::new(),
            stderr_len: 0,
            stderr: Vec::new(),
        });
        if framed {
            self.unframe(&mut outcome);
        }
        (outcome, ssh)
    }
}

/// How much of web_status's reply is read: as much as the rpc client
/// reads of any reply (`crate::mcp::rpc::RPC_LIMITS`), since a protocol 2
/// reply carries its audit proof beside the gateways.
const WEB_STATUS_READ: usize = 128 * 1024;

/// One check's run: what its result shows, and what goes with it.
struct Ran {
    status: Status,
    output: String,
    execution: Execution,
    ssh: Option<SshFailure>,
    reply: Option<WebReply>,
    carried: Option<Carried>,
}

/// A gate refusal, and what the person at the terminal may be told about it.
type DiagnosedRefusal = (GateRefusal, Option<Diagnosis>);

/// The output a result may show: what the target printed, unless the run
/// failed in a way that makes it meaningless.
fn output_text(outcome: &ProcessOutput, status: Status) -> String {
    match status {
        // Rejected: the helper's refusal (code and sentence), ours to show.
        Status::Ok | Status::CheckFailed | Status::Rejected => {
            String::from_utf8_lossy(&outcome.stdout).into_owned()
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests;
