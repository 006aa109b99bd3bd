//! The controller's read-only views for the agent: `inventory` (the managed
//! apps held against the engine, the operator's offer, the open plans, and
//! counts of everything else) and `gateway_status` (what web_status reads).
//! Runs as root inside the host helper; writes nothing but the settling of
//! abandoned claims.
//!
//! Security invariants enforced here:
//! - only what volce-lab manages is described: apps come from our records
//!   (names that passed the app-name grammar when deployed), never from a
//!   label on a container; foreign containers, images and networks are
//!   counted, never named, and none of their images, ports or label values
//!   leaves the helper;
//! - the reply's size does not grow with the number of foreign objects, so
//!   a busy engine cannot push it past the workstation's reply limit
//!   (`crate::mcp::rpc::RPC_LIMITS`);
//! - every time is RFC 3339 UTC (`crate::text::rfc3339_seconds`).

use std::collections::BTreeMap;

use super::*;
use crate::control::validate::AppRecord;
use crate::docker::Snapshot;
use crate::host::drift::{self, EngineState};
use crate::nginx::ServerName;
use crate::text::rfc3339_seconds;
use crate::wire::ContainerRole;
use crate::wire::answers::app_state::Drift;
use crate::wire::answers::gateways::{Gateway, GatewayStatus};

/// At most this many free port ranges are listed; `free_count` counts all.
pub const MAX_FREE_RANGES: usize = 16;

impl<E: Engine, C: Clock, L: Liveness> Controller<E, C, L> {
    /// Everything the agent may know about what volce-lab manages here.
    pub fn inventory(&mut self, actor: &str) -> Result<Value, Refusal> {
        self.settle_abandoned(actor)?;
        let now = self.clock.now();
        let (apps, plans, last_plans) = self.store.read(|tx| {
            let (apps, last) = records(tx)?;
            Ok::<_, Refusal>((apps, tx.awaiting_plans(now)?, last))
        })?;
        let snapshot = self.engine.snapshot().map_err(engine_unavailable)?;
        let mut catalog = Vec::new();
        for (key, reference) in &self.policy.catalog {
            let image_id = self.engine.resolve_image(reference).map_err(engine_unavailable)?;
            catalog.push(json!({
                "key": key, "reference": reference, "present": image_id.is_some(), "image_id": image_id,
            }));
        }
        let gateway_id = self.engine.resolve_image(&self.policy.nginx_image).map_err(engine_unavailable)?;
        let apps_json: Vec<Value> =
            apps.values().map(|record| app_json(record, &snapshot, last_plans.get(&record.app))).collect();
        let unsettled = plans.iter().find(|p| p.state != PlanState::Pending);
        Ok(json!({
            "generated_at": rfc3339_seconds(now),
            "apps": apps_json,
            "offer": {
                "catalog": catalog,
                "gateway_image": {
                    "reference": self.policy.nginx_image, "present": gateway_id.is_some(), "image_id": gateway_id,
                },
                "ports": ports_json(self.policy.port_range, &apps, &snapshot),
                "quota": {"used": apps.len(), "max": self.policy.max_apps},
                "plan_ttl_seconds": self.policy.plan_ttl_seconds,
                "actions": Action::ALL.iter().map(|a| a.as_str()).collect::<Vec<_>>(),
                "approval_required": self.policy.approval_required.iter().map(|a| a.as_str()).collect::<Vec<_>>(),
            },
            "plans": plans.iter().map(plan_json).collect::<Vec<_>>(),
            "unsettled_plan": unsettled.map(|p| json!({"plan_id": p.plan.id, "state": p.state})),
            "foreign": foreign_json(&apps, &snapshot, catalog_ids(&catalog, gateway_id.as_ref())),
        }))
    }

    /// Each managed app's gateway: the app's state as the engine shows it,
    /// whether that is on purpose (stopped by a completed stop plan), and,
    /// for an app that should run, whether its gateway answers its server
    /// name. Read-only; web_status judges from this.
    pub fn gateway_status(&mut self) -> Result<GatewayStatus, Refusal> {
        let (apps, last_plans) = self.store.read(records)?;
        let snapshot = self.engine.snapshot().map_err(engine_unavailable)?;
        let gateways = apps
            .values()
            .filter_map(|record| {
                let app = AppName::parse(&record.app)?;
                let derived = drift::derive(record, &snapshot);
                let gateway = derived.containers.iter().find(|c| c.role == ContainerRole::Gateway);
                let stopped_on_purpose = derived.state == EngineState::Stopped
                    && last_plans.get(&record.app).is_some_and(is_completed_stop);
                let answers = (derived.state == EngineState::Running)
                    .then(|| ServerName::parse(&record.server_name))
                    .flatten()
                    .map(|name| self.engine.gateway_answers(record.host_port, &name));
                Some(Gateway {
                    name: app.names().gateway_container,
                    app: app.into(),
                    state: derived.state.into(),
                    container_state: gateway.map_or("missing", |g| g.state.as_str()).to_owned(),
                    stopped_on_purpose,
                    answers,
                    drift: derived.drift.map(Drift::of),
                })
            })
            .collect();
        Ok(GatewayStatus { gateways })
    }
}

/// App records by name, and the plan that last changed each, by app name.
type Records = (BTreeMap<String, AppRecord>, BTreeMap<String, StoredPlan>);

/// Every app record, and the plan that last changed each.
fn records(tx: &crate::store::Tx<'_>) -> Result<Records, Refusal> {
    let apps = tx.apps()?;
    let mut last = BTreeMap::new();
    for record in apps.values() {
        if let Some(plan) = tx.load_plan(&record.plan_id)? {
            last.insert(record.app.clone(), plan);
        }
    }
    Ok((apps, last))
}

fn is_completed_stop(plan: &StoredPlan) -> bool {
    plan.plan.action == Action::Stop && plan.state == PlanState::Completed
}

fn drift_json(reason: Option<drift::DriftReason>) -> Value {
    json!(reason.map(Drift::of))
}

/// One managed app: the record's facts, the engine's state and any drift.
fn app_json(record: &AppRecord, snapshot: &Snapshot, last: Option<&StoredPlan>) -> Value {
    let derived = drift::derive(record, snapshot);
    let digest = record.app_image.split_once('@').map(|(_, digest)| digest);
    json!({
        "app": record.app,
        "state": derived.state,
        "recorded_state": record.state,
        "drift": drift_json(derived.drift),
        "server_name": record.server_name,
        "host_port": record.host_port,
        "container_port": record.container_port,
        "image": {"key": record.image_key, "reference": record.app_image, "digest": digest, "image_ids": record.image_ids},
        "containers": derived.containers,
        "last_plan": last.map(|p| json!({
            "plan_id": p.plan.id,
            "action": p.plan.action,
            "state": p.state,
            "outcome": p.outcome,
            "requested_at": rfc3339_seconds(p.plan.created_at),
            "finished_at": p.finished_at.map(rfc3339_seconds),
        })),
    })
}

/// An open plan: what it would do, where it stands, until when.
fn plan_json(stored: &StoredPlan) -> Value {
    let plan = &stored.plan;
    json!({
        "plan_id": plan.id,
        "action": plan.action,
        "app": plan.payload.app(),
        "state": stored.state,
        "requester": plan.requester,
        "requested_at": rfc3339_seconds(plan.created_at),
        "expires_at": rfc3339_seconds(plan.expires_at),
        "requires_approval": plan.requires_approval,
        "approved": stored.approval.is_some(),
    })
}

/// The port range: which ports our apps hold, how many something else
/// publishes (a count: foreign ports are not ours to name), and the free
/// ones as at most [`MAX_FREE_RANGES`] ranges. "Free" means no app of ours
/// and no container publishes it; a deploy still probes the port itself.
fn ports_json(range: (u16, u16), apps: &BTreeMap<String, AppRecord>, snapshot: &Snapshot) -> Value {
    let (first, last) = range;
    let in_range = |port: u16| (first..=last).contains(&port);
    let ours: BTreeMap<u16, &str> =
        apps.values().filter(|r| in_range(r.host_port)).map(|r| (r.host_port, r.app.as_str())).collect();
    let mut others = std::collections::BTreeSet::new();
    for container in &snapshot.containers {
        for port in &container.ports {
            if in_range(port.host_port) && !ours.contains_key(&port.host_port) {
                others.insert(port.host_port);
            }
        }
    }
    let mut free: Vec<[u16; 2]> = Vec::new();
    let mut free_count = 0u32;
    for port in first..=last {
        if ours.contains_key(&port) || others.contains(&port) {
            continue;
        }
        free_count += 1;
        match free.last_mut() {
            Some(range) if range[1] + 1 == port => range[1] = port,
            _ => free.push([port, port]),
        }
    }
    let ranges = free.len();
    free.truncate(MAX_FREE_RANGES);
    json!({
        "first": first,
        "last": last,
        "used": ours.iter().map(|(port, app)| json!({"port": port, "app": app})).collect::<Vec<_>>(),
        "taken_by_others": others.len(),
        "free_count": free_count,
        "free": free,
        "free_ranges_truncated": ranges > MAX_FREE_RANGES,
    })
}

fn catalog_ids(catalog: &[Value], gateway: Option<&crate::docker::ImageId>) -> Vec<String> {
    let mut ids: Vec<String> =
        catalog.iter().filter_map(|c| c["image_id"].as_str().map(str::to_owned)).collect();
    ids.extend(gateway.map(|g| g.as_str().to_owned()));
    ids
}

/// What volce-lab does not manage, as counts only.
fn foreign_json(apps: &BTreeMap<String, AppRecord>, snapshot: &Snapshot, catalog_ids: Vec<String>) -> Value {
    let containers = snapshot
        .containers
        .iter()
        .filter(|c| !apps.values().any(|record| drift::belongs_to(record, c)))
        .count();
    let images = snapshot
        .images
        .iter()
        .filter(|image| {
            !catalog_ids.iter().any(|id| id == image.as_str())
                && !apps.values().any(|record| record.image_ids.contains(image))
        })
        .count();
    let networks = snapshot
        .networks
        .iter()
        .filter(|name| {
            !apps.values().any(|r| AppName::parse(&r.app).is_some_and(|a| a.names().claims_network(name)))
        })
        .count();
    json!({"containers": containers, "images": images, "networks": networks})
}
