//! Rollouts over several servers (issue 43), the workstation's part that
//! needs no server: the manifest a fleet plan records, its file, the
//! statement the operator signs for it, its batches, and the typed result
//! both tools return ([`RolloutView`]). The calls to the servers are
//! `super::server::rollout`'s. Runs unprivileged.
//!
//! Invariants enforced here:
//! - a manifest is written once (`ROLLOUT_ID.json`, 0600, in a 0700
//!   directory beside the audit log) and never replaced: no tool writes
//!   it again, and its sha256 is in the statement the operator signs, so
//!   a signed rollout runs only from the manifest that was signed;
//! - a rollout runs at most once: its run record (`ROLLOUT_ID.run.json`)
//!   is created exclusively before the first host is asked anything, and
//!   a second execute reads it instead of running.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use super::rpc::AnswerCode;
use crate::vocab::{Action, Code, Digest, PlanId, Refusal, RolloutId};
use crate::wire::rollout::{RolloutEntry, RolloutStatement};

/// The actions a fleet plan takes: the ones that change one app in place
/// and have a way back on each host.
pub const FLEET_ACTIONS: [Action; 5] =
    [Action::Deploy, Action::Update, Action::Rollback, Action::Restart, Action::NginxConfig];

pub const DEFAULT_BATCH_SIZE: u32 = 1;
pub const DEFAULT_HEALTH_WAIT_SECONDS: u32 = 10;

/// The directory's name, beside `audit.jsonl`.
pub const DIR_NAME: &str = "rollouts";

/// How long a rollout's files are kept after they were last written.
pub const KEEP_DAYS: u32 = 30;

/// What one fleet plan recorded: the same change on each target, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub rollout_id: RolloutId,
    pub action: Action,
    pub parameters: Map<String, Value>,
    pub batch_size: u32,
    pub health_wait_seconds: u32,
    /// When the workstation recorded it (RFC 3339, UTC).
    pub made_at: String,
    pub entries: Vec<ManifestEntry>,
}

/// One target of a rollout, as its host answered the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestEntry {
    /// The configured target's name.
    pub target: String,
    pub plan_id: PlanId,
    /// The plan's digest, as the host recorded it.
    pub digest: Digest,
    pub requires_approval: bool,
    pub expires_at: String,
    /// For a plan that needs approval: the host's identity line and the
    /// sha256 of its statement of the plan, as the host rendered it.
    pub host: Option<String>,
    pub statement_sha256: Option<String>,
}

impl Manifest {
    /// sha256 (hex) of the manifest's canonical JSON.
    pub fn sha256(&self) -> String {
        let bytes = crate::control::canonical::to_vec(self).expect("a manifest serializes");
        crate::text::hex(&Sha256::digest(&bytes))
    }

    /// The statement the operator signs: every entry that needs approval,
    /// in order. `None` when no host needs one.
    pub fn statement(&self) -> Option<RolloutStatement> {
        let entries: Vec<RolloutEntry> = self
            .entries
            .iter()
            .filter_map(|entry| {
                Some(RolloutEntry {
                    host: entry.host.clone()?,
                    plan_id: entry.plan_id.clone(),
                    statement_sha256: entry.statement_sha256.clone()?,
                })
            })
            .collect();
        if entries.is_empty() {
            return None;
        }
        Some(RolloutStatement {
            rollout_id: self.rollout_id.clone(),
            manifest_sha256: self.sha256(),
            action: self.action,
            parameters: crate::control::canonical::to_string(&self.parameters)
                .expect("a JSON map serializes"),
            batch_size: self.batch_size,
            health_wait_seconds: self.health_wait_seconds,
            entries,
        })
    }

    /// Why this manifest must not be recorded, if it must not: servers that
    /// disagree on whether the plan needs an approval (one signature would
    /// not name them all in their order), two targets that are one server
    /// (a host could not tell which line is its own), or a schedule whose
    /// last batch would start after a plan expired.
    pub fn unfit(&self, now: std::time::SystemTime) -> Option<Refusal> {
        let (needs, free): (Vec<&ManifestEntry>, Vec<&ManifestEntry>) =
            self.entries.iter().partition(|e| e.requires_approval);
        if !needs.is_empty() && !free.is_empty() {
            let names = |list: &[&ManifestEntry]| {
                list.iter().map(|e| e.target.as_str()).collect::<Vec<_>>().join(", ")
            };
            return Some(Refusal::new(
                Code::ApprovalRulesDiffer,
                format!(
                    "On {} this {} needs an approval and on {} it does not, so one signature could not name \
                     every server in its order.",
                    names(&needs),
                    self.action.as_str(),
                    names(&free)
                ),
            ));
        }
        for (i, entry) in needs.iter().enumerate() {
            if let Some(same) = needs[..i].iter().find(|other| other.host == entry.host) {
                return Some(Refusal::new(
                    Code::TargetsShareIdentity,
                    format!(
                        "Targets {} and {} answered as the same server ({}); a rollout names each server \
                         once.",
                        same.target,
                        entry.target,
                        entry.host.as_deref().unwrap_or("unknown")
                    ),
                ));
            }
        }
        let waits = u64::from(self.health_wait_seconds) * (self.batches().len() as u64).saturating_sub(1);
        let last_start = now + std::time::Duration::from_secs(waits);
        let first_expiry =
            self.entries.iter().filter_map(|e| humantime::parse_rfc3339(&e.expires_at).ok()).min()?;
        (last_start >= first_expiry).then(|| {
            Refusal::new(
                Code::NotAllowed,
                format!(
                    "Its last batch would start {waits} s from now, after the first of its plans expires ({}); \
                     ask for a shorter health_wait_seconds or a larger batch_size.",
                    humantime::format_rfc3339_seconds(first_expiry)
                ),
            )
        })
    }

    /// The app the rollout changes: every fleet action names one
    /// ([`FLEET_ACTIONS`], each validated with `app` before it was planned).
    pub fn app(&self) -> &str {
        self.parameters.get("app").and_then(Value::as_str).unwrap_or_default()
    }

    /// The batches, in order: index ranges of `entries`.
    pub fn batches(&self) -> Vec<std::ops::Range<usize>> {
        let size = (self.batch_size as usize).max(1);
        (0..self.entries.len())
            .step_by(size)
            .map(|start| start..(start + size).min(self.entries.len()))
            .collect()
    }
}

/// Where a rollout stands as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum RolloutState {
    /// Recorded; nothing ran.
    Planned,
    /// Its execute runs now.
    Running,
    /// Every host changed and was healthy.
    Done,
    /// A host failed, or could not be confirmed: no later batch started.
    Halted,
    /// The client cancelled the call: the batch that ran finished, no
    /// later batch started.
    Cancelled,
    /// Some hosts refused the plan: nothing can run (`service_plan`).
    Refused,
}

/// What happened on one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum HostOutcome {
    /// Its plan is recorded and waits for the execute.
    Planned,
    /// It refused to plan (the code says why).
    Refused,
    /// Its batch started: recorded before anything is sent, so a run that
    /// stops midway leaves the hosts that may have acted named.
    Running,
    /// Its plan ran and the host reported it healthy.
    Changed,
    /// Its plan ran and answered its health check, but after the wait the
    /// host no longer reported the app running: changed, not rolled back.
    Unhealthy,
    /// Its plan did not run, or ran and was rolled back (the code says
    /// which): the host is as it was.
    Failed,
    /// The host may have acted, and did not say: never retried; inspect.
    Unconfirmed,
    /// Not reached: its plan stays pending, unexecuted.
    Untouched,
}

/// One host of a rollout, as the result lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostStep {
    pub target: String,
    pub plan_id: Option<PlanId>,
    /// Its batch, from 1.
    pub batch: u32,
    pub outcome: HostOutcome,
    /// The host's code when it refused or failed.
    pub code: Option<AnswerCode>,
    /// The host's sentence (or ours), whole.
    pub message: Option<String>,
}

/// The result object of a fleet `service_plan` and of a rollout's
/// `service_execute`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RolloutView {
    pub rollout_id: RolloutId,
    pub action: Action,
    pub state: RolloutState,
    /// The manifest's sha256 (`Manifest::sha256`); null when nothing was recorded.
    pub manifest_sha256: Option<String>,
    pub batch_size: u32,
    pub health_wait_seconds: u32,
    /// Whether any host's plan needs an approval before the rollout runs.
    pub requires_approval: bool,
    /// The text the operator signs once (`volce-lab approve --rollout`
    /// prints the same after checking it with each host).
    pub statement: Option<String>,
    pub hosts: Vec<HostStep>,
}

impl RolloutView {
    /// The view of a recorded manifest, every host `planned`.
    pub fn of(manifest: &Manifest) -> RolloutView {
        let statement = manifest.statement();
        let batches = manifest.batches();
        let hosts = manifest
            .entries
            .iter()
            .enumerate()
            .map(|(index, entry)| HostStep {
                target: entry.target.clone(),
                plan_id: Some(entry.plan_id.clone()),
                batch: batch_of(&batches, index),
                outcome: HostOutcome::Planned,
                code: None,
                message: None,
            })
            .collect();
        RolloutView {
            rollout_id: manifest.rollout_id.clone(),
            action: manifest.action,
            state: RolloutState::Planned,
            manifest_sha256: Some(manifest.sha256()),
            batch_size: manifest.batch_size,
            health_wait_seconds: manifest.health_wait_seconds,
            requires_approval: manifest.entries.iter().any(|e| e.requires_approval),
            statement: statement.map(|s| s.render()),
            hosts,
        }
    }

    /// The targets whose outcome is `outcome`, in order.
    pub fn named(&self, outcome: HostOutcome) -> Vec<&str> {
        self.hosts.iter().filter(|h| h.outcome == outcome).map(|h| h.target.as_str()).collect()
    }
}

fn batch_of(batches: &[std::ops::Range<usize>], index: usize) -> u32 {
    batches.iter().position(|range| range.contains(&index)).map_or(0, |b| b as u32 + 1)
}

/// Why a rollout file could not be used; the sentence names the file.
#[derive(Debug, thiserror::Error)]
pub enum RolloutFileError {
    #[error("the local state directory is off (neither XDG_STATE_HOME nor HOME is set)")]
    Off,
    #[error("{0} cannot be written: {1}")]
    Write(PathBuf, String),
    #[error("{0} cannot be read: {1}")]
    Read(PathBuf, String),
}

/// The rollouts this workstation recorded.
#[derive(Debug, Clone)]
pub struct Rollouts {
    dir: Option<PathBuf>,
}

/// A claim on a rollout's run, or the run record that was there.
pub enum Claim {
    Claimed,
    Started(Box<RolloutView>),
}

impl Rollouts {
    /// Beside the local audit log (none when it is off).
    pub fn beside(audit: Option<&Path>) -> Rollouts {
        Rollouts { dir: audit.and_then(Path::parent).map(|dir| dir.join(DIR_NAME)) }
    }

    pub fn at(dir: PathBuf) -> Rollouts {
        Rollouts { dir: Some(dir) }
    }

    fn path(&self, id: &RolloutId, suffix: &str) -> Result<PathBuf, RolloutFileError> {
        let dir = self.dir.as_ref().ok_or(RolloutFileError::Off)?;
        Ok(dir.join(format!("{id}{suffix}")))
    }

    /// Records `manifest`, once; then forgets the rollouts older than
    /// [`KEEP_DAYS`].
    pub fn save(&self, manifest: &Manifest) -> Result<(), RolloutFileError> {
        let path = self.path(&manifest.rollout_id, ".json")?;
        let failed = |e: std::io::Error| RolloutFileError::Write(path.clone(), e.to_string());
        super::state_file::private_dir(path.parent().expect("a file in a directory")).map_err(failed)?;
        super::state_file::write_once(&path, &to_bytes(manifest)).map_err(failed)?;
        self.prune(std::time::SystemTime::now());
        Ok(())
    }

    /// Removes the manifests and run records last written more than
    /// [`KEEP_DAYS`] before `now`: their plans expired long ago, and what
    /// each server did stays in its audit trail and this workstation's
    /// audit log. Best effort: a file that cannot be removed stays.
    pub fn prune(&self, now: std::time::SystemTime) {
        let Some(entries) = self.dir.as_ref().and_then(|dir| std::fs::read_dir(dir).ok()) else { return };
        let horizon = std::time::Duration::from_secs(u64::from(KEEP_DAYS) * 86_400);
        for entry in entries.flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|modified| now.duration_since(modified).is_ok_and(|age| age > horizon));
            if old && entry.file_name().to_string_lossy().ends_with(".json") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// The manifest `id`, if this workstation recorded one.
    pub fn load(&self, id: &RolloutId) -> Result<Option<Manifest>, RolloutFileError> {
        read(&self.path(id, ".json")?)
    }

    /// Creates the run record of `view`'s rollout, or reads the one there.
    pub fn claim(&self, view: &RolloutView) -> Result<Claim, RolloutFileError> {
        let path = self.path(&view.rollout_id, ".run.json")?;
        match super::state_file::write_once(&path, &to_bytes(view)) {
            Ok(()) => Ok(Claim::Claimed),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                let recorded =
                    read(&path)?.ok_or_else(|| RolloutFileError::Read(path, "it is gone".into()))?;
                Ok(Claim::Started(Box::new(recorded)))
            }
            Err(error) => Err(RolloutFileError::Write(path, error.to_string())),
        }
    }

    /// Replaces the run record with `view` (after each batch).
    pub fn record(&self, view: &RolloutView) -> Result<(), RolloutFileError> {
        let path = self.path(&view.rollout_id, ".run.json")?;
        super::state_file::replace(&path, &to_bytes(view))
            .map_err(|e| RolloutFileError::Write(path, e.to_string()))
    }
}

fn to_bytes<T: Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).expect("a rollout file serializes");
    bytes.push(b'\n');
    bytes
}

fn read<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, RolloutFileError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| RolloutFileError::Read(path.to_owned(), format!("it is not volce-lab's ({e})"))),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(RolloutFileError::Read(path.to_owned(), error.to_string())),
    }
}

#[cfg(test)]
mod tests;
