//! The fixed audit categories of a run that did not end cleanly, derived
//! from an [`Execution`]. Pure; used by both ends (the workstation's
//! `audit.jsonl` and the host helper's audit rows).

use serde::{Deserialize, Serialize};

use super::{Execution, ExecutionStatus};

/// The fixed audit category of a run that did not end with exit 0, the
/// same words on both ends: the host's audit rows (`audit.process`) and the
/// workstation's `audit.jsonl` (`process_outcome`). Derived from an
/// [`Execution`] only ([`ProcessOutcome::of`]), never from output; the words
/// are the reference's (002-command-errors-and-exit-codes).
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
pub enum ProcessOutcome {
    #[serde(rename = "COMMAND_EXIT_NONZERO")]
    #[strum(serialize = "COMMAND_EXIT_NONZERO")]
    CommandExitNonzero,
    #[serde(rename = "COMMAND_TIMEOUT")]
    #[strum(serialize = "COMMAND_TIMEOUT")]
    CommandTimeout,
    #[serde(rename = "COMMAND_OUTPUT_LIMIT")]
    #[strum(serialize = "COMMAND_OUTPUT_LIMIT")]
    CommandOutputLimit,
    #[serde(rename = "COMMAND_SIGNALED")]
    #[strum(serialize = "COMMAND_SIGNALED")]
    CommandSignaled,
    #[serde(rename = "COMMAND_LAUNCH_FAILED")]
    #[strum(serialize = "COMMAND_LAUNCH_FAILED")]
    CommandLaunchFailed,
    /// ssh exited 255: ssh itself failed, or the remote command exited 255.
    #[serde(rename = "SSH_OR_REMOTE_EXIT_255")]
    #[strum(serialize = "SSH_OR_REMOTE_EXIT_255")]
    SshOrRemoteExit255,
}

impl ProcessOutcome {
    /// The category of `execution`; `None` for a clean exit 0. The match has
    /// no wildcard, so a new [`ExecutionStatus`] must be given a category.
    pub fn of(execution: &Execution) -> Option<ProcessOutcome> {
        ProcessOutcome::of_status(execution.execution_status)
    }

    /// [`ProcessOutcome::of`] from the status alone (what the workstation's
    /// audit line keeps of an [`Execution`]).
    pub fn of_status(status: ExecutionStatus) -> Option<ProcessOutcome> {
        match status {
            ExecutionStatus::Ok => None,
            ExecutionStatus::NonzeroExit => Some(ProcessOutcome::CommandExitNonzero),
            ExecutionStatus::Timeout => Some(ProcessOutcome::CommandTimeout),
            ExecutionStatus::OutputLimit => Some(ProcessOutcome::CommandOutputLimit),
            ExecutionStatus::Signaled => Some(ProcessOutcome::CommandSignaled),
            ExecutionStatus::LaunchFailed => Some(ProcessOutcome::CommandLaunchFailed),
            ExecutionStatus::SshOrRemote255 => Some(ProcessOutcome::SshOrRemoteExit255),
        }
    }

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}
