//! When a failed docker call is a refusal that changed nothing: docker's
//! own "no" (exit 1, seen to its end) on the first mutation of an action,
//! after which a fresh look shows the target as it was. Read-only; runs as
//! root inside the host helper. Docker's words are never read (they stay
//! in `exec`): only its exit code and what a new inspect shows.
//!
//! Only the first mutation of an action qualifies: after any change, a
//! failure may leave something half done, and stays an error an operator
//! inspects.

use super::argv::argv;
use super::{DockerClient, Runner};
use crate::docker::EngineError;
use crate::exec::{Completion, Execution, ExecutionStatus};
use crate::vocab::ContainerId;

/// Whether a failed call is docker's own "no" (exit 1, the process seen to
/// its end), as opposed to a timeout, a signal or a lost answer, after
/// which the engine may still be acting.
pub(super) fn engine_said_no(execution: &Execution) -> bool {
    execution.execution_status == ExecutionStatus::NonzeroExit
        && execution.exit_code == Some(1)
        && !execution.timed_out
        && execution.completion == Completion::Confirmed
}

/// What the first mutation of stop or remove_app was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FirstChange {
    /// `docker update --restart=no`: refused unchanged when the container
    /// is still there with a restart policy other than `no`.
    DisableRestart,
    /// `docker rm` (never -f): refused unchanged when the container is
    /// still there and not being removed.
    Remove,
}

impl<R: Runner> DockerClient<R> {
    /// `error` from the first mutation `change` on `id`, as a verified
    /// [`EngineError::Refused`] when docker said no and the container is
    /// seen as it was; otherwise `error` itself.
    pub(super) fn refused_unless_changed(
        &self,
        error: EngineError,
        id: &ContainerId,
        change: FirstChange,
        step: &'static str,
    ) -> EngineError {
        let said_no = matches!(&error, EngineError::Call { execution, .. } if engine_said_no(execution));
        if !said_no {
            return error;
        }
        let args = argv(&[
            "inspect",
            "--type",
            "container",
            "--format",
            "{{.HostConfig.RestartPolicy.Name}} {{.State.Status}}",
            "--",
            id.as_str(),
        ]);
        let Ok(Some(out)) = self.call_unless_absent("inspect container after a refusal", args) else {
            return error;
        };
        let text = String::from_utf8_lossy(&out);
        let unchanged = match text.trim().split_once(' ') {
            Some((policy, _)) if change == FirstChange::DisableRestart => {
                !policy.is_empty() && policy != "no"
            }
            Some((_, state)) => !matches!(state, "dead" | "removing"),
            None => false,
        };
        if unchanged { EngineError::Refused { step } } else { error }
    }
}
