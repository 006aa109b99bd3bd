//! The image reference an operator gives `catalog pin`, by a grammar (no
//! shell ever sees it; it is one argv element of `docker pull`), and the
//! two facts pin derives from the local image: the registry digest of that
//! reference's repository and the container port. Pure.

use std::collections::BTreeMap;

/// `[host[:port]/]path[:tag][@sha256:<64 hex>]`, as `docker pull` takes
/// it, restricted to lowercase names: what the pinned reference
/// (`crate::vocab::ImageRef`) can hold. Never starts with `-`, so it cannot
/// be read as an option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The repository as written (`127.0.0.1:15000/team/web`, `nginx`).
    pub name: String,
    pub tag: Option<String>,
    /// The 64 hex of `@sha256:`, when the operator pinned one.
    pub digest: Option<String>,
}

/// How long a reference may be (docker's own name limit is 255 bytes).
const MAX_REFERENCE: usize = 255 + 1 + 128 + 72;

fn path_component_ok(part: &str) -> bool {
    let bytes = part.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
}

fn host_ok(part: &str) -> bool {
    let (host, port) = match part.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (part, None),
    };
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
    port_ok && path_component_ok(host)
}

fn tag_ok(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    (1..=128).contains(&bytes.len())
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

impl Reference {
    pub fn parse(value: &str) -> Option<Reference> {
        if value.is_empty() || value.len() > MAX_REFERENCE {
            return None;
        }
        let (rest, digest) = match value.split_once('@') {
            Some((rest, pinned)) => {
                let hex = pinned.strip_prefix("sha256:")?;
                crate::text::is_lower_hex(hex, 64).then_some(())?;
                (rest, Some(hex.to_owned()))
            }
            None => (value, None),
        };
        // A ':' after the last '/' starts the tag; one before it is a port.
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
            None => (rest, None),
        };
        if tag.is_some_and(|t| !tag_ok(t)) || name.len() > 255 {
            return None;
        }
        let parts: Vec<&str> = name.split('/').collect();
        let (first, path) = parts.split_first()?;
        // docker's rule: a first component with a '.' or ':', or
        // `localhost`, names a registry host.
        let first_is_host = parts.len() > 1 && (first.contains(['.', ':']) || *first == "localhost");
        let first_ok = if first_is_host { host_ok(first) } else { path_component_ok(first) };
        if !first_ok || !path.iter().all(|p| path_component_ok(p)) {
            return None;
        }
        Some(Reference { name: name.to_owned(), tag: tag.map(str::to_owned), digest })
    }

    /// The reference as `docker pull` takes it.
    pub fn pull_form(&self) -> String {
        let mut out = self.name.clone();
        if let Some(tag) = &self.tag {
            out.push(':');
            out.push_str(tag);
        }
        if let Some(digest) = &self.digest {
            out.push_str("@sha256:");
            out.push_str(digest);
        }
        out
    }

    /// The pinned reference to write: this repository at `digest`.
    pub fn pinned(&self, digest: &str) -> String {
        format!("{}@sha256:{digest}", self.name)
    }

    /// The registry digest of this repository among the image's
    /// `RepoDigests` (`repo@sha256:<hex>`): docker writes Docker Hub's
    /// repositories in their short form (`nginx`, not
    /// `docker.io/library/nginx`), so both sides are compared short. With a
    /// digest in the reference, only that one counts.
    pub fn registry_digest(&self, repo_digests: &[String]) -> Option<String> {
        let want = short(&self.name);
        repo_digests.iter().find_map(|entry| {
            let (repo, hex) = entry.split_once("@sha256:")?;
            let matches = short(repo) == want
                && crate::text::is_lower_hex(hex, 64)
                && self.digest.as_deref().is_none_or(|d| d == hex);
            matches.then(|| hex.to_owned())
        })
    }
}

/// A Docker Hub repository in the short form docker prints.
fn short(repo: &str) -> &str {
    let repo =
        repo.strip_prefix("docker.io/").or_else(|| repo.strip_prefix("index.docker.io/")).unwrap_or(repo);
    repo.strip_prefix("library/").filter(|rest| !rest.contains('/')).unwrap_or(repo)
}

/// The container port pin writes, or why there is none to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortChoice {
    Chosen(u16),
    /// The image exposes no TCP port.
    NoneExposed,
    /// Several TCP ports, named in order.
    Several(Vec<u16>),
    /// One exposed port below 1024: the app runs as uid 1000 and cannot
    /// listen there, and the catalog allows 1024 to 65535.
    Privileged(u16),
}

/// `given` (`--container-port`) when there is one, else the one TCP port
/// the image's `ExposedPorts` (`"8080/tcp"` -> `{}`) names.
pub fn choose_port(given: Option<u16>, exposed: &BTreeMap<String, serde_json::Value>) -> PortChoice {
    if let Some(port) = given {
        return PortChoice::Chosen(port);
    }
    let mut tcp: Vec<u16> = exposed
        .keys()
        .filter_map(|key| {
            let (port, protocol) = key.split_once('/').unwrap_or((key, "tcp"));
            (protocol == "tcp").then(|| port.parse().ok()).flatten()
        })
        .collect();
    tcp.sort_unstable();
    tcp.dedup();
    match tcp.as_slice() {
        [] => PortChoice::NoneExposed,
        [port] if *port < 1024 => PortChoice::Privileged(*port),
        [port] => PortChoice::Chosen(*port),
        _ => PortChoice::Several(tcp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar_takes_what_docker_pull_takes_in_lowercase() {
        let hex = "a".repeat(64);
        let r = Reference::parse("127.0.0.1:15000/volce-lab/web:test").unwrap();
        assert_eq!(
            (r.name.as_str(), r.tag.as_deref(), r.digest.as_deref()),
            ("127.0.0.1:15000/volce-lab/web", Some("test"), None)
        );
        let r = Reference::parse(&format!("nginx@sha256:{hex}")).unwrap();
        assert_eq!((r.name.as_str(), r.tag, r.digest.as_deref()), ("nginx", None, Some(hex.as_str())));
        let r = Reference::parse(&format!("localhost/app:1.2@sha256:{hex}")).unwrap();
        assert_eq!(r.pull_form(), format!("localhost/app:1.2@sha256:{hex}"));
        assert_eq!(Reference::parse("registry.example:5000/a/b").unwrap().tag, None);
        for bad in [
            "",
            "-v",
            "--help",
            "Web",
            "web:",
            "web:-x",
            "web@sha256:abc",
            "a//b",
            "/a",
            "a/",
            "web:t;rm",
            "web latest",
            "web\n",
            "host:port/x",
            "a/b:c/d",
            "web:$(id)",
            "web@sha512:aa",
            "registry:99999x/a",
        ] {
            assert_eq!(Reference::parse(bad), None, "{bad:?}");
        }
        let long = format!("a/{}", "b".repeat(300));
        assert_eq!(Reference::parse(&long), None);
    }

    #[test]
    fn the_digest_is_the_registry_digest_of_that_repository() {
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        let digests =
            vec![format!("other.example/web@sha256:{b}"), format!("127.0.0.1:15000/team/web@sha256:{a}")];
        let r = Reference::parse("127.0.0.1:15000/team/web:1").unwrap();
        assert_eq!(r.registry_digest(&digests), Some(a.clone()));
        assert_eq!(r.pinned(&a), format!("127.0.0.1:15000/team/web@sha256:{a}"));
        assert_eq!(Reference::parse("team/web").unwrap().registry_digest(&digests), None);
        assert_eq!(Reference::parse("x/y").unwrap().registry_digest(&[]), None, "built here, never pushed");
        // Docker Hub's short and long forms are one repository.
        let hub = vec![format!("nginx@sha256:{a}")];
        assert_eq!(
            Reference::parse("docker.io/library/nginx:1").unwrap().registry_digest(&hub),
            Some(a.clone())
        );
        // A pinned digest counts only as itself.
        let pinned = Reference::parse(&format!("127.0.0.1:15000/team/web@sha256:{b}")).unwrap();
        assert_eq!(pinned.registry_digest(&digests), None);
    }

    #[test]
    fn the_port_is_the_one_exposed_unless_given() {
        let exposed = |keys: &[&str]| keys.iter().map(|k| ((*k).to_owned(), serde_json::json!({}))).collect();
        assert_eq!(choose_port(None, &exposed(&["8080/tcp"])), PortChoice::Chosen(8080));
        assert_eq!(choose_port(None, &exposed(&["8080/tcp", "53/udp"])), PortChoice::Chosen(8080));
        assert_eq!(choose_port(None, &exposed(&[])), PortChoice::NoneExposed);
        assert_eq!(
            choose_port(None, &exposed(&["9000/tcp", "8080/tcp"])),
            PortChoice::Several(vec![8080, 9000])
        );
        assert_eq!(choose_port(None, &exposed(&["80/tcp"])), PortChoice::Privileged(80));
        assert_eq!(choose_port(Some(3000), &exposed(&["9000/tcp", "8080/tcp"])), PortChoice::Chosen(3000));
    }
}
