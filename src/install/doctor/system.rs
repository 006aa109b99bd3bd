//! The doctor's contact with the real system: the probe the shipped binary
//! uses (docker and visudo through the bounded runner, the account database
//! through NSS, the helper's policy parser, the store's own health report)
//! and `volce-lab-host doctor` itself. Runs as root on the server; reads only.

use std::path::Path;

use super::{AppDrift, DoctorPaths, DoctorProbe, PolicyFacts, StoreHealth, diagnose, report};
use crate::docker::program::{DOCKER, docker_env};
use crate::host::HostPaths;

/// `volce-lab-host doctor` in the shipped binary: the fixed paths, the
/// system probe, the report on stdout, exit 0 only when all is well.
pub fn run_doctor() -> crate::exit::Exit {
    use crate::exit::Exit;
    if !nix::unistd::geteuid().is_root() {
        eprintln!("volce-lab-host: doctor must run as root (it reads the root-only policy and state)");
        return Exit::Usage;
    }
    let probe = SystemProbe { policy: load_policy_facts, store: read_store_health };
    let meta = crate::store::RequestMeta::new(crate::store::AuditOperation::Doctor, "root");
    let (text, healthy) = report(&diagnose(&DoctorPaths::installed(), &probe));
    print!("{text}");
    // The run leaves its audit row, after the checks (which read the store
    // as it was). Unlike other commands the report is printed even when
    // the row cannot be written: diagnosing a full disk is the doctor's job.
    let end = crate::store::RequestEnd {
        at: crate::control::Clock::now(&crate::host::clock::SystemClock),
        outcome: if healthy { crate::store::AuditOutcome::Ok } else { crate::store::AuditOutcome::Failed },
        code: None,
        plan_id: None,
        action: None,
    };
    if crate::host::request_row::record_request(&HostPaths::fixed(), meta, end).is_err() {
        println!("(this run could not be recorded in the audit trail: audit_unavailable)");
    }
    if healthy { Exit::Ok } else { Exit::Failure }
}

/// The policy's content through the helper's own parser
/// (`Policy::from_json`): every pinned reference and the approvers, or the
/// parser's refusal.
///
/// The bytes come from a plain `fs::read`, not from the helper's loader
/// (`host::paths::load_policy`), on purpose: the loader refuses the whole
/// file in one sentence when its owner or mode is wrong, while the doctor
/// reports those as findings of their own (`policy directory`, `policy
/// file`, each with its fix) and still says what is wrong with the content.
/// Known gaps against the loader: it also refuses a symlinked policy file or
/// directory and a file over 256 KiB, which pass here.
pub fn load_policy_facts(path: &Path) -> Result<PolicyFacts, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read it ({})", e.kind()))?;
    let policy = crate::control::policy::Policy::from_json(&bytes).map_err(|e| e.to_string())?;
    let mut images: Vec<String> =
        policy.catalog.values().map(|entry| entry.image.as_str().to_owned()).collect();
    let gateway = policy.nginx_image.as_str().to_owned();
    images.push(gateway.clone());
    let mut env_files: Vec<_> = policy.catalog.values().filter_map(|entry| entry.env_file.clone()).collect();
    env_files.sort();
    env_files.dedup();
    let has_data = policy.catalog.values().any(|entry| entry.data.is_some());
    let catalog_entries = policy.catalog.len();
    Ok(PolicyFacts {
        images,
        catalog_entries,
        gateway,
        approvers: policy.approvers,
        env_files,
        has_data,
        signed_approvals: policy.signed_approvals,
        edge: policy.edge.is_some(),
        backup: policy.backup,
    })
}

/// The store's own health report (one query, in `crate::store`): opened
/// read-only, never migrated (the doctor must not be the thing that upgrades
/// a database).
pub fn read_store_health(state_dir: &Path) -> Result<Option<StoreHealth>, String> {
    let database = HostPaths::database_in(state_dir);
    // Before any open: even a read-only one would read a torn log as if the
    // cut-off transactions never happened.
    if let Some(bytes) = crate::store::wal::torn_log(&database) {
        return Err(format!(
            "its write-ahead log state.db-wal is cut short ({bytes} bytes, not whole frames)"
        ));
    }
    crate::store::read_health(&database).map_err(|e| e.to_string())
}

/// The managed apps whose record and engine disagree: the records read
/// only (`crate::store::read_apps`), one engine snapshot, nothing changed.
pub fn read_drift(state_dir: &Path) -> Result<Vec<AppDrift>, String> {
    use crate::docker::Engine as _;
    let apps = crate::store::read_apps(&HostPaths::database_in(state_dir)).map_err(|e| e.to_string())?;
    if apps.is_empty() {
        return Ok(Vec::new());
    }
    let snapshot =
        crate::docker::client::DockerClient::new(state_dir).snapshot().map_err(|e| e.to_string())?;
    Ok(apps
        .values()
        .filter_map(|record| {
            let derived = crate::host::drift::derive(record, &snapshot);
            let (reason, drift) = (derived.drift?, derived.drift_view()?);
            Some(AppDrift { app: record.app.to_string(), reason, message: drift.message })
        })
        .collect())
}

/// The probe the shipped binary uses: docker and visudo through the bounded
/// runner, the account database through libc's NSS lookups. The policy's
/// content goes through the helper's own parser ([`load_policy_facts`]) and
/// the store's health is the store's own read-only report
/// ([`read_store_health`]); both are given as functions so tests can swap
/// them.
pub struct SystemProbe {
    pub policy: fn(&Path) -> Result<PolicyFacts, String>,
    pub store: fn(&Path) -> Result<Option<StoreHealth>, String>,
}

impl SystemProbe {
    fn run(program: &str, args: &[&str]) -> crate::exec::ProcessOutput {
        let mut spec = crate::exec::ProcessSpec::new(program, args.iter().copied());
        spec.timeout = std::time::Duration::from_secs(10);
        crate::exec::run_blocking(&spec)
    }

    /// `docker ARGS` with the engine's own environment, as the helper's
    /// docker calls get it (`docker_env`: the socket, root's config).
    fn docker(args: &[&str]) -> crate::exec::ProcessOutput {
        let mut spec = crate::exec::ProcessSpec::new(DOCKER, args.iter().copied());
        spec.env = docker_env();
        spec.timeout = std::time::Duration::from_secs(10);
        crate::exec::run_blocking(&spec)
    }
}

impl DoctorProbe for SystemProbe {
    fn docker_version(&self) -> Result<String, String> {
        let outcome = Self::docker(&["version", "--format", "{{.Server.Version}}"]);
        match outcome.execution.execution_status {
            crate::exec::ExecutionStatus::Ok => {
                Ok(String::from_utf8_lossy(&outcome.stdout).trim().to_owned())
            }
            status => Err(format!("docker version ended with {status:?}")),
        }
    }

    /// `docker image inspect --format '{{json .Config}}' -- REF`: fixed
    /// argv, the reference after `--`.
    fn image_config(&self, reference: &str) -> Option<super::ImageConfig> {
        let outcome = Self::docker(&["image", "inspect", "--format", "{{json .Config}}", "--", reference]);
        if outcome.execution.execution_status != crate::exec::ExecutionStatus::Ok {
            return None;
        }
        // An image present but with no readable config fits nothing.
        Some(serde_json::from_slice(&outcome.stdout).unwrap_or_default())
    }

    fn sudoers_valid(&self, path: &Path) -> bool {
        let Some(path) = path.to_str() else { return false };
        let outcome = Self::run("/usr/sbin/visudo", &["--check", "--quiet", "--file", path]);
        outcome.execution.execution_status == crate::exec::ExecutionStatus::Ok
    }

    fn groups_of(&self, user: &str) -> Option<Vec<String>> {
        use nix::unistd::{Group, User, getgrouplist};
        let account = User::from_name(user).ok()??;
        let name = std::ffi::CString::new(user).ok()?;
        let gids = getgrouplist(&name, account.gid).ok()?;
        Some(
            gids.into_iter()
                .filter_map(|gid| Group::from_gid(gid).ok().flatten())
                .map(|group| group.name)
                .collect(),
        )
    }

    fn policy(&self, path: &Path) -> Result<PolicyFacts, String> {
        (self.policy)(path)
    }

    fn store(&self, state_dir: &Path) -> Result<Option<StoreHealth>, String> {
        (self.store)(state_dir)
    }

    fn drift(&self, state_dir: &Path) -> Result<Vec<AppDrift>, String> {
        read_drift(state_dir)
    }

    fn data(&self, state_dir: &Path) -> Option<Result<Vec<super::data::DataFacts>, String>> {
        Some(super::data::read_data(state_dir))
    }

    fn stopped_claimer(&self, state_dir: &Path, plan: &str) -> Option<crate::host::StoppedClaimer> {
        use crate::host::Liveness as _;
        let claims = crate::store::read_claims(&HostPaths::database_in(state_dir)).ok()?;
        let (_, _, claim) = claims.into_iter().find(|(id, _, _)| id.as_str() == plan)?;
        crate::host::ProcLiveness.stopped(&claim)
    }

    fn leftovers(&self, state_dir: &Path, plan: &str) -> Option<Result<Vec<String>, String>> {
        let id = crate::vocab::PlanId::parse(plan).ok()?;
        let engine = crate::docker::client::DockerClient::new(state_dir);
        Some(crate::host::leftovers::find(&engine, &id).map(|left| left.lines()).map_err(|e| e.to_string()))
    }

    fn system_log(&self) -> Option<bool> {
        Some(crate::host::alert::listening(Path::new(crate::store::DEV_LOG)))
    }
    fn ssh(&self) -> Option<&dyn super::ssh::SshProbe> {
        Some(self)
    }

    fn engine(&self) -> Option<super::engine::EngineFacts> {
        Some(read_engine_facts())
    }

    fn app_networks(&self, state_dir: &Path) -> Result<Vec<super::engine::AppNetwork>, String> {
        read_app_networks(state_dir)
    }

    fn edge(&self, state_dir: &Path) -> Option<Result<super::edge::EdgeFacts, String>> {
        Some(super::edge::read_edge(state_dir))
    }
}

/// Where dockerd writes its pid unless told otherwise (`--pidfile`).
const DOCKERD_PIDFILE: &str = "/var/run/docker.pid";
const DOCKERD_CONFIG: &str = "/etc/docker/daemon.json";
/// A daemon.json larger than this is not read (it is a few lines).
const CONFIG_LIMIT: u64 = 256 * 1024;

/// `docker info`'s warnings through the bounded runner, and dockerd's own
/// command line and configuration file, read from /proc and /etc.
pub fn read_engine_facts() -> super::engine::EngineFacts {
    let outcome = SystemProbe::docker(&["info", "--format", "{{json .Warnings}}"]);
    let warnings = match outcome.execution.execution_status {
        crate::exec::ExecutionStatus::Ok => serde_json::from_slice::<Option<Vec<String>>>(&outcome.stdout)
            .map(Option::unwrap_or_default)
            .map_err(|_| "docker info gave an unparsable answer".to_owned()),
        status => Err(format!("docker info ended with {status:?}")),
    };
    let daemon_args = std::fs::read_to_string(DOCKERD_PIDFILE)
        .ok()
        .and_then(|pid| pid.trim().parse::<u32>().ok())
        .and_then(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).ok())
        .filter(|cmdline| !cmdline.is_empty())
        .map(|cmdline| {
            cmdline
                .split(|b| *b == 0)
                .skip(1)
                .filter(|word| !word.is_empty())
                .map(|word| String::from_utf8_lossy(word).into_owned())
                .collect::<Vec<String>>()
        });
    let config_path = daemon_args
        .as_deref()
        .and_then(|args| {
            let at = args.iter().position(|a| a == "--config-file")?;
            args.get(at + 1).cloned()
        })
        .or_else(|| {
            daemon_args.as_deref()?.iter().find_map(|a| a.strip_prefix("--config-file=").map(str::to_owned))
        })
        .unwrap_or_else(|| DOCKERD_CONFIG.to_owned());
    let daemon_config = std::fs::File::open(&config_path).ok().and_then(|file| {
        use std::io::Read as _;
        let mut text = String::new();
        file.take(CONFIG_LIMIT).read_to_string(&mut text).ok()?;
        Some((std::path::PathBuf::from(&config_path), text))
    });
    // The old engine's mitigation (`engine::check_engine`): fixed argv, the
    // rules as iptables prints them; unknown when it cannot be read.
    let raw = SystemProbe::run("/usr/sbin/iptables", &["-t", "raw", "-S", "PREROUTING"]);
    let loopback_guard = (raw.execution.execution_status == crate::exec::ExecutionStatus::Ok)
        .then(|| super::engine::has_loopback_guard(&String::from_utf8_lossy(&raw.stdout)));
    super::engine::EngineFacts { warnings, daemon_args, daemon_config, loopback_guard }
}

/// The app and edge network of every recorded app, with their options;
/// a network missing, or not carrying the app's label, is not listed (it is
/// not the app's: drift and remove_app deal with that).
pub fn read_app_networks(state_dir: &Path) -> Result<Vec<super::engine::AppNetwork>, String> {
    let apps = crate::store::read_apps(&HostPaths::database_in(state_dir)).map_err(|e| e.to_string())?;
    let engine = crate::docker::client::DockerClient::new(state_dir);
    let mut networks = Vec::new();
    for record in apps.values() {
        let app = &record.app;
        let names = app.names();
        for (name, edge) in [(&names.network, false), (&names.edge_network, true)] {
            let Some(found) = engine.network_options(name).map_err(|e| e.to_string())? else { continue };
            if found.labels.get(crate::vocab::LABEL_APP).map(String::as_str) != Some(app.as_str()) {
                continue;
            }
            networks.push(super::engine::AppNetwork {
                app: record.app.to_string(),
                name: name.clone(),
                edge,
                options: found.options,
            });
        }
    }
    Ok(networks)
}

impl super::ssh::SshProbe for SystemProbe {
    fn account(&self, user: &str) -> Option<super::ssh::Account> {
        let account = nix::unistd::User::from_name(user).ok()??;
        Some(super::ssh::Account { uid: account.uid.as_raw(), home: account.dir, shell: account.shell })
    }

    /// `sudo -l -U USER` as root: the entries after "may run the following
    /// commands", one per line.
    fn sudo_rules(&self, user: &str) -> Result<Vec<String>, String> {
        let text = self.sudo_listing(user)?;
        if text.contains("is not allowed to run sudo") {
            return Ok(Vec::new());
        }
        Ok(super::loader::parse_listing(&text).rules)
    }

    /// The names in `/etc/passwd` (accounts from LDAP or sssd are not
    /// listed there, and not checked).
    fn accounts(&self) -> Vec<String> {
        let text = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        text.lines()
            .filter_map(|line| line.split(':').next())
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn sudo_listing(&self, user: &str) -> Result<String, String> {
        let outcome = Self::run(HostPaths::SUDO, &["-n", "-l", "-U", user]);
        if outcome.execution.execution_status != crate::exec::ExecutionStatus::Ok {
            return Err(format!("sudo -l -U {user} failed ({:?})", outcome.execution.execution_status));
        }
        Ok(String::from_utf8_lossy(&outcome.stdout).into_owned())
    }
}
