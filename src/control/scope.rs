//! The part of an engine snapshot a plan's decision depends on, and its
//! digest: what a plan is bound to, so that a busy host (a foreign
//! container restarting, created or removed) voids nothing, while any
//! change to the plan's target still voids it. Pure; runs inside the root
//! helper at prepare and again, on a fresh snapshot, at execute.
//!
//! Security invariants enforced here:
//! - the targets of a plan are digested whole (id, name, image id,
//!   volce-lab labels, port bindings and state): stop, start, update and
//!   remove_app, the app's recorded containers and anything carrying its
//!   app label or one of its names;
//!   restart, the same but for the state of the app's recorded containers,
//!   which it does not depend on (it stops whatever runs and starts both,
//!   and execute re-derives it from the fresh snapshot), so an app whose
//!   container is in a crash loop can still be restarted;
//!   nginx_config, the app's gateway; deploy, every container on one of
//!   the names the deploy will create or publishing its host port (a
//!   foreign container taking the name or the port voids the plan);
//!   remove_image, the image itself and every container, foreign or not,
//!   that references it;
//! - nothing outside the targets is digested, ours or not: another app
//!   being deployed, restarted, replaced or removed voids no plan about
//!   this one (an approval-free deploy of one app must not void a pending
//!   approval of another), while anything that can conflict with the plan
//!   is a target (a container on its names or its host port, a container
//!   using its image);
//! - of the `vl-*` networks, the ones on the target app's names (ours, or
//!   squatting on them);
//! - nothing else is read. Validation at execute
//!   still re-derives the plan from the whole fresh snapshot, so a foreign
//!   object that would change the decision is refused there too.

use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::vocab::{AppNames, Container, ContainerId, ImageId, PublishedPort, Snapshot};

/// Which objects of the engine a plan is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope<'a> {
    /// stop, start, restart, update and remove_app: the app's containers.
    /// `own_states`: whether the state of a recorded one counts (not for
    /// restart, see the module's invariants).
    App { names: AppNames, recorded: &'a [ContainerId], own_states: bool },
    /// nginx_config: the one gateway it reconfigures.
    Gateway { gateway: &'a ContainerId },
    /// deploy: the names it will create and the host port it will publish.
    NewApp { names: AppNames, host_port: u16 },
    /// remove_image: the image and whatever references it.
    Image { image: &'a ImageId },
}

impl<'a> Scope<'a> {
    /// Whether `container` is one of this plan's targets.
    fn targets(&self, container: &Container) -> bool {
        match self {
            Scope::App { names, recorded, .. } => {
                recorded.contains(&container.id) || names.claims_container(container)
            }
            Scope::Gateway { gateway } => container.id == **gateway,
            Scope::NewApp { names, host_port } => {
                names.claims_container(container) || container.ports.iter().any(|p| p.host_port == *host_port)
            }
            Scope::Image { image } => container.image_id == **image,
        }
    }

    /// Whether the state of `container`, a target, is digested.
    fn counts_state(&self, container: &Container) -> bool {
        match self {
            Scope::App { recorded, own_states: false, .. } => !recorded.contains(&container.id),
            _ => true,
        }
    }

    /// Whether the network called `name` is one of this plan's targets: a
    /// network on the names of the app it acts on or creates.
    fn claims_network(&self, name: &str) -> bool {
        match self {
            Scope::App { names, .. } | Scope::NewApp { names, .. } => names.claims_network(name),
            Scope::Gateway { .. } | Scope::Image { .. } => false,
        }
    }
}

/// One target container as the digest sees it.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
struct Entry<'s> {
    id: &'s ContainerId,
    name: &'s str,
    image_id: &'s ImageId,
    state: &'s str,
    labels: &'s std::collections::BTreeMap<String, String>,
    ports: Vec<&'s PublishedPort>,
}

/// What of `snapshot` the plan depends on (see the module invariants).
#[derive(Debug, PartialEq, Eq, Serialize)]
struct Scoped<'s> {
    containers: Vec<Entry<'s>>,
    /// remove_image: whether the image is there. Empty for other scopes.
    images: Vec<&'s ImageId>,
    /// The networks on the target app's names. Empty for other scopes.
    networks: Vec<&'s str>,
}

fn scoped<'s>(snapshot: &'s Snapshot, scope: &Scope<'_>) -> Scoped<'s> {
    let mut containers: Vec<Entry<'s>> = snapshot
        .containers
        .iter()
        .filter(|c| scope.targets(c))
        .map(|c| {
            let mut ports: Vec<&PublishedPort> = c.ports.iter().collect();
            ports.sort();
            Entry {
                id: &c.id,
                name: &c.name,
                image_id: &c.image_id,
                state: if scope.counts_state(c) { &c.state } else { "" },
                labels: &c.labels,
                ports,
            }
        })
        .collect();
    containers.sort();
    let images = match scope {
        Scope::Image { image } => snapshot.images.iter().filter(|i| *i == *image).take(1).collect(),
        _ => Vec::new(),
    };
    let mut networks: Vec<&str> =
        snapshot.networks.iter().map(String::as_str).filter(|name| scope.claims_network(name)).collect();
    networks.sort_unstable();
    networks.dedup();
    Scoped { containers, images, networks }
}

/// sha256 over the JSON of the scoped snapshot, as lowercase hex: the
/// snapshot digest a plan is sealed with and checked against.
pub fn digest(snapshot: &Snapshot, scope: &Scope<'_>) -> String {
    let bytes = serde_json::to_vec(&scoped(snapshot, scope)).expect("a scoped snapshot serializes");
    crate::text::hex(&Sha256::digest(&bytes))
}
