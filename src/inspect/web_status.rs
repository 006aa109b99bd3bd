//! web_status's judgement of the helper's `gateway_status` answer
//! (`crate::wire::answers::gateways`): which gateways are healthy, and
//! whether all are. The reply is read once, as a [`WebReply`], which the
//! result carries on for the MCP server's sentence and code; the audit
//! proof beside it ([`Carried`]) goes up unjudged, to the workstation's
//! witness (`crate::mcp::witness`), which lives above this layer. Pure;
//! runs unprivileged on the workstation.

use std::borrow::Cow;

use crate::vocab::{HttpsAnswer, Refusal};
use crate::wire::answers::Open;
use crate::wire::answers::app_state::EngineState;
use crate::wire::answers::gateways::{Gateway, GatewayStatus};
use crate::wire::witness::AuditProof;
use crate::wire::{Operation, Reply};

/// What web_status's helper answer gave the witness, as the rpc client's
/// answers give it (`crate::mcp::witness::Observed`): this layer only
/// sends the witnessed head and carries the proof up; the check is the
/// MCP server's, the one every other answer passes.
#[derive(Debug, Clone, PartialEq)]
pub struct Carried {
    /// Whether the server's protocol carries an audit head (2 or later),
    /// as the request was built for it.
    pub carries: bool,
    /// Whether the helper answered `ok` (exit 0, a `gateway_status` result).
    pub ok: bool,
    /// The reply's `audit` field (`crate::wire::witness::carried`).
    pub proof: Option<AuditProof>,
}

/// The reply as the result shows it: without the `audit` proof beside it,
/// which is the witness's to read (up to 32 KiB of audit rows no agent
/// needs). A reply without one (a protocol 1 helper's) is shown byte for
/// byte as it came.
pub fn without_proof(stdout: &[u8]) -> Cow<'_, [u8]> {
    let Ok(serde_json::Value::Object(mut reply)) = serde_json::from_slice(stdout.trim_ascii_end()) else {
        return Cow::Borrowed(stdout);
    };
    if reply.remove("audit").is_none() {
        return Cow::Borrowed(stdout);
    }
    let mut bytes = serde_json::to_vec(&reply).expect("a JSON object serializes");
    bytes.push(b'\n');
    Cow::Owned(bytes)
}

/// The helper's reply to web_status's `gateway_status` request, as the
/// check read it: the gateways of its answer, or its refusal.
#[derive(Debug, Clone, PartialEq)]
pub enum WebReply {
    Gateways(Vec<Gateway>),
    Refused(Refusal),
}

impl WebReply {
    /// The reply in `stdout`, read by the one contract (`crate::wire`): an
    /// `ok` that names another operation is not an answer to this request.
    pub fn read(stdout: &[u8]) -> Option<WebReply> {
        match Reply::parse(stdout).ok()? {
            Reply::Ok { operation: Operation::GatewayStatus, result } => {
                let status: GatewayStatus = serde_json::from_value(result).ok()?;
                Some(WebReply::Gateways(status.gateways))
            }
            Reply::Rejected { refusal, .. } => Some(WebReply::Refused(refusal)),
            _ => None,
        }
    }
}

/// Healthy only when the list is non-empty and every gateway is healthy
/// ([`healthy`]).
pub fn all_healthy(gateways: &[Gateway]) -> bool {
    !gateways.is_empty() && gateways.iter().all(healthy)
}

/// The helper's `gateway_status` reply (`{"status":"ok","result":{"gateways":
/// [...]}}`): healthy only when the list is non-empty and every gateway is
/// healthy ([`healthy`]). `None` when the answer is not such a reply.
pub fn gateways_healthy(stdout: &[u8]) -> Option<bool> {
    gateway_states(stdout).map(|gateways| all_healthy(&gateways))
}

/// An app that should run runs and its gateway answers; an app stopped on
/// purpose is fine as it is. Drift is never healthy, and neither is a state
/// this build does not know (an older helper's docker word, say `exited`).
/// A gateway from a helper older than drift carries `state` alone, and is
/// judged by it, as it always was.
pub fn healthy(gateway: &Gateway) -> bool {
    match gateway.state {
        Open::Known(EngineState::Running) => {
            gateway.answers != Some(false)
                && gateway.https.iter().all(|check| check.answer == Open::Known(HttpsAnswer::Ok))
        }
        Open::Known(EngineState::Stopped) => gateway.stopped_on_purpose,
        Open::Known(EngineState::Drifted) | Open::Other(_) => false,
    }
}

/// The sentence of a web_status that failed because exposed names did not
/// answer through the HTTPS edge: each with what its request got, and the
/// next step. `None` when every exposed name answered.
pub fn https_sentence_of(gateways: &[Gateway]) -> Option<String> {
    let failed: Vec<String> = gateways
        .iter()
        .flat_map(|g| &g.https)
        .filter(|check| check.answer != Open::Known(HttpsAnswer::Ok))
        .map(|check| {
            let answer = match &check.answer {
                Open::Known(known) => {
                    serde_json::to_value(known).ok().and_then(|v| v.as_str().map(str::to_owned))
                }
                Open::Other(word) => Some(word.clone()),
            };
            format!("{} ({})", check.name, answer.unwrap_or_default())
        })
        .collect();
    (!failed.is_empty()).then(|| {
        format!(
            "The query worked and the answer is unhealthy: these exposed names did not answer through \
             the HTTPS edge with a verified certificate: {}. The administrator runs `sudo volce-lab-host \
             doctor` on the server (the edge, its certificates, curl); output shows each app's gateway too.",
            failed.join(", ")
        )
    })
}

/// Every gateway in a `gateway_status` reply ([`WebReply::read`]).
pub fn gateway_states(stdout: &[u8]) -> Option<Vec<Gateway>> {
    match WebReply::read(stdout)? {
        WebReply::Gateways(gateways) => Some(gateways),
        WebReply::Refused(_) => None,
    }
}

/// The sentence of a web_status that is ok while some apps are stopped on
/// purpose: those serve nothing, by a choice whose plan it names, and the
/// rest are healthy. `None` when no app is stopped on purpose (the plain
/// "healthy" sentence is then true as it stands).
pub fn stopped_sentence(output: &str) -> Option<String> {
    stopped_sentence_of(&gateway_states(output.as_bytes())?)
}

/// [`stopped_sentence`] of the gateways a reply listed.
pub fn stopped_sentence_of(gateways: &[Gateway]) -> Option<String> {
    let stopped: Vec<String> = gateways
        .iter()
        .filter(|g| g.stopped_on_purpose)
        .map(|g| match &g.stopped_by {
            Some(plan) => format!("{} (stop plan {plan})", g.app),
            None => g.app.clone(),
        })
        .collect();
    if stopped.is_empty() {
        return None;
    }
    // "The other 0 app(s) run" read oddly on a server whose only app is
    // stopped (issue 37's walk): say what is true of the rest, if any.
    let rest = match gateways.len() - stopped.len() {
        0 => "No other app is managed here.".to_owned(),
        1 => "The other app runs and its gateway answers.".to_owned(),
        serving => format!("The other {serving} apps run and their gateways answer."),
    };
    Some(format!(
        "The check ran. Stopped on purpose, and serving nothing until a start plan runs: {}. {rest}",
        stopped.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_stopped_on_purpose_is_named_with_its_plan_and_the_rest_are_healthy() {
        let reply = |gateways: &str| {
            format!(r#"{{"status":"ok","operation":"gateway_status","result":{{"gateways":[{gateways}]}}}}"#)
        };
        let running = r#"{"app":"shop","name":"vl-shop-gateway","state":"running","container_state":"running","stopped_on_purpose":false,"answers":true,"drift":null}"#;
        let stopped = r#"{"app":"demo","name":"vl-demo-gateway","state":"stopped","container_state":"exited","stopped_on_purpose":true,"stopped_by":"0123456789abcdef0123456789abcdef","answers":null,"drift":null}"#;
        let text = reply(&format!("{running},{stopped}"));
        assert_eq!(gateways_healthy(text.as_bytes()), Some(true));
        let sentence = stopped_sentence(&text).unwrap();
        assert!(sentence.contains("demo (stop plan 0123456789abcdef0123456789abcdef)"), "{sentence}");
        assert!(sentence.ends_with("The other app runs and its gateway answers."), "{sentence}");
        assert_eq!(stopped_sentence(&reply(running)), None, "nothing stopped: the plain sentence stands");
        // The only app stopped: no "other 0 app(s)" (seen on the newcomer walk).
        let alone = stopped_sentence(&reply(stopped)).unwrap();
        assert!(alone.ends_with("No other app is managed here."), "{alone}");
    }
}
