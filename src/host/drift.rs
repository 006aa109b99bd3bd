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

use crate::control::app_record::{AppRecord, AppState};
use crate::vocab::{Container, ContainerId, Snapshot};
use crate::wire::ContainerRole;
// The words live in the contract, which both ends read; doctor names them here.
use crate::wire::answers::app_state::{ContainerView, Drift, DriftReason, EngineState};

/// An app's derived state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    pub state: EngineState,
    pub drift: Option<DriftReason>,
    pub containers: Vec<ContainerView>,
    /// The containers that differ, for the drift's message: name (or role
    /// and short id) and what the engine shows. Empty without drift.
    pub differs: Vec<String>,
}

impl Derived {
    /// The drift as the answers carry it, its message naming [`Derived::differs`].
    pub fn drift_view(&self) -> Option<Drift> {
        self.drift.map(|reason| Drift::naming(reason, &self.differs))
    }
}

/// A container's name as a message may carry it: docker's own alphabet
/// only, capped (names come from the engine, and reach a model and a
/// terminal).
fn shown_name(name: &str) -> String {
    name.trim_start_matches('/')
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        .take(80)
        .collect()
}

/// What the message says of one recorded container: its name and state,
/// or its role and short id when the engine has no such container.
fn recorded_phrase(role: &str, id: &ContainerId, snapshot: &Snapshot) -> String {
    match snapshot.containers.iter().find(|c| c.id == *id) {
        Some(c) => format!("{} ({})", shown_name(&c.name), shown_name(&c.state)),
        None => format!("the {role} container {} (missing)", &id.as_str()[..12]),
    }
}

/// The recorded containers of an app's accessories (issue 40): the ids
/// recorded beside its app and gateway when it has accessories. They count
/// for its drift as the app's own do; the views list app and gateway only,
/// the roles the contract names.
fn accessory_states<'r>(record: &'r AppRecord, snapshot: &Snapshot) -> Vec<(&'r ContainerId, String)> {
    if record.accessories.is_empty() {
        return Vec::new();
    }
    let own = [record.app_container.as_ref(), record.gateway_container.as_ref()];
    record
        .containers
        .iter()
        .filter(|id| !own.contains(&Some(*id)))
        .map(|id| (id, state_of(id, snapshot)))
        .collect()
}

fn state_of(id: &ContainerId, snapshot: &Snapshot) -> String {
    snapshot.containers.iter().find(|c| c.id == *id).map_or_else(|| "missing".to_owned(), |c| c.state.clone())
}

/// The recorded containers of `record` with their roles, in role order.
fn recorded(record: &AppRecord) -> Vec<(ContainerRole, &ContainerId)> {
    let mut out = Vec::new();
    if let Some(id) = &record.app_container {
        out.push((ContainerRole::App, id));
    }
    if let Some(id) = &record.gateway_container {
        out.push((ContainerRole::Gateway, id));
    }
    out
}

/// Whether `container` is one of ours for this record: its id was recorded.
pub fn is_recorded(record: &AppRecord, container: &Container) -> bool {
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
        .map(|(role, id)| ContainerView { role, id: id.clone(), state: state_of(id, snapshot) })
        .collect();
    let accessories = accessory_states(record, snapshot);
    let names = record.app.names();
    let replaced = snapshot.containers.iter().any(|c| !is_recorded(record, c) && names.claims_container(c));
    // A record without both ids (a deploy that failed before the engine
    // reported them) has containers missing by definition.
    let missing = containers.len() < 2
        || containers.iter().any(|c| c.state == "missing")
        || accessories.iter().any(|(_, state)| state == "missing");
    let running = containers.iter().filter(|c| c.state == "running").count()
        + accessories.iter().filter(|(_, state)| state == "running").count();
    let all = containers.len() + accessories.len();
    let drift = match record.state {
        AppState::NeedsInspection => Some(DriftReason::NeedsInspection),
        _ if missing => Some(DriftReason::ContainersMissing),
        _ if replaced => Some(DriftReason::ContainersReplaced),
        AppState::Stopped if running > 0 => Some(DriftReason::RecordStoppedButRunning),
        AppState::Running if running < all => Some(DriftReason::RecordRunningButStopped),
        AppState::Stopped | AppState::Running => None,
    };
    let state = match (drift, record.state) {
        (Some(_), _) => EngineState::Drifted,
        (None, AppState::Running) => EngineState::Running,
        (None, _) => EngineState::Stopped,
    };
    let mine = |pick: &dyn Fn(&str) -> bool| -> Vec<String> {
        let own = containers
            .iter()
            .filter(|c| pick(&c.state))
            .map(|c| recorded_phrase(c.role.as_str(), &c.id, snapshot));
        let theirs = accessories
            .iter()
            .filter(|(_, state)| pick(state))
            .map(|(id, _)| recorded_phrase("accessory", id, snapshot));
        own.chain(theirs).collect()
    };
    let differs = match drift {
        None | Some(DriftReason::NeedsInspection) => Vec::new(),
        Some(DriftReason::ContainersMissing) => {
            let mut gone = mine(&|state| state == "missing");
            let roles: Vec<ContainerRole> = containers.iter().map(|c| c.role).collect();
            for role in [ContainerRole::App, ContainerRole::Gateway] {
                if !roles.contains(&role) {
                    gone.push(format!("no {} container recorded", role.as_str()));
                }
            }
            gone
        }
        Some(DriftReason::ContainersReplaced) => snapshot
            .containers
            .iter()
            .filter(|c| !is_recorded(record, c) && names.claims_container(c))
            .map(|c| format!("{} ({}, not recorded)", shown_name(&c.name), &c.id.as_str()[..12]))
            .collect(),
        Some(DriftReason::RecordStoppedButRunning) => mine(&|state| state == "running"),
        Some(DriftReason::RecordRunningButStopped) => mine(&|state| state != "running"),
    };
    Derived { state, drift, containers, differs }
}

#[cfg(test)]
mod tests;
