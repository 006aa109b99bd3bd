//! The plan actions, one file each, behind one trait: [`PlanAction`]. Each
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

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::control::app_record::{AppRecord, AppState};
use crate::control::scope::Scope;
use crate::control::validate::{Context, HostFacts};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::{for_terminal as esc, for_terminal_lines as esc_lines};
use crate::vocab::{
    Action, AppName, Code, DataAfter, EnvFileUse, ImageId, PlanId, Refusal, Snapshot, refuse,
};

pub mod plan;

mod deploy;
mod nginx_config;
mod remove_app;
mod remove_image;
mod restart;
mod rollback;
mod rolled_back;
mod start;
mod stop;
mod update;

pub use deploy::ContainerPlan;
pub use deploy::Deploy;
pub use nginx_config::NginxConfig;
pub use plan::{Impact, PLAN_FORMAT, Plan};
pub use remove_app::RemoveApp;
pub use remove_image::RemoveImage;
pub use restart::Restart;
pub use rollback::Rollback;
pub use start::Start;
pub use stop::Stop;
pub use update::{Update, kept};

/// What one plan action is, from the agent's parameters to the records it
/// leaves. Implemented by each action's payload, the value sealed into the
/// plan and handed to the engine.
pub trait PlanAction: Sized {
    /// Its name in the closed set.
    const ACTION: Action;

    /// Whether a completed execution reads the engine once more, so the
    /// record holds the image ids the new containers run (the claim
    /// remove_image checks).
    const RECORDS_IMAGES: bool = false;

    /// Whether a plan whose scope changed is re-derived first, so that a
    /// refusal docker itself would give (an image held, see
    /// [`held`]) ends it `failed` with that reason instead of void.
    const HELD_ENDS_FAILED: bool = false;

    /// Validates the agent's parameters against the context and derives
    /// what execution will do, and what it will touch in the operator's
    /// words. Pure; the same inputs give the same payload, at prepare and
    /// again at execute.
    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        facts: &dyn HostFacts,
    ) -> Result<(Self, Impact), Refusal>;

    /// The app the plan is about, if any.
    fn app(&self) -> Option<&AppName>;

    /// The env file the plan creates a container with, if any: its HMAC
    /// must still be the file's when the plan is approved and executed.
    fn env_file(&self) -> Option<&EnvFileUse> {
        None
    }

    /// The objects of the engine the plan is bound to (`crate::control::scope`).
    fn scope(&self) -> Scope<'_>;

    /// The before and after lines `show` prints for the operator. Every
    /// value that came through the agent passes [`esc`].
    fn review(&self, out: &mut String);

    /// The one mutation: the engine calls this action makes, and the
    /// containers it acted on, for the agent.
    fn act<E: Engine>(&self, engine: &E, progress: &dyn ProgressSink) -> Result<Vec<String>, EngineError>;

    /// What the app records become once the engine acted (`done.ok()`
    /// says whether it reported success; if not, nobody knows what is left).
    fn record(&self, done: &Done<'_>) -> Vec<RecordChange>;

    /// What they become when the engine provably changed nothing (refused
    /// before its first mutation, or rolled back and verified): nothing,
    /// unless the action says otherwise.
    fn record_unchanged(&self, _done: &Done<'_>) -> Vec<RecordChange> {
        Vec::new()
    }

    /// The refusal for a change that failed and whose rollback was
    /// verified: what failed, what to fix.
    fn rolled_back(cause: &EngineError, id: &PlanId) -> Refusal {
        rolled_back::created_and_removed(cause, id)
    }

    /// What changed on the server when docker refused this action although
    /// the plan's scope held: said in the `engine_refused` sentence.
    fn refused_because() -> &'static str {
        "one of the app's containers started, stopped or being removed by hand"
    }

    /// The payload derived at execute as the sealed one carries it, where
    /// an older version sealed less (see [`Update`]); nothing by default.
    fn into_sealed_form(self, _sealed: &Self) -> Self {
        self
    }

    /// What a completed execution did with the app's data, for the agent.
    fn data_after(&self) -> Option<DataAfter> {
        None
    }
}

/// What an execution's record effect reads: the plan, the records as the
/// claim read them, what the engine answered and the engine after it.
pub struct Done<'a> {
    pub plan_id: &'a PlanId,
    pub apps: &'a std::collections::BTreeMap<String, AppRecord>,
    pub result: &'a Result<Vec<String>, EngineError>,
    /// The engine once more after a completed execution, for an action
    /// that [`PlanAction::RECORDS_IMAGES`]; `None` otherwise or unread.
    pub after: Option<&'a Snapshot>,
    /// The policy's `keep_versions`.
    pub keep: usize,
    pub now: i64,
}

impl Done<'_> {
    /// Whether the engine reported success.
    pub fn ok(&self) -> bool {
        self.result.is_ok()
    }
    /// `Running` when the engine reported success, else `NeedsInspection`.
    fn running_or_inspect(&self) -> AppState {
        self.state_if_ok(AppState::Running)
    }
    /// `state` when the engine reported success, else `NeedsInspection`.
    fn state_if_ok(&self, state: AppState) -> AppState {
        if self.ok() { state } else { AppState::NeedsInspection }
    }
}

/// One change an execution makes to the app records, applied by the host
/// within the transaction that records the outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordChange {
    /// The app's record as it is now (boxed: a record is large next to
    /// the other changes).
    Put(Box<AppRecord>),
    /// The recorded app (if still recorded) is now in `state`, by this plan.
    Mark { app: AppName, state: AppState },
    /// The app is gone: its record goes, freeing its name, port and quota
    /// slot, and its claims on images are kept as retired ones.
    Forget { app: AppName, image_ids: Vec<ImageId> },
    /// The image is gone: no claim on it remains.
    DropClaim(ImageId),
}

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
            ) -> Result<Vec<String>, EngineError> {
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
}

/// remove_image's holds: what docker refuses to remove without force.
pub fn held(code: Code) -> bool {
    matches!(code, Code::ImageInUse | Code::ImageHasChildren | Code::ImageHasReferences)
}

/// The record of `app` in `done`, as the claim read it, in `state` by this plan.
fn marked(app: &AppName, state: AppState) -> Vec<RecordChange> {
    vec![RecordChange::Mark { app: app.clone(), state }]
}

/// Text the operator reviews, indented under the line that introduces it.
fn indent(text: &str) -> String {
    text.lines().map(|l| format!("      | {l}\n")).collect()
}

/// A rendered nginx.conf as the operator reviews it: escaped, indented.
fn config_lines(out: &mut String, config: &str) {
    out.push_str(&indent(&esc_lines(config)));
}

/// The app container's configuration as the operator reviews it: which
/// file and its hash when the plan was made; its values are never shown
/// (the operator reads the file itself).
fn configuration(out: &mut String, env_file: Option<&EnvFileUse>) {
    if let Some(used) = env_file {
        let _ = writeln!(
            out,
            "  configuration: env file {} (HMAC-SHA256 {}; values not shown)",
            esc(&used.path.display().to_string()),
            esc(&used.hmac_sha256)
        );
    }
}

#[cfg(test)]
mod tests;
