//! What an execution leaves in the app records: what the plan made true,
//! or `needs_inspection` for the app it touched when the engine failed.
//! Runs as root inside the host helper, within the transaction that records
//! the outcome (no engine call here).

use std::collections::BTreeMap;

use crate::control::app_record::{AppRecord, AppState, ImageUse, KeptVersion};
use crate::control::plan::{Payload, Plan};
use crate::docker::EngineError;
use crate::vocab::{ContainerId, ImageRef, Refusal, UpdateSpec};

use super::super::mark_app;

/// The app records after an execution: what the plan made true, or
/// `needs_inspection` for the app it touched when the engine failed.
pub(super) fn record_apps(
    tx: &crate::store::Tx<'_>,
    plan: &Plan,
    apps: &BTreeMap<String, AppRecord>,
    result: &Result<Vec<String>, EngineError>,
    after: Option<&crate::vocab::Snapshot>,
    keep: usize,
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
                also_server_names: spec.also_server_names.clone(),
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
                kept_versions: vec![],
                health_path: Some(spec.health_path.clone()),
                data: spec.data.clone(),
            };
            tx.put_app(&record, now)?;
        }
        Payload::NginxConfig { app, server_name, also_server_names, new_config, .. } => {
            if let Some(old) = apps.get(app.as_str()) {
                let mut record = old.clone();
                record.plan_id = plan.id.clone();
                if ok {
                    record.server_name = server_name.clone();
                    record.also_server_names = also_server_names.clone();
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
        Payload::Update { image_key, spec, replaces, .. } => {
            switched(tx, plan, apps, result, image_key, spec, replaces.as_ref(), after, keep, now)?
        }
        Payload::Rollback { image_key, spec, replaces, .. } => {
            switched(tx, plan, apps, result, image_key, spec, Some(replaces), after, keep, now)?
        }
    }
    Ok(())
}

/// The record after an update or a rollback (one switch): switched, or
/// `needs_inspection` when the engine failed.
#[allow(clippy::too_many_arguments)]
fn switched(
    tx: &crate::store::Tx<'_>,
    plan: &Plan,
    apps: &BTreeMap<String, AppRecord>,
    result: &Result<Vec<String>, EngineError>,
    image_key: &str,
    spec: &UpdateSpec,
    replaces: Option<&KeptVersion>,
    after: Option<&crate::vocab::Snapshot>,
    keep: usize,
    now: i64,
) -> Result<(), Refusal> {
    let Some(old) = apps.get(spec.app.as_str()) else { return Ok(()) };
    let mut record = old.clone();
    record.plan_id = plan.id.clone();
    match result.as_ref().ok().and_then(|ids| ids.first()).and_then(|i| ContainerId::parse(i)) {
        Some(new) => {
            // An update planned before versions were kept: the record says
            // what it replaced, but not its image id or health path.
            let replaced = replaces.cloned().unwrap_or_else(|| KeptVersion {
                image_key: record.image_key.clone(),
                app_image: record.app_image.clone(),
                image_id: None,
                container_port: record.container_port,
                health_path: record.health_path.clone().unwrap_or_default(),
            });
            updated(&mut record, image_key, spec, new, after, now);
            record.kept_versions = kept(&record.kept_versions, replaced, &spec.app_image, keep);
        }
        None => record.state = AppState::NeedsInspection,
    }
    tx.put_app(&record, now)?;
    Ok(())
}

/// The kept versions once `running` runs and `replaced` was left: the one
/// left first, then the earlier ones, never the one that runs (a rollback
/// takes its version out of the list) nor one twice, at most `keep`.
pub(super) fn kept(
    earlier: &[KeptVersion],
    replaced: KeptVersion,
    running: &ImageRef,
    keep: usize,
) -> Vec<KeptVersion> {
    let mut list = vec![replaced];
    for version in earlier {
        if !list.iter().any(|v| v.app_image == version.app_image) {
            list.push(version.clone());
        }
    }
    list.retain(|v| v.app_image != *running);
    list.truncate(keep);
    list
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
    record.health_path = Some(spec.health_path.clone());
    record.data = spec.data.clone();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(n: char) -> KeptVersion {
        KeptVersion {
            image_key: format!("web{n}"),
            app_image: ImageRef::parse(&format!("registry.example/web@sha256:{}", n.to_string().repeat(64)))
                .unwrap(),
            image_id: None,
            container_port: 8080,
            health_path: Default::default(),
        }
    }

    /// Tried: updates a -> b -> c -> d with keep 2, then a rollback to c
    /// (d is kept in turn), and an update back to a kept version.
    #[test]
    fn the_kept_list_is_newest_first_bounded_and_never_the_running_one() {
        let (a, b, c, d) = (version('a'), version('b'), version('c'), version('d'));
        let mut list = kept(&[], a.clone(), &b.app_image, 2);
        assert_eq!(list, std::slice::from_ref(&a));
        list = kept(&list, b.clone(), &c.app_image, 2);
        assert_eq!(list, [b.clone(), a.clone()]);
        list = kept(&list, c.clone(), &d.app_image, 2);
        assert_eq!(list, [c.clone(), b.clone()], "a falls out beyond keep_versions");
        // rollback: d runs c again, so c leaves the list and d joins it.
        list = kept(&list, d.clone(), &c.app_image, 2);
        assert_eq!(list, [d.clone(), b.clone()]);
        // An update (not a rollback) to b: b is not kept while it runs.
        list = kept(&list, c.clone(), &b.app_image, 10);
        assert_eq!(list, [c, d]);
    }
}
