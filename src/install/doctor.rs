//! `volce-lab-host doctor`: a read-only check of the server installation,
//! one finding per line, each failure with the fix. Runs as root on the
//! server (it reads the root-only policy and state); changes nothing.
//!
//! The facts that need the outside world (docker, visudo, the account
//! database, the policy parser and the store) come through [`DoctorProbe`], so the
//! rules can be tested on temporary files with a fake probe, and for real on
//! an installation the end-to-end suite builds. Owner and mode of every
//! installed file are checked on the path, one finding each.
//!
//! Here: the paths, the probe's interface, the helper, sudoers and agent
//! rules. Beside it: the findings and the report (`finding.rs`), the
//! policy's content and images (`policy.rs`), the state directory and
//! database (`state.rs`), who may sign approvals (`signers.rs`, reading
//! `allowed_signers.rs`), stuck plans (`plans.rs`), the engine (`engine.rs`),
//! the ssh side (`ssh.rs`), and the probe of the real system (`system.rs`).

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use super::{PRIVILEGED_GROUPS, sudoers_rule};
use crate::host::HostPaths;
use crate::vocab::EnvFileName;

/// Where the installation lives. [`DoctorPaths::installed`] is what the
/// shipped binary checks; tests point the same rules at temporary files.
#[derive(Debug, Clone)]
pub struct DoctorPaths {
    pub helper_link: PathBuf,
    pub policy: PathBuf,
    pub state_dir: PathBuf,
    pub sudoers: PathBuf,
    /// The owner every installed file must have: root, except in tests.
    pub owner_uid: u32,
}

impl DoctorPaths {
    /// The shipped binary's: the helper's own table ([`HostPaths`]).
    pub fn installed() -> DoctorPaths {
        let HostPaths { policy, state_dir, owner_uid } = HostPaths::fixed();
        DoctorPaths {
            helper_link: PathBuf::from(HostPaths::HELPER),
            policy,
            state_dir,
            sudoers: PathBuf::from(HostPaths::SUDOERS),
            owner_uid,
        }
    }

    /// The helper's paths for this installation, for the files the doctor
    /// finds through them (env files, `allowed_signers`).
    pub(super) fn host(&self) -> HostPaths {
        HostPaths {
            policy: self.policy.clone(),
            state_dir: self.state_dir.clone(),
            owner_uid: self.owner_uid,
        }
    }
}

/// What the doctor needs of a policy the helper's parser accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyFacts {
    /// Every pinned reference: the catalog's, then the gateway's.
    pub images: Vec<String>,
    /// How many entries the catalog has (none is valid: setup's skeleton).
    pub catalog_entries: usize,
    /// The gateway's (`nginx_image`), also the last of `images`.
    pub gateway: String,
    pub approvers: Vec<String>,
    /// The env files the catalog names (`crate::vocab::EnvFileName`), each once.
    pub env_files: Vec<EnvFileName>,
    /// Whether a catalog entry gives its app a data directory.
    pub has_data: bool,
    /// The policy's `signed_approvals`: `None`, approvals at the terminal only.
    pub signed_approvals: Option<crate::control::policy::SignedApprovals>,
    /// The policy's `backup`: `None`, no backups.
    pub backup: Option<crate::vocab::BackupConfig>,
    /// Whether the policy has an `edge`.
    pub edge: bool,
}

/// What doctor reads of a local image (`docker image inspect`'s `Config`);
/// its home is the docker client, which reads it for `catalog pin` too.
pub use crate::docker::client::ImageConfig;

/// What the doctor learns from outside its own file checks.
pub trait DoctorProbe {
    /// The Docker engine's version, or why it cannot be reached.
    fn docker_version(&self) -> Result<String, String>;
    /// The config of a pinned image in the local engine, or None when the
    /// engine does not have it.
    fn image_config(&self, reference: &str) -> Option<ImageConfig>;
    /// Whether `visudo -cf <path>` accepts the file.
    fn sudoers_valid(&self, path: &Path) -> bool;
    /// The groups `user` belongs to (primary and supplementary), or None if
    /// there is no such account.
    fn groups_of(&self, user: &str) -> Option<Vec<String>>;
    /// Parses the policy with the helper's own parser: the pinned images and
    /// the approvers it names, or the reason it is refused. Ownership and mode
    /// are not its business: the doctor checks them itself, as findings of
    /// their own.
    fn policy(&self, path: &Path) -> Result<PolicyFacts, String>;
    /// The store's read-only health report: integrity, schema version,
    /// stuck plans; `None` when no database exists yet (a fresh installation).
    fn store(&self, state_dir: &Path) -> Result<Option<StoreHealth>, String>;
    /// The managed apps whose record and engine disagree
    /// (`crate::host::drift`), read without changing anything.
    fn drift(&self, state_dir: &Path) -> Result<Vec<AppDrift>, String>;
    /// The data of every recorded app that has some (`data::read_data`);
    /// `None` when this probe cannot tell.
    fn data(&self, _state_dir: &Path) -> Option<Result<Vec<data::DataFacts>, String>> {
        None
    }
    /// One line per engine object carrying the plan's label
    /// (`crate::host::leftovers`), read-only; `None` when this probe cannot
    /// ask the engine.
    fn leftovers(&self, _state_dir: &Path, _plan: &str) -> Option<Result<Vec<String>, String>> {
        None
    }
    /// The claimer of an executing plan, if it is alive but stopped
    /// (`crate::host::liveness`); `None` when it is not, or this probe
    /// cannot tell.
    fn stopped_claimer(&self, _state_dir: &Path, _plan: &str) -> Option<crate::host::StoppedClaimer> {
        None
    }
    /// What the engine's daemon says of itself and how it was started
    /// (`engine`: TCP listeners, iptables), when this probe can tell.
    fn engine(&self) -> Option<engine::EngineFacts> {
        None
    }
    /// The networks of every managed app with the options they were
    /// created with (`engine`: an app deployed by an older volce-lab keeps
    /// networks without today's options); empty when this probe cannot ask.
    fn app_networks(&self, _state_dir: &Path) -> Result<Vec<engine::AppNetwork>, String> {
        Ok(Vec::new())
    }
    /// The HTTPS edge (`edge::read_edge`); `None` when this probe cannot tell.
    fn edge(&self, _state_dir: &Path) -> Option<Result<edge::EdgeFacts, String>> {
        None
    }
    /// Whether the host's system logger listens on /dev/log (a plan that
    /// waits for approval is announced there); `None` when this probe
    /// cannot tell.
    fn system_log(&self) -> Option<bool> {
        None
    }
    /// The ssh-side facts (`ssh`: the agent's key, shell, home and
    /// `sudo -l`), when this probe can give them.
    fn ssh(&self) -> Option<&dyn ssh::SshProbe> {
        None
    }
}

/// A managed app whose record and engine disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppDrift {
    pub app: String,
    pub reason: crate::wire::answers::app_state::DriftReason,
    /// The reason's sentence naming the containers that differ.
    pub message: String,
}

/// What the store says about itself (its home is `crate::store`).
pub use crate::store::StoreHealth;

/// The policy's findings alone (its directory, file, content, approvers and
/// images), as [`diagnose`] makes them: what `catalog pin`'s tests hold a
/// written policy to.
pub fn policy_findings(paths: &DoctorPaths, probe: &dyn DoctorProbe) -> Vec<Finding> {
    let mut findings = Vec::new();
    policy::check_policy(paths, probe, None, &mut findings);
    findings
}

/// Runs every check in a fixed order.
pub fn diagnose(paths: &DoctorPaths, probe: &dyn DoctorProbe) -> Vec<Finding> {
    let mut findings = Vec::new();
    check_helper(paths, &mut findings);
    let agent = check_sudoers(paths, probe, &mut findings);
    if let Some(agent) = &agent {
        check_agent(agent, probe, &mut findings);
        if let Some(ssh) = probe.ssh() {
            ssh::check_ssh(agent, paths.owner_uid, ssh, &mut findings);
        }
    }
    // Every account's rules, not only the agent's: a SETENV rule on the
    // helper is root whoever it names.
    if let Some(ssh) = probe.ssh() {
        loader::check_loader_rules(ssh, &mut findings);
    }
    policy::check_policy(paths, probe, agent.as_deref(), &mut findings);
    signers::check_signers(paths, probe.policy(&paths.policy).ok().as_ref(), &mut findings);
    state::check_state(paths, probe, &mut findings);
    check_system_log(probe.system_log(), &mut findings);
    let needed = probe.policy(&paths.policy).is_ok_and(|facts| facts.has_data);
    let data_facts = probe.data(&paths.state_dir);
    if let (Ok(policy), Some(Ok(facts))) = (probe.policy(&paths.policy), &data_facts)
        && let Some(backup) = &policy.backup
    {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        data::check_backups(backup, facts, now, &mut findings);
    }
    data::check_data(data_facts, needed, &mut findings);
    if let Some(facts) = probe.edge(&paths.state_dir) {
        let configured = probe.policy(&paths.policy).is_ok_and(|p| p.edge);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        edge::check_edge(configured, facts, now, &mut findings);
    }
    match probe.docker_version() {
        Ok(version) => {
            findings.push(ok("docker", format!("engine reachable (version {version})")));
            engine::check_engine(&version, probe.engine().as_ref(), &mut findings);
            engine::check_app_networks(probe.app_networks(&paths.state_dir), &mut findings);
        }
        Err(why) => findings.push(fail(
            "docker",
            format!("engine not reachable: {why}"),
            "start the engine (systemctl start docker) and check /var/run/docker.sock",
        )),
    }
    findings
}

/// Whether new plans that wait for approval reach the operator's alerting:
/// said once here, not on every plan `show` prints (issue 37).
fn check_system_log(listening: Option<bool>, findings: &mut Vec<Finding>) {
    let dev_log = crate::store::DEV_LOG;
    match listening {
        None => {}
        Some(true) => findings
            .push(ok("system log", format!("{dev_log} listens: a plan that waits for approval is announced there"))),
        Some(false) => findings.push(warn(
            "system log",
            format!(
                "nothing listens on {dev_log}: a plan that waits for approval is not announced to your alerting, \
                 and the ssh gate's refusals reach no log"
            ),
            "start the system logger (systemctl start systemd-journald, or install rsyslog), then run doctor again",
        )),
    }
}

/// Checks that `path`'s metadata (not following links) is owned by the
/// installation owner and not writable by group or others.
pub(super) fn protected(paths: &DoctorPaths, subject: &str, path: &Path, fix_mode: &str) -> Finding {
    match std::fs::symlink_metadata(path) {
        Err(_) => {
            fail(subject, format!("{} is missing", path.display()), format!("install {}", path.display()))
        }
        Ok(meta) if meta.uid() != paths.owner_uid => fail(
            subject,
            format!("{} is owned by uid {}, not {}", path.display(), meta.uid(), paths.owner_uid),
            format!("chown -h root:root {}", path.display()),
        ),
        Ok(meta) if !meta.file_type().is_symlink() && meta.permissions().mode() & 0o022 != 0 => fail(
            subject,
            format!(
                "{} is writable by group or others (mode {:o})",
                path.display(),
                meta.permissions().mode() & 0o7777
            ),
            format!("chmod {fix_mode} {}", path.display()),
        ),
        Ok(meta) => ok(
            subject,
            format!(
                "{} owned by uid {}, mode {:o}",
                path.display(),
                meta.uid(),
                meta.permissions().mode() & 0o7777
            ),
        ),
    }
}

fn check_helper(paths: &DoctorPaths, findings: &mut Vec<Finding>) {
    let link = &paths.helper_link;
    findings.push(protected(paths, "helper link", link, "0755"));
    let Ok(target) = std::fs::canonicalize(link) else {
        findings.push(fail(
            "helper binary",
            format!("{} does not lead to an executable", link.display()),
            format!(
                "apt-get install --reinstall volce-lab (installed by hand: \
                 ln -sfn /usr/local/lib/volce-lab/volce-lab {})",
                HostPaths::HELPER
            ),
        ));
        return;
    };
    findings.push(protected(paths, "helper binary", &target, "0755"));
    // Every directory above the binary, and above the link, must be root's
    // too: whoever can write one of them can swap or re-point what the
    // sudoers rule runs as root.
    let mut dirs: Vec<&Path> = target.ancestors().skip(1).collect();
    dirs.extend(link.ancestors().skip(1));
    dirs.sort();
    dirs.dedup();
    for dir in dirs {
        check_directory(paths, dir, findings);
    }
}

/// A root-owned sticky directory (/tmp) lets nobody else rename entries, so
/// it passes; any other directory writable by group or others does not.
fn check_directory(paths: &DoctorPaths, dir: &Path, findings: &mut Vec<Finding>) {
    let Ok(meta) = std::fs::metadata(dir) else { return };
    let mode = meta.permissions().mode();
    let owner_ok = meta.uid() == 0 || meta.uid() == paths.owner_uid;
    let sticky = mode & 0o1000 != 0;
    if !owner_ok || (mode & 0o022 != 0 && !sticky) {
        findings.push(fail(
            "helper directory",
            format!(
                "{} (above the helper) is owned by uid {} with mode {:o}",
                dir.display(),
                meta.uid(),
                mode & 0o7777
            ),
            format!("chown root:root {0} && chmod go-w {0}", dir.display()),
        ));
    }
}

/// The agent a drop-in is for, when it is what setup writes
/// (`install::sudoers_file`: the rpc's options and the one rule), or the
/// one-line rule setup wrote before issue 44 (whose missing options
/// `check_rpc_options` warns of); comments and blank lines aside.
fn sudoers_agent(content: &str) -> Option<String> {
    let lines = |text: &str| -> Vec<String> {
        text.lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .map(str::to_owned)
            .collect()
    };
    let rules = lines(content);
    let rule = rules.last()?;
    let user = rule.split_whitespace().next().filter(|user| *rule == sudoers_rule(user))?;
    (rules.len() == 1 || rules == lines(&crate::install::sudoers_file(user))).then(|| user.to_owned())
}

fn check_sudoers(
    paths: &DoctorPaths,
    probe: &dyn DoctorProbe,
    findings: &mut Vec<Finding>,
) -> Option<String> {
    let path = &paths.sudoers;
    let finding = protected(paths, "sudoers drop-in", path, "0440");
    let present = !finding.detail.ends_with("is missing");
    findings.push(finding);
    if !present {
        return None;
    }
    let content = std::fs::read_to_string(path).unwrap_or_default();
    let agent = sudoers_agent(&content);
    match &agent {
        Some(user) if user != "root" && user != "ALL" && !user.starts_with('%') => {
            findings.push(ok("sudoers rule", format!("exactly `{}`", sudoers_rule(user))))
        }
        _ => findings.push(fail(
            "sudoers rule",
            format!(
                "{} must hold exactly one rule `<agent> ALL=(root) NOPASSWD: {} rpc`, with the rpc's options \
                 of docs/server-install.md step 4 or alone",
                path.display(),
                HostPaths::HELPER
            ),
            format!(
                "run volce-lab-host setup again (it writes the file), or write the file of step 4 with visudo \
                 -cf {}",
                path.display()
            ),
        )),
    }
    if probe.sudoers_valid(path) {
        findings.push(ok("sudoers syntax", "visudo -cf accepts the drop-in"));
    } else {
        findings.push(fail(
            "sudoers syntax",
            "visudo -cf rejects the drop-in",
            format!("visudo -f {}", path.display()),
        ));
    }
    agent.filter(|user| user != "root")
}

fn check_agent(agent: &str, probe: &dyn DoctorProbe, findings: &mut Vec<Finding>) {
    match probe.groups_of(agent) {
        None => findings.push(fail(
            "agent account",
            format!("the sudoers rule names `{agent}`, which is not an account"),
            format!("useradd --create-home {agent}, or correct the rule"),
        )),
        Some(groups) if groups.iter().any(|g| PRIVILEGED_GROUPS.contains(&g.as_str())) => {
            let bad: Vec<&String> =
                groups.iter().filter(|g| PRIVILEGED_GROUPS.contains(&g.as_str())).collect();
            findings.push(fail(
                "agent account",
                format!("`{agent}` is in privileged group(s) {bad:?}: that bypasses every volce-lab rule"),
                format!("gpasswd -d {agent} <group> for each of them"),
            ))
        }
        Some(_) => findings
            .push(ok("agent account", format!("`{agent}` is in none of the groups {PRIVILEGED_GROUPS:?}"))),
    }
}

#[cfg(test)]
mod tests;

mod allowed_signers;
pub mod data;
pub mod edge;
pub mod engine;
mod finding;
pub mod loader;
mod plans;
mod policy;
pub use policy::{ImageRole, misfits};
mod signers;
pub mod ssh;
mod state;
mod system;
pub use finding::{Finding, Level, report};
use finding::{fail, ok, warn};
pub use system::{
    SystemProbe, load_policy_facts, read_app_networks, read_drift, read_engine_facts, read_store_health,
    run_doctor,
};
