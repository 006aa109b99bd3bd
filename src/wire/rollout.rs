//! A rollout's statement (issue 43): the one text an operator signs to
//! approve the same change on several servers, in order. Written once for
//! both ends: the workstation renders it from its rollout manifest
//! (`crate::mcp::rollout`), the operator's `volce-lab approve --rollout`
//! signs it, and each host parses it again ([`RolloutStatement::parse`])
//! to find its own line. Pure: no I/O.
//!
//! Security invariant: the statement names, for every host, the host's own
//! identity line, its plan and the sha256 of the statement that host renders
//! for that plan (`host::signed::statement`), so a host accepts the
//! signature only for its own line, only for the plan the line names, and
//! only when that plan is, byte for byte, what the operator would have
//! signed on its own; the action and parameters the operator reads at the
//! top are checked against the plan too. The order, the batch size and the
//! halt rule are the workstation's promise, not a host's check: a host
//! cannot see another host's outcome (docs/security.md, Rollouts).

use std::fmt::Write as _;

pub use super::signed::ROLLOUT_HEADER;
use super::signed::statement_field;
use crate::vocab::{Action, Code, PlanId, Refusal, RolloutId};

/// The most hosts one rollout takes: with the longest host names its signed
/// statement stays within [`super::signed::MAX_SIGNED_BYTES`] (a test holds
/// it), so each host's `signed_approval` request stays under 16 KiB.
pub const MAX_ROLLOUT_HOSTS: usize = 16;

/// The longest wait between two batches a rollout may ask for.
pub const MAX_HEALTH_WAIT_SECONDS: u32 = 300;

/// The closing sentence, which the operator signs with the rest.
const CONSENT: &str = "I approve this rollout: each plan above to run once on its own host, in this order, \
and nothing else.";

/// One host's line: which host, which plan, and the hash of that host's
/// own statement of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutEntry {
    /// The host's identity line, as its statement's `host:` names it.
    pub host: String,
    pub plan_id: PlanId,
    /// sha256 (lowercase hex) of the host's statement of the plan.
    pub statement_sha256: String,
}

/// A whole rollout statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutStatement {
    pub rollout_id: RolloutId,
    /// sha256 of the workstation's manifest (`crate::mcp::rollout`): the
    /// workstation runs a signed rollout only from the manifest it names.
    pub manifest_sha256: String,
    pub action: Action,
    /// The plans' parameters, as canonical JSON on one line (the same on
    /// every host, and as each host's statement writes them).
    pub parameters: String,
    pub batch_size: u32,
    pub health_wait_seconds: u32,
    pub entries: Vec<RolloutEntry>,
}

fn malformed(why: &str) -> Refusal {
    Refusal::new(
        Code::SignedApprovalMalformed,
        format!(
            "The rollout statement {why}; nothing was recorded. Give the whole text `volce-lab approve \
             --rollout` printed, unchanged."
        ),
    )
}

impl RolloutStatement {
    /// The text, ending with a newline. The same manifest renders the same
    /// bytes every time: nothing in it depends on the clock.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{ROLLOUT_HEADER}");
        let _ = writeln!(out, "rollout: {}", self.rollout_id);
        let _ = writeln!(out, "manifest: {}", self.manifest_sha256);
        let _ = writeln!(out, "action: {}", self.action.as_str());
        let _ = writeln!(out, "parameters: {}", self.parameters);
        let _ = writeln!(
            out,
            "batches: {} host(s) at a time, {} s of health between batches, halt on the first failure",
            self.batch_size, self.health_wait_seconds
        );
        for (index, entry) in self.entries.iter().enumerate() {
            let _ = writeln!(
                out,
                "host {}: {} plan {} statement {}",
                index + 1,
                entry.host,
                entry.plan_id,
                entry.statement_sha256
            );
        }
        let _ = writeln!(out, "{CONSENT}");
        out
    }

    /// Reads a rollout statement back. Strict: the text must be exactly
    /// what [`RolloutStatement::render`] makes of what it says.
    pub fn parse(text: &str) -> Result<RolloutStatement, Refusal> {
        if !text.starts_with(&format!("{ROLLOUT_HEADER}\n")) {
            return Err(malformed(&format!("does not start with the line `{ROLLOUT_HEADER}`")));
        }
        let field =
            |key: &str| statement_field(text, key).ok_or_else(|| malformed(&format!("has no `{key}` line")));
        let rollout_id = RolloutId::parse(field("rollout")?).map_err(|_| malformed("names no rollout id"))?;
        let manifest_sha256 = field("manifest")?.to_owned();
        if !crate::text::is_lower_hex(&manifest_sha256, 64) {
            return Err(malformed("names no manifest hash"));
        }
        let action = Action::parse(field("action")?).map_err(|_| malformed("names an unknown action"))?;
        let parameters = field("parameters")?.to_owned();
        let (batch_size, health_wait_seconds) = batches(field("batches")?)?;
        let entries = text
            .lines()
            .filter(|line| line.starts_with("host "))
            .map(entry)
            .collect::<Result<Vec<_>, _>>()?;
        if entries.is_empty() || entries.len() > MAX_ROLLOUT_HOSTS {
            return Err(malformed(&format!("lists {} hosts, not 1 to {MAX_ROLLOUT_HOSTS}", entries.len())));
        }
        // One line per host: a host named twice could not tell which is its own.
        if entries.iter().enumerate().any(|(i, e)| entries[..i].iter().any(|f| f.host == e.host)) {
            return Err(malformed("names one host on two lines"));
        }
        let statement = RolloutStatement {
            rollout_id,
            manifest_sha256,
            action,
            parameters,
            batch_size,
            health_wait_seconds,
            entries,
        };
        if statement.render() != text {
            return Err(malformed(
                "is not in the form volce-lab renders (a line was changed, added or moved)",
            ));
        }
        Ok(statement)
    }

    /// The line that names `host` (an identity line), if one does.
    pub fn entry_for(&self, host: &str) -> Option<&RolloutEntry> {
        self.entries.iter().find(|entry| entry.host == host)
    }
}

/// `N host(s) at a time, W s of health ...`.
fn batches(line: &str) -> Result<(u32, u32), Refusal> {
    let bad = || malformed("has a `batches` line volce-lab did not write");
    let (size, rest) = line.split_once(" host(s) at a time, ").ok_or_else(bad)?;
    let (wait, _) = rest.split_once(" s of health").ok_or_else(bad)?;
    Ok((size.parse().map_err(|_| bad())?, wait.parse().map_err(|_| bad())?))
}

/// `host N: HOST plan PLAN statement SHA256`.
fn entry(line: &str) -> Result<RolloutEntry, Refusal> {
    let bad = || malformed("has a host line volce-lab did not write");
    let (_, rest) = line.split_once(": ").ok_or_else(bad)?;
    let (rest, sha) = rest.rsplit_once(" statement ").ok_or_else(bad)?;
    let (host, plan) = rest.rsplit_once(" plan ").ok_or_else(bad)?;
    if !crate::text::is_lower_hex(sha, 64) {
        return Err(bad());
    }
    let plan_id = PlanId::parse(plan).map_err(|_| bad())?;
    Ok(RolloutEntry { host: host.to_owned(), plan_id, statement_sha256: sha.to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::signed::{MAX_SIGNED_BYTES, SignedApproval};

    fn statement(hosts: usize, name_len: usize) -> RolloutStatement {
        RolloutStatement {
            rollout_id: RolloutId::parse(&"a".repeat(32)).unwrap(),
            manifest_sha256: "9".repeat(64),
            action: Action::Update,
            parameters: r#"{"app":"web","image":"web2"}"#.into(),
            batch_size: 1,
            health_wait_seconds: 10,
            entries: (0..hosts)
                .map(|i| RolloutEntry {
                    host: format!("{}{i:02} (machine-id {})", "h".repeat(name_len - 2), "0".repeat(32)),
                    plan_id: PlanId::parse(&format!("{i:032x}")).unwrap(),
                    statement_sha256: "5".repeat(64),
                })
                .collect(),
        }
    }

    #[test]
    fn a_rendered_statement_reads_back_and_names_each_host_once() {
        let original = statement(3, 10);
        let text = original.render();
        assert!(text.contains("\nhost 2: hhhhhhhh01 (machine-id 0000"), "{text}");
        assert!(text.ends_with("in this order, and nothing else.\n"), "{text}");
        let parsed = RolloutStatement::parse(&text).unwrap();
        assert_eq!(parsed, original);
        assert_eq!(parsed.entry_for(&original.entries[1].host), Some(&original.entries[1]));
        assert_eq!(parsed.entry_for("another (machine-id 1)"), None);
    }

    /// What was tried: each kind of change an agent could make to the text.
    #[test]
    fn a_changed_statement_does_not_read() {
        let text = statement(2, 10).render();
        let cases = [
            text.replacen(ROLLOUT_HEADER, "volce-lab approval statement 1", 1),
            text.replace("action: update", "action: deploy_now"),
            text.replace("1 host(s) at a time", "one host at a time"),
            text.replace(" statement 5555", " statement XX55"),
            text.replace("host 2: ", "host 9: "),
            text.replace("and nothing else.\n", "and nothing else.\nextra: line\n"),
            text.replace("rollout: aaaa", "rollout: zzzz"),
            statement(0, 10).render(),
            {
                let mut twice = statement(2, 10);
                twice.entries[1].host = twice.entries[0].host.clone();
                twice.render()
            },
            statement(MAX_ROLLOUT_HOSTS + 1, 10).render(),
        ];
        for case in cases {
            let refusal = RolloutStatement::parse(&case).unwrap_err();
            assert_eq!(refusal.code, Code::SignedApprovalMalformed, "{case}");
            assert!(refusal.message.contains("volce-lab approve --rollout"), "{}", refusal.message);
        }
    }

    /// The largest rollout (every host name 64 characters) signed by the
    /// largest key type still parses as a signed approval.
    #[test]
    fn the_largest_rollout_fits_a_signed_approval() {
        let text = statement(MAX_ROLLOUT_HOSTS, 64).render();
        let signature =
            format!("-----BEGIN SSH SIGNATURE-----\n{}\n-----END SSH SIGNATURE-----\n", "A".repeat(1_500));
        assert!(text.len() + signature.len() <= MAX_SIGNED_BYTES, "{}", text.len() + signature.len());
        let signed = SignedApproval::parse(&format!("{text}{signature}")).unwrap();
        assert_eq!(signed.statement, text);
    }
}
