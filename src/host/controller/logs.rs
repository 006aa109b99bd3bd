//! The controller's read of one managed container's log for
//! `service_logs`: read-only, recorded ids only, the app's configured
//! values redacted. Runs as root inside the host helper.

use serde_json::Value;

use super::{Controller, Liveness, engine_unavailable};
use crate::control::Clock;
use crate::control::app_record::AppRecord;
use crate::docker::{Engine, EngineError};
use crate::vocab::{ACCESSORY_ROLE, AppName, Code, ContainerId, Refusal, refuse};
use crate::wire::answers::log_lines::LogLines;
use crate::wire::{ContainerRole, LogContainer};

impl<E: Engine, C: Clock, L: Liveness> Controller<E, C, L> {
    /// The values `service_logs` redacts by exact match
    /// (`crate::logs::render_knowing`) for an app that has or had
    /// configuration: those of its entry's env file as it is now, and every
    /// value of its app container's environment, which still holds the
    /// values it was created with after the file was edited (until an update
    /// replaces it) or after the entry lost its env file. The image's own
    /// `ENV` values are among them: redacting those too is the safe side.
    /// If the file cannot be read nothing is shown: without its values no
    /// line can be called safe.
    fn configured_values(&self, record: &AppRecord) -> Result<Vec<String>, Refusal> {
        let entry_file = self.policy.catalog.get(&record.image_key).and_then(|e| e.env_file.as_ref());
        if entry_file.is_none() && record.configuration.is_none() {
            return Ok(Vec::new());
        }
        let mut values = Vec::new();
        if let Some(name) = entry_file {
            let configuration = self.env_dir.configuration(name).map_err(|refusal| {
                Refusal::new(
                    Code::EnvFileInvalid,
                    format!(
                        "{} The app's log was not shown: its configured values could not be known.",
                        refusal.message
                    ),
                )
            })?;
            values.extend(configuration.values().map(str::to_owned));
        }
        if let Some(app) = &record.app_container {
            let environment = self.engine.container_env(app).map_err(engine_unavailable)?;
            values.extend(
                environment.iter().filter_map(|entry| entry.split_once('=')).map(|(_, v)| v.to_owned()),
            );
        }
        Ok(values)
    }

    /// Read-only: the safe tail of one managed container's log
    /// (`service_logs`). Checks again what the workstation checked (the
    /// app name's grammar, the container role, the ranges), then reads only
    /// the container id recorded for that role of that managed app, and
    /// only while the engine shows that id carrying our labels for exactly
    /// that app and role: never a name, never a foreign container. The
    /// bytes pass `crate::logs::render` before they are part of the reply.
    /// Writes nothing (no settling of claims either: that is inventory's).
    pub fn logs(
        &mut self,
        app: &str,
        container: &str,
        tail: &Value,
        since_minutes: Option<&Value>,
    ) -> Result<LogLines, Refusal> {
        let (name, target, tail, since) = log_request(app, container, tail, since_minutes)?;
        let record = self.store.read(|tx| Ok::<_, Refusal>(tx.apps()?.get(name.as_str()).cloned()))?;
        let Some(record) = record else {
            return refuse(
                Code::AppNotFound,
                format!("volce-lab manages no app called {name}; see service_inventory; nothing was read."),
            );
        };
        let id = self.recorded_container(&record, &target)?;
        let window = crate::docker::LogWindow {
            tail: u16::try_from(tail).unwrap_or(200),
            since_minutes: since.map(|m| u16::try_from(m).unwrap_or(1440)),
        };
        let raw = self.engine.logs(&id, window).map_err(|error| match error {
            EngineError::Call { execution, .. }
                if execution.execution_status == crate::exec::ExecutionStatus::OutputLimit =>
            {
                Refusal::new(
                    Code::EngineUnavailable,
                    "The container's log lines were larger than 1 MiB for this tail; ask for fewer lines; nothing was shown.",
                )
            }
            _ => Refusal::new(Code::EngineUnavailable, "The container's log could not be read; nothing was shown."),
        })?;
        let mut configured = self.configured_values(&record)?;
        if let LogContainer::Accessory(_) = target {
            // Its own variables too: its credential, whatever it prints.
            let environment = self.engine.container_env(&id).map_err(engine_unavailable)?;
            configured
                .extend(environment.iter().filter_map(|e| e.split_once('=')).map(|(_, v)| v.to_owned()));
        }
        let configured: Vec<&str> = configured.iter().map(String::as_str).collect();
        let logs = crate::logs::render_knowing(&raw.stdout, &raw.stderr, &configured);
        Ok(LogLines {
            app: name,
            container: target,
            container_id: id,
            tail,
            since_minutes: since,
            untrusted: crate::logs::UNTRUSTED.to_owned(),
            lines: logs.lines,
            truncated: logs.truncated,
            redactions: logs.redactions,
        })
    }
}

impl<E: Engine, C: Clock, L: Liveness> Controller<E, C, L> {
    /// The container id recorded for `target` of `record`, while the engine
    /// shows it carrying our labels for exactly that app and role (and, for
    /// an accessory, under its name): never a name looked up alone, never
    /// a foreign container.
    fn recorded_container(&self, record: &AppRecord, target: &LogContainer) -> Result<ContainerId, Refusal> {
        let name = &record.app;
        let (candidates, role, called): (Vec<ContainerId>, &str, Option<String>) = match target {
            LogContainer::Role(ContainerRole::App) => {
                (record.app_container.iter().cloned().collect(), "app", None)
            }
            LogContainer::Role(ContainerRole::Gateway) => {
                (record.gateway_container.iter().cloned().collect(), "gateway", None)
            }
            LogContainer::Accessory(accessory) => {
                let Some(used) = record.accessories.iter().find(|a| a.name == *accessory) else {
                    return refuse(
                        Code::InvalidParameters,
                        format!(
                            "App {name} has no accessory {accessory} (its accessories: {}); `container` is app, \
                             gateway or one of those; nothing was read.",
                            record.accessory_names()
                        ),
                    );
                };
                let own = [record.app_container.as_ref(), record.gateway_container.as_ref()];
                let others =
                    record.containers.iter().filter(|id| !own.contains(&Some(*id))).cloned().collect();
                (others, ACCESSORY_ROLE, Some(used.container_name.clone()))
            }
        };
        if candidates.is_empty() {
            return refuse(
                Code::ContainerSetChanged,
                format!(
                    "App {name} has no recorded {role} container (its deploy did not complete); nothing was read."
                ),
            );
        }
        for id in candidates {
            let ours = self.engine.container(&id).map_err(engine_unavailable)?.is_some_and(|c| {
                c.app() == Some(name.as_str())
                    && c.role() == Some(role)
                    && called.as_ref().is_none_or(|n| c.name.trim_start_matches('/') == n)
            });
            if ours {
                return Ok(id);
            }
        }
        refuse(
            Code::ContainerSetChanged,
            format!(
                "The recorded {} container of app {name} is gone or no longer carries volce-lab's labels for it; \
                 nothing was read. Ask the operator to inspect the server.",
                target.as_str()
            ),
        )
    }
}

/// The request's fields, checked again as the workstation checked them:
/// the app name's grammar, the container role, the ranges of `tail` and
/// `since_minutes`. Each refusal quotes what it got, cut and escaped.
fn log_request(
    app: &str,
    container: &str,
    tail: &Value,
    since_minutes: Option<&Value>,
) -> Result<(AppName, LogContainer, u64, Option<u64>), Refusal> {
    use crate::wire::{LOG_SINCE_MINUTES, LOG_TAIL};
    let shown = |text: &str| crate::text::quoted(text, 40);
    let Some(name) = AppName::parse(app) else {
        return refuse(
            Code::InvalidAppName,
            format!("{} is not an app name (^[a-z][a-z0-9-]*$); nothing was read.", shown(app)),
        );
    };
    let Some(target) = LogContainer::parse(container) else {
        return refuse(
            Code::InvalidParameters,
            format!(
                "`container` must be app, gateway or the name of one of the app's accessories (got {}); nothing \
                 was read.",
                shown(container)
            ),
        );
    };
    let number = |value: &Value, field: &str, range: std::ops::RangeInclusive<u64>| {
        value.as_u64().filter(|n| range.contains(n)).ok_or_else(|| {
            let got = crate::text::for_model(&value.to_string(), 40);
            Refusal::new(
                Code::InvalidParameters,
                format!(
                    "`{field}` must be a whole number from {} to {} (got {got}); nothing was read.",
                    range.start(),
                    range.end()
                ),
            )
        })
    };
    let tail = number(tail, "tail", LOG_TAIL)?;
    let since = since_minutes.map(|v| number(v, "since_minutes", LOG_SINCE_MINUTES)).transpose()?;
    Ok((name, target, tail, since))
}
