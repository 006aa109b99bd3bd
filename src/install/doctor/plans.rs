//! The doctor's finding for a plan that blocks the host: an executing
//! plan's claimer (stopped or stuck on its output, with its pid, or running) and a plan that needs
//! inspection with what carries its label on the engine. Runs as root
//! inside `volce-lab-host doctor`; read-only, through [`DoctorProbe`].

use std::path::Path;

use super::{DoctorProbe, Finding, fail};

/// A plan that blocks the host, with the way out its state allows: an
/// executing plan's claimer is running or stopped (show says which, with
/// the pid); a plan that needs inspection names what carries its label.
pub(super) fn stuck_plan(dir: &Path, probe: &dyn DoctorProbe, plan: &str, state: &str) -> Finding {
    if state == "executing" {
        if let Some(held) = probe.stopped_claimer(dir, plan) {
            let pid = held.pid;
            let group = if held.group_leader { "-- -" } else { "" };
            let first = match held.hold {
                crate::host::Hold::Stopped => format!("kill -CONT {pid} lets it finish its one action"),
                crate::host::Hold::StuckOnOutput => format!(
                    "ending whoever holds the other end of its stdout (ls -l /proc/{pid}/fd/1 names the pipe) \
                     lets it finish its one action"
                ),
            };
            return fail(
                "plan",
                format!(
                    "{plan} is executing; its claimer, process {pid}, is {} and holds it",
                    held.hold.label()
                ),
                format!(
                    "{first}; or kill -KILL {group}{pid}, then \
                     volce-lab-host show {plan} (it is then needs_inspection, claimer_died, and never runs \
                     again: show names what it left) and volce-lab-host resolve {plan}"
                ),
            );
        }
        return fail(
            "plan",
            format!("{plan} is executing"),
            format!(
                "volce-lab-host show {plan} names its claimer's pid and whether it is stopped or stuck on its \
                 output; a running one finishes by itself; a stopped one: kill -CONT PID to let it finish, or \
                 kill -KILL PID, then volce-lab-host show {plan} and resolve {plan} (it is then \
                 needs_inspection and never runs again)"
            ),
        );
    }
    let left = match probe.leftovers(dir, plan) {
        None => String::new(),
        Some(Ok(lines)) if lines.is_empty() => "; nothing on the engine carries its label".to_owned(),
        Some(Ok(lines)) => {
            format!("; carrying its label {}={plan}: {}", crate::vocab::LABEL_PLAN, lines.join("; "))
        }
        Some(Err(why)) => format!("; the engine could not be asked what carries its label: {why}"),
    };
    fail(
        "plan",
        format!("{plan} is {state}{left}"),
        format!("volce-lab-host show {plan}; {}", crate::host::leftovers::PATH.replace("PLAN_ID", plan)),
    )
}
