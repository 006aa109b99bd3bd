//! The MCP server's settings besides its inspectors: the rpc limits, the
//! audit log and the progress heartbeat. Tests shorten the limits.

use super::super::audit::Audit;
use super::super::rpc;
use crate::inspect::transport::RunLimits;

/// What the server needs besides the inspector. Tests shorten the limits.
pub struct Options {
    pub rpc_limits: RunLimits,
    pub audit: Audit,
    /// The longest a `service_execute` with a progress token goes without
    /// a progress notification ([`super::super::progress::HEARTBEAT`]).
    pub heartbeat: std::time::Duration,
}

impl Options {
    /// The shipped settings: the contract's limits, the audit log from the environment.
    pub fn from_env() -> Options {
        Options {
            rpc_limits: rpc::RPC_LIMITS,
            audit: Audit::from_env(),
            heartbeat: super::super::progress::HEARTBEAT,
        }
    }
}
