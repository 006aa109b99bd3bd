//! The HTTPS edge through the docker CLI (issue 39): `edge enable` starts
//! it, `edge disable` removes it, an expose or unexpose plan changes what
//! it routes ([`DockerClient::edge_apply`]). Runs as root inside the host
//! helper.
//!
//! Security invariants enforced here:
//! - the edge is the one container named [`EDGE_CONTAINER`] carrying
//!   `io.volce-lab.role=edge`; a container or network of that name without
//!   the label is someone else's: refused, never touched;
//! - it runs hardened like a gateway (read-only root, no capabilities,
//!   limits), as [`EDGE_UID`], with its config and certificate copies
//!   mounted read-only, publishing only the policy's two addresses and
//!   the probe on 127.0.0.1;
//! - an edge change that nginx refuses, or after which a name does not
//!   reach its app, is undone (the old config back, reloaded, the new
//!   network left, the new copies deleted) and reported rolled back only
//!   once the old config was reloaded.

use std::net::SocketAddr;
use std::path::Path;

use super::argv::{argv, edge_network, hardening};
use super::parse::first_line;
use super::{
    DockerClient, GATEWAY_CONFIG_PATH, NGINX, NGINX_TEST, PULL, QUICK, Runner, STOP, STOP_GRACE_SECONDS,
};
use crate::docker::EngineError;
use crate::docker::edge_files::{self, certs_dir, edge_dir};
use crate::docker::gateway_file::{backup, open_managed_config, read_bounded, rewrite, write_new_config};
use crate::docker::host_probe::{address_free, http_get};
use crate::nginx::edge::{ACME_WEBROOT, CERT_DIR, cert_files, uses_certificate_of};
use crate::vocab::{
    AcmeError, AcmeFailure, AcmeOrder, AcmeSpec, ContainerId, ContainerLimits, EDGE_CONTAINER,
    EDGE_HTTP_PORT, EDGE_HTTPS_PORT, EDGE_NETWORK, EDGE_PROBE_PORT, EDGE_ROLE, EDGE_UID, EdgeChange,
    EdgeConfig, EdgeNameFacts, HealthPath, HttpsAnswer, ImageRef, LABEL_ROLE, Renewal, ServerName,
};

/// What `edge enable` starts the edge with.
pub struct EdgeSetup<'a> {
    pub image: &'a ImageRef,
    pub config: &'a EdgeConfig,
    pub limits: &'a ContainerLimits,
    /// The whole nginx.conf, rendered for the apps exposed now.
    pub nginx_conf: &'a str,
}

/// The edge as the engine has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeState {
    pub id: ContainerId,
    pub running: bool,
    /// The networks it is attached to, sorted.
    pub networks: Vec<String>,
    /// Where its probe answers on 127.0.0.1, while it runs.
    pub probe_port: Option<u16>,
}

/// The label filter that finds the edge's container and network.
fn role_filter() -> String {
    format!("label={LABEL_ROLE}={EDGE_ROLE}")
}

impl<R: Runner> DockerClient<R> {
    /// The edge's directory on the host.
    pub fn edge_dir(&self) -> std::path::PathBuf {
        edge_dir(&self.state_dir)
    }

    /// The edge, if there is one of ours; a container of its name that is
    /// not ours is refused.
    pub fn edge_state(&self) -> Result<Option<EdgeState>, EngineError> {
        let name = format!("name=^{EDGE_CONTAINER}$");
        let ids = self.call("find the edge", argv(&["ps", "-aq", "--no-trunc", "--filter", &name]), QUICK)?;
        let Some(id) = ContainerId::parse(first_line(&ids)) else { return Ok(None) };
        let template = format!(
            "{{{{index .Config.Labels \"{LABEL_ROLE}\"}}}}\t{{{{.State.Running}}}}\t{{{{range $k, $v := \
             .NetworkSettings.Networks}}}}{{{{$k}}}} {{{{end}}}}"
        );
        let out =
            self.call("inspect the edge", argv(&["inspect", "--format", &template, id.as_str()]), QUICK)?;
        let line = String::from_utf8_lossy(first_line(&out).as_bytes()).into_owned();
        let mut fields = line.split('\t');
        if fields.next() != Some(EDGE_ROLE) {
            return Err(EngineError::Host {
                step: "check the edge's name: a container not ours is named vl_edge",
            });
        }
        let running = fields.next() == Some("true");
        let mut networks: Vec<String> =
            fields.next().unwrap_or("").split_whitespace().map(str::to_owned).collect();
        networks.sort();
        let probe_port = if running { self.probe_port(&id)? } else { None };
        Ok(Some(EdgeState { id, running, networks, probe_port }))
    }

    fn probe_port(&self, id: &ContainerId) -> Result<Option<u16>, EngineError> {
        let port = format!("{EDGE_PROBE_PORT}/tcp");
        let out = self.call("find the edge's probe", argv(&["port", id.as_str(), &port]), QUICK)?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .filter_map(|l| l.trim().strip_prefix("127.0.0.1:"))
            .find_map(|p| p.parse().ok()))
    }

    /// Starts the edge: its directory and config, its network, a tested
    /// config, its container; removes what it made when a step fails.
    pub fn edge_enable(&self, setup: &EdgeSetup<'_>) -> Result<EdgeState, EngineError> {
        for address in [setup.config.http, setup.config.https] {
            if !address_free(address) {
                return Err(EngineError::AddressTaken { address });
            }
        }
        let made = self.edge_enable_steps(setup);
        if made.is_err() {
            let _ = self.edge_remove();
        }
        made
    }

    fn edge_enable_steps(&self, setup: &EdgeSetup<'_>) -> Result<EdgeState, EngineError> {
        // By digest, as a deploy pulls the gateway: every container of ours
        // is created with `--pull never`.
        self.call("pull the edge's image", argv(&["pull", "--quiet", setup.image.as_str()]), PULL)?;
        let dir = self.edge_dir();
        edge_files::make_dirs(&dir)?;
        let _ = std::fs::remove_file(dir.join("nginx.conf"));
        let conf = write_new_config(&dir, setup.nginx_conf)?;
        let labels = argv(&["--label", &format!("{LABEL_ROLE}={EDGE_ROLE}")]);
        self.call("create the edge network", edge_network(labels.clone(), EDGE_NETWORK), QUICK)?;
        let mounts = mounts(&conf, &dir);
        let user = format!("{EDGE_UID}:{EDGE_UID}");
        let mut args = argv(&["run", "--rm", "--name", "vl_edge-check"]);
        args.extend(labels.clone());
        args.extend(hardening(setup.limits, &user, "no"));
        args.extend(mounts.clone());
        args.extend(argv(&["--network", "none", setup.image.as_str(), NGINX, "-t"]));
        self.nginx_test("test the edge's config", args, NGINX_TEST)?;
        let mut args = argv(&["create", "--name", EDGE_CONTAINER]);
        args.extend(labels);
        args.extend(hardening(setup.limits, &user, "unless-stopped"));
        args.extend(argv(&["--network", EDGE_NETWORK]));
        for (address, port) in [(setup.config.http, EDGE_HTTP_PORT), (setup.config.https, EDGE_HTTPS_PORT)] {
            args.extend(argv(&["--publish", &publish(address, port)]));
        }
        args.extend(argv(&["--publish", &format!("127.0.0.1::{EDGE_PROBE_PORT}")]));
        args.extend(mounts);
        args.push(setup.image.as_str().to_owned());
        let out = self.call("create the edge", args, QUICK)?;
        let id = ContainerId::parse(first_line(&out))
            .ok_or(EngineError::Unparsable { step: "create the edge" })?;
        self.call("start the edge", argv(&["start", id.as_str()]), QUICK)?;
        let state = self.edge_state()?.ok_or(EngineError::Unparsable { step: "find the edge" })?;
        match state.probe_port {
            // Any answer from nginx (the default server's 404) will do.
            Some(port) if self.answers(port, "volce-lab-edge-probe", &HealthPath::default(), |_| true) => {
                Ok(state)
            }
            _ => Err(EngineError::HealthCheckFailed),
        }
    }

    /// Starts a stopped edge of ours and sees it answer.
    pub fn edge_start(&self, id: &ContainerId) -> Result<EdgeState, EngineError> {
        self.call("start the edge", argv(&["start", id.as_str()]), QUICK)?;
        let state = self.edge_state()?.ok_or(EngineError::EdgeNotRunning)?;
        match state.probe_port {
            Some(port) if self.answers(port, "volce-lab-edge-probe", &HealthPath::default(), |_| true) => {
                Ok(state)
            }
            _ => Err(EngineError::HealthCheckFailed),
        }
    }

    /// Removes the edge: its container and network (ours only) and its
    /// directory. Whether anything routes through it is the caller's.
    pub fn edge_remove(&self) -> Result<(), EngineError> {
        if let Some(state) = self.edge_state()? {
            let id = state.id.as_str();
            self.call("disable the edge's restart", argv(&["update", "--restart=no", id]), QUICK)?;
            self.call("stop the edge", argv(&["stop", "--time", STOP_GRACE_SECONDS, id]), STOP)?;
            self.call("remove the edge", argv(&["rm", id]), QUICK)?;
        }
        let filter = role_filter();
        let networks = self.call(
            "find the edge network",
            argv(&["network", "ls", "-q", "--no-trunc", "--filter", &filter]),
            QUICK,
        )?;
        for id in String::from_utf8_lossy(&networks).lines().filter(|l| crate::text::is_lower_hex(l, 64)) {
            self.call("remove the edge network", argv(&["network", "rm", id]), QUICK)?;
        }
        edge_files::remove_files(&self.edge_dir())
    }

    /// An expose or unexpose: see [`crate::docker::Engine::edge_apply`].
    pub(super) fn edge_apply_steps(&self, change: &EdgeChange) -> Result<(), EngineError> {
        let state = self.edge_state()?.filter(|s| s.running).ok_or(EngineError::EdgeNotRunning)?;
        let dir = self.edge_dir();
        let certs = certs_dir(&dir);
        let mut file = open_managed_config(&dir)?;
        let old = String::from_utf8(read_bounded(&mut file)?).map_err(|_| EngineError::ManagedFileChanged)?;
        if let Some(order) = &change.obtain {
            // First, while the edge serves as before: nothing of it has
            // changed when the CA refuses.
            self.obtain(&dir, order)?;
        }
        for exposed in &change.install {
            edge_files::install(&certs, exposed)?;
        }
        let joined = match &change.connect {
            Some(network) if !state.networks.contains(network) => {
                self.call(
                    "connect the edge",
                    argv(&["network", "connect", network, state.id.as_str()]),
                    QUICK,
                )?;
                Some(network)
            }
            _ => None,
        };
        backup(&dir, &old)?;
        rewrite(&mut file, &change.config)?;
        let applied = self.edge_reload(&state.id).and_then(|()| {
            let port = self.probe_port(&state.id)?.ok_or(EngineError::EdgeNotRunning)?;
            let all = change.probe.iter().all(|name| {
                self.answers(port, name.as_str(), &change.health_path, |status| (200..400).contains(&status))
            });
            // A reload is asynchronous: the names taken off answer the
            // default server's 404 once the new workers serve alone.
            let gone = change
                .remove
                .iter()
                .all(|name| self.answers(port, name.as_str(), &change.health_path, |status| status == 404));
            if all && gone { Ok(()) } else { Err(EngineError::HealthCheckFailed) }
        });
        if let Err(cause) = applied {
            return Err(self.edge_undo(change, &state.id, &mut file, &old, joined, cause));
        }
        if let Some(network) = &change.disconnect {
            self.call(
                "disconnect the edge",
                argv(&["network", "disconnect", network, state.id.as_str()]),
                QUICK,
            )?;
        }
        for name in &change.remove {
            edge_files::remove(&certs, name)?;
        }
        Ok(())
    }

    /// The old config back and reloaded, the network joined for this change
    /// left, the copies installed for it removed: rolled back when all of
    /// that held, else the cause as it was (the operator looks).
    fn edge_undo(
        &self,
        change: &EdgeChange,
        id: &ContainerId,
        file: &mut std::fs::File,
        old: &str,
        joined: Option<&String>,
        cause: EngineError,
    ) -> EngineError {
        let restored = rewrite(file, old).is_ok() && self.edge_reload(id).is_ok();
        let left = joined.is_none_or(|network| {
            self.call("disconnect the edge", argv(&["network", "disconnect", network, id.as_str()]), QUICK)
                .is_ok()
        });
        let certs = certs_dir(&self.edge_dir());
        let removed =
            copies_to_undo(change, old).into_iter().all(|name| edge_files::remove(&certs, name).is_ok());
        if restored && left && removed && !cause.outcome_unknown() {
            EngineError::RolledBack { cause: Box::new(cause), app_log: None }
        } else {
            cause
        }
    }

    /// One certificate from the policy's ACME directory for the order's
    /// names (lego answering the challenges through the edge's webroot),
    /// and the edge's copies of it for each name.
    fn obtain(&self, dir: &Path, order: &AcmeOrder) -> Result<(), EngineError> {
        let spec = acme_spec(dir, order);
        // The helper runs with umask 077; lego's challenge files must be
        // readable by the edge's uid through the webroot's mount.
        let before = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
        let obtained = crate::docker::acme::obtain(&spec);
        nix::sys::stat::umask(before);
        let certificate = remembered(dir, &order.names, obtained)?;
        for name in &order.names {
            edge_files::install_acme(&certs_dir(dir), name, &certificate.files)?;
        }
        Ok(())
    }

    /// `edge renew`: the certificate of `order`'s names renewed when it has
    /// fewer than `days` left, and then the edge's copies replaced and the
    /// edge reloaded. Whether it was renewed.
    pub fn edge_renew(&self, order: &AcmeOrder, days: u32) -> Result<bool, EngineError> {
        let dir = self.edge_dir();
        let spec = acme_spec(&dir, order);
        let before = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o022));
        let renewed = crate::docker::acme::renew(&spec, days);
        nix::sys::stat::umask(before);
        match remembered(&dir, &order.names, renewed)? {
            Renewal::NotDue { .. } => Ok(false),
            Renewal::Renewed { certificate } => {
                for name in &order.names {
                    edge_files::install_acme(&certs_dir(&dir), name, &certificate.files)?;
                }
                let state = self.edge_state()?.filter(|s| s.running).ok_or(EngineError::EdgeNotRunning)?;
                self.edge_reload(&state.id)?;
                Ok(true)
            }
        }
    }

    /// `nginx -t` in the edge, then a graceful reload, done once no worker
    /// of the old configuration accepts connections any more.
    ///
    /// Why wait: `nginx -s reload` returns at once; the master then starts
    /// new workers and tells the old ones to stop accepting. Until they do,
    /// a new connection may still reach an old worker (a name just taken off
    /// still served, a renewed certificate not yet), so a change is called
    /// done only when each old worker is gone or says it is shutting down.
    fn edge_reload(&self, id: &ContainerId) -> Result<(), EngineError> {
        self.nginx_test("nginx -t in the edge", argv(&["exec", id.as_str(), NGINX, "-t"]), NGINX_TEST)?;
        let old = self.accepting_workers(id)?;
        self.call("reload the edge", argv(&["exec", id.as_str(), NGINX, "-s", "reload"]), NGINX_TEST)?;
        let deadline = std::time::Instant::now() + NGINX_TEST;
        while self.accepting_workers(id)?.iter().any(|pid| old.contains(pid)) {
            if std::time::Instant::now() > deadline {
                return Err(EngineError::Host {
                    step: "see the edge's old workers stop accepting after its reload",
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Ok(())
    }

    /// The pids of the edge's nginx workers that accept connections (not
    /// shutting down), as `docker top` lists them (the host's ps).
    fn accepting_workers(&self, id: &ContainerId) -> Result<Vec<String>, EngineError> {
        let out = self.call("list the edge's workers", argv(&["top", id.as_str()]), QUICK)?;
        Ok(accepting_workers(&String::from_utf8_lossy(&out)))
    }

    /// What the edge holds for `name`: see [`crate::docker::Engine::edge_name`].
    pub(super) fn edge_name_facts(&self, name: &ServerName) -> EdgeNameFacts {
        let dir = self.edge_dir();
        let (cert, _) = cert_files(name);
        let copy = certs_dir(&dir).join(cert);
        EdgeNameFacts {
            // No openssl for a name the edge has no copy of.
            certificate: copy.is_file().then(|| crate::docker::acme::facts(&copy).ok()).flatten(),
            acme_failure: edge_files::acme_failure(&dir, name),
        }
    }

    /// `name` through the edge: see [`crate::docker::Engine::edge_answers`].
    pub(super) fn edge_https(&self, https: SocketAddr, name: &ServerName, path: &HealthPath) -> HttpsAnswer {
        let (cert, _) = cert_files(name);
        let ca = certs_dir(&self.edge_dir()).join(cert);
        crate::docker::host_probe::https_get(https, name.as_str(), path, &ca, self.health.timeout)
    }

    /// Whether the probe at 127.0.0.1:`port` answers `host` with a status
    /// `ok` accepts, within the health check's tries (a reload's new
    /// workers take a moment).
    fn answers(&self, port: u16, host: &str, path: &HealthPath, ok: impl Fn(u16) -> bool) -> bool {
        (0..self.health.tries).any(|attempt| {
            if attempt > 0 {
                std::thread::sleep(self.health.interval);
            }
            http_get(port, host, path, self.health.timeout).is_some_and(|reply| ok(reply.status))
        })
    }
}

/// An order's result, its failure kept for the inventory (or the names'
/// old failures forgotten once it succeeded).
fn remembered<T>(dir: &Path, names: &[ServerName], result: Result<T, AcmeError>) -> Result<T, EngineError> {
    match result {
        Ok(done) => {
            edge_files::clear_acme_failures(dir, names);
            Ok(done)
        }
        Err(error) => {
            let at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_secs() as i64);
            edge_files::record_acme_failure(dir, names, &AcmeFailure { at, error: error.clone() });
            Err(EngineError::Acme(error))
        }
    }
}

/// What lego is asked for an order: the policy's directory and contact,
/// the names, and the edge's webroot and ACME state.
pub fn acme_spec(edge_dir: &Path, order: &AcmeOrder) -> AcmeSpec {
    AcmeSpec {
        directory: order.acme.directory.clone(),
        contact: order.acme.contact.clone(),
        names: order.names.clone(),
        webroot: edge_files::webroot(edge_dir),
        state_dir: edge_files::acme_state(edge_dir),
        directory_ca: order.acme.directory_ca.clone(),
    }
}

/// The certificate copies an undone change deletes: those it installed or
/// obtained, except any the old config uses (it is put back and still
/// serves them).
fn copies_to_undo<'a>(change: &'a EdgeChange, old: &str) -> Vec<&'a ServerName> {
    let obtained = change.obtain.iter().flat_map(|order| &order.names);
    change
        .install
        .iter()
        .map(|e| &e.name)
        .chain(obtained)
        .filter(|name| !uses_certificate_of(old, name))
        .collect()
}

/// The pids of `docker top`'s nginx workers that are not shutting down
/// (its columns: UID PID PPID C STIME TTY TIME CMD).
fn accepting_workers(top: &str) -> Vec<String> {
    top.lines()
        .skip(1)
        .filter(|line| line.contains("nginx: worker process") && !line.contains("shutting down"))
        .filter_map(|line| line.split_whitespace().nth(1).map(str::to_owned))
        .collect()
}

/// `ADDRESS:PORT:CONTAINER_PORT` for `--publish` (an IPv6 address in brackets).
fn publish(address: SocketAddr, container_port: u16) -> String {
    format!("{address}:{container_port}")
}

/// The edge's three read-only bind mounts: its config, its certificate
/// copies, and the webroot of the ACME challenges.
fn mounts(conf: &Path, edge: &Path) -> Vec<String> {
    vec![
        "--mount".to_owned(),
        format!("type=bind,source={},target={GATEWAY_CONFIG_PATH},readonly", conf.display()),
        "--mount".to_owned(),
        format!("type=bind,source={},target={CERT_DIR},readonly", certs_dir(edge).display()),
        "--mount".to_owned(),
        format!("type=bind,source={},target={ACME_WEBROOT},readonly", edge_files::webroot(edge).display()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_workers_that_still_accept_are_waited_for() {
        let top = "UID      PID     PPID    C    STIME   TTY   TIME       CMD\n\
                   64039    4101    4080    0    20:42   ?     00:00:00   nginx: master process nginx -g daemon off;\n\
                   64039    4150    4101    0    20:42   ?     00:00:00   nginx: worker process is shutting down\n\
                   64039    4188    4101    0    20:43   ?     00:00:00   nginx: worker process\n";
        assert_eq!(accepting_workers(top), ["4188"]);
    }

    /// Tried: an undone change that obtained a certificate for a name the
    /// old config already serves (its copies were there before) and for a
    /// new one: only the new name's copies are deleted.
    #[test]
    fn an_undo_keeps_the_copies_the_old_config_still_uses() {
        use crate::nginx::edge::{Site, Switches, render};
        use crate::vocab::{AcmeConfig, AcmeContact, AcmeDirectory, AppName, PlanId};
        let served = ServerName::parse("shop.example.com").unwrap();
        let new = ServerName::parse("blog.example.com").unwrap();
        let switches = Switches { redirect_http: true, hsts: false, https_port_suffix: String::new() };
        let site = Site { app: AppName::parse("shop").unwrap(), names: vec![served.clone()] };
        let old = render(&[site], &switches);
        let acme = AcmeConfig {
            directory: AcmeDirectory::parse("https://acme.example/dir").unwrap(),
            contact: AcmeContact::parse("ops@example.com").unwrap(),
            directory_ca: None,
        };
        let change = EdgeChange {
            plan_id: PlanId::random(),
            config: String::new(),
            install: vec![],
            obtain: Some(AcmeOrder { acme, names: vec![served, new.clone()] }),
            remove: vec![],
            connect: None,
            disconnect: None,
            probe: vec![],
            health_path: Default::default(),
        };
        assert_eq!(copies_to_undo(&change, &old), [&new]);
    }

    #[test]
    fn an_address_is_published_as_docker_reads_it() {
        assert_eq!(publish("0.0.0.0:443".parse().unwrap(), 8443), "0.0.0.0:443:8443");
        assert_eq!(publish("[::]:80".parse().unwrap(), 8080), "[::]:80:8080");
    }
}
