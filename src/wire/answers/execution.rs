//! The `execute` answer of a plan that completed: which plan, what it did,
//! the containers it acted on, how long the engine took. Built as root by
//! the helper (`Controller::execute`); the workstation reads only its
//! `plan_id` ([`super::read`]). An execute that failed answers a
//! refusal or `needs_inspection` instead (`crate::wire::Reply`), never this.

use serde::{Deserialize, Serialize};

use crate::vocab::Action;
use crate::vocab::{DataAfter, PlanId};

/// What an execute that completed answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutedPlan {
    pub plan_id: PlanId,
    pub action: Action,
    pub outcome: ExecutionOutcome,
    /// The app the plan was about, null for an image.
    pub app: Option<String>,
    /// The containers it acted on: what the engine made or touched.
    pub containers: Vec<String>,
    /// How long the engine took.
    pub duration_ms: u64,
    /// remove_app of an app with data: where its data image is kept, or
    /// that it was deleted. Absent otherwise (and from a 0.1.0 helper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataAfter>,
    /// run_task: the task's name, exit code (0) and last lines (safe,
    /// bounded, untrusted). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<crate::logs::TaskRun>,
    /// backup: the snapshot it recorded, its size and what it added, how
    /// long the app's writes waited, and whether the retention ran.
    /// Absent otherwise. Boxed: the answer travels inside every reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<Box<crate::vocab::BackupRun>>,
    /// restore: the snapshot it put in place, the safety snapshot of the
    /// data it replaced, and whether the app was started again. Absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<Box<crate::vocab::RestoreRun>>,
}

/// The fixed `outcome` of a completed execute (the plan's recorded outcome,
/// `crate::vocab::PlanOutcome::Completed`, has the same name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionOutcome {
    Completed,
}
