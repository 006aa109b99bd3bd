//! The two closed sets of a plan's life that every layer shares: where a
//! plan is ([`PlanState`]) and why it ended there ([`PlanOutcome`]). The
//! store keeps them in its columns, the wire carries them in answers, the
//! workstation's approval wait and task compare them. Pure data.
//!
//! The strum derive is each enum's one name table; serde uses the same
//! snake_case names, and the schema's CHECK lists must equal it (a store
//! test reads them back). The names are part of the on-disk format and of
//! the wire: renaming a variant renames nothing in a database, so it needs
//! a migration, and an older workstation reads a new word as
//! `crate::wire::answers::Open::Other`.

use serde::{Deserialize, Serialize};
use strum::{EnumString, IntoStaticStr, VariantArray};

/// Where a plan is in its life.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, IntoStaticStr, EnumString, VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum PlanState {
    Pending,
    Executing,
    Completed,
    NeedsInspection,
    /// Refused at execute because the policy or the server changed: its
    /// approval is void for good.
    Invalidated,
    /// Was `needs_inspection`; an operator attested with `resolve` that they
    /// inspected the server. Terminal.
    Inspected,
    /// The engine failed but provably changed nothing (refused before its
    /// first mutation, or rolled back and verified). Terminal; blocks nothing.
    Failed,
    /// Was `pending`; an operator ended it with `reject` before it ran.
    /// Terminal; it never runs, and any approval it had is void.
    Rejected,
}

impl PlanState {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Why a plan ended where it did (a category, never free text).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, IntoStaticStr, EnumString, VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum PlanOutcome {
    Completed,
    /// The engine reported a failure; the change may be partial.
    EngineFailed,
    /// The process that claimed the plan died before recording an outcome.
    ClaimerDied,
    /// Never written by this code: when the engine acted but the result
    /// could not be recorded, the plan stays `executing` under its claim and
    /// the next helper abandons it as `claimer_died`. Kept because both
    /// migrations' CHECK lists allow `record_failed`, so a database may hold
    /// it; dropping the variant would make such a row unreadable, and
    /// dropping the name from the schema needs a table rebuild.
    RecordFailed,
    PolicyChanged,
    SnapshotChanged,
    /// The change failed, and what it had changed was restored and verified.
    RolledBack,
    /// The engine refused before its first mutation: nothing was touched.
    NotStarted,
}

impl PlanOutcome {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}
