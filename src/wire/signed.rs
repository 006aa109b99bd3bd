//! A signed approval as it travels (issue 42): the approval statement a
//! host rendered for one plan, followed by the operator's OpenSSH signature
//! over exactly those bytes. Written once for both ends: the operator's
//! `volce-lab approve` builds one ([`SignedApproval::to_text`]), the agent
//! may carry it in `service_execute`, and the host splits it again
//! ([`SignedApproval::parse`]) before it verifies anything. Pure: no I/O.
//!
//! Security invariant: nothing here decides anything. A signed approval
//! that parses is still only a claim; the host accepts it only when the
//! signature verifies against its own `allowed_signers` and the statement is
//! byte for byte the one it renders from its own record (`host::signed`).
//! The statement travels beside the signature (an SSH signature carries a
//! hash of the message, not the message) so that the host can say which
//! part of a mismatched statement differs: another host, another plan, or
//! a changed parameter.

use crate::vocab::{Code, Refusal};

/// The signature namespace (`ssh-keygen -Y sign -n`), which the host also
/// requires of the signer's line in `allowed_signers`: a signature made for
/// anything else (git commits, files) never approves a plan.
pub const NAMESPACE: &str = "volce-lab-approval";

/// The first line of every statement, with its format's version: a statement
/// of another format never equals this host's.
pub const STATEMENT_HEADER: &str = "volce-lab approval statement 1";

/// The first line of every rollout's statement (issue 43, `super::rollout`),
/// with its format's version.
pub const ROLLOUT_HEADER: &str = "volce-lab rollout statement 1";

/// The armor's first line, as `ssh-keygen -Y sign` writes it.
pub const SIGNATURE_BEGIN: &str = "-----BEGIN SSH SIGNATURE-----";
pub const SIGNATURE_END: &str = "-----END SSH SIGNATURE-----";

/// The most bytes a signed approval may have: a statement of a plan with
/// every parameter set (under 2 KiB), and the armored signature of the
/// largest key type (about 1.5 KiB for RSA 4096, under 1 KiB for a FIDO
/// key). With no control character but the line end, JSON at most doubles
/// it (a newline is `\n`), so its `signed_approval` request stays under
/// the helper's 16 KiB (`crate::wire::MAX_REQUEST_BYTES`).
pub const MAX_SIGNED_BYTES: usize = 7 * 1024;

/// A statement and its armored signature, split apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedApproval {
    /// The statement's text, ending with a newline: one plan's, or a
    /// rollout's ([`SignedApproval::is_rollout`]).
    pub statement: String,
    /// The armor, from its BEGIN line to its END line and a newline.
    pub signature: String,
}

fn malformed(why: &str) -> Refusal {
    Refusal::new(
        Code::SignedApprovalMalformed,
        format!(
            "The signed approval {why}; nothing was recorded. Give the whole text `volce-lab approve` printed: \
             the statement, then the SSH signature block under it."
        ),
    )
}

impl SignedApproval {
    /// Splits `text` at the signature's BEGIN line. The statement must start
    /// with [`STATEMENT_HEADER`]; the signature must be one armored block
    /// with nothing after its END line but line ends.
    pub fn parse(text: &str) -> Result<SignedApproval, Refusal> {
        if text.len() > MAX_SIGNED_BYTES {
            return Err(malformed(&format!(
                "is {} bytes, more than the {MAX_SIGNED_BYTES} allowed",
                text.len()
            )));
        }
        let text = text.replace("\r\n", "\n");
        if text.chars().any(|c| c.is_control() && c != '\n') {
            return Err(malformed("holds a control character other than a line end"));
        }
        let Some(begin) = text.find(&format!("\n{SIGNATURE_BEGIN}\n")) else {
            return Err(malformed("has no SSH signature block under its statement"));
        };
        let (statement, armor) = text.split_at(begin + 1);
        // A plan's statement, or a rollout's (issue 43: `super::rollout`).
        let headers = [STATEMENT_HEADER, ROLLOUT_HEADER];
        if !headers.iter().any(|header| statement.starts_with(&format!("{header}\n"))) {
            return Err(malformed(&format!(
                "does not start with the line `{STATEMENT_HEADER}` (or `{ROLLOUT_HEADER}`)"
            )));
        }
        let Some(end) = armor.find(&format!("\n{SIGNATURE_END}")) else {
            return Err(malformed("has a signature block without its END line"));
        };
        let close = end + 1 + SIGNATURE_END.len();
        if !armor[close..].chars().all(|c| c == '\n') {
            return Err(malformed("has more text after its signature block"));
        }
        let signature = format!("{}\n", &armor[..close]);
        Ok(SignedApproval { statement: statement.to_owned(), signature })
    }

    /// Whether the statement is a rollout's (`super::rollout`).
    pub fn is_rollout(&self) -> bool {
        self.statement.starts_with(ROLLOUT_HEADER)
    }

    /// The text to carry: the statement, then the signature.
    pub fn to_text(&self) -> String {
        format!("{}{}", self.statement, self.signature)
    }
}

/// The value of `key: value` in a statement: the first line that starts
/// with `key: `. The host reads the `host` and `plan` lines of a statement
/// that is not its own to say which part differs.
pub fn statement_field<'a>(statement: &'a str, key: &str) -> Option<&'a str> {
    statement.lines().find_map(|line| line.strip_prefix(key)?.strip_prefix(": "))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIG: &str = "-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n";

    fn statement() -> String {
        format!("{STATEMENT_HEADER}\nhost: vm 3d12\nplan: 0123\n")
    }

    #[test]
    fn a_statement_and_its_signature_split_and_join_again() {
        let text = format!("{}{SIG}", statement());
        let signed = SignedApproval::parse(&text).unwrap();
        assert_eq!(signed.statement, statement());
        assert_eq!(signed.signature, SIG);
        assert_eq!(signed.to_text(), text);
        // Pasted through a terminal: CRLF line ends and a trailing blank line.
        let pasted = format!("{}{SIG}\n", statement()).replace('\n', "\r\n");
        assert_eq!(SignedApproval::parse(&pasted).unwrap(), signed);
        assert_eq!(statement_field(&signed.statement, "host"), Some("vm 3d12"));
        assert_eq!(statement_field(&signed.statement, "digest"), None);
    }

    /// The largest text that parses, all line ends, still makes a request
    /// the helper takes (the fuzz target mcp_arguments holds the same).
    #[test]
    fn the_largest_signed_approval_fits_the_request_limit() {
        let pad = "\n".repeat(MAX_SIGNED_BYTES - statement().len() - SIG.len());
        let signed = SignedApproval::parse(&format!("{}{pad}{SIG}", statement())).unwrap();
        let id = crate::vocab::PlanId::parse(&"0".repeat(32)).unwrap();
        let bytes = crate::wire::Request::signed_approval(&id, &signed).to_bytes();
        assert!(bytes.len() <= crate::wire::MAX_REQUEST_BYTES, "{}", bytes.len());
    }

    #[test]
    fn anything_else_is_refused_with_its_reason() {
        let cases = [
            (statement(), "no SSH signature block"),
            (format!("host: vm\n{SIG}"), "does not start with"),
            (format!("{}{SIGNATURE_BEGIN}\nU1NIU0lH\n", statement()), "without its END line"),
            (format!("{}{SIG}trailing words\n", statement()), "more text after"),
            // A second block is text after the first.
            (format!("{}{SIG}{SIG}", statement()), "more text after"),
            (format!("{}{SIG}{}", statement(), "x".repeat(MAX_SIGNED_BYTES)), "bytes, more than"),
            (format!("{}\u{1b}[2J{SIG}", statement()), "control character"),
        ];
        for (text, why) in cases {
            let refusal = SignedApproval::parse(&text).unwrap_err();
            assert_eq!(refusal.code, Code::SignedApprovalMalformed, "{text:?}");
            assert!(refusal.message.contains(why), "{why}: {}", refusal.message);
            assert!(refusal.message.contains("volce-lab approve"), "the next step: {}", refusal.message);
        }
    }
}
