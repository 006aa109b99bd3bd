//! The Service rmcp runs: [`super::server::VolceLab`] with `ping` answered
//! before rmcp's own dispatch can refuse it. Runs unprivileged on the
//! workstation.

use std::borrow::Cow;

use rmcp::model::{ClientNotification, ClientRequest, ProtocolVersion, ServerConfig, ServerResult};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, Service};

use super::server::VolceLab;

/// What [`super::serve`] hands to rmcp: [`VolceLab`] with `ping` answered
/// here, before rmcp's own dispatch can refuse it.
///
/// rmcp =3.11.0 answers `ping` two different ways on a 2026-07-28
/// (stateless) connection. Before the first request that selects the
/// lifecycle, its serve loop answers it with `{}` (src/service/server.rs:
/// 573-588). Once a request with complete `_meta` has selected the inline
/// lifecycle (src/service/server.rs:660, `set_inline_protocol_version`),
/// every request needs request metadata (src/handler/server.rs:109-113),
/// none is a legacy one (:132-133, src/service.rs:241-246), and `ping`
/// becomes `-32601 "ping"` (src/handler/server.rs:143-145), or `-32602`
/// when it carries no `_meta` (:115-130). The 2026-07-28 revision dropped
/// `ping` from its method set, but clients on that revision still send it
/// (the Python `mcp` 2.3 SDK's `send_ping`, fastmcp 4.1.6) as a keep-alive
/// and health probe, and a probe that succeeds before the first tool call
/// and fails after it reads as a server that died. So `ping` gets the same
/// `{}` at every point in every version: it changes nothing, needs no
/// identity, and says only that we are alive. No rmcp release fixes this
/// (3.11.0 is the newest on crates.io on 2026-12-01), so the pin stays;
/// drop this wrapper when one does (tests/hermetic/mcp_conformance.rs
/// shows it).
pub struct Conformant(pub VolceLab);

impl Service<RoleServer> for Conformant {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        match request {
            ClientRequest::PingRequest(_) => Ok(ServerResult::empty(())),
            request => Service::handle_request(&self.0, request, context).await,
        }
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), McpError> {
        Service::handle_notification(&self.0, notification, context).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerHandler::get_info(&self.0)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        ServerHandler::supported_protocol_versions(&self.0)
    }
}
