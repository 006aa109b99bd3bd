//! What each kind of docker call may take: its timeout, its output bound,
//! the whole deploy's budget and how the new gateway is probed. Pure
//! constants; the client applies them to every call it makes.

use std::time::Duration;

/// Timeouts per kind of call. Pulls move image layers; everything else is a
/// local API call that answers in well under a second on a healthy engine.
pub(super) const QUICK: Duration = Duration::from_secs(20);
pub(super) const PULL: Duration = Duration::from_secs(180);
pub(super) const NGINX_TEST: Duration = Duration::from_secs(30);
/// `docker stop --time 15` plus room for the engine's own kill.
pub(super) const STOP: Duration = Duration::from_secs(40);
/// A whole deploy must end (done, or failed and cleaned up) well inside the
/// 240 s the MCP client waits for the helper's reply; otherwise the agent
/// reads `unknown` while the server is still acting. Every docker call of a
/// deploy gets at most what is left of this budget.
pub const DEPLOY_BUDGET: Duration = Duration::from_secs(180);
pub(super) const STOP_GRACE_SECONDS: &str = "15";

/// `docker logs` of at most 200 lines: far more than the 16 KiB the reply
/// carries, so only a container that writes huge lines overflows it.
pub(super) const LOGS_OUTPUT: usize = 1024 * 1024;
/// `docker inspect` of every container: about 1 KB each with our template.
pub(super) const SNAPSHOT_OUTPUT: usize = 16 * 1024 * 1024;

/// How the new gateway is probed after it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthCheck {
    pub tries: u32,
    pub interval: Duration,
    pub timeout: Duration,
}

impl Default for HealthCheck {
    fn default() -> Self {
        HealthCheck { tries: 10, interval: Duration::from_millis(300), timeout: Duration::from_secs(2) }
    }
}
