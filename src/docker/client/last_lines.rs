//! The failed app container's last lines, read before a rollback removes
//! or stops it (issue 25), so a rolled-back plan's outcome says why the app
//! did not answer. Runs as root inside the host helper; read-only calls by
//! full id, within what is left of the plan's budget.
//!
//! Why the lines are made safe here and not in the controller: the values
//! to redact are the container's own environment (every configured value
//! it was created with, the env file's included), and that is gone with
//! the container. Reading both here, just before the removal, and
//! rendering at once keeps the raw bytes and the secrets inside this
//! function: [`EngineError`] is `Debug` and `Clone` and travels to the
//! controller, so it carries only the safe [`AppLog`].
//!
//! Invariant: a failed read is an [`AppLog::unreadable`], never an error:
//! the rollback's own verification alone decides the outcome.

use std::time::{Duration, Instant};

use super::argv::argv;
use super::{DockerClient, QUICK, Runner};
use crate::docker::{EngineError, LogWindow};
use crate::logs::{APP_LOG_LINES, AppLog};
use crate::vocab::ContainerId;

/// Less than this left of the budget: the cleanup goes first, unread.
const LEAST_LEFT: Duration = Duration::from_secs(1);

impl<R: Runner> DockerClient<R> {
    /// The last lines of `app` after `error`, unless its outcome is
    /// unknown (a step that timed out is never rolled back, so nothing is
    /// read for it) or there is no app container yet; then what `error`
    /// read itself, if anything (a `before_start` task's output).
    pub(super) fn failed_app_log(
        &self,
        error: &EngineError,
        app: Option<&ContainerId>,
        deadline: Instant,
    ) -> Option<AppLog> {
        app.filter(|_| !error.outcome_unknown())
            .map(|app| self.last_lines(app, deadline))
            .or_else(|| error.output().cloned())
    }

    /// `docker logs --tail 20 --timestamps` and the environment of `app`,
    /// each bounded by QUICK and by what is left until `deadline`, made safe
    /// and cut ([`AppLog::render`]).
    pub(super) fn last_lines(&self, app: &ContainerId, deadline: Instant) -> AppLog {
        let left = deadline.saturating_duration_since(Instant::now());
        if left < LEAST_LEFT {
            return AppLog::unreadable();
        }
        let window = LogWindow { tail: APP_LOG_LINES, since_minutes: None };
        let Ok(streams) = self.container_logs_within(app, window, QUICK.min(left)) else {
            return AppLog::unreadable();
        };
        // Without the container's values no line can be called safe: unlike
        // `service_logs`' read, "no such container" (exit 1) is no empty
        // environment here, it is a log that cannot be shown.
        self.set_deadline(Some(deadline));
        let args =
            argv(&["inspect", "--type", "container", "--format", "{{json .Config.Env}}", "--", app.as_str()]);
        let environment = self.call("inspect failed app environment", args, QUICK);
        self.set_deadline(None);
        let Some(environment) = environment
            .ok()
            .and_then(|out| serde_json::from_slice::<Option<Vec<String>>>(&out).ok())
            .map(Option::unwrap_or_default)
        else {
            return AppLog::unreadable();
        };
        let values: Vec<&str> =
            environment.iter().filter_map(|entry| entry.split_once('=')).map(|(_, value)| value).collect();
        AppLog::render(&streams.stdout, &streams.stderr, &values)
    }
}
