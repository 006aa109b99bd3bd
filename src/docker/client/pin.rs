//! What `volce-lab-host catalog pin` asks of the engine: a pull of the
//! reference the operator named, and what the local image says of itself
//! (its config and its registry digests). Runs as root inside the host
//! helper's operator command; fixed argv, the reference is one argv element
//! after `--` (and its grammar, `crate::install::catalog::Reference`, allows
//! no leading `-` anyway).

use super::argv::argv;
use super::limits::PULL;
use super::{DockerClient, Runner};
use crate::docker::EngineError;

/// `docker image inspect` of one reference: the config and the digest
/// references (`null` for none).
pub const PIN_TEMPLATE: &str = r#"{"config":{{json .Config}},"digests":{{json .RepoDigests}}}"#;

/// What a local image's `Config` says (`docker image inspect`): the
/// doctor holds it against the container volce-lab starts from it, and
/// `catalog pin` checks it before it pins.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ImageConfig {
    #[serde(default)]
    pub user: String,
    #[serde(default, deserialize_with = "super::null_as_empty")]
    pub cmd: Vec<String>,
    #[serde(default, deserialize_with = "super::null_as_empty")]
    pub entrypoint: Vec<String>,
    /// `"8080/tcp"` -> `{}`: the ports the image says it listens on.
    #[serde(default, deserialize_with = "super::null_as_empty")]
    pub exposed_ports: std::collections::BTreeMap<String, serde_json::Value>,
    /// `"/data"` -> `{}`: the `VOLUME`s it declares.
    #[serde(default, deserialize_with = "super::null_as_empty")]
    pub volumes: std::collections::BTreeMap<String, serde_json::Value>,
}

/// What a local image says of itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct LocalImage {
    #[serde(default, deserialize_with = "super::null_as_empty")]
    pub config: ImageConfig,
    /// `repository@sha256:<hex>`, one per registry repository the image
    /// was pulled from or pushed to; empty for an image only built here.
    #[serde(default, deserialize_with = "super::null_as_empty")]
    pub digests: Vec<String>,
}

impl<R: Runner> DockerClient<R> {
    /// `docker pull --quiet -- REF`.
    pub fn pull_reference(&self, reference: &str) -> Result<(), EngineError> {
        self.call("pull image", argv(&["pull", "--quiet", "--", reference]), PULL).map(|_| ())
    }

    /// `docker image inspect --format PIN_TEMPLATE -- REF`, or `None` when
    /// the engine holds no such image.
    pub fn local_image(&self, reference: &str) -> Result<Option<LocalImage>, EngineError> {
        const STEP: &str = "inspect image";
        let args = argv(&["image", "inspect", "--format", PIN_TEMPLATE, "--", reference]);
        self.call_unless_absent(STEP, args)?
            .map(|out| serde_json::from_slice(&out).map_err(|_| EngineError::Unparsable { step: STEP }))
            .transpose()
    }
}
