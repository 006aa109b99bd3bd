//! What a plan that did not finish may have left on the engine: every
//! container and network carrying its label `io.volce-lab.plan=<id>`, for
//! `show`, `resolve` and `doctor`. Runs as root inside the host helper (and
//! its doctor); read-only: one snapshot and one `network ls` by label.
//!
//! The label is the one thing every object a plan creates carries (deploy
//! and update set it on each container and network), so a claimer killed
//! midway (a relayed TERM, an operator's `kill -KILL`) cannot leave one
//! without it. Objects the plan only touched (a container it stopped) carry
//! an older plan's label and are not listed: they are the app's, recorded.

use std::fmt::Write as _;

use crate::docker::{Engine, EngineError, LabelledNetwork};
use crate::text::for_terminal as esc;
use crate::vocab::{LABEL_PLAN, PlanId};

/// One container carrying the plan's label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftContainer {
    pub id: String,
    pub name: String,
    /// Docker's state word: `running`, `exited`, `created`, ...
    pub state: String,
}

/// Everything on the engine carrying one plan's label.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Leftovers {
    pub containers: Vec<LeftContainer>,
    pub networks: Vec<LabelledNetwork>,
}

impl Leftovers {
    pub fn is_empty(&self) -> bool {
        self.containers.is_empty() && self.networks.is_empty()
    }

    /// One line per object: `container ID NAME (STATE)`, `network ID NAME`.
    pub fn lines(&self) -> Vec<String> {
        let containers = self
            .containers
            .iter()
            .map(|c| format!("container {} {} ({})", c.id, esc(&c.name), esc(&c.state)));
        let networks = self.networks.iter().map(|n| format!("network {} {}", esc(&n.id), esc(&n.name)));
        containers.chain(networks).collect()
    }
}

/// Asks the engine, read-only, for everything carrying `plan`'s label.
pub fn find(engine: &impl Engine, plan: &PlanId) -> Result<Leftovers, EngineError> {
    let snapshot = engine.snapshot()?;
    let containers = snapshot
        .containers
        .iter()
        .filter(|c| c.labels.get(LABEL_PLAN).map(String::as_str) == Some(plan.as_str()))
        .map(|c| LeftContainer { id: c.id.to_string(), name: c.name.clone(), state: c.state.clone() })
        .collect();
    let mut networks = engine.plan_networks(plan)?;
    networks.sort();
    Ok(Leftovers { containers, networks })
}

/// The documented way from a plan that may have left something to a clean
/// server, in the words `show`, `resolve` and `doctor` share.
pub const PATH: &str = "inspect them (docker inspect ID), then sudo volce-lab-host resolve PLAN_ID; while the \
     app's record remains, the agent removes all of it with a remove_app plan you approve. Objects of an app whose \
     record resolve forgot are removed by hand (docker rm ID, docker network rm ID).";

/// The paragraph for the operator: what carries the label (or that
/// nothing does, or that the engine could not be asked), then the path.
pub fn render(plan: &PlanId, found: &Result<Leftovers, impl std::fmt::Display>) -> String {
    let mut out = String::new();
    match found {
        Ok(left) if left.is_empty() => {
            let _ = writeln!(out, "Nothing on the engine carries its label {LABEL_PLAN}={plan}.");
        }
        Ok(left) => {
            let _ = writeln!(
                out,
                "On the engine, carrying its label {LABEL_PLAN}={plan} (what it may have left):"
            );
            for line in left.lines() {
                let _ = writeln!(out, "  {line}");
            }
            let _ = writeln!(out, "To clean up: {}", PATH.replace("PLAN_ID", plan.as_str()));
        }
        Err(error) => {
            let _ = writeln!(
                out,
                "The engine could not be asked what carries its label ({error}); look yourself: \
                 docker ps -a --filter label={LABEL_PLAN}={plan} and docker network ls --filter \
                 label={LABEL_PLAN}={plan}."
            );
        }
    }
    out
}
