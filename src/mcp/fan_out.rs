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
//!   a model reads first says what needs attention.

use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::result::{Summary, TargetCheck};
use crate::inspect::{Check, CheckResult, Inspector, Status};

/// Runs `check` on every `(name, inspector)`, at most `width` at once;
/// the results come back in the order given.
pub async fn check_all(
    targets: Vec<(String, Arc<Inspector>)>,
    width: usize,
    check: Check,
) -> Vec<(String, CheckResult)> {
    let slots = Arc::new(Semaphore::new(width.max(1)));
    let mut tasks = JoinSet::new();
    for (index, (name, inspector)) in targets.into_iter().enumerate() {
        let slots = slots.clone();
        tasks.spawn(async move {
            // The semaphore is never closed, so a permit always comes.
            let _slot = slots.acquire_owned().await.expect("the fan-out's semaphore stays open");
            (index, name, inspector.check(check).await)
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
/// `cloud_check` would give it): the overall status (`ok` only when every
/// target is), the sentence, the results with the targets that are not ok
/// first, and the ok / failed counts.
pub fn gather(check: Check, answers: Vec<TargetCheck>) -> (Status, String, Vec<TargetCheck>, Summary) {
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
        let (status, message, results, summary) = gather(
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

        let (status, message, _, summary) = gather(Check::Identity, vec![answer("a", Status::Ok)]);
        assert_eq!((status, summary), (Status::Ok, Summary { ok: 1, failed: 0 }));
        assert_eq!(message, "The one target answered identity ok.");
    }
}
