//! Fuzz target: the MCP argument validation of every tool
//! (`volce_lab::mcp::tools::validate`), unprivileged in `mcp-serve`, on
//! arguments the model wrote. The first byte picks the tool, the rest is the
//! arguments' JSON. It must never panic; a plan, execute or logs call it
//! accepts becomes requests (an execute carrying a signed approval: the
//! signed_approval request, then the execute) that the helper's parser
//! accepts and that fit the helper's 16 KiB limit.
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
    let requests = match call {
        Call::Plan { action, parameters, .. } => vec![Request::plan(action, parameters)],
        Call::Execute { plan_id, signed_approval } => {
            let signed = signed_approval.map(|signed| Request::signed_approval(&plan_id, &signed));
            signed.into_iter().chain([Request::execute(&plan_id)]).collect()
        }
        Call::Logs { app, container, tail, since_minutes } => {
            vec![Request::logs(&app, container, tail, since_minutes)]
        }
        // A rollout's signed approval goes to each host as this request.
        Call::ExecuteRollout { signed_approval, .. } => {
            let any = volce_lab::vocab::PlanId::random();
            signed_approval.map(|signed| Request::signed_approval(&any, &signed)).into_iter().collect()
        }
        Call::Check(_) | Call::Inventory => return,
    };
    for request in requests {
        let bytes = request.to_bytes();
        assert!(bytes.len() <= MAX_REQUEST_BYTES, "{} request bytes", bytes.len());
        assert_eq!(parse_request(&bytes).expect("the helper accepts what validation accepted"), request);
    }
});
