//! The controller's decision logic: the operator's policy and the terms it
//! gives a plan (policy.rs), canonical JSON (canonical.rs, which plans are
//! sealed over in `crate::actions::plan`), the checks every action shares
//! when it validates an agent's parameters (validate.rs, validate/), the
//! scope of the engine snapshot a plan is bound to and its digest
//! (scope.rs), the record of a deployed app (app_record.rs), and plan
//! expiry against the wall and boot clocks (clock.rs). Each action's own
//! derivation lives in `crate::actions`. Runs inside the root helper, but nothing here needs
//! privilege.
//!
//! Pure: it opens no file, runs no process and reads no clock. Facts about
//! the host come in through `validate::HostFacts`, the time through
//! [`Clock`]; their real implementations are in `crate::host`. It imports
//! only the shared vocabulary (`crate::vocab`), the gateway renderer
//! (`crate::nginx`) and `crate::text` (tests/hermetic/layers.rs holds it
//! to layers below it). The I/O around it lives in `crate::store` (SQLite)
//! and `crate::host` (the rpc/show/approve pipelines).

pub mod app_record;
pub mod canonical;
pub mod clock;
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
