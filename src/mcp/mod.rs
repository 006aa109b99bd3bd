//! `volce-lab mcp-serve`: the MCP stdio server on rmcp. Runs unprivileged,
//! started by an agent client on the workstation (or on the server itself in
//! local mode).
//!
//! stdout carries JSON-RPC only; the few things we ever print go to stderr.
//! Startup is kept cheap (one current-thread runtime, no logging set-up), so
//! a client's spawn-to-initialize stays in the low milliseconds.
//!
//! ```text
//! tools/     the four tools: names, annotations, schemas, strict argument
//!            validation (pure)
//! rpc.rs     host RPC client side: crate::wire reply -> status for the agent (pure)
//! audit.rs   the local audit line of every call (0700 dir, 0600 file)
//! server.rs  the rmcp ServerHandler tying them to the Inspector
//! ```

pub mod audit;
pub mod rpc;
pub mod server;
pub mod tools;

use rmcp::ServiceExt as _;
use rmcp::transport::async_rw::AsyncRwTransport;

use crate::config::Config;
use crate::inspect::Inspector;

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
    let transport = AsyncRwTransport::new_server(read, write).with_max_line_length(MAX_LINE_BYTES);
    let running = server.serve(transport).await.map_err(|error| error.to_string())?;
    running.waiting().await.map_err(|error| error.to_string())?;
    Ok(())
}

/// `volce-lab mcp-serve`: serves stdin/stdout until the client closes them.
pub fn serve_stdio(config: Config, runtime: &tokio::runtime::Runtime) -> Result<(), String> {
    runtime.block_on(async {
        let server = VolceLab::new(Inspector::new(config), Options::from_env());
        let (read, write) = rmcp::transport::stdio_pipes();
        serve(server, read, write).await
    })
}
