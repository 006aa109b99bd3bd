//! `volce-lab-host list` (alias `pending`): what awaits the operator, one
//! line per plan, then the apps volce-lab manages as recorded; or the same
//! as one JSON object for scripts. Pure rendering; runs as root inside the
//! host helper.
//!
//! Security invariant: every value that came from the agent or through it
//! (app names, requester, server names, catalog keys) passes through
//! [`crate::text::for_terminal`] in the text view, and the JSON view
//! escapes every hidden character as `\uXXXX`
//! ([`crate::text::json_for_terminal`]), so neither can move the cursor,
//! recolour, hide or reorder what the operator reads.

use serde_json::{Value, json};

use super::controller::Awaiting;
use super::liveness::Hold;
use crate::store::StoredPlan;
use crate::text::{for_terminal as esc, rfc3339_seconds as time};
use crate::vocab::PlanState;

/// The one line for an empty list: what it means and what to do.
pub const NOTHING_AWAITS: &str = "No plan awaits you: nothing is pending, executing or needing inspection. \
     When the agent asks for an approval it names a plan: read it with sudo volce-lab-host show PLAN_ID.";

/// What `list` and `show` say first while a migration waits for a plan
/// the previous version executes: the refusal's sentence, and that what
/// follows was read from a copy migrated in memory.
pub fn waiting_note(waiting: &crate::vocab::Refusal, command: &str) -> String {
    format!(
        "upgrade_waiting: {}\nWhat follows was read from a copy of the state database migrated in memory; the \
         database itself stays unchanged until that plan has finished. This {command} is counted in the audit \
         trail then, not recorded now.\n\n",
        waiting.message
    )
}

/// The text view.
pub fn render(awaiting: &Awaiting) -> String {
    let now = awaiting.now;
    let mut out = String::new();
    if awaiting.plans.is_empty() {
        out.push_str(NOTHING_AWAITS);
        out.push('\n');
    } else {
        let count = awaiting.plans.len();
        out.push_str(&format!(
            "{count} plan{} await{} you (newest first, at {}):\n",
            if count == 1 { "" } else { "s" },
            if count == 1 { "s" } else { "" },
            time(now)
        ));
        out.push_str(&table(&plan_rows(awaiting)));
        out.push_str("Read a plan before you decide: sudo volce-lab-host show PLAN_ID (it prints the approve command).\n");
        out.push_str("End a pending plan you do not want: sudo volce-lab-host reject PLAN_ID.\n");
        if !awaiting.stopped.is_empty() {
            out.push_str(
                "A STOPPED claimer holds its plan executing until it is continued or killed, a STUCK one until \
                 its unread output is let go or it is killed: sudo volce-lab-host show PLAN_ID says how \
                 (kill -CONT, or end who holds its output, to finish; or kill -KILL, then resolve).\n",
            );
        }
        if awaiting.plans.iter().any(|p| p.state == PlanState::NeedsInspection) {
            out.push_str(
                "A plan that needs inspection blocks every new plan: inspect the server (operator.md), \
                 then sudo volce-lab-host resolve PLAN_ID.\n",
            );
        }
    }
    if awaiting.expired_pending > 0 {
        let n = awaiting.expired_pending;
        out.push_str(&format!(
            "{n} expired plan{} not shown: nothing can approve or execute {}.\n",
            if n == 1 { " is" } else { "s are" },
            if n == 1 { "it" } else { "them" }
        ));
    }
    out.push('\n');
    apps_lines(&mut out, awaiting);
    out
}

/// The table of awaiting plans, a header row first.
fn plan_rows(awaiting: &Awaiting) -> Vec<Vec<String>> {
    let now = awaiting.now;
    let mut rows = vec![
        ["PLAN", "STATE", "ACTION", "APP", "REQUESTER", "AGE", "LEFT", "APPROVED"]
            .map(str::to_owned)
            .to_vec(),
    ];
    for stored in &awaiting.plans {
        let plan = &stored.plan;
        let stopped = awaiting.stopped.iter().find(|(id, _)| *id == plan.id);
        rows.push(vec![
            plan.id.to_string(),
            match (stopped, stored.claimed_at) {
                (Some((_, s)), Some(at)) => {
                    format!("executing, claimer {} {} (claimed {})", s.pid, s.hold.label(), time(at))
                }
                (Some((_, s)), None) => format!("executing, claimer {} {}", s.pid, s.hold.label()),
                (None, _) => stored.state.as_str().to_owned(),
            },
            plan.action.as_str().to_owned(),
            plan.payload.app().map(esc).unwrap_or_else(|| "-".to_owned()),
            esc(&plan.requester),
            duration(now - plan.created_at),
            match seconds_left(stored, now) {
                Some(left) => format!("{} min {} s", left / 60, left % 60),
                None => "-".to_owned(),
            },
            approved(stored),
        ]);
    }
    rows
}

/// The managed apps, as recorded.
fn apps_lines(out: &mut String, awaiting: &Awaiting) {
    if awaiting.apps.is_empty() {
        out.push_str("No app is managed yet.\n");
    } else {
        out.push_str("Apps volce-lab manages, as recorded (docker itself may have changed since):\n");
        let mut rows =
            vec![["APP", "STATE", "PORT", "SERVER NAME", "IMAGE", "LAST PLAN"].map(str::to_owned).to_vec()];
        for app in awaiting.apps.values() {
            rows.push(vec![
                esc(app.app.as_str()),
                app.state.as_str().to_owned(),
                app.host_port.to_string(),
                esc(&crate::vocab::served_names(app.server_name.as_str(), &app.also_server_names)),
                esc(&app.image_key),
                app.plan_id.to_string(),
            ]);
        }
        out.push_str(&table(&rows));
    }
}

/// The JSON view: stable field names, times RFC 3339 UTC.
/// The JSON view; `upgrade_waiting` is the waiting refusal's sentence when
/// it was read from a copy migrated in memory (`Host::list`), else null.
pub fn to_json(awaiting: &Awaiting, waiting: Option<&crate::vocab::Refusal>) -> Value {
    let now = awaiting.now;
    let plans: Vec<Value> = awaiting
        .plans
        .iter()
        .map(|stored| {
            let plan = &stored.plan;
            let held = |hold: Hold| {
                awaiting.stopped.iter().find(|(id, s)| *id == plan.id && s.hold == hold).map(|(_, s)| s.pid)
            };
            json!({
                "plan_id": plan.id,
                "state": stored.state,
                "action": plan.action,
                "app": plan.payload.app(),
                "requester": plan.requester,
                "created_at": time(plan.created_at),
                "expires_at": time(plan.expires_at),
                "age_seconds": (now - plan.created_at).max(0),
                "seconds_left": seconds_left(stored, now),
                "requires_approval": plan.requires_approval,
                "approved": stored.approval.is_some(),
                "approved_by": stored.approval.as_ref().map(|a| &a.by),
                "approved_at": stored.approval.as_ref().map(|a| time(a.at)),
                "claimer_stopped_pid": held(Hold::Stopped),
                "claimer_stuck_on_output_pid": held(Hold::StuckOnOutput),
            })
        })
        .collect();
    let apps: Vec<Value> = awaiting
        .apps
        .values()
        .map(|app| {
            json!({
                "app": app.app,
                "state": app.state,
                "host_port": app.host_port,
                "server_name": app.server_name,
                "also_server_names": app.also_server_names,
                "image": app.image_key,
                "last_plan": app.plan_id,
            })
        })
        .collect();
    json!({
        "now": time(now),
        "plans": plans,
        "expired_pending": awaiting.expired_pending,
        "apps": apps,
        "upgrade_waiting": waiting.map(|refusal| &refusal.message),
    })
}

/// Seconds until a pending plan expires; `None` for a plan that is past
/// approval (executing, needs inspection), where expiry no longer matters.
fn seconds_left(stored: &StoredPlan, now: i64) -> Option<i64> {
    (stored.state == PlanState::Pending).then(|| (stored.plan.expires_at - now).max(0))
}

fn approved(stored: &StoredPlan) -> String {
    match (&stored.approval, stored.plan.requires_approval) {
        (_, false) => "not needed".to_owned(),
        (None, true) => "NO".to_owned(),
        (Some(a), true) => format!("yes, by {}", esc(&a.by)),
    }
}

/// A coarse age: `45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`.
fn duration(secs: i64) -> String {
    let secs = secs.max(0);
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        3600..86400 => format!("{} h {} min", secs / 3600, secs % 3600 / 60),
        _ => format!("{} d {} h", secs / 86400, secs % 86400 / 3600),
    }
}

/// Left-aligned columns two spaces apart, each line indented by two.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|cell| cell.chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::from("  ");
        for (cell, width) in row.iter().zip(&widths) {
            line.push_str(cell);
            line.extend(std::iter::repeat_n(' ', width - cell.chars().count() + 2));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_coarse_and_never_negative() {
        assert_eq!(duration(-5), "0 s");
        assert_eq!(duration(59), "59 s");
        assert_eq!(duration(60), "1 min");
        assert_eq!(duration(3600 + 5 * 60 + 7), "1 h 5 min");
        assert_eq!(duration(2 * 86400 + 4 * 3600), "2 d 4 h");
    }

    #[test]
    fn columns_line_up_by_characters() {
        let rows = vec![vec!["A".to_owned(), "B".to_owned()], vec!["éé".to_owned(), "x".to_owned()]];
        assert_eq!(table(&rows), "  A   B\n  éé  x\n");
    }
}
