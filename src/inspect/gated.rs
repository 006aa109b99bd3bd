//! The workstation's half of the ssh gate (`crate::wire::gate`): which way
//! checks reach the server (one gated session, or an identity session
//! before each), and the reading of a gate's framed reply. Pure; runs
//! unprivileged on the workstation, used only by the identity gate of
//! [`Inspector`].
//!
//! Invariants enforced here:
//! - a payload is released only from a frame whose verdict is `match` AND
//!   whose observed host and account are the expected ones, compared here
//!   again (the gate's verdict alone is not trusted);
//! - a completed run that is not such a frame releases nothing and counts
//!   as an identity mismatch: the target stopped being the gated host we
//!   verified (and, being a comment for a shell, the request ran nothing).

use super::transport::{CommandCarrier, RunLimits};
use super::{Inspector, Mismatch};
use crate::exec::{ExecutionStatus, ProcessOutput, ProcessSpec};
use crate::wire::gate::{Header, parse_reply, parse_version};
use crate::wire::remote::RemoteCommand;
use crate::wire::versions::{HelperVersion, ServerVersion};

/// How checks reach the target, as last learned from an identity answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Sessions {
    /// Not known yet (no identity answer since the start or the last reset).
    Unknown,
    /// The server's ssh gate answered: one session per check carries the
    /// identity proof and the check.
    Gated,
    /// A login shell answered (no gate, or local mode): an identity session
    /// before every check, as before the gate.
    TwoPerCheck,
}

impl Sessions {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// One line for the person running `inspect`.
    pub fn explain(self) -> &'static str {
        match self {
            Sessions::Unknown => "sessions: not known yet (no identity answer)",
            Sessions::Gated => {
                "sessions: one per check, through the server's ssh gate (identity checked by the gate before \
                 the check runs, and again here)"
            }
            Sessions::TwoPerCheck => {
                "sessions: two per check (identity, then the check): the server has no ssh gate for this key \
                 (server-install.md, the ssh gate)"
            }
        }
    }
}

/// What an identity answer says once the frame, if any, is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityAnswer {
    /// A gate's frame: the observed host and user, its verdict, and the
    /// helper's version when the gate named it (protocol 2 and later).
    Framed(Header, Option<HelperVersion>),
    /// Plain text from a shell: judge its two lines as before the gate.
    Plain,
}

pub fn identity_answer(stdout: &[u8]) -> IdentityAnswer {
    match parse_reply(stdout) {
        Ok((header, payload)) => {
            let helper = header.matched.then(|| parse_version(payload)).flatten();
            IdentityAnswer::Framed(header, helper)
        }
        Err(_) => IdentityAnswer::Plain,
    }
}

impl IdentityAnswer {
    /// The gate's header, when a gate answered.
    pub fn header(&self) -> Option<Header> {
        match self {
            IdentityAnswer::Framed(header, _) => Some(header.clone()),
            IdentityAnswer::Plain => None,
        }
    }

    /// What this answer says of the server's helper version.
    pub fn server_version(&self) -> ServerVersion {
        match self {
            IdentityAnswer::Framed(_, Some(helper)) => ServerVersion::Known(helper.clone()),
            IdentityAnswer::Framed(_, None) => ServerVersion::Before020,
            IdentityAnswer::Plain => ServerVersion::NoGate,
        }
    }
}

/// Which part of a gate's observed identity differs from the expected one.
pub fn mismatch_of(header: &Header, host: &str, user: &str) -> Option<Mismatch> {
    match (header.host != host, header.user != user) {
        (false, false) if header.matched => None,
        (true, true) => Some(Mismatch::Both),
        (true, false) => Some(Mismatch::Host),
        (false, true) => Some(Mismatch::User),
        // The names agree but the gate said mismatch: not an answer to trust.
        (false, false) => Some(Mismatch::NotTwoLines),
    }
}

/// The payload of a gated check's reply, when the frame proves the
/// expected host and user; else which part differed (`NotTwoLines` when
/// there is no frame at all).
pub fn unframe<'a>(stdout: &'a [u8], host: &str, user: &str) -> Result<&'a [u8], Mismatch> {
    let (header, payload) = parse_reply(stdout).map_err(|_| Mismatch::NotTwoLines)?;
    match mismatch_of(&header, host, user) {
        None => Ok(payload),
        Some(mismatch) => Err(mismatch),
    }
}

/// See the `link` field of [`Inspector`].
#[derive(Debug, Clone)]
pub(super) struct Link {
    pub(super) sessions: Sessions,
    pub(super) tripped: Option<Mismatch>,
    /// The server's helper version as the last identity answer of the
    /// expected host said it. Kept across a reset (a new master asks
    /// again): requests are held to it until the next answer replaces it.
    pub(super) helper: ServerVersion,
}

impl Link {
    pub(super) const NEW: Link =
        Link { sessions: Sessions::Unknown, tripped: None, helper: ServerVersion::Unknown };
}

/// The gate-aware parts of the [`Inspector`]: which processes a check
/// takes, and what of a gated reply may be used.
impl Inspector {
    /// How checks reach the target, as the last identity answer showed.
    pub fn sessions(&self) -> Sessions {
        self.link().sessions
    }

    pub(super) fn link(&self) -> std::sync::MutexGuard<'_, Link> {
        self.link.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What this target's helper is, as its last identity answer said.
    pub fn server_version(&self) -> ServerVersion {
        self.link().helper.clone()
    }

    /// The mismatch the last gated check's reply showed, if any (taken).
    pub(super) fn take_trip(&self) -> Option<Mismatch> {
        self.link().tripped.take()
    }

    /// The processes for `command`: identity always asks the way a gate
    /// answers with a frame (and a shell with the two plain lines); other
    /// checks go through the gate once an identity answer showed one.
    /// `true` when the reply is a frame to read.
    pub(super) fn specs_for(
        &self,
        transport: &dyn CommandCarrier,
        command: RemoteCommand,
        stdin: Option<&[u8]>,
        limits: RunLimits,
    ) -> (Vec<ProcessSpec>, bool) {
        use crate::wire::gate::request_line;
        let framed = command != RemoteCommand::Identity;
        if !framed || self.sessions() == Sessions::Gated {
            let line = request_line(command, &self.config().expected_host, &self.config().expected_user);
            if let Some(specs) = transport.gated(&line, stdin, limits) {
                return (specs, framed);
            }
        }
        (transport.specs(command, stdin, limits), false)
    }

    /// Reads a gated check's reply: the payload stays only when the frame
    /// proves the expected host and user. A run that completed without such
    /// a frame is a mismatch ([`Inspector::take_trip`]); a run that did not
    /// complete (ssh failed, timeout, overflow) keeps its status, and its
    /// unproven output is dropped either way.
    pub(super) fn unframe(&self, outcome: &mut ProcessOutput) {
        let completed =
            matches!(outcome.execution.execution_status, ExecutionStatus::Ok | ExecutionStatus::NonzeroExit);
        match unframe(&outcome.stdout, &self.config().expected_host, &self.config().expected_user) {
            Ok(payload) if completed => outcome.stdout = payload.to_vec(),
            Err(mismatch) if completed => {
                self.link().tripped = Some(mismatch);
                outcome.stdout.clear();
            }
            _ => outcome.stdout.clear(),
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn only_a_matching_frame_releases_its_payload() {
        let good = b"volce-lab-gate 1 match web-1 vl-agent\nFilesystem\n";
        assert_eq!(unframe(good, "web-1", "vl-agent"), Ok(&b"Filesystem\n"[..]));
        for (reply, mismatch) in [
            (&b"volce-lab-gate 1 mismatch web-2 vl-agent\n"[..], Mismatch::Host),
            (b"volce-lab-gate 1 mismatch web-1 vl-other\n", Mismatch::User),
            (b"volce-lab-gate 1 mismatch ? ?\n", Mismatch::Both),
            // A forged "match" naming another host is still a mismatch.
            (b"volce-lab-gate 1 match web-2 vl-agent\nFilesystem\n", Mismatch::Host),
            (b"volce-lab-gate 1 mismatch web-1 vl-agent\n", Mismatch::NotTwoLines),
            // A shell ran the comment: nothing, or whatever a login script printed.
            (b"", Mismatch::NotTwoLines),
            (b"web-1\nvl-agent\nFilesystem\n", Mismatch::NotTwoLines),
        ] {
            assert_eq!(
                unframe(reply, "web-1", "vl-agent"),
                Err(mismatch),
                "{:?}",
                String::from_utf8_lossy(reply)
            );
        }
    }

    #[test]
    fn an_identity_answer_is_framed_only_with_an_exact_header() {
        assert_eq!(identity_answer(b"web-1\nvl-agent\n"), IdentityAnswer::Plain);
        let old = identity_answer(b"volce-lab-gate 1 match web-1 vl-agent\nweb-1\nvl-agent\n");
        assert_eq!(old.server_version(), ServerVersion::Before020, "a gate of protocol 1");
        let IdentityAnswer::Framed(header, None) = old else { panic!("framed") };
        assert!(header.matched);
        assert_eq!(mismatch_of(&header, "web-1", "vl-agent"), None);
        let new = identity_answer(
            b"volce-lab-gate 1 match web-1 vl-agent\nweb-1\nvl-agent\nvolce-lab-host 0.3.1 protocol 3\n",
        );
        assert_eq!(
            new.server_version(),
            ServerVersion::Known(HelperVersion { version: "0.3.1".into(), protocol: 3 })
        );
        assert_eq!(identity_answer(b"web-1\nvl-agent\n").server_version(), ServerVersion::NoGate);
        // A gate that saw another host says nothing the workstation keeps.
        let other =
            identity_answer(b"volce-lab-gate 1 mismatch web-2 vl-agent\nvolce-lab-host 9 protocol 9\n");
        assert_eq!(other.server_version(), ServerVersion::Before020);
    }
}
