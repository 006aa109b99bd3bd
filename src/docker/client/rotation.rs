//! A rotate_credential's steps through the docker CLI (issue 40): a new
//! credential generated beside the accessory's data, the operator's
//! `rotate` command run in the accessory with the current and the new one,
//! the env files rendered anew, and the app switched to a new container of
//! its image (the update's switch, which reads them); then the new
//! credential takes the old one's place. If the switch fails, the env
//! files are put back and the command runs the other way. Runs as root
//! inside the host helper.
//!
//! Security invariants enforced here: the credentials reach the command
//! only through a 0600 env file named in argv by path, deleted as soon as
//! the command ends; until the app runs with the new one, it stays in its
//! own file (`<app>@<name>.secret.new`) and the old one is never lost, so
//! a helper stopped at any step leaves both for the operator.

use super::argv::argv;
use super::{DockerClient, QUICK, Runner};
use crate::docker::accessory_files::{
    existing_secret, new_secret, read_env, remove_secret, replace_env, write_env,
};
use crate::docker::{EngineError, ProgressSink};
use crate::vocab::{ContainerId, ROTATE_FROM, ROTATE_TO, RotationSpec, Secret, accessories_env_of};

/// The accessory's credential and a new one, made beside it. A new file
/// only: one a stopped rotation left may be what the accessory has now,
/// and only an operator can tell (docs/data.md).
fn credentials(spec: &RotationSpec) -> Result<(Secret, Secret), EngineError> {
    let accessory = &spec.accessory;
    if !spec.accessories.iter().any(|a| a == accessory) {
        return Err(EngineError::Host { step: "validate rotation spec" });
    }
    let current = existing_secret(&accessory.secret_of())?;
    let pending = accessory.pending_secret_of();
    if std::fs::symlink_metadata(&pending).is_ok() {
        return Err(EngineError::Host { step: "find no earlier rotation's new credential" });
    }
    Ok((current, new_secret(&pending)?))
}

/// The env files a rotation renders anew, with the text each had.
struct Previous {
    accessory: String,
    app: String,
}

impl<R: Runner> DockerClient<R> {
    pub(super) fn rotate_credential_steps(
        &self,
        spec: &RotationSpec,
        progress: &dyn ProgressSink,
    ) -> Result<ContainerId, EngineError> {
        let accessory = &spec.accessory;
        let pending = accessory.pending_secret_of();
        // Nothing has changed before the command runs: a failure here ends
        // the plan `failed`, never `needs_inspection`.
        let (current, new) = credentials(spec)
            .map_err(|cause| EngineError::RolledBack { cause: Box::new(cause), app_log: None })?;
        if let Err(error) = self.run_rotate(spec, &current, &new) {
            if error.outcome_unknown() {
                return Err(error);
            }
            remove_secret(&pending);
            return Err(EngineError::RolledBack { cause: Box::new(error), app_log: None });
        }
        let previous = match self.render_env_files(spec, &new) {
            Ok(previous) => previous,
            Err(error) => return Err(self.rotate_back(spec, (&current, &new), None, error)),
        };
        match self.update_app(&spec.switch, progress) {
            Ok(id) => {
                std::fs::rename(&pending, accessory.secret_of())
                    .map_err(|_| EngineError::Host { step: "keep the new credential" })?;
                Ok(id)
            }
            Err(error) => Err(self.rotate_back(spec, (&current, &new), Some(previous), error)),
        }
    }

    /// The operator's `rotate` command in the accessory's container, with
    /// `from` and `to` in its environment through a private env file.
    fn run_rotate(&self, spec: &RotationSpec, from: &Secret, to: &Secret) -> Result<(), EngineError> {
        let path = spec.accessory.rotate_env_of(&spec.switch.app_dir);
        remove_secret(&path);
        let text = format!("{ROTATE_FROM}={}\n{ROTATE_TO}={}\n", from.expose(), to.expose());
        write_env(&path, &text)?;
        let mut args = argv(&["exec", "--env-file", &path.display().to_string(), spec.container.as_str()]);
        args.extend(spec.rotate.all().iter().cloned());
        let result = self.call("run the accessory's rotate command", args, QUICK);
        let removed = remove_secret(&path);
        result?;
        if removed { Ok(()) } else { Err(EngineError::Host { step: "remove the rotate command's env file" }) }
    }

    /// The accessory's env file and the app's, rendered with `new` for the
    /// rotated accessory (the others keep theirs); returns what they held.
    fn render_env_files(&self, spec: &RotationSpec, new: &Secret) -> Result<Previous, EngineError> {
        let (accessory, app_dir) = (&spec.accessory, &spec.switch.app_dir);
        let own = accessory.env_file_of(app_dir);
        let app = accessories_env_of(app_dir);
        let previous = Previous { accessory: read_env(&own)?, app: read_env(&app)? };
        let mut app_env = String::new();
        for each in &spec.accessories {
            let kept =
                if each.name == accessory.name { None } else { Some(existing_secret(&each.secret_of())?) };
            app_env.push_str(&each.app_env.render(kept.as_ref().unwrap_or(new), &each.name, each.port));
        }
        replace_env(&own, &accessory.env.render(new, &accessory.name, accessory.port))?;
        replace_env(&app, &app_env)?;
        Ok(previous)
    }

    /// After a failed switch (or a failed render): the env files as they
    /// were, the command run again from `new` back to `current`, the new
    /// credential's file gone. The switch's own error when all of that
    /// held (a verified switch rollback stays `RolledBack`), else the first
    /// step of the way back that failed.
    fn rotate_back(
        &self,
        spec: &RotationSpec,
        (current, new): (&Secret, &Secret),
        previous: Option<Previous>,
        error: EngineError,
    ) -> EngineError {
        let back = || -> Result<(), EngineError> {
            if let Some(previous) = &previous {
                replace_env(&spec.accessory.env_file_of(&spec.switch.app_dir), &previous.accessory)?;
                replace_env(&accessories_env_of(&spec.switch.app_dir), &previous.app)?;
            }
            self.run_rotate(spec, new, current)?;
            if remove_secret(&spec.accessory.pending_secret_of()) {
                Ok(())
            } else {
                Err(EngineError::Host { step: "remove the new credential" })
            }
        };
        match (back(), error) {
            (Ok(()), error @ EngineError::RolledBack { .. }) => error,
            (Ok(()), error) if previous.is_none() && !error.outcome_unknown() => {
                EngineError::RolledBack { cause: Box::new(error), app_log: None }
            }
            (Ok(()), error) => error,
            (Err(undo), _) => undo,
        }
    }
}
