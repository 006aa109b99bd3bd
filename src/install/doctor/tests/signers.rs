//! The doctor's signed-approval findings (issue 42) on a temporary
//! installation: root's `allowed_signers` checked as the helper checks it,
//! set against the policy's `signed_approvals`, and listed line by line
//! with real keys ssh-keygen made for the test.

use super::*;
use crate::control::policy::SignedApprovals;
use crate::host::signed::keygen::SSH_KEYGEN;

/// A fresh ed25519 public key line's type and blob, made by ssh-keygen,
/// with its fingerprint as `ssh-keygen -l` prints it.
fn real_key(dir: &Path, name: &str) -> (String, String) {
    let key = dir.join(name);
    let made = std::process::Command::new(SSH_KEYGEN)
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(made.success());
    let public = key.with_extension("pub");
    let listed = std::process::Command::new(SSH_KEYGEN).arg("-lf").arg(&public).output().unwrap();
    let fingerprint = String::from_utf8(listed.stdout).unwrap().split_whitespace().nth(1).unwrap().to_owned();
    let line = std::fs::read_to_string(&public).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    (format!("{} {}", words[0], words[1]), fingerprint)
}

/// A FIDO key's line as OpenSSH writes it (no authenticator here: the
/// doctor reads only its type, so the blob is built by hand).
fn sk_key() -> String {
    use base64::Engine as _;
    let string = |bytes: &[u8]| [(bytes.len() as u32).to_be_bytes().as_slice(), bytes].concat();
    let kind = "sk-ssh-ed25519@openssh.com";
    let blob = [string(kind.as_bytes()), string(&[9; 32]), string(b"ssh:")].concat();
    format!("{kind} {}", base64::engine::general_purpose::STANDARD.encode(blob))
}

fn signers_path(install: &Install) -> PathBuf {
    install.paths.policy.with_file_name("allowed_signers")
}

fn write_signers(install: &Install, text: &str) -> PathBuf {
    let path = signers_path(install);
    std::fs::write(&path, text).unwrap();
    chmod(&path, 0o644);
    path
}

fn probe_with(rules: Option<SignedApprovals>) -> FakeProbe {
    let mut facts = FakeProbe::default().policy.unwrap();
    facts.signed_approvals = rules;
    FakeProbe { policy: Ok(facts), ..Default::default() }
}

const ON: Option<SignedApprovals> = Some(SignedApprovals { software_keys: false });

/// The findings about signed approvals, in order.
fn signer_findings(install: &Install, probe: &FakeProbe) -> Vec<Finding> {
    diagnose(&install.paths, probe)
        .into_iter()
        .filter(|f| ["allowed_signers", "signed approvals", "signer"].contains(&f.subject.as_str()))
        .collect()
}

/// Tried: no file and no `signed_approvals` (the default): nothing is said.
#[test]
fn without_signed_approvals_or_the_file_doctor_says_nothing_of_them() {
    let install = install();
    assert_eq!(signer_findings(&install, &probe_with(None)), []);
}

/// Tried: the file group-writable, then world-writable, then owned by
/// another uid, then a symlink to a good file: each a failure naming the
/// file and the chown/chmod fix, as the helper refuses it
/// (`signers_file_unsafe`).
#[test]
fn an_unsafe_allowed_signers_fails_with_the_chown_and_chmod() {
    let install = install();
    let dir = tempfile::tempdir().unwrap();
    let (key, _) = real_key(dir.path(), "alice");
    let path = write_signers(&install, &format!("vl-operator namespaces=\"volce-lab-approval\" {key}\n"));
    let failed = |install: &Install| {
        let findings = signer_findings(install, &probe_with(ON));
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert!(findings[0].failed() && findings[0].subject == "allowed_signers", "{}", findings[0]);
        let fix = findings[0].fix.clone().unwrap();
        let shown = signers_path(install).display().to_string();
        assert!(fix.contains(&format!("chown root:root {shown}")) && fix.contains("chmod 0644"), "{fix}");
        findings[0].detail.clone()
    };
    for mode in [0o664, 0o646] {
        chmod(&path, mode);
        let detail = failed(&install);
        assert!(detail.contains("writable by group or others") && detail.contains("signers_file_unsafe"));
    }
    chmod(&path, 0o644);
    let mut other = super::install();
    other.paths.owner_uid += 1;
    std::fs::write(signers_path(&other), "").unwrap();
    assert!(failed(&other).contains("owned by uid"));
    let real = dir.path().join("real");
    std::fs::rename(&path, &real).unwrap();
    symlink(&real, &path).unwrap();
    assert!(failed(&install).contains("is a symlink"));
}

/// Tried: the policy enables signed approvals and there is no file, then
/// a file with no key in it.
#[test]
fn signed_approvals_without_signers_is_a_warning_naming_the_refusal() {
    let install = install();
    let findings = signer_findings(&install, &probe_with(ON));
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let missing = &findings[0];
    assert_eq!(missing.level, Level::Warn, "{missing}");
    assert!(missing.detail.contains("does not exist") && missing.detail.contains("signed_approvals_off"));
    assert!(missing.fix.as_deref().unwrap().contains("Approve from your own device"), "{missing}");
    write_signers(&install, "# nobody yet\n");
    let empty = &signer_findings(&install, &probe_with(ON))[0];
    assert_eq!(empty.level, Level::Warn, "{empty}");
    assert!(empty.detail.contains("lists no key") && empty.detail.contains("signature_invalid"), "{empty}");
}

/// Tried: a file the policy does not use: a warning, not a failure, and
/// its lines still listed.
#[test]
fn an_allowed_signers_the_policy_does_not_use_is_a_warning() {
    let install = install();
    write_signers(&install, &format!("vl-operator namespaces=\"volce-lab-approval\" {}\n", sk_key()));
    let findings = signer_findings(&install, &probe_with(None));
    assert_eq!(findings.len(), 2, "{findings:#?}");
    assert_eq!(findings[0].level, Level::Warn, "{}", findings[0]);
    assert!(findings[0].detail.contains("the file is unused"), "{}", findings[0]);
    assert!(findings[0].fix.as_deref().unwrap().contains("\"signed_approvals\": {}"), "{}", findings[0]);
    assert_eq!(findings[1].level, Level::Ok, "{}", findings[1]);
    assert!(!findings.iter().any(Finding::failed));
}

/// Tried: a good line (an approver's FIDO key, restricted to volce-lab's
/// namespace), then one line for each way a line can never work or
/// trusts more than it should: each listed with its principal, key type
/// and ssh-keygen's fingerprint, the good one ok, each other a warning
/// naming the refusal its signatures would get.
#[test]
fn each_signer_is_listed_with_its_fingerprint_and_what_refuses_it() {
    let install = install();
    let dir = tempfile::tempdir().unwrap();
    let (key, fingerprint) = real_key(dir.path(), "file-key");
    let only = "namespaces=\"volce-lab-approval\"";
    let text = [
        format!("# approvers\nvl-operator {only} {} laptop", sk_key()),
        format!("vl-operator {key}"),
        format!("vl-operator namespaces=\"git\" {key}"),
        format!("vl-operator namespaces=\"volce-lab-approval,file\" {key}"),
        format!("mallory {only} {}", sk_key()),
        format!("\"vl-operator,bob\" {only} {}", sk_key()),
        format!("vl-operator {only} {key}"),
    ]
    .join("\n");
    write_signers(&install, &text);
    let findings = signer_findings(&install, &probe_with(ON));
    assert_eq!(findings.len(), 8, "{findings:#?}");
    assert!(findings[0].detail.starts_with("on: ") && findings[0].detail.contains("7 key line(s)"));
    let lines = &findings[1..];
    assert_eq!(lines[0].level, Level::Ok, "{}", lines[0]);
    assert!(
        lines[0].detail.starts_with("line 2: vl-operator sk-ssh-ed25519@openssh.com SHA256:"),
        "{}",
        lines[0]
    );
    let warned = |index: usize, says: &[&str]| {
        let finding = &lines[index];
        assert_eq!(finding.level, Level::Warn, "{finding}");
        for said in says {
            assert!(finding.to_string().contains(said), "{said}: {finding}");
        }
    };
    let fp = fingerprint.as_str();
    warned(
        1,
        &["line 3: vl-operator ssh-ed25519", fp, "not restricted", "namespaces=\"volce-lab-approval\""],
    );
    warned(2, &["line 4:", "do not include volce-lab-approval", "signature_invalid"]);
    warned(3, &["line 5:", "others beside volce-lab-approval"]);
    warned(4, &["line 6: mallory", "not one of the policy's approvers", "not_an_approver"]);
    warned(5, &["line 7: vl-operator,bob", "exactly one user name", "signature_invalid"]);
    warned(6, &["line 8:", fp, "held in a file", "software_key_refused", "ed25519-sk"]);
    let software = probe_with(Some(SignedApprovals { software_keys: true }));
    let allowed = signer_findings(&install, &software);
    assert_eq!(allowed[7].level, Level::Ok, "{}", allowed[7]);
    assert!(allowed[0].detail.contains("keys held in files are accepted"), "{}", allowed[0]);
    assert!(!findings.iter().chain(&allowed).any(Finding::failed));
}

/// Tried: lines the reader cannot follow, one carrying a terminal escape:
/// each a warning with its number that never prints the line, and the
/// doctor still passes.
#[test]
fn an_unreadable_signer_line_is_a_warning_with_its_number_only() {
    let install = install();
    let text = format!("vl-operator\nvl-operator \u{1b}[31mred ssh-ed25519 AAAA\n\nok {}\n", sk_key());
    write_signers(&install, &text);
    let findings = signer_findings(&install, &probe_with(ON));
    assert_eq!(findings.len(), 4, "{findings:#?}");
    for (finding, number) in findings[1..3].iter().zip([1, 2]) {
        assert_eq!(finding.level, Level::Warn, "{finding}");
        assert!(finding.detail.starts_with(&format!("line {number} cannot be read (")), "{finding}");
        assert!(!finding.to_string().contains('\u{1b}') && !finding.to_string().contains("red"), "{finding}");
    }
    let (_, healthy) = report(&diagnose(&install.paths, &probe_with(ON)));
    assert!(healthy);
}

/// What the file's words are is escaped on the way out: a principal made
/// of a terminal escape prints as text.
#[test]
fn a_signers_words_are_escaped_for_the_terminal() {
    let install = install();
    write_signers(&install, &format!("\"a\u{1b}[2Jb\" {}\n", sk_key()));
    let findings = signer_findings(&install, &probe_with(ON));
    let line = findings.iter().find(|f| f.subject == "signer").unwrap().to_string();
    assert!(!line.contains('\u{1b}') && line.contains("exactly one user name"), "{line}");
}
