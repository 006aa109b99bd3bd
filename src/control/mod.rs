//! The controller's decision logic: operator policy, plan types, canonical
//! JSON and its sha256 digest, parameter validation, and terminal escaping
//! for the operator's view. Pure: no files, no processes, no clock of its
//! own. Runs inside the root helper, but nothing here needs privilege.
//!
//! The I/O around it lives in `crate::store` (SQLite) and `crate::host`
//! (the rpc/show/approve pipelines).

pub mod app_record;
pub mod canonical;
pub mod clock;
pub mod plan;
pub mod policy;
pub mod scope;
pub mod validate;

/// Seconds since the Unix epoch. Injected so expiry can be tested; the
/// real one is `crate::host::clock::SystemClock`.
pub trait Clock {
    fn now(&self) -> i64;
    /// The boot clock (`crate::host::clock::boot_now`); `None`, the
    /// default, leaves expiry to the wall clock alone.
    fn boot(&self) -> Option<clock::BootInstant> {
        None
    }
}
