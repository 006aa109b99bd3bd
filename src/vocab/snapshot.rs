//! What the controller sees of the container engine: a [`Snapshot`] of
//! containers, images and `vl-*` networks, and the labels that mark what
//! volce-lab created. Pure data; the docker engine fills it, validation and
//! each plan's scope read it, the controller digests it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::{ContainerId, ImageId};

/// Label keys that mark what volce-lab created. Nothing without them is ever touched.
pub const LABEL_APP: &str = "io.volce-lab.app";
pub const LABEL_ROLE: &str = "io.volce-lab.role";
pub const LABEL_PLAN: &str = "io.volce-lab.plan";

/// A port a container publishes on the host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PublishedPort {
    pub host_ip: String,
    pub host_port: u16,
    pub container_port: u16,
    pub protocol: String,
}

/// One container as the engine reports it, managed by us or not.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Container {
    pub id: ContainerId,
    pub name: String,
    pub image_id: ImageId,
    /// Docker's state word: `running`, `exited`, `created`, ...
    pub state: String,
    /// Only the `io.volce-lab.*` labels; other labels are none of our business.
    pub labels: BTreeMap<String, String>,
    pub ports: Vec<PublishedPort>,
}

impl Container {
    /// The app this container belongs to, if volce-lab created it.
    pub fn app(&self) -> Option<&str> {
        self.labels.get(LABEL_APP).map(String::as_str)
    }
    pub fn role(&self) -> Option<&str> {
        self.labels.get(LABEL_ROLE).map(String::as_str)
    }
}

/// What keeps the engine from removing a local image by id without force,
/// besides the containers that use it (those are in the [`Snapshot`]).
/// Counts and ids only: the image's tags and digest references are names
/// someone else chose, so none of them is carried, shown or obeyed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageHolds {
    /// Local images (intermediate ones too) whose parent is this image:
    /// docker refuses to remove an image other images are built on.
    pub children: Vec<ImageId>,
    /// How many repository tags (`name:tag`) the image carries.
    pub tags: usize,
    /// How many digest references (`name@sha256:...`) the image carries.
    pub digests: usize,
    /// Docker's rule for a removal by id without force: the references, if
    /// any, are at most one tag and name one repository between them.
    /// Anything else docker refuses ("referenced in multiple repositories").
    pub references_removable: bool,
}

impl ImageHolds {
    /// Docker's rule (see `references_removable`) over the repository
    /// names of the image's tags and of its digest references.
    pub fn references_removable(tag_repositories: &[&str], digest_repositories: &[&str]) -> bool {
        match (tag_repositories, digest_repositories) {
            ([], []) | ([_], []) | ([], [_]) => true,
            (tags, digests) if tags.len() <= 1 => {
                let mut names: Vec<&str> = tags.iter().chain(digests).copied().collect();
                names.sort_unstable();
                names.dedup();
                names.len() == 1
            }
            _ => false,
        }
    }
}

/// What the controller sees of the engine, in a stable order, so that two
/// snapshots of an unchanged engine are equal. Each plan digests only its
/// scope of it (`crate::control::scope`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub containers: Vec<Container>,
    pub images: Vec<ImageId>,
    /// Names of networks called `vl-*` (ours or squatting on our names).
    pub networks: Vec<String>,
}

impl Snapshot {
    /// Sorts every list; call before digesting.
    pub fn normalize(mut self) -> Snapshot {
        for container in &mut self.containers {
            container.ports.sort();
        }
        self.containers.sort();
        self.images.sort();
        self.images.dedup();
        self.networks.sort();
        self.networks.dedup();
        self
    }

    /// sha256 over the JSON of the whole normalized snapshot, as lowercase
    /// hex. Plans are not bound to this (a busy host would void them all)
    /// but to their scope of it: `crate::control::scope::digest`.
    pub fn digest(&self) -> String {
        let normalized = self.clone().normalize();
        let bytes = serde_json::to_vec(&normalized).expect("snapshot serializes");
        crate::text::hex(&Sha256::digest(&bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_digest_ignores_order() {
        let image = |c: char| ImageId::parse(&format!("sha256:{}", c.to_string().repeat(64))).unwrap();
        let a = Snapshot { containers: vec![], images: vec![image('a'), image('b')], networks: vec![] };
        let b = Snapshot { containers: vec![], images: vec![image('b'), image('a')], networks: vec![] };
        assert_eq!(a.digest(), b.digest());
        let c = Snapshot { containers: vec![], images: vec![image('a')], networks: vec![] };
        assert_ne!(a.digest(), c.digest());
    }

    /// Docker's own cases (moby `isSingleReference`): one reference of any
    /// kind; a tag and digests of its one repository; digests of one
    /// repository. Two tags, or two repositories, are refused.
    #[test]
    fn references_removable_follows_dockers_rule() {
        let ok = ImageHolds::references_removable;
        assert!(ok(&[], &[]));
        assert!(ok(&["a"], &[]));
        assert!(ok(&[], &["a"]));
        assert!(ok(&["a"], &["a"]));
        assert!(ok(&["a"], &["a", "a"]));
        assert!(ok(&[], &["a", "a"]));
        assert!(!ok(&["a", "a"], &[]));
        assert!(!ok(&["a", "a"], &["a"]));
        assert!(!ok(&["a", "b"], &[]));
        assert!(!ok(&["a"], &["b"]));
        assert!(!ok(&[], &["a", "b"]));
        assert!(!ok(&["a"], &["a", "b"]));
    }
}
