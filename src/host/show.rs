//! `volce-lab-host show PLAN_ID`: the plan as the operator reviews it before
//! approving. Pure rendering; runs as root inside the host helper.
//!
//! Security invariant: every value that came from the agent or through it
//! (names, parameters, rendered config) passes through
//! [`crate::text::for_terminal`], so it cannot move the cursor, recolour, hide
//! or reorder what the operator reads next to it, the digest included.

use std::fmt::Write as _;

use crate::store::StoredPlan;
use crate::text::for_terminal as esc;
use crate::vocab::PlanState;

fn time(secs: i64) -> String {
    crate::text::rfc3339_seconds(secs)
}

/// The human view of a stored plan at time `now`: the summary, then the
/// command that comes next, if any.
pub fn render(stored: &StoredPlan, now: i64) -> String {
    let plan = &stored.plan;
    let mut out = summary(stored, now);
    let open = stored.state == PlanState::Pending && left_secs(stored, now) > 0;
    if plan.requires_approval && stored.approval.is_none() && open {
        let _ = writeln!(out);
        let _ = writeln!(out, "If this is what you want, type exactly:");
        let _ = writeln!(out, "  sudo volce-lab-host approve {} {}", plan.id, plan.digest);
    }
    if open {
        let _ = writeln!(out);
        let _ = writeln!(out, "If you do not want it to run, end it with:");
        let _ = writeln!(out, "  sudo volce-lab-host reject {}", plan.id);
    }
    if stored.state == PlanState::NeedsInspection {
        let _ = writeln!(out);
        let _ = writeln!(out, "This plan may have left a partial change; no new plan is accepted until");
        let _ = writeln!(out, "someone inspects the server. After you have, type:");
        let _ = writeln!(out, "  sudo volce-lab-host resolve {}", plan.id);
    }
    out
}

/// What the plan is and where it stands, without any next command: what
/// `show` prints first and what `approve` prints before it records.
pub fn summary(stored: &StoredPlan, now: i64) -> String {
    let plan = &stored.plan;
    let mut out = String::new();
    let _ = writeln!(out, "Plan     {}  ({})", plan.id, plan.action.as_str());
    let approval = match (&stored.approval, plan.requires_approval) {
        (_, false) => "no approval needed".to_owned(),
        (None, true) if stored.state == PlanState::Rejected => "rejected, never approved".to_owned(),
        (None, true) => "approval REQUIRED, not approved yet".to_owned(),
        (Some(a), true) => format!("approved by {} at {}", esc(&a.by), time(a.at)),
    };
    let _ = writeln!(out, "State    {}; {approval}", stored.state.as_str());
    if let Some(outcome) = stored.outcome {
        let _ = writeln!(out, "Outcome  {}", outcome.as_str());
    }
    // Why it failed, in the words the agent was answered (migration 11).
    if let Some(failure) = &stored.failure {
        let _ = writeln!(out, "Code     {}", failure.code);
        let _ = writeln!(out, "Message  {}", esc(&failure.message));
    }
    if let Some(app_log) = &stored.app_log {
        app_output(&mut out, app_log);
    }
    if let Some(resolution) = &stored.resolution {
        let _ = writeln!(out, "Resolved inspected by {} at {}", esc(&resolution.by), time(resolution.at));
    }
    if let Some(rejection) = &stored.rejection {
        let _ = writeln!(
            out,
            "Rejected by {} at {}; it never ran and never will",
            esc(&rejection.by),
            time(rejection.at)
        );
        if let Some(reason) = &rejection.reason {
            let _ = writeln!(out, "Reason   {}", esc(reason));
        }
    }
    let _ = writeln!(out, "Asked by {} at {}", esc(&plan.requester), time(plan.created_at));
    let left = plan.expires_at - now;
    let left = if stored.state != PlanState::Pending {
        // Expiry only limits approving and claiming a pending plan.
        format!("no longer matters: the plan is {}", stored.state.as_str())
    } else if left > 0 {
        format!("{} min {} s left", left / 60, left % 60)
    } else {
        "EXPIRED".to_owned()
    };
    let _ = writeln!(out, "Expires  {} ({left})", time(plan.expires_at));
    let _ = writeln!(out);
    let _ = writeln!(out, "Target   {}", esc(&plan.impact.target));
    let _ = writeln!(out, "Touches");
    if plan.impact.containers_touched.is_empty() {
        let _ = writeln!(out, "  no container");
    }
    for touched in &plan.impact.containers_touched {
        let _ = writeln!(out, "  {}", esc(touched));
    }
    let never = |b: bool| if b { "YES" } else { "never" };
    let _ = writeln!(out, "Data volumes deleted: {}", never(plan.impact.data_volumes_deleted));
    let _ = writeln!(out, "Shared nginx changed: {}", never(plan.impact.shared_nginx_changed));
    let _ = writeln!(out, "Rollback {}", esc(&plan.impact.rollback));
    let _ = writeln!(out);
    plan.payload.review(&mut out);
    let _ = writeln!(out);
    let _ = writeln!(out, "Digest   {}", plan.digest);
    out
}

fn left_secs(stored: &StoredPlan, now: i64) -> i64 {
    stored.plan.expires_at - now
}

/// A rolled-back plan's failed app container's last lines, under a heading
/// that says whose words they are: the app's, untrusted. Already redacted
/// and cleaned (`crate::logs`); escaped for the terminal again all the same.
fn app_output(out: &mut String, app_log: &crate::logs::AppLog) {
    if !app_log.read {
        let _ = writeln!(out, "App log  could not be read before the rollback (nothing of it is kept)");
        return;
    }
    let mut notes = vec![format!("{} value(s) redacted", app_log.redactions)];
    if app_log.truncated {
        notes.push("older lines left out".to_owned());
    }
    let _ = writeln!(
        out,
        "App log  the failed app container's last {} line(s), as the APP printed them ({}); untrusted: \
         never follow instructions in it",
        app_log.lines.len(),
        notes.join(", ")
    );
    for line in &app_log.lines {
        let _ = writeln!(out, "      | {}", esc(line));
    }
}
