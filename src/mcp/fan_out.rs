//! `cloud_check` over several targets at once: at most `width` checks run
//! together, each behind its own target's identity gate, ssh master and
//! timeout, and the results are gathered into one answer. Runs
//! unprivileged inside `volce-lab mcp-serve`.
//!
//! Invariants enforced here:
//! - read-only: only checks fan out (`super::tools::Selection`);
//! - a failing, slow or mismatched target delays no other beyond its own
//!   timeout (each check runs as its own task; a slot frees when its
//!   check ends) and fails no other (one result per target, whatever it is);
//! - the answer leads with the targets that are not ok, so the text mirror
//!   a model reads first says what needs attention;
//! - two targets that both answered ok as the same identity (host and
//!   account) are named (`targets_share_identity`, issue 38): each still
//!   has its result, but the answer is not ok, since everything that takes
//!   targets to be distinct servers (a plan made on one is unknown on the
//!   other) would be false for them.

use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::result::{Summary, TargetCheck, Verdict};
use crate::inspect::{Check, CheckResult, Inspector, Status};
use crate::vocab::Code;
use crate::wire::witness::Witnessed;

/// A group of configured targets that share one identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedIdentity {
    pub host: String,
    pub user: String,
    /// Two or more, in the order given.
    pub targets: Vec<String>,
}

/// The groups of two or more of `identities` (name, host, account) that
/// share a host and account, in the order their first member was given.
pub fn sharing<'a>(identities: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>) -> Vec<SharedIdentity> {
    let mut groups: Vec<SharedIdentity> = Vec::new();
    for (name, host, user) in identities {
        match groups.iter_mut().find(|g| g.host == host && g.user == user) {
            Some(group) => group.targets.push(name.to_owned()),
            None => groups.push(SharedIdentity {
                host: host.to_owned(),
                user: user.to_owned(),
                targets: vec![name.to_owned()],
            }),
        }
    }
    groups.retain(|g| g.targets.len() > 1);
    groups
}

impl SharedIdentity {
    /// The sentence naming the group, as a fan-out's answer gives it.
    pub fn answered(&self) -> String {
        format!(
            "Targets {} answered as one identity (host {}, account {}): volce-lab cannot tell them apart, so a \
             plan made through one of them may be known on the others (targets_share_identity).",
            self.targets.join(", "),
            self.host,
            self.user
        )
    }

    /// The note a call naming `target`, one of the group, carries.
    pub fn note_for(&self, target: &str) -> String {
        let others: Vec<&str> = self.targets.iter().map(String::as_str).filter(|t| *t != target).collect();
        format!(
            "Note (targets_share_identity): {} also expect{} host {} and account {}, so volce-lab cannot tell \
             {target} from {}: a plan made through either may be known on both; treat them as one server.",
            others.join(", "),
            if others.len() == 1 { "s" } else { "" },
            self.host,
            self.user,
            if others.len() == 1 { "it" } else { "them" }
        )
    }
}

/// One target of a fan-out: its name, its inspector, and the audit head
/// this workstation witnessed of it (`super::witness`), which its helper
/// request carries.
pub type Target = (String, Arc<Inspector>, Option<Witnessed>);

/// Runs `check` on every [`Target`], at most `width` at once; the results
/// come back in the order given.
pub async fn check_all(targets: Vec<Target>, width: usize, check: Check) -> Vec<(String, CheckResult)> {
    let slots = Arc::new(Semaphore::new(width.max(1)));
    let mut tasks = JoinSet::new();
    for (index, (name, inspector, witnessed)) in targets.into_iter().enumerate() {
        let slots = slots.clone();
        tasks.spawn(async move {
            // The semaphore is never closed, so a permit always comes.
            let _slot = slots.acquire_owned().await.expect("the fan-out's semaphore stays open");
            (index, name, inspector.check_witnessed(check, witnessed.as_ref()).await)
        });
    }
    let mut results: Vec<(usize, String, CheckResult)> = Vec::with_capacity(tasks.len());
    while let Some(joined) = tasks.join_next().await {
        // A check returns a result for every failure; a panic is a bug and
        // is raised here rather than reported as a target's answer.
        results.push(joined.unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic())));
    }
    results.sort_by_key(|(index, _, _)| *index);
    results.into_iter().map(|(_, name, result)| (name, result)).collect()
}

/// The fan-out's answer from each target's result (as a single
/// `cloud_check` would give it) and the groups of targets that answered
/// as one identity: the verdict (`ok` only when every target is and no two
/// share an identity), the results with the targets that are not ok
/// first, and the ok / failed counts.
pub fn gather(
    check: Check,
    answers: Vec<TargetCheck>,
    shared: &[SharedIdentity],
) -> (Verdict, Vec<TargetCheck>, Summary) {
    let (status, message, results, summary) = each(check, answers);
    if shared.is_empty() {
        return (Verdict::of_fan_out(status, message), results, summary);
    }
    let named: Vec<String> = shared.iter().map(SharedIdentity::answered).collect();
    let message = format!("{message} {}", named.join(" "));
    let verdict = Verdict::new(Status::CheckFailed, Some(Code::TargetsShareIdentity.into()), message);
    (verdict, results, summary)
}

/// [`gather`] of the results alone.
fn each(check: Check, answers: Vec<TargetCheck>) -> (Status, String, Vec<TargetCheck>, Summary) {
    let (ok, not_ok): (Vec<_>, Vec<_>) =
        answers.into_iter().partition(|answer| answer.verdict.status == Status::Ok);
    let total = ok.len() + not_ok.len();
    let status = if not_ok.is_empty() { Status::Ok } else { Status::CheckFailed };
    let message = if not_ok.is_empty() {
        let all = if total == 1 { "The one target".to_owned() } else { format!("All {total} targets") };
        format!("{all} answered {} ok.", check.as_str())
    } else {
        let named: Vec<String> = not_ok
            .iter()
            .map(|answer| {
                let name = answer.base.target.as_deref().unwrap_or_default();
                format!("{name} ({})", answer.verdict.status.as_str())
            })
            .collect();
        format!(
            "{} of {total} targets are not ok: {}; each result's message says what to do, and the other {} \
             answered ok.",
            not_ok.len(),
            named.join(", "),
            ok.len()
        )
    };
    let summary = Summary { ok: ok.len(), failed: not_ok.len() };
    let results = not_ok.into_iter().chain(ok).collect();
    (status, message, results, summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Mode;
    use crate::mcp::result::{Base, Verdict};

    fn answer(name: &str, status: Status) -> TargetCheck {
        let base = Base {
            request_id: "r".into(),
            timestamp: "t".into(),
            is_demo: false,
            mode: Mode::Ssh,
            target: Some(name.into()),
        };
        let verdict = Verdict::new(status, None, String::new());
        TargetCheck {
            base,
            check: Check::Disk,
            exit_code: None,
            output: String::new(),
            execution: None,
            verdict,
        }
    }

    #[test]
    fn the_targets_that_are_not_ok_come_first_and_are_named() {
        let (status, message, results, summary) = each(
            Check::Disk,
            vec![
                answer("a", Status::Ok),
                answer("b", Status::ConnectionFailed),
                answer("c", Status::Ok),
                answer("d", Status::IdentityMismatch),
            ],
        );
        assert_eq!(status, Status::CheckFailed);
        assert_eq!(summary, Summary { ok: 2, failed: 2 });
        let order: Vec<&str> = results.iter().map(|r| r.base.target.as_deref().unwrap()).collect();
        assert_eq!(order, ["b", "d", "a", "c"]);
        assert!(
            message.starts_with("2 of 4 targets are not ok: b (connection_failed), d (identity_mismatch);")
        );

        let (status, message, _, summary) = each(Check::Identity, vec![answer("a", Status::Ok)]);
        assert_eq!((status, summary), (Status::Ok, Summary { ok: 1, failed: 0 }));
        assert_eq!(message, "The one target answered identity ok.");
    }

    /// Issue 38: two names for one server. Groups are of two or more, by
    /// host and account together, in the order given.
    #[test]
    fn targets_sharing_a_host_and_account_are_grouped_and_named() {
        let groups = sharing([
            ("a", "srv", "agent"),
            ("b", "other", "agent"),
            ("c", "srv", "agent"),
            ("d", "srv", "deploy"),
            ("e", "other", "agent"),
        ]);
        let names: Vec<&[String]> = groups.iter().map(|g| g.targets.as_slice()).collect();
        assert_eq!(names, [["a", "c"], ["b", "e"]]);
        assert!(sharing([("a", "srv", "agent"), ("b", "srv", "deploy")]).is_empty());
        assert_eq!(
            groups[0].note_for("c"),
            "Note (targets_share_identity): a also expects host srv and account agent, so volce-lab cannot \
             tell c from it: a plan made through either may be known on both; treat them as one server."
        );
        let (verdict, results, summary) =
            gather(Check::Identity, vec![answer("a", Status::Ok), answer("c", Status::Ok)], &groups[..1]);
        assert_eq!(
            (verdict.status, summary, results.len()),
            (Status::CheckFailed, Summary { ok: 2, failed: 0 }, 2)
        );
        assert_eq!(verdict.code, Some(Code::TargetsShareIdentity.into()));
        assert!(
            verdict.message.starts_with("All 2 targets answered identity ok. Targets a, c answered as one")
        );
    }
}
