//! The closed set of actions a plan can take, with what each needs: its
//! parameters, which may be left out, and whether an operator must always
//! approve it. Pure.

use serde::{Deserialize, Serialize};

use crate::vocab::{Code, Refusal};

/// The optional parameter of deploy and nginx_config that lists the names
/// the gateway serves besides `server_name` (protocol 2; see
/// `crate::wire::versions`).
pub const ALSO_SERVER_NAMES: &str = "also_server_names";

/// The closed set of changes a plan can make. Its one string table is the
/// strum derive; serde's names are the same (tested), because the wire,
/// the store and the sealed plans all carry them.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Action {
    Deploy,
    NginxConfig,
    Stop,
    RemoveImage,
    RemoveApp,
    Start,
    Update,
    /// Stops and starts a managed app's own containers: recovers one that
    /// crashed or was stopped or started by hand, or restarts a healthy one.
    Restart,
    /// Moves a running app back to the newest version an update kept, with
    /// update's switch, health check and rollback.
    Rollback,
    /// Runs one task the app's catalog entry declares (fixed argv, the
    /// operator's) once, in a new container of the app's current image.
    RunTask,
    /// Copies the app's data into the operator's backup repository while
    /// the app serves (issue 41).
    Backup,
    /// Replaces the app's data by one of its snapshots, the app stopped
    /// around it (issue 41).
    Restore,
    /// Makes an app's names reachable over HTTPS through the operator's
    /// edge, with the certificates the policy names (issue 39).
    Expose,
    /// Takes an app's names off the edge again (issue 39).
    Unexpose,
    /// Moves one of a running app's accessories to the image the policy
    /// pins for it now, on the same data and credential (issue 40).
    UpdateAccessory,
    /// Gives one accessory of a running app a new credential, with the
    /// operator's `rotate` command, and the app a new container that has
    /// it (issue 40).
    RotateCredential,
}

impl Action {
    pub const ALL: &'static [Action] = <Action as strum::VariantArray>::VARIANTS;

    pub fn parse(value: &str) -> Result<Action, Refusal> {
        value.parse().map_err(|_| {
            // Listed from the one name table, so a new action is named here too.
            let names: Vec<&str> = Action::ALL.iter().map(|a| a.as_str()).collect();
            Refusal::new(Code::UnknownAction, format!("The action must be one of {}.", names.join(", ")))
        })
    }
    pub fn as_str(self) -> &'static str {
        self.into()
    }
    /// The parameters each action takes: exactly these, all required. The
    /// MCP server checks the names; the helper validates names and values.
    /// Those of [`Action::parameters`] a plan may leave out: a deploy's
    /// `container_port` when the catalog entry sets it (the controller
    /// refuses the omission otherwise), and [`ALSO_SERVER_NAMES`] (none).
    pub fn optional_parameters(self) -> &'static [&'static str] {
        match self {
            Action::Deploy => &["container_port", ALSO_SERVER_NAMES],
            Action::NginxConfig => &[ALSO_SERVER_NAMES],
            Action::RemoveApp => &["purge_data"],
            _ => &[],
        }
    }

    pub fn parameters(self) -> &'static [&'static str] {
        match self {
            Action::Deploy => {
                &["app", "image", "host_port", "container_port", "server_name", ALSO_SERVER_NAMES]
            }
            Action::NginxConfig => &["app", "server_name", ALSO_SERVER_NAMES],
            Action::Stop => &["app"],
            Action::RemoveImage => &["image_id"],
            Action::RemoveApp => &["app", "purge_data"],
            Action::Start => &["app"],
            Action::Update => &["app", "image"],
            Action::Restart => &["app"],
            Action::Rollback => &["app"],
            Action::RunTask => &["app", "task"],
            Action::Backup => &["app"],
            Action::Restore => &["app", "snapshot"],
            Action::Expose => &["app"],
            Action::Unexpose => &["app"],
            Action::UpdateAccessory | Action::RotateCredential => &["app", "accessory"],
        }
    }
    /// The fixed minimum: destructive actions always need an operator's
    /// approval on the server, whatever the policy says. The policy may add
    /// others ([`crate::control::policy::Policy::requires_approval`]).
    pub fn always_requires_approval(self) -> bool {
        matches!(
            self,
            Action::Stop
                | Action::RemoveImage
                | Action::RemoveApp
                | Action::Start
                | Action::Update
                | Action::Restart
                | Action::Rollback
                | Action::RunTask
                | Action::Restore
                | Action::Expose
                | Action::Unexpose
                | Action::UpdateAccessory
                | Action::RotateCredential
        )
    }
}
