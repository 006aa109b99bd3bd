//! `remove_image`: a local image volce-lab pulled for an app, removed by id
//! with `docker image rm --no-prune`, never forced. Runs in the root helper
//! (derive at prepare and again at execute; act at execute).
//!
//! Security invariants enforced here: it needs a full id that an app
//! volce-lab deployed has used (recorded in its app record) and that no
//! container, running or stopped, uses now: an image volce-lab has no claim
//! on is never removed, however the request is worded or approved; nor one
//! docker would refuse without force (images built on it, several tags,
//! references in several repositories), each refused with its own code, so
//! that a plan docker is bound to refuse is never made; nor one an app keeps
//! for rollback (its record's kept versions name it).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange};
use crate::control::scope::Scope;
use crate::control::validate::{Context, HostFacts, exact_keys, string};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{Action, AppName, Code, ImageId, Refusal, refuse};

/// A remove_image's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoveImage {
    pub image_id: ImageId,
    /// The apps volce-lab deployed whose containers used this image (its
    /// claim on it), sorted; never empty for a plan made by this version.
    /// Omitted when empty, so plans stored before it still match their digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub used_by: Vec<String>,
}

impl PlanAction for RemoveImage {
    const ACTION: Action = Action::RemoveImage;
    const HELD_ENDS_FAILED: bool = true;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        facts: &dyn HostFacts,
    ) -> Result<(RemoveImage, Impact), Refusal> {
        exact_keys(params, Action::RemoveImage)?;
        let raw = string(params, "image_id")?;
        let Some(image_id) = ImageId::parse(raw) else {
            return refuse(Code::InvalidImageId, "image_id must be a full id: sha256: and 64 lowercase hex.");
        };
        if !ctx.snapshot.images.contains(&image_id) {
            return refuse(Code::ImageNotFound, "No local image has this id.");
        }
        let mut used_by: Vec<String> = ctx
            .apps
            .values()
            .filter(|a| a.image_ids.contains(&image_id))
            .map(|a| a.app.to_string())
            .collect();
        // An app removed with remove_app keeps its claim on its images.
        used_by.extend(ctx.retired.get(&image_id).cloned());
        used_by.sort();
        used_by.dedup();
        if used_by.is_empty() {
            return refuse(
                Code::ImageNotManaged,
                "No app that volce-lab deployed has used this image; volce-lab only removes images it pulled for its apps.",
            );
        }
        // Checked before its users: the reason that outlives the container.
        let keeper = ctx.apps.values().find_map(|a| {
            a.kept_versions.iter().find(|v| v.image_id.as_ref() == Some(&image_id)).map(|v| (a, v))
        });
        if let Some((record, version)) = keeper {
            return refuse(
                Code::ImageKeptForRollback,
                format!(
                    "{} keeps this image for rollback (its kept version {} of `{}`), so volce-lab does not remove \
                     it; nothing was changed. It can be removed once {} no longer keeps that version (later \
                     updates push it out beyond the policy's keep_versions, or remove_app removes the app).",
                    record.app, version.app_image, version.image_key, record.app
                ),
            );
        }
        let users = ctx.snapshot.containers.iter().filter(|c| c.image_id == image_id).count();
        if users > 0 {
            return refuse(
                Code::ImageInUse,
                format!(
                    "{users} container(s), running or stopped, use this image, so docker would refuse to remove \
                     it; nothing was changed. Remove the app that uses it first (remove_app), or, for a \
                     container volce-lab did not create, ask the operator; then prepare a new plan."
                ),
            );
        }
        refuse_held(&image_id, facts)?;
        let impact = Impact {
            target: format!("local image {image_id}, used by app {}", used_by.join(", ")),
            containers_touched: vec![],
            data_volumes_deleted: false,
            shared_nginx_changed: false,
            rollback:
                "None: the image comes back only by pulling it again by digest. Registries are not touched."
                    .into(),
        };
        Ok((RemoveImage { image_id, used_by }, impact))
    }

    fn app(&self) -> Option<&AppName> {
        None
    }

    fn scope(&self) -> Scope<'_> {
        Scope::Image { image: &self.image_id }
    }

    fn review(&self, out: &mut String) {
        let _ = writeln!(out, "Before   local image {} present, used by no container", self.image_id);
        let apps: Vec<String> = self.used_by.iter().map(|a| esc(a)).collect();
        let _ = writeln!(out, "         it was used by app(s) volce-lab deployed: {}", apps.join(", "));
        let _ = writeln!(out, "After    removed with docker image rm --no-prune (never forced)");
    }

    fn act<E: Engine>(&self, engine: &E, _progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        engine.remove_image(&self.image_id).map(|()| Effect::from(vec![]))
    }

    fn record(&self, done: &Done<'_>) -> Vec<RecordChange> {
        if done.ok() { vec![RecordChange::DropClaim(self.image_id.clone())] } else { Vec::new() }
    }

    fn refused_because() -> &'static str {
        "an image built on it, a new tag or a container using it"
    }
}

/// Refuses what docker would refuse to remove by id without force, besides
/// containers: images built on this one, and references docker does not
/// drop by id. Names only counts and ids: a tag is someone else's text.
fn refuse_held(image_id: &ImageId, facts: &dyn HostFacts) -> Result<(), Refusal> {
    let Some(holds) = facts.image_holds(image_id)? else {
        return refuse(Code::ImageNotFound, "No local image has this id.");
    };
    if let Some(first) = holds.children.first() {
        let n = holds.children.len();
        return refuse(
            Code::ImageHasChildren,
            format!(
                "{n} other local image(s) are built on this image (the first is {first}), so docker would \
                 refuse to remove it and volce-lab never forces; nothing was changed. Ask the operator \
                 whether those images are still needed; once they are gone, prepare a new plan."
            ),
        );
    }
    if !holds.references_removable {
        return refuse(
            Code::ImageHasReferences,
            format!(
                "This image carries {} tag(s) and {} digest reference(s); docker removes an image by id \
                 only when it has at most one tag and all its references name one repository, and \
                 volce-lab never forces; nothing was changed. Ask the operator to remove the extra tags \
                 on the server (docker image rm of each tag not wanted), then prepare a new plan.",
                holds.tags, holds.digests
            ),
        );
    }
    Ok(())
}
