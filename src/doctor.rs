//! `volce-lab-host doctor`: a read-only check of the server installation,
//! one finding per line, each failure with the fix. Runs as root on the
//! server (it reads the root-only policy and state); changes nothing.
//!
//! The facts that need the outside world (docker, visudo, the account
//! database, the policy parser and the store) come through [`Probe`], so the
//! rules can be tested on temporary files with a fake probe, and for real on
//! an installation the end-to-end suite builds. Owner and mode of every
//! installed file are checked here, on the path, one finding each.

use std::fmt;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

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
    pub fn installed() -> DoctorPaths {
        DoctorPaths {
            helper_link: PathBuf::from(crate::inspect::transport::HOST_HELPER),
            policy: PathBuf::from("/etc/volce-lab/policy.json"),
            state_dir: PathBuf::from("/var/lib/volce-lab"),
            sudoers: PathBuf::from("/etc/sudoers.d/volce-lab"),
            owner_uid: 0,
        }
    }
}

/// What the doctor needs of a policy the helper's parser accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyFacts {
    /// Every pinned reference: the catalog's, then the gateway's.
    pub images: Vec<String>,
    /// The gateway's (`nginx_image`), also the last of `images`.
    pub gateway: String,
    pub approvers: Vec<String>,
}

/// What doctor reads of a local image (`docker image inspect`'s
/// `Config`) to hold it against the container volce-lab starts from it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ImageConfig {
    #[serde(default)]
    pub user: String,
    #[serde(default, deserialize_with = "crate::docker::cli::null_as_empty")]
    pub cmd: Vec<String>,
    #[serde(default, deserialize_with = "crate::docker::cli::null_as_empty")]
    pub entrypoint: Vec<String>,
}

/// What the doctor learns from outside its own file checks.
pub trait Probe {
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
    pub reason: crate::host::drift::DriftReason,
}

/// What the store says about itself (its home is `crate::store`).
pub use crate::store::StoreHealth;

/// How a finding weighs. Only a failure makes doctor exit non-zero; a
/// warning names what this server cannot guarantee (an old engine, an old
/// app network) or what will bite later (an image not pulled yet, an
/// image built for another user), without stopping the helper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub level: Level,
    pub subject: String,
    pub detail: String,
    pub fix: Option<String>,
}

impl Finding {
    /// Whether this finding fails the run (exit status, `problem(s) found`).
    pub fn failed(&self) -> bool {
        self.level == Level::Fail
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = match self.level {
            Level::Ok => "ok  ",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        };
        write!(f, "{mark} {}: {}", self.subject, self.detail)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n     fix: {fix}")?;
        }
        Ok(())
    }
}

fn ok(subject: impl Into<String>, detail: impl Into<String>) -> Finding {
    Finding { level: Level::Ok, subject: subject.into(), detail: detail.into(), fix: None }
}

fn fail(subject: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Finding {
    Finding { level: Level::Fail, subject: subject.into(), detail: detail.into(), fix: Some(fix.into()) }
}

fn warn(subject: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Finding {
    Finding { level: Level::Warn, subject: subject.into(), detail: detail.into(), fix: Some(fix.into()) }
}

/// The one sudoers line the agent's account may have, for `user`.
pub fn sudoers_rule(user: &str) -> String {
    format!("{user} ALL=(root) NOPASSWD: {} rpc", crate::inspect::transport::HOST_HELPER)
}

/// Runs every check in a fixed order.
pub fn diagnose(paths: &DoctorPaths, probe: &dyn Probe) -> Vec<Finding> {
    let mut findings = Vec::new();
    check_helper(paths, &mut findings);
    let agent = check_sudoers(paths, probe, &mut findings);
    if let Some(agent) = &agent {
        check_agent(agent, probe, &mut findings);
        if let Some(ssh) = probe.ssh() {
            ssh::check_ssh(agent, paths.owner_uid, ssh, &mut findings);
        }
    }
    check_policy(paths, probe, agent.as_deref(), &mut findings);
    check_state(paths, probe, &mut findings);
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

/// Checks that `path`'s metadata (not following links) is owned by the
/// installation owner and not writable by group or others.
fn protected(paths: &DoctorPaths, subject: &str, path: &Path, fix_mode: &str) -> Finding {
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
            "apt-get install --reinstall volce-lab (installed by hand: \
             ln -sfn /usr/local/lib/volce-lab/volce-lab /usr/local/bin/volce-lab-host)",
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

fn check_sudoers(paths: &DoctorPaths, probe: &dyn Probe, findings: &mut Vec<Finding>) -> Option<String> {
    let path = &paths.sudoers;
    let finding = protected(paths, "sudoers drop-in", path, "0440");
    let present = !finding.detail.ends_with("is missing");
    findings.push(finding);
    if !present {
        return None;
    }
    let content = std::fs::read_to_string(path).unwrap_or_default();
    let rules: Vec<&str> =
        content.lines().map(str::trim).filter(|line| !line.is_empty() && !line.starts_with('#')).collect();
    let agent = match rules.as_slice() {
        [rule] => {
            rule.split_whitespace().next().filter(|user| *rule == sudoers_rule(user)).map(str::to_owned)
        }
        _ => None,
    };
    match &agent {
        Some(user) if user != "root" && user != "ALL" && !user.starts_with('%') => {
            findings.push(ok("sudoers rule", format!("exactly `{}`", sudoers_rule(user))))
        }
        _ => findings.push(fail(
            "sudoers rule",
            format!(
                "{} must hold exactly one rule `<agent> ALL=(root) NOPASSWD: {} rpc`",
                path.display(),
                crate::inspect::transport::HOST_HELPER
            ),
            format!("rewrite it with that one line, check it with visudo -cf {}", path.display()),
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

/// Groups whose members can become root or reach the Docker socket on a
/// Debian-like system: membership bypasses the sudoers rule entirely.
pub const PRIVILEGED_GROUPS: [&str; 8] =
    ["docker", "sudo", "root", "wheel", "admin", "lxd", "disk", "shadow"];

fn check_agent(agent: &str, probe: &dyn Probe, findings: &mut Vec<Finding>) {
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

fn check_policy(paths: &DoctorPaths, probe: &dyn Probe, agent: Option<&str>, findings: &mut Vec<Finding>) {
    if let Some(dir) = paths.policy.parent() {
        findings.push(protected(paths, "policy directory", dir, "0755"));
    }
    let file = protected(paths, "policy file", &paths.policy, "0600");
    let present = !file.detail.ends_with("is missing");
    findings.push(file);
    if !present {
        return;
    }
    match probe.policy(&paths.policy) {
        Err(why) => findings.push(fail(
            "policy content",
            format!("refused: {why}"),
            "correct /etc/volce-lab/policy.json (see /usr/share/doc/volce-lab/policy.example.jsonc)",
        )),
        Ok(PolicyFacts { images, gateway, approvers }) => {
            findings.push(ok("policy content", format!("valid, {} pinned image(s)", images.len())));
            check_approvers(&approvers, agent, probe, findings);
            for image in &images {
                let role = if *image == gateway { ImageRole::Gateway } else { ImageRole::App };
                findings.push(check_image(image, role, probe));
            }
        }
    }
}

/// Which container a pinned image becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ImageRole {
    /// A catalog image: run as `--user 1000:1000`, its own command.
    App,
    /// `nginx_image`: run as `--user 101:101`, nginx in the foreground.
    Gateway,
}

/// A pinned image held against the container volce-lab starts from it
/// (HOST-SETUP.md, "The catalog's images"). Only warnings: deploy pulls by
/// digest, so an image not present yet is normal on a fresh server, and
/// whether a mismatched image still works only a deploy can tell.
///
/// It fits when its `User` is the uid (or uid:gid) volce-lab runs it as, so
/// the files the image made for its user are that user's in the
/// container, and its default command starts something: for the gateway,
/// nginx in the foreground (`daemon off;`), since volce-lab gives it no
/// command.
fn check_image(image: &str, role: ImageRole, probe: &dyn Probe) -> Finding {
    let shown = crate::text::for_terminal(image);
    let Some(config) = probe.image_config(image) else {
        return warn(
            "image",
            format!("{shown} is not in the local engine (deploy pulls it by digest)"),
            format!("docker pull {shown}, or check the registry serves it"),
        );
    };
    let (uid, runs_as) = match role {
        ImageRole::App => ("1000", "1000:1000"),
        ImageRole::Gateway => ("101", "101:101"),
    };
    let command: Vec<&str> = config.entrypoint.iter().chain(&config.cmd).map(String::as_str).collect();
    let user = crate::text::for_terminal(&config.user);
    let mut misfits = Vec::new();
    if config.user != uid && config.user != runs_as {
        let built_for =
            if config.user.is_empty() { "root (no USER)".to_owned() } else { format!("`{user}`") };
        misfits.push(format!("its USER is {built_for}, but volce-lab runs it as {runs_as}"));
    }
    match role {
        ImageRole::App if command.is_empty() => {
            misfits.push("it has no CMD or ENTRYPOINT, and volce-lab gives it no command".to_owned())
        }
        ImageRole::Gateway
            if !command.iter().any(|word| Path::new(word).file_name().is_some_and(|n| n == "nginx"))
                || !command.contains(&"daemon off;") =>
        {
            misfits.push(format!(
                "its command {} does not start nginx in the foreground (nginx -g 'daemon off;')",
                crate::text::for_terminal(&format!("{command:?}"))
            ))
        }
        _ => {}
    }
    if misfits.is_empty() {
        ok("image", format!("{shown} is present, runs as {runs_as} with its own command"))
    } else {
        warn(
            "image",
            format!("{shown} does not fit the {} template: {}", role.name(), misfits.join("; ")),
            "rebuild it with USER and CMD as HOST-SETUP.md's images section says, then pin the new digest",
        )
    }
}

impl ImageRole {
    fn name(self) -> &'static str {
        match self {
            ImageRole::App => "app",
            ImageRole::Gateway => "gateway",
        }
    }
}

/// An approver must be a person's account that exists, and never the
/// agent's: the parser cannot know either (accounts come and go, and the
/// agent is named only in sudoers), so the doctor checks both.
fn check_approvers(
    approvers: &[String],
    agent: Option<&str>,
    probe: &dyn Probe,
    findings: &mut Vec<Finding>,
) {
    for approver in approvers {
        if Some(approver.as_str()) == agent {
            findings.push(fail(
                "approver",
                format!("`{approver}` is the agent's own account: the agent could approve its own plans"),
                format!("remove `{approver}` from approvers in /etc/volce-lab/policy.json"),
            ));
        } else if probe.groups_of(approver).is_none() {
            findings.push(fail(
                "approver",
                format!("`{approver}` is not an account on this server: nobody can approve as it"),
                format!(
                    "create the operator's account (useradd --create-home {approver}) or correct approvers"
                ),
            ));
        } else {
            findings.push(ok("approver", format!("`{approver}` is an account and not the agent's")));
        }
    }
}

fn check_state(paths: &DoctorPaths, probe: &dyn Probe, findings: &mut Vec<Finding>) {
    let dir = &paths.state_dir;
    match std::fs::symlink_metadata(dir) {
        Ok(meta)
            if meta.is_dir() && meta.uid() == paths.owner_uid && meta.permissions().mode() & 0o077 == 0 =>
        {
            findings.push(ok(
                "state directory",
                format!("{} owned by uid {}, mode 0700", dir.display(), meta.uid()),
            ))
        }
        Ok(meta) if meta.is_dir() => findings.push(fail(
            "state directory",
            format!(
                "{} is owned by uid {} with mode {:o}; it must be root's alone",
                dir.display(),
                meta.uid(),
                meta.permissions().mode() & 0o7777
            ),
            format!("chown root:root {0} && chmod 0700 {0}", dir.display()),
        )),
        _ => {
            findings.push(fail(
                "state directory",
                format!("{} is missing or not a directory", dir.display()),
                "it is created by the first `volce-lab-host rpc`; check the helper runs",
            ));
            return;
        }
    }
    /// What a damaged database needs: the helper refuses it
    /// (`state_corrupt`) until then. HOST-SETUP.md says how the backup is kept.
    const RESTORE: &str = "the helper refuses it (state_corrupt); keep a copy of /var/lib/volce-lab as \
         evidence, then restore state.db from the backup HOST-SETUP.md has you keep \
         (made with `sqlite3 state.db .backup`) and delete state.db-wal and state.db-shm";
    match probe.store(dir) {
        Err(why) => findings.push(fail("database", format!("cannot be opened: {why}"), RESTORE)),
        Ok(None) => findings.push(ok("database", "not created yet: the first rpc creates it")),
        Ok(Some(health)) => {
            if health.integrity_ok {
                findings.push(ok("database", "PRAGMA integrity_check: ok"));
            } else {
                findings.push(fail("database", "PRAGMA integrity_check reports damage", RESTORE));
            }
            if health.schema_version == health.expected_schema_version {
                findings.push(ok("schema", format!("version {}", health.schema_version)));
            } else {
                findings.push(fail(
                    "schema",
                    format!(
                        "version {} but this binary expects {}",
                        health.schema_version, health.expected_schema_version
                    ),
                    "install the volce-lab version that wrote this database, or run any rpc to migrate an older one",
                ));
            }
            match &health.audit_break {
                None => findings.push(ok(
                    "audit chain",
                    format!(
                        "{} rows chain intact (check a kept head: volce-lab-host audit verify --from HASH)",
                        health.audit_rows
                    ),
                )),
                Some(broken) => {
                    let (seq, at) = broken.row();
                    findings.push(fail(
                        "audit chain",
                        format!("broken at row seq {seq} ({})", crate::text::rfc3339_seconds(at)),
                        "volce-lab-host audit verify names what changed; keep state.db as evidence (HOST-SETUP.md)",
                    ));
                }
            }
            if health.stuck_plans.is_empty() {
                findings.push(ok("plans", "none executing or needing inspection"));
            }
            check_drift(dir, probe, findings);
            for (plan, state) in health.stuck_plans {
                findings.push(plans::stuck_plan(dir, probe, plan.as_str(), state.as_str()));
            }
        }
    }
}

/// Each managed app held against the engine: drift is a finding with the
/// reviewed change that settles it (the agent plans it, an approver approves).
fn check_drift(dir: &Path, probe: &dyn Probe, findings: &mut Vec<Finding>) {
    match probe.drift(dir) {
        Err(why) => findings.push(fail(
            "apps",
            format!("cannot be held against the engine: {why}"),
            "see the docker finding; volce-lab-host list shows the records meanwhile",
        )),
        Ok(drifted) if drifted.is_empty() => findings.push(ok("apps", "every managed app is as recorded")),
        Ok(drifted) => {
            for AppDrift { app, reason } in drifted {
                findings.push(fail(
                    format!("app {}", crate::text::for_terminal(&app)),
                    format!("drifted ({}): {}", reason.as_str(), reason.sentence()),
                    format!(
                        "{}; the agent plans it (service_plan), you approve it (volce-lab-host list, show, approve)",
                        reason.fix()
                    ),
                ));
            }
        }
    }
}

/// Prints the findings; exit 0 when none is a failure (warnings pass).
pub fn report(findings: &[Finding]) -> (String, bool) {
    let mut text = String::new();
    for finding in findings {
        text.push_str(&finding.to_string());
        text.push('\n');
    }
    let failures = findings.iter().filter(|f| f.failed()).count();
    let warnings = findings.iter().filter(|f| f.level == Level::Warn).count();
    if warnings > 0 {
        text.push_str(&format!(
            "{warnings} warning(s): the WARN lines above do not fail the check; read their fix\n"
        ));
    }
    if failures == 0 {
        text.push_str("all checks passed\n");
    } else {
        text.push_str(&format!("{failures} problem(s) found\n"));
    }
    (text, failures == 0)
}

#[cfg(test)]
mod tests;

pub mod engine;
mod plans;
pub mod ssh;
mod system;
pub use system::{
    SystemProbe, cli, load_policy_facts, read_app_networks, read_drift, read_engine_facts, read_store_health,
};
