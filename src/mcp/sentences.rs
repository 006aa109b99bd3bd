//! The fixed sentence each status carries in a result's `message`, for the
//! agent (a refusal or an rpc answer brings its own). Pure; runs
//! unprivileged on the workstation.

use crate::inspect::Status;

/// A sentence for each status the agent can meet.
pub fn message(status: Status, is_demo: bool) -> &'static str {
    match status {
        Status::Ok if is_demo => {
            "Simulated answer (demo mode): no server was contacted. Say so when you report it."
        }
        Status::Ok => "The check ran and the answer is healthy.",
        Status::IdentityRequired => {
            "Identity is not verified on this target: not yet in this session, or a failed or timed-out \
             connection since the last match cleared it (a match is never a lease). Call cloud_check with \
             check=identity on this target again; nothing was run."
        }
        Status::IdentityMismatch => {
            "The target is not the expected host and user; its answer is withheld. Stop and tell the user; \
             do not try another target."
        }
        Status::ConnectionFailed => "Could not reach the target (ssh failed or the remote side exited 255).",
        Status::CheckFailed => "The query worked and the answer is unhealthy; see output.",
        Status::HelperUnavailable => {
            "The host helper could not be asked: not installed, sudo refused, or no valid answer."
        }
        Status::Timeout => {
            "No answer before the time limit; the process was killed and the outcome is unconfirmed."
        }
        Status::OutputLimit => {
            "The answer was larger than allowed; the process was killed and nothing is shown."
        }
        Status::SshUnavailable => "The ssh client could not be started on this machine.",
        Status::ExecutionFailed => "A local program could not be started or ended abnormally.",
        Status::DemoOnly => {
            "Demo mode: management runs nothing and no server was contacted. Managing a real server needs \
             local or ssh mode and VOLCE_LAB_MANAGEMENT=enabled, set by the user."
        }
        Status::ManagementDisabled => {
            "Management is switched off; only the user can enable it (VOLCE_LAB_MANAGEMENT=enabled in the \
             MCP server's configuration). Nothing was run."
        }
        Status::Rejected => "The host helper refused the request; nothing changed.",
        Status::Unknown => "The outcome is unknown; the server may have acted. Do not retry: inspect first.",
        Status::NeedsInspection => "The change failed or is uncertain; the operator must inspect the plan.",
        Status::InvalidArguments => "The arguments were refused; nothing was run.",
    }
}
