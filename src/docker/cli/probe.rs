//! Read-only questions the inventory and web_status ask of the engine and
//! the gateway: which local image a catalog reference resolves to, and
//! whether a gateway answers its server name. Runs as root inside the host
//! helper; fixed argv, loopback HTTP only.

use super::argv::argv;
use super::parse::first_line;
use super::{DockerCli, QUICK, Runner};
use crate::control::policy::ImageRef;
use crate::docker::host_probe::http_get;
use crate::docker::{EngineError, ImageId};
use crate::exec::ExecutionStatus;
use crate::nginx::ServerName;

impl<R: Runner> DockerCli<R> {
    /// `docker image inspect --format {{.Id}} -- REF`. Exit 1 is docker's
    /// "no such image": the caller took a snapshot just before, so the
    /// engine answers, and an image that is not there is simply absent.
    pub(super) fn resolve_image_id(&self, reference: &ImageRef) -> Result<Option<ImageId>, EngineError> {
        const STEP: &str = "resolve catalog image";
        let args = argv(&["image", "inspect", "--format", "{{.Id}}", "--", reference.as_str()]);
        match self.call(STEP, args, QUICK) {
            Ok(out) => {
                ImageId::parse(first_line(&out)).map(Some).ok_or(EngineError::Unparsable { step: STEP })
            }
            Err(EngineError::Call { execution, .. })
                if execution.execution_status == ExecutionStatus::NonzeroExit
                    && execution.exit_code == Some(1) =>
            {
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    /// One GET of `/` with the server name; 2xx or 3xx counts, as in the
    /// deploy's health check.
    pub(super) fn answers_once(&self, port: u16, server_name: &ServerName) -> bool {
        http_get(port, server_name.as_str(), self.health.timeout)
            .is_some_and(|r| (200..400).contains(&r.status))
    }
}
