//! The controller: prepare, approve and execute plans against the store and
//! an [`Engine`]. Runs as root inside the host helper; generic over the
//! engine, the clock and the claim liveness check so tests drive it with fakes.
//!
//! Security invariants enforced here:
//! - no new plan, and no execution of an older one, while any plan is
//!   executing or needs inspection;
//! - execute checks everything (state, expiry, policy hash, approval bound to
//!   the digest, a fresh snapshot digest, re-derived payload) and marks the
//!   plan `executing` in ONE `BEGIN IMMEDIATE` transaction that commits
//!   before the engine is touched; a second helper therefore finds the plan
//!   consumed and can never act on it;
//! - the engine acts outside any transaction; a second transaction records
//!   `completed`, `failed` (only for an engine error that provably changed
//!   nothing: [`EngineError::changed_nothing`]) or `needs_inspection`;
//!   nothing retries;
//! - a plan left `executing` by a dead process becomes `needs_inspection`;
//!   a plan claimed by a live process is never touched;
//! - approval is only ever recorded by [`Controller::approve`], which the
//!   rpc pipeline cannot reach.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use serde_json::{Value, json};

use crate::control::plan::{Action, Digest, Payload, Plan, PlanId};
use crate::control::policy::Policy;
use crate::control::validate::{self, AppRecord, AppState, Context, Probe};
use crate::control::{Clock, Code, Refusal, refuse};
use crate::docker::{AppName, Capacity, Engine, EngineError};
use crate::store::{
    AuditOutcome, AuditRow, Claim, Event, PlanOutcome, PlanState, Store, StoreError, StoredPlan,
};

impl From<StoreError> for Refusal {
    fn from(error: StoreError) -> Refusal {
        error.refusal()
    }
}

/// Who this process is, and whether the process behind a claim still lives.
pub trait Liveness {
    /// The claim this process writes when it takes a plan.
    fn me(&self) -> Result<Claim, Refusal>;
    /// Whether the claimer is the same, still running process.
    fn alive(&self, claim: &Claim) -> bool;
}

/// The answer to `execute` once the engine was reached.
#[derive(Debug, Clone, PartialEq)]
pub enum Executed {
    /// The engine reported success and the outcome is recorded.
    Completed(Value),
    /// The engine failed or the outcome could not be recorded: the change may
    /// be partial, and an operator must look before anything else happens.
    NeedsInspection { plan_id: PlanId, message: String },
    /// The engine failed but provably changed nothing (see
    /// [`EngineError::changed_nothing`]): the plan is `failed`, the host is
    /// not blocked, and the refusal says what happened.
    Failed { plan_id: PlanId, refusal: Refusal },
}

const PARTIAL: &str = "The change may be partial: an operator must inspect the server before any new plan; \
                       nothing will be retried.";

fn engine_unavailable(_: EngineError) -> Refusal {
    // The engine error may name a docker step; it is ours, but the agent gets
    // one fixed sentence and the operator reads the details on the server.
    Refusal::new(Code::EngineUnavailable, "The container engine could not be queried; nothing was changed.")
}

/// What `resolve` did.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub stored: StoredPlan,
    /// For a deploy plan: what became of its app record.
    pub app: Option<AppAfterResolve>,
}

/// The app record of a resolved deploy plan.
#[derive(Debug, Clone, PartialEq)]
pub enum AppAfterResolve {
    /// No container of it exists: the record is gone, its name, port and
    /// quota slot are free (its directory stays as evidence).
    Forgotten(String),
    /// Kept unchanged; `containers` names what of it still exists.
    Kept { app: String, state: AppState, containers: Vec<String> },
}

/// Facts for validation, from the engine and the app directory.
struct EngineProbe<'a, E: Engine> {
    engine: &'a E,
    apps_dir: &'a std::path::Path,
}

impl<E: Engine> Probe for EngineProbe<'_, E> {
    fn host_port_free(&self, port: u16) -> bool {
        self.engine.host_port_free(port)
    }
    fn capacity(&self) -> Result<Capacity, Refusal> {
        self.engine.capacity().map_err(engine_unavailable)
    }
    fn app_dir_exists(&self, app: &str) -> bool {
        // Anything but a clean "not found" counts as existing: refusing a
        // deploy is always safe, adopting a directory never is.
        match std::fs::symlink_metadata(self.apps_dir.join(app)) {
            Ok(_) => true,
            Err(error) => error.kind() != std::io::ErrorKind::NotFound,
        }
    }
}

/// One controller over one open store.
pub struct Controller<E: Engine, C: Clock, L: Liveness> {
    policy: Policy,
    policy_hash: String,
    store: Store,
    engine: E,
    clock: C,
    liveness: L,
    apps_dir: PathBuf,
}

fn audit(at: i64, event: Event, outcome: AuditOutcome, actor: &str) -> AuditRow {
    AuditRow { at, event, outcome, exit_code: None, duration_ms: None, actor: actor.to_owned() }
}

impl<E: Engine, C: Clock, L: Liveness> Controller<E, C, L> {
    pub fn new(policy: Policy, store: Store, engine: E, clock: C, liveness: L, apps_dir: PathBuf) -> Self {
        let policy_hash = policy.hash();
        Controller { policy, policy_hash, store, engine, clock, liveness, apps_dir }
    }

    pub fn engine(&self) -> &E {
        &self.engine
    }

    pub fn store(&mut self) -> &mut Store {
        &mut self.store
    }

    /// Turns every plan left `executing` by a dead process into
    /// `needs_inspection`, and returns their ids. Live claims are left alone.
    pub fn settle_abandoned(&mut self, actor: &str) -> Result<Vec<PlanId>, Refusal> {
        let now = self.clock.now();
        let liveness = &self.liveness;
        // Usually nothing is executing: look without taking the write lock.
        let claims = self.store.read(|tx| tx.executing_plans().map_err(Refusal::from))?;
        if claims.iter().all(|(_, _, claim)| liveness.alive(claim)) {
            return Ok(Vec::new());
        }
        self.store.write(|tx| {
            // Decide again under the lock: another helper may have settled them.
            let mut settled = Vec::new();
            for (id, action, claim) in tx.executing_plans()? {
                if liveness.alive(&claim) {
                    continue;
                }
                tx.abandon(
                    &id,
                    action,
                    &claim,
                    &audit(now, Event::ClaimAbandoned, AuditOutcome::Uncertain, actor),
                )?;
                if let Some(app) = tx.load_plan(&id)?.and_then(|p| p.plan.payload.app().map(str::to_owned)) {
                    mark_app(tx, &app, AppState::NeedsInspection, &id, now)?;
                }
                settled.push(id);
            }
            Ok::<_, Refusal>(settled)
        })
    }

    /// The apps we recorded, the unsettled plan if any, and the engine's view.
    pub fn inventory(&mut self, actor: &str) -> Result<Value, Refusal> {
        self.settle_abandoned(actor)?;
        let (apps, unsettled) = self.store.read(|tx| Ok::<_, Refusal>((tx.apps()?, tx.unsettled_plan()?)))?;
        let snapshot = self.engine.snapshot().map_err(engine_unavailable)?;
        let apps: Vec<Value> = apps
            .values()
            .map(|a| {
                json!({
                    "app": a.app, "state": a.state, "host_port": a.host_port, "container_port": a.container_port,
                    "server_name": a.server_name, "image": a.image_key, "containers": a.containers,
                })
            })
            .collect();
        Ok(json!({
            "apps": apps,
            "unsettled_plan": unsettled.map(|(id, state)| json!({"plan_id": id, "state": state})),
            "docker": snapshot,
        }))
    }

    /// The gateways we manage and their state.
    pub fn gateway_status(&self) -> Result<Value, Refusal> {
        let snapshot = self.engine.snapshot().map_err(engine_unavailable)?;
        let gateways: Vec<Value> = snapshot
            .containers
            .iter()
            .filter(|c| c.role() == Some("gateway"))
            .filter_map(|c| {
                // Only a gateway on the name a deploy gives it; a label that
                // is not an app name is nobody's app of ours.
                let app = AppName::parse(c.app()?)?;
                (c.name == app.names().gateway_container)
                    .then(|| json!({"name": c.name, "app": app, "state": c.state}))
            })
            .collect();
        Ok(json!({ "gateways": gateways }))
    }

    /// Validates and stores a new pending plan.
    pub fn prepare(
        &mut self,
        action: &str,
        parameters: &Value,
        requester: &str,
    ) -> Result<StoredPlan, Refusal> {
        let action = Action::parse(action)?;
        self.settle_abandoned(requester)?;
        let now = self.clock.now();
        let Controller { policy, policy_hash, store, engine, apps_dir, .. } = self;
        store.write(|tx| {
            if let Some((id, state)) = tx.unsettled_plan()? {
                return refuse(
                    Code::InspectionRequired,
                    format!(
                        "Plan {id} is {}; no new plan is accepted until an operator has inspected it.",
                        state.as_str()
                    ),
                );
            }
            let apps = tx.apps()?;
            let snapshot = engine.snapshot().map_err(engine_unavailable)?;
            let id = PlanId::random();
            let ctx = Context { policy, snapshot: &snapshot, apps: &apps, apps_dir, plan_id: &id };
            let probe = EngineProbe { engine: &*engine, apps_dir };
            let (payload, impact) = validate::derive(action, parameters, &ctx, &probe)?;
            let plan = Plan::seal(
                id,
                parameters.clone(),
                payload,
                impact,
                snapshot.digest(),
                policy_hash.clone(),
                requester.to_owned(),
                now,
            );
            tx.insert_plan(&plan, &audit(now, Event::Prepared, AuditOutcome::Ok, requester))?;
            Ok(StoredPlan {
                plan,
                state: PlanState::Pending,
                approval: None,
                claim: None,
                claimed_at: None,
                finished_at: None,
                outcome: None,
                resolution: None,
            })
        })
    }

    /// Reads one plan (for `show`), after settling abandoned claims.
    pub fn load(&mut self, id: &PlanId, actor: &str) -> Result<StoredPlan, Refusal> {
        self.settle_abandoned(actor)?;
        self.store
            .read(|tx| tx.load_plan(id).map_err(Refusal::from))?
            .ok_or_else(|| Refusal::new(Code::PlanNotFound, "No plan has this id."))
    }

    /// Records an operator's approval. Only the terminal `approve` command
    /// calls this; the rpc pipeline has no path here.
    pub fn approve(&mut self, id: &PlanId, digest: &Digest, approver: &str) -> Result<StoredPlan, Refusal> {
        let Controller { policy, policy_hash, store, clock, .. } = self;
        store.write(|tx| {
            // Under the write lock, so time spent waiting for it counts.
            let now = clock.now();
            let Some(stored) = tx.load_plan(id)? else {
                return refuse(Code::PlanNotFound, "No plan has this id.");
            };
            let plan = &stored.plan;
            if !policy.is_approver(approver) {
                return refuse(
                    Code::NotAnApprover,
                    format!("{approver} is not listed in the policy's approvers."),
                );
            }
            if approver == plan.requester {
                return refuse(Code::SelfApproval, "The user who requested a plan cannot approve it.");
            }
            if !plan.requires_approval {
                return refuse(Code::ApprovalNotRequired, "This action does not need an approval.");
            }
            state_allows_use(&stored)?;
            if now > plan.expires_at {
                return refuse(Code::PlanExpired, "The plan has expired; ask for a new one.");
            }
            if plan.policy_hash != *policy_hash {
                return refuse(Code::PolicyChanged, "The policy changed since this plan was made.");
            }
            if *digest != plan.digest {
                return refuse(
                    Code::DigestMismatch,
                    "The digest does not match this plan; check it with show.",
                );
            }
            if stored.approval.is_some() {
                return refuse(Code::AlreadyApproved, "This plan is already approved.");
            }
            tx.approve(id, plan.action, digest, &audit(now, Event::Approved, AuditOutcome::Ok, approver))?;
            Ok(tx.load_plan(id)?.expect("just approved"))
        })
    }

    /// Marks a plan that needs inspection as `inspected`: the operator
    /// attests they looked at the server. Only the terminal `resolve`
    /// command calls this; the rpc pipeline has no path here.
    ///
    /// Any approver may resolve, the plan's requester included: resolving
    /// authorizes no change on the server (it only lifts the host-wide gate
    /// on new plans, each of which is validated and, where required,
    /// approved by someone else as usual), and the person who must look at
    /// the server is whoever is on call.
    ///
    /// The app record of a failed deploy is dropped (freeing its name, port
    /// and quota slot) when it is still `needs_inspection` from this plan and
    /// a fresh engine snapshot shows no container of that app: nothing of it
    /// is left to manage. Every other app record is kept as it is: if it is
    /// `needs_inspection`, volce-lab will neither reconfigure nor stop it
    /// (both need `running`), because nobody has verified what runs; its
    /// containers hold the name and the port anyway.
    pub fn resolve(&mut self, id: &PlanId, operator: &str) -> Result<Resolved, Refusal> {
        self.settle_abandoned(operator)?;
        if !self.policy.is_approver(operator) {
            return refuse(
                Code::NotAnApprover,
                format!("{operator} is not listed in the policy's approvers."),
            );
        }
        // A read-only engine call, made before the write transaction (never
        // hold one across a docker call). Nothing of ours can create the
        // app's containers meanwhile: no plan executes while this one
        // needs inspection.
        let stored = self
            .store
            .read(|tx| tx.load_plan(id).map_err(Refusal::from))?
            .ok_or_else(|| Refusal::new(Code::PlanNotFound, "No plan has this id."))?;
        let leftovers = match &stored.plan.payload {
            Payload::Deploy { spec, .. } if stored.state == PlanState::NeedsInspection => {
                let snapshot = self.engine.snapshot().map_err(engine_unavailable)?;
                let names = spec.app.names();
                let remaining: Vec<String> = snapshot
                    .containers
                    .iter()
                    .filter(|c| names.claims_container(c))
                    .map(|c| c.name.clone())
                    .collect();
                Some((spec.app.to_string(), remaining))
            }
            _ => None,
        };
        let now = self.clock.now();
        self.store.write(|tx| {
            let Some(stored) = tx.load_plan(id)? else {
                return refuse(Code::PlanNotFound, "No plan has this id.");
            };
            if stored.state != PlanState::NeedsInspection {
                return refuse(
                    Code::NotAwaitingInspection,
                    format!(
                        "The plan is {}, not needs_inspection; there is nothing to resolve.",
                        stored.state.as_str()
                    ),
                );
            }
            tx.resolve(id, stored.plan.action, &audit(now, Event::Inspected, AuditOutcome::Ok, operator))?;
            let mut app = None;
            if let Some((name, remaining)) = &leftovers {
                let record = tx.apps()?.get(name).cloned();
                app = match record {
                    Some(r)
                        if r.state == AppState::NeedsInspection
                            && r.plan_id == *id
                            && remaining.is_empty() =>
                    {
                        tx.delete_app(name)?;
                        Some(AppAfterResolve::Forgotten(name.clone()))
                    }
                    Some(r) => Some(AppAfterResolve::Kept {
                        app: name.clone(),
                        state: r.state,
                        containers: remaining.clone(),
                    }),
                    None => None,
                };
            }
            Ok(Resolved { stored: tx.load_plan(id)?.expect("just resolved"), app })
        })
    }

    /// Executes a plan exactly once (see the module's invariants).
    pub fn execute(&mut self, id: &PlanId, requester: &str) -> Result<Executed, Refusal> {
        self.settle_abandoned(requester)?;
        let me = self.liveness.me()?;

        // Transaction 1: verify everything and claim, or refuse.
        let decision = {
            let Controller { policy, policy_hash, store, engine, apps_dir, clock, .. } = self;
            store.write(|tx| {
                // Read the clock only once the write lock is held: waiting
                // for the lock must not let an expired plan through.
                let now = clock.now();
                let Some(stored) = tx.load_plan(id)? else {
                    return refuse(Code::PlanNotFound, "No plan has this id.");
                };
                state_allows_use(&stored)?;
                let plan = &stored.plan;
                if now > plan.expires_at {
                    return refuse(Code::PlanExpired, "The plan has expired; ask for a new one.");
                }
                // A plan prepared before another one failed must not run on
                // top of a server that nobody has inspected yet.
                if let Some((other, state)) = tx.unsettled_plan()? {
                    return refuse(
                        Code::InspectionRequired,
                        format!("Plan {other} is {}; nothing executes until an operator has inspected it.", state.as_str()),
                    );
                }
                if plan.policy_hash != *policy_hash {
                    tx.invalidate(
                        id,
                        plan.action,
                        PlanOutcome::PolicyChanged,
                        &audit(now, Event::Invalidated, AuditOutcome::Refused, requester),
                    )?;
                    return Ok(Err(Refusal::new(
                        Code::PolicyChanged,
                        "The operator's policy changed since this plan was made; it is void, prepare a new one.",
                    )));
                }
                if plan.requires_approval {
                    match &stored.approval {
                        Some(approval) if approval.digest == plan.digest => {}
                        _ => {
                            return refuse(
                                Code::ApprovalRequired,
                                format!(
                                    "An operator must approve this plan on the server first: \
                                     volce-lab-host show {id}, then approve {id} <digest>."
                                ),
                            );
                        }
                    }
                }
                let snapshot = engine.snapshot().map_err(engine_unavailable)?;
                if snapshot.digest() != plan.snapshot_digest {
                    tx.invalidate(
                        id,
                        plan.action,
                        PlanOutcome::SnapshotChanged,
                        &audit(now, Event::Invalidated, AuditOutcome::Refused, requester),
                    )?;
                    return Ok(Err(Refusal::new(
                        Code::SnapshotChanged,
                        "The server's containers or images changed since this plan was made; it is void \
                         (and so is any approval): prepare a new one.",
                    )));
                }
                // Re-derive from the stored parameters: references, ports,
                // directories and app records must still say the same.
                let apps = tx.apps()?;
                let ctx = Context { policy, snapshot: &snapshot, apps: &apps, apps_dir, plan_id: id };
                let probe = EngineProbe { engine: &*engine, apps_dir };
                let (payload, impact) = validate::derive(plan.action, &plan.parameters, &ctx, &probe)?;
                if payload != plan.payload || impact != plan.impact {
                    return refuse(
                        Code::SnapshotChanged,
                        "The controller's records changed since this plan was made; prepare a new one.",
                    );
                }
                // The snapshot and the re-derivation take time: the plan
                // must still be unexpired at the moment it is claimed.
                let now = clock.now();
                if now > plan.expires_at {
                    return refuse(Code::PlanExpired, "The plan has expired; ask for a new one.");
                }
                tx.claim(id, plan.action, &me, &audit(now, Event::Claimed, AuditOutcome::Ok, requester))?;
                Ok(Ok((stored.plan.clone(), apps)))
            })?
        };
        let (plan, apps) = decision?;

        // The claim is committed: from here on nothing may refuse quietly.
        let started = Instant::now();
        let result = self.act(&plan.payload);
        let duration_ms = started.elapsed().as_millis() as u64;
        // A completed deploy records the image ids its containers run (the
        // claim remove_image checks). Read-only, outside any transaction;
        // if the snapshot fails the claim is simply not recorded.
        let after = match (&plan.payload, &result) {
            (Payload::Deploy { .. }, Ok(_)) => self.engine.snapshot().ok(),
            _ => None,
        };

        // Transaction 2: record what happened.
        let now = self.clock.now();
        let recorded = self.store.write(|tx| {
            let (outcome, event, category, exit_code) = match &result {
                Ok(_) => (PlanOutcome::Completed, Event::Completed, AuditOutcome::Ok, None),
                Err(EngineError::NginxRejectedAndRestored) => {
                    (PlanOutcome::RolledBack, Event::Failed, AuditOutcome::Failed, None)
                }
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
                duration_ms: Some(duration_ms),
                actor: requester.to_owned(),
            };
            tx.finish(id, plan.action, &me, outcome, &row)?;
            record_apps(tx, &plan, &apps, &result, after.as_ref(), now)?;
            Ok::<_, Refusal>(())
        });

        match (result, recorded) {
            (Ok(acted), Ok(())) => Ok(Executed::Completed(json!({
                "plan_id": id,
                "action": plan.action,
                "outcome": "completed",
                "app": plan.payload.app(),
                "containers": acted,
                "duration_ms": duration_ms,
            }))),
            // Nothing changed, and that is recorded: the plan is `failed`.
            (Err(error), Ok(())) if error.changed_nothing() => {
                Ok(Executed::Failed { plan_id: id.clone(), refusal: unchanged_refusal(&error, id) })
            }
            // Engine failed, or it acted and we could not record it. In the
            // second case the plan stays `executing` under our claim; once
            // this process exits, the next helper settles it.
            _ => Ok(Executed::NeedsInspection { plan_id: id.clone(), message: PARTIAL.to_owned() }),
        }
    }

    /// The one place that mutates through the engine.
    fn act(&self, payload: &Payload) -> Result<Vec<String>, EngineError> {
        match payload {
            Payload::Deploy { spec, .. } => self
                .engine
                .deploy(spec)
                .map(|d| vec![d.app_container.to_string(), d.gateway_container.to_string()]),
            Payload::NginxConfig { app_dir, gateway, previous_config, new_config, .. } => self
                .engine
                .update_nginx(app_dir, gateway, previous_config, new_config)
                .map(|()| vec![gateway.to_string()]),
            Payload::Stop { containers, .. } => {
                self.engine.stop(containers).map(|()| containers.iter().map(|c| c.to_string()).collect())
            }
            Payload::RemoveImage { image_id, .. } => self.engine.remove_image(image_id).map(|()| vec![]),
        }
    }
}

/// The agent's answer for an engine failure that changed nothing.
fn unchanged_refusal(error: &EngineError, id: &PlanId) -> Refusal {
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
        _ => Refusal::new(Code::EngineUnavailable, format!("Plan {id} failed; nothing was changed.")),
    }
}

/// Refuses a plan that is not pending, each state with its own code.
fn state_allows_use(stored: &StoredPlan) -> Result<(), Refusal> {
    match stored.state {
        PlanState::Pending => Ok(()),
        PlanState::Executing => refuse(
            Code::PlanExecuting,
            "The plan is being executed by another helper right now; inspect it, do not repeat it.",
        ),
        PlanState::Completed | PlanState::NeedsInspection | PlanState::Inspected | PlanState::Failed => {
            refuse(
                Code::PlanConsumed,
                format!(
                    "The plan was already used (it is {}); inspect the result, do not repeat it.",
                    stored.state.as_str()
                ),
            )
        }
        PlanState::Invalidated => refuse(
            Code::PlanInvalidated,
            "The plan is void because the policy or the server changed; prepare a new one.",
        ),
    }
}

fn mark_app(
    tx: &crate::store::Tx<'_>,
    app: &str,
    state: AppState,
    plan: &PlanId,
    now: i64,
) -> Result<(), Refusal> {
    let apps = tx.apps()?;
    if let Some(record) = apps.get(app) {
        let mut record = record.clone();
        record.state = state;
        record.plan_id = plan.clone();
        tx.put_app(&record, now)?;
    }
    Ok(())
}

/// The app records after an execution: what the plan made true, or
/// `needs_inspection` for the app it touched when the engine failed.
fn record_apps(
    tx: &crate::store::Tx<'_>,
    plan: &Plan,
    apps: &BTreeMap<String, AppRecord>,
    result: &Result<Vec<String>, EngineError>,
    after: Option<&crate::docker::Snapshot>,
    now: i64,
) -> Result<(), Refusal> {
    let ok = result.is_ok();
    if result.as_ref().is_err_and(EngineError::changed_nothing) {
        // Nothing changed on the server, so no record changes either: a
        // deploy refused before its first step holds no name, port or
        // quota slot, and the app whose nginx.conf was restored is still
        // running exactly as recorded.
        return Ok(());
    }
    match &plan.payload {
        Payload::Deploy { image_key, spec, .. } => {
            let ids: Vec<_> = result
                .as_ref()
                .map(|ids| ids.iter().filter_map(|i| crate::docker::ContainerId::parse(i)).collect())
                .unwrap_or_default();
            let mut image_ids: Vec<_> = after
                .map(|s| {
                    s.containers.iter().filter(|c| ids.contains(&c.id)).map(|c| c.image_id.clone()).collect()
                })
                .unwrap_or_default();
            image_ids.sort();
            image_ids.dedup();
            let record = AppRecord {
                app: spec.app.to_string(),
                state: if ok { AppState::Running } else { AppState::NeedsInspection },
                host_port: spec.host_port,
                container_port: spec.container_port,
                server_name: spec.server_name.to_string(),
                image_key: image_key.clone(),
                app_image: spec.app_image.to_string(),
                gateway_image: spec.gateway_image.to_string(),
                nginx_config: spec.nginx_config.clone(),
                app_dir: spec.app_dir.clone(),
                app_container: ids.first().cloned(),
                gateway_container: ids.get(1).cloned(),
                containers: ids,
                plan_id: plan.id.clone(),
                image_ids,
            };
            tx.put_app(&record, now)?;
        }
        Payload::NginxConfig { app, server_name, new_config, .. } => {
            if let Some(old) = apps.get(app.as_str()) {
                let mut record = old.clone();
                record.plan_id = plan.id.clone();
                if ok {
                    record.server_name = server_name.to_string();
                    record.nginx_config = new_config.clone();
                } else {
                    record.state = AppState::NeedsInspection;
                }
                tx.put_app(&record, now)?;
            }
        }
        Payload::Stop { app, .. } => {
            mark_app(
                tx,
                app.as_str(),
                if ok { AppState::Stopped } else { AppState::NeedsInspection },
                &plan.id,
                now,
            )?;
        }
        Payload::RemoveImage { .. } => {}
    }
    Ok(())
}
