//! Who asked ([`Caller`]), and the `request` row of a request answered
//! without a controller: one refused before a controller was open (policy
//! unusable, `busy`, a request that did not parse or arrive), by a gate in
//! front of the helper, or the doctor's run. Runs as root inside
//! `volce-lab-host`.
//!
//! Invariants enforced here:
//! - a refusal is answered only after its row is committed; when the row
//!   cannot be written the answer is `audit_unavailable` (fail closed), or
//!   `unsafe_path` when the state directory itself is refused (its owner or
//!   mode: the answer names the fix);
//! - nothing is created to record a refusal: on a server whose state
//!   database does not exist yet (a fresh installation), or cannot be
//!   opened because it is damaged, newer or on a full disk (or its row
//!   would go below the free-space floor), the refusal is
//!   answered unrecorded with its own code, since there is no trail to
//!   extend and nothing changed;
//! - rows hold metadata only: the operation, the caller, the uids, the
//!   stable code, the request id. Never request text.

use super::{HostPaths, paths};
use crate::store::{AuditOperation, AuditOutcome, RequestEnd, RequestMeta, Store};
use crate::vocab::{Code, Refusal};

pub use super::controller::audit_unavailable;

/// Who asks: a validated user name, and for the operator's commands the
/// uids `operator::verify` cross-checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: String,
    pub sudo_uid: Option<u32>,
    pub login_uid: Option<u32>,
}

impl From<&str> for Caller {
    fn from(name: &str) -> Caller {
        Caller { name: name.to_owned(), sudo_uid: None, login_uid: None }
    }
}

impl From<&Caller> for Caller {
    fn from(caller: &Caller) -> Caller {
        caller.clone()
    }
}

impl From<&super::operator::Operator> for Caller {
    fn from(operator: &super::operator::Operator) -> Caller {
        Caller { name: operator.name.clone(), sudo_uid: Some(operator.uid), login_uid: operator.login_uid }
    }
}

impl Caller {
    /// The request metadata for `operation`, timed from now.
    pub fn request(&self, operation: AuditOperation) -> RequestMeta {
        RequestMeta {
            sudo_uid: self.sudo_uid,
            login_uid: self.login_uid,
            ..RequestMeta::new(operation, &self.name)
        }
    }
}

/// Whether [`record_refusal`] wrote its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    Written,
    /// The state database does not exist, or cannot be opened because it is
    /// damaged, newer than this helper or on a full filesystem: nothing to
    /// record into. The refusal is answered as it is, since its code
    /// (`state_corrupt`, `state_too_new`, `state_full`) names the recovery
    /// and nothing was changed.
    NoTrail,
}

/// Appends the row of one refused request (folded with identical ones,
/// `store::fold`), at `now`. The one function a gate in front of the helper
/// (the ssh forced command) calls for its refusals, with
/// `AuditOperation::SshGate`. `Err(audit_unavailable)` when the row could
/// not be written, `Err(unsafe_path)` (naming what is wrong) when the
/// state directory's owner or mode is unsafe.
pub fn record_refusal(
    paths: &HostPaths,
    now: i64,
    meta: RequestMeta,
    refusal: &Refusal,
) -> Result<Recorded, Refusal> {
    let end = RequestEnd {
        at: now,
        outcome: AuditOutcome::Refused,
        code: Some(refusal.code),
        plan_id: None,
        action: None,
    };
    record_request(paths, meta, end)
}

/// Appends the `request` row of one request that ran without a controller
/// (the doctor, a refusal before the store was open).
pub fn record_request(
    paths: &HostPaths,
    meta: RequestMeta,
    end: RequestEnd<'_>,
) -> Result<Recorded, Refusal> {
    let Some(mut store) = open_for_rows(paths)? else { return Ok(Recorded::NoTrail) };
    store.begin_request(meta);
    match store.end_request(end) {
        Ok(()) => Ok(Recorded::Written),
        // Below the free-space floor (`Store::write`): as on a full
        // filesystem, nothing to record into, and nothing was changed.
        Err(error) if crate::store::space::is_below_floor(&error) => Ok(Recorded::NoTrail),
        Err(_) => Err(audit_unavailable()),
    }
}

/// The store a row is written to without a controller, `None` when there
/// is no trail to write to: the database does not exist, or cannot be
/// opened because it is damaged, newer, on a full disk, waiting for an
/// upgrade or held for a downgrade (also the pause's and the state
/// commands' rows, `pause.rs`, `crate::install::state`).
pub fn open_for_rows(paths: &HostPaths) -> Result<Option<Store>, Refusal> {
    match std::fs::symlink_metadata(paths.database()) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        _ => {}
    }
    // An unsafe state directory (its owner or mode) is answered as such: its
    // refusal names the fix, where `audit_unavailable` would send the
    // operator looking for a full disk. Nothing is written into it.
    paths::prepare_state(paths).map_err(|refusal| match refusal.code {
        Code::UnsafePath => refusal,
        _ => audit_unavailable(),
    })?;
    let alive = |claim: &crate::store::Claim| super::Liveness::alive(&super::ProcLiveness, claim);
    let mut store = match Store::open_settled(&paths.database(), &alive) {
        Ok(store) => store,
        Err(error) => {
            let why = crate::store::space::explain(&error, &paths.state_dir);
            return match why.code {
                Code::StateCorrupt
                | Code::StateTooNew
                | Code::StateFull
                | Code::UpgradeWaiting
                | Code::DowngradePending => Ok(None),
                _ => Err(audit_unavailable()),
            };
        }
    };
    if *paths == HostPaths::fixed() {
        store.send_to_syslog(std::path::Path::new(crate::store::DEV_LOG));
    }
    Ok(Some(store))
}

/// `refusal`, once recorded; `audit_unavailable` if it could not be.
pub(super) fn refused(paths: &HostPaths, now: i64, meta: RequestMeta, refusal: Refusal) -> Refusal {
    match record_refusal(paths, now, meta, &refusal) {
        Ok(_) => refusal,
        Err(unrecorded) => {
            // Keep the reason on the operator's side of the helper.
            debug_assert!(matches!(unrecorded.code, Code::AuditUnavailable | Code::UnsafePath));
            unrecorded
        }
    }
}
