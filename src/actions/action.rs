//! What a plan action is ([`PlanAction`]): the trait each action's file
//! implements, what its record effect reads ([`Done`]) and gives
//! ([`RecordChange`]), the impact the operator reviews ([`Impact`]), and the
//! small pieces several actions share (review lines, the held-image codes).
//! Pure; runs inside the root helper.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::rolled_back;
use crate::control::app_record::{AppRecord, AppState};
use crate::control::scope::Scope;
use crate::control::validate::{Context, HostFacts};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::{for_terminal as esc, for_terminal_lines as esc_lines};
use crate::vocab::{Action, AppName, Code, DataAfter, EnvFileUse, ImageId, PlanId, Refusal, Snapshot};

/// What a plan will touch, in the words the operator reviews.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Impact {
    pub target: String,
    pub containers_touched: Vec<String>,
    /// Always false: no action of ours deletes a volume.
    pub data_volumes_deleted: bool,
    /// Always false: the host's own nginx is never touched, only per-app gateways.
    pub shared_nginx_changed: bool,
    pub rollback: String,
}

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
    fn act<E: Engine>(&self, engine: &E, progress: &dyn ProgressSink) -> Result<Effect, EngineError>;

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
    /// verified (for run_task also a task that ended badly, its container
    /// seen gone): what failed, what to fix.
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
    pub result: &'a Result<Effect, EngineError>,
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
    pub(super) fn running_or_inspect(&self) -> AppState {
        self.state_if_ok(AppState::Running)
    }
    /// `state` when the engine reported success, else `NeedsInspection`.
    pub(super) fn state_if_ok(&self, state: AppState) -> AppState {
        if self.ok() { state } else { AppState::NeedsInspection }
    }
}

/// What a completed `act` did: the containers it acted on (what the
/// engine made or touched, for the agent), and for a run_task what the
/// task left (its exit code and safe output).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Effect {
    pub containers: Vec<String>,
    pub task: Option<crate::logs::TaskRun>,
    /// backup: the snapshot it recorded and what the copy cost.
    pub backup: Option<crate::vocab::BackupRun>,
    /// restore: the snapshot put in place and the safety snapshot taken.
    pub restore: Option<crate::vocab::RestoreRun>,
}

impl From<Vec<String>> for Effect {
    fn from(containers: Vec<String>) -> Effect {
        Effect { containers, ..Effect::default() }
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

/// remove_image's holds: what docker refuses to remove without force.
pub fn held(code: Code) -> bool {
    matches!(code, Code::ImageInUse | Code::ImageHasChildren | Code::ImageHasReferences)
}

/// The record of `app` in `done`, as the claim read it, in `state` by this plan.
pub(super) fn marked(app: &AppName, state: AppState) -> Vec<RecordChange> {
    vec![RecordChange::Mark { app: app.clone(), state }]
}

/// Text the operator reviews, indented under the line that introduces it.
fn indent(text: &str) -> String {
    text.lines().map(|l| format!("      | {l}\n")).collect()
}

/// A rendered nginx.conf as the operator reviews it: escaped, indented.
pub(super) fn config_lines(out: &mut String, config: &str) {
    out.push_str(&indent(&esc_lines(config)));
}

/// The app container's configuration as the operator reviews it: which
/// file and its hash when the plan was made; its values are never shown
/// (the operator reads the file itself).
pub(super) fn configuration(out: &mut String, env_file: Option<&EnvFileUse>) {
    if let Some(used) = env_file {
        let _ = writeln!(
            out,
            "  configuration: env file {} (HMAC-SHA256 {}; values not shown)",
            esc(&used.path.display().to_string()),
            esc(&used.hmac_sha256)
        );
    }
}

/// An argv of the operator's (a task's, a health or rotate command) as the
/// operator reviews it: `["a", "b"]`, each word escaped and quoted.
pub(super) fn argv_line(argv: &crate::vocab::TaskArgv) -> String {
    let words: Vec<String> = argv.all().iter().map(|word| format!("{:?}", esc(word))).collect();
    format!("[{}]", words.join(", "))
}
