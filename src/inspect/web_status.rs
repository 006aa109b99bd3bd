//! web_status's judgement of the helper's `gateway_status` answer
//! (`crate::wire::answers::gateways`): which gateways are healthy, and
//! whether all are. Pure; runs unprivileged on the workstation.

use crate::wire::answers::Open;
use crate::wire::answers::app_state::EngineState;
use crate::wire::answers::gateways::{Gateway, GatewayStatus};

/// The helper's `gateway_status` reply (`{"status":"ok","result":{"gateways":
/// [...]}}`): healthy only when the list is non-empty and every gateway is
/// healthy ([`healthy`]). `None` when the answer is not such a reply.
pub fn gateways_healthy(stdout: &[u8]) -> Option<bool> {
    let gateways = gateway_states(stdout)?;
    Some(!gateways.is_empty() && gateways.iter().all(healthy))
}

/// An app that should run runs and its gateway answers; an app stopped on
/// purpose is fine as it is. Drift is never healthy, and neither is a state
/// this build does not know (an older helper's docker word, say `exited`).
/// A gateway from a helper older than drift carries `state` alone, and is
/// judged by it, as it always was.
pub fn healthy(gateway: &Gateway) -> bool {
    match gateway.state {
        Open::Known(EngineState::Running) => gateway.answers != Some(false),
        Open::Known(EngineState::Stopped) => gateway.stopped_on_purpose,
        Open::Known(EngineState::Drifted) | Open::Other(_) => false,
    }
}

/// Every gateway in a `gateway_status` reply.
/// The reply is read by the one contract (`crate::wire`): an `ok` that names
/// another operation is not an answer to this request.
pub fn gateway_states(stdout: &[u8]) -> Option<Vec<Gateway>> {
    match crate::wire::Reply::parse(stdout).ok()? {
        crate::wire::Reply::Ok { operation: crate::wire::Operation::GatewayStatus, result } => {
            let status: GatewayStatus = serde_json::from_value(result).ok()?;
            Some(status.gateways)
        }
        _ => None,
    }
}
