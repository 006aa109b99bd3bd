//! `volce-lab mcp-serve`: the MCP stdio server on rmcp. Runs unprivileged,
//! started by an agent client on the workstation (or on the server itself in
//! local mode).
//!
//! stdout carries JSON-RPC only; the few things we ever print go to stderr.
//! Startup is kept cheap (one current-thread runtime, no logging set-up), so
//! a client's spawn-to-initialize stays in the low milliseconds.
//!
//! Every protocol version rmcp knows is served, 2024-11-05 through the
//! stateless 2026-07-28, and every method a client sends answers the same
//! way in any order: two rmcp =3.11.0 faults are worked around here
//! (`BeforeLifecycle`) and in conformant.rs ([`Conformant`]);
//! tests/hermetic/mcp_conformance.rs holds the table.
//!
//! ```text
//! tools/     the five tools: names, annotations, schemas, strict argument
//!            validation (pure)
//! rpc.rs     host RPC client side: crate::wire reply -> status for the agent (pure)
//! result.rs  the typed result of each tool, what the client reads (pure)
//! envelope.rs builds those results from what a call gave, and its audit
//!            record (pure)
//! fan_out.rs cloud_check over several targets at once, and its summary
//! progress.rs the helper's progress lines -> MCP progress notifications, heartbeat
//! audit.rs   the local audit line of every call (0700 dir, 0600 file)
//! server.rs  the rmcp ServerHandler tying them to the Inspector; the
//!            sentence of each status in sentences.rs
//! conformant.rs the Service rmcp runs (`ping` answered in every version)
//! ```

pub mod approve;
pub mod audit;
mod conformant;
mod envelope;
mod fan_out;
pub mod progress;
mod result;
pub mod rollout;
pub mod rpc;
mod sentences;
pub mod server;
mod state_file;
pub mod tools;
pub mod witness;

use std::borrow::Cow;

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta as _, ProtocolVersion, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{RoleServer, Service as _, ServiceExt as _};

use crate::config::Fleet;
use crate::inspect::Inspector;

pub use conformant::Conformant;
pub use server::{Options, VolceLab};

/// The longest JSON-RPC line we read. Far above any valid call (arguments
/// are capped at 12 KiB), low enough that a client cannot make us buffer
/// without bound.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// Serves `server` over any byte stream pair until the peer closes it.
/// The binary passes stdin/stdout; tests pass an in-memory duplex.
pub async fn serve<R, W>(server: VolceLab, read: R, write: W) -> Result<(), String>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let server = Conformant(server);
    let transport = AsyncRwTransport::new_server(read, write).with_max_line_length(MAX_LINE_BYTES);
    let transport = BeforeLifecycle::new(transport, server.supported_protocol_versions());
    let running = server.serve(transport).await.map_err(|error| error.to_string())?;
    running.waiting().await.map_err(|error| error.to_string())?;
    Ok(())
}

/// The transport rmcp reads from, minus the notifications it cannot take
/// before a lifecycle exists.
///
/// rmcp =3.11.0 ends the whole session when a notification arrives before
/// the lifecycle is selected: its pre-lifecycle loop answers `ping` and
/// `server/discover` and returns `ExpectedInitializeRequest` for anything
/// else that is not a request (src/service/server.rs:673-677). A stateless
/// 2026-07-28 client has no handshake, so "before the lifecycle" is any time
/// before its first tool request: a `notifications/cancelled` after a
/// discover probe, or for a request it gave up on, killed the server; a
/// legacy client's notification before `initialize` did the same. Before
/// the lifecycle there is nothing a notification could act on (the loop
/// answers each request before it reads the next, so a cancel can only name
/// an answered or unknown request, which MCP says to ignore), so we drop
/// them here and rmcp never sees them. The rule for "selected" mirrors
/// rmcp's loop (src/service/server.rs:593-660): an `initialize`, or a
/// request other than `ping`/`server/discover` whose `_meta` names a
/// supported version and carries the client's capabilities. Drop this when
/// an rmcp release tolerates them (tests/hermetic/mcp_conformance.rs).
struct BeforeLifecycle<T> {
    inner: T,
    selected: bool,
    supported: Cow<'static, [ProtocolVersion]>,
}

impl<T> BeforeLifecycle<T> {
    fn new(inner: T, supported: Cow<'static, [ProtocolVersion]>) -> BeforeLifecycle<T> {
        BeforeLifecycle { inner, selected: false, supported }
    }

    /// Whether rmcp's pre-lifecycle loop leaves itself on `request`.
    fn selects_lifecycle(&self, request: &ClientRequest) -> bool {
        match request {
            ClientRequest::InitializeRequest(_) => true,
            ClientRequest::PingRequest(_) | ClientRequest::DiscoverRequest(_) => false,
            request => {
                let meta = request.get_meta();
                meta.missing_required_keys(&ProtocolVersion::V_2026_07_28).is_empty()
                    && meta.protocol_version().is_some_and(|version| self.supported.contains(&version))
            }
        }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for BeforeLifecycle<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let message = self.inner.receive().await?;
            if !self.selected {
                match &message {
                    ClientJsonRpcMessage::Notification(_) => continue,
                    ClientJsonRpcMessage::Request(request) => {
                        self.selected = self.selects_lifecycle(&request.request);
                    }
                    _ => {}
                }
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// `volce-lab mcp-serve`: serves stdin/stdout until the client closes them.
pub fn serve_stdio(fleet: &Fleet, runtime: &tokio::runtime::Runtime) -> Result<(), String> {
    runtime.block_on(async {
        let server = VolceLab::for_fleet(
            fleet,
            |target| Inspector::new(target.config.clone()).named(&target.name),
            Options::from_env(),
        );
        let (read, write) = rmcp::transport::stdio_pipes();
        serve(server, read, write).await
    })
}
