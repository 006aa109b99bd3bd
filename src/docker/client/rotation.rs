//! A rotate_credential's steps through the docker CLI (issue 40): a new
//! credential generated beside the accessory's data, the operator's
//! `rotate` command run in the accessory with the current and the new one,
//! the env files rendered anew, and the app switched to a new container of
//! its image (the update's switch, which reads them); then the new
//! credential takes the old one's place. If the switch is rolled back
//! (verified: the old container serves), the env files are put back and
//! the command runs the other way; any other failure of the switch may
//! have come after it, so nothing is undone and the plan needs an
//! operator, both credentials kept. Runs as root inside the host helper.
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

/// The two env files a rotation renders anew: what each holds now, and
/// what it will hold, both known before anything changes.
struct EnvTexts {
    own: std::path::PathBuf,
    app: std::path::PathBuf,
    before: (String, String),
    after: (String, String),
}

impl EnvTexts {
    /// The accessory's env file and the app's, read as they are and
    /// rendered with `new` for the rotated accessory (the others keep theirs).
    fn of(spec: &RotationSpec, new: &Secret) -> Result<EnvTexts, EngineError> {
        let (accessory, app_dir) = (&spec.accessory, &spec.switch.app_dir);
        let (own, app) = (accessory.env_file_of(app_dir), accessories_env_of(app_dir));
        let before = (read_env(&own)?, read_env(&app)?);
        let mut app_env = String::new();
        for each in &spec.accessories {
            let kept =
                if each.name == accessory.name { None } else { Some(existing_secret(&each.secret_of())?) };
            app_env.push_str(&each.app_env.render(kept.as_ref().unwrap_or(new), &each.name, each.port));
        }
        let after = (accessory.env.render(new, &accessory.name, accessory.port), app_env);
        Ok(EnvTexts { own, app, before, after })
    }

    /// Both files with the new texts.
    fn write_new(&self) -> Result<(), EngineError> {
        replace_env(&self.own, &self.after.0)?;
        replace_env(&self.app, &self.after.1)
    }

    /// Both files as they were.
    fn put_back(&self) -> Result<(), EngineError> {
        replace_env(&self.own, &self.before.0)?;
        replace_env(&self.app, &self.before.1)
    }
}

impl<R: Runner> DockerClient<R> {
    pub(super) fn rotate_credential_steps(
        &self,
        spec: &RotationSpec,
        progress: &dyn ProgressSink,
    ) -> Result<ContainerId, EngineError> {
        let pending = spec.accessory.pending_secret_of();
        let unchanged = |cause| EngineError::RolledBack { cause: Box::new(cause), app_log: None };
        // Nothing changes before the command runs: a failure here ends the
        // plan `failed`, never `needs_inspection`.
        let (current, new) = credentials(spec).map_err(unchanged)?;
        let texts = match EnvTexts::of(spec, &new) {
            Ok(texts) => texts,
            Err(error) => {
                remove_secret(&pending);
                return Err(unchanged(error));
            }
        };
        if let Err(error) = self.run_rotate(spec, &current, &new) {
            if error.outcome_unknown() {
                return Err(error);
            }
            // The command's contract: a nonzero exit changed nothing.
            remove_secret(&pending);
            return Err(unchanged(error));
        }
        if let Err(error) = texts.write_new() {
            return Err(self.rotate_back(spec, (&current, &new), &texts, error));
        }
        match self.update_app(&spec.switch, progress) {
            Ok(id) => {
                std::fs::rename(&pending, spec.accessory.secret_of())
                    .map_err(|_| EngineError::Host { step: "keep the new credential" })?;
                Ok(id)
            }
            // Only a switch whose own rollback was verified has the old
            // container serving: then the accessory goes back too.
            Err(error @ EngineError::RolledBack { .. }) => {
                Err(self.rotate_back(spec, (&current, &new), &texts, error))
            }
            // Any other failure may have come after the switch (the new
            // container serving with the new credential): nothing is undone,
            // both credentials stay for the operator (docs/data.md).
            Err(error) => Err(error),
        }
    }

    /// The operator's `rotate` command in the accessory's container, with
    /// `from` and `to` in its environment through a private env file,
    /// deleted when it ends (one left by a failed removal is an accessory
    /// env file of the app's directory: remove_app deletes it).
    fn run_rotate(&self, spec: &RotationSpec, from: &Secret, to: &Secret) -> Result<(), EngineError> {
        let path = spec.accessory.rotate_env_of(&spec.switch.app_dir);
        remove_secret(&path);
        let text = format!("{ROTATE_FROM}={}\n{ROTATE_TO}={}\n", from.expose(), to.expose());
        write_env(&path, &text)?;
        let mut args = argv(&["exec", "--env-file", &path.display().to_string(), spec.container.as_str()]);
        args.extend(spec.rotate.all().iter().cloned());
        let result = self.call("run the accessory's rotate command", args, QUICK);
        remove_secret(&path);
        result.map(|_| ())
    }

    /// After the env files were written (or a switch was rolled back): the
    /// files as they were, the command run again from `new` back to
    /// `current`, the new credential's file gone. `error` when all of that
    /// held and it is a verified rollback, or a failure before the switch;
    /// else the first step of the way back that failed.
    fn rotate_back(
        &self,
        spec: &RotationSpec,
        (current, new): (&Secret, &Secret),
        texts: &EnvTexts,
        error: EngineError,
    ) -> EngineError {
        let back = || -> Result<(), EngineError> {
            texts.put_back()?;
            self.run_rotate(spec, new, current)?;
            if remove_secret(&spec.accessory.pending_secret_of()) {
                Ok(())
            } else {
                Err(EngineError::Host { step: "remove the new credential" })
            }
        };
        match (back(), error) {
            (Ok(()), error @ EngineError::RolledBack { .. }) => error,
            (Ok(()), error) if !error.outcome_unknown() => {
                EngineError::RolledBack { cause: Box::new(error), app_log: None }
            }
            (Ok(()), error) => error,
            (Err(undo), _) => undo,
        }
    }
}
