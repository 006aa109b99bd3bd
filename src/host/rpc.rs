//! The host RPC wire format (v1): the bounded request read
//! from stdin and the one-line JSON reply. Pure apart from reading the given
//! reader; runs as root inside `volce-lab-host rpc`.
//!
//! Security invariant: the request is one JSON object of at most 16 KiB with
//! exactly the fields of one of four operations. There is no approval
//! operation and no approval-like field: approval exists only in the
//! terminal `approve` command, so nothing the agent sends can approve.

use std::io::Read;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::control::{Code, Refusal};

/// The most stdin bytes a request may have.
pub const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// The closed set of operations. Empty struct variants (not unit variants)
/// so that `deny_unknown_fields` refuses extra fields on every one of them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "operation", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    GatewayStatus {},
    Inventory {},
    Plan { action: String, parameters: Value },
    Execute { plan_id: String },
}

impl Request {
    pub fn operation(&self) -> &'static str {
        match self {
            Request::GatewayStatus {} => "gateway_status",
            Request::Inventory {} => "inventory",
            Request::Plan { .. } => "plan",
            Request::Execute { .. } => "execute",
        }
    }
}

/// Reads at most [`MAX_REQUEST_BYTES`] and parses exactly one request.
pub fn read_request(input: impl Read) -> Result<Request, Refusal> {
    let mut bytes = Vec::with_capacity(1024);
    input
        .take(MAX_REQUEST_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| Refusal::new(Code::InvalidRequest, "The request could not be read from stdin."))?;
    if bytes.len() > MAX_REQUEST_BYTES {
        return Err(Refusal::new(Code::RequestTooLarge, "The request is larger than 16 KiB."));
    }
    parse_request(&bytes)
}

pub fn parse_request(bytes: &[u8]) -> Result<Request, Refusal> {
    // Refuse anything that is not an object before serde sees it, so the
    // message does not depend on serde's wording for odd inputs.
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(Refusal::new(Code::InvalidRequest, "The request must be one JSON object."));
    }
    serde_json::from_slice::<Request>(bytes).map_err(|_| {
        Refusal::new(
            Code::InvalidRequest,
            "The request must be exactly one of: gateway_status, inventory, plan {action, parameters}, \
             execute {plan_id}, with no other fields.",
        )
    })
}

/// The one reply the helper prints.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Ok { operation: &'static str, result: Value },
    Rejected(Refusal),
    NeedsInspection { plan_id: String, message: String },
}

impl Reply {
    pub fn to_json(&self) -> Value {
        match self {
            Reply::Ok { operation, result } => {
                json!({"status": "ok", "operation": operation, "result": result})
            }
            Reply::Rejected(refusal) => {
                json!({"status": "rejected", "code": refusal.code, "message": refusal.message})
            }
            Reply::NeedsInspection { plan_id, message } => json!({
                "status": "needs_inspection", "code": "needs_inspection", "plan_id": plan_id, "message": message
            }),
        }
    }
    /// One line, no trailing data but the newline.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(&self.to_json()).expect("reply serializes");
        line.push('\n');
        line
    }
    pub fn exit(&self) -> crate::exit::Exit {
        match self {
            Reply::Ok { .. } => crate::exit::Exit::Ok,
            _ => crate::exit::Exit::Failure,
        }
    }
}

impl From<Refusal> for Reply {
    fn from(refusal: Refusal) -> Reply {
        Reply::Rejected(refusal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(bytes: &[u8]) -> Code {
        parse_request(bytes).unwrap_err().code
    }

    #[test]
    fn the_four_operations_parse() {
        assert_eq!(parse_request(br#"{"operation":"gateway_status"}"#).unwrap(), Request::GatewayStatus {});
        assert_eq!(parse_request(br#" {"operation":"inventory"} "#).unwrap(), Request::Inventory {});
        assert_eq!(
            parse_request(br#"{"operation":"plan","action":"stop","parameters":{"app":"x"}}"#).unwrap(),
            Request::Plan { action: "stop".into(), parameters: json!({"app": "x"}) }
        );
        assert_eq!(
            parse_request(br#"{"plan_id":"ab","operation":"execute"}"#).unwrap(),
            Request::Execute { plan_id: "ab".into() }
        );
    }

    #[test]
    fn approval_operations_and_fields_are_refused() {
        assert_eq!(code(br#"{"operation":"approve","plan_id":"a","digest":"b"}"#), Code::InvalidRequest);
        assert_eq!(code(br#"{"operation":"execute","plan_id":"a","approved":true}"#), Code::InvalidRequest);
        assert_eq!(code(br#"{"operation":"execute","plan_id":"a","digest":"b"}"#), Code::InvalidRequest);
        assert_eq!(
            code(br#"{"operation":"plan","action":"stop","parameters":{},"approved_by":"alice"}"#),
            Code::InvalidRequest
        );
    }

    #[test]
    fn extra_or_missing_fields_are_refused() {
        assert_eq!(code(br#"{"operation":"inventory","command":"id"}"#), Code::InvalidRequest);
        assert_eq!(code(br#"{"operation":"gateway_status","host":"x"}"#), Code::InvalidRequest);
        assert_eq!(code(br#"{"operation":"plan","action":"stop"}"#), Code::InvalidRequest);
        assert_eq!(code(br#"{"operation":"execute"}"#), Code::InvalidRequest);
        assert_eq!(code(br#"{"operation":"execute","plan_id":7}"#), Code::InvalidRequest);
    }

    #[test]
    fn duplicate_fields_are_refused() {
        assert_eq!(code(br#"{"operation":"execute","plan_id":"a","plan_id":"b"}"#), Code::InvalidRequest);
    }

    #[test]
    fn non_objects_and_trailing_data_are_refused() {
        for bad in
            [&b""[..], b"[]", b"\"inventory\"", b"null", b"{", br#"{"operation":"inventory"} {}"#, b"\xff"]
        {
            assert_eq!(code(bad), Code::InvalidRequest, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(code(br#"{"operation":"shell","command":"rm -rf /"}"#), Code::InvalidRequest);
        assert_eq!(code(br#"{}"#), Code::InvalidRequest);
    }

    #[test]
    fn more_than_16_kib_is_refused_without_reading_everything() {
        let big = vec![b' '; MAX_REQUEST_BYTES + 1];
        assert_eq!(read_request(&big[..]).unwrap_err().code, Code::RequestTooLarge);
        let mut exact = br#"{"operation":"inventory"}"#.to_vec();
        exact.resize(MAX_REQUEST_BYTES, b' ');
        assert_eq!(read_request(&exact[..]).unwrap(), Request::Inventory {});
        // An endless reader is cut at the limit.
        assert_eq!(read_request(std::io::repeat(b' ')).unwrap_err().code, Code::RequestTooLarge);
    }

    #[test]
    fn replies_follow_the_wire_contract() {
        let ok = Reply::Ok { operation: "inventory", result: json!({}) };
        assert_eq!(ok.to_line(), "{\"operation\":\"inventory\",\"result\":{},\"status\":\"ok\"}\n");
        assert_eq!(ok.exit(), crate::exit::Exit::Ok);
        let rejected = Reply::Rejected(Refusal::new(Code::PlanExpired, "Expired."));
        assert_eq!(
            rejected.to_json(),
            json!({"status": "rejected", "code": "plan_expired", "message": "Expired."})
        );
        assert_eq!(rejected.exit(), crate::exit::Exit::Failure);
        let inspect = Reply::NeedsInspection { plan_id: "a".into(), message: "m".into() };
        assert_eq!(inspect.to_json()["code"], "needs_inspection");
        assert_eq!(inspect.exit(), crate::exit::Exit::Failure);
    }
}
