//! Drift: each managed app's state as the engine shows it, held against
//! volce-lab's record of it. Pure; used as root by the host helper
//! (inventory, gateway_status) and by `volce-lab-host doctor`.
//!
//! The record says what volce-lab last did; the engine says what is. They
//! disagree when an operator started or removed containers by hand, when a
//! container crashed, or when a plan ended unverified. Only the recorded
//! container ids count as the app's: a container that merely stands on the
//! app's names (or carries its label) is reported as a replacement, never
//! adopted.

use serde::Serialize;

use crate::control::app_record::{AppRecord, AppState};
use crate::vocab::{Container, ContainerId, Snapshot};

/// An app's state as the engine shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr, strum::VariantArray)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum EngineState {
    /// Recorded running, and every recorded container runs.
    Running,
    /// Recorded stopped, and none of its recorded containers runs.
    Stopped,
    /// The record and the engine disagree: see [`DriftReason`].
    Drifted,
}

/// Why the record and the engine disagree (checked in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr, strum::VariantArray)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum DriftReason {
    /// A plan on the app ended unverified; nobody has confirmed what runs.
    NeedsInspection,
    /// A recorded container no longer exists.
    ContainersMissing,
    /// A container that is not one we recorded stands on the app's names or
    /// carries its label.
    ContainersReplaced,
    /// Recorded stopped, but a recorded container runs (started by hand).
    RecordStoppedButRunning,
    /// Recorded running, but a recorded container does not run (crashed,
    /// restarting, or stopped by hand).
    RecordRunningButStopped,
}

impl EngineState {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl DriftReason {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// One sentence for the agent and the operator: what disagrees.
    pub fn sentence(self) -> &'static str {
        match self {
            DriftReason::NeedsInspection => {
                "a plan on this app ended unverified; what runs has not been confirmed"
            }
            DriftReason::ContainersMissing => "a container volce-lab recorded for this app no longer exists",
            DriftReason::ContainersReplaced => {
                "a container volce-lab did not record stands on this app's names or label"
            }
            DriftReason::RecordStoppedButRunning => {
                "the app was stopped by a plan, but one of its containers runs again"
            }
            DriftReason::RecordRunningButStopped => "the app should run, but one of its containers does not",
        }
    }

    /// What fixes it: a reviewed plan, or an operator's look.
    pub fn fix(self) -> &'static str {
        match self {
            DriftReason::NeedsInspection => {
                "resolve the plan after looking at the server (volce-lab-host list), then an approved \
                 remove_app plan can clean the app up"
            }
            DriftReason::ContainersMissing | DriftReason::ContainersReplaced => {
                "an approved remove_app plan removes what is left of the app and frees its name and port"
            }
            DriftReason::RecordStoppedButRunning => {
                "an approved stop plan stops it again (or remove_app removes it)"
            }
            DriftReason::RecordRunningButStopped => {
                "read its logs (service_logs); an approved stop or remove_app plan settles the record"
            }
        }
    }
}

/// Which recorded container of an app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    App,
    Gateway,
}

/// One recorded container and what the engine says of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerView {
    pub role: Role,
    pub id: ContainerId,
    /// Docker's state word (`running`, `exited`, ...), or `missing`.
    pub state: String,
}

/// An app's derived state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    pub state: EngineState,
    pub drift: Option<DriftReason>,
    pub containers: Vec<ContainerView>,
}

/// The recorded containers of `record` with their roles, in role order.
fn recorded(record: &AppRecord) -> Vec<(Role, &ContainerId)> {
    let mut out = Vec::new();
    if let Some(id) = &record.app_container {
        out.push((Role::App, id));
    }
    if let Some(id) = &record.gateway_container {
        out.push((Role::Gateway, id));
    }
    out
}

/// Whether `container` is one of ours for this record: its id was recorded.
fn is_recorded(record: &AppRecord, container: &Container) -> bool {
    record.containers.contains(&container.id)
        || record.app_container.as_ref() == Some(&container.id)
        || record.gateway_container.as_ref() == Some(&container.id)
}

/// The containers of the snapshot that belong to a recorded app, by id or
/// because they stand on its names: everything else is foreign.
pub fn belongs_to(record: &AppRecord, container: &Container) -> bool {
    is_recorded(record, container) || record.app.names().claims_container(container)
}

/// Holds the record against the engine.
pub fn derive(record: &AppRecord, snapshot: &Snapshot) -> Derived {
    let containers: Vec<ContainerView> = recorded(record)
        .into_iter()
        .map(|(role, id)| {
            let state = snapshot
                .containers
                .iter()
                .find(|c| c.id == *id)
                .map_or_else(|| "missing".to_owned(), |c| c.state.clone());
            ContainerView { role, id: id.clone(), state }
        })
        .collect();
    let names = record.app.names();
    let replaced = snapshot.containers.iter().any(|c| !is_recorded(record, c) && names.claims_container(c));
    // A record without both ids (a deploy that failed before the engine
    // reported them) has containers missing by definition.
    let missing = containers.len() < 2 || containers.iter().any(|c| c.state == "missing");
    let running = containers.iter().filter(|c| c.state == "running").count();
    let drift = match record.state {
        AppState::NeedsInspection => Some(DriftReason::NeedsInspection),
        _ if missing => Some(DriftReason::ContainersMissing),
        _ if replaced => Some(DriftReason::ContainersReplaced),
        AppState::Stopped if running > 0 => Some(DriftReason::RecordStoppedButRunning),
        AppState::Running if running < containers.len() => Some(DriftReason::RecordRunningButStopped),
        AppState::Stopped | AppState::Running => None,
    };
    let state = match (drift, record.state) {
        (Some(_), _) => EngineState::Drifted,
        (None, AppState::Running) => EngineState::Running,
        (None, _) => EngineState::Stopped,
    };
    Derived { state, drift, containers }
}

#[cfg(test)]
mod tests;
