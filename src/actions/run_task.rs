//! `run_task` (issue 40): one task the app's catalog entry declares, run
//! once in a new container of the image the app runs now, with the app's
//! configuration (its env file as it is now), data and internal network,
//! hardened and limited as the app's own container, for at most
//! [`TASK_TIMEOUT`]; then the container is removed. Its exit code and its
//! last lines (safe, untrusted) come back. Runs in the root helper (derive
//! at prepare and again at execute; act at execute).
//!
//! Security invariants enforced here:
//! - the agent names a task, never a command: the argv is the operator's,
//!   from the catalog entry the app's record names, sealed in the plan (a
//!   changed policy voids it anyway);
//! - only an app we recorded, with exactly its recorded container set, not
//!   one that needs inspection; the app's own containers are not touched;
//! - an operator always approves it (`Action::always_requires_approval`):
//!   a task can change the app's data, which no plan's rollback restores.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange, argv_line, configuration};
use crate::control::app_record::AppState;
use crate::control::scope::Scope;
use crate::control::validate::{
    Context, HostFacts, app_name, configuration as configured, data, exact_keys, owned, recorded, string,
};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{
    Action, AppName, Code, ContainerId, DataUse, EnvFileUse, ImageRef, PlanId, Refusal, TASK_TIMEOUT,
    TaskArgv, TaskName, TaskSpec, refuse,
};

/// A run_task's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunTask {
    /// The recorded container ids, sorted (the scope).
    pub containers: Vec<ContainerId>,
    pub spec: TaskSpec,
}

impl PlanAction for RunTask {
    const ACTION: Action = Action::RunTask;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        facts: &dyn HostFacts,
    ) -> Result<(RunTask, Impact), Refusal> {
        exact_keys(params, Action::RunTask)?;
        let app = app_name(params)?;
        let asked = string(params, "task")?;
        let record = recorded(&app, ctx)?;
        if record.state == AppState::NeedsInspection {
            return refuse(
                Code::AppNotRunning,
                format!("{app} needs inspection: no task runs beside it until an operator has resolved it."),
            );
        }
        let record = owned(&app, record, ctx)?;
        let entry = ctx.policy.catalog.get(&record.image_key);
        let declared = entry.map(|entry| &entry.tasks);
        let found = TaskName::parse(asked).and_then(|task| Some((declared?.get(&task)?.clone(), task)));
        let (Some(entry), Some((argv, task))) = (entry, found) else {
            let names: Vec<&str> =
                declared.into_iter().flat_map(|t| t.keys()).map(TaskName::as_str).collect();
            let offer = if names.is_empty() { "none".to_owned() } else { names.join(", ") };
            return refuse(
                Code::TaskNotDeclared,
                format!(
                    "The catalog entry `{}` that {app} runs declares no task {:?}; it declares: {offer}.",
                    record.image_key,
                    crate::text::for_model(asked, 64)
                ),
            );
        };
        data::still_there(record, facts)?;
        let env_file = configured(entry, facts)?;
        let mut containers = record.containers.clone();
        containers.sort();
        let runs_in = RunsIn {
            image: &record.app_image,
            env_file,
            data: record.data.clone(),
            accessories_env: record.accessories_env(),
        };
        let spec = task_spec(&app, (task, argv), runs_in, ctx);
        let impact = impact(&spec, record);
        Ok((RunTask { containers, spec }, impact))
    }

    fn app(&self) -> Option<&AppName> {
        Some(&self.spec.app)
    }

    fn env_file(&self) -> Option<&EnvFileUse> {
        self.spec.env_file.as_ref()
    }

    fn scope(&self) -> Scope<'_> {
        Scope::App { names: self.spec.app.names(), recorded: &self.containers, own_states: false }
    }

    fn review(&self, out: &mut String) {
        let spec = &self.spec;
        let _ = writeln!(out, "App      {} (its containers are not touched)", esc(spec.app.as_str()));
        let _ = writeln!(out, "Task     {}", task_line(spec));
        let _ = writeln!(
            out,
            "Runs     once, in new container {} of {}, on network vl-{} only, at most {} s; then removed",
            esc(&spec.container_name),
            esc(spec.image.as_str()),
            esc(spec.app.as_str()),
            spec.timeout_seconds
        );
        configuration(out, spec.env_file.as_ref());
        if let Some(data) = &spec.data {
            let _ = writeln!(
                out,
                "  data: the app's, {} at {} (the task may change it)",
                data.image.display(),
                data.path
            );
        }
    }

    fn act<E: Engine>(&self, engine: &E, _progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        let run = engine.run_task(&self.spec)?;
        Ok(Effect {
            containers: vec![self.spec.container_name.clone()],
            task: Some(run),
            ..Effect::default()
        })
    }

    /// The app's record is the same after a task, whatever it did.
    fn record(&self, _done: &Done<'_>) -> Vec<RecordChange> {
        Vec::new()
    }

    fn rolled_back(cause: &EngineError, id: &PlanId) -> Refusal {
        super::rolled_back::task(cause, id)
    }
}

/// Where a task runs: the image, and the configuration and data its
/// container gets (the app's, or the new version's for `before_start`).
pub(super) struct RunsIn<'a> {
    pub image: &'a ImageRef,
    pub env_file: Option<EnvFileUse>,
    pub data: Option<DataUse>,
    pub accessories_env: Option<std::path::PathBuf>,
}

/// The engine's spec of one declared task for `app` under this plan.
pub(super) fn task_spec(
    app: &AppName,
    (task, argv): (TaskName, TaskArgv),
    runs_in: RunsIn<'_>,
    ctx: &Context<'_>,
) -> TaskSpec {
    TaskSpec {
        plan_id: ctx.plan_id.clone(),
        container_name: TaskSpec::container_name(app, ctx.plan_id),
        app: app.clone(),
        task,
        argv,
        image: runs_in.image.clone(),
        limits: ctx.policy.limits.clone(),
        timeout_seconds: TASK_TIMEOUT.as_secs() as u32,
        env_file: runs_in.env_file,
        data: runs_in.data,
        accessories_env: runs_in.accessories_env,
    }
}

/// The `before_start` task of `entry`, if it names one, as the engine runs it.
pub(super) fn before_start(
    app: &AppName,
    entry: &crate::control::policy::CatalogEntry,
    runs_in: RunsIn<'_>,
    ctx: &Context<'_>,
) -> Option<TaskSpec> {
    let task = entry.before_start.clone()?;
    let argv = entry.tasks.get(&task)?.clone();
    Some(task_spec(app, (task, argv), runs_in, ctx))
}

/// The impact's line for a deploy's or update's `before_start` task.
pub(super) fn before_start_line(spec: &TaskSpec) -> String {
    format!(
        "{} (new, runs task {} once before the new version starts, at most {} s, then removed; if it fails, \
         the plan fails and is rolled back; what the task did stays)",
        spec.container_name, spec.task, spec.timeout_seconds
    )
}

/// The line `show` prints for a task: its name and the operator's argv.
pub(super) fn task_line(spec: &TaskSpec) -> String {
    format!("{}: argv {} (the catalog's)", esc(spec.task.as_str()), argv_line(&spec.argv))
}

/// What a run_task touches, in the operator's words.
fn impact(spec: &TaskSpec, record: &crate::control::app_record::AppRecord) -> Impact {
    let changed_config = match (&spec.env_file, &record.configuration) {
        (Some(now), Some(created)) if now != created => {
            " (the env file changed since the app's container was created: the task gets it as it is now)"
        }
        _ => "",
    };
    Impact {
        target: format!("app {}: task {}{changed_config}", spec.app, spec.task),
        containers_touched: std::iter::once(format!(
            "{} (new, runs the task once, then removed)",
            spec.container_name
        ))
        .chain(data::kept_line(record))
        .collect(),
        data_volumes_deleted: false,
        shared_nginx_changed: false,
        rollback: "None for the task's own work: what it changes in the app's data or database stays (a backup \
                   is the way back). Its container is removed whatever it exits with; the app's containers are \
                   never touched."
            .into(),
    }
}
