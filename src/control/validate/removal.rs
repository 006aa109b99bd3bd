//! Validation of the two removals: remove_image (a local image volce-lab
//! pulled for an app) and remove_app (a recorded app, in any state, for
//! good). Pure, like the rest of `validate`; runs in the root helper at
//! prepare and again at execute.
//!
//! Security invariants enforced here:
//! - remove_image needs a full id that an app volce-lab deployed has used
//!   (recorded in its app record) and that no container, running or
//!   stopped, uses now: an image volce-lab has no claim on is never removed,
//!   however the request is worded or approved; nor one docker would
//!   refuse without force (images built on it, several tags, references in
//!   several repositories), each refused with its own code, so that a plan
//!   docker is bound to refuse is never made; nor one an app keeps for
//!   rollback (its record's kept versions name it);
//! - remove_app acts only on an app we recorded, in any state, and only on
//!   its recorded containers that carry its label (or, for an app left
//!   `needs_inspection` by its failed deploy, those carrying that deploy's
//!   unique plan label), its own two networks and its directory under the
//!   state directory; a container labelled with the app that we did not
//!   record refuses it (never adopted, never removed); it never names a
//!   volume or an image.

use serde_json::{Map, Value};

use super::{Context, HostFacts, app_name, exact_keys, string};
use crate::control::app_record::AppState;
use crate::control::plan::{Impact, Payload};
use crate::vocab::Action;
use crate::vocab::{Code, Container, ContainerId, ImageId, LABEL_PLAN, Refusal, refuse};

pub(super) fn remove_image(
    params: &Map<String, Value>,
    ctx: &Context<'_>,
    facts: &dyn HostFacts,
) -> Result<(Payload, Impact), Refusal> {
    exact_keys(params, Action::RemoveImage)?;
    let raw = string(params, "image_id")?;
    let Some(image_id) = ImageId::parse(raw) else {
        return refuse(Code::InvalidImageId, "image_id must be a full id: sha256: and 64 lowercase hex.");
    };
    if !ctx.snapshot.images.contains(&image_id) {
        return refuse(Code::ImageNotFound, "No local image has this id.");
    }
    let mut used_by: Vec<String> =
        ctx.apps.values().filter(|a| a.image_ids.contains(&image_id)).map(|a| a.app.to_string()).collect();
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
    Ok((Payload::RemoveImage { image_id, used_by }, impact))
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

pub(super) fn remove_app(
    params: &Map<String, Value>,
    ctx: &Context<'_>,
) -> Result<(Payload, Impact), Refusal> {
    exact_keys(params, Action::RemoveApp)?;
    let app = app_name(params)?;
    let purge_data = match params.get("purge_data") {
        None => false,
        Some(Value::Bool(purge)) => *purge,
        Some(_) => return refuse(Code::InvalidParameters, "purge_data must be true or false."),
    };
    let Some(record) = ctx.apps.get(app.as_str()) else {
        return refuse(Code::AppNotFound, format!("{app} is not an app that volce-lab deployed."));
    };
    let labelled: Vec<_> = ctx.snapshot.containers.iter().filter(|c| c.app() == Some(app.as_str())).collect();
    // Ours: recorded, or left by the failed deploy that made the record
    // (its ids were never reported, but every object it made carries its
    // unique plan id); an operator has resolved that plan before any new
    // plan is accepted.
    let ours = |c: &Container| {
        record.containers.contains(&c.id)
            || (record.state == AppState::NeedsInspection
                && c.labels.get(LABEL_PLAN).map(String::as_str) == Some(record.plan_id.as_str()))
    };
    if labelled.iter().any(|c| !ours(c)) {
        return refuse(
            Code::ContainerSetChanged,
            format!("A container labelled as {app} is not one volce-lab recorded; an operator must inspect."),
        );
    }
    // The directory is always the one under our state directory, whatever
    // the record says.
    let app_dir = ctx.apps_dir.join(app.as_str());
    if record.app_dir != app_dir {
        return refuse(Code::ContainerSetChanged, format!("The record of {app} names another directory."));
    }
    let mut present = labelled;
    present.sort_by(|a, b| a.id.cmp(&b.id));
    let containers: Vec<ContainerId> = present.iter().map(|c| c.id.clone()).collect();
    let running: Vec<ContainerId> = present
        .iter()
        .filter(|c| c.state != "exited" && c.state != "created" && c.state != "dead")
        .map(|c| c.id.clone())
        .collect();
    let container_names: Vec<String> = present.iter().map(|c| c.name.clone()).collect();
    let names = app.names();
    let networks: Vec<String> = [names.network.clone(), names.edge_network.clone()]
        .into_iter()
        .filter(|n| ctx.snapshot.networks.contains(n))
        .collect();
    let mut touched: Vec<String> = present
        .iter()
        .map(|c| {
            let stop = if running.contains(&c.id) { "stopped, then " } else { "" };
            format!("{} ({stop}removed)", c.name)
        })
        .collect();
    touched.extend(networks.iter().map(|n| format!("network {n} (removed)")));
    touched.push(format!("{} (removed)", app_dir.display()));
    let data = record.data.clone();
    if let Some(data) = &data {
        touched.push(if purge_data {
            format!(
                "data {} (DELETED FOR GOOD: everything the app kept at {}, a {} MiB image)",
                data.image.display(),
                data.path,
                data.max_mib
            )
        } else {
            format!("data {} (unmounted and kept: a deploy of {app} re-attaches it)", data.image.display())
        });
    }
    let impact = Impact {
        target: format!(
            "app {app} ({}, 127.0.0.1:{}): removed for good, freeing its name, port and quota slot",
            record.state.as_str(),
            record.host_port
        ),
        containers_touched: touched,
        data_volumes_deleted: purge_data && data.is_some(),
        shared_nginx_changed: false,
        rollback:
            "None: a removed app comes back only by a new deploy. Its images stay (remove_image) and no \
                   docker volume is removed; its data is kept unless the plan purges it."
                .into(),
    };
    let purge_data = purge_data && data.is_some();
    Ok((
        Payload::RemoveApp { app, containers, running, container_names, networks, app_dir, data, purge_data },
        impact,
    ))
}
