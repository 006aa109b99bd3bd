//! The one next step of each refusal code ([`Code::fix`]): what the reader
//! of a non-ok result does next, as one whole sentence. The MCP result's
//! `fix` field reads it (for a result with a code), so every tool gives the
//! same next step for the same cause. Pure data.
//!
//! Why a table per code and not per message: a message says what happened
//! in this case (the port, the plan, the state) and stays whole; the fix is
//! the standing next step for that cause, which a client can show on its
//! own. The match is exhaustive, so a new code cannot ship without one.
//!
//! [`Code::fix`] is long on purpose (over the ~80 lines a function is
//! otherwise split at): it is a data table, one arm per code, and splitting
//! it would only spread one table over several places.

use super::Code;

/// The longest fix sentence, in characters: one sentence, well inside what
/// a client shows on one screen, and never cut (tests/hermetic/mcp_management.rs
/// holds every code's).
pub const FIX_MAX_CHARS: usize = 300;

impl Code {
    /// The one next step for a result with this code, a whole sentence.
    /// A data table, one arm per code, kept whole on purpose: the match is
    /// what makes the compiler insist that every code has its step.
    pub fn fix(self) -> &'static str {
        match self {
            Code::InvalidRequest | Code::UnknownAction | Code::InvalidParameters => {
                "Correct the request as the message says and send it again; nothing ran."
            }
            Code::RequestTooLarge => "Send a smaller request; nothing ran.",
            Code::InvalidAppName => {
                "Plan again with an app name that starts with a lowercase letter and has only lowercase letters, digits and hyphens."
            }
            Code::ImageNotInCatalog => {
                "Plan again with one of the catalog keys the message lists, or ask the operator to add the image to the policy's catalog."
            }
            Code::ContainerPortMismatch => {
                "Plan again with the container_port the message names, or leave container_port out: the catalog entry sets it."
            }
            Code::InvalidPort | Code::PortOutOfRange => {
                "Plan again with a port inside the range the message names."
            }
            Code::PortInUse | Code::PortPublished | Code::PortReserved => {
                "Plan again with another host_port from the operator's range."
            }
            Code::InvalidServerName => {
                "Plan again with lowercase DNS names (a-z, 0-9, hyphens and dots): one as server_name, and at most 3 others, each once, in also_server_names."
            }
            Code::AppExists => {
                "Choose another app name, or plan update or remove_app for the existing app if the user wants that."
            }
            Code::AppQuotaReached => {
                "Ask the user whether an app may be removed (remove_app), or ask the operator to raise max_apps."
            }
            Code::InsufficientCapacity => {
                "Tell the user the server lacks free memory or disk; free some on the server before planning again."
            }
            Code::AppNotFound => "Read service_inventory for the apps that exist, then plan for one of them.",
            Code::AppNotRunning => "Read service_inventory; plan a start if the app is stopped on purpose.",
            Code::ContainerSetChanged => {
                "Ask the operator to inspect the app's containers on the server; plan nothing for this app until they have."
            }
            Code::InvalidImageId => "Plan again with an image id of the form sha256:<64 hex>.",
            Code::ImageNotFound => {
                "Read service_inventory for the local images, then plan with one of their ids."
            }
            Code::ImageInUse | Code::ImageHasChildren | Code::ImageHasReferences => {
                "Tell the user what holds the image (the message names it); only the operator decides whether it may go."
            }
            Code::ImageNotManaged => {
                "Leave this image alone: volce-lab removes only images its own apps used; tell the user."
            }
            Code::AppNotStopped => {
                "Read service_inventory; only a stopped app can be started: a restart plan restarts one that should run or runs again."
            }
            Code::AppExited => {
                "Plan a restart of the app: it should run and its container exited; start is only for an app a stop plan stopped."
            }
            Code::ImageUnchanged => "Nothing to do: the app already runs that image; tell the user.",
            Code::ImageDeclaresVolumes => {
                "Choose a catalog image without VOLUME declarations, or ask the operator to rebuild the image without them."
            }
            Code::InspectionRequired | Code::PlanExecuting => {
                "Stop and ask the operator to inspect the plan the message names on the server (`sudo volce-lab-host show PLAN_ID`)."
            }
            Code::InvalidPlanId => "Use the plan_id exactly as service_plan returned it.",
            Code::PlanNotFound => {
                "This id is not on the server asked: plans are per server, so if the plan was made on another target, call again with that target; else prepare a new plan with service_plan."
            }
            Code::PlanExpired | Code::PlanInvalidated | Code::PolicyChanged | Code::SnapshotChanged => {
                "Read the server's state again (service_inventory), then prepare a new plan."
            }
            Code::PlanConsumed => {
                "Do not run it again: read service_inventory for what the plan did, and prepare a new plan only for a new change."
            }
            Code::PlanRejected => {
                "The operator ended this plan: ask the user before planning the same change again."
            }
            Code::PlanCorrupt | Code::StateCorrupt => {
                "Stop and tell the operator: they run `sudo volce-lab-host doctor` on the server, which names the recovery."
            }
            Code::ApprovalRequired => {
                "Ask the operator to run `sudo volce-lab-host show PLAN_ID` on the server and approve it, then call service_execute again."
            }
            Code::InvalidDigest | Code::DigestMismatch => {
                "Copy the approve command exactly as `volce-lab-host show PLAN_ID` prints it."
            }
            Code::ApprovalNotRequired | Code::AlreadyApproved => {
                "Nothing to approve: the plan can be executed as it is."
            }
            Code::NotAnApprover => "Ask an operator the policy names as an approver to approve the plan.",
            Code::SelfApproval => "Ask another approver: the requester cannot approve their own plan.",
            Code::SignedApprovalMalformed => {
                "Ask the operator for the whole text `volce-lab approve` printed (statement and signature block) and pass it unchanged."
            }
            Code::SignedApprovalsOff => {
                "Ask the operator to approve at the server's terminal, or to enable signed approvals there (docs/operator.md)."
            }
            Code::SignersFileUnsafe => {
                "Tell the operator that allowed_signers must be root's file, writable by root only; run volce-lab-host doctor on the server."
            }
            Code::SignatureInvalid => {
                "Ask the operator to sign the plan's statement again with a key listed in the server's allowed_signers."
            }
            Code::SignatureNamespace => {
                "Ask the operator to sign with `volce-lab approve`, which uses the volce-lab-approval namespace."
            }
            Code::SoftwareKeyRefused => {
                "Ask the operator to sign with their hardware (FIDO) key: this server accepts no key held in a file."
            }
            Code::ApprovalForAnotherHost | Code::ApprovalForAnotherPlan | Code::StatementMismatch => {
                "Ask the operator to sign this server's statement of this plan (volce-lab approve TARGET PLAN_ID); nothing was recorded."
            }
            Code::InvalidReason => {
                "Give a reason of 1 to 500 characters, or leave --reason out; nothing was recorded."
            }
            Code::NotAwaitingInspection => {
                "Run `sudo volce-lab-host show PLAN_ID` to see the plan's state; only a needs_inspection plan is resolved."
            }
            Code::InvalidHash => "Give the 64 lowercase hex characters that `audit head` printed.",
            Code::InvalidTime => "Give the time in RFC 3339 UTC, such as 2026-01-31T12:00:00Z.",
            Code::AuditWitnessMismatch => {
                "Stop managing this target and tell the operator: they compare `volce-lab audit witness` with the server's `audit head` and accept or investigate."
            }
            Code::AuditChainBroken => "Run `sudo volce-lab-host audit verify` to see where the chain breaks.",
            Code::NginxRejected | Code::HealthCheckFailed | Code::DeployFailed | Code::StartFailed => {
                "Fix what the message names (the image, container_port or server_name), then prepare a new plan; nothing is blocked."
            }
            Code::UpdateFailed => {
                "Fix what the message names (usually the new image), then prepare a new update plan; the old container still serves."
            }
            Code::EngineRefused => {
                "Read the server's state again (service_inventory) before preparing a new plan; nothing changed and nothing is blocked."
            }
            Code::NotRoot | Code::UnsafePath | Code::StateUnavailable | Code::StateTooNew => {
                "Stop and tell the operator: they run `sudo volce-lab-host doctor` on the server (server-install.md)."
            }
            Code::UpgradeWaiting => {
                "Wait a minute and call once more: the server finishes its package upgrade when the plan the message names has ended."
            }
            Code::Paused => {
                "Stop and tell the user the operator paused volce-lab on this server (the message gives their reason); do not retry in a loop: ask again once they say it is resumed."
            }
            Code::DowngradePending => {
                "Stop and tell the user the server is being downgraded; do not retry in a loop: ask again once the operator says the old package is installed."
            }
            Code::PauseRequired => {
                "Run `sudo volce-lab-host pause --reason TEXT` first, then the restore again (server-install.md, Upgrading)."
            }
            Code::DowngradeRefused => {
                "Keep the installed version, or pause, `state restore BACKUP --for-downgrade` the backup taken before the upgrade, then install again (server-install.md, Upgrading)."
            }
            Code::EnvFileInvalid => {
                "Tell the operator the catalog entry's env file is refused: they run `sudo volce-lab-host doctor`, which names what to fix; never pass a secret yourself."
            }
            Code::PolicyInvalid => {
                "Tell the operator the server's policy is invalid: they run `sudo volce-lab-host doctor`, which names the field to fix."
            }
            Code::StateFull | Code::AuditUnavailable => {
                "Tell the operator the server's state disk is full or read-only; nothing was done, so call again once they freed space."
            }
            Code::ClockSkew => {
                "Tell the operator the server's clock jumped; prepare a new plan once the clock is right."
            }
            Code::EngineUnavailable => {
                "Tell the operator docker is not answering on the server; nothing changed, so call again once it does."
            }
            Code::InvalidCaller | Code::CallerMismatch => {
                "Run the command through sudo from your own login, not as root or another user."
            }
            Code::NotConfirmed => "Run the command again on a terminal and confirm, or pass --yes.",
            Code::Busy => "Tell the user, and try once more in a minute, never in a loop.",
            Code::RequestTimeout => "Send the request again; nothing was done.",
            Code::GateRefused => {
                "Call volce-lab's tools instead: the agent's key runs only volce-lab's fixed requests, so a plain ssh command is refused and nothing ran."
            }
            Code::PendingPlansLimit => {
                "Wait for pending plans to expire, or ask the operator to reject the ones not wanted."
            }
            Code::UnexpectedField | Code::MissingField | Code::WrongType | Code::NotAllowed => {
                "Correct the arguments as the message says, following the tool's input schema; nothing ran."
            }
            Code::TooLarge => "Send smaller arguments; nothing ran.",
            Code::UnknownTarget => "Call again with one of the targets the message lists.",
            Code::RequestStateTampered
            | Code::RequestStateForeign
            | Code::RequestStateExpired
            | Code::RequestStateReplayed => {
                "Call service_execute again without a request state; only the operator's approval on the server lets the plan run."
            }
            Code::ServerTooOld => {
                "Upgrade volce-lab on that server (server-install.md, Upgrading), then check identity and call again."
            }
            Code::ClientTooOld => {
                "Upgrade volce-lab on this workstation (server-install.md, Upgrading), then check identity and call again."
            }
            Code::NothingKept => {
                "Nothing to roll back to: read service_inventory (kept_versions); an update plan to a catalog key moves the app instead."
            }
            Code::ImageKeptForRollback => {
                "Leave this image: an app keeps it for rollback. It can be removed once that version is no longer kept (later updates push it out, or remove_app removes the app); tell the user."
            }
            Code::InvalidCatalogKey => {
                "Run it again with a key that starts with a lowercase letter and has only lowercase letters, digits and hyphens (at most 31)."
            }
            Code::InvalidImageReference => {
                "Run it again with a reference such as registry.example/team/app:1.2 or name@sha256:<64 hex>, as docker pull takes it."
            }
            Code::InvalidCatalogEntry => {
                "Run it again with --container-port from 1024 to 65535 and an absolute --health-path such as /healthz."
            }
            Code::ImagePullFailed => {
                "Check that the registry serves the reference and that root's docker login reaches it (sudo docker pull REF), then pin again."
            }
            Code::ImageNotInRegistry => {
                "Push the image to a registry first (docker push), then pin it by that registry's reference: deploy pulls by digest."
            }
            Code::ImageMisfitsTemplate => {
                "Rebuild the image with USER 1000:1000 and a CMD as server-install.md's images section says, push it, then pin it again."
            }
            Code::ContainerPortNeeded => {
                "Run it again with --container-port N, the port the app listens on inside its container."
            }
            Code::CatalogKeyNotFound => {
                "Run `sudo volce-lab-host catalog list` for the keys the catalog has."
            }
            Code::CatalogKeyInUse => {
                "Remove the apps that use the key first (a remove_app plan), or pin a new image under the key instead."
            }
            Code::DataInvalid => {
                "Tell the operator what the message names is in the way of the app's data: they move it away, then prepare a new plan."
            }
            Code::DataNotFound => {
                "The operator runs `sudo volce-lab-host data list` for the data images the server keeps and the apps they belong to; a missing one is restored from a backup (data.md)."
            }
            Code::DataHeld => {
                "Delete a managed app's data with a remove_app plan with purge_data: true (approved as any remove_app), not with data purge."
            }
            Code::DataPlanOpen => {
                "End the plan that names the app first (reject it if pending, resolve it after an inspection), then purge again."
            }
            Code::DataActionFailed => {
                "Read which step failed in the message, fix that on the server (a busy mount: fuser -vm PATH), then run the command again."
            }
            Code::CatalogEditInvalid => {
                "Change the policy so that it still loads as the message says (the catalog needs one entry at least); nothing was written."
            }
            Code::TaskNotDeclared => {
                "Plan again with one of the tasks the message lists; only the operator declares tasks (the catalog entry's tasks)."
            }
            Code::TaskFailed | Code::TaskTimedOut => {
                "Report the exit code and the output (untrusted) to the user; the app was not changed by volce-lab, but the task's own work may be partial: never run it again without their word."
            }
            Code::BackupNotConfigured => {
                "Tell the user the operator must add a backup object to the server's policy (docs/data.md#backups); the agent cannot."
            }
            Code::AppHasNoData => {
                "Nothing to back up: the app keeps no data directory. Tell the user; do not retry."
            }
            Code::BackupFailed => {
                "Report the step to the user; the app was not changed. The operator reads the details on the server (volce-lab-host show PLAN, volce-lab-host backup check)."
            }
            Code::SnapshotNotFound => {
                "Ask the user which snapshot to restore: a backup's result names its id, and the operator lists them with volce-lab-host backup list APP."
            }
            Code::RestoreFailed => {
                "Report the message to the user: the app runs on the data it had before, nothing is retried. The operator reads the details on the server (volce-lab-host show PLAN)."
            }
            Code::EdgeNotConfigured => {
                "Tell the user the operator must add an edge object to the server's policy (docs/edge.md); the agent cannot."
            }
            Code::EdgeNotEnabled => {
                "Tell the user the operator must start the edge on the server: volce-lab-host edge enable (docs/edge.md)."
            }
            Code::AlreadyExposed => {
                "Nothing to do: the app's names already answer over HTTPS. Check with service_inventory."
            }
            Code::AppNotExposed => {
                "Nothing to do: the app's names are not on the edge. Check with service_inventory."
            }
            Code::EdgeCertificateInvalid => {
                "Tell the user which name the message names: the operator adds or fixes its certificate files in the policy's edge.certificates (docs/edge.md), then plan again."
            }
            Code::EdgeFailed => {
                "Report the message to the user: the edge serves what it served before, nothing is retried. The operator reads the details on the server (volce-lab-host show PLAN, volce-lab-host edge status)."
            }
            Code::EdgeAddressTaken => {
                "Stop what holds the address (the message names it where it can), or change edge.http or edge.https in the policy, then run volce-lab-host edge enable again."
            }
            Code::EdgeInUse => {
                "Take the exposed apps off the edge first (an unexpose plan for each app the message lists), then run volce-lab-host edge disable again."
            }
            Code::DataEntryMismatch => {
                "Deploy the app under the catalog entry the message names, or choose another app name; only the operator can delete the kept data (`volce-lab-host data purge APP`)."
            }
            Code::AccessoriesChanged => {
                "Tell the user: the app keeps the accessories it was deployed with. Update to an entry with the same accessories, or (the user deciding) remove_app without purge_data and deploy again, which re-attaches the kept data."
            }
            Code::RotationNotDeclared => {
                "Tell the user: the operator declares how the accessory changes its credential (the policy's accessories.NAME.rotate) before a rotate_credential plan can be made."
            }
            Code::DumpNotDeclared => {
                "Tell the user: the operator declares how the accessory loads a dump (the policy's accessories.NAME.dump and load) before that snapshot can be restored."
            }
            Code::InvalidRolloutId => "Use the rollout id exactly as service_plan returned it.",
            Code::RolloutNotFound => {
                "Plan the rollout again with service_plan and `targets`: this workstation keeps the rollouts it recorded, and has none with this id."
            }
            Code::RolloutAlreadyStarted => {
                "Never run it again: read each host's outcome in the answer; for a host that changed and must go back, plan a rollback there (service_plan with that target)."
            }
            Code::NotAFleetAction => {
                "Plan this action on one target at a time (service_plan with `target`); only deploy, update, rollback, restart and nginx_config roll out over `targets`."
            }
            Code::RolloutApprovalAlone => {
                "Pass a rollout's signed approval only with `rollout` (service_execute with the rollout_id, no target or plan_id): it runs in the rollout's order, halting at the first failure."
            }
            Code::ApprovalRulesDiffer => {
                "Roll out over the servers whose plans need an approval and, separately, over the others; or ask the operator to make their policies agree on this action."
            }
            Code::UnhealthyAfterWait => {
                "Report it: that server changed and then stopped serving. Read service_inventory and service_logs there; plan a rollback on it if the user wants the old version back. The servers not touched keep their plans pending."
            }
            Code::RolloutCancelled => {
                "Read each server's outcome in the answer; never run the rollout again. The servers not touched keep their plans pending; plan a new rollout for them if the user still wants the change."
            }
            Code::TargetsShareIdentity => {
                "Treat the named targets as one server until the workstation's user gives each server its own host name (and expected_host) or removes one target from the targets file."
            }
            Code::NeedsInspection => {
                "Stop and ask the operator to inspect the plan on the server (`sudo volce-lab-host show PLAN_ID`); do not retry."
            }
        }
    }
}
