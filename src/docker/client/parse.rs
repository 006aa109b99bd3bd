//! Parsers for what docker prints: id lists, the inspect rows of our
//! template ([`super::INSPECT_TEMPLATE`]), image ids and network names.
//! Pure; strict: anything unexpected is [`EngineError::Unparsable`], never
//! a guess. Runs as root in the host helper, on docker's stdout. Public so
//! that the fuzz targets (fuzz/) can feed them arbitrary bytes.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::docker::EngineError;
use crate::vocab::{Container, ContainerId, ImageId, NAME_PREFIX, PublishedPort};

/// Only labels under this prefix are kept; others are none of our business.
const LABEL_PREFIX: &str = "io.volce-lab.";

pub(super) fn first_line(out: &[u8]) -> &str {
    std::str::from_utf8(out).unwrap_or("").lines().next().unwrap_or("").trim()
}

pub(super) fn lines(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out).lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InspectRow {
    id: String,
    name: String,
    image: String,
    state: String,
    labels: Option<BTreeMap<String, String>>,
    ports: Option<BTreeMap<String, Option<Vec<Binding>>>>,
}

#[derive(Deserialize)]
struct Binding {
    #[serde(rename = "HostIp", default)]
    host_ip: String,
    #[serde(rename = "HostPort", default)]
    host_port: String,
}

pub fn parse_container_ids(out: &[u8]) -> Result<Vec<ContainerId>, EngineError> {
    lines(out)
        .iter()
        .map(|l| ContainerId::parse(l).ok_or(EngineError::Unparsable { step: "list containers" }))
        .collect()
}

pub fn parse_inspect_rows(out: &[u8]) -> Result<Vec<Container>, EngineError> {
    let bad = EngineError::Unparsable { step: "inspect containers" };
    let text = std::str::from_utf8(out).map_err(|_| bad.clone())?;
    let mut containers = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let row: InspectRow = serde_json::from_str(line).map_err(|_| bad.clone())?;
        let mut ports = Vec::new();
        for (key, bindings) in row.ports.unwrap_or_default() {
            let (port, protocol) = key.split_once('/').unwrap_or((key.as_str(), "tcp"));
            let container_port = port.parse().map_err(|_| bad.clone())?;
            for binding in bindings.unwrap_or_default() {
                // An empty HostPort means "any free port"; 0 says so.
                let host_port = if binding.host_port.is_empty() {
                    0
                } else {
                    binding.host_port.parse().map_err(|_| bad.clone())?
                };
                ports.push(PublishedPort {
                    host_ip: binding.host_ip,
                    host_port,
                    container_port,
                    protocol: protocol.to_owned(),
                });
            }
        }
        containers.push(Container {
            id: ContainerId::parse(&row.id).ok_or(bad.clone())?,
            name: row.name.trim_start_matches('/').to_owned(),
            image_id: ImageId::parse(&row.image).ok_or(bad.clone())?,
            state: row.state,
            labels: row
                .labels
                .unwrap_or_default()
                .into_iter()
                .filter(|(k, _)| k.starts_with(LABEL_PREFIX))
                .collect(),
            ports,
        });
    }
    Ok(containers)
}

pub fn parse_images(out: &[u8]) -> Result<Vec<ImageId>, EngineError> {
    lines(out)
        .iter()
        .map(|l| ImageId::parse(l).ok_or(EngineError::Unparsable { step: "list images" }))
        .collect()
}

/// `--filter name=vl-` matches anywhere in the name; keep the real prefix.
pub fn parse_networks(out: &[u8]) -> Result<Vec<String>, EngineError> {
    Ok(lines(out).into_iter().filter(|n| n.starts_with(NAME_PREFIX)).collect())
}

/// `network ls --format '{{.ID}} {{.Name}}'`: a full id and a name a line.
pub fn parse_labelled_networks(out: &[u8]) -> Result<Vec<crate::docker::LabelledNetwork>, EngineError> {
    lines(out)
        .into_iter()
        .map(|line| match line.split_once(' ') {
            Some((id, name)) if crate::text::is_lower_hex(id, 64) && !name.is_empty() => {
                Ok(crate::docker::LabelledNetwork { id: id.to_owned(), name: name.to_owned() })
            }
            _ => Err(EngineError::Unparsable { step: "list plan networks" }),
        })
        .collect()
}

/// The `VOLUME`s an image declares, from `{{json .Config.Volumes}}`: `null`
/// (none) or an object whose keys are the paths. Sorted.
pub fn parse_volumes(out: &[u8]) -> Result<Vec<String>, EngineError> {
    const STEP: &str = "inspect image volumes";
    let text = std::str::from_utf8(out).map_err(|_| EngineError::Unparsable { step: STEP })?.trim();
    let volumes: Option<BTreeMap<String, serde_json::Value>> =
        serde_json::from_str(text).map_err(|_| EngineError::Unparsable { step: STEP })?;
    Ok(volumes.unwrap_or_default().into_keys().collect())
}

/// One image as [`super::IMAGE_TEMPLATE`] prints it: its id, its parent
/// (empty for none) and its references, sorted. The references are
/// someone else's names: they are compared and counted, never shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRow {
    pub id: ImageId,
    pub parent: Option<ImageId>,
    pub tags: Vec<String>,
    pub digests: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawImageRow {
    id: String,
    parent: String,
    tags: Option<Vec<String>>,
    digests: Option<Vec<String>>,
}

/// Rows of [`super::IMAGE_TEMPLATE`], one image a line.
pub fn parse_image_rows(out: &[u8]) -> Result<Vec<ImageRow>, EngineError> {
    let bad = EngineError::Unparsable { step: "inspect images" };
    let text = std::str::from_utf8(out).map_err(|_| bad.clone())?;
    let mut rows = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let raw: RawImageRow = serde_json::from_str(line).map_err(|_| bad.clone())?;
        let parent = match raw.parent.as_str() {
            "" => None,
            parent => Some(ImageId::parse(parent).ok_or(bad.clone())?),
        };
        let mut tags = raw.tags.unwrap_or_default();
        let mut digests = raw.digests.unwrap_or_default();
        tags.sort();
        digests.sort();
        rows.push(ImageRow { id: ImageId::parse(&raw.id).ok_or(bad.clone())?, parent, tags, digests });
    }
    Ok(rows)
}

/// The repository a tag (`name:tag`) or a digest reference
/// (`name@sha256:...`) names. A registry's port (`host:port/name`) is not
/// a tag: the tag is after the last `/`.
pub fn repository_of(reference: &str) -> &str {
    if let Some((name, _)) = reference.split_once('@') {
        return name;
    }
    match reference.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => name,
        _ => reference,
    }
}

/// What holds `image` among `rows` (every local image): the images built
/// on it and its references, counted. `None` when it is not among them.
pub fn holds_of(image: &ImageId, rows: &[ImageRow]) -> Option<crate::vocab::ImageHolds> {
    let row = rows.iter().find(|r| &r.id == image)?;
    let mut children: Vec<ImageId> =
        rows.iter().filter(|r| r.parent.as_ref() == Some(image)).map(|r| r.id.clone()).collect();
    children.sort();
    children.dedup();
    let tag_repositories: Vec<&str> = row.tags.iter().map(|t| repository_of(t)).collect();
    let digest_repositories: Vec<&str> = row.digests.iter().map(|d| repository_of(d)).collect();
    Some(crate::vocab::ImageHolds {
        children,
        tags: row.tags.len(),
        digests: row.digests.len(),
        references_removable: crate::vocab::ImageHolds::references_removable(
            &tag_repositories,
            &digest_repositories,
        ),
    })
}
