//! The controller's decision logic: operator policy, plan types, canonical
//! JSON and its sha256 digest, parameter validation, and terminal escaping
//! for the operator's view. Pure: no files, no processes, no clock of its
//! own. Runs inside the root helper, but nothing here needs privilege.
//!
//! The I/O around it lives in `crate::store` (SQLite) and `crate::host`
//! (the rpc/show/approve pipelines).

pub mod canonical;
pub mod clock;
pub mod plan;
pub mod policy;
pub mod scope;
pub mod validate;

/// Seconds since the Unix epoch. Injected so expiry can be tested.
pub trait Clock {
    fn now(&self) -> i64;
    /// The boot clock (`clock::boot_now`); `None`, the default, leaves
    /// expiry to the wall clock alone.
    fn boot(&self) -> Option<clock::BootInstant> {
        None
    }
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
    fn boot(&self) -> Option<clock::BootInstant> {
        clock::boot_now()
    }
}
