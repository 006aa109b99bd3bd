//! What one run of an operator-declared task left (issue 40): its name, its
//! exit code and the last lines it printed, already safe ([`AppLog`]:
//! escapes removed, the container's configured values and secret-shaped
//! text redacted, bounded, marked untrusted). Built by the engine just
//! before it removes the task's container; carried by the execute answer
//! (`crate::wire::answers::execution`) and, for a task that failed, by the
//! plan's failure like a rolled-back plan's app log.

use serde::{Deserialize, Serialize};

use super::AppLog;
use crate::vocab::TaskName;

/// One task run, as the agent reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRun {
    pub task: TaskName,
    /// The container's exit code as the engine recorded it (0: success).
    pub exit_code: i64,
    pub output: AppLog,
}
