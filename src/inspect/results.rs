//! What a check answers: the closed set of read-only checks, every status a
//! result can carry (one set for all tools), the result itself as the agent
//! and the report see it, why a gated call did not run, and what only the
//! person at the terminal is told beyond the result ([`Diagnosis`]). Pure
//! data; used unprivileged on the workstation by the inspector, the MCP
//! server and the report.

use serde::{Deserialize, Serialize};

use super::transport::SshFailure;
use crate::exec::Execution;

/// The closed set of read-only checks, the agent's words (published in the
/// tools' schemas). One name table (strum) for `as_str`; serde's names are
/// tested to be the same. Not the set of commands run on a target
/// (`crate::wire::remote::RemoteCommand`, which the ssh gate shares):
/// `web_status` is asked through the helper's rpc, and the rpc, which the
/// management tools also send, is no check an agent can name.
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
    /// Management tools are off (`VOLCE_LAB_MANAGEMENT`, or the target's
    /// `management` key in the targets file, is not on).
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
    /// The target as the agent names it: its fleet name (the ssh alias,
    /// `localhost` or `demo` when no targets file names it).
    pub target: String,
    pub check: Check,
    pub status: Status,
    pub exit_code: Option<i32>,
    /// What the target printed, at most 8 KiB; empty when withheld.
    pub output: String,
    /// Facts of the process that ran; null when nothing ran.
    pub execution: Option<Execution>,
    /// web_status: the helper's reply as the check read it, so no later
    /// reader (the MCP result's sentence and code) parses `output` again.
    /// Not serialized: `output` is what the agent reads.
    #[serde(skip)]
    pub reply: Option<super::web_status::WebReply>,
    /// web_status: what the helper's answer gave the workstation's
    /// witness; `Some` exactly when the helper was run and its answer is
    /// the result's (not after a gate refusal or mismatch). Not serialized.
    #[serde(skip)]
    pub carried: Option<super::web_status::Carried>,
}

/// A fresh request id.
pub fn request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Now, UTC, RFC 3339 with milliseconds.
pub fn timestamp() -> String {
    crate::text::rfc3339_millis_now()
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
/// drops it (see [`super::Inspector::check`]).
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
