//! The stable refusal codes ([`Code`]) and a refusal ([`Refusal`]): what
//! every layer answers with when it changes nothing. Pure data; the host
//! helper, the MCP server and the store all build and read them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Every stable refusal code, of the host helper and of the MCP server's
/// own argument checks. The wire carries [`Code::as_str`]; the MCP side
/// passes it to the agent as is, so a variant's string never changes once
/// shipped (the golden test below holds every one). The strum derive is the
/// one name table: `as_str`, `FromStr` and serde all read it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, strum::IntoStaticStr, strum::EnumString, strum::VariantArray,
)]
#[strum(serialize_all = "snake_case")]
pub enum Code {
    // Request shape (host rpc).
    InvalidRequest,
    RequestTooLarge,
    UnknownAction,
    InvalidParameters,
    // Deploy / nginx_config / stop / remove_image validation.
    InvalidAppName,
    ImageNotInCatalog,
    InvalidPort,
    PortOutOfRange,
    PortInUse,
    PortPublished,
    PortReserved,
    InvalidServerName,
    AppExists,
    AppQuotaReached,
    InsufficientCapacity,
    AppNotFound,
    AppNotRunning,
    ContainerSetChanged,
    InvalidImageId,
    ImageNotFound,
    ImageInUse,
    /// remove_image of an image no app volce-lab deployed has used.
    ImageNotManaged,
    /// start of an app that is not stopped (running, or needs inspection).
    AppNotStopped,
    /// start of an app recorded running whose container exited (crashed,
    /// or stopped by hand): a restart plan is the way, not a start.
    AppExited,
    /// update to the image the app already runs.
    ImageUnchanged,
    /// deploy or update of an image that declares `VOLUME`s (refused at
    /// plan time when the image is local, else right after the pull).
    ImageDeclaresVolumes,
    /// remove_image of an image other local images are built on (docker
    /// refuses it: "dependent child images").
    ImageHasChildren,
    /// remove_image of an image whose tags or digest references docker
    /// will not drop by id without force (several tags, or several
    /// repositories).
    ImageHasReferences,
    // Plan life cycle.
    InspectionRequired,
    InvalidPlanId,
    PlanNotFound,
    PlanExpired,
    PlanConsumed,
    PlanInvalidated,
    PlanExecuting,
    /// The operator ended the plan with `volce-lab-host reject`.
    PlanRejected,
    PlanCorrupt,
    PolicyChanged,
    SnapshotChanged,
    ApprovalRequired,
    // Approval (terminal only).
    InvalidDigest,
    DigestMismatch,
    ApprovalNotRequired,
    AlreadyApproved,
    NotAnApprover,
    SelfApproval,
    /// Reject: `--reason` is empty or longer than
    /// `crate::store::MAX_REASON_CHARS` characters.
    InvalidReason,
    // Resolve (terminal only).
    NotAwaitingInspection,
    // Audit (terminal only).
    /// `audit verify --from`: not a head hash (64 lowercase hex).
    InvalidHash,
    /// `audit export --since`: not an RFC 3339 UTC time.
    InvalidTime,
    /// `audit head`: the last row has no hash to print.
    AuditChainBroken,
    // Execution that failed but changed nothing (refused, or rolled back
    // and verified: the plan is `failed` and blocks nothing).
    NginxRejected,
    /// deploy: the new app did not answer through its gateway; rolled back.
    HealthCheckFailed,
    /// deploy: a docker step failed; rolled back.
    DeployFailed,
    /// start: a docker step failed; the containers were stopped again.
    StartFailed,
    /// update: a docker step failed; the old container kept serving.
    UpdateFailed,
    /// The engine refused an action's first change, and a fresh look showed
    /// its target as it was: nothing changed.
    EngineRefused,
    // The host itself.
    NotRoot,
    UnsafePath,
    PolicyInvalid,
    StateUnavailable,
    /// The state database is damaged (SQLite says corrupt or not a
    /// database, or its write-ahead log is cut short): nothing was changed;
    /// `doctor` names the file and the recovery (restore from the backup).
    StateCorrupt,
    /// The state database was written by a newer volce-lab (its schema
    /// version is above this build's): refused before it is touched.
    StateTooNew,
    /// A package upgrade's schema migration waits for a plan the previous
    /// version's helper is still executing: refused before anything
    /// changed, answered again once that plan has finished.
    UpgradeWaiting,
    /// `package-check`: the package about to replace this one cannot read
    /// the state database's schema; dpkg stops before anything changes.
    DowngradeRefused,
    /// The operator paused the agent's access (`volce-lab-host pause`):
    /// every rpc is refused, before the store is opened, until `resume`.
    Paused,
    /// The state database was restored for a downgrade (`state restore
    /// --for-downgrade`): this version does not migrate it, and every open
    /// is refused until the old package is installed.
    DowngradePending,
    /// `state restore` while the agent's access is not paused.
    PauseRequired,
    /// The state directory's filesystem has no room left for a write:
    /// refused before anything changed.
    StateFull,
    /// The wall clock moved against the boot clock since the plan was made
    /// (`clock::check_expiry`): the plan is not trusted on either reading.
    ClockSkew,
    EngineUnavailable,
    InvalidCaller,
    /// Approve/reject/resolve: `SUDO_USER`, `SUDO_UID`, the account
    /// database and the session's login uid do not name one person.
    CallerMismatch,
    /// Approve on a terminal: the operator did not confirm (or there was no
    /// terminal to ask on and no `--yes`).
    NotConfirmed,
    /// All rpc slots are taken (`crate::host::process::RPC_SLOTS`).
    Busy,
    /// No complete request arrived on stdin within the read deadline.
    RequestTimeout,
    /// The ssh gate (`volce-lab-host ssh-gate`, the forced command of the
    /// agent's key) got a remote command that is not one of volce-lab's
    /// fixed requests; nothing ran.
    GateRefused,
    /// The request's audit row could not be written (a full or read-only
    /// state database): nothing was changed and nothing is answered.
    AuditUnavailable,
    /// prepare: the requester already has the policy's maximum of
    /// unexpired pending plans; wait for them to expire or let the operator
    /// `reject` them.
    PendingPlansLimit,
    // Tool arguments the MCP server refused before anything ran (status
    // `invalid_arguments`); the host helper never answers these.
    UnexpectedField,
    MissingField,
    WrongType,
    NotAllowed,
    TooLarge,
    /// `target` or `targets` names no configured target (the message lists
    /// the choices), or is missing where several are configured.
    UnknownTarget,
    /// service_execute's retry (2026-07-28) carried a `requestState` that
    /// was changed or is not ours; nothing ran.
    RequestStateTampered,
    /// ... one issued by another server process, or for another call.
    RequestStateForeign,
    /// ... one past its expiry.
    RequestStateExpired,
    /// ... one already used once.
    RequestStateReplayed,
    /// The target's audit chain no longer extends the head this
    /// workstation witnessed (`crate::wire::witness`): rewritten, rolled
    /// back or cut beyond its retention. Management to it is refused
    /// until the operator accepts its head (`volce-lab audit witness`).
    AuditWitnessMismatch,
    /// The server's helper speaks an older protocol than the request needs
    /// (`crate::wire::versions`); nothing was sent.
    ServerTooOld,
    /// The server's helper no longer answers the workstation's older
    /// protocol (`crate::wire::versions::admit`); nothing was done.
    ClientTooOld,
    /// The code of a `needs_inspection` answer: an execute reached Docker
    /// and failed or is uncertain. Not a refusal: something may have changed.
    NeedsInspection,
    /// A deploy's `container_port` differs from the one the catalog entry
    /// says (the message names it), or an update's new entry says another
    /// port than the app was deployed on.
    ContainerPortMismatch,
    /// A catalog entry's env file is missing, not root's 0600 file in
    /// `/etc/volce-lab/apps/`, or does not parse (the message says which
    /// line, never its text).
    EnvFileInvalid,
    /// A rollback of an app whose record keeps no earlier version (never
    /// updated, or updated before versions were kept).
    NothingKept,
    /// A remove_image of an image a kept version names: rollback needs it.
    ImageKeptForRollback,
    // The catalog's operator commands (terminal only: `catalog pin|remove|gateway-image|env-file`).
    /// `catalog pin|remove KEY`: not `^[a-z][a-z0-9-]{0,30}$`.
    InvalidCatalogKey,
    /// `catalog pin KEY IMAGE`: IMAGE is not `name[:tag][@sha256:<hex>]`.
    InvalidImageReference,
    /// `--container-port` outside 1024..=65535, or a bad `--health-path`.
    InvalidCatalogEntry,
    /// The pull failed and the engine holds no such image either.
    ImagePullFailed,
    /// The image has no registry digest for its repository (built here and
    /// never pushed, or pinned by a digest the registry does not serve).
    ImageNotInRegistry,
    /// Its `User` or `Cmd` does not fit the app template (the doctor's check).
    ImageMisfitsTemplate,
    /// It exposes no port, several, or one below 1024, and no `--container-port` was given.
    ContainerPortNeeded,
    /// `catalog remove|env-file` of a key the catalog does not have.
    CatalogKeyNotFound,
    /// `catalog remove` of a key a managed app's record uses.
    CatalogKeyInUse,
    /// The edited policy would not load, or the policy file changed while
    /// the operator was asked.
    CatalogEditInvalid,
    /// Something at an app's data image path is not a data image volce-lab
    /// made (not a root-owned regular file).
    DataInvalid,
    // The data operator commands (terminal only: `data list|mount|purge`).
    /// `data purge APP`: no data image of that app name is kept.
    DataNotFound,
    /// `data purge APP`: a managed app's record holds the data (then it is
    /// a remove_app plan with `purge_data: true`).
    DataHeld,
    /// `data purge APP`: a plan that names the app is pending, executing or
    /// needs inspection (a deploy would re-attach the data).
    DataPlanOpen,
    /// A mount, unmount or delete of data failed on the host (`data mount`
    /// names each app it could not mount).
    DataActionFailed,
    /// Two configured targets answered (or expect) the same identity, host
    /// and account: volce-lab cannot tell them apart, so a plan made
    /// through one may be known on the other (issue 38). Names both; a
    /// fan-out still reports each target.
    TargetsShareIdentity,
    /// A deploy would re-attach kept data made for another catalog entry
    /// or path (or kept by a build that did not record which): the
    /// message names the entry it belongs to and `data purge`.
    DataEntryMismatch,
    // Signed approval (issue 42: `host::signed`), each refusal its own code.
    /// Not a statement followed by one SSH signature block.
    SignedApprovalMalformed,
    /// The policy has no `signed_approvals`, or `/etc/volce-lab/allowed_signers`
    /// does not exist: this host takes approvals at its terminal only.
    SignedApprovalsOff,
    /// `allowed_signers` is not root's file that only root can write.
    SignersFileUnsafe,
    /// The signature does not verify against any line of `allowed_signers`
    /// (an unknown key, a revoked one, or bytes that were changed).
    SignatureInvalid,
    /// The signature was made for another namespace than volce-lab's.
    SignatureNamespace,
    /// Signed with a key held in a file, where the policy accepts only
    /// hardware (FIDO) keys.
    SoftwareKeyRefused,
    /// The signed statement names another host.
    ApprovalForAnotherHost,
    /// The signed statement names another plan.
    ApprovalForAnotherPlan,
    /// The signed statement is not this host's statement of the plan (a
    /// parameter, the digest, the expiry or the requester differs).
    StatementMismatch,
    // Operator-declared tasks (issue 40: `crate::actions::RunTask`).
    /// run_task: the app's catalog entry declares no task of that name
    /// (the message lists the ones it declares).
    TaskNotDeclared,
    /// run_task: the task ran and exited with a code other than 0; its
    /// container is removed, what it did inside the app's data or database
    /// is its own. The output comes back beside the refusal.
    TaskFailed,
    /// run_task: the task ran out of its time, and was stopped and
    /// removed; what it did before is its own.
    TaskTimedOut,
    // Backups (issue 41: `crate::actions::Backup`).
    /// backup: the policy has no `backup` object (no repository).
    BackupNotConfigured,
    /// backup: the app's catalog entry gives it no data directory.
    AppHasNoData,
    /// backup: the copy failed before a snapshot was recorded (the
    /// message names the step); the app and its data are as they were.
    BackupFailed,
    /// restore: no snapshot volce-lab made of the app has that id.
    SnapshotNotFound,
    /// restore: it failed and the safety snapshot was put back, the app
    /// started again (the message says what failed).
    RestoreFailed,
    // The HTTPS edge (issue 39: `crate::actions::Expose`, `Unexpose`).
    /// expose, unexpose, `edge enable`: the policy has no `edge` object.
    EdgeNotConfigured,
    /// expose, unexpose: no edge of ours runs (`volce-lab-host edge enable`).
    EdgeNotEnabled,
    /// expose: the app's names are on the edge already.
    AlreadyExposed,
    /// unexpose: the app's names are not on the edge.
    AppNotExposed,
    /// expose: a name of the app has no certificate in the policy, or its
    /// files cannot be used (the message names the name and why).
    EdgeCertificateInvalid,
    /// expose, unexpose: the edge refused the change or a name did not
    /// reach its app through it; the old configuration was put back.
    EdgeFailed,
    /// `edge enable`: an address of the policy's `edge` is held by another
    /// listener (the message names it where /proc tells).
    EdgeAddressTaken,
    /// `edge disable`: apps are still exposed through it.
    EdgeInUse,
    /// An update to a catalog entry that names other
    /// accessories, or other variables for them, than the app was
    /// deployed with: an app's accessories are fixed at its deploy.
    AccessoriesChanged,
    /// rotate_credential of an accessory whose policy entry declares no
    /// `rotate` command: how to change the credential inside it is the
    /// image's own, so only the operator can say.
    RotationNotDeclared,
    /// restore of an accessory's dump whose policy entry declares no
    /// `dump` and `load` now: how a dump goes back in is the image's own,
    /// so only the operator can say.
    DumpNotDeclared,
    // Rollouts over several servers (issue 43: `crate::mcp::rollout`).
    /// A rollout id that is not 32 lowercase hex characters.
    InvalidRolloutId,
    /// service_execute: this workstation recorded no rollout with that id.
    RolloutNotFound,
    /// service_execute: the rollout ran already (or is running); its hosts'
    /// outcomes are in the answer, and nothing was run again.
    RolloutAlreadyStarted,
    /// service_plan with `targets`: an action that does not roll out over a
    /// fleet (only deploy, update, rollback, restart and nginx_config do).
    NotAFleetAction,
    /// service_execute with one `plan_id` and a rollout's signed approval:
    /// it runs only with `rollout`, in the rollout's order.
    RolloutApprovalAlone,
    /// service_plan with `targets`: some servers' plans need an approval and
    /// others' do not, so one signature could not speak for the order.
    ApprovalRulesDiffer,
    /// A rollout halted because a server whose plan ran no longer reported
    /// the app running after the wait between batches (it was not rolled back).
    UnhealthyAfterWait,
    /// A rollout the client cancelled: the batch that ran finished, no later
    /// one started.
    RolloutCancelled,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Only the names of the table: a code this build does not know is an error.
impl<'de> Deserialize<'de> for Code {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Code, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(|_| serde::de::Error::custom(format_args!("unknown refusal code {text:?}")))
    }
}

/// A request refused before anything changed: a stable code and one
/// sentence for the person (or agent) who reads it. The sentence is ours:
/// it never quotes docker output, and quotes agent text only after
/// validation made it harmless (an app name, a port, or a name escaped and
/// capped by `crate::text::quoted`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub code: Code,
    pub message: String,
}

/// The longest message a refusal carries, in characters: every sentence of
/// ours fits with room to spare, so the workstation shows it whole and cuts
/// only a text that is not one of ours.
pub const MESSAGE_MAX_CHARS: usize = 2_000;

impl Refusal {
    pub fn new(code: Code, message: impl Into<String>) -> Refusal {
        let message = message.into();
        debug_assert!(
            message.chars().count() <= MESSAGE_MAX_CHARS,
            "a refusal message longer than {MESSAGE_MAX_CHARS} characters: {message:?}"
        );
        Refusal { code, message }
    }
}

/// Shorthand used throughout the controller.
pub fn refuse<T>(code: Code, message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal::new(code, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_snake_case_and_unique() {
        use std::collections::HashSet;
        use strum::VariantArray as _;
        let strings: HashSet<_> = Code::VARIANTS.iter().map(|c| c.as_str()).collect();
        assert_eq!(strings.len(), Code::VARIANTS.len());
        for code in strings {
            assert!(code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{code}");
            assert!(code.len() <= 64 && code.as_bytes()[0].is_ascii_lowercase(), "{code}");
        }
    }

    /// The shipped strings, byte for byte: a rename of a variant must not
    /// change what the wire carries.
    #[test]
    fn code_strings_never_change() {
        use strum::VariantArray as _;
        const SHIPPED: [&str; 150] = [
            "invalid_request",
            "request_too_large",
            "unknown_action",
            "invalid_parameters",
            "invalid_app_name",
            "image_not_in_catalog",
            "invalid_port",
            "port_out_of_range",
            "port_in_use",
            "port_published",
            "port_reserved",
            "invalid_server_name",
            "app_exists",
            "app_quota_reached",
            "insufficient_capacity",
            "app_not_found",
            "app_not_running",
            "container_set_changed",
            "invalid_image_id",
            "image_not_found",
            "image_in_use",
            "image_not_managed",
            "app_not_stopped",
            "app_exited",
            "image_unchanged",
            "image_declares_volumes",
            "image_has_children",
            "image_has_references",
            "inspection_required",
            "invalid_plan_id",
            "plan_not_found",
            "plan_expired",
            "plan_consumed",
            "plan_invalidated",
            "plan_executing",
            "plan_rejected",
            "plan_corrupt",
            "policy_changed",
            "snapshot_changed",
            "approval_required",
            "invalid_digest",
            "digest_mismatch",
            "approval_not_required",
            "already_approved",
            "not_an_approver",
            "self_approval",
            "invalid_reason",
            "not_awaiting_inspection",
            "invalid_hash",
            "invalid_time",
            "audit_chain_broken",
            "nginx_rejected",
            "health_check_failed",
            "deploy_failed",
            "start_failed",
            "update_failed",
            "engine_refused",
            "not_root",
            "unsafe_path",
            "policy_invalid",
            "state_unavailable",
            "state_corrupt",
            "state_too_new",
            "upgrade_waiting",
            "downgrade_refused",
            "paused",
            "downgrade_pending",
            "pause_required",
            "state_full",
            "clock_skew",
            "engine_unavailable",
            "invalid_caller",
            "caller_mismatch",
            "not_confirmed",
            "busy",
            "request_timeout",
            "gate_refused",
            "audit_unavailable",
            "pending_plans_limit",
            "unexpected_field",
            "missing_field",
            "wrong_type",
            "not_allowed",
            "too_large",
            "unknown_target",
            "request_state_tampered",
            "request_state_foreign",
            "request_state_expired",
            "request_state_replayed",
            "audit_witness_mismatch",
            "server_too_old",
            "client_too_old",
            "needs_inspection",
            "container_port_mismatch",
            "env_file_invalid",
            "nothing_kept",
            "image_kept_for_rollback",
            "invalid_catalog_key",
            "invalid_image_reference",
            "invalid_catalog_entry",
            "image_pull_failed",
            "image_not_in_registry",
            "image_misfits_template",
            "container_port_needed",
            "catalog_key_not_found",
            "catalog_key_in_use",
            "catalog_edit_invalid",
            "data_invalid",
            "data_not_found",
            "data_held",
            "data_plan_open",
            "data_action_failed",
            "targets_share_identity",
            "data_entry_mismatch",
            "signed_approval_malformed",
            "signed_approvals_off",
            "signers_file_unsafe",
            "signature_invalid",
            "signature_namespace",
            "software_key_refused",
            "approval_for_another_host",
            "approval_for_another_plan",
            "statement_mismatch",
            "task_not_declared",
            "task_failed",
            "task_timed_out",
            "backup_not_configured",
            "app_has_no_data",
            "backup_failed",
            "snapshot_not_found",
            "restore_failed",
            "edge_not_configured",
            "edge_not_enabled",
            "already_exposed",
            "app_not_exposed",
            "edge_certificate_invalid",
            "edge_failed",
            "edge_address_taken",
            "edge_in_use",
            "accessories_changed",
            "rotation_not_declared",
            "dump_not_declared",
            "invalid_rollout_id",
            "rollout_not_found",
            "rollout_already_started",
            "not_a_fleet_action",
            "rollout_approval_alone",
            "approval_rules_differ",
            "unhealthy_after_wait",
            "rollout_cancelled",
        ];
        let strings: Vec<&str> = Code::VARIANTS.iter().map(|c| c.as_str()).collect();
        assert_eq!(strings, SHIPPED);
        for code in Code::VARIANTS {
            // serde, FromStr and Display all say the same as as_str.
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, code.as_str());
            assert_eq!(serde_json::from_value::<Code>(json).unwrap(), *code);
            assert_eq!(code.as_str().parse::<Code>().unwrap(), *code);
            assert_eq!(code.to_string(), code.as_str());
        }
        assert!(serde_json::from_value::<Code>(serde_json::json!("Plan_Expired")).is_err());
        assert!(serde_json::from_value::<Code>(serde_json::json!("no_such_code")).is_err());
    }
}
