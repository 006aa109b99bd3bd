//! The plan actions, one file each, behind one trait: [`PlanAction`]
//! (`action.rs`, with what the trait reads and gives). This file is the
//! registration only: the sealed [`Payload`] and its dispatch. Each
//! action's file holds what the action is and nothing else holds it: the
//! payload it seals into a plan (the struct), the validation of the agent's
//! parameters and the derivation of that payload and its impact, the part
//! of the engine's snapshot it is bound to (its scope), the lines the
//! operator reviews in `show`, the engine steps it takes, and what it makes
//! of the app records. Pure but for `act`, which is handed the engine; runs
//! inside the root helper at prepare, show and execute.
//!
//! The generic path (`crate::host::controller`) only claims, verifies,
//! acts and records, asking the action through [`Payload`]'s dispatch; the
//! one place that lists the actions is the `actions!` registration below.
//! A new action is one new file and one line there (and its name in the
//! closed set, `crate::vocab::Action`, with its parameters and whether it
//! always needs an approval: the MCP server and the policy read those).
//!
//! Security invariants (each action's file says its own):
//! - a payload is derived only from validated parameters, the operator's
//!   policy, the stored app records and a fresh engine snapshot; execute
//!   derives it again and acts only if it is the sealed one;
//! - an action acts only through the engine calls its `act` names, with the
//!   payload's values (the engine's argv is fixed, `crate::docker`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::control::scope::Scope;
use crate::control::validate::{Context, HostFacts};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::vocab::{Action, AppName, Code, DataAfter, EnvFileUse, PlanId, Refusal, refuse};

pub mod plan;

mod action;
mod backup;
mod deploy;
mod edge;
mod expose;
mod nginx_config;
mod remove_app;
mod remove_image;
mod restart;
mod restore;
mod rollback;
mod rolled_back;
mod rotate_credential;
mod run_task;
mod start;
mod stop;
mod unexpose;
mod update;
mod update_accessory;

pub use action::{Done, Effect, Impact, PlanAction, RecordChange, held};
pub use backup::Backup;
pub use deploy::ContainerPlan;
pub use deploy::Deploy;
pub use expose::Expose;
pub use nginx_config::NginxConfig;
pub use remove_app::RemoveApp;
pub use remove_image::RemoveImage;
pub use restart::Restart;
pub use restore::Restore;
pub use rollback::Rollback;
pub use rotate_credential::RotateCredential;
pub use run_task::RunTask;
pub use start::Start;
pub use stop::Stop;
pub use unexpose::Unexpose;
pub use update::{Update, kept};
pub use update_accessory::UpdateAccessory;

/// The registration: one line per action, `Variant(module::Type)`, the
/// variant named as in `crate::vocab::Action`. It gives the sealed
/// [`Payload`] (serde's internally tagged form keeps each plan's canonical
/// JSON, and so its digest, as it was), [`derive`], and the dispatch of
/// every [`PlanAction`] method.
macro_rules! actions {
    ($($name:ident($ty:ty)),* $(,)?) => {
        /// What `execute` hands the engine, derived by us from validated
        /// input: one variant per action.
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(tag = "kind", rename_all = "snake_case")]
        pub enum Payload {
            $($name($ty),)*
        }

        /// Validates `parameters` for `action` and derives what execution
        /// will do.
        pub fn derive(
            action: Action,
            parameters: &Value,
            ctx: &Context<'_>,
            facts: &dyn HostFacts,
        ) -> Result<(Payload, Impact), Refusal> {
            let Some(params) = parameters.as_object() else {
                return refuse(Code::InvalidParameters, "parameters must be a JSON object.");
            };
            match action {
                $(Action::$name => {
                    <$ty>::derive(params, ctx, facts).map(|(payload, impact)| (Payload::$name(payload), impact))
                })*
            }
        }

        impl Payload {
            pub fn action(&self) -> Action {
                match self { $(Payload::$name(_) => <$ty>::ACTION,)* }
            }
            /// The app a plan is about, if any.
            pub fn app(&self) -> Option<&str> {
                match self { $(Payload::$name(a) => a.app().map(AppName::as_str),)* }
            }
            pub fn env_file(&self) -> Option<&EnvFileUse> {
                match self { $(Payload::$name(a) => a.env_file(),)* }
            }
            pub fn scope(&self) -> Scope<'_> {
                match self { $(Payload::$name(a) => a.scope(),)* }
            }
            pub fn records_images(&self) -> bool {
                match self { $(Payload::$name(_) => <$ty>::RECORDS_IMAGES,)* }
            }
            pub fn held_ends_failed(&self) -> bool {
                match self { $(Payload::$name(_) => <$ty>::HELD_ENDS_FAILED,)* }
            }
            pub fn review(&self, out: &mut String) {
                match self { $(Payload::$name(a) => a.review(out),)* }
            }
            pub fn act<E: Engine>(
                &self,
                engine: &E,
                progress: &dyn ProgressSink,
            ) -> Result<Effect, EngineError> {
                match self { $(Payload::$name(a) => a.act(engine, progress),)* }
            }
            /// The record changes after an execution: the action's own when
            /// the engine acted, else those of a change that changed nothing.
            pub fn record(&self, done: &Done<'_>) -> Vec<RecordChange> {
                let unchanged = done.result.as_ref().is_err_and(EngineError::changed_nothing);
                match self {
                    $(Payload::$name(a) => if unchanged { a.record_unchanged(done) } else { a.record(done) },)*
                }
            }
            pub fn rolled_back(&self, cause: &EngineError, id: &PlanId) -> Refusal {
                match self { $(Payload::$name(_) => <$ty>::rolled_back(cause, id),)* }
            }
            pub fn refused_because(&self) -> &'static str {
                match self { $(Payload::$name(_) => <$ty>::refused_because(),)* }
            }
            /// `self` (derived at execute) as `sealed` carries it.
            pub fn into_sealed_form(self, sealed: &Payload) -> Payload {
                match (self, sealed) {
                    $((Payload::$name(a), Payload::$name(s)) => Payload::$name(a.into_sealed_form(s)),)*
                    (derived, _) => derived,
                }
            }
            pub fn data_after(&self) -> Option<DataAfter> {
                match self { $(Payload::$name(a) => a.data_after(),)* }
            }
        }
    };
}

actions! {
    Deploy(Deploy),
    NginxConfig(NginxConfig),
    Stop(Stop),
    RemoveImage(RemoveImage),
    RemoveApp(RemoveApp),
    Start(Start),
    Update(Update),
    Restart(Restart),
    Rollback(Rollback),
    RunTask(RunTask),
    Backup(Backup),
    Restore(Restore),
    Expose(Expose),
    Unexpose(Unexpose),
    UpdateAccessory(UpdateAccessory),
    RotateCredential(RotateCredential),
}

#[cfg(test)]
mod tests;
