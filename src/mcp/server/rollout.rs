//! Rollouts over several servers (issue 43): a `service_plan` with
//! `targets` plans on every target and records the manifest; a
//! `service_execute` with `rollout` runs it batch by batch. Each host plans,
//! claims, executes and records as for one plan; what is new here is the
//! order, the halt and the one consent. Runs unprivileged in the MCP server.
//!
//! Invariants enforced here:
//! - nothing is planned anywhere unless every target passed its identity
//!   gate, has management on and speaks the protocol a rollout needs: the
//!   refusal names each target that did not;
//! - a signed rollout runs only when the signed text is, byte for byte,
//!   the statement of the recorded manifest; each host is handed the
//!   approval only when its batch starts, and checks its own line itself;
//! - the first host that does not end `ok` (refused, rolled back,
//!   unreachable, or unconfirmed) halts the rollout: no later batch starts,
//!   and nothing is retried;
//! - a cancelled call lets the batch that runs finish (a host's execute is
//!   never cut), then starts no other.

use serde_json::{Map, Value};
use tokio::task::JoinSet;

use super::VolceLab;
use crate::inspect::Status;
use crate::mcp::rollout::{
    DEFAULT_BATCH_SIZE, DEFAULT_HEALTH_WAIT_SECONDS, FLEET_ACTIONS, HostOutcome, HostStep, Manifest,
    ManifestEntry, RolloutState, RolloutView, Rollouts,
};
use crate::vocab::{Action, Code, PlanId, Refusal, RolloutId};
use crate::wire::answers::read::{PlanTerms, Read};
use crate::wire::answers::statement::ApprovalStatement;
use crate::wire::{self, Operation, Request};

use super::super::envelope::{self, Served};
use super::super::rpc::{Answer, AnswerCode};
use super::super::tools::{Batches, ToolName};

/// A rollout's outcome in one sentence and its status, for the envelope.
struct Said {
    status: Status,
    code: Option<AnswerCode>,
    message: String,
}

impl VolceLab {
    fn rollouts(&self) -> Rollouts {
        Rollouts::beside(self.options.audit.path())
    }

    /// A rollout's result: the view as the result object.
    fn rollout_served(
        &self,
        tool: ToolName,
        action: Action,
        said: Said,
        view: Option<&RolloutView>,
        request_id: String,
    ) -> Served {
        let operation = if tool == ToolName::ServicePlan { Operation::Plan } else { Operation::Execute };
        let answer = Answer {
            result: view.map(crate::mcp::rpc::Returned::of_view),
            ..Answer::new(said.status, said.code, said.message)
        };
        let facts = envelope::Managed {
            tool,
            operation,
            action: Some(action),
            plan_id: None,
            answer,
            execution: None,
        };
        envelope::managed(self.base(None, &request_id), facts, request_id)
    }

    /// Asks each of `indexes` its request, all at once: the answers in
    /// the order given.
    async fn ask_each(&self, asks: Vec<(usize, Request)>, request_id: &str) -> Vec<Answer> {
        let mut tasks = JoinSet::new();
        for (slot, (index, request)) in asks.into_iter().enumerate() {
            let server = self.clone();
            let request_id = request_id.to_owned();
            tasks.spawn(async move {
                let (answer, _) = server.ask(&server.members[index], &request, &request_id, None).await;
                (slot, answer)
            });
        }
        let mut answers = Vec::with_capacity(tasks.len());
        while let Some(joined) = tasks.join_next().await {
            answers.push(joined.unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic())));
        }
        answers.sort_by_key(|(slot, _)| *slot);
        answers.into_iter().map(|(_, answer)| answer).collect()
    }

    /// `service_plan` with `targets`.
    pub(super) async fn plan_rollout(
        &self,
        indexes: &[usize],
        action: Action,
        parameters: Map<String, Value>,
        batches: Batches,
        request_id: String,
    ) -> Served {
        let refused =
            |code: Code, message: String| Said { status: Status::Rejected, code: Some(code.into()), message };
        if !FLEET_ACTIONS.contains(&action) {
            let actions: Vec<&str> = FLEET_ACTIONS.iter().map(|a| a.as_str()).collect();
            let message = format!(
                "A rollout takes {}, not {}; nothing was planned.",
                actions.join(", "),
                action.as_str()
            );
            return self.rollout_served(
                ToolName::ServicePlan,
                action,
                refused(Code::NotAFleetAction, message),
                None,
                request_id,
            );
        }
        if let Some(said) = self.not_ready(indexes, &Request::plan(action, parameters.clone())).await {
            return self.rollout_served(ToolName::ServicePlan, action, said, None, request_id);
        }
        let asks = indexes.iter().map(|&i| (i, Request::plan(action, parameters.clone()))).collect();
        let planned = self.ask_each(asks, &request_id).await;
        let mut manifest = Manifest {
            rollout_id: RolloutId::random(),
            action,
            parameters,
            batch_size: batches.batch_size.unwrap_or(DEFAULT_BATCH_SIZE),
            health_wait_seconds: batches.health_wait_seconds.unwrap_or(DEFAULT_HEALTH_WAIT_SECONDS),
            made_at: crate::inspect::timestamp(),
            entries: Vec::new(),
        };
        let mut failures = Vec::new();
        for (&index, answer) in indexes.iter().zip(planned) {
            match self.manifest_entry(index, answer, &request_id).await {
                Ok(entry) => manifest.entries.push(entry),
                Err(failure) => failures.push((index, failure)),
            }
        }
        if !failures.is_empty() {
            let (said, view) = self.plan_refused(&manifest, indexes, failures);
            return self.rollout_served(ToolName::ServicePlan, action, said, Some(&view), request_id);
        }
        let unfit = manifest.unfit(std::time::SystemTime::now()).map(|refusal| Said {
            status: Status::Rejected,
            code: Some(refusal.code.into()),
            message: refusal.message,
        });
        let said = match unfit {
            Some(said) => Err(said),
            None => self.rollouts().save(&manifest).map(|()| recorded(&manifest)).map_err(|error| Said {
                status: Status::ExecutionFailed,
                code: None,
                message: format!("The plans were made, but the rollout could not be recorded ({error})."),
            }),
        };
        let (said, view) = match said {
            Ok(said) => (said, RolloutView::of(&manifest)),
            Err(said) => not_recorded(&manifest, said),
        };
        self.rollout_served(ToolName::ServicePlan, action, said, Some(&view), request_id)
    }

    /// Why not every target of `indexes` can take `request` as a rollout's
    /// step: each one named, before anything is sent to any of them.
    async fn not_ready(&self, indexes: &[usize], request: &Request) -> Option<Said> {
        // A rollout's consent travels as a signed approval: protocol 2.
        let needs = request.needs().max(Request::statement(&PlanId::random()).needs());
        let mut reasons = Vec::new();
        let mut code = None;
        for &index in indexes {
            let member = &self.members[index];
            let inspector = &member.inspector;
            let refusal = if inspector.is_demo() {
                Some((Status::DemoOnly, None, "demo mode plans nothing".to_owned()))
            } else if let Some(status) = inspector.gate_refusal().await {
                Some((
                    status,
                    None,
                    format!("{} (call cloud_check with check=identity first)", status.as_str()),
                ))
            } else if !inspector.config().management {
                Some((Status::ManagementDisabled, None, "management is off for it".to_owned()))
            } else {
                wire::versions::may_send(needs, &inspector.server_version(), &member.name)
                    .err()
                    .map(|r: Refusal| (Status::Rejected, Some(r.code), r.message))
            };
            if let Some((status, refusal_code, why)) = refusal {
                code = code.or(Some((status, refusal_code)));
                reasons.push(format!("{}: {why}", member.name));
            }
        }
        let (status, refusal_code) = code?;
        Some(Said {
            status,
            code: refusal_code.map(Into::into),
            message: format!(
                "Nothing was planned on any server: not every target can take part in the rollout. {}.",
                reasons.join("; ")
            ),
        })
    }

    /// One target's entry from its plan's answer (and, when the plan
    /// needs approval, its statement); or its answer when it refused.
    async fn manifest_entry(
        &self,
        index: usize,
        answer: Answer,
        request_id: &str,
    ) -> Result<ManifestEntry, Answer> {
        if answer.status != Status::Ok {
            return Err(answer);
        }
        let terms = match answer.result.as_ref().map(|r| &r.read) {
            Some(Read::Plan { plan_id, terms: Some(terms) }) => (plan_id.clone(), terms.clone()),
            _ => {
                return Err(Answer::new(Status::Unknown, None, "its plan's answer could not be read".into()));
            }
        };
        let (plan_id, PlanTerms { digest, requires_approval, expires_at }) = terms;
        let member = &self.members[index];
        let mut entry = ManifestEntry {
            target: member.name.clone(),
            plan_id: plan_id.clone(),
            digest,
            requires_approval,
            expires_at,
            host: None,
            statement_sha256: None,
        };
        if requires_approval {
            let (answer, _) = self.ask(member, &Request::statement(&plan_id), request_id, None).await;
            let text = answer
                .result
                .as_ref()
                .filter(|_| answer.status == Status::Ok)
                .and_then(|r| {
                    serde_json::from_value::<ApprovalStatement>(Value::Object(r.object.clone())).ok()
                })
                .map(|statement| (statement.host, statement.text));
            let Some((host, text)) = text else { return Err(answer) };
            entry.host = Some(host);
            entry.statement_sha256 =
                Some(crate::text::hex(&<sha2::Sha256 as sha2::Digest>::digest(text.as_bytes())));
        }
        Ok(entry)
    }

    /// The answer to a fleet plan some target did not make: nothing
    /// recorded. A target whose answer is unknown may have planned.
    fn plan_refused(
        &self,
        manifest: &Manifest,
        indexes: &[usize],
        failures: Vec<(usize, Answer)>,
    ) -> (Said, RolloutView) {
        let (first_index, first) = &failures[0];
        let said = Said {
            status: first.status,
            code: first.code.clone(),
            message: format!("{} did not make its plan ({})", self.members[*first_index].name, first.message),
        };
        let (said, mut view) = not_recorded(manifest, said);
        for (index, answer) in &failures {
            let position = indexes.iter().position(|i| i == index).unwrap_or(0);
            let outcome = if answer.status == Status::Unknown {
                HostOutcome::Unconfirmed
            } else {
                HostOutcome::Refused
            };
            let step = HostStep {
                target: self.members[*index].name.clone(),
                plan_id: None,
                batch: 0,
                outcome,
                code: answer.code.clone(),
                message: Some(answer.message.clone()),
            };
            view.hosts.insert(position.min(view.hosts.len()), step);
        }
        (said, view)
    }
}

/// A rollout that was not recorded, for `said`'s reason: nothing to sign or
/// run, and the plans its targets made, which stay pending and expire.
fn not_recorded(manifest: &Manifest, said: Said) -> (Said, RolloutView) {
    let mut view = RolloutView::of(manifest);
    view.state = RolloutState::Refused;
    view.manifest_sha256 = None;
    view.statement = None;
    let made = view.named(HostOutcome::Planned);
    let left = if made.is_empty() {
        String::new()
    } else {
        format!(
            " The plans made on {} stay pending, never run by this rollout, and expire (the operator may reject \
             them).",
            made.join(", ")
        )
    };
    let message = format!(
        "The rollout was not recorded: {}.{left} Fix what it names, then plan the rollout again.",
        said.message.trim_end_matches('.')
    );
    (Said { message, ..said }, view)
}

/// The sentence of a recorded rollout.
fn recorded(manifest: &Manifest) -> Said {
    let targets: Vec<&str> = manifest.entries.iter().map(|e| e.target.as_str()).collect();
    let consent = if manifest.statement().is_some() {
        format!(
            " It needs the operator's approval: one signature over the rollout (`volce-lab approve --rollout {}`), \
             which you pass unchanged as service_execute's signed_approval with `rollout`, or an approval of each \
             plan at its server's terminal.",
            manifest.rollout_id
        )
    } else {
        String::new()
    };
    Said {
        status: Status::Ok,
        code: None,
        message: format!(
            "Rollout {} recorded: one {} plan on each of {} ({} at a time); nothing changed yet.{consent}",
            manifest.rollout_id,
            manifest.action.as_str(),
            targets.join(", "),
            manifest.batch_size
        ),
    }
}

mod execute;
