//! The `logs` answer (`service_logs`): the safe tail of one managed
//! container's log. Built as root by the helper (`Controller::logs`), after
//! `crate::logs::render` made the text safe; the workstation reads no field
//! of it and hands it on with a warning that the lines are untrusted.

use serde::{Deserialize, Serialize};

use crate::vocab::{AppName, ContainerId};
use crate::wire::LogContainer;

/// What `logs` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLines {
    pub app: AppName,
    /// `app`, `gateway`, or the accessory's name.
    pub container: LogContainer,
    /// The recorded container the lines are from.
    pub container_id: ContainerId,
    pub tail: u64,
    /// Null when the request gave none.
    pub since_minutes: Option<u64>,
    /// Always `crate::logs::UNTRUSTED`: the lines are application output.
    pub untrusted: String,
    /// Oldest first, escapes removed, secret-looking values redacted.
    pub lines: Vec<String>,
    /// Older lines were left out to keep within the text limit.
    pub truncated: bool,
    /// How many values were redacted.
    pub redactions: u32,
}
