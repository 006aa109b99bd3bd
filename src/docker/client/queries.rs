//! Read-only questions asked of the engine and the gateway: which local
//! image a catalog reference resolves to, the `VOLUME`s it declares, a
//! container's log and environment (for `service_logs` and its
//! redaction), a network's labels and
//! options, and whether a gateway answers its server
//! name. Runs as root inside the host helper; fixed argv, loopback HTTP
//! only.

use std::collections::BTreeMap;

use super::argv::{INSPECT_TEMPLATE, argv};
use super::limits::LOGS_OUTPUT;
use super::parse::{first_line, parse_inspect_rows, parse_volumes};
use super::runner::DockerCall;
use super::{DockerClient, QUICK, Runner};
use crate::docker::host_probe::http_get;
use crate::docker::{EngineError, LogStreams, LogWindow};
use crate::exec::ExecutionStatus;
use crate::nginx::GATEWAY_LISTEN_PORT;
use crate::vocab::{ContainerId, DataPath, HealthPath, ImageId, ImageRef, ServerName, uncovered_volumes};

/// What `docker network inspect` says of a network's labels and options
/// (`null` for none).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkOptions {
    #[serde(default, deserialize_with = "null_as_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub options: BTreeMap<String, String>,
}

/// docker prints `null` for an empty map or list: read it as empty.
pub(crate) fn null_as_empty<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de> + Default,
{
    use serde::Deserialize as _;
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Answers in a row, each on a new connection, that count as the new
/// server name being served after a reload (`wait_until_served`): five,
/// 50 ms apart, so a quarter of a second without one old worker's answer
/// (three 20 ms apart still met one once in CI on 2026-12-02, under load).
const SERVED_IN_A_ROW: u32 = 5;
/// The pause between those answers.
const CONFIRM_GAP: std::time::Duration = std::time::Duration::from_millis(50);

impl<R: Runner> DockerClient<R> {
    /// `docker logs` of one container: read-only, by full id only; both
    /// streams of the container, which docker prints on its stdout and
    /// stderr, each kept apart. Nothing of this leaves the helper before
    /// `crate::logs` made it safe.
    pub(super) fn container_logs(
        &self,
        container: &ContainerId,
        window: LogWindow,
    ) -> Result<LogStreams, EngineError> {
        self.container_logs_within(container, window, QUICK)
    }

    /// [`Self::container_logs`] with its own timeout (a failed plan's last
    /// lines get what is left of its budget).
    pub(super) fn container_logs_within(
        &self,
        container: &ContainerId,
        window: LogWindow,
        timeout: std::time::Duration,
    ) -> Result<LogStreams, EngineError> {
        let call = DockerCall {
            args: super::argv::logs(container, window),
            timeout,
            stdout_limit: LOGS_OUTPUT,
            stderr_is_data: true,
        };
        let outcome = self.runner.run(&call);
        if outcome.execution.execution_status == ExecutionStatus::Ok {
            Ok(LogStreams { stdout: outcome.stdout, stderr: outcome.stderr })
        } else {
            Err(EngineError::Call { step: "read container logs", execution: outcome.execution })
        }
    }

    /// One `inspect` call whose exit 1 is docker's "no such object": the
    /// object is absent (`None`), every other failure stays an error.
    pub(super) fn call_unless_absent(
        &self,
        step: &'static str,
        args: Vec<String>,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        match self.call(step, args, QUICK) {
            Ok(out) => Ok(Some(out)),
            Err(EngineError::Call { execution, .. })
                if execution.execution_status == ExecutionStatus::NonzeroExit
                    && execution.exit_code == Some(1) =>
            {
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    /// `docker image inspect --format {{.Id}} -- REF`. Exit 1 is docker's
    /// "no such image": the caller took a snapshot just before, so the
    /// engine answers, and an image that is not there is simply absent.
    pub(super) fn resolve_image_id(&self, reference: &ImageRef) -> Result<Option<ImageId>, EngineError> {
        const STEP: &str = "resolve catalog image";
        let args = argv(&["image", "inspect", "--format", "{{.Id}}", "--", reference.as_str()]);
        match self.call_unless_absent(STEP, args)? {
            Some(out) => {
                ImageId::parse(first_line(&out)).map(Some).ok_or(EngineError::Unparsable { step: STEP })
            }
            None => Ok(None),
        }
    }

    /// The `VOLUME`s a pinned image declares, or `None` when the engine
    /// holds no such image (exit 1 of `docker image inspect`, as in
    /// [`Self::resolve_image_id`]): it is pulled at deploy, and checked then.
    pub(super) fn declared_volumes(&self, reference: &ImageRef) -> Result<Option<Vec<String>>, EngineError> {
        const STEP: &str = "inspect image volumes";
        let args =
            argv(&["image", "inspect", "--format", "{{json .Config.Volumes}}", "--", reference.as_str()]);
        self.call_unless_absent(STEP, args)?.map(|out| parse_volumes(&out)).transpose()
    }

    /// After a pull: refuses an image that declares a `VOLUME` before any
    /// container is created from it. Docker would give each such path an
    /// anonymous volume: writable, on the host's disk, unbounded, and left
    /// behind by every `docker rm` volce-lab runs (never `-v`). The plan was
    /// refused at plan time if the image was already local; this is the
    /// check for one that was not. A volume at exactly the app's data path
    /// is covered by the data directory mounted there.
    pub(super) fn refuse_volumes(
        &self,
        reference: &ImageRef,
        data: Option<&DataPath>,
    ) -> Result<(), EngineError> {
        match self.declared_volumes(reference)?.map(|volumes| uncovered_volumes(volumes, data)) {
            Some(volumes) if volumes.is_empty() => Ok(()),
            Some(volumes) => Err(EngineError::ImageDeclaresVolumes { image: reference.clone(), volumes }),
            // Just pulled, yet not there: nothing is created from it.
            None => Err(EngineError::Unparsable { step: "inspect image volumes" }),
        }
    }

    /// `docker inspect --format {{json .Config.Env}}` of one container: its
    /// `NAME=value` environment, secrets included, for the log redaction
    /// only. An absent container (exit 1) has none.
    pub(super) fn environment_of(&self, id: &ContainerId) -> Result<Vec<String>, EngineError> {
        const STEP: &str = "inspect container environment";
        let args =
            argv(&["inspect", "--type", "container", "--format", "{{json .Config.Env}}", "--", id.as_str()]);
        self.call_unless_absent(STEP, args)?
            .map(|out| {
                serde_json::from_slice::<Option<Vec<String>>>(&out)
                    .map(Option::unwrap_or_default)
                    .map_err(|_| EngineError::Unparsable { step: STEP })
            })
            .transpose()
            .map(Option::unwrap_or_default)
    }

    /// A network's labels and driver options, by exact name, or `None`
    /// when the engine has no network of that name (exit 1). For the
    /// doctor, which names app networks created without today's options.
    pub fn network_options(&self, name: &str) -> Result<Option<NetworkOptions>, EngineError> {
        const STEP: &str = "inspect network";
        let template = r#"{"labels":{{json .Labels}},"options":{{json .Options}}}"#;
        let args = argv(&["network", "inspect", "--format", template, "--", name]);
        self.call_unless_absent(STEP, args)?
            .map(|out| {
                serde_json::from_slice::<NetworkOptions>(&out)
                    .map_err(|_| EngineError::Unparsable { step: STEP })
            })
            .transpose()
    }

    /// One GET of `/` with the server name; 2xx or 3xx counts, as in the
    /// deploy's health check.
    pub(super) fn answers_once(&self, port: u16, server_name: &ServerName) -> bool {
        http_get(port, server_name.as_str(), &HealthPath::default(), self.health.timeout)
            .is_some_and(|r| (200..400).contains(&r.status))
    }

    /// After a reload nginx starts new workers while the old ones finish
    /// their connections, so for a moment the old configuration still
    /// answers (measured: ~110 ms). nginx_config reports `completed` only
    /// once the new server name answers through the gateway's published
    /// loopback port: polled as the deploy's health check polls, bounded
    /// by its tries. A name that never answers is an error the controller
    /// records as needing inspection (the new config is loaded).
    pub(super) fn wait_until_served(
        &self,
        gateway: &ContainerId,
        new_config: &str,
    ) -> Result<(), EngineError> {
        const STEP: &str = "inspect gateway port";
        let name = crate::nginx::server_name_of(new_config)
            .ok_or(EngineError::Host { step: "read new server name" })?;
        let args = argv(&["inspect", "--type", "container", "--format", INSPECT_TEMPLATE, gateway.as_str()]);
        let rows = parse_inspect_rows(&self.call(STEP, args, QUICK)?)?;
        let port = rows
            .iter()
            .filter(|c| c.id == *gateway)
            .flat_map(|c| &c.ports)
            .find(|p| p.container_port == GATEWAY_LISTEN_PORT && p.host_ip == "127.0.0.1")
            .map(|p| p.host_port)
            .ok_or(EngineError::Unparsable { step: STEP })?;
        // One answer can come from a new worker while an old one, which has
        // not yet taken its QUIT, still accepts connections and answers the
        // new name with the old configuration's 404 (seen in CI right after
        // `completed`). Served means SERVED_IN_A_ROW answers in a row, each
        // on a new connection; a miss starts the count again and spends one
        // of the health check's tries, so the wait stays bounded.
        let (mut misses, mut in_a_row) = (0, 0);
        while misses < self.health.tries {
            if self.answers_once(port, &name) {
                in_a_row += 1;
                if in_a_row == SERVED_IN_A_ROW {
                    return Ok(());
                }
                std::thread::sleep(CONFIRM_GAP);
            } else {
                (misses, in_a_row) = (misses + 1, 0);
                if misses < self.health.tries {
                    std::thread::sleep(self.health.interval);
                }
            }
        }
        Err(EngineError::HealthCheckFailed)
    }
}
