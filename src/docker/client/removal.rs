//! The removal of one app through the docker CLI: its containers (never
//! forced), its labelled networks, its directory, then its data unmounted
//! (and deleted only by a purging plan). Runs as root inside the host helper.

use super::argv::argv;
use super::parse::lines;
use super::verify::FirstChange;
use super::{DockerClient, QUICK, Runner};
use crate::docker::gateway_file::remove_app_dir;
use crate::docker::{AppRemoval, EngineError, data_volume};
use crate::vocab::LABEL_APP;

impl<R: Runner> DockerClient<R> {
    pub(super) fn remove_app_steps(&self, removal: &AppRemoval<'_>) -> Result<(), EngineError> {
        self.stop_verifying_first(removal.running)?;
        for (n, id) in removal.containers.iter().enumerate() {
            // Never -f (a container that runs again is refused, not killed),
            // never -v (volumes are not ours to remove).
            const STEP: &str = "remove app container";
            if let Err(error) = self.call(STEP, argv(&["rm", id.as_str()]), QUICK) {
                // The first change of all only when nothing was stopped.
                let first = n == 0 && removal.running.is_empty();
                return Err(if first {
                    self.refused_unless_changed(error, id, FirstChange::Remove, STEP)
                } else {
                    error
                });
            }
        }
        // Only networks that carry the app's label, by id, and only those
        // of the plan's names: a network on our name that someone else made
        // is left where it is.
        let filter = format!("label={LABEL_APP}={}", removal.app);
        let listed = self.call(
            "find app networks",
            argv(&["network", "ls", "--no-trunc", "--filter", &filter, "--format", "{{.ID}} {{.Name}}"]),
            QUICK,
        )?;
        for line in lines(&listed) {
            let Some((id, name)) = line.split_once(' ') else {
                return Err(EngineError::Unparsable { step: "find app networks" });
            };
            if removal.networks.iter().any(|n| n == name) && crate::text::is_lower_hex(id, 64) {
                self.call("remove app network", argv(&["network", "rm", id]), QUICK)?;
            }
        }
        remove_app_dir(removal.app_dir)?;
        // Last: whatever failed before leaves the data mounted and whole. A
        // purge deletes an accessory's credential with its data.
        for data in removal.data.iter().copied().chain(removal.accessory_data) {
            data_volume::release(data, removal.purge_data)?;
        }
        // An app backed up by its dumps only keeps its backup record where
        // its own image would be: a purge of its last data deletes it too,
        // so a later app of the same name never inherits its backups.
        if let (true, None, Some(first)) = (removal.purge_data, removal.data, removal.accessory_data.first())
        {
            let image = crate::vocab::BackupRecord::app_image_beside(&first.image, removal.app);
            let record = crate::vocab::BackupRecord::beside(&image);
            if let Err(e) = std::fs::remove_file(record)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                return Err(EngineError::Host { step: "delete the app's backup record" });
            }
        }
        Ok(())
    }
}
