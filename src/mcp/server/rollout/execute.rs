//! A rollout's `service_execute` (issue 43): the batches in order, each
//! host's approval handed over when its batch starts, the halt, the health
//! check after each batch (after the wait between batches), and the run
//! record before and after each batch. Runs unprivileged in the MCP server.

use std::time::Duration;

use rmcp::model::ProgressNotificationParam;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::Said;
use crate::inspect::Status;
use crate::mcp::rollout::{Claim, HostOutcome, HostStep, Manifest, ManifestEntry, RolloutState, RolloutView};
use crate::vocab::{Code, RolloutId};
use crate::wire::Request;
use crate::wire::answers::app_state::EngineState;
use crate::wire::answers::inventory::Inventory;
use crate::wire::signed::SignedApproval;

use super::super::super::envelope::Served;
use super::super::super::rpc::{Answer, AnswerCode};
use super::super::super::tools::ToolName;
use super::super::{VolceLab, Watcher};

/// What a step of a rollout may still do.
struct Run<'a> {
    manifest: &'a Manifest,
    signed: Option<&'a SignedApproval>,
    request_id: &'a str,
    progress: Option<Watcher>,
}

/// How a batch stands after its health check.
enum Health {
    Healthy,
    /// A host's outcome is no longer `changed` (the view says which).
    Halted,
    /// The client cancelled during the wait: no check ran.
    Cancelled,
}

impl VolceLab {
    /// `service_execute` with `rollout`: refuses before any host is asked
    /// when the rollout is unknown, already started, or the signed text is
    /// not its statement; else runs it (`cancel`: the call's own token).
    pub(in super::super) async fn execute_rollout(
        &self,
        rollout_id: RolloutId,
        signed: Option<SignedApproval>,
        request_id: String,
        progress: Option<Watcher>,
        cancel: CancellationToken,
    ) -> Served {
        let refused = |code: Code, message: String| {
            let refusal = crate::vocab::Refusal::new(code, message);
            let base = self.base(None, &request_id);
            super::super::super::envelope::refused(
                base,
                ToolName::ServiceExecute,
                refusal,
                request_id.clone(),
            )
        };
        let manifest = match self.rollouts().load(&rollout_id) {
            Ok(Some(manifest)) => manifest,
            Ok(None) => {
                let message = format!("This workstation recorded no rollout {rollout_id}; nothing was run.");
                return refused(Code::RolloutNotFound, message);
            }
            Err(error) => return refused(Code::RolloutNotFound, format!("{error}; nothing was run.")),
        };
        if let Some(signed) = &signed
            && manifest.statement().map(|s| s.render()).as_ref() != Some(&signed.statement)
        {
            let message = format!(
                "The signed approval is not the statement of rollout {rollout_id} as this workstation recorded it \
                 (another rollout's, one plan's, a manifest changed since, or a text changed after signing); \
                 nothing was sent to any server. The operator signs what `volce-lab approve --rollout \
                 {rollout_id}` prints."
            );
            return refused(Code::StatementMismatch, message);
        }
        // Signed long after it was planned: a plan may expire before its batch.
        if let Some(refusal) = manifest.unfit(std::time::SystemTime::now()) {
            let message =
                format!("{} Nothing was sent to any server; plan the rollout again.", refusal.message);
            return refused(refusal.code, message);
        }
        let mut view = RolloutView::of(&manifest);
        view.state = RolloutState::Running;
        let said = match self.rollouts().claim(&view) {
            Ok(Claim::Claimed) => {
                let run =
                    Run { manifest: &manifest, signed: signed.as_ref(), request_id: &request_id, progress };
                let said = self.run_batches(&run, &mut view, &cancel).await;
                self.keep(&view);
                said
            }
            Ok(Claim::Started(recorded)) => {
                view = *recorded;
                already_started(&view)
            }
            Err(error) => Said {
                status: Status::ExecutionFailed,
                code: None,
                message: format!(
                    "Rollout {rollout_id} could not be started ({error}); nothing was sent to any server."
                ),
            },
        };
        self.rollout_served(ToolName::ServiceExecute, manifest.action, said, Some(&view), request_id)
    }

    /// The run record, rewritten; a failure to write it is said on stderr
    /// (the answer still carries every outcome).
    fn keep(&self, view: &RolloutView) {
        if let Err(error) = self.rollouts().record(view) {
            eprintln!("volce-lab: rollout {}: {error}", view.rollout_id);
        }
    }

    /// The batches, in order, until one does not end healthy or the call
    /// is cancelled; `view` ends with every host's outcome.
    async fn run_batches(&self, run: &Run<'_>, view: &mut RolloutView, cancel: &CancellationToken) -> Said {
        let batches = run.manifest.batches();
        let count = batches.len();
        for (number, batch) in batches.into_iter().enumerate() {
            if cancel.is_cancelled() {
                view.state = RolloutState::Cancelled;
                break;
            }
            // Named before anything is sent: a run that stops here leaves
            // them `running`, hosts that may have acted.
            batch.clone().for_each(|i| view.hosts[i].outcome = HostOutcome::Running);
            self.keep(view);
            let steps = self.run_batch(run, batch.clone()).await;
            for (index, step) in batch.clone().zip(steps) {
                view.hosts[index] = step;
            }
            let last = number + 1 == count;
            let health = if batch.clone().any(|i| view.hosts[i].outcome != HostOutcome::Changed) {
                Health::Halted
            } else {
                self.healthy_after_wait(run, view, batch.clone(), last, cancel).await
            };
            self.keep(view);
            match health {
                Health::Healthy if !last => {
                    self.notify(run, batch.end as u32, format!("batch {} of {count} healthy", number + 1))
                        .await;
                }
                Health::Healthy => {}
                Health::Halted => {
                    view.state = RolloutState::Halted;
                    break;
                }
                Health::Cancelled => {
                    view.state = RolloutState::Cancelled;
                    break;
                }
            }
        }
        for host in view.hosts.iter_mut().filter(|h| h.outcome == HostOutcome::Planned) {
            host.outcome = HostOutcome::Untouched;
        }
        if view.state == RolloutState::Running {
            view.state = RolloutState::Done;
        }
        ended(view)
    }

    /// One batch's hosts, all at once: each one's step, in order.
    async fn run_batch(&self, run: &Run<'_>, batch: std::ops::Range<usize>) -> Vec<HostStep> {
        let mut tasks = JoinSet::new();
        for index in batch.clone() {
            let server = self.clone();
            let entry = run.manifest.entries[index].clone();
            let signed = run.signed.cloned();
            let request_id = run.request_id.to_owned();
            let number = (index / (run.manifest.batch_size as usize).max(1)) as u32 + 1;
            tasks.spawn(async move {
                let step = server.run_host(&entry, signed.as_ref(), &request_id, number).await;
                (index, step)
            });
        }
        let mut steps = Vec::with_capacity(tasks.len());
        while let Some(joined) = tasks.join_next().await {
            let (index, step) = joined.unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()));
            // Progress only grows: the hosts done so far, whatever their order.
            let done = (batch.start + steps.len()) as u32 + 1;
            let word: &str = step.outcome.into();
            self.notify(run, done, format!("{}: {word}", step.target)).await;
            steps.push((index, step));
        }
        steps.sort_by_key(|(index, _)| *index);
        steps.into_iter().map(|(_, step)| step).collect()
    }

    /// One host: its approval handed over (when signed), then its execute.
    async fn run_host(
        &self,
        entry: &ManifestEntry,
        signed: Option<&SignedApproval>,
        request_id: &str,
        batch: u32,
    ) -> HostStep {
        let step = |outcome, code, message| HostStep {
            target: entry.target.clone(),
            plan_id: Some(entry.plan_id.clone()),
            batch,
            outcome,
            code,
            message: Some(message),
        };
        let Some(member) = self.members.iter().find(|m| m.name == entry.target) else {
            let message = format!("{} is no longer a configured target; its plan was not run.", entry.target);
            return step(HostOutcome::Failed, None, message);
        };
        if let Some(signed) = signed.filter(|_| entry.requires_approval) {
            let request = Request::signed_approval(&entry.plan_id, signed);
            let (answer, _) = self.ask(member, &request, request_id, None).await;
            let recorded =
                answer.status == Status::Ok || answer.code == Some(AnswerCode::Known(Code::AlreadyApproved));
            if !recorded {
                let message = format!(
                    "Its plan was not run: the server did not confirm it recorded the approval ({}): {}",
                    answer.status.as_str(),
                    answer.message
                );
                return step(HostOutcome::Failed, answer.code, message);
            }
        }
        let (answer, _) = self.ask(member, &Request::execute(&entry.plan_id), request_id, None).await;
        let outcome = match answer.status {
            Status::Ok => HostOutcome::Changed,
            Status::Unknown | Status::NeedsInspection => HostOutcome::Unconfirmed,
            _ => HostOutcome::Failed,
        };
        step(outcome, answer.code, answer.message)
    }

    /// The wait (between batches: none after the last), then each host of
    /// `batch` asked whether the app still runs. A host where it does not
    /// is `unhealthy`; one that does not answer is `unconfirmed`. A cancel
    /// during the wait ends it, with no check.
    async fn healthy_after_wait(
        &self,
        run: &Run<'_>,
        view: &mut RolloutView,
        batch: std::ops::Range<usize>,
        last: bool,
        cancel: &CancellationToken,
    ) -> Health {
        let seconds = if last { 0 } else { run.manifest.health_wait_seconds };
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(u64::from(seconds))) => {}
            () = cancel.cancelled() => return Health::Cancelled,
        }
        let app = run.manifest.app();
        let mut health = Health::Healthy;
        for index in batch {
            let Some(member) = self.members.iter().find(|m| m.name == view.hosts[index].target) else {
                continue;
            };
            let (answer, _) = self.ask(member, &Request::Inventory {}, run.request_id, None).await;
            let Some((outcome, code, why)) = unhealthy(&answer, app) else { continue };
            let host = &mut view.hosts[index];
            host.outcome = outcome;
            host.code = code.map(Into::into);
            host.message = Some(format!(
                "Its plan ran and answered its health check, but {seconds} s later {why}; it was not rolled back \
                 (a rollback plan on this target takes it back)."
            ));
            health = Health::Halted;
        }
        health
    }

    /// A progress notification, when the client asked for them.
    async fn notify(&self, run: &Run<'_>, count: u32, message: String) {
        let Some(Watcher { token, peer }) = &run.progress else { return };
        let param = ProgressNotificationParam::new(token.clone(), f64::from(count)).with_message(message);
        let _ = peer.notify_progress(param).await;
    }
}

/// What an inventory answer says against `app` running: nothing when it
/// runs; else the outcome, its code and why.
fn unhealthy(answer: &Answer, app: &str) -> Option<(HostOutcome, Option<Code>, String)> {
    let unknown = |why: String| Some((HostOutcome::Unconfirmed, None, why));
    if answer.status != Status::Ok {
        return unknown(format!(
            "the server did not answer whether it still runs ({})",
            answer.status.as_str()
        ));
    }
    let inventory = answer
        .result
        .as_ref()
        .and_then(|r| serde_json::from_value::<Inventory>(serde_json::Value::Object(r.object.clone())).ok());
    let Some(inventory) = inventory else { return unknown("its inventory could not be read".into()) };
    let state = inventory.apps.iter().find(|a| a.app.as_str() == app).map(|a| a.state);
    let why = match state {
        Some(EngineState::Running) => return None,
        Some(state) => format!("the app is {}", <&str>::from(state)),
        None => "the app is no longer listed".into(),
    };
    Some((HostOutcome::Unhealthy, Some(Code::UnhealthyAfterWait), why))
}

/// The answer of a rollout that ran (to its end, a halt or a cancel).
fn ended(view: &RolloutView) -> Said {
    match view.state {
        RolloutState::Halted => halted(view),
        RolloutState::Cancelled => Said {
            status: Status::Rejected,
            code: Some(Code::RolloutCancelled.into()),
            message: format!(
                "Rollout {} was cancelled: no batch started after the cancel. {}",
                view.rollout_id,
                outcomes(view)
            ),
        },
        _ => Said {
            status: Status::Ok,
            code: None,
            message: format!(
                "Rollout {}: the {} plan ran on {}, each reporting the app running afterwards.",
                view.rollout_id,
                view.action.as_str(),
                view.named(HostOutcome::Changed).join(", ")
            ),
        },
    }
}

/// The answer to a rollout that was started before: its recorded outcomes.
fn already_started(view: &RolloutView) -> Said {
    Said {
        status: Status::Rejected,
        code: Some(Code::RolloutAlreadyStarted.into()),
        message: format!(
            "Rollout {} was started before (it is {}); nothing was run again. {}",
            view.rollout_id,
            <&str>::from(view.state),
            outcomes(view)
        ),
    }
}

/// The answer of a halted rollout: the first host that did not end
/// `changed` names the halt; any host that may have acted unseen makes it
/// `unknown`, never retried.
fn halted(view: &RolloutView) -> Said {
    let uncertain = [HostOutcome::Unconfirmed, HostOutcome::Running];
    let status = if view.hosts.iter().any(|h| uncertain.contains(&h.outcome)) {
        Status::Unknown
    } else {
        Status::Rejected
    };
    let stopped = [HostOutcome::Changed, HostOutcome::Untouched];
    let Some(host) = view.hosts.iter().find(|h| !stopped.contains(&h.outcome)) else {
        return Said { status, code: None, message: outcomes(view) };
    };
    Said {
        status,
        code: host.code.clone(),
        message: format!(
            "Rollout {} halted at {} (batch {}): {} {}",
            view.rollout_id,
            host.target,
            host.batch,
            host.message.as_deref().unwrap_or(""),
            outcomes(view)
        ),
    }
}

/// Which hosts changed, failed, are uncertain and were not touched, and
/// the way back of each.
fn outcomes(view: &RolloutView) -> String {
    let said: [(HostOutcome, &str); 6] = [
        (HostOutcome::Changed, "Changed: {} (to go back, plan a rollback on each)."),
        (
            HostOutcome::Unhealthy,
            "Changed, then not running after the wait: {} (not rolled back; a rollback plan takes each back).",
        ),
        (HostOutcome::Failed, "Failed, left as they were: {}."),
        (
            HostOutcome::Unconfirmed,
            "Unconfirmed: {} (never retry; call service_inventory there, and ask the operator to run \
             `volce-lab-host show PLAN_ID`).",
        ),
        (
            HostOutcome::Running,
            "In flight when the rollout stopped: {} (it may have acted; inspect as for unconfirmed).",
        ),
        (
            HostOutcome::Untouched,
            "Not touched: {} (their plans stay pending, never run by this rollout; the operator may reject them).",
        ),
    ];
    said.iter()
        .filter_map(|(outcome, sentence)| {
            let names = view.named(*outcome);
            (!names.is_empty()).then(|| sentence.replace("{}", &names.join(", ")))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests;
