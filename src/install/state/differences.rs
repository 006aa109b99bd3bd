//! What the state database and the engine disagree on after a restore, and
//! the command that ends each difference (issue 46, item 2): `state diff`
//! (read-only; `state restore` prints it too) and `state remove-container`,
//! the one way out no other command gives. Runs as root on the operator's
//! terminal.
//!
//! A backup is older than the engine: what happened after it (a deploy, a
//! removal, an approval executed) is on the engine and not in the restored
//! record. The differences are found by volce-lab's own marks only: the
//! app label on each container it creates and the plan label naming the
//! plan that made it. A container without them is none of volce-lab's
//! business and is never listed, let alone removed.
//!
//! Security invariant: `remove_container` removes exactly one container,
//! one that carries volce-lab's app label and whose id no app record holds,
//! found again in a fresh snapshot; only while the agent is paused (so no
//! deploy can be half-way, its containers made and not yet recorded) and
//! no plan executes; recorded in the audit trail before the engine is
//! asked. There is no adopting: a record is written only by a plan
//! volce-lab executed and verified, so an unrecorded container is removed
//! and the app deployed again by a plan you approve.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::control::app_record::AppRecord;
use crate::docker::Engine;
use crate::host::request_row::{self, Caller};
use crate::host::{Decision, HostPaths, drift, pause};
use crate::store::{AuditOperation, StoredPlan};
use crate::text::for_terminal as esc;
use crate::vocab::{Action, Code, ContainerId, LABEL_PLAN, PlanId, PlanState, Refusal, Snapshot};
use crate::wire::answers::app_state::DriftReason;

/// One thing the record and the engine disagree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// A container carrying volce-lab's app label whose id no app record
    /// holds: made after the backup, or by a plan the record forgot.
    Unrecorded { id: ContainerId, name: String, state: String, app: String },
    /// A pending plan (approved or not) whose label the engine shows: it
    /// ran after the backup, and the record does not know.
    PlanRan { plan: PlanId, action: Action, approved: bool },
    /// A plan the record holds executing or needing inspection.
    PlanOpen { plan: PlanId, action: Action, state: PlanState },
    /// An app record whose recorded containers the engine does not hold.
    ContainersMissing { app: String, missing: Vec<String> },
}

impl Difference {
    /// What differs, in one line.
    pub fn line(&self) -> String {
        match self {
            Difference::Unrecorded { id, name, state, app } => format!(
                "container {} {id} ({}) carries app label {} but no app record holds it",
                esc(name.trim_start_matches('/')),
                esc(state),
                esc(app)
            ),
            Difference::PlanRan { plan, action, approved } => format!(
                "plan {plan} ({}) is recorded pending{} but the engine carries its label: it ran after the backup",
                action.as_str(),
                if *approved { " and approved" } else { "" }
            ),
            Difference::PlanOpen { plan, action, state } => {
                format!("plan {plan} ({}) is recorded {}", action.as_str(), state.as_str())
            }
            Difference::ContainersMissing { app, missing } => {
                format!("app {} is recorded, but of its containers: {}", esc(app), esc(&missing.join(", ")))
            }
        }
    }

    /// The command that ends it.
    pub fn way_out(&self) -> String {
        match self {
            Difference::Unrecorded { id, .. } => format!(
                "docker inspect {id}; then sudo volce-lab-host state remove-container {id} (stops and removes \
                 it; its app is deployed again by a plan you approve)"
            ),
            Difference::PlanRan { plan, .. } => format!(
                "sudo volce-lab-host reject {plan} --reason 'restored from a backup; it ran already' (it then \
                 never runs again)"
            ),
            Difference::PlanOpen { plan, .. } => {
                format!("sudo volce-lab-host show {plan}, then sudo volce-lab-host resolve {plan}")
            }
            Difference::ContainersMissing { app, .. } => format!(
                "ask the agent for a remove_app plan of {} and approve it (its data is kept unless the plan \
                 purges it), or for a deploy once it is removed",
                esc(app)
            ),
        }
    }
}

/// Holds the record (`apps`, the plans awaiting an operator) against the
/// engine's `snapshot`. Pure. The unrecorded containers come first: a
/// remove_app or a deploy of their app is refused while they stand.
pub fn differences(
    apps: &BTreeMap<String, AppRecord>,
    plans: &[StoredPlan],
    snapshot: &Snapshot,
) -> Vec<Difference> {
    let mut found: Vec<Difference> = snapshot
        .containers
        .iter()
        .filter_map(|c| {
            let app = c.app()?;
            let held = apps.values().any(|record| drift::is_recorded(record, c));
            (!held).then(|| Difference::Unrecorded {
                id: c.id.clone(),
                name: c.name.clone(),
                state: c.state.clone(),
                app: app.to_owned(),
            })
        })
        .collect();
    for stored in plans {
        let plan = &stored.plan;
        let labelled = snapshot
            .containers
            .iter()
            .any(|c| c.labels.get(LABEL_PLAN).map(String::as_str) == Some(plan.id.as_str()));
        match stored.state {
            PlanState::Pending if labelled => found.push(Difference::PlanRan {
                plan: plan.id.clone(),
                action: plan.action,
                approved: stored.approval.is_some(),
            }),
            PlanState::Executing | PlanState::NeedsInspection => found.push(Difference::PlanOpen {
                plan: plan.id.clone(),
                action: plan.action,
                state: stored.state,
            }),
            _ => {}
        }
    }
    for (name, record) in apps {
        let derived = drift::derive(record, snapshot);
        if derived.drift == Some(DriftReason::ContainersMissing) {
            found.push(Difference::ContainersMissing { app: name.clone(), missing: derived.differs });
        }
    }
    found
}

/// The operator's text: each difference and its way out, or that there is none.
pub fn render(found: &[Difference]) -> String {
    if found.is_empty() {
        return "The state database and the engine agree: every container carrying volce-lab's labels is \
                recorded, and no plan awaiting you is contradicted.\n"
            .to_owned();
    }
    let mut out = format!(
        "{} difference{} between the state database and the engine, each with its way out:\n",
        found.len(),
        if found.len() == 1 { "" } else { "s" }
    );
    for difference in found {
        let _ = writeln!(out, "- {}.\n  {}.", difference.line(), difference.way_out());
    }
    out.push_str("Run sudo volce-lab-host state diff again to check; then sudo volce-lab-host resume.\n");
    out
}

/// The store's record and the engine's snapshot, and what differs.
fn found(paths: &HostPaths, engine: &impl Engine, now: i64) -> Result<Vec<Difference>, Refusal> {
    let Some(mut store) = request_row::open_for_rows(paths)? else {
        return Err(Refusal::new(
            Code::StateUnavailable,
            "The state database cannot be opened (or there is none); `volce-lab-host doctor` says why. \
             Nothing was compared.",
        ));
    };
    let (apps, plans) = store.read(|tx| Ok::<_, Refusal>((tx.apps()?, tx.awaiting_plans(now)?)))?;
    drop(store);
    let snapshot = engine.snapshot().map_err(|error| {
        Refusal::new(
            Code::EngineUnavailable,
            format!("The engine could not be asked what it holds ({error}); nothing was compared. Check `docker ps`, then run this again."),
        )
    })?;
    Ok(differences(&apps, &plans, &snapshot))
}

/// `state diff`: read-only.
pub fn diff(paths: &HostPaths, engine: &impl Engine, now: i64) -> Result<String, Refusal> {
    Ok(render(&found(paths, engine, now)?))
}

/// `state remove-container CONTAINER`: `container` (an id or a name) must
/// be one `state diff` lists as unrecorded; `decide` is shown what will be
/// removed and confirms it (the terminal asks for its name).
pub fn remove_container(
    paths: &HostPaths,
    engine: &impl Engine,
    container: &str,
    caller: &Caller,
    now: i64,
    decide: impl FnOnce(&str, &str) -> Decision,
) -> Result<String, Refusal> {
    if pause::current(paths)?.is_none() {
        return Err(Refusal::new(
            Code::PauseRequired,
            "state remove-container runs only while the agent's requests are paused, so that no deploy is \
             half-way (its containers made, not yet recorded); nothing was removed. Run `sudo volce-lab-host \
             pause --reason cleanup` first, then this command again.",
        ));
    }
    let listed = found(paths, engine, now)?;
    let target = listed.iter().find_map(|difference| match difference {
        Difference::Unrecorded { id, name, app, .. }
            if id.as_str() == container || name.trim_start_matches('/') == container =>
        {
            Some((id.clone(), name.trim_start_matches('/').to_owned(), app.clone()))
        }
        _ => None,
    });
    let Some((id, name, app)) = target else {
        return Err(Refusal::new(
            Code::InvalidParameters,
            "No container with this id or name carries volce-lab's app label without an app record holding \
             it; nothing was removed. `sudo volce-lab-host state diff` lists those that do; volce-lab never \
             removes a container without its labels, nor one an app record holds.",
        ));
    };
    let Some(mut store) = request_row::open_for_rows(paths)? else {
        return Err(request_row::audit_unavailable());
    };
    if let Some((plan, action, _)) = store.read(|tx| tx.executing_plans()).map_err(|e| e.refusal())?.first() {
        return Err(super::executing(plan, *action, "a removal"));
    }
    let shown =
        format!("Removes container {} ({id}) of app {}: stopped, then removed.\n", esc(&name), esc(&app));
    if decide(&shown, &name) != Decision::Confirmed {
        return Err(Refusal::new(
            Code::NotConfirmed,
            "The container's name was not typed; nothing was removed. Run the command again and type it.",
        ));
    }
    let mut meta = caller.request(AuditOperation::StateRemoveContainer);
    meta.app = crate::vocab::AppName::parse(&app).map(|name| name.to_string());
    store.begin_request(meta);
    store.write(|tx| tx.record_state_command(now)).map_err(|_| request_row::audit_unavailable())?;
    drop(store);
    engine.remove_container(&id).map_err(|error| {
        Refusal::new(
            Code::EngineUnavailable,
            format!(
                "Removing container {id} failed ({error}); it was recorded as asked. Look with `docker inspect \
                 {id}`, then run this command again."
            ),
        )
    })?;
    Ok(format!(
        "Removed container {} ({id}) of app {}. Check the rest with sudo volce-lab-host state diff.\n",
        esc(&name),
        esc(&app)
    ))
}
