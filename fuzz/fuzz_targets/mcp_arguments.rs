//! Fuzz target: the MCP argument validation of every tool
//! (`volce_lab::mcp::tools::validate`), unprivileged in `mcp-serve`, on
//! arguments the model wrote. The first byte picks the tool, the rest is the
//! arguments' JSON. It must never panic; a plan, execute or logs call it
//! accepts becomes a request that the helper's parser accepts and that fits
//! the helper's 16 KiB limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volce_lab::mcp::tools::{Call, ToolName, validate};
use volce_lab::wire::{MAX_REQUEST_BYTES, Request, parse_request};

const TOOLS: [&str; 5] = ["cloud_check", "service_inventory", "service_plan", "service_execute", "service_logs"];

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let tool = ToolName::parse(TOOLS[first as usize % TOOLS.len()]).expect("a tool name");
    let arguments = match serde_json::from_slice::<serde_json::Value>(rest) {
        Ok(serde_json::Value::Object(map)) => Some(map),
        Ok(_) => return,
        Err(_) if rest.is_empty() => None,
        Err(_) => return,
    };
    let Ok(call) = validate(tool, arguments.as_ref()) else { return };
    let request = match call {
        Call::Plan { action, parameters } => Request::plan(action, parameters),
        Call::Execute { plan_id } => Request::execute(&plan_id),
        Call::Logs { app, container, tail, since_minutes } => Request::logs(&app, container, tail, since_minutes),
        Call::Check(_) | Call::Inventory => return,
    };
    let bytes = request.to_bytes();
    assert!(bytes.len() <= MAX_REQUEST_BYTES, "{} request bytes", bytes.len());
    assert_eq!(parse_request(&bytes).expect("the helper accepts what validation accepted"), request);
});
