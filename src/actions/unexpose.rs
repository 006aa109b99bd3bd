//! `unexpose` (issue 39): an app's names taken off the operator's edge
//! again; the app keeps serving on its loopback port. Runs in the root
//! helper (derive at prepare and again at execute; act at execute).
//!
//! Security invariants enforced here: the agent names an app, nothing
//! else; only an app an expose put on the edge; always an operator's
//! approval (the fixed minimum), as for expose.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange, config_lines};
use super::edge::{review_names, taken_off_if_there};
use crate::control::app_record::AppState;
use crate::control::scope::Scope;
use crate::control::validate::{Context, HostFacts, app_name, exact_keys, owned, recorded};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{
    Action, AppName, Code, ContainerId, EDGE_CONTAINER, EdgeChange, Exposure, PlanId, Refusal, refuse,
};

/// An unexpose's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unexpose {
    pub app: AppName,
    /// The recorded container ids, sorted (the scope).
    pub containers: Vec<ContainerId>,
    /// What the app's record says the edge serves of it now.
    pub exposure: Exposure,
    /// The edge's new config; `None` when no edge container exists any
    /// more, and only the record forgets the names.
    pub change: Option<EdgeChange>,
}

impl PlanAction for Unexpose {
    const ACTION: Action = Action::Unexpose;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        _facts: &dyn HostFacts,
    ) -> Result<(Unexpose, Impact), Refusal> {
        exact_keys(params, Action::Unexpose)?;
        let app = app_name(params)?;
        let record = recorded(&app, ctx)?;
        if record.state == AppState::NeedsInspection {
            return refuse(
                Code::AppNotRunning,
                format!("{app} needs inspection: nothing changes it until an operator has resolved it."),
            );
        }
        let record = owned(&app, record, ctx)?;
        let Some(exposure) = record.exposed.clone() else {
            return refuse(Code::AppNotExposed, format!("{app}'s names are not on the HTTPS edge."));
        };
        let mut containers = record.containers.clone();
        containers.sort();
        let change = taken_off_if_there(ctx, &app, &exposure)?;
        let touched = match &change {
            Some(change) => vec![format!(
                "{EDGE_CONTAINER} (the edge: its nginx.conf replaced, tested and reloaded, then it leaves {})",
                change.disconnect.as_deref().unwrap_or("")
            )],
            None => Vec::new(),
        };
        let impact = Impact {
            target: format!("app {app}: its names {} off the HTTPS edge", exposure.describe()),
            containers_touched: touched,
            data_volumes_deleted: false,
            shared_nginx_changed: false,
            rollback:
                "If nginx refuses the new configuration, the old one is put back and reloaded and the plan \
                       ends failed. Later: an expose plan."
                    .into(),
        };
        Ok((Unexpose { app, containers, exposure, change }, impact))
    }

    fn app(&self) -> Option<&AppName> {
        Some(&self.app)
    }

    fn scope(&self) -> Scope<'_> {
        Scope::App { names: self.app.names(), recorded: &self.containers, own_states: false }
    }

    fn review(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "App      {} (its containers are not touched; it keeps its loopback port)",
            esc(self.app.as_str())
        );
        review_names(out, &self.exposure);
        match &self.change {
            Some(change) => {
                let _ = writeln!(
                    out,
                    "Edge     {EDGE_CONTAINER} stops serving these names; its nginx.conf becomes:"
                );
                config_lines(out, &change.config);
            }
            None => {
                let _ = writeln!(
                    out,
                    "Edge     no {EDGE_CONTAINER} container exists: nothing serves these names; only the \
                     app's record forgets them"
                );
            }
        }
    }

    fn act<E: Engine>(&self, engine: &E, _progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        let Some(change) = &self.change else { return Ok(Effect::from(Vec::<String>::new())) };
        engine.edge_apply(change)?;
        Ok(Effect::from(vec![EDGE_CONTAINER.to_owned()]))
    }

    fn record(&self, done: &Done<'_>) -> Vec<RecordChange> {
        match done.apps.get(self.app.as_str()) {
            Some(record) if done.ok() => {
                let mut record = record.clone();
                record.exposed = None;
                record.plan_id = done.plan_id.clone();
                vec![RecordChange::Put(Box::new(record))]
            }
            _ => Vec::new(),
        }
    }

    fn rolled_back(cause: &EngineError, id: &PlanId) -> Refusal {
        super::rolled_back::edge(cause, id)
    }
}
