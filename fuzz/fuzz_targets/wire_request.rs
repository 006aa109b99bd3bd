//! Fuzz target: the host helper's request parser (`volce_lab::wire::parse_request`),
//! which runs as root on bytes the agent wrote. It must never panic; a request it
//! accepts serializes back to bytes that parse to the same request, and an
//! accepted request never carries a field outside its operation's.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volce_lab::vocab::Code;
use volce_lab::wire::{MAX_REQUEST_BYTES, parse_request};

fuzz_target!(|data: &[u8]| {
    // The helper reads at most MAX_REQUEST_BYTES; longer input never reaches the parser.
    if data.len() > MAX_REQUEST_BYTES {
        return;
    }
    match parse_request(data) {
        Ok(request) => {
            let again = parse_request(&request.to_bytes()).expect("our own bytes parse");
            assert_eq!(again, request);
            // deny_unknown_fields: the object holds only the operation's keys.
            let value: serde_json::Value = serde_json::from_slice(data).expect("accepted input is JSON");
            let allowed: &[&str] = match request.operation().as_str() {
                "plan" => &["operation", "action", "parameters"],
                "execute" => &["operation", "plan_id"],
                "logs" => &["operation", "app", "container", "tail", "since_minutes"],
                _ => &["operation"],
            };
            let keys = value.as_object().expect("accepted input is an object");
            assert!(keys.keys().all(|k| allowed.contains(&k.as_str())), "{keys:?}");
        }
        Err(refusal) => assert_eq!(refusal.code, Code::InvalidRequest),
    }
});
