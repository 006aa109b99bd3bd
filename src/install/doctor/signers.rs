//! The doctor's rules on signed approvals (issue 42): root's
//! `allowed_signers` beside the policy, checked as the helper checks it
//! before verifying anything, set against the policy's `signed_approvals`,
//! and listed one finding per key line, so that the operator sees who may
//! sign and revokes a key by deleting its line. Runs as root inside
//! `volce-lab-host doctor`; reads only.
//!
//! Each warning names the refusal code a signature would get from the
//! helper (`crate::host::signed`), so a doctor line and a refused approval
//! say the same thing. A line the reader cannot follow is a warning with
//! its number, never a failure: ssh-keygen, not this reader, verifies.

use std::io::Read as _;
use std::path::Path;

use super::allowed_signers::{self, Entry, Line};
use super::{DoctorPaths, Finding, PolicyFacts, fail, ok, warn};
use crate::control::policy::SignedApprovals;
use crate::host::paths::open_owned_file;
use crate::host::signed::{SIGNERS_MAX_BYTES, sshsig};
use crate::text::for_terminal;
use crate::vocab::{Code, is_user_name};
use crate::wire::signed::NAMESPACE;

/// The file's findings, when the policy has `signed_approvals` or the file
/// exists; none otherwise (approvals at the terminal only, the default).
/// `policy` is `None` when the policy does not parse (its own finding).
pub(super) fn check_signers(paths: &DoctorPaths, policy: Option<&PolicyFacts>, findings: &mut Vec<Finding>) {
    let path = paths.host().allowed_signers();
    let shown = path.display();
    let rules = policy.and_then(|facts| facts.signed_approvals);
    let bytes = match read(&path, paths.owner_uid) {
        Err(why) => {
            findings.push(fail(
                "allowed_signers",
                format!("{why} The helper verifies no signed approval while it is so ({}).", Code::SignersFileUnsafe),
                format!(
                    "make it a regular file of root's that only root can write: chown root:root {shown} && chmod \
                     0644 {shown} (its directory root's, not group- or world-writable), then run doctor again"
                ),
            ));
            return;
        }
        Ok(None) => {
            if rules.is_some() {
                findings.push(warn(
                    "signed approvals",
                    format!(
                        "the policy has signed_approvals but {shown} does not exist: nothing can be verified, \
                         and every signed approval is refused ({})",
                        Code::SignedApprovalsOff
                    ),
                    format!(
                        "list each approver's signing key in {shown} (docs/operator.md, \"Approve from your own \
                         device\"), or remove signed_approvals from the policy"
                    ),
                ));
            }
            return;
        }
        Ok(Some(bytes)) => bytes,
    };
    let lines = allowed_signers::parse(&String::from_utf8_lossy(&bytes));
    findings.push(file_finding(&path, policy, rules, &lines));
    for line in &lines {
        findings.push(line_finding(line, policy, rules));
    }
}

/// The file's bytes under the helper's own checks
/// (`crate::host::paths::open_owned_file`, the same bound); `None` when it
/// does not exist; the checks' sentence when it fails them.
fn read(path: &Path, owner: u32) -> Result<Option<Vec<u8>>, String> {
    let file = match open_owned_file(path, owner) {
        Err(refusal) => return Err(refusal.message),
        Ok(None) => return Ok(None),
        Ok(Some(file)) => file,
    };
    let mut bytes = Vec::new();
    file.take(SIGNERS_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| format!("{} cannot be read.", path.display()))?;
    if bytes.len() as u64 > SIGNERS_MAX_BYTES {
        return Err(format!("{} is larger than 256 KiB.", path.display()));
    }
    Ok(Some(bytes))
}

/// The file as a whole: whether it is in use, and how many lines it lists.
fn file_finding(
    path: &Path,
    policy: Option<&PolicyFacts>,
    rules: Option<SignedApprovals>,
    lines: &[Line],
) -> Finding {
    let shown = path.display();
    let keys = lines.iter().filter(|line| line.entry.is_ok()).count();
    match rules {
        None if policy.is_some() => warn(
            "signed approvals",
            format!(
                "{shown} exists ({keys} key line(s)) but the policy has no signed_approvals: the file is unused, \
                 and signed approvals are refused ({})",
                Code::SignedApprovalsOff
            ),
            format!(
                "add \"signed_approvals\": {{}} to the policy to take them (docs/policy.md), or delete {shown}"
            ),
        ),
        None => {
            ok("allowed_signers", format!("{shown} is root's, not writable by others, {keys} key line(s)"))
        }
        Some(_) if keys == 0 => warn(
            "signed approvals",
            format!(
                "the policy has signed_approvals but {shown} lists no key: every signed approval is refused ({})",
                Code::SignatureInvalid
            ),
            "list each approver's signing key in it (docs/operator.md, \"Approve from your own device\")",
        ),
        Some(SignedApprovals { software_keys }) => ok(
            "signed approvals",
            format!(
                "on: {shown} is root's, not writable by others, {keys} key line(s); {}",
                if software_keys { "keys held in files are accepted" } else { "FIDO (sk-) keys only" }
            ),
        ),
    }
}

/// One key line: who, which key, in which namespaces; a warning naming the
/// refusal each of its signatures would get, if any.
fn line_finding(line: &Line, policy: Option<&PolicyFacts>, rules: Option<SignedApprovals>) -> Finding {
    let number = line.number;
    let entry = match &line.entry {
        Ok(entry) => entry,
        Err(why) => {
            return warn(
                "signer",
                format!("line {number} cannot be read ({why}); doctor does not list it"),
                format!(
                    "correct line {number}: the approver's name, namespaces=\"{NAMESPACE}\", the key type and the \
                     key, as docs/operator.md shows (ssh-keygen may still read it otherwise)"
                ),
            );
        }
    };
    let mut problems = Vec::new();
    principal_problems(entry, policy, &mut problems);
    problems.extend(namespace_problem(entry.namespaces.as_deref()));
    let software = rules.is_some_and(|rules| !rules.software_keys);
    if software && !entry.cert_authority && !sshsig::hardware_key_type(&entry.key.key_type) {
        problems.push((
            format!(
                "its key is held in a file and the policy accepts only FIDO (sk-) keys: its signatures are \
                 refused ({})",
                Code::SoftwareKeyRefused
            ),
            "list a FIDO key instead (ssh-keygen -t ed25519-sk), or set software_keys in the policy's \
             signed_approvals"
                .to_owned(),
        ));
    }
    let described = describe(number, entry);
    if problems.is_empty() {
        return ok("signer", described);
    }
    let (whys, mut fixes): (Vec<String>, Vec<String>) = problems.into_iter().unzip();
    fixes.dedup();
    warn(
        "signer",
        format!("{described}: {}", whys.join("; ")),
        format!("line {number}: {}", fixes.join("; ")),
    )
}

/// What the line says, every word escaped for the terminal.
fn describe(number: usize, entry: &Entry) -> String {
    let mut text = format!(
        "line {number}: {} {} {}",
        for_terminal(&entry.principals.join(",")),
        for_terminal(&entry.key.key_type),
        entry.key.fingerprint
    );
    if let Some(namespaces) = &entry.namespaces {
        text.push_str(&format!(", namespaces {}", for_terminal(&namespaces.join(","))));
    }
    if entry.cert_authority {
        text.push_str(", certificate authority");
    }
    for (word, value) in [("valid after", &entry.valid_after), ("valid before", &entry.valid_before)] {
        if let Some(value) = value {
            text.push_str(&format!(", {word} {}", for_terminal(value)));
        }
    }
    text
}

type Problem = (String, String);

/// ssh-keygen names every principal of the line that lists a key, and the
/// helper takes only one user name (`keygen.rs`); that name must be an
/// approver's.
fn principal_problems(entry: &Entry, policy: Option<&PolicyFacts>, problems: &mut Vec<Problem>) {
    let principal = match entry.principals.as_slice() {
        [one] if is_user_name(one) => one,
        _ => {
            problems.push((
                format!(
                    "it names {} where the helper needs exactly one user name: its signatures are refused ({})",
                    for_terminal(&entry.principals.join(",")),
                    Code::SignatureInvalid
                ),
                "give the line one principal, the approver's user name".to_owned(),
            ));
            return;
        }
    };
    if policy.is_some_and(|facts| !facts.approvers.contains(principal)) {
        problems.push((
            format!(
                "`{principal}` is not one of the policy's approvers: its signatures are refused ({})",
                Code::NotAnApprover
            ),
            format!("add {principal} to approvers in the policy, or delete the line"),
        ));
    }
}

/// The line should trust its key for volce-lab's namespace and nothing
/// else: without the option the key is trusted for every namespace, and
/// without volce-lab's it never verifies an approval.
fn namespace_problem(namespaces: Option<&[String]>) -> Option<Problem> {
    let why = match namespaces {
        Some(list) if list.iter().all(|n| n == NAMESPACE) => return None,
        None => format!(
            "it is not restricted to the namespace {NAMESPACE}: its key is trusted for any, more than approvals need"
        ),
        Some(list) if list.iter().any(|n| n.contains(['*', '?', '!'])) => format!(
            "its namespaces are patterns: they either trust its key for more than {NAMESPACE} or never verify an \
             approval"
        ),
        Some(list) if list.iter().any(|n| n == NAMESPACE) => {
            format!("its namespaces name others beside {NAMESPACE}: more than approvals need")
        }
        Some(_) => format!(
            "its namespaces do not include {NAMESPACE}: it can never verify an approval ({})",
            Code::SignatureInvalid
        ),
    };
    Some((why, format!("write namespaces=\"{NAMESPACE}\" before its key type")))
}
