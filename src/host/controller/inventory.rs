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

use super::{Controller, Liveness, engine_unavailable};
use crate::control::Clock;
use crate::control::app_record::AppRecord;
use crate::control::validate::accessories;
use crate::docker::Engine;
use crate::host::drift;
use crate::store::StoredPlan;
use crate::text::rfc3339_seconds;
use crate::vocab::Action;
use crate::vocab::PlanState;
use crate::vocab::{AccessoryUse, AppName, CertKind, HealthPath, ImageId, Refusal, ServerName, Snapshot};
use crate::wire::ContainerRole;
use crate::wire::answers::Open;
use crate::wire::answers::app_state::EngineState;
use crate::wire::answers::gateways::{Gateway, GatewayStatus, HttpsCheck};
use crate::wire::answers::inventory::{
    AccessoryView, AcmeErrorView, AppImage, CatalogImage, CertificateView, DataView, ExposedNameView,
    ForeignCounts, GatewayImage, HelperVersion, Inventory, KeptVersionView, LastPlan, ManagedApp, Offer,
    OpenPlan, PortOffer, PortUse, Quota, UnsettledPlan,
};

/// At most this many free port ranges are listed; `free_count` counts all.
pub const MAX_FREE_RANGES: usize = 16;

impl<E: Engine, C: Clock, L: Liveness> Controller<E, C, L> {
    /// Everything the agent may know about what volce-lab manages here.
    pub fn inventory(&mut self, actor: &str) -> Result<Inventory, Refusal> {
        self.settle_abandoned(actor)?;
        let now = self.clock.now();
        let (apps, plans, last_plans) = self.store.read(|tx| {
            let (apps, last) = records(tx)?;
            Ok::<_, Refusal>((apps, tx.awaiting_plans(now)?, last))
        })?;
        let snapshot = self.engine.snapshot().map_err(engine_unavailable)?;
        let mut catalog = Vec::new();
        for (key, entry) in &self.policy.catalog {
            let image_id = self.engine.resolve_image(&entry.image).map_err(engine_unavailable)?;
            catalog.push(CatalogImage {
                key: key.clone(),
                reference: entry.image.clone(),
                present: image_id.is_some(),
                image_id,
                container_port: entry.container_port,
                health_path: entry.health_path.clone(),
                // Whether, never what: the values stay on the host.
                has_configuration: entry.env_file.is_some(),
                has_data: entry.data.is_some(),
                tasks: entry.tasks.keys().cloned().collect(),
                accessories: entry.accessories.keys().cloned().collect(),
            });
        }
        let gateway_id = self.engine.resolve_image(&self.policy.nginx_image).map_err(engine_unavailable)?;
        let managed = apps
            .values()
            .map(|record| {
                let mut app =
                    managed_app(record, &snapshot, last_plans.get(record.app.as_str()), (&self.policy, now));
                (app.exposed, app.acme_error) = self.edge_views(record, now);
                app
            })
            .collect();
        let unsettled = plans.iter().find(|p| p.state != PlanState::Pending);
        let foreign = foreign_counts(&apps, &snapshot, catalog_ids(&catalog, gateway_id.as_ref()));
        let offer = Offer {
            catalog,
            gateway_image: GatewayImage {
                reference: self.policy.nginx_image.clone(),
                present: gateway_id.is_some(),
                image_id: gateway_id,
            },
            ports: port_offer(self.policy.port_range, &apps, &snapshot),
            quota: Quota { used: apps.len(), max: self.policy.max_apps },
            plan_ttl_seconds: self.policy.plan_ttl_seconds,
            actions: Action::ALL.to_vec(),
            approval_required: self.policy.approval_required.clone(),
            gateway_access_log: self.policy.gateway_access_log,
        };
        Ok(Inventory {
            generated_at: rfc3339_seconds(now),
            apps: managed,
            offer,
            plans: plans.iter().map(open_plan).collect(),
            unsettled_plan: unsettled
                .map(|p| UnsettledPlan { plan_id: p.plan.id.clone(), state: p.state.into() }),
            foreign,
            helper: Some(HelperVersion::this()),
        })
    }

    /// Each managed app's gateway: the app's state as the engine shows it,
    /// whether that is on purpose (stopped by a completed stop plan), and,
    /// for an app that should run, whether its gateway answers its server
    /// name. Read-only; web_status judges from this.
    pub fn gateway_status(&mut self) -> Result<GatewayStatus, Refusal> {
        let now = self.clock.now();
        let (apps, last_plans) = self.store.read(records)?;
        let snapshot = self.engine.snapshot().map_err(engine_unavailable)?;
        let gateways = apps
            .values()
            .map(|record| {
                let app = &record.app;
                let derived = drift::derive(record, &snapshot);
                let gateway = derived.containers.iter().find(|c| c.role == ContainerRole::Gateway);
                let stopped_by = last_plans
                    .get(record.app.as_str())
                    .filter(|plan| derived.state == EngineState::Stopped && is_completed_stop(plan))
                    .map(|stored| stored.plan.id.clone());
                let stopped_on_purpose = stopped_by.is_some();
                let running = derived.state == EngineState::Running;
                let answers =
                    running.then(|| self.engine.gateway_answers(record.host_port, &record.server_name));
                let (exposed, acme_error) = self.edge_views(record, now);
                let https = if running { self.https_checks(exposed) } else { Vec::new() };
                Gateway {
                    name: app.names().gateway_container,
                    app: app.to_string(),
                    state: derived.state.into(),
                    container_state: gateway.map_or("missing", |g| g.state.as_str()).to_owned(),
                    stopped_on_purpose,
                    stopped_by,
                    answers,
                    drift: derived.drift_view(),
                    https,
                    acme_error,
                }
            })
            .collect();
        Ok(GatewayStatus { gateways })
    }
}

impl<E: Engine, C: Clock, L: Liveness> Controller<E, C, L> {
    /// An app's names on the HTTPS edge, each with the certificate it
    /// serves, and the last failed ACME order for any of its names. Nothing
    /// is read on a server whose policy has no edge.
    fn edge_views(&self, record: &AppRecord, now: i64) -> (Vec<ExposedNameView>, Option<AcmeErrorView>) {
        if self.policy.edge.is_none() {
            return (Vec::new(), None);
        }
        let exposed: Vec<(&ServerName, CertKind)> =
            record.exposed.iter().flat_map(|e| &e.names).map(|n| (&n.name, n.source.kind())).collect();
        let names = std::iter::once(&record.server_name).chain(&record.also_server_names);
        let (mut views, mut failures) = (Vec::new(), Vec::new());
        for name in names {
            let facts = self.engine.edge_name(name);
            let source = exposed.iter().find(|(n, _)| *n == name).map(|(_, source)| *source);
            if let Some(source) = source {
                let certificate = facts.certificate.as_ref().map(|c| CertificateView::of(c, now));
                views.push(ExposedNameView { name: name.clone(), source, certificate });
            }
            // A name served from the operator's files since no longer
            // waits on ACME: its old failure is history, not a problem.
            if source != Some(CertKind::File) {
                failures.extend(facts.acme_failure.map(|failure| (name, failure)));
            }
        }
        let last = failures.into_iter().max_by_key(|(_, failure)| failure.at);
        (views, last.map(|(name, failure)| AcmeErrorView::of(name, &failure)))
    }

    /// Each exposed name of a running app asked through the edge's HTTPS
    /// address, TLS verified (web_status's check), with the certificate
    /// [`Self::edge_views`] read.
    fn https_checks(&self, exposed: Vec<ExposedNameView>) -> Vec<HttpsCheck> {
        let Some(edge) = &self.policy.edge else { return Vec::new() };
        exposed
            .into_iter()
            .map(|view| HttpsCheck {
                answer: self.engine.edge_answers(edge.https, &view.name, &HealthPath::default()).into(),
                name: view.name,
                certificate: view.certificate,
            })
            .collect()
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
            last.insert(record.app.to_string(), plan);
        }
    }
    Ok((apps, last))
}

fn is_completed_stop(plan: &StoredPlan) -> bool {
    plan.plan.action == Action::Stop && plan.state == PlanState::Completed
}

/// One managed app: the record's facts, the engine's state and any drift.
fn managed_app(
    record: &AppRecord,
    snapshot: &Snapshot,
    last: Option<&StoredPlan>,
    (policy, now): (&crate::control::policy::Policy, i64),
) -> ManagedApp {
    let derived = drift::derive(record, snapshot);
    let digest = record.app_image.as_str().split_once('@').map(|(_, digest)| digest.to_owned());
    ManagedApp {
        app: record.app.clone(),
        state: derived.state,
        recorded_state: record.state,
        drift: derived.drift_view(),
        server_name: record.server_name.clone(),
        also_server_names: record.also_server_names.clone(),
        // The controller adds what the edge holds (`edge_views`).
        exposed: Vec::new(),
        acme_error: None,
        host_port: record.host_port,
        container_port: record.container_port,
        image: AppImage {
            key: record.image_key.clone(),
            reference: record.app_image.clone(),
            digest,
            image_ids: record.image_ids.clone(),
        },
        containers: derived.containers,
        last_plan: last.map(|p| LastPlan {
            plan_id: p.plan.id.clone(),
            action: p.plan.action,
            state: p.state.into(),
            outcome: p.outcome.map(Open::Known),
            requested_at: rfc3339_seconds(p.plan.created_at),
            finished_at: p.finished_at.map(rfc3339_seconds),
        }),
        kept_versions: record
            .kept_versions
            .iter()
            .map(|v| KeptVersionView {
                key: v.image_key.clone(),
                reference: v.app_image.clone(),
                present: v.image_id.as_ref().is_some_and(|id| snapshot.images.contains(id)),
            })
            .collect(),
        data: record.data.as_ref().map(|data| DataView {
            backup: policy.backup.as_ref().map(|config| backup_view(&record.app, &data.image, config, now)),
            ..data_view(data)
        }),
        accessories: record
            .accessories
            .iter()
            .map(|a| accessory_view(record, a, snapshot, policy, now))
            .collect(),
    }
}

/// Where a data directory is seen, its cap, and whether it is mounted now.
fn data_view(data: &crate::vocab::DataUse) -> DataView {
    DataView {
        path: data.path.clone(),
        max_mib: data.max_mib,
        // Unknown reads as not mounted: the next start mounts it anyway.
        mounted: crate::docker::data_volume::mounted(&data.mount).unwrap_or(false),
        backup: None,
    }
}

/// One accessory of `record`: its recorded image, the policy's when that
/// is another, its container as the engine shows it, and its data, with
/// the app's backups when the policy dumps it (they hold its database).
fn accessory_view(
    record: &AppRecord,
    accessory: &AccessoryUse,
    snapshot: &Snapshot,
    policy: &crate::control::policy::Policy,
    now: i64,
) -> AccessoryView {
    let container = accessories::container_of(record, accessory, snapshot);
    let declared = policy.accessories.get(&accessory.name);
    let pinned = declared.map(|spec| &spec.image);
    let dumped = declared.is_some_and(|spec| spec.dump.is_some());
    let backup = policy.backup.as_ref().filter(|_| dumped).map(|config| {
        let image = crate::vocab::BackupRecord::app_image_beside(&accessory.data.image, &record.app);
        backup_view(&record.app, &image, config, now)
    });
    AccessoryView {
        name: accessory.name.clone(),
        image: accessory.image.clone(),
        policy_image: pinned.filter(|image| **image != accessory.image).cloned(),
        container: container.map(|c| c.id.clone()),
        state: container.map_or_else(|| "missing".to_owned(), |c| c.state.clone()),
        data: DataView { backup, ..data_view(&accessory.data) },
    }
}

/// What the app's backup record and the policy's schedule say of it.
fn backup_view(
    app: &AppName,
    image: &std::path::Path,
    config: &crate::vocab::BackupConfig,
    now: i64,
) -> crate::wire::answers::inventory::BackupView {
    let kept = crate::docker::backup::record(image);
    let schedule = config.schedule.get(app).copied();
    crate::wire::answers::inventory::BackupView {
        last_success_at: kept.last_success.as_ref().map(|done| rfc3339_seconds(done.at)),
        snapshot: kept.last_success.as_ref().map(|done| done.snapshot.clone()),
        bytes: kept.last_success.as_ref().map(|done| done.bytes),
        last_failure_at: kept.last_failure.as_ref().map(|missed| rfc3339_seconds(missed.at)),
        late: schedule.is_some_and(|every| kept.late(every, now)),
        schedule,
    }
}

/// An open plan: what it would do, where it stands, until when.
fn open_plan(stored: &StoredPlan) -> OpenPlan {
    let plan = &stored.plan;
    OpenPlan {
        plan_id: plan.id.clone(),
        action: plan.action,
        app: plan.payload.app().map(str::to_owned),
        state: stored.state.into(),
        requester: plan.requester.clone(),
        requested_at: rfc3339_seconds(plan.created_at),
        expires_at: rfc3339_seconds(plan.expires_at),
        requires_approval: plan.requires_approval,
        approved: stored.approval.is_some(),
    }
}

/// The port range: which ports our apps hold, how many something else
/// publishes (a count: foreign ports are not ours to name), and the free
/// ones as at most [`MAX_FREE_RANGES`] ranges. "Free" means no app of ours
/// and no container publishes it; a deploy still probes the port itself.
fn port_offer(range: (u16, u16), apps: &BTreeMap<String, AppRecord>, snapshot: &Snapshot) -> PortOffer {
    let (first, last) = range;
    let in_range = |port: u16| (first..=last).contains(&port);
    let ours: BTreeMap<u16, &AppName> =
        apps.values().filter(|r| in_range(r.host_port)).map(|r| (r.host_port, &r.app)).collect();
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
    PortOffer {
        first,
        last,
        used: ours.iter().map(|(port, app)| PortUse { port: *port, app: (*app).clone() }).collect(),
        taken_by_others: others.len(),
        free_count,
        free,
        free_ranges_truncated: ranges > MAX_FREE_RANGES,
    }
}

fn catalog_ids(catalog: &[CatalogImage], gateway: Option<&ImageId>) -> Vec<ImageId> {
    catalog.iter().filter_map(|c| c.image_id.clone()).chain(gateway.cloned()).collect()
}

/// What volce-lab does not manage, as counts only.
fn foreign_counts(
    apps: &BTreeMap<String, AppRecord>,
    snapshot: &Snapshot,
    catalog_ids: Vec<ImageId>,
) -> ForeignCounts {
    let containers = snapshot
        .containers
        .iter()
        .filter(|c| !apps.values().any(|record| drift::belongs_to(record, c)))
        .count();
    let images = snapshot
        .images
        .iter()
        .filter(|image| {
            !catalog_ids.contains(image) && !apps.values().any(|record| record.image_ids.contains(image))
        })
        .count();
    let networks = snapshot
        .networks
        .iter()
        .filter(|name| !apps.values().any(|r| r.app.names().claims_network(name)))
        .count();
    ForeignCounts { containers, images, networks }
}
