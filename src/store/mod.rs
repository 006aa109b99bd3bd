//! The controller's durable state in SQLite: plans, apps and the audit
//! trail. Runs as root inside the host helper, on `<state dir>/state.db`.
//!
//! ```text
//! schema.rs       the append-only migrations (`PRAGMA user_version`)
//! sql.rs          every statement on the tables, by name, and how far each reads
//! chain.rs        the audit trail's hash chain: a row's content, append, backfill
//! verify.rs       walking the chain: the first break, the head
//! rows.rs         row types and the closed name sets stored in columns
//! database.rs     Store: open, pragmas read back, migrate, transactions
//! fold.rs         request rows, identical refusals folded into one counted row
//! syslog.rs       a copy of each committed row for the host's syslog
//! transitions.rs  Tx: inserting a plan, its conditional transitions, their rows
//! plans.rs        Tx: reading plans (the gate, claims, one plan, the list)
//! apps.rs         Tx: the app records
//! trail.rs        Tx: the trail as the operator reads it (head, verify, export)
//! claims.rs       Tx: the image claims of removed apps
//! health.rs       the read-only health report the doctor prints
//! hold.rs         the restore hold: an older database left unmigrated for a downgrade
//! backup.rs       `state backup`: a consistent copy by SQLite's online backup
//! wal.rs          a write-ahead log cut short, seen before SQLite opens it
//! plan_boot.rs    the boot clock at a plan's prepare (expiry across clock steps)
//! space.rs        the free-space floor a prepare needs (`state_full`)
//! retention.rs    bounded state: plan pruning, the pending cap, audit prune
//! ```
//!
//! Each file states the invariants it enforces. In short: pragmas are read
//! back; a database newer than the code is refused; CHECK constraints hold
//! every state to its list; every write is `BEGIN IMMEDIATE`; every
//! transition changes exactly one row and writes its audit row in the same
//! transaction; audit rows hold categories and numbers only and are
//! chained by hash, so an edited, deleted, inserted or reordered row shows;
//! per-request queries are served by indexes.

mod apps;
mod backup;
mod chain;
mod claims;
mod database;
mod error;
mod fold;
mod health;
pub mod hold;
mod plan_boot;
mod plans;
mod retention;
mod rows;
mod schema;
pub mod space;
mod sql;
mod syslog;
mod trail;
mod transitions;
mod verify;
pub mod wal;

pub use backup::{copy_database, with_log_released};
pub use chain::{ChainedEntry, Content as ChainContent, GENESIS, link as chain_link};
pub use database::{BUSY_TIMEOUT, Store};
pub use error::StoreError;
pub use fold::WINDOW_SECS as FOLD_WINDOW_SECS;
pub use health::{
    StoreHealth, read_apps, read_awaiting, read_claims, read_head, read_health, schema_version_of,
};
pub use retention::{AUDIT_PRUNE_BATCH, AUDIT_RETENTION_DAYS, MAX_PENDING_PER_REQUESTER, PRUNE_BATCH};
pub use rows::{
    Approval, AuditEntry, AuditOperation, AuditOutcome, AuditRow, Claim, Event, MAX_REASON_CHARS, Rejection,
    RequestEnd, RequestMeta, Resolution, SignedBy, StoredPlan,
};
pub use syslog::DEV_LOG;
pub use transitions::Tx;
pub use verify::{Break, Head, Verification};

#[cfg(test)]
mod tests;
