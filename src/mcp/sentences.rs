//! The fixed sentence each status carries in a result's `message`, for the
//! agent (a refusal or an rpc answer brings its own). Pure; runs
//! unprivileged on the workstation.

use crate::config::ManagementSwitch;
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

/// The one next step of a non-ok result that carries no code (a code
/// brings its own, `Code::fix`); `None` for `ok`. One whole sentence each,
/// within `crate::vocab::FIX_MAX_CHARS`.
pub fn status_fix(status: Status) -> Option<&'static str> {
    Some(match status {
        Status::Ok => return None,
        Status::IdentityRequired => {
            "Call cloud_check with check=identity on this target, then repeat the call."
        }
        Status::IdentityMismatch => {
            "Stop and tell the user; never edit the configuration to make it pass, and do not try another target."
        }
        Status::ConnectionFailed => {
            "Tell the user the target could not be reached; the network or the host key needs checking before another call."
        }
        Status::CheckFailed => "Report what output shows is unhealthy; do not claim it is fixed.",
        Status::HelperUnavailable => {
            "Tell the user; the administrator runs `sudo volce-lab-host doctor` on the server (server-install.md)."
        }
        Status::Timeout | Status::OutputLimit => {
            "Report it and do not retry blindly: inspect first (cloud_check web_status or service_inventory)."
        }
        Status::SshUnavailable => "Install the OpenSSH client on this machine, then call again.",
        Status::ExecutionFailed => "Report it to the user: a program on this machine could not run.",
        Status::DemoOnly => {
            "Say it is a demo; managing a real server needs local or ssh mode and VOLCE_LAB_MANAGEMENT=enabled, set by the user."
        }
        Status::ManagementDisabled => {
            "Tell the user; only they can set VOLCE_LAB_MANAGEMENT=enabled in the MCP server's configuration."
        }
        Status::Rejected => "Read the message for the reason; nothing changed.",
        Status::Unknown => {
            "Do not retry: inspect first (service_inventory, and ask the operator to run `sudo volce-lab-host show PLAN_ID`)."
        }
        Status::NeedsInspection => crate::vocab::Code::NeedsInspection.fix(),
        Status::InvalidArguments => "Correct the arguments as the message says; nothing ran.",
    })
}

/// The sentence and the next step of `management_disabled` for a target
/// whose switch is `switch`. With a targets file, `VOLCE_LAB_MANAGEMENT`
/// must stay unset, so naming it sent the user the wrong way (issue 37):
/// the target's `management` key in that file is named instead. `None` as
/// the fix: the status's own ([`status_fix`]).
pub fn management_disabled(switch: &ManagementSwitch) -> (String, Option<&'static str>) {
    match switch {
        ManagementSwitch::Variable => (message(Status::ManagementDisabled, false).to_owned(), None),
        ManagementSwitch::TargetsFile { path, target } => (
            format!(
                "Management is switched off for target {target}; only the user can enable it (management = true \
                 in its [targets.{target}] table of the targets file {}, then a restart of the MCP server). \
                 Nothing was run.",
                crate::text::for_terminal(&path.display().to_string())
            ),
            Some(TARGETS_FILE_MANAGEMENT_FIX),
        ),
    }
}

/// The next step of `management_disabled` when a targets file sets the switch.
pub const TARGETS_FILE_MANAGEMENT_FIX: &str = "Tell the user; only they can set management = true in this target's table of the targets file \
     (VOLCE_LAB_TARGETS) and restart the MCP server.";

/// The next step of a refusal whose code this workstation does not know
/// (from a newer host helper): a refusal changed nothing whichever build
/// named it.
pub const NEWER_CODE_FIX: &str = "Tell the user the server refused with a code newer than this volce-lab; nothing changed, \
     and updating volce-lab on this machine gives that code's next step.";

/// web_status's sentence on a server with no managed gateway yet (the
/// helper answered, with an empty list): nothing is broken, nothing serves.
pub const NO_GATEWAY_YET: &str = "No managed gateway yet: volce-lab has deployed no app on this server, so nothing \
     serves and nothing is called healthy.";

/// The next step of [`NO_GATEWAY_YET`].
pub const NO_GATEWAY_YET_FIX: &str =
    "Report that no app is deployed here yet; to serve one, propose a deploy with service_plan.";

/// The next step of a fan-out that is not ok: each target's entry says its own.
pub const FAN_OUT_FIX: &str = "Read each entry of results that is not ok: each carries its own fix.";

#[cfg(test)]
mod tests {
    use strum::VariantArray as _;

    use super::*;

    #[test]
    fn every_status_but_ok_has_a_whole_fix_sentence() {
        for status in Status::VARIANTS {
            let Some(fix) = status_fix(*status) else {
                assert_eq!(*status, Status::Ok);
                continue;
            };
            for fix in [fix, NEWER_CODE_FIX, FAN_OUT_FIX, NO_GATEWAY_YET_FIX, TARGETS_FILE_MANAGEMENT_FIX] {
                assert!(fix.chars().count() <= crate::vocab::FIX_MAX_CHARS, "{status:?}: {fix}");
                assert!(fix.starts_with(|c: char| c.is_ascii_uppercase()) && fix.ends_with('.'), "{fix}");
            }
        }
    }
}
