//! run_task (issue 40): one operator-declared task run once in a new
//! container of the app's image, then removed. Runs as root inside the
//! host helper.
//!
//! Security invariants enforced here:
//! - the container is made like the app's own: the same hardening and
//!   limits, user 1000:1000, the app's env file, data mount and internal
//!   network (nothing published, no host address to reach), and it never
//!   pulls; its argv is exactly the task's (`--entrypoint` the program, the
//!   rest after the image), each element its own argv element;
//! - it carries the plan's label, so the only forced removal here (`rm -f`,
//!   of that one container, after a timeout or a failed start) can name
//!   nothing else, and the listing of that label proves it gone;
//! - a task's result is reported only once its container is seen gone:
//!   exit 0 is `Ok`, another code [`EngineError::TaskFailed`], a timeout
//!   [`EngineError::TaskTimedOut`]; anything not seen gone stays the
//!   call's error (the plan needs inspection);
//! - its output leaves only as a `crate::logs::AppLog`: read with the container's own
//!   environment as the values to redact, bounded, marked untrusted.

use std::time::Instant;

use super::argv::{accessories_env, argv, data_mount, env_file, hardening, labels};
use super::deploy::{Created, fits_mount_list};
use super::parse::{first_line, lines};
use super::{DockerClient, QUICK, Runner};
use crate::docker::EngineError;
use crate::docker::data_volume;
use crate::logs::TaskRun;
use crate::vocab::{ContainerId, LABEL_PLAN, LABEL_ROLE, TaskSpec};

/// The role label of a task's container.
const TASK_ROLE: &str = "task";

impl<R: Runner> DockerClient<R> {
    /// The whole run (see the module's invariants).
    pub(super) fn run_task_steps(&self, spec: &TaskSpec) -> Result<TaskRun, EngineError> {
        check_task_values(spec)?;
        if let Some(data) = &spec.data {
            // The app's data as the app sees it, never new data.
            data_volume::mount_kept(&data.image, &data.mount)?;
        }
        let mut created = Created::default();
        let id = match self.create_and_start(spec, &mut created) {
            Ok(id) => id,
            Err(error) => return Err(self.not_started(spec, error, &created)),
        };
        let waited = self.call("wait for task", argv(&["wait", id.as_str()]), spec.timeout());
        // The output is read before the removal, whatever the wait said;
        // the budget for reading is QUICK past now.
        let output = self.last_lines(&id, Instant::now() + QUICK);
        match waited {
            Ok(out) => {
                // Removed first, whatever docker said: an answer we cannot
                // read leaves no container behind either.
                self.remove_task(spec, &id)?;
                let exit_code = first_line(&out)
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| EngineError::Unparsable { step: "wait for task" })?;
                let run = TaskRun { task: spec.task.clone(), exit_code, output };
                if exit_code == 0 { Ok(run) } else { Err(EngineError::TaskFailed { run }) }
            }
            Err(EngineError::Call { execution, .. }) if execution.timed_out => {
                self.remove_task(spec, &id)?;
                Err(EngineError::TaskTimedOut { output })
            }
            Err(error) => {
                let _ = self.remove_task(spec, &id);
                Err(error)
            }
        }
    }

    /// A deploy's or update's `before_start` task: run as run_task runs it;
    /// the plan's own rollback, which follows any error, verifies what is
    /// left, so a task that never started is its cause as it was.
    pub(super) fn before_start(&self, task: &TaskSpec) -> Result<(), EngineError> {
        match self.run_task_steps(task) {
            Ok(_) => Ok(()),
            Err(EngineError::RolledBack { cause, .. }) => Err(*cause),
            Err(error) => Err(error),
        }
    }

    /// `docker create` of the task's container (noted in `created`), then
    /// `docker start`.
    fn create_and_start(&self, spec: &TaskSpec, created: &mut Created) -> Result<ContainerId, EngineError> {
        let network = spec.app.names().network;
        let mut args = argv(&["create", "--name", &spec.container_name]);
        args.extend(labels(&spec.app, TASK_ROLE, &spec.plan_id));
        args.extend(hardening(&spec.limits, "1000:1000", "no"));
        args.extend(env_file(spec.env_file.as_ref()));
        args.extend(accessories_env(spec.accessories_env.as_deref()));
        args.extend(data_mount(spec.data.as_ref()));
        args.extend(argv(&["--network", &network, "--entrypoint", spec.argv.program()]));
        args.push(spec.image.as_str().to_owned());
        args.extend(spec.argv.args().iter().cloned());
        let out = self.call("create task container", args, QUICK)?;
        let id = ContainerId::parse(first_line(&out))
            .ok_or(EngineError::Unparsable { step: "create task container" })?;
        created.containers.push(id.clone());
        self.call("start task container", argv(&["start", id.as_str()]), QUICK)?;
        Ok(id)
    }

    /// A task that never ran: its container removed, and, once no task
    /// container of the plan's is seen left after a step whose outcome is
    /// known, [`EngineError::RolledBack`] (the plan ends failed). A task
    /// creates no network; a deploy's `before_start` runs beside the
    /// deploy's networks and accessories, which the deploy's own rollback
    /// removes and verifies.
    fn not_started(&self, spec: &TaskSpec, error: EngineError, created: &Created) -> EngineError {
        for id in &created.containers {
            let _ = self.call("remove new task container", argv(&["rm", "-f", "-v", id.as_str()]), QUICK);
        }
        let gone = !error.outcome_unknown() && self.tasks_left(&spec.plan_id).is_ok_and(|left| !left);
        if gone { EngineError::RolledBack { cause: Box::new(error), app_log: None } } else { error }
    }

    /// `rm -f -v` of the task's own container, then the plan's task
    /// containers listed again: `Ok` only when none is left.
    fn remove_task(&self, spec: &TaskSpec, id: &ContainerId) -> Result<(), EngineError> {
        self.call("remove task container", argv(&["rm", "-f", "-v", id.as_str()]), QUICK)?;
        if self.tasks_left(&spec.plan_id)? {
            return Err(EngineError::Host { step: "see the task container gone" });
        }
        Ok(())
    }

    /// Whether a container of `plan` in the task role exists. Only those:
    /// a deploy's `before_start` runs while the plan's accessories (issue
    /// 40) carry its label too, and they are the deploy's to remove.
    fn tasks_left(&self, plan: &crate::vocab::PlanId) -> Result<bool, EngineError> {
        let plan_filter = format!("label={LABEL_PLAN}={plan}");
        let role_filter = format!("label={LABEL_ROLE}={TASK_ROLE}");
        let args = argv(&["ps", "-aq", "--no-trunc", "--filter", &plan_filter, "--filter", &role_filter]);
        Ok(!lines(&self.call("find plan task containers", args, QUICK)?).is_empty())
    }
}

/// The values no type carries: the paths that go into the `--mount` list
/// and after `--env-file`, as a deploy checks them.
fn check_task_values(spec: &TaskSpec) -> Result<(), EngineError> {
    let env_ok = spec.env_file.as_ref().is_none_or(|used| used.path.is_absolute())
        && spec.accessories_env.as_ref().is_none_or(|path| path.is_absolute());
    let data_ok =
        spec.data.as_ref().is_none_or(|data| fits_mount_list(&data.mount) && data.image.is_absolute());
    if env_ok && data_ok && spec.timeout_seconds > 0 {
        Ok(())
    } else {
        Err(EngineError::Host { step: "validate task spec" })
    }
}
