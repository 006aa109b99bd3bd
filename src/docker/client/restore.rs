//! restore (issue 41): an app's data, or one accessory's database, replaced
//! by one of its snapshots, the app stopped around it and started again.
//! Runs as root inside the host helper; what is replaced is
//! `crate::docker::backup::restore_replaced`.
//!
//! Invariants enforced here:
//! - the data is touched only once the app is stopped (as a stop plan
//!   stops it) and a safety snapshot of it as it was then is recorded: that
//!   snapshot is the way back, and nothing the app wrote before the stop is
//!   lost by taking it earlier;
//! - the data is replaced in one step (`backup::swap_in`: unpacked into a
//!   new image that is renamed over the app's), so it is at every instant
//!   the old or the restored one, whole; a database is replaced by its own
//!   `load`, all or nothing by its contract (`crate::docker::dump`); a
//!   restore that fails before that step leaves them untouched and starts
//!   the app again ([`EngineError::BackupFailed`], the plan `failed`);
//! - an app that does not answer its health check on the restored data
//!   gets the safety snapshot back the same way and is started again; only
//!   once it answers is that [`EngineError::RolledBack`] (the plan
//!   `failed`, the app as it was). Any step of that way back that fails
//!   leaves the error of that step: the plan needs an operator;
//! - an app that was stopped when the plan was made is not started.

use super::{DockerClient, Runner};
use crate::docker::backup::{put_back, restore_replaced};
use crate::docker::{EngineError, ProgressSink};
use crate::vocab::{RestoreRun, RestoreSpec, StartSpec};

impl<R: Runner> DockerClient<R> {
    /// The whole restore (see the module's invariants).
    pub(super) fn restore_steps(
        &self,
        spec: &RestoreSpec,
        progress: &dyn ProgressSink,
    ) -> Result<RestoreRun, EngineError> {
        if !spec.stop.is_empty() {
            self.stop_verifying_first(&spec.stop)?;
        }
        let safety = match restore_replaced(spec) {
            Ok(safety) => safety,
            // The data is as it was (never touched): the app runs again as
            // it did, or the failure is the start's.
            Err(error @ EngineError::BackupFailed { .. }) => {
                return match &spec.start {
                    Some(start) => self.start_again(start, progress).and(Err(error)),
                    None => Err(error),
                };
            }
            Err(error) => return Err(error),
        };
        let Some(start) = &spec.start else {
            return Ok(RestoreRun { restored: spec.snapshot.id.clone(), safety, started: false });
        };
        match self.start_app(start, progress) {
            Ok(()) => Ok(RestoreRun { restored: spec.snapshot.id.clone(), safety, started: true }),
            // The start stopped both again; the data goes back as it was.
            Err(error) => {
                put_back(spec, &safety)?;
                self.start_again(start, progress)?;
                let cause = match error {
                    EngineError::RolledBack { cause, .. } => cause,
                    other => Box::new(other),
                };
                Err(EngineError::RolledBack { cause, app_log: None })
            }
        }
    }

    /// The app started on data as it was before the plan; a failure here is
    /// a failure of the way back, which needs an operator.
    fn start_again(&self, start: &StartSpec, progress: &dyn ProgressSink) -> Result<(), EngineError> {
        self.start_app(start, progress)
            .map_err(|_| EngineError::Host { step: "start the app again on its data" })
    }
}
