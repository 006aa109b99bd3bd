//! What `volce-lab-host catalog pin` asks of the engine: a pull of the
//! reference the operator named, and what the local image says of itself
//! (its config and its registry digests). Runs as root inside the host
//! helper's operator command; fixed argv, the reference is one argv element
//! after `--` (and its grammar, `crate::install::catalog::Reference`, allows
//! no leading `-` anyway).

use super::argv::argv;
use super::limits::PULL;
use super::{DockerCall, DockerClient, Runner};
use crate::docker::EngineError;
use crate::exec::ExecutionStatus;

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

/// How much of a failed pull's words is read to name its reason; docker
/// says it in one line.
const PULL_WORDS: usize = 8 * 1024;

/// Why `docker pull` failed: docker's own words reduced to a closed set,
/// so the operator learns the registry's reason and its next step while
/// docker's text itself stays inside the helper (as every stderr does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::VariantArray)]
pub enum PullFailure {
    /// The registry answered and has no such tag or digest (`manifest unknown`).
    NoSuchImage,
    /// Docker Hub's wording for both "no such repository" and "needs a login".
    NotFoundOrDenied,
    /// The registry refused the credentials, or asked for some.
    AccessDenied,
    /// No answer from the registry: refused, no such host, a network timeout, TLS.
    Unreachable,
    /// Our own time limit ended the pull.
    TimedOut,
    /// Words this build does not recognise.
    Unrecognised,
}

impl PullFailure {
    /// The reason in docker's words on `stderr` (its first matching phrase,
    /// case-insensitive; the more specific phrases are tried first).
    pub fn of_words(stderr: &[u8]) -> PullFailure {
        let words = String::from_utf8_lossy(stderr).to_ascii_lowercase();
        let has = |phrases: &[&str]| phrases.iter().any(|p| words.contains(p));
        if has(&["pull access denied", "repository does not exist"]) {
            PullFailure::NotFoundOrDenied
        } else if has(&["manifest unknown", "not found: manifest", "name unknown"]) {
            PullFailure::NoSuchImage
        } else if has(&["unauthorized", "authentication required", "no basic auth credentials", "denied"]) {
            PullFailure::AccessDenied
        } else if has(&[
            "connection refused",
            "no such host",
            "i/o timeout",
            "network is unreachable",
            "no route to host",
            "connection reset",
            "tls:",
            "x509:",
            "http response to https client",
            "context deadline exceeded",
            "dial tcp",
        ]) {
            PullFailure::Unreachable
        } else {
            PullFailure::Unrecognised
        }
    }

    /// What happened, as a clause: "the registry has no such tag or digest".
    pub fn clause(self) -> &'static str {
        match self {
            PullFailure::NoSuchImage => "the registry answered that it has no such tag or digest",
            PullFailure::NotFoundOrDenied => {
                "the registry answered that the repository does not exist or needs a login"
            }
            PullFailure::AccessDenied => "the registry refused access (credentials missing or refused)",
            PullFailure::Unreachable => {
                "the registry could not be reached (connection refused, no such host, a network timeout or TLS)"
            }
            PullFailure::TimedOut => "the pull did not finish within 180 seconds",
            PullFailure::Unrecognised => "docker gave a reason this build does not recognise",
        }
    }

    /// The next step for this reason, one whole sentence.
    pub fn next_step(self) -> &'static str {
        match self {
            PullFailure::NoSuchImage => {
                "Check the tag or digest against the registry, push it if it is missing, then pin again."
            }
            PullFailure::NotFoundOrDenied | PullFailure::AccessDenied => {
                "Log root's docker in to the registry (sudo docker login REGISTRY), then pin again."
            }
            PullFailure::Unreachable | PullFailure::TimedOut => {
                "Check that the registry runs and that this server reaches it, then pin again."
            }
            PullFailure::Unrecognised => {
                "Run sudo docker pull REF to read docker's own words, then pin again."
            }
        }
    }
}

impl<R: Runner> DockerClient<R> {
    /// `docker pull --quiet -- REF`; a failure says why ([`PullFailure`]).
    pub fn pull_reference(&self, reference: &str) -> Result<(), PullFailure> {
        let call = DockerCall {
            args: argv(&["pull", "--quiet", "--", reference]),
            timeout: PULL,
            stdout_limit: PULL_WORDS,
            // Read here to name the reason, and dropped: never shown.
            stderr_is_data: true,
        };
        let outcome = self.runner.run(&call);
        match outcome.execution.execution_status {
            ExecutionStatus::Ok => Ok(()),
            ExecutionStatus::Timeout => Err(PullFailure::TimedOut),
            _ => Err(PullFailure::of_words(&outcome.stderr)),
        }
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
