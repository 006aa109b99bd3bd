//! The controller's durable state in SQLite: plans, apps and the audit
//! trail. Runs as root inside the host helper, on `<state dir>/state.db`.
//!
//! ```text
//! schema.rs       the append-only migrations (`PRAGMA user_version`)
//! chain.rs        the audit trail's hash chain: append, backfill, verify
//! rows.rs         row types and the closed name sets stored in columns
//! database.rs     Store: open, pragmas read back, migrate, transactions
//! transitions.rs  Tx: conditional transitions, app records, audit rows
//! claims.rs       Tx: the image claims of removed apps
//! health.rs       the read-only health report the doctor prints
//! wal.rs          a write-ahead log cut short, seen before SQLite opens it
//! plan_boot.rs    the boot clock at a plan's prepare (expiry across clock steps)
//! space.rs        the free-space floor a prepare needs (`state_full`)
//! ```
//!
//! Each file states the invariants it enforces. In short: pragmas are read
//! back; a database newer than the code is refused; CHECK constraints hold
//! every state to its list; every write is `BEGIN IMMEDIATE`; every
//! transition changes exactly one row and writes its audit row in the same
//! transaction; audit rows hold categories and numbers only and are
//! chained by hash, so an edited, deleted, inserted or reordered row shows;
//! per-request queries are served by indexes.

mod chain;
mod claims;
mod database;
mod health;
mod plan_boot;
mod rows;
mod schema;
pub mod space;
mod transitions;
pub mod wal;

pub use chain::{
    Break, ChainedEntry, Content as ChainContent, GENESIS, Head, Verification, link as chain_link,
};
pub use database::{BUSY_TIMEOUT, Store, StoreError};
pub use health::{StoreHealth, read_apps, read_health};
pub use rows::{
    Approval, AuditEntry, AuditOutcome, AuditRow, Claim, Event, PlanOutcome, PlanState, Rejection,
    Resolution, StoredPlan,
};
pub use transitions::{
    SQL_AWAITING, SQL_EXECUTING, SQL_EXPIRED_PENDING, SQL_UNSETTLED, SQL_UNSETTLED_ALL, Tx,
};

#[cfg(test)]
mod tests;
