//! What an execution leaves in the app records: what the plan made true,
//! or `needs_inspection` for the app it touched when the engine failed.
//! Runs as root inside the host helper, within the transaction that records
//! the outcome (no engine call here).

use std::collections::BTreeMap;

use crate::control::app_record::{AppRecord, AppState, ImageUse};
use crate::control::plan::{Payload, Plan};
use crate::docker::EngineError;
use crate::vocab::{ContainerId, Refusal, UpdateSpec};

use super::super::mark_app;

/// The app records after an execution: what the plan made true, or
/// `needs_inspection` for the app it touched when the engine failed.
pub(super) fn record_apps(
    tx: &crate::store::Tx<'_>,
    plan: &Plan,
    apps: &BTreeMap<String, AppRecord>,
    result: &Result<Vec<String>, EngineError>,
    after: Option<&crate::vocab::Snapshot>,
    now: i64,
) -> Result<(), Refusal> {
    let ok = result.is_ok();
    // A restart rolled back did change something: the app it found
    // (running, or crashed) is now stopped with restart=no, verified, as a
    // stop plan leaves it; the record says so, and a start plan is its way
    // back.
    if let (Payload::Restart { app, .. }, Err(EngineError::RolledBack { .. })) = (&plan.payload, result) {
        return mark_app(tx, app.as_str(), AppState::Stopped, &plan.id, now);
    }
    if result.as_ref().is_err_and(EngineError::changed_nothing) {
        // Nothing changed on the server, so no record changes either: a
        // deploy refused before its first step holds no name, port or
        // quota slot, and the app whose nginx.conf was restored is still
        // running exactly as recorded.
        return Ok(());
    }
    match &plan.payload {
        Payload::Deploy { image_key, spec, .. } => {
            let ids: Vec<_> = result
                .as_ref()
                .map(|ids| ids.iter().filter_map(|i| ContainerId::parse(i)).collect())
                .unwrap_or_default();
            let mut image_ids: Vec<_> = after
                .map(|s| {
                    s.containers.iter().filter(|c| ids.contains(&c.id)).map(|c| c.image_id.clone()).collect()
                })
                .unwrap_or_default();
            image_ids.sort();
            image_ids.dedup();
            let record = AppRecord {
                app: spec.app.clone(),
                state: if ok { AppState::Running } else { AppState::NeedsInspection },
                host_port: spec.host_port,
                container_port: spec.container_port,
                server_name: spec.server_name.clone(),
                image_key: image_key.clone(),
                app_image: spec.app_image.clone(),
                gateway_image: spec.gateway_image.clone(),
                nginx_config: spec.nginx_config.clone(),
                app_dir: spec.app_dir.clone(),
                app_container: ids.first().cloned(),
                gateway_container: ids.get(1).cloned(),
                containers: ids,
                plan_id: plan.id.clone(),
                image_ids,
                upstream: None,
                image_history: vec![ImageUse {
                    image_key: image_key.clone(),
                    app_image: spec.app_image.clone(),
                    since: Some(now),
                }],
                configuration: spec.env_file.clone(),
            };
            tx.put_app(&record, now)?;
        }
        Payload::NginxConfig { app, server_name, new_config, .. } => {
            if let Some(old) = apps.get(app.as_str()) {
                let mut record = old.clone();
                record.plan_id = plan.id.clone();
                if ok {
                    record.server_name = server_name.clone();
                    record.nginx_config = new_config.clone();
                } else {
                    record.state = AppState::NeedsInspection;
                }
                tx.put_app(&record, now)?;
            }
        }
        Payload::Stop { app, .. } => {
            mark_app(
                tx,
                app.as_str(),
                if ok { AppState::Stopped } else { AppState::NeedsInspection },
                &plan.id,
                now,
            )?;
        }
        Payload::RemoveImage { image_id, .. } if ok => tx.drop_claim(image_id)?,
        Payload::RemoveImage { .. } => {}
        // Removed: the record goes, freeing the name, the port and the
        // quota slot. Failed: nobody knows what is left of it.
        // Its claim on its images stays (remove_image may take them later).
        Payload::RemoveApp { app, .. } if ok => {
            if let Some(record) = apps.get(app.as_str()) {
                tx.retire_claims(app.as_str(), &record.image_ids, &plan.id, now)?;
            }
            tx.delete_app(app.as_str())?
        }
        Payload::RemoveApp { app, .. } => {
            mark_app(tx, app.as_str(), AppState::NeedsInspection, &plan.id, now)?
        }
        Payload::Start { app, .. } | Payload::Restart { app, .. } => {
            let state = if ok { AppState::Running } else { AppState::NeedsInspection };
            mark_app(tx, app.as_str(), state, &plan.id, now)?;
        }
        Payload::Update { image_key, spec, .. } => {
            if let Some(old) = apps.get(spec.app.as_str()) {
                let mut record = old.clone();
                record.plan_id = plan.id.clone();
                match result.as_ref().ok().and_then(|ids| ids.first()).and_then(|i| ContainerId::parse(i)) {
                    Some(new) => updated(&mut record, image_key, spec, new, after, now),
                    None => record.state = AppState::NeedsInspection,
                }
                tx.put_app(&record, now)?;
            }
        }
    }
    Ok(())
}

/// The record of an app whose update completed: the new container in the
/// old one's place, the new image and config, and the image history.
fn updated(
    record: &mut AppRecord,
    image_key: &str,
    spec: &UpdateSpec,
    new: ContainerId,
    after: Option<&crate::vocab::Snapshot>,
    now: i64,
) {
    if record.image_history.is_empty() {
        // A record from before the history: what ran, since when unknown.
        record.image_history.push(ImageUse {
            image_key: record.image_key.clone(),
            app_image: record.app_image.clone(),
            since: None,
        });
    }
    record.image_history.push(ImageUse {
        image_key: image_key.to_owned(),
        app_image: spec.app_image.clone(),
        since: Some(now),
    });
    record.containers.retain(|c| *c != spec.old_app);
    record.containers.insert(0, new.clone());
    // The claim on the old image stays (remove_image may take it once no
    // container uses it); the new one is added.
    if let Some(image) =
        after.and_then(|s| s.containers.iter().find(|c| c.id == new)).map(|c| c.image_id.clone())
    {
        record.image_ids.push(image);
        record.image_ids.sort();
        record.image_ids.dedup();
    }
    record.app_container = Some(new);
    record.state = AppState::Running;
    record.image_key = image_key.to_owned();
    record.app_image = spec.app_image.clone();
    record.nginx_config = spec.new_config.clone();
    record.upstream = Some(spec.container_name.clone());
    record.configuration = spec.env_file.clone();
}
