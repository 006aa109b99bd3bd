//! The ssh gate's contract, written once for both ends: the remote command
//! lines the workstation sends (`crate::inspect::transport`) and the gate
//! accepts (`crate::host::gate`, the forced command of the agent's key), and
//! the framed reply the gate prints. Pure: no I/O. Both parsers are `pub`
//! so a fuzzer can drive them with arbitrary bytes.
//!
//! Requests (the remote command, which sshd hands the gate in
//! `SSH_ORIGINAL_COMMAND`):
//!
//! ```text
//! LC_ALL=C; export LC_ALL; hostname && id -un # volce-lab-gate 1 identity HOST USER
//! # volce-lab-gate 1 disk HOST USER
//! # volce-lab-gate 1 rpc HOST USER          (the helper's request on stdin)
//! ```
//!
//! plus, for workstations that do not know the gate, the three fixed lines
//! they always sent ([`LEGACY_IDENTITY`], [`LEGACY_DISK`], [`LEGACY_RPC`]).
//!
//! Reply to a gated request: one header line, then the check's own output,
//! unchanged:
//!
//! ```text
//! volce-lab-gate 1 match OBSERVED_HOST OBSERVED_USER
//! <payload: the two identity lines, df's output, or the helper's reply line>
//! ```
//!
//! or `volce-lab-gate 1 mismatch OBSERVED_HOST OBSERVED_USER` and nothing
//! else when the gate saw another host or account (then nothing ran).
//!
//! Since protocol 2 (0.2.0) a matching identity answer's payload has a third
//! line after the two identity lines, [`version_line`]:
//! `volce-lab-host VERSION protocol N`. Every workstation reads only the
//! header of an identity frame (the names it compares are the header's), so
//! an older one passes over the line, and a newer one reading a gate of
//! protocol 1 finds none ([`crate::wire::versions`]).
//!
//! Why it looks like this:
//! - a gated line is also valid for a plain POSIX login shell: the
//!   identity request is the old identity command with a comment after it,
//!   and every other gated request is a comment only. So the workstation
//!   needs no setting to know whether a gate is there: the identity request
//!   is answered with a frame by a gate and with two plain lines by a shell,
//!   and a disk or rpc request that reaches a shell instead of a gate runs
//!   nothing at all (a comment) and is answered with no frame, which the
//!   workstation treats as an identity mismatch;
//! - HOST and USER are the workstation's validated expected identity
//!   (`config::is_identifier`: letters, digits, `_ . -`), so inside a comment
//!   they are inert even for a shell, and they never contain a space;
//! - the observed identity comes back in the header so the workstation
//!   compares it itself before it releases the payload: the gate's own
//!   verdict is not trusted alone.

use strum::VariantArray as _;

use super::remote::RemoteCommand;
use crate::wire::versions::HelperVersion;

/// The protocol word every gated line and header starts with.
pub const MAGIC: &str = "volce-lab-gate";
/// The one version of this framing.
pub const VERSION: &str = "1";

/// The three fixed lines a workstation without the gate sends: their home
/// is the closed set of remote commands ([`super::remote`]).
pub use super::remote::{LEGACY_DISK, LEGACY_IDENTITY, LEGACY_RPC};

/// The longest remote command the gate reads; every valid one is far shorter.
pub const MAX_COMMAND_BYTES: usize = 1024;

/// The longest remote command that can reach the gate at all, so the
/// longest a `too_long` refusal can record. sshd hands the command over as
/// the environment string `SSH_ORIGINAL_COMMAND=<command>` (and as the
/// argument of `shell -c`), and Linux refuses to exec (E2BIG) with any one
/// argument or environment string longer than `MAX_ARG_STRLEN`: 32 pages,
/// 131,072 bytes on 4 KiB pages, the terminating NUL included. A longer
/// length in a `gate_refusal` is not one a gate could have seen (a hermetic
/// test execs at this length and one past it).
pub const MAX_RECEIVABLE_COMMAND_BYTES: usize = 32 * 4096 - "SSH_ORIGINAL_COMMAND=".len() - 1;

/// A request the gate accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateRequest {
    /// One of the lines a workstation without the gate sends: run as before,
    /// no identity pre-check (that workstation checks in its own session).
    Legacy(RemoteCommand),
    /// A check to run only when this is the expected host and account.
    Gated { check: RemoteCommand, host: String, user: String },
}

/// Why the gate refused a remote command. A closed set: this, the
/// command's length and its digest are all a refusal records (never the
/// text the caller chose).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum RefusalReason {
    /// No remote command: an interactive login (`ssh host`).
    NoCommand,
    /// Longer than [`MAX_COMMAND_BYTES`].
    TooLong,
    /// Not one of the fixed lines, or a gated line with extra or missing
    /// words, another version, an unknown check or a malformed identity.
    NotAFixedRequest,
}

impl RefusalReason {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What the gate sends the helper about one refusal (the `gate_refusal`
/// rpc request), as the helper checked it: a reason from the closed set,
/// and for a command that was given, its length and its sha256 (lowercase
/// hex). Never a byte of the command itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusalRecord {
    pub reason: RefusalReason,
    pub command_bytes: Option<u64>,
    pub command_sha256: Option<String>,
}

/// Why a `gate_refusal` request's fields do not describe a refusal the
/// gate could have made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inconsistent;

impl RefusalRecord {
    /// The record of refusing `command` (`None`: no remote command).
    pub fn of(reason: RefusalReason, command: Option<&[u8]>) -> RefusalRecord {
        use sha2::{Digest as _, Sha256};
        RefusalRecord {
            reason,
            command_bytes: command.map(|c| c.len() as u64),
            command_sha256: command.map(|c| crate::text::hex(&Sha256::digest(c))),
        }
    }

    /// Checks the fields of a `gate_refusal` request: both or neither of
    /// length and digest, neither exactly when there was no command, a
    /// length over the limit exactly when the reason is `too_long` (and
    /// never over [`MAX_RECEIVABLE_COMMAND_BYTES`]), and a
    /// digest of 64 lowercase hex characters. Whoever can run the helper
    /// can send this request, so it is held to what the gate itself sends.
    pub fn checked(
        reason: RefusalReason,
        command_bytes: Option<u64>,
        command_sha256: Option<&str>,
    ) -> Result<RefusalRecord, Inconsistent> {
        let consistent = match (reason, command_bytes, command_sha256) {
            (RefusalReason::NoCommand, None, None) => true,
            (RefusalReason::TooLong, Some(bytes), Some(sha)) => {
                bytes > MAX_COMMAND_BYTES as u64
                    && bytes <= MAX_RECEIVABLE_COMMAND_BYTES as u64
                    && crate::text::is_lower_hex(sha, 64)
            }
            (RefusalReason::NotAFixedRequest, Some(bytes), Some(sha)) => {
                bytes <= MAX_COMMAND_BYTES as u64 && crate::text::is_lower_hex(sha, 64)
            }
            _ => false,
        };
        if !consistent {
            return Err(Inconsistent);
        }
        Ok(RefusalRecord { reason, command_bytes, command_sha256: command_sha256.map(str::to_owned) })
    }

    /// The rpc request that carries this record to the helper.
    pub fn request(&self) -> crate::wire::Request {
        crate::wire::Request::GateRefusal {
            reason: self.reason,
            command_bytes: self.command_bytes,
            command_sha256: self.command_sha256.clone(),
        }
    }
}

/// The remote command a workstation sends for `check`, expecting `host`
/// and `user` (both validated identifiers).
pub fn request_line(check: RemoteCommand, host: &str, user: &str) -> String {
    let comment = format!("# {MAGIC} {VERSION} {} {host} {user}", check.as_str());
    match check {
        RemoteCommand::Identity => format!("{LEGACY_IDENTITY} {comment}"),
        RemoteCommand::Disk | RemoteCommand::Rpc => comment,
    }
}

/// Parses the remote command (`None`: sshd set no `SSH_ORIGINAL_COMMAND`).
/// Exact: one of the three legacy lines, or [`request_line`]'s output for
/// some check and two identifiers, byte for byte.
pub fn parse_request(command: Option<&[u8]>) -> Result<GateRequest, RefusalReason> {
    let command = command.ok_or(RefusalReason::NoCommand)?;
    if command.len() > MAX_COMMAND_BYTES {
        return Err(RefusalReason::TooLong);
    }
    let text = std::str::from_utf8(command).map_err(|_| RefusalReason::NotAFixedRequest)?;
    if let Some(legacy) = RemoteCommand::VARIANTS.iter().find(|c| c.legacy_line() == text) {
        return Ok(GateRequest::Legacy(*legacy));
    }
    let words: Vec<&str> = text.strip_prefix(LEGACY_IDENTITY).unwrap_or(text).split(' ').collect();
    let ([_, "#", MAGIC, VERSION, check, host, user] | ["#", MAGIC, VERSION, check, host, user]) = words[..]
    else {
        return Err(RefusalReason::NotAFixedRequest);
    };
    let check: RemoteCommand = check.parse().map_err(|_| RefusalReason::NotAFixedRequest)?;
    if !crate::config::is_identifier(host) || !crate::config::is_identifier(user) {
        return Err(RefusalReason::NotAFixedRequest);
    }
    let request = GateRequest::Gated { check, host: host.to_owned(), user: user.to_owned() };
    // Rebuilding the line is the exactness check: the identity prefix only
    // on identity, single spaces, nothing before or after.
    if request_line(check, host, user) != text {
        return Err(RefusalReason::NotAFixedRequest);
    }
    Ok(request)
}

/// The word the version line of an identity answer starts with.
const VERSION_WORD: &str = "volce-lab-host";

/// The line a gate of protocol 2 or later adds to a matching identity
/// answer, newline included.
pub fn version_line(helper: &HelperVersion) -> String {
    format!("{VERSION_WORD} {} protocol {}\n", helper.version, helper.protocol)
}

/// The helper's version in a matching identity answer's payload (the two
/// identity lines, then [`version_line`]), or `None` when the payload has
/// no such line (a gate of protocol 1) or a malformed one: a version of
/// digits and dots, a protocol from 1 up.
pub fn parse_version(payload: &[u8]) -> Option<HelperVersion> {
    let text = std::str::from_utf8(payload.get(..payload.len().min(MAX_COMMAND_BYTES))?).ok()?;
    let line = text.split_inclusive('\n').nth(2)?.strip_suffix('\n')?;
    let [VERSION_WORD, version, "protocol", protocol] = line.split(' ').collect::<Vec<_>>()[..] else {
        return None;
    };
    let dotted = |v: &str| {
        (1..=32).contains(&v.len())
            && v.split('.').all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
    };
    let protocol: u32 = protocol.parse().ok().filter(|p| *p >= 1 && !protocol.starts_with('0'))?;
    dotted(version).then(|| HelperVersion { version: version.to_owned(), protocol })
}

/// What the gate observed and concluded, as its header line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub matched: bool,
    pub host: String,
    pub user: String,
}

/// How an observed name goes into the header: itself when it is an
/// identifier, else `?` (which can never equal an expected identifier).
fn word(observed: &str) -> &str {
    if crate::config::is_identifier(observed) { observed } else { "?" }
}

impl Header {
    /// The gate's verdict: a match only when both observed names are the
    /// expected ones.
    pub fn judge(observed_host: &str, observed_user: &str, host: &str, user: &str) -> Header {
        Header {
            // A name that is no identifier never matches, even itself.
            matched: word(observed_host) == host && word(observed_user) == user && host != "?" && user != "?",
            host: word(observed_host).to_owned(),
            user: word(observed_user).to_owned(),
        }
    }

    /// The header line, newline included.
    pub fn line(&self) -> String {
        let verdict = if self.matched { "match" } else { "mismatch" };
        format!("{MAGIC} {VERSION} {verdict} {} {}\n", self.host, self.user)
    }
}

/// Why a reply is not a gate frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAFrame;

/// Splits a gate's stdout into its header and the payload after it.
/// Anything that does not start with one exact header line is not a frame
/// (a shell's answer, a gate of another version, a truncated reply).
pub fn parse_reply(stdout: &[u8]) -> Result<(Header, &[u8]), NotAFrame> {
    let end = stdout.iter().take(MAX_COMMAND_BYTES).position(|&b| b == b'\n').ok_or(NotAFrame)?;
    let line = std::str::from_utf8(&stdout[..end]).map_err(|_| NotAFrame)?;
    let words: Vec<&str> = line.split(' ').collect();
    let [MAGIC, VERSION, verdict, host, user] = words[..] else {
        return Err(NotAFrame);
    };
    let matched = match verdict {
        "match" => true,
        "mismatch" => false,
        _ => return Err(NotAFrame),
    };
    let named = |w: &str| w == "?" || crate::config::is_identifier(w);
    if !named(host) || !named(user) {
        return Err(NotAFrame);
    }
    Ok((Header { matched, host: host.to_owned(), user: user.to_owned() }, &stdout[end + 1..]))
}

#[cfg(test)]
mod tests;
