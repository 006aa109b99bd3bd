//! `stop`: a managed app's recorded containers stopped gracefully, with
//! restart policy no, so they stay down until a start plan. Runs in the
//! root helper (derive at prepare and again at execute; act at execute).
//!
//! Security invariant enforced here: it acts only on an app we recorded
//! whose labelled container set is exactly the recorded one, and stops
//! exactly the recorded container ids (nothing unmanaged can be slipped in
//! by labelling it).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange, marked};
use crate::control::app_record::AppState;
use crate::control::scope::Scope;
use crate::control::validate::{Context, HostFacts, app_name, exact_keys, owned, recorded};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{Action, AppName, Code, ContainerId, Refusal, refuse};

/// A stop's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stop {
    pub app: AppName,
    /// Exactly the recorded container ids, sorted.
    pub containers: Vec<ContainerId>,
    pub container_names: Vec<String>,
}

impl PlanAction for Stop {
    const ACTION: Action = Action::Stop;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        _facts: &dyn HostFacts,
    ) -> Result<(Stop, Impact), Refusal> {
        exact_keys(params, Action::Stop)?;
        let app = app_name(params)?;
        // A stopped record whose containers run again (an operator started them
        // by hand) can be stopped too: that brings record and engine together.
        let record = recorded(&app, ctx)?;
        if record.state == AppState::NeedsInspection {
            return refuse(
                Code::AppNotRunning,
                format!(
                    "{app} needs inspection: after an operator's resolve, a remove_app plan cleans it up."
                ),
            );
        }
        let record = owned(&app, record, ctx)?;
        let any_running =
            ctx.snapshot.containers.iter().any(|c| record.containers.contains(&c.id) && c.state == "running");
        if !any_running {
            return refuse(Code::AppNotRunning, format!("No container of {app} is running."));
        }
        let mut containers = record.containers.clone();
        containers.sort();
        let mut names: Vec<String> = ctx
            .snapshot
            .containers
            .iter()
            .filter(|c| containers.contains(&c.id))
            .map(|c| c.name.clone())
            .collect();
        names.sort();
        let impact = Impact {
            target: format!("app {app}"),
            containers_touched: names.iter().map(|n| format!("{n} (restart=no, graceful stop)")).collect(),
            data_volumes_deleted: false,
            shared_nginx_changed: false,
            rollback: "None automatic: the containers stay stopped with restart policy no; starting them \
                       again is a separate, reviewed change: a start plan for this app, which the operator \
                       approves."
                .into(),
        };
        Ok((Stop { app, containers, container_names: names }, impact))
    }

    fn app(&self) -> Option<&AppName> {
        Some(&self.app)
    }

    fn scope(&self) -> Scope<'_> {
        Scope::App { names: self.app.names(), recorded: &self.containers, own_states: true }
    }

    fn review(&self, out: &mut String) {
        let _ = writeln!(out, "Before   app {} running", esc(self.app.as_str()));
        let _ = writeln!(out, "After    these containers stopped, restart policy no:");
        for (name, id) in self.container_names.iter().zip(&self.containers) {
            let _ = writeln!(out, "  {} {}", esc(name), id);
        }
    }

    fn act<E: Engine>(&self, engine: &E, _progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        engine
            .stop(&self.containers)
            .map(|()| Effect::from(self.containers.iter().map(|c| c.to_string()).collect::<Vec<_>>()))
    }

    fn record(&self, done: &Done<'_>) -> Vec<RecordChange> {
        marked(&self.app, done.state_if_ok(AppState::Stopped))
    }
}
