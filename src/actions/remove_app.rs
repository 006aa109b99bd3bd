//! `remove_app`: a recorded app, in any state, removed for good: its
//! containers (stopped first), its two networks and its directory; its data
//! unmounted and kept, or deleted when the plan says `purge_data`. Runs in
//! the root helper (derive at prepare and again at execute; act at execute).
//!
//! Security invariants enforced here: it acts only on an app we recorded,
//! in any state, and only on its recorded containers that carry its label
//! (or, for an app left `needs_inspection` by its failed deploy, those
//! carrying that deploy's unique plan label), its own two networks and its
//! directory under the state directory; a container labelled with the app
//! that we did not record refuses it (never adopted, never removed); it
//! never names a volume or an image.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange, marked};
use super::edge::taken_off_if_there;
use crate::control::app_record::{AppRecord, AppState};
use crate::control::scope::Scope;
use crate::control::validate::{Context, HostFacts, app_name, exact_keys};
use crate::docker::{AppRemoval, Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{
    Action, AppName, Code, Container, ContainerId, DataAfter, DataUse, EDGE_CONTAINER, EdgeChange,
    LABEL_PLAN, Refusal, refuse,
};

/// A remove_app's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoveApp {
    pub app: AppName,
    /// Exactly the recorded container ids that exist now, sorted.
    pub containers: Vec<ContainerId>,
    /// Those of them running now: stopped first (restart=no, graceful).
    pub running: Vec<ContainerId>,
    /// Their names, for the operator.
    pub container_names: Vec<String>,
    /// The app's two network names, those that exist now.
    pub networks: Vec<String>,
    /// The app's directory under the state directory.
    pub app_dir: PathBuf,
    /// The app's data: unmounted and kept, or (with `purge_data`)
    /// deleted. Omitted without data, so older plans keep their digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataUse>,
    /// The agent asked to delete the data for good; omitted when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub purge_data: bool,
    /// An exposed app's names taken off the HTTPS edge first (issue 39).
    /// Omitted when it is not exposed, so older plans keep their digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<EdgeChange>,
    /// Its accessories' data (issue 40), each with its credential: kept
    /// with `data`, or deleted with it. Omitted without accessories.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accessory_data: Vec<DataUse>,
}

impl PlanAction for RemoveApp {
    const ACTION: Action = Action::RemoveApp;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        _facts: &dyn HostFacts,
    ) -> Result<(RemoveApp, Impact), Refusal> {
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
        let present = ours_present(&app, record, ctx)?;
        // The directory is always the one under our state directory, whatever
        // the record says.
        let app_dir = ctx.apps_dir.join(app.as_str());
        if record.app_dir != app_dir {
            return refuse(
                Code::ContainerSetChanged,
                format!("The record of {app} names another directory."),
            );
        }
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
        let data = record.data.clone();
        let accessory_data: Vec<DataUse> = record.accessories.iter().map(|a| a.data.clone()).collect();
        // The edge joined the app's edge network: it leaves it first, or
        // the network could not be removed.
        let edge = match &record.exposed {
            Some(exposure) => taken_off_if_there(ctx, &app, exposure)?,
            None => None,
        };
        let payload = RemoveApp {
            app,
            containers,
            running,
            container_names,
            networks,
            app_dir,
            purge_data: purge_data && (data.is_some() || !accessory_data.is_empty()),
            data,
            edge,
            accessory_data,
        };
        let impact = payload.impact(record, &present, purge_data);
        Ok((payload, impact))
    }

    fn app(&self) -> Option<&AppName> {
        Some(&self.app)
    }

    fn scope(&self) -> Scope<'_> {
        Scope::App { names: self.app.names(), recorded: &self.containers, own_states: true }
    }

    fn review(&self, out: &mut String) {
        let _ = writeln!(out, "Before   app {} and these containers:", esc(self.app.as_str()));
        for (name, id) in self.container_names.iter().zip(&self.containers) {
            let note = if self.running.contains(id) { " (running: stopped first)" } else { "" };
            let _ = writeln!(out, "  {} {}{note}", esc(name), id);
        }
        let networks: Vec<String> = self.networks.iter().map(|n| esc(n)).collect();
        let _ = writeln!(out, "         networks: {}", networks.join(", "));
        let _ = writeln!(out, "         directory: {}", esc(&self.app_dir.display().to_string()));
        if let Some(change) = &self.edge {
            let names: Vec<String> = change.remove.iter().map(|n| esc(n.as_str())).collect();
            let _ = writeln!(
                out,
                "First    its names {} taken off the HTTPS edge (its config tested, reloaded)",
                names.join(", ")
            );
        }
        let _ =
            writeln!(out, "After    all of it removed and the app's record forgotten; no volume, no image");
        self.review_data(out);
    }

    fn act<E: Engine>(&self, engine: &E, _progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        if let Some(change) = &self.edge {
            engine.edge_apply(change)?;
        }
        let removal = AppRemoval {
            app: &self.app,
            containers: &self.containers,
            running: &self.running,
            networks: &self.networks,
            app_dir: &self.app_dir,
            data: self.data.as_ref(),
            accessory_data: &self.accessory_data,
            purge_data: self.purge_data,
        };
        engine
            .remove_app(&removal)
            .map(|()| Effect::from(self.containers.iter().map(|c| c.to_string()).collect::<Vec<_>>()))
    }

    /// Removed: the record goes, freeing the name, the port and the quota
    /// slot; its claim on its images stays (remove_image may take them
    /// later). Failed: nobody knows what is left of it.
    fn record(&self, done: &Done<'_>) -> Vec<RecordChange> {
        if !done.ok() {
            return marked(&self.app, AppState::NeedsInspection);
        }
        let image_ids = done.apps.get(self.app.as_str()).map(|r| r.image_ids.clone()).unwrap_or_default();
        vec![RecordChange::Forget { app: self.app.clone(), image_ids }]
    }

    /// Only its first step, the edge change, is ever undone: the app was
    /// not touched yet.
    fn rolled_back(cause: &EngineError, id: &crate::vocab::PlanId) -> Refusal {
        super::rolled_back::edge(cause, id)
    }

    fn data_after(&self) -> Option<DataAfter> {
        self.data.as_ref().map(|data| DataAfter { image: data.image.clone(), kept: !self.purge_data })
    }
}

impl RemoveApp {
    /// What the removal touches, in the operator's words; `asked_purge`:
    /// the agent's `purge_data`, said even when there is no data.
    fn impact(&self, record: &AppRecord, present: &[&Container], asked_purge: bool) -> Impact {
        let app = &self.app;
        let mut touched: Vec<String> = present
            .iter()
            .map(|c| {
                let stop = if self.running.contains(&c.id) { "stopped, then " } else { "" };
                format!("{} ({stop}removed)", c.name)
            })
            .collect();
        if self.edge.is_some() {
            touched.push(format!("{EDGE_CONTAINER} (the HTTPS edge: stops serving the app's names first)"));
        }
        touched.extend(self.networks.iter().map(|n| format!("network {n} (removed)")));
        touched.push(format!("{} (removed)", self.app_dir.display()));
        for data in self.data.iter().chain(&self.accessory_data) {
            touched.push(if asked_purge {
                format!(
                    "data {} (DELETED FOR GOOD: everything kept at {}, a {} MiB image{})",
                    data.image.display(),
                    data.path,
                    data.max_mib,
                    if self.data.as_ref() == Some(data) { "" } else { ", and the accessory's credential" }
                )
            } else {
                format!(
                    "data {} (unmounted and kept: a deploy of {app} re-attaches it)",
                    data.image.display()
                )
            });
        }
        Impact {
            target: format!(
                "app {app} ({}, 127.0.0.1:{}): removed for good, freeing its name, port and quota slot",
                record.state.as_str(),
                record.host_port
            ),
            containers_touched: touched,
            data_volumes_deleted: asked_purge && (self.data.is_some() || !self.accessory_data.is_empty()),
            shared_nginx_changed: false,
            rollback:
                "None: a removed app comes back only by a new deploy. Its images stay (remove_image) and \
                       no docker volume is removed; its data is kept unless the plan purges it."
                    .into(),
        }
    }

    /// What it does to the app's data: said in capitals when the plan
    /// deletes it, since that is the one change no plan can undo.
    fn review_data(&self, out: &mut String) {
        for data in self.data.iter().chain(&self.accessory_data) {
            let image = esc(&data.image.display().to_string());
            if self.purge_data {
                let _ = writeln!(
                    out,
                    "         DATA: THIS PLAN DELETES THE APP'S DATA FOR GOOD ({image}, {} MiB)",
                    data.max_mib
                );
            } else {
                let _ = writeln!(
                    out,
                    "         data: unmounted and kept at {image}; a deploy of the same app re-attaches it"
                );
            }
        }
    }
}

/// The app's containers on the engine, sorted by id: each labelled with it
/// must be ours, recorded, or left by the failed deploy that made the
/// record (its ids were never reported, but every object it made carries
/// its unique plan id; an operator has resolved that plan before any new
/// plan is accepted).
fn ours_present<'s>(
    app: &AppName,
    record: &AppRecord,
    ctx: &'s Context<'_>,
) -> Result<Vec<&'s Container>, Refusal> {
    let mut labelled: Vec<&Container> =
        ctx.snapshot.containers.iter().filter(|c| c.app() == Some(app.as_str())).collect();
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
    labelled.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(labelled)
}
