//! `Controller::execute`: run one plan exactly once, and record what
//! happened. Runs as root inside the host helper.
//!
//! Transactions around the engine calls, never across one. Transaction 1
//! (`BEGIN IMMEDIATE`) verifies what the store knows and claims the plan;
//! it commits before the engine is asked anything, so a second helper
//! finds the plan consumed. Then, outside any transaction, a fresh
//! snapshot is checked against the plan's scoped digest and the plan is
//! re-derived; if either differs, a conditional transition voids the
//! claimed plan and nothing acts. Otherwise the engine acts, and
//! transaction 2 records the outcome and the app records. Nothing retries.

use std::collections::BTreeMap;
use std::time::Instant;

use super::{Controller, EngineProbe, Liveness, audit, engine_unavailable, state_allows_use, terms_hold};
use crate::actions::plan::Plan;
use crate::actions::{self, Done, Effect, Payload, held};
use crate::control::Clock;
use crate::control::app_record::AppRecord;
use crate::control::clock::check_expiry;
use crate::control::scope;
use crate::control::validate::Context;
use crate::docker::{Engine, EngineError, NoProgress, ProgressSink};
use crate::store::{AuditOutcome, AuditRow, Claim, Event};
use crate::vocab::PlanOutcome;
use crate::vocab::{Code, DataAfter, ImageId, KeptFor, PlanId, Refusal, refuse};
use crate::wire::answers::execution::{ExecutedPlan, ExecutionOutcome};

mod app_records;

/// The answer to `execute` once the engine was reached.
#[derive(Debug, Clone, PartialEq)]
pub enum Executed {
    /// The engine reported success and the outcome is recorded.
    Completed(ExecutedPlan),
    /// The engine failed or the outcome could not be recorded: the change may
    /// be partial, and an operator must look before anything else happens.
    NeedsInspection { plan_id: PlanId, message: String },
    /// The engine failed but provably changed nothing (see
    /// [`EngineError::changed_nothing`]): the plan is `failed`, the host is
    /// not blocked, and the refusal says what happened.
    /// `app_log`: a rolled-back plan's failed app container's last lines
    /// (safe, bounded, untrusted), recorded with the refusal.
    Failed { plan_id: PlanId, refusal: Refusal, app_log: Option<crate::logs::AppLog> },
}

const PARTIAL: &str = "The change may be partial: an operator must inspect the server before any new plan; \
                       nothing will be retried.";

/// A plan claimed under this process, with the records as the claim read
/// them: they stay so until the plan is finished, since no other plan
/// executes while one is `executing`.
struct Claimed {
    plan: Plan,
    apps: BTreeMap<String, AppRecord>,
    retired: BTreeMap<ImageId, String>,
}

/// What transaction 1 decided. The transaction commits for both variants;
/// a refusal that has nothing to record is the transaction's own `Err`
/// instead, which rolls it back.
enum Verdict {
    /// The plan is claimed under this process: verify it against the
    /// engine, then act on it. (Boxed: a plan is large next to a refusal.)
    Claimed(Box<Claimed>),
    /// The plan was invalidated (the policy changed): commit the
    /// invalidation, so it is void for good, then refuse.
    RefuseAfterCommit(Refusal),
}

const SNAPSHOT_CHANGED: &str = "The plan's targets on the server (or volce-lab's own containers) changed since \
                                this plan was made; it is void (and so is any approval): prepare a new one.";

impl<E: Engine, C: Clock, L: Liveness> Controller<E, C, L> {
    /// Executes a plan exactly once (see the module's invariants).
    pub fn execute(&mut self, id: &PlanId, requester: &str) -> Result<Executed, Refusal> {
        self.execute_reporting(id, requester, &NoProgress)
    }

    /// [`Controller::execute`], reporting the steps of a deploy, start,
    /// restart or update to `progress` as the engine finishes them. One
    /// straight pipeline: claim, verify, act, record, answer.
    pub fn execute_reporting(
        &mut self,
        id: &PlanId,
        requester: &str,
        progress: &dyn ProgressSink,
    ) -> Result<Executed, Refusal> {
        self.settle_abandoned(requester)?;
        let me = self.liveness.me()?;
        let Claimed { plan, apps, retired } = self.claim(id, requester, &me)?;
        // Claimed and committed; nothing has been asked of the engine yet.
        self.verify_or_void(&plan, &apps, &retired, requester, &me)?;
        // The claim is committed: from here on nothing may refuse quietly.
        let acted = self.act(&plan, progress);
        let recorded = self.record(&plan, &apps, &acted, requester, &me);
        if acted.result.is_ok() && recorded.is_ok() {
            bind_kept_data(&plan, &apps);
        }
        Ok(answer(&plan, acted, recorded))
    }

    /// Transaction 1: verify what the store knows and claim, or refuse.
    /// No engine call happens inside it.
    fn claim(&mut self, id: &PlanId, requester: &str, me: &Claim) -> Result<Claimed, Refusal> {
        let verdict = {
            let Controller { policy, policy_hash, store, clock, .. } = self;
            store.write(|tx| {
                // Read the clock only once the write lock is held: waiting
                // for the lock must not let an expired plan through.
                let now = clock.now();
                let Some(stored) = tx.load_plan(id)? else {
                    return refuse(Code::PlanNotFound, "No plan has this id.");
                };
                state_allows_use(&stored)?;
                let plan = &stored.plan;
                let made = tx.plan_boot(id)?;
                check_expiry(plan.created_at, plan.expires_at, made.as_ref(), now, clock.boot().as_ref())?;
                // A plan prepared before another one failed must not run on
                // top of a server that nobody has inspected yet.
                if let Some((other, state)) = tx.unsettled_plan()? {
                    return refuse(
                        Code::InspectionRequired,
                        format!("Plan {other} is {}; nothing executes until an operator has inspected it.", state.as_str()),
                    );
                }
                if plan.policy_hash != *policy_hash {
                    let row = audit(now, Event::Invalidated, AuditOutcome::Refused, requester);
                    tx.invalidate(id, plan.action, PlanOutcome::PolicyChanged, &row)?;
                    return Ok(Verdict::RefuseAfterCommit(Refusal::new(
                        Code::PolicyChanged,
                        "The operator's policy changed since this plan was made; it is void, prepare a new one.",
                    )));
                }
                terms_hold(plan, policy, policy_hash)?;
                if plan.requires_approval {
                    match &stored.approval {
                        Some(approval) if approval.digest == plan.digest => {}
                        _ => {
                            // Never a ready approve line: the digest must
                            // reach the operator from `show` on the server,
                            // or from the statement their own command fetches.
                            let signed = if policy.signed_approvals.is_some() {
                                format!(
                                    " This server also takes an approval signed on their own machine: \
                                     `volce-lab approve {id} --key KEY` there prints the text to pass as \
                                     signed_approval."
                                )
                            } else {
                                String::new()
                            };
                            return refuse(
                                Code::ApprovalRequired,
                                format!(
                                    "An operator must approve this plan on the server first: ask them to \
                                     run `sudo volce-lab-host show {id}` there and approve it with the \
                                     command show prints; nothing ran.{signed}"
                                ),
                            );
                        }
                    }
                }
                tx.claim(id, plan.action, me, &audit(now, Event::Claimed, AuditOutcome::Ok, requester))?;
                // The records stay as read here until this plan is finished:
                // no other plan executes while one is `executing`.
                Ok(Verdict::Claimed(Box::new(Claimed {
                    plan: stored.plan.clone(),
                    apps: tx.apps()?,
                    retired: tx.retired_claims()?,
                })))
            })?
        };
        match verdict {
            Verdict::Claimed(claimed) => Ok(*claimed),
            Verdict::RefuseAfterCommit(refusal) => Err(refusal),
        }
    }

    /// Verifies the engine's facts for the claimed plan, and voids the plan
    /// if they changed (or fails it, when nothing is known to have changed).
    fn verify_or_void(
        &mut self,
        plan: &Plan,
        apps: &BTreeMap<String, AppRecord>,
        retired: &BTreeMap<ImageId, String>,
        requester: &str,
        me: &Claim,
    ) -> Result<(), Refusal> {
        let id = &plan.id;
        if let Err((why, refusal)) = self.verify_claimed(plan, apps, retired) {
            let now = self.clock.now();
            let recorded = self.store.write(|tx| match why {
                // Nothing was changed and nothing is known to have changed:
                // the plan is spent (execute-once), the host is not blocked.
                None => tx.fail(
                    id,
                    plan.action,
                    me,
                    PlanOutcome::NotStarted,
                    &refusal,
                    &audit(now, Event::Failed, AuditOutcome::Failed, requester),
                ),
                Some(why) => tx.void_claimed(
                    id,
                    plan.action,
                    me,
                    why,
                    &audit(now, Event::Invalidated, AuditOutcome::Refused, requester),
                ),
            });
            // If even that cannot be recorded the plan stays `executing`
            // under our claim; once this process exits, the next helper
            // settles it as `needs_inspection`, the safe side.
            recorded?;
            return Err(refusal);
        }
        Ok(())
    }

    /// The one mutation: the plan's action asks the engine, once.
    fn act(&self, plan: &Plan, progress: &dyn ProgressSink) -> Acted {
        let started = Instant::now();
        let result = plan.payload.act(&self.engine, progress);
        let duration_ms = started.elapsed().as_millis() as u64;
        // A completed deploy or update records the image ids its containers run (the
        // claim remove_image checks). Read-only, outside any transaction;
        // if the snapshot fails the claim is simply not recorded.
        let after = match &result {
            Ok(_) if plan.payload.records_images() => self.engine.snapshot().ok(),
            _ => None,
        };
        // Why a plan that changed nothing failed: recorded with its outcome
        // (`show` prints it) and answered to the agent, the same words.
        let failure = match &result {
            Err(error) if error.changed_nothing() => Some(unchanged_refusal(&plan.payload, error, &plan.id)),
            _ => None,
        };
        // Why the app did not answer, when the engine could read it before
        // its rollback, or what a failed task printed: kept with the
        // failure and answered beside it.
        let app_log = result.as_ref().err().and_then(EngineError::output).cloned();
        Acted { result, duration_ms, after, failure, app_log }
    }

    /// Transaction 2: record what happened, and what the action makes of
    /// the app records.
    fn record(
        &mut self,
        plan: &Plan,
        apps: &BTreeMap<String, AppRecord>,
        acted: &Acted,
        requester: &str,
        me: &Claim,
    ) -> Result<(), Refusal> {
        let id = &plan.id;
        let now = self.clock.now();
        self.store.write(|tx| {
            let (outcome, event, category, exit_code) = match &acted.result {
                Ok(_) => (PlanOutcome::Completed, Event::Completed, AuditOutcome::Ok, None),
                // A task that ran and failed: what the plan created (its
                // container) is removed and seen gone; the task's own work
                // is the task's, and the failure's sentence says so.
                Err(
                    EngineError::NginxRejectedAndRestored
                    | EngineError::RolledBack { .. }
                    | EngineError::TaskFailed { .. }
                    | EngineError::TaskTimedOut { .. },
                ) => (PlanOutcome::RolledBack, Event::Failed, AuditOutcome::Failed, None),
                Err(error) if error.changed_nothing() => {
                    (PlanOutcome::NotStarted, Event::Failed, AuditOutcome::Failed, None)
                }
                Err(error) => {
                    let exit = match error {
                        EngineError::Call { execution, .. } => execution.exit_code,
                        _ => None,
                    };
                    (PlanOutcome::EngineFailed, Event::NeedsInspection, AuditOutcome::Failed, exit)
                }
            };
            let row = AuditRow {
                at: now,
                event,
                outcome: category,
                exit_code,
                duration_ms: Some(acted.duration_ms),
                actor: requester.to_owned(),
                // The docker call's category (same words as the
                // workstation's audit.jsonl), when one failed.
                process: match &acted.result {
                    Err(EngineError::Call { execution, .. }) => crate::exec::ProcessOutcome::of(execution),
                    _ => None,
                },
            };
            match &acted.failure {
                Some(failure) => {
                    tx.fail(id, plan.action, me, outcome, failure, &row)?;
                    if let Some(app_log) = &acted.app_log {
                        // Evidence beside the outcome, never the outcome:
                        // a row that cannot hold it keeps the failure alone
                        // (the statement's error undoes only itself).
                        let _ = tx.keep_app_log(id, app_log);
                    }
                }
                None => tx.finish(id, plan.action, me, outcome, &row)?,
            }
            let done = Done {
                plan_id: id,
                apps,
                result: &acted.result,
                after: acted.after.as_ref(),
                keep: self.policy.keep_versions as usize,
                now,
            };
            app_records::apply(tx, &plan.payload.record(&done), id, now)?;
            Ok::<_, Refusal>(())
        })
    }

    /// The engine's facts for a claimed plan: its scope of a fresh snapshot
    /// has the digest it was sealed with, and it derives to the same
    /// payload and impact. On failure: the outcome to void it with (`None`
    /// when the engine could not be asked, or when remove_image's image is
    /// held as docker would refuse: then it ends `failed`, not_started) and
    /// the refusal for the agent. Read-only.
    fn verify_claimed(
        &self,
        plan: &Plan,
        apps: &BTreeMap<String, AppRecord>,
        retired: &BTreeMap<ImageId, String>,
    ) -> Result<(), (Option<PlanOutcome>, Refusal)> {
        // The operator's configuration first: an edited env file voids the
        // plan the way a changed policy does (its outcome says so).
        super::configuration_holds(&self.env_dir, plan).map_err(|r| (Some(PlanOutcome::PolicyChanged), r))?;
        let snapshot = self.engine.snapshot().map_err(|e| (None, engine_unavailable(e)))?;
        let changed = |refusal: Refusal| (Some(PlanOutcome::SnapshotChanged), refusal);
        // Re-derive from the stored parameters: references, ports,
        // directories and app records must still say the same.
        let ctx = Context {
            policy: &self.policy,
            snapshot: &snapshot,
            apps,
            retired,
            apps_dir: &self.apps_dir,
            data_dir: &self.data_dir,
            plan_id: &plan.id,
        };
        let probe = EngineProbe { engine: &self.engine, apps_dir: &self.apps_dir, env_dir: &self.env_dir };
        let derive = || actions::derive(plan.action, &plan.parameters, &ctx, &probe);
        if scope::digest(&snapshot, &plan.payload.scope()) != plan.snapshot_digest {
            // A remove_image whose image is now held (a container using it
            // changes the digest too) says so, as the refusal docker would give.
            if plan.payload.held_ends_failed()
                && let Err(refusal) = derive()
                && held(refusal.code)
            {
                return Err((None, refusal));
            }
            return Err(changed(Refusal::new(Code::SnapshotChanged, SNAPSHOT_CHANGED)));
        }
        match derive().map(|(payload, impact)| (payload.into_sealed_form(&plan.payload), impact)) {
            Ok((payload, impact)) if payload == plan.payload && impact == plan.impact => Ok(()),
            Ok(_) => Err(changed(Refusal::new(
                Code::SnapshotChanged,
                "The controller's records changed since this plan was made; it is void: prepare a new one.",
            ))),
            // The engine could not be asked: nothing is known to have changed.
            Err(refusal) if refusal.code == Code::EngineUnavailable => Err((None, refusal)),
            // What docker would refuse: nothing is changed and nothing of
            // the plan's own is known to have changed; it ends `failed`
            // with the reason, blocking nothing (as a verified refusal by
            // docker itself would).
            Err(refusal) if held(refusal.code) => Err((None, refusal)),
            // The same request is refused now (a port taken, an app gone):
            // the plan is void, with the reason of the refusal.
            Err(refusal) => Err(changed(refusal)),
        }
    }
}

/// After a completed plan that kept an app's data (a remove_app without
/// `purge_data`): the record of the catalog entry and path it was kept
/// for, from the app's record as the claim read it (issue 38; a deploy
/// re-attaches it only under those). Data an earlier build made gets its
/// record here too, from the record that keeps it. A record that cannot
/// be written fails closed: the data stays kept, and a deploy refuses it
/// as unrecorded until the operator records or purges it.
fn bind_kept_data(plan: &Plan, apps: &BTreeMap<String, AppRecord>) {
    let Some(record) = plan.payload.app().and_then(|app| apps.get(app)) else { return };
    if let (Some(DataAfter { image, kept: true }), Some(data)) = (plan.payload.data_after(), &record.data) {
        let kept = KeptFor { entry: record.image_key.clone(), path: data.path.clone() };
        let _ = crate::docker::data_volume::bind_kept(&image, &kept);
    }
    // An accessory's kept data is bound to the accessory's name and path.
    if let Payload::RemoveApp(removal) = &plan.payload
        && !removal.purge_data
    {
        for accessory in &record.accessories {
            let kept = KeptFor { entry: accessory.name.to_string(), path: accessory.data.path.clone() };
            let _ = crate::docker::data_volume::bind_kept(&accessory.data.image, &kept);
        }
    }
}

/// The answer once the engine was reached: completed, failed with
/// nothing changed (and that recorded), or needs_inspection.
fn answer(plan: &Plan, acted: Acted, recorded: Result<(), Refusal>) -> Executed {
    let id = &plan.id;
    match (acted.result, recorded, acted.failure) {
        (Ok(effect), Ok(()), _) => Executed::Completed(ExecutedPlan {
            plan_id: id.clone(),
            action: plan.action,
            outcome: ExecutionOutcome::Completed,
            app: plan.payload.app().map(str::to_owned),
            containers: effect.containers,
            duration_ms: acted.duration_ms,
            data: plan.payload.data_after(),
            task: effect.task,
            backup: effect.backup.map(Box::new),
            restore: effect.restore.map(Box::new),
        }),
        // Nothing changed, and that is recorded: the plan is `failed`.
        (Err(_), Ok(()), Some(refusal)) => {
            Executed::Failed { plan_id: id.clone(), refusal, app_log: acted.app_log }
        }
        // Engine failed, or it acted and we could not record it. In the
        // second case the plan stays `executing` under our claim; once
        // this process exits, the next helper settles it.
        _ => Executed::NeedsInspection { plan_id: id.clone(), message: PARTIAL.to_owned() },
    }
}

/// What the engine answered, and what the record needs of it.
struct Acted {
    result: Result<Effect, EngineError>,
    duration_ms: u64,
    /// The engine once more after a completed plan that records images.
    after: Option<crate::vocab::Snapshot>,
    /// Why a plan that changed nothing failed.
    failure: Option<Refusal>,
    /// A rolled-back plan's failed app container's last lines, or what a
    /// failed task printed.
    app_log: Option<crate::logs::AppLog>,
}

fn unchanged_refusal(payload: &Payload, error: &EngineError, id: &PlanId) -> Refusal {
    match error {
        EngineError::NginxRejectedAndRestored => Refusal::new(
            Code::NginxRejected,
            format!(
                "nginx rejected the new configuration, so it was never loaded; the old configuration was \
                 restored, tested and reloaded and the app keeps serving as before. Plan {id} is failed; \
                 nothing else changed."
            ),
        ),
        EngineError::PortTaken { port } => Refusal::new(
            Code::PortInUse,
            format!(
                "Something started listening on 127.0.0.1:{port} after the plan was made; nothing was \
                 created. Plan {id} is failed; choose another port and prepare a new plan."
            ),
        ),
        EngineError::RolledBack { cause, .. } => payload.rolled_back(cause, id),
        // A task that ran and failed: its container is undone and seen
        // gone, as a rollback's is; the action says what that means.
        EngineError::TaskFailed { .. } | EngineError::TaskTimedOut { .. } => payload.rolled_back(error, id),
        // A backup that stopped before its snapshot only read the data.
        EngineError::BackupFailed { .. } => payload.rolled_back(error, id),
        // An edge change refused before its first step: no certificate from
        // ACME (the CA's reason, in our words), or no edge running.
        EngineError::Acme(_) | EngineError::EdgeNotRunning => payload.rolled_back(error, id),
        EngineError::Refused { .. } => {
            let why = payload.refused_because();
            Refusal::new(
                Code::EngineRefused,
                format!(
                    "Docker refused the {} and a fresh look showed its target exactly as before, so nothing \
                     changed; something on the server ({why}) changed after the plan was checked. Plan {id} \
                     is failed and blocks nothing; read the server's state again (inventory) before \
                     preparing a new plan.",
                    payload.action().as_str()
                ),
            )
        }
        _ => Refusal::new(Code::EngineUnavailable, format!("Plan {id} failed; nothing was changed.")),
    }
}
