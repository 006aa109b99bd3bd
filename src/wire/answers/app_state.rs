//! An app's state as the engine shows it, held against volce-lab's record
//! of it: the words `crate::host::drift` derives (as root, in the helper)
//! and the inventory and gateway_status answers carry, and the containers
//! behind them. Pure data.

use serde::{Deserialize, Serialize};

use super::Open;
use crate::vocab::ContainerId;
use crate::wire::ContainerRole;

/// An app's state as the engine shows it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr, strum::VariantArray,
)]
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
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr, strum::VariantArray,
)]
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
                "an approved stop plan stops it again, an approved restart plan runs it as recorded running \
                 (or remove_app removes it)"
            }
            DriftReason::RecordRunningButStopped => {
                "read its logs (service_logs); an approved restart plan brings it back (stop or remove_app \
                 settles the record instead)"
            }
        }
    }
}

/// An app's drift as the answers carry it: the reason, and its sentence and
/// fix for the agent. `null` in an answer when the app has not drifted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    pub reason: Open<DriftReason>,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub fix: String,
}

impl Drift {
    pub fn of(reason: DriftReason) -> Drift {
        Drift::naming(reason, &[])
    }

    /// The drift whose message names the containers that differ (each
    /// already a phrase such as `vl-shop-app (exited)`).
    pub fn naming(reason: DriftReason, containers: &[String]) -> Drift {
        let message = match containers {
            [] => reason.sentence().to_owned(),
            named => format!("{}: {}", reason.sentence(), named.join(", ")),
        };
        Drift { reason: reason.into(), message, fix: reason.fix().to_owned() }
    }
}

/// One recorded container and what the engine says of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerView {
    pub role: ContainerRole,
    pub id: ContainerId,
    /// Docker's state word (`running`, `exited`, ...), or `missing`.
    pub state: String,
}
