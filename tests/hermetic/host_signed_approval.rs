//! Approvals signed on the operator's own device (issue 42), through the
//! helper's rpc as the agent carries them, with real keys and signatures
//! made by OpenSSH's `ssh-keygen` in the test's temporary directory (no
//! root, no system change; FIDO keys cannot be made here, so software keys
//! are used under the policy's `software_keys`, and one case turns that off).
//!
//! Tried, each refused with its own code and nothing approved or run: a
//! signer who is no approver, the requester, a statement with one parameter
//! changed, another host's statement, another plan's, another namespace, an
//! unknown key, a software key where the policy wants hardware, signed
//! approvals off, an allowed_signers writable by others, an expired plan,
//! and the same approval replayed after it ran. The approval that verifies
//! is recorded with its key and statement digest, and executes once.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use volce_lab::vocab::{Code, PlanId};
use volce_lab::wire::signed::NAMESPACE;

use crate::support::fake_engine::unused_image;
use crate::support::harness::*;

const AGENT: &str = "agent";
const KEYGEN: &str = "/usr/bin/ssh-keygen";

/// A harness whose policy enables signed approvals (with software keys, as
/// FIDO keys cannot be made here) and names the agent an approver too, so
/// that the requester's own signature reaches the self-approval check.
struct Signing {
    h: Harness,
    keys: tempfile::TempDir,
}

impl Signing {
    fn new(software_keys: bool) -> Signing {
        let mut h = Harness::new();
        let mut policy = policy_json();
        policy["approvers"] = json!(["alice", "bob", AGENT]);
        policy["signed_approvals"] = json!({"software_keys": software_keys});
        h.write_policy(&policy);
        let keys = tempfile::tempdir().unwrap();
        let signing = Signing { h, keys };
        let lines: Vec<String> = ["alice", "mallory", AGENT]
            .iter()
            .map(|who| format!("{who} namespaces=\"{NAMESPACE}\" {}", signing.public_key(who)))
            .collect();
        signing.write_signers(&lines.join("\n"));
        signing
    }

    fn signers_path(&self) -> PathBuf {
        self.h.paths.allowed_signers()
    }

    fn write_signers(&self, text: &str) {
        std::fs::write(self.signers_path(), format!("{text}\n")).unwrap();
        std::fs::set_permissions(self.signers_path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    }

    /// The private key file of `who`, made on first use.
    fn key(&self, who: &str) -> PathBuf {
        let key = self.keys.path().join(who);
        if !key.exists() {
            let made = Command::new(KEYGEN)
                .args(["-q", "-t", "ed25519", "-N", "", "-C", who, "-f"])
                .arg(&key)
                .status()
                .expect("ssh-keygen (openssh-client) makes a key");
            assert!(made.success());
        }
        key
    }

    fn public_key(&self, who: &str) -> String {
        let key = self.key(who);
        std::fs::read_to_string(key.with_extension("pub")).unwrap().trim().to_owned()
    }

    /// A remove_image plan (it needs approval), made by the agent.
    fn plan(&self) -> PlanId {
        let request = json!({"operation": "plan", "action": "remove_image",
            "parameters": {"image_id": unused_image().as_str()}});
        let reply = self.rpc(&request);
        assert_eq!(reply["status"], "ok", "{reply}");
        PlanId::parse(reply["result"]["id"].as_str().unwrap()).unwrap()
    }

    fn rpc(&self, request: &Value) -> Value {
        self.h.rpc(AGENT, request.to_string().as_bytes()).to_json()
    }

    fn statement(&self, id: &PlanId) -> String {
        let reply = self.rpc(&json!({"operation": "statement", "plan_id": id.as_str()}));
        assert_eq!(reply["status"], "ok", "{reply}");
        assert_eq!(reply["result"]["namespace"], NAMESPACE);
        reply["result"]["text"].as_str().unwrap().to_owned()
    }

    /// `text` signed by `who` in `namespace`: the statement and its block.
    fn sign(&self, who: &str, text: &str, namespace: &str) -> String {
        let file = self.keys.path().join(format!("statement-{}", uuid::Uuid::new_v4().simple()));
        std::fs::write(&file, text).unwrap();
        let signed = Command::new(KEYGEN)
            .args(["-q", "-Y", "sign", "-n", namespace, "-f"])
            .arg(self.key(who))
            .arg(&file)
            .output()
            .unwrap();
        assert!(signed.status.success(), "{}", String::from_utf8_lossy(&signed.stderr));
        let signature = std::fs::read_to_string(file.with_extension("sig")).unwrap();
        format!("{text}{signature}")
    }

    fn carry(&self, id: &PlanId, approval: &str) -> Value {
        self.rpc(&json!({"operation": "signed_approval", "plan_id": id.as_str(), "approval": approval}))
    }

    fn execute(&self, id: &PlanId) -> Value {
        self.rpc(&json!({"operation": "execute", "plan_id": id.as_str()}))
    }

    /// Refused with `code`, and the plan neither approved nor run.
    fn refused(&self, id: &PlanId, approval: &str, code: Code, case: &str) {
        let reply = self.carry(id, approval);
        assert_eq!(reply["status"], "rejected", "{case}: {reply}");
        assert_eq!(reply["code"], code.as_str(), "{case}: {reply}");
        let message = reply["message"].as_str().unwrap();
        assert!(message.contains("othing was") || message.contains("not recorded"), "{case}: {reply}");
        let stored = self.h.controller().load(id, "root").unwrap();
        assert!(stored.approval.is_none(), "{case}: no approval recorded");
        assert_eq!(stored.state.as_str(), "pending", "{case}: nothing ran");
    }
}

fn signer_row(h: &Harness, id: &PlanId) -> (String, Option<String>, Option<String>) {
    let mut controller = h.controller();
    let conn = controller.store_for_tests().dangerous_connection_for_tests();
    conn.query_row(
        "SELECT actor, signer_key, statement_sha256 FROM audit WHERE plan_id = ?1 AND event = 'approved'",
        [id.as_str()],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .unwrap()
}

#[test]
fn a_signed_approval_carried_by_the_agent_is_verified_recorded_and_executes_once() {
    let s = Signing::new(true);
    let id = s.plan();
    let statement = s.statement(&id);
    assert!(statement.contains(&format!("plan: {id}")) && statement.contains("action: remove_image"));
    assert_eq!(s.statement(&id), statement, "the same bytes every time");
    // Before the approval, the execute is refused as today, and says the
    // operator may also sign on their own machine.
    let waiting = s.execute(&id);
    assert_eq!(waiting["code"], "approval_required");
    assert!(waiting["message"].as_str().unwrap().contains(&format!("volce-lab approve {id}")), "{waiting}");
    let approval = s.sign("alice", &statement, NAMESPACE);
    let reply = s.carry(&id, &approval);
    assert_eq!(reply["status"], "ok", "{reply}");
    assert_eq!(reply["operation"], "signed_approval");
    assert_eq!(reply["result"]["approval"]["by"], "alice", "{reply}");
    let (actor, key, digest) = signer_row(&s.h, &id);
    assert_eq!(actor, "alice");
    let fingerprint =
        Command::new(KEYGEN).arg("-lf").arg(s.key("alice").with_extension("pub")).output().unwrap();
    let fingerprint = String::from_utf8(fingerprint.stdout).unwrap();
    assert!(
        fingerprint.contains(key.as_deref().unwrap()),
        "the key as ssh-keygen -l names it: {fingerprint}"
    );
    assert_eq!(digest.unwrap().len(), 64);
    assert_eq!(s.execute(&id)["status"], "ok");
    // Replayed after it ran: the plan is used.
    let again = s.carry(&id, &approval);
    assert_eq!(again["code"], Code::PlanConsumed.as_str(), "{again}");
    assert_eq!(s.execute(&id)["code"], Code::PlanConsumed.as_str());
}

#[test]
fn each_forged_or_misdirected_approval_is_refused_with_its_own_code() {
    let s = Signing::new(true);
    let id = s.plan();
    let statement = s.statement(&id);
    s.refused(&id, &s.sign("mallory", &statement, NAMESPACE), Code::NotAnApprover, "no approver");
    s.refused(&id, &s.sign(AGENT, &statement, NAMESPACE), Code::SelfApproval, "the requester");
    let changed = statement.replace(unused_image().as_str(), &format!("sha256:{}", "e".repeat(64)));
    assert_ne!(changed, statement);
    s.refused(&id, &s.sign("alice", &changed, NAMESPACE), Code::StatementMismatch, "a parameter changed");
    let elsewhere: String = statement
        .lines()
        .map(|line| {
            if line.starts_with("host: ") { "host: other (machine-id 0)".to_owned() } else { line.to_owned() }
        })
        .map(|line| line + "\n")
        .collect();
    s.refused(&id, &s.sign("alice", &elsewhere, NAMESPACE), Code::ApprovalForAnotherHost, "another host");
    s.refused(&id, &s.sign("alice", &statement, "file"), Code::SignatureNamespace, "another namespace");
    s.refused(&id, &s.sign("bob", &statement, NAMESPACE), Code::SignatureInvalid, "a key not listed");
    let other = s.plan();
    s.refused(&other, &s.sign("alice", &statement, NAMESPACE), Code::ApprovalForAnotherPlan, "another plan");
    s.refused(&id, "approve it, please", Code::SignedApprovalMalformed, "no signature at all");
    // The approval that would verify still does, after all of that.
    assert_eq!(s.carry(&id, &s.sign("alice", &statement, NAMESPACE))["status"], "ok");
}

#[test]
fn the_operators_switches_and_files_decide_whether_a_signature_counts() {
    let s = Signing::new(false);
    let id = s.plan();
    let statement = s.statement(&id);
    let approval = s.sign("alice", &statement, NAMESPACE);
    s.refused(&id, &approval, Code::SoftwareKeyRefused, "a key in a file, hardware required");
    // Writable by others: nothing is verified.
    let mut s = Signing::new(true);
    let id = s.plan();
    let approval = s.sign("alice", &s.statement(&id), NAMESPACE);
    std::fs::set_permissions(s.signers_path(), std::fs::Permissions::from_mode(0o666)).unwrap();
    s.refused(&id, &approval, Code::SignersFileUnsafe, "allowed_signers writable by others");
    std::fs::remove_file(s.signers_path()).unwrap();
    s.refused(&id, &approval, Code::SignedApprovalsOff, "no allowed_signers");
    // The policy without `signed_approvals` (which voids pending plans: a new one).
    s.write_signers(&format!("alice namespaces=\"{NAMESPACE}\" {}", s.public_key("alice")));
    let mut policy = policy_json();
    policy["approvers"] = json!(["alice", "bob", AGENT]);
    s.h.write_policy(&policy);
    let id = s.plan();
    let approval = s.sign("alice", &s.statement(&id), NAMESPACE);
    s.refused(&id, &approval, Code::SignedApprovalsOff, "signed approvals off in the policy");
    let waiting = s.execute(&id);
    assert!(!waiting["message"].as_str().unwrap().contains("volce-lab approve"), "off: {waiting}");
}

#[test]
fn an_expired_plan_cannot_be_approved_by_signature() {
    let s = Signing::new(true);
    let id = s.plan();
    let approval = s.sign("alice", &s.statement(&id), NAMESPACE);
    s.h.clock.advance(3600);
    s.refused(&id, &approval, Code::PlanExpired, "after expiry");
}

#[test]
fn the_terminal_approval_is_unchanged() {
    let s = Signing::new(true);
    let id = s.plan();
    let digest = s.h.controller().load(&id, "root").unwrap().plan.digest.to_string();
    s.h.approve(&id, &digest, "alice").unwrap();
    let (actor, key, statement) = signer_row(&s.h, &id);
    assert_eq!((actor.as_str(), key, statement), ("alice", None, None));
    assert_eq!(s.execute(&id)["status"], "ok");
}

/// A rollout's statement (issue 43) over this host's plan and another
/// host's: the entry for this host names its plan and its own statement's
/// hash, and the top names the plan's action and parameters.
fn rollout(s: &Signing, id: &PlanId, entries: &[(&str, &PlanId, &str)]) -> String {
    use volce_lab::wire::rollout::{RolloutEntry, RolloutStatement};
    let stored = s.h.controller().load(id, "root").unwrap();
    RolloutStatement {
        rollout_id: volce_lab::vocab::RolloutId::parse(&"b".repeat(32)).unwrap(),
        manifest_sha256: "a".repeat(64),
        action: stored.plan.action,
        parameters: volce_lab::control::canonical::to_string(&stored.plan.parameters).unwrap(),
        batch_size: 1,
        health_wait_seconds: 5,
        entries: entries
            .iter()
            .map(|(host, plan, sha)| RolloutEntry {
                host: (*host).to_owned(),
                plan_id: (*plan).clone(),
                statement_sha256: (*sha).to_owned(),
            })
            .collect(),
    }
    .render()
}

fn sha256(text: &str) -> String {
    use sha2::Digest as _;
    volce_lab::text::hex(&sha2::Sha256::digest(text.as_bytes()))
}

/// What was tried: a rollout that names only other hosts, one whose line
/// for this host names another plan, another statement hash, another
/// action at the top, and one changed after it was signed; each refused
/// with its own code, nothing approved. Then the rollout as signed is
/// recorded with the rollout statement's hash, and the plan runs once.
#[test]
fn a_signed_rollout_approves_only_this_hosts_own_line() {
    let s = Signing::new(true);
    let id = s.plan();
    let statement = s.statement(&id);
    let host = volce_lab::wire::signed::statement_field(&statement, "host").unwrap().to_owned();
    let own = sha256(&statement);
    let other_plan = PlanId::parse(&"c".repeat(32)).unwrap();
    let other_host = "web-2 (machine-id 00000000000000000000000000000002)";
    let good = rollout(&s, &id, &[(other_host, &other_plan, &"d".repeat(64)), (&host, &id, &own)]);

    let elsewhere = rollout(&s, &id, &[(other_host, &other_plan, &"d".repeat(64))]);
    s.refused(&id, &s.sign("alice", &elsewhere, NAMESPACE), Code::ApprovalForAnotherHost, "other hosts only");
    let another_plan = rollout(&s, &id, &[(&host, &other_plan, &own)]);
    s.refused(&id, &s.sign("alice", &another_plan, NAMESPACE), Code::ApprovalForAnotherPlan, "another plan");
    let another_hash = rollout(&s, &id, &[(&host, &id, &"e".repeat(64))]);
    s.refused(&id, &s.sign("alice", &another_hash, NAMESPACE), Code::StatementMismatch, "another hash");
    let another_action = good.replace("action: remove_image", "action: restart");
    s.refused(&id, &s.sign("alice", &another_action, NAMESPACE), Code::StatementMismatch, "another action");
    let forged = s.sign("alice", &good, NAMESPACE).replace(&other_plan.to_string(), &"f".repeat(32));
    s.refused(&id, &forged, Code::SignatureInvalid, "an entry changed after signing");

    let reply = s.carry(&id, &s.sign("alice", &good, NAMESPACE));
    assert_eq!(reply["status"], "ok", "{reply}");
    let (actor, key, digest) = signer_row(&s.h, &id);
    assert_eq!((actor.as_str(), key.is_some()), ("alice", true));
    assert_eq!(digest.as_deref(), Some(sha256(&good).as_str()), "the row keeps the rollout's hash");
    assert_eq!(s.execute(&id)["status"], "ok");
    assert_eq!(s.execute(&id)["code"], Code::PlanConsumed.as_str());
}
