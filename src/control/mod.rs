//! The controller's decision logic: operator policy, plan types, canonical
//! JSON and its sha256 digest, parameter validation, and terminal escaping
//! for the operator's view. Pure: no files, no processes, no clock of its
//! own. Runs inside the root helper, but nothing here needs privilege.
//!
//! The I/O around it lives in `crate::store` (SQLite) and `crate::host`
//! (the rpc/show/approve pipelines).

pub mod canonical;
pub mod plan;
pub mod policy;
pub mod validate;

use std::fmt;

use serde::Serialize;

/// Every stable refusal code the host helper can answer with. The wire
/// carries [`Code::as_str`]; the MCP side passes it to the agent as is, so a
/// variant's string never changes once shipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    // Plan life cycle.
    InspectionRequired,
    InvalidPlanId,
    PlanNotFound,
    PlanExpired,
    PlanConsumed,
    PlanInvalidated,
    PlanExecuting,
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
    // Resolve (terminal only).
    NotAwaitingInspection,
    // Execution that failed but changed nothing.
    NginxRejected,
    // The host itself.
    NotRoot,
    UnsafePath,
    PolicyInvalid,
    StateUnavailable,
    EngineUnavailable,
    InvalidCaller,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidRequest => "invalid_request",
            Code::RequestTooLarge => "request_too_large",
            Code::UnknownAction => "unknown_action",
            Code::InvalidParameters => "invalid_parameters",
            Code::InvalidAppName => "invalid_app_name",
            Code::ImageNotInCatalog => "image_not_in_catalog",
            Code::InvalidPort => "invalid_port",
            Code::PortOutOfRange => "port_out_of_range",
            Code::PortInUse => "port_in_use",
            Code::PortPublished => "port_published",
            Code::PortReserved => "port_reserved",
            Code::InvalidServerName => "invalid_server_name",
            Code::AppExists => "app_exists",
            Code::AppQuotaReached => "app_quota_reached",
            Code::InsufficientCapacity => "insufficient_capacity",
            Code::AppNotFound => "app_not_found",
            Code::AppNotRunning => "app_not_running",
            Code::ContainerSetChanged => "container_set_changed",
            Code::InvalidImageId => "invalid_image_id",
            Code::ImageNotFound => "image_not_found",
            Code::ImageInUse => "image_in_use",
            Code::ImageNotManaged => "image_not_managed",
            Code::InspectionRequired => "inspection_required",
            Code::InvalidPlanId => "invalid_plan_id",
            Code::PlanNotFound => "plan_not_found",
            Code::PlanExpired => "plan_expired",
            Code::PlanConsumed => "plan_consumed",
            Code::PlanInvalidated => "plan_invalidated",
            Code::PlanExecuting => "plan_executing",
            Code::PlanCorrupt => "plan_corrupt",
            Code::PolicyChanged => "policy_changed",
            Code::SnapshotChanged => "snapshot_changed",
            Code::ApprovalRequired => "approval_required",
            Code::InvalidDigest => "invalid_digest",
            Code::DigestMismatch => "digest_mismatch",
            Code::ApprovalNotRequired => "approval_not_required",
            Code::AlreadyApproved => "already_approved",
            Code::NotAnApprover => "not_an_approver",
            Code::SelfApproval => "self_approval",
            Code::NotAwaitingInspection => "not_awaiting_inspection",
            Code::NginxRejected => "nginx_rejected",
            Code::NotRoot => "not_root",
            Code::UnsafePath => "unsafe_path",
            Code::PolicyInvalid => "policy_invalid",
            Code::StateUnavailable => "state_unavailable",
            Code::EngineUnavailable => "engine_unavailable",
            Code::InvalidCaller => "invalid_caller",
        }
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

/// A request refused before anything changed: a stable code and one
/// sentence for the person (or agent) who reads it. The sentence is ours:
/// it never quotes docker output, and quotes agent text only after
/// validation made it harmless (an app name, a port).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub code: Code,
    pub message: String,
}

impl Refusal {
    pub fn new(code: Code, message: impl Into<String>) -> Refusal {
        Refusal { code, message: message.into() }
    }
}

/// Shorthand used throughout the controller.
pub fn refuse<T>(code: Code, message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal::new(code, message))
}

/// Seconds since the Unix epoch. Injected so expiry can be tested.
pub trait Clock {
    fn now(&self) -> i64;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
    }
}

/// Lowercase ASCII letters and digits only, the first a letter, then `-`
/// too, at most `max` bytes: the shape of app names and catalog keys.
pub(crate) fn is_name(value: &str, max: usize) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= max
        && bytes[0].is_ascii_lowercase()
        && bytes.iter().all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// An app name: `^[a-z][a-z0-9-]{0,30}$`.
pub fn is_app_name(value: &str) -> bool {
    is_name(value, 31)
}

/// A unix user name as sudo hands it over (`SUDO_USER`) and as the
/// operator writes it in `approvers`: `^[a-z_][a-z0-9_-]{0,31}$`.
pub fn is_user_name(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 32
        && (bytes[0].is_ascii_lowercase() || bytes[0] == b'_')
        && bytes.iter().all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_names_follow_the_pattern() {
        assert!(is_app_name("a"));
        assert!(is_app_name("web-1"));
        assert!(is_app_name(&format!("a{}", "b".repeat(30))));
        assert!(!is_app_name(&format!("a{}", "b".repeat(31))));
        for bad in ["", "1web", "-web", "Web", "we_b", "../x", "web.x", "wéb", "web\n"] {
            assert!(!is_app_name(bad), "{bad:?} must be refused");
        }
    }

    #[test]
    fn user_names_follow_the_pattern() {
        assert!(is_user_name("alice"));
        assert!(is_user_name("vl-operator"));
        assert!(is_user_name("_svc"));
        for bad in ["", "Alice", "1x", "a b", "a;b", &"a".repeat(33)] {
            assert!(!is_user_name(bad), "{bad:?} must be refused");
        }
    }

    #[test]
    fn codes_are_snake_case_and_unique() {
        use std::collections::HashSet;
        let all = [
            Code::InvalidRequest,
            Code::PlanExpired,
            Code::PlanConsumed,
            Code::PlanNotFound,
            Code::DigestMismatch,
            Code::InspectionRequired,
        ];
        let strings: HashSet<_> = all.iter().map(|c| c.as_str()).collect();
        assert_eq!(strings.len(), all.len());
        assert!(strings.iter().all(|s| s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')));
    }
}
