//! A rollout's `service_execute` (issue 43): the batches in order, each
//! host's approval handed over when its batch starts, the halt, the health
//! wait between batches, and the run record after each batch. Runs
//! unprivileged in the MCP server.

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
            super::super::super::envelope::refused(
                self.base(None, &request_id),
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
                 (another rollout's, one plan's, or a manifest changed since); nothing was sent to any server. The \
                 operator signs what `volce-lab approve --rollout {rollout_id}` prints."
            );
            return refused(Code::StatementMismatch, message);
        }
        let mut view = RolloutView::of(&manifest);
        view.state = RolloutState::Running;
        match self.rollouts().claim(&view) {
            Ok(Claim::Claimed) => {}
            Ok(Claim::Started(recorded)) => {
                let said = Said {
                    status: Status::Rejected,
                    code: Some(Code::RolloutAlreadyStarted.into()),
                    message: format!(
                        "Rollout {rollout_id} was started before (it is {}); nothing was run again. {}",
                        <&str>::from(recorded.state),
                        outcomes(&recorded)
                    ),
                };
                return self.rollout_served(
                    ToolName::ServiceExecute,
                    manifest.action,
                    said,
                    Some(&recorded),
                    request_id,
                );
            }
            Err(error) => return refused(Code::RolloutNotFound, format!("{error}; nothing was run.")),
        }
        let run = Run { manifest: &manifest, signed: signed.as_ref(), request_id: &request_id, progress };
        let said = self.run_batches(&run, &mut view, &cancel).await;
        if let Err(error) = self.rollouts().record(&view) {
            eprintln!("volce-lab: rollout {rollout_id}: {error}");
        }
        self.rollout_served(ToolName::ServiceExecute, manifest.action, said, Some(&view), request_id)
    }

    /// The batches, in order, until one does not end healthy or the call
    /// is cancelled; `view` ends with every host's outcome.
    async fn run_batches(&self, run: &Run<'_>, view: &mut RolloutView, cancel: &CancellationToken) -> Said {
        let batches = run.manifest.batches();
        let count = batches.len();
        let mut halted = None;
        for (number, batch) in batches.into_iter().enumerate() {
            if number > 0 && cancel.is_cancelled() {
                view.state = RolloutState::Cancelled;
                break;
            }
            let steps = self.run_batch(run, batch.clone()).await;
            for (index, step) in batch.clone().zip(steps) {
                view.hosts[index] = step;
            }
            let _ = self.rollouts().record(view);
            if let Some(index) = batch.clone().find(|&i| view.hosts[i].outcome != HostOutcome::Changed) {
                halted = Some(index);
                break;
            }
            if number + 1 < count {
                if !self.healthy_after_wait(run, view, batch.clone(), cancel).await {
                    halted = batch.clone().find(|&i| view.hosts[i].outcome != HostOutcome::Changed);
                    break;
                }
                self.notify(run, batch.end as u32, format!("batch {} of {count} healthy", number + 1)).await;
            }
        }
        for host in view.hosts.iter_mut().filter(|h| h.outcome == HostOutcome::Planned) {
            host.outcome = HostOutcome::Untouched;
        }
        match (halted, view.state) {
            (Some(index), _) => {
                view.state = RolloutState::Halted;
                halted_said(view, index)
            }
            (None, RolloutState::Cancelled) => Said {
                status: Status::Rejected,
                code: None,
                message: format!(
                    "Rollout {} was cancelled between batches: no later batch started. {}",
                    view.rollout_id,
                    outcomes(view)
                ),
            },
            (None, _) => {
                view.state = RolloutState::Done;
                Said {
                    status: Status::Ok,
                    code: None,
                    message: format!(
                        "Rollout {}: the {} plan ran on {}, each healthy.",
                        view.rollout_id,
                        view.action.as_str(),
                        view.named(HostOutcome::Changed).join(", ")
                    ),
                }
            }
        }
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
            self.notify(run, done, format!("{}: {}", step.target, outcome_word(step.outcome))).await;
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
                let message =
                    format!("Its approval was not recorded, and its plan was not run: {}", answer.message);
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

    /// The wait between two batches, then each host of `batch` asked
    /// whether the app still runs; a host where it does not is `failed`.
    /// A cancel during the wait ends it early; the rollout then stops.
    async fn healthy_after_wait(
        &self,
        run: &Run<'_>,
        view: &mut RolloutView,
        batch: std::ops::Range<usize>,
        cancel: &CancellationToken,
    ) -> bool {
        let wait = Duration::from_secs(u64::from(run.manifest.health_wait_seconds));
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = cancel.cancelled() => return true,
        }
        let app = run.manifest.parameters.get("app").and_then(|a| a.as_str()).unwrap_or_default();
        let mut healthy = true;
        for index in batch {
            let Some(member) = self.members.iter().find(|m| m.name == view.hosts[index].target) else {
                continue;
            };
            let (answer, _) = self.ask(member, &Request::Inventory {}, run.request_id, None).await;
            if let Some(why) = unhealthy(&answer, app) {
                let host = &mut view.hosts[index];
                host.outcome = HostOutcome::Failed;
                host.message = Some(format!(
                    "Its plan ran and answered its health check, but after the {} s wait {why}; it was not rolled \
                     back (a rollback plan on this target takes it back).",
                    run.manifest.health_wait_seconds
                ));
                healthy = false;
            }
        }
        healthy
    }

    /// A progress notification, when the client asked for them.
    async fn notify(&self, run: &Run<'_>, count: u32, message: String) {
        let Some(Watcher { token, peer }) = &run.progress else { return };
        let param = ProgressNotificationParam::new(token.clone(), f64::from(count)).with_message(message);
        let _ = peer.notify_progress(param).await;
    }
}

/// Why `app` is not healthy by an inventory answer, if it is not.
fn unhealthy(answer: &Answer, app: &str) -> Option<String> {
    if answer.status != Status::Ok {
        return Some(format!("the server did not answer the inventory ({})", answer.status.as_str()));
    }
    let inventory = answer
        .result
        .as_ref()
        .and_then(|r| serde_json::from_value::<Inventory>(serde_json::Value::Object(r.object.clone())).ok());
    let Some(inventory) = inventory else { return Some("its inventory could not be read".into()) };
    match inventory.apps.iter().find(|a| a.app.as_str() == app) {
        Some(managed) if managed.state == EngineState::Running => None,
        Some(managed) => Some(format!("the app is {}", <&str>::from(managed.state))),
        None => Some("the app is no longer listed".into()),
    }
}

fn outcome_word(outcome: HostOutcome) -> &'static str {
    match outcome {
        HostOutcome::Planned => "planned",
        HostOutcome::Refused => "refused",
        HostOutcome::Changed => "changed",
        HostOutcome::Failed => "failed",
        HostOutcome::Unconfirmed => "unconfirmed",
        HostOutcome::Untouched => "not touched",
    }
}

/// Which hosts changed, failed, are unconfirmed and were not touched, and
/// the way back of each.
fn outcomes(view: &RolloutView) -> String {
    let mut parts = Vec::new();
    let list = |outcome| view.named(outcome).join(", ");
    let changed = list(HostOutcome::Changed);
    if !changed.is_empty() {
        parts.push(format!("Changed: {changed} (to go back, plan a rollback on each)."));
    }
    let failed = list(HostOutcome::Failed);
    if !failed.is_empty() {
        parts.push(format!("Failed, left as they were: {failed}."));
    }
    let unconfirmed = list(HostOutcome::Unconfirmed);
    if !unconfirmed.is_empty() {
        parts.push(format!(
            "Unconfirmed: {unconfirmed} (never retry; call service_inventory there, and ask the operator to \
             run `volce-lab-host show PLAN_ID`)."
        ));
    }
    let untouched = list(HostOutcome::Untouched);
    if !untouched.is_empty() {
        parts.push(format!(
            "Not touched: {untouched} (their plans stay pending, never run by this rollout; the operator may \
             reject them)."
        ));
    }
    parts.join(" ")
}

/// The sentence of a rollout halted at host `index`.
fn halted_said(view: &RolloutView, index: usize) -> Said {
    let host = &view.hosts[index];
    let status = match host.outcome {
        HostOutcome::Unconfirmed => Status::Unknown,
        _ => Status::Rejected,
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
