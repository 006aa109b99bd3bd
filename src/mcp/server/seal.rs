//! The sealed `requestState` of the 2026-07-28 `InputRequiredResult` path
//! (issue 24): what the server hands the client with the approval form and
//! gets back, untrusted, on the retry. Runs unprivileged in the MCP server.
//!
//! Invariants enforced here:
//! - integrity: HMAC-SHA256 (RFC 2104, written out over `sha2`, which the
//!   crate already has) under a key drawn from the OS's random source per
//!   process, never written anywhere; a state from another process (a
//!   restarted server, another session's) names another key id and is
//!   `request_state_foreign`, one changed in any byte `request_state_tampered`;
//! - binding: the state names the target, the plan id and the digest of the
//!   call's arguments; presented with another call it is foreign;
//! - expiry: a state past its `expires_at` is `request_state_expired`;
//! - single use: each state carries a random nonce, spent the first time the
//!   state opens; presented again it is `request_state_replayed`.
//!
//! A valid state authorizes nothing: it only lets the retry look at the
//! host again. The host alone says whether the plan is approved.

use std::collections::HashSet;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::text::hex;
use crate::vocab::{Code, Refusal};

/// The format's prefix; a state in any other format is tampered.
const PREFIX: &str = "vl1";
/// The longest state accepted (ours are a few hundred characters).
const MAX_CHARS: usize = 4096;
const BLOCK: usize = 64;

/// What one state binds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub target: String,
    pub plan_id: String,
    /// sha256 of the call's arguments.
    pub digest: String,
    /// Unix seconds.
    pub expires_at: u64,
    pub nonce: String,
    /// Which look this state answers (1 for the first form).
    pub round: u32,
}

/// The per-process key and the spent nonces.
pub struct Sealer {
    key: [u8; 32],
    kid: String,
    spent: Mutex<HashSet<String>>,
}

/// 16 random bytes as hex, from the OS (`uuid`'s v4 reads getrandom).
pub fn random_hex() -> String {
    hex(uuid::Uuid::new_v4().as_bytes())
}

/// sha256 of `bytes`, hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut padded = [0u8; BLOCK];
    padded[..key.len()].copy_from_slice(key);
    let inner_key: Vec<u8> = padded.iter().map(|b| b ^ 0x36).collect();
    let outer_key: Vec<u8> = padded.iter().map(|b| b ^ 0x5c).collect();
    let inner = Sha256::new().chain_update(&inner_key).chain_update(message).finalize();
    Sha256::new().chain_update(&outer_key).chain_update(inner).finalize().into()
}

/// Equal in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}

fn refused(code: Code, why: &str) -> Refusal {
    Refusal::new(
        code,
        format!(
            "{why}; nothing ran. Call service_execute again without a request state to be asked afresh \
             (the operator's approval on the server is what lets the plan run)."
        ),
    )
}

impl Default for Sealer {
    fn default() -> Sealer {
        Sealer::new()
    }
}

impl Sealer {
    /// A sealer with a fresh random key.
    pub fn new() -> Sealer {
        let (a, b) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(a.as_bytes());
        key[16..].copy_from_slice(b.as_bytes());
        let kid = sha256_hex(&key)[..16].to_owned();
        Sealer { key, kid, spent: Mutex::new(HashSet::new()) }
    }

    /// The state as the client carries it: `vl1.KID.PAYLOAD.TAG` (hex).
    pub fn seal(&self, state: &State) -> String {
        let payload = hex(serde_json::to_string(state).unwrap_or_default().as_bytes());
        let signed = format!("{PREFIX}.{}.{payload}", self.kid);
        let tag = hex(&hmac_sha256(&self.key, signed.as_bytes()));
        format!("{signed}.{tag}")
    }

    /// Opens a state presented with a call on `target`, `plan_id` and
    /// arguments `digest`, at `now` (Unix seconds); spends its nonce.
    pub fn open(
        &self,
        text: &str,
        target: &str,
        plan_id: &str,
        digest: &str,
        now: u64,
    ) -> Result<State, Refusal> {
        let tampered =
            || refused(Code::RequestStateTampered, "The request state was changed or is not one of ours");
        if text.len() > MAX_CHARS {
            return Err(tampered());
        }
        let parts: Vec<&str> = text.split('.').collect();
        let [prefix, kid, payload, tag] = parts[..] else { return Err(tampered()) };
        if prefix != PREFIX || !crate::text::is_lower_hex(kid, 16) {
            return Err(tampered());
        }
        if kid != self.kid {
            return Err(refused(
                Code::RequestStateForeign,
                "The request state was issued by another volce-lab server process (or a restarted one)",
            ));
        }
        let expected = hmac_sha256(&self.key, format!("{prefix}.{kid}.{payload}").as_bytes());
        let given = unhex(tag).ok_or_else(tampered)?;
        if !same(&given, &expected) {
            return Err(tampered());
        }
        let state: State =
            unhex(payload).and_then(|bytes| serde_json::from_slice(&bytes).ok()).ok_or_else(tampered)?;
        if state.target != target || state.plan_id != plan_id || state.digest != digest {
            return Err(refused(
                Code::RequestStateForeign,
                "The request state belongs to another call (another target, plan or arguments)",
            ));
        }
        if now >= state.expires_at {
            return Err(refused(Code::RequestStateExpired, "The request state expired"));
        }
        let fresh = self.spent.lock().map(|mut spent| spent.insert(state.nonce.clone())).unwrap_or(false);
        if !fresh {
            return Err(refused(Code::RequestStateReplayed, "The request state was already used once"));
        }
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State {
            target: "web-1".into(),
            plan_id: "0".repeat(32),
            digest: "d".repeat(64),
            expires_at: 2000,
            nonce: random_hex(),
            round: 1,
        }
    }

    fn open(sealer: &Sealer, text: &str) -> Result<State, Refusal> {
        sealer.open(text, "web-1", &"0".repeat(32), &"d".repeat(64), 1000)
    }

    #[test]
    fn hmac_matches_the_rfc_4231_vector() {
        // RFC 4231 test case 2 uses a 4-byte key; ours are 32 bytes, so case
        // 1's 20-byte key padded the same way is checked through `seal`'s
        // primitive with the key zero-extended, as HMAC defines.
        let mut key = [0u8; 32];
        key[..20].copy_from_slice(&[0x0b; 20]);
        assert_eq!(
            hex(&hmac_sha256(&key, b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
    }

    #[test]
    fn a_sealed_state_opens_once_and_only_for_its_call() {
        let sealer = Sealer::new();
        let sealed = sealer.seal(&state());
        assert_eq!(open(&sealer, &sealed).unwrap().round, 1);
        assert_eq!(open(&sealer, &sealed).unwrap_err().code, Code::RequestStateReplayed);
        let other = sealer.seal(&state());
        let code = |r: Result<State, Refusal>| r.unwrap_err().code;
        assert_eq!(
            code(sealer.open(&other, "web-2", &"0".repeat(32), &"d".repeat(64), 1000)),
            Code::RequestStateForeign
        );
        assert_eq!(
            code(sealer.open(&other, "web-1", &"0".repeat(32), &"d".repeat(64), 2000)),
            Code::RequestStateExpired
        );
    }

    #[test]
    fn a_changed_or_foreign_state_is_refused_with_its_own_code() {
        let sealer = Sealer::new();
        let sealed = sealer.seal(&state());
        // One hex digit of the payload changed.
        let mut bytes = sealed.clone().into_bytes();
        let at = sealed.find('.').unwrap() + 20;
        bytes[at] = if bytes[at] == b'0' { b'1' } else { b'0' };
        let changed = String::from_utf8(bytes).unwrap();
        assert_eq!(open(&sealer, &changed).unwrap_err().code, Code::RequestStateTampered);
        for junk in ["", "vl1", "vl1.a.b.c", "xx.y.z.w", &"a".repeat(5000)] {
            assert_eq!(open(&sealer, junk).unwrap_err().code, Code::RequestStateTampered, "{junk:.20}");
        }
        let another = Sealer::new();
        assert_eq!(open(&another, &sealed).unwrap_err().code, Code::RequestStateForeign);
        // The untouched state still opens (a refusal spends nothing).
        assert!(open(&sealer, &sealed).is_ok());
    }
}
