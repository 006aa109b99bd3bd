//! `nginx_config`: the names a running app's gateway serves, changed by a
//! new nginx.conf that nginx tests before it is loaded. Runs in the root
//! helper (derive at prepare and again at execute; act at execute).
//!
//! Security invariants enforced here: it acts only on an app we recorded,
//! running, whose labelled container set is exactly the recorded one, and
//! only on its recorded gateway; the new configuration is rendered by us
//! from validated names (`crate::nginx`), never text the agent sent.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::action::{Done, Effect, Impact, PlanAction, RecordChange, config_lines};
use crate::control::app_record::AppState;
use crate::control::scope::Scope;
use crate::control::validate::{
    Context, HostFacts, also_server_names, app_name, exact_keys, owned_running, server_name,
};
use crate::docker::{Engine, EngineError, ProgressSink};
use crate::text::for_terminal as esc;
use crate::vocab::{Action, AppName, Code, ContainerId, Refusal, ServerName, refuse, served_names};

/// An nginx_config's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NginxConfig {
    pub app: AppName,
    pub gateway: ContainerId,
    pub app_dir: PathBuf,
    /// As recorded in the app record (validated when it was deployed).
    pub previous_server_name: String,
    /// The other names it served, as recorded. Left out when there
    /// were none, so plans stored before it still match their digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous_also_server_names: Vec<ServerName>,
    pub server_name: ServerName,
    /// The other names it serves after (as in `DeploySpec`'s).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_server_names: Vec<ServerName>,
    pub previous_config: String,
    pub new_config: String,
}

impl PlanAction for NginxConfig {
    const ACTION: Action = Action::NginxConfig;

    fn derive(
        params: &Map<String, Value>,
        ctx: &Context<'_>,
        _facts: &dyn HostFacts,
    ) -> Result<(NginxConfig, Impact), Refusal> {
        exact_keys(params, Action::NginxConfig)?;
        let app = app_name(params)?;
        let server_name = server_name(params)?;
        let also_server_names = also_server_names(params, &server_name)?;
        let record = owned_running(&app, ctx)?;
        let Some(gateway) = record.gateway_container.clone() else {
            return refuse(Code::ContainerSetChanged, format!("{app} has no recorded gateway."));
        };
        let running = ctx.snapshot.containers.iter().any(|c| c.id == gateway && c.state == "running");
        if !running {
            return refuse(Code::AppNotRunning, format!("The gateway of {app} is not running."));
        }
        // To the container the gateway proxies to now (renamed by each update).
        let new_config = crate::nginx::render_for(
            &crate::nginx::names_directive(&server_name, &also_server_names),
            record.container_port,
            record.upstream(),
            ctx.policy.access_log(),
        );
        let impact = Impact {
            target: format!(
                "app {app}: server_name {} -> {}",
                served_names(record.server_name.as_str(), &record.also_server_names),
                served_names(server_name.as_str(), &also_server_names)
            ),
            containers_touched: vec![format!("{} (config test and reload)", app.names().gateway_container)],
            data_volumes_deleted: false,
            shared_nginx_changed: false,
            rollback: "If the new configuration fails nginx -t or the reload, the previous nginx.conf is \
                       restored, tested and reloaded."
                .into(),
        };
        let payload = NginxConfig {
            app,
            gateway,
            app_dir: record.app_dir.clone(),
            previous_server_name: record.server_name.to_string(),
            previous_also_server_names: record.also_server_names.clone(),
            server_name,
            also_server_names,
            previous_config: record.nginx_config.clone(),
            new_config,
        };
        Ok((payload, impact))
    }

    fn app(&self) -> Option<&AppName> {
        Some(&self.app)
    }

    fn scope(&self) -> Scope<'_> {
        Scope::Gateway { gateway: &self.gateway }
    }

    fn review(&self, out: &mut String) {
        let _ = writeln!(out, "App      {}", esc(self.app.as_str()));
        let before = served_names(&self.previous_server_name, &self.previous_also_server_names);
        let _ = writeln!(out, "Before   server_name {}", esc(&before));
        config_lines(out, &self.previous_config);
        let after = served_names(self.server_name.as_str(), &self.also_server_names);
        let _ = writeln!(out, "After    server_name {}", esc(&after));
        config_lines(out, &self.new_config);
    }

    fn act<E: Engine>(&self, engine: &E, _progress: &dyn ProgressSink) -> Result<Effect, EngineError> {
        engine
            .update_nginx(&self.app_dir, &self.gateway, &self.previous_config, &self.new_config)
            .map(|()| Effect::from(vec![self.gateway.to_string()]))
    }

    fn record(&self, done: &Done<'_>) -> Vec<RecordChange> {
        let Some(old) = done.apps.get(self.app.as_str()) else { return Vec::new() };
        let mut record = old.clone();
        record.plan_id = done.plan_id.clone();
        if done.ok() {
            record.server_name = self.server_name.clone();
            record.also_server_names = self.also_server_names.clone();
            record.nginx_config = self.new_config.clone();
        } else {
            record.state = AppState::NeedsInspection;
        }
        vec![RecordChange::Put(Box::new(record))]
    }
}
