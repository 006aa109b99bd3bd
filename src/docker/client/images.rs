//! Local images: what holds one (the images built on it, its references)
//! and its removal, where docker's refusal is verified before it is called
//! one. Runs as root inside the host helper; fixed argv, and nothing but
//! `docker image rm --no-prune` of one full id mutates.
//!
//! Why verify: docker refuses a removal by id without force (images built
//! on it, several references, a container using it) before it untags or
//! deletes anything, but its exit code 1 also covers failures after an
//! untag. Only "exit 1, seen to the end, and the image still there with the
//! very id, parent and references it had just before" is a refusal that
//! changed nothing; anything else stays an error an operator inspects.

use super::argv::argv;
use super::parse::{ImageRow, holds_of, parse_image_rows, parse_images};
use super::verify::engine_said_no;
use super::{DockerClient, QUICK, Runner, SNAPSHOT_OUTPUT};
use crate::docker::EngineError;
use crate::vocab::{ImageHolds, ImageId};

/// One image a line, as JSON: id, parent (empty for none), tags and digest
/// references (`null` or a list).
pub const IMAGE_TEMPLATE: &str = r#"{"id":{{json .Id}},"parent":{{json .Parent}},"tags":{{json .RepoTags}},"digests":{{json .RepoDigests}}}"#;

impl<R: Runner> DockerClient<R> {
    /// [`crate::docker::Engine::image_holds`]. An image removed between
    /// the listing and the inspect makes the inspect fail; a fresh attempt
    /// sees a consistent list (as the snapshot does).
    pub(super) fn holds(&self, image: &ImageId) -> Result<Option<ImageHolds>, EngineError> {
        let mut last = None;
        for _ in 0..3 {
            match self.holds_once(image) {
                Ok(holds) => return Ok(holds),
                Err(error) => last = Some(error),
            }
        }
        Err(last.expect("at least one attempt"))
    }

    fn holds_once(&self, image: &ImageId) -> Result<Option<ImageHolds>, EngineError> {
        // `-a`: intermediate images of a build count as children too.
        let listed = self.call("list all images", argv(&["image", "ls", "-a", "-q", "--no-trunc"]), QUICK)?;
        let mut ids = parse_images(&listed)?;
        ids.sort();
        ids.dedup();
        if !ids.contains(image) {
            return Ok(None);
        }
        let mut args = argv(&["image", "inspect", "--format", IMAGE_TEMPLATE, "--"]);
        args.extend(ids.iter().map(|id| id.as_str().to_owned()));
        let rows = parse_image_rows(&self.call_limited("inspect images", args, QUICK, SNAPSHOT_OUTPUT)?)?;
        Ok(holds_of(image, &rows))
    }

    /// The image's own row, or `None` when docker says there is no such
    /// image (exit 1 of `docker image inspect`).
    fn image_row(&self, image: &ImageId) -> Result<Option<ImageRow>, EngineError> {
        let args = argv(&["image", "inspect", "--format", IMAGE_TEMPLATE, "--", image.as_str()]);
        Ok(match self.call_unless_absent("inspect image", args)? {
            Some(out) => parse_image_rows(&out)?.into_iter().find(|row| &row.id == image),
            None => None,
        })
    }

    /// [`crate::docker::Engine::remove_image`]: never -f, never prune. A
    /// refusal is [`EngineError::Refused`] only once the image is seen as
    /// it was (see the module comment).
    pub(super) fn remove_image_verified(&self, image: &ImageId) -> Result<(), EngineError> {
        let before = self.image_row(image)?;
        let error =
            match self.call("remove image", argv(&["image", "rm", "--no-prune", image.as_str()]), QUICK) {
                Ok(_) => return Ok(()),
                Err(error) => error,
            };
        let said_no = matches!(&error, EngineError::Call { execution, .. } if engine_said_no(execution));
        if said_no && before.is_some() && matches!(self.image_row(image), Ok(after) if after == before) {
            return Err(EngineError::Refused { step: "remove image" });
        }
        Err(error)
    }
}
