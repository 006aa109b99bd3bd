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
