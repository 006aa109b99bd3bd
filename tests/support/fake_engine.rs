//! A fake container engine for controller tests and benchmarks: it keeps a
//! small in-memory Docker world and records every operation it is asked, as
//! argv-like lists. Test-only; part of tests/support (used by the host_*
//! suites and benches/controller.rs), so no test code is compiled into the shipped
//! library and no cargo feature can switch it on.
//!
//! For tests that span processes, mutations are also appended (one line
//! each, O_APPEND) to a shared log file, and a mutation can be made to
//! block after writing a marker file, so a test can kill the process
//! between its claim and the engine's work.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use volce_lab::docker::{
    AppRemoval, Deployed, Engine, EngineError, LabelledNetwork, LogStreams, LogWindow, ProgressSink,
};
use volce_lab::logs::{AppLog, TaskRun};
use volce_lab::vocab::{
    BackupRun, BackupSpec, Capacity, Container, ContainerId, DeploySpec, ImageHolds, ImageId, ImageRef,
    LABEL_APP, LABEL_PLAN, LABEL_ROLE, PlanId, PublishedPort, RestoreRun, RestoreSpec, RetentionApplied,
    ServerName, Snapshot, SnapshotId, StartSpec, Step, TaskSpec, UpdateSpec,
};

pub fn image(c: char) -> ImageId {
    ImageId::parse(&format!("sha256:{}", c.to_string().repeat(64))).unwrap()
}

pub fn container_id(c: char) -> ContainerId {
    ContainerId::parse(&c.to_string().repeat(64)).unwrap()
}

/// The id of the unmanaged production container every fake world starts with.
pub fn prod_id() -> ContainerId {
    container_id('0')
}

/// An image no container uses (removable), and the one `prod` uses.
pub fn unused_image() -> ImageId {
    image('c')
}
pub fn used_image() -> ImageId {
    image('9')
}

/// A container without volce-lab labels or ports, as someone else made it.
pub fn foreign_container(id: ContainerId, name: &str, image_id: ImageId, state: &str) -> Container {
    Container { id, name: name.into(), image_id, state: state.into(), labels: BTreeMap::new(), ports: vec![] }
}

fn derived_id(seed: &str) -> ContainerId {
    let hex: String = Sha256::digest(seed.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    ContainerId::parse(&hex).unwrap()
}

#[derive(Debug)]
pub struct FakeState {
    pub snapshot: Snapshot,
    pub calls: Vec<Vec<String>>,
    pub busy_ports: Vec<u16>,
    pub capacity: Capacity,
    /// The next mutation fails with this error (after recording the call).
    pub fail_next: Option<EngineError>,
    /// The next mutation of this kind (the call's first word: `start`,
    /// `stop`, ...) fails with this error, after recording the call.
    pub fail_at: Option<(&'static str, EngineError)>,
    pub snapshot_fails: bool,
    /// What `logs` answers per container id (nothing for the others).
    pub logs: BTreeMap<ContainerId, Vec<u8>>,
    /// What `container_env` answers per container id (nothing for the others).
    pub envs: BTreeMap<ContainerId, Vec<String>>,
    /// What `resolve_image` answers per catalog reference (absent: none).
    pub local_images: BTreeMap<String, ImageId>,
    /// What `image_volumes` answers per reference (absent: not pulled yet).
    pub image_volumes: BTreeMap<String, Vec<String>>,
    /// Host ports whose gateway does not answer (every other one does).
    pub silent_ports: Vec<u16>,
    /// What `edge_name` answers per name (absent: no copy, no failure).
    pub edge_names: BTreeMap<String, volce_lab::vocab::EdgeNameFacts>,
    /// What `edge_answers` answers per name (absent: `ok`).
    pub edge_answers: BTreeMap<String, volce_lab::vocab::HttpsAnswer>,
    /// The `io.volce-lab.plan` label of each network that has one, by name
    /// (the snapshot lists names only, as the real one does).
    pub network_plans: BTreeMap<String, String>,
    /// What `image_holds` answers per image in the snapshot (absent:
    /// nothing holds it).
    pub image_holds: BTreeMap<ImageId, ImageHolds>,
    /// What a `run_task` exits with and prints (stdout; rendered with the
    /// values of `task_env` as a real run renders with its container's).
    pub task_exit: i64,
    pub task_output: Vec<u8>,
    pub task_env: Vec<String>,
}

#[derive(Clone)]
pub struct FakeEngine {
    pub state: Arc<Mutex<FakeState>>,
    log: Option<PathBuf>,
    block: Option<(PathBuf, Duration)>,
}

impl FakeEngine {
    /// A deploy's or update's `before_start`: run as [`Engine::run_task`]
    /// runs it (recorded as `run_task`); a failure is the plan's, rolled
    /// back and verified, with the task's output as its log.
    fn before_start(&self, task: Option<&TaskSpec>) -> Result<(), EngineError> {
        match task.map(|task| self.run_task(task)) {
            Some(Err(error)) => {
                let app_log = error.output().cloned();
                Err(EngineError::RolledBack { cause: Box::new(error), app_log })
            }
            _ => Ok(()),
        }
    }

    /// A world with one unmanaged container `prod` publishing port 80.
    pub fn new() -> FakeEngine {
        let prod = Container {
            id: prod_id(),
            name: "prod".into(),
            image_id: used_image(),
            state: "running".into(),
            labels: BTreeMap::new(),
            ports: vec![PublishedPort {
                host_ip: "0.0.0.0".into(),
                host_port: 80,
                container_port: 80,
                protocol: "tcp".into(),
            }],
        };
        FakeEngine {
            state: Arc::new(Mutex::new(FakeState {
                snapshot: Snapshot {
                    containers: vec![prod],
                    images: vec![used_image(), unused_image()],
                    networks: vec![],
                }
                .normalize(),
                calls: Vec::new(),
                busy_ports: Vec::new(),
                capacity: Capacity { free_memory_bytes: 8 << 30, free_disk_bytes: 64 << 30 },
                fail_next: None,
                fail_at: None,
                snapshot_fails: false,
                logs: BTreeMap::new(),
                envs: BTreeMap::new(),
                local_images: BTreeMap::new(),
                image_volumes: BTreeMap::new(),
                silent_ports: Vec::new(),
                edge_names: BTreeMap::new(),
                edge_answers: BTreeMap::new(),
                task_exit: 0,
                task_output: Vec::new(),
                task_env: Vec::new(),
                network_plans: BTreeMap::new(),
                image_holds: BTreeMap::new(),
            })),
            log: None,
            block: None,
        }
    }

    /// Also append every mutation to `log` (shared between processes).
    pub fn with_log(mut self, log: &Path) -> FakeEngine {
        self.log = Some(log.to_owned());
        self
    }

    /// Before every mutation, create `marker` and sleep `pause`.
    pub fn with_block(mut self, marker: &Path, pause: Duration) -> FakeEngine {
        self.block = Some((marker.to_owned(), pause));
        self
    }

    pub fn calls(&self) -> Vec<Vec<String>> {
        self.state.lock().unwrap().calls.clone()
    }

    /// Only the calls that change something.
    pub fn mutations(&self) -> Vec<Vec<String>> {
        self.calls()
            .into_iter()
            .filter(|c| {
                !["snapshot", "capacity", "port_free", "logs", "plan_networks"].contains(&c[0].as_str())
            })
            .collect()
    }

    pub fn snapshot_now(&self) -> Snapshot {
        self.state.lock().unwrap().snapshot.clone()
    }

    pub fn edit(&self, change: impl FnOnce(&mut FakeState)) {
        let mut state = self.state.lock().unwrap();
        change(&mut state);
        state.snapshot = std::mem::take(&mut state.snapshot).normalize();
    }

    fn record(&self, call: Vec<String>) {
        self.state.lock().unwrap().calls.push(call);
    }

    /// Records a mutation (memory, then the shared log) and maybe fails it.
    fn mutate(&self, call: Vec<String>) -> Result<(), EngineError> {
        if let Some((marker, pause)) = &self.block {
            std::fs::write(marker, b"reached the engine\n").unwrap();
            std::thread::sleep(*pause);
        }
        if let Some(log) = &self.log {
            let mut file = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
            file.write_all(format!("{} {}\n", std::process::id(), call.join(" ")).as_bytes()).unwrap();
        }
        let mut state = self.state.lock().unwrap();
        let kind_fails = state.fail_at.as_ref().is_some_and(|(kind, _)| *kind == call[0]);
        state.calls.push(call);
        if kind_fails {
            return Err(state.fail_at.take().expect("checked above").1);
        }
        match state.fail_next.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

impl Default for FakeEngine {
    fn default() -> Self {
        FakeEngine::new()
    }
}

/// Lines in a shared mutation log.
pub fn logged_mutations(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log).map(|t| t.lines().map(str::to_owned).collect()).unwrap_or_default()
}

impl Engine for FakeEngine {
    fn container_env(&self, container: &ContainerId) -> Result<Vec<String>, EngineError> {
        self.record(vec!["container_env".into(), container.to_string()]);
        Ok(self.state.lock().unwrap().envs.get(container).cloned().unwrap_or_default())
    }

    fn logs(&self, container: &ContainerId, window: LogWindow) -> Result<LogStreams, EngineError> {
        let since = window.since_minutes.map_or("-".to_owned(), |m| format!("{m}m"));
        self.record(vec!["logs".into(), container.to_string(), window.tail.to_string(), since]);
        let stdout = self.state.lock().unwrap().logs.get(container).cloned().unwrap_or_default();
        Ok(LogStreams { stdout, stderr: Vec::new() })
    }

    fn plan_networks(&self, plan: &PlanId) -> Result<Vec<LabelledNetwork>, EngineError> {
        self.record(vec!["plan_networks".into(), plan.to_string()]);
        let state = self.state.lock().unwrap();
        if state.snapshot_fails {
            return Err(EngineError::Unparsable { step: "list plan networks" });
        }
        Ok(state
            .snapshot
            .networks
            .iter()
            .filter(|name| state.network_plans.get(*name).map(String::as_str) == Some(plan.as_str()))
            .map(|name| LabelledNetwork {
                id: derived_id(&format!("network {name}")).to_string(),
                name: name.clone(),
            })
            .collect())
    }

    fn snapshot(&self) -> Result<Snapshot, EngineError> {
        self.record(vec!["snapshot".into()]);
        let state = self.state.lock().unwrap();
        if state.snapshot_fails {
            return Err(EngineError::Unparsable { step: "snapshot" });
        }
        Ok(state.snapshot.clone())
    }

    fn host_port_free(&self, port: u16) -> bool {
        self.record(vec!["port_free".into(), port.to_string()]);
        !self.state.lock().unwrap().busy_ports.contains(&port)
    }

    fn capacity(&self) -> Result<Capacity, EngineError> {
        self.record(vec!["capacity".into()]);
        Ok(self.state.lock().unwrap().capacity)
    }

    /// Reports the steps the real deploy does, once it succeeded.
    fn deploy(&self, spec: &DeploySpec, progress: &dyn ProgressSink) -> Result<Deployed, EngineError> {
        self.mutate(vec![
            "deploy".into(),
            spec.app.to_string(),
            spec.plan_id.to_string(),
            spec.app_image.to_string(),
            spec.gateway_image.to_string(),
            format!("127.0.0.1:{}:8080", spec.host_port),
        ])?;
        self.before_start(spec.before_start.as_ref())?;
        let app = derived_id(&format!("{}-app", spec.plan_id));
        let gateway = derived_id(&format!("{}-gateway", spec.plan_id));
        let names = spec.app.names();
        self.edit(|state| {
            for (id, role, name) in
                [(&app, "app", &names.app_container), (&gateway, "gateway", &names.gateway_container)]
            {
                let labels = BTreeMap::from([
                    (LABEL_APP.to_owned(), spec.app.to_string()),
                    (LABEL_ROLE.to_owned(), role.to_owned()),
                    (LABEL_PLAN.to_owned(), spec.plan_id.to_string()),
                ]);
                let ports = if role == "gateway" {
                    vec![PublishedPort {
                        host_ip: "127.0.0.1".into(),
                        host_port: spec.host_port,
                        container_port: 8080,
                        protocol: "tcp".into(),
                    }]
                } else {
                    vec![]
                };
                state.snapshot.containers.push(Container {
                    id: id.clone(),
                    name: name.clone(),
                    image_id: image(if role == "app" { 'a' } else { 'b' }),
                    state: "running".into(),
                    labels,
                    ports,
                });
            }
            state.snapshot.networks.push(names.network.clone());
            state.network_plans.insert(names.network.clone(), spec.plan_id.to_string());
            for c in ['a', 'b'] {
                state.snapshot.images.push(image(c));
            }
        });
        for step in [Step::Pulled, Step::Network, Step::AppStarted, Step::GatewayTested, Step::HealthCheck] {
            progress.step(step);
        }
        Ok(Deployed { accessories: Vec::new(), app_container: app, gateway_container: gateway })
    }

    fn update_nginx(
        &self,
        app_dir: &Path,
        gateway: &ContainerId,
        old_config: &str,
        new_config: &str,
    ) -> Result<(), EngineError> {
        let digest = |s: &str| {
            Sha256::digest(s.as_bytes()).iter().take(6).map(|b| format!("{b:02x}")).collect::<String>()
        };
        self.mutate(vec![
            "update_nginx".into(),
            app_dir.display().to_string(),
            gateway.to_string(),
            digest(old_config),
            digest(new_config),
        ])
    }

    fn stop(&self, containers: &[ContainerId]) -> Result<(), EngineError> {
        let mut call = vec!["stop".to_owned()];
        call.extend(containers.iter().map(|c| c.to_string()));
        self.mutate(call)?;
        self.edit(|state| {
            for c in &mut state.snapshot.containers {
                if containers.contains(&c.id) {
                    c.state = "exited".into();
                }
            }
        });
        Ok(())
    }

    /// Records the call with the task's argv, and answers with the exit
    /// code and output the state says, the container gone either way.
    fn run_task(&self, spec: &TaskSpec) -> Result<TaskRun, EngineError> {
        let mut call = vec!["run_task".to_owned(), spec.app.to_string(), spec.task.to_string()];
        call.extend(spec.argv.all().iter().cloned());
        self.mutate(call)?;
        let state = self.state.lock().unwrap();
        let values: Vec<&str> =
            state.task_env.iter().filter_map(|e| e.split_once('=')).map(|(_, v)| v).collect();
        let output = AppLog::render(&state.task_output, b"", &values);
        let run = TaskRun { task: spec.task.clone(), exit_code: state.task_exit, output };
        if run.exit_code == 0 { Ok(run) } else { Err(EngineError::TaskFailed { run }) }
    }

    /// Records the call with the snapshot's tags and answers a fixed run
    /// (`fail_at` with `backup` makes it fail instead).
    fn backup(&self, spec: &BackupSpec) -> Result<BackupRun, EngineError> {
        let mut call = vec!["backup".to_owned(), spec.app.to_string()];
        call.extend(spec.data.iter().map(|data| data.mount.display().to_string()));
        call.extend(spec.dumps.iter().map(|dump| format!("dump {}", dump.accessory.name)));
        call.extend(spec.tags());
        self.mutate(call)?;
        Ok(BackupRun {
            snapshot: spec.data.as_ref().map(|_| SnapshotId::parse("0123abcd").unwrap()),
            files: 3,
            bytes: 4096,
            added_bytes: 1024,
            writes_paused_ms: 5,
            dumps: Vec::new(),
            retention: RetentionApplied::Applied,
        })
    }

    /// Records the call with the snapshot's id and answers a fixed safety
    /// snapshot (`fail_at` with `restore` makes it fail instead).
    fn restore(&self, spec: &RestoreSpec, _progress: &dyn ProgressSink) -> Result<RestoreRun, EngineError> {
        let call = vec!["restore".to_owned(), spec.app.to_string(), spec.snapshot.id.to_string()];
        self.mutate(call)?;
        let safety = SnapshotId::parse("5afe5afe").unwrap();
        Ok(RestoreRun { restored: spec.snapshot.id.clone(), safety, started: spec.start.is_some() })
    }

    /// Records the call with the names it installs, removes and probes
    /// (`fail_at` with `edge_apply` makes it fail instead).
    fn edge_apply(&self, change: &volce_lab::vocab::EdgeChange) -> Result<(), EngineError> {
        let mut call = vec!["edge_apply".to_owned()];
        call.extend(change.install.iter().map(|e| format!("+{}", e.name)));
        call.extend(change.remove.iter().map(|n| format!("-{n}")));
        call.extend(change.connect.iter().map(|n| format!("connect {n}")));
        call.extend(change.disconnect.iter().map(|n| format!("disconnect {n}")));
        self.mutate(call)
    }

    fn remove_container(&self, container: &ContainerId) -> Result<(), EngineError> {
        self.mutate(vec!["remove_container".to_owned(), container.to_string()])?;
        self.edit(|state| state.snapshot.containers.retain(|c| c.id != *container));
        Ok(())
    }

    fn remove_app(&self, removal: &AppRemoval<'_>) -> Result<(), EngineError> {
        let mut call = vec!["remove_app".to_owned(), removal.app.to_string()];
        call.extend(removal.containers.iter().map(|c| c.to_string()));
        call.push(format!("running={}", removal.running.len()));
        call.extend(removal.networks.iter().cloned());
        call.push(removal.app_dir.display().to_string());
        self.mutate(call)?;
        self.edit(|state| {
            state.snapshot.containers.retain(|c| !removal.containers.contains(&c.id));
            state.snapshot.networks.retain(|n| !removal.networks.contains(n));
            state.network_plans.retain(|n, _| !removal.networks.contains(n));
        });
        Ok(())
    }

    fn start(&self, spec: &StartSpec, progress: &dyn ProgressSink) -> Result<(), EngineError> {
        self.mutate(vec![
            "start".into(),
            spec.app_container.to_string(),
            spec.gateway.to_string(),
            format!("127.0.0.1:{}", spec.host_port),
            spec.server_name.to_string(),
        ])?;
        self.edit(|state| {
            for c in &mut state.snapshot.containers {
                if c.id == spec.app_container || c.id == spec.gateway {
                    c.state = "running".into();
                }
            }
        });
        progress.step(Step::AppStarted);
        progress.step(Step::HealthCheck);
        Ok(())
    }

    /// The new container gets image `e` (the fake's "second catalog image").
    fn update(&self, spec: &UpdateSpec, progress: &dyn ProgressSink) -> Result<ContainerId, EngineError> {
        self.mutate(vec![
            "update".into(),
            spec.app.to_string(),
            spec.plan_id.to_string(),
            spec.app_image.to_string(),
            spec.old_app.to_string(),
            spec.container_name.clone(),
        ])?;
        self.before_start(spec.before_start.as_ref())?;
        let new = derived_id(&format!("{}-app", spec.plan_id));
        // The catalog's `web` (a deploy's image a, which a rollback may
        // return to), or any other image (e).
        let image_id = if spec.app_image.as_str().contains("/web@") { image('a') } else { image('e') };
        self.edit(|state| {
            state.snapshot.containers.retain(|c| c.id != spec.old_app);
            state.snapshot.containers.push(Container {
                id: new.clone(),
                name: spec.container_name.clone(),
                image_id: image_id.clone(),
                state: "running".into(),
                labels: BTreeMap::from([
                    (LABEL_APP.to_owned(), spec.app.to_string()),
                    (LABEL_ROLE.to_owned(), "app".to_owned()),
                    (LABEL_PLAN.to_owned(), spec.plan_id.to_string()),
                ]),
                ports: vec![],
            });
            if !state.snapshot.images.contains(&image_id) {
                state.snapshot.images.push(image_id);
            }
        });
        for step in [Step::Pulled, Step::AppStarted, Step::GatewayTested, Step::HealthCheck, Step::Switched] {
            progress.step(step);
        }
        Ok(new)
    }

    fn update_accessory(
        &self,
        spec: &volce_lab::vocab::AccessoryUpdateSpec,
        progress: &dyn ProgressSink,
    ) -> Result<ContainerId, EngineError> {
        self.mutate(vec![
            "update_accessory".into(),
            spec.app.to_string(),
            spec.plan_id.to_string(),
            spec.accessory.name.to_string(),
            spec.accessory.image.to_string(),
            spec.old.to_string(),
        ])?;
        let new = derived_id(&format!("{}-accessory", spec.plan_id));
        self.edit(|state| {
            let Some(old) = state.snapshot.containers.iter().position(|c| c.id == spec.old) else { return };
            let mut container = state.snapshot.containers.remove(old);
            container.id = new.clone();
            container.image_id = image('f');
            container.labels.insert(LABEL_PLAN.to_owned(), spec.plan_id.to_string());
            state.snapshot.containers.push(container);
            if !state.snapshot.images.contains(&image('f')) {
                state.snapshot.images.push(image('f'));
            }
        });
        for step in [Step::Pulled, Step::HealthCheck] {
            progress.step(step);
        }
        Ok(new)
    }

    /// Records the rotation, then switches the app as an update does.
    fn rotate_credential(
        &self,
        spec: &volce_lab::vocab::RotationSpec,
        progress: &dyn ProgressSink,
    ) -> Result<ContainerId, EngineError> {
        self.mutate(vec![
            "rotate_credential".into(),
            spec.switch.app.to_string(),
            spec.switch.plan_id.to_string(),
            spec.accessory.name.to_string(),
        ])?;
        self.update(&spec.switch, progress)
    }

    fn remove_image(&self, image: &ImageId) -> Result<(), EngineError> {
        self.mutate(vec!["remove_image".into(), image.to_string()])?;
        self.edit(|state| state.snapshot.images.retain(|i| i != image));
        Ok(())
    }

    // The two read-only probes are not recorded: tests of call lists
    // count what the controller asks to change or to list.
    fn resolve_image(&self, reference: &ImageRef) -> Result<Option<ImageId>, EngineError> {
        Ok(self.state.lock().unwrap().local_images.get(reference.as_str()).cloned())
    }

    fn image_volumes(&self, reference: &ImageRef) -> Result<Option<Vec<String>>, EngineError> {
        Ok(self.state.lock().unwrap().image_volumes.get(reference.as_str()).cloned())
    }

    fn image_holds(&self, image: &ImageId) -> Result<Option<ImageHolds>, EngineError> {
        let state = self.state.lock().unwrap();
        if !state.snapshot.images.contains(image) {
            return Ok(None);
        }
        let free = ImageHolds { references_removable: true, ..ImageHolds::default() };
        Ok(Some(state.image_holds.get(image).cloned().unwrap_or(free)))
    }

    fn gateway_answers(&self, port: u16, _server_name: &ServerName) -> bool {
        !self.state.lock().unwrap().silent_ports.contains(&port)
    }

    /// The names a test gave facts (`edge_names`); none otherwise.
    fn edge_name(&self, name: &ServerName) -> volce_lab::vocab::EdgeNameFacts {
        self.state.lock().unwrap().edge_names.get(name.as_str()).cloned().unwrap_or_default()
    }

    /// `ok` unless a test made the name fail (`edge_answers`).
    fn edge_answers(
        &self,
        _https: std::net::SocketAddr,
        name: &ServerName,
        _path: &volce_lab::vocab::HealthPath,
    ) -> volce_lab::vocab::HttpsAnswer {
        let state = self.state.lock().unwrap();
        state.edge_answers.get(name.as_str()).copied().unwrap_or(volce_lab::vocab::HttpsAnswer::Ok)
    }
}
