//! `volce-lab-host list --watch`: the `list` view kept current, with no
//! daemon: the command re-reads the store every [`WATCH_INTERVAL`] and
//! prints the view again when a plan arrived or changed, and names the
//! plans that newly wait for approval (the terminal edge rings the bell for
//! them under `--bell`). Runs as root inside the host helper, for the
//! operator's terminal only.
//!
//! The command is one `list` request: its audit row is written once, after
//! the first read; the later reads are that request's, and add no row each
//! second to the trail.

use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::time::Duration;

use super::controller::{Awaiting, Liveness};
use super::list;
use super::pipeline::Host;
use super::request_row::Caller;
use crate::control::Clock;
use crate::docker::Engine;
use crate::store::AuditOperation;
use crate::vocab::PlanState;
use crate::vocab::{PlanId, Refusal};

/// How often the store is read again: a new plan shows within two seconds.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// One view of what awaits the operator.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// What `list` prints.
    pub text: String,
    /// The plans that wait for an approval and did not in the last frame
    /// (empty in the first frame: what waited already is no news).
    pub new_waiting: Vec<PlanId>,
}

/// What a change of the view is judged on: the plans, their states and
/// approvals, the apps' states; not the clock, so an unchanged list is not
/// printed again each second.
fn key(awaiting: &Awaiting) -> Vec<String> {
    let plans = awaiting
        .plans
        .iter()
        .map(|stored| format!("{} {} {}", stored.plan.id, stored.state.as_str(), stored.approval.is_some()));
    let apps = awaiting.apps.values().map(|app| format!("{} {}", app.app, app.state.as_str()));
    plans.chain(apps).chain([awaiting.expired_pending.to_string()]).collect()
}

/// The plans that wait for an operator's approval now.
fn waiting(awaiting: &Awaiting) -> BTreeSet<PlanId> {
    awaiting
        .plans
        .iter()
        .filter(|s| s.state == PlanState::Pending && s.plan.requires_approval && s.approval.is_none())
        .map(|s| s.plan.id.clone())
        .collect()
}

impl<E: Engine, C: Clock, L: Liveness> Host<E, C, L> {
    /// `list --watch`: hands `show` the first view, then, after each
    /// `pause`, the view again if it changed, until `show` breaks. The
    /// shipped edge pauses [`WATCH_INTERVAL`] and breaks never (Ctrl-C
    /// ends it); tests pass their own.
    pub fn watch(
        self,
        caller: &str,
        mut show: impl FnMut(&Frame) -> ControlFlow<()>,
        mut pause: impl FnMut(),
    ) -> Result<(), Refusal> {
        let who = Caller::from(caller);
        let mut controller = self.open()?;
        controller.begin_request(who.request(AuditOperation::List));
        let first = controller.awaiting(caller);
        let first = controller.answer(first, None, None)?;
        let (mut last, mut seen) = (key(&first), waiting(&first));
        if show(&Frame { text: list::render(&first), new_waiting: Vec::new() }).is_break() {
            return Ok(());
        }
        loop {
            pause();
            let awaiting = controller.awaiting(caller)?;
            let now_waiting = waiting(&awaiting);
            let new_waiting: Vec<PlanId> = now_waiting.difference(&seen).cloned().collect();
            let changed = key(&awaiting);
            seen = now_waiting;
            if changed == last && new_waiting.is_empty() {
                continue;
            }
            last = changed;
            if show(&Frame { text: list::render(&awaiting), new_waiting }).is_break() {
                return Ok(());
            }
        }
    }
}
