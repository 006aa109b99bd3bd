//! Docker argv built from fixed words and validated values only: the
//! hardening every container we start carries, the labels that mark what
//! we created, the gateway's config mount and the inspect template. Pure;
//! the argv runs as root (through `crate::exec`) in the host helper.
//!
//! Security invariant: each value is its own argv element (never a shell),
//! and what goes into a comma-separated docker list (`--mount`) was checked
//! not to contain separators (see `deploy::check_untyped_values`).

use std::path::Path;

use super::GATEWAY_CONFIG_PATH;
use crate::docker::LogWindow;
use crate::vocab::{
    AppName, ContainerId, ContainerLimits, DataUse, EnvFileUse, LABEL_APP, LABEL_PLAN, LABEL_ROLE, PlanId,
};

pub(super) fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// The labels that mark an object as ours: its app, its role and the plan
/// that created it (the failed-deploy cleanup finds objects by the last).
pub(super) fn labels(app: &AppName, role: &str, plan: &PlanId) -> Vec<String> {
    vec![
        "--label".to_owned(),
        format!("{LABEL_APP}={app}"),
        "--label".to_owned(),
        format!("{LABEL_ROLE}={role}"),
        "--label".to_owned(),
        format!("{LABEL_PLAN}={plan}"),
    ]
}

/// `docker logs` of one container by full id: the last `tail` lines, within
/// the last `since_minutes` if given, each with docker's timestamp. `--`
/// ends the options, so nothing after it is read as one.
pub(super) fn logs(container: &ContainerId, window: LogWindow) -> Vec<String> {
    let mut args = argv(&["logs", "--tail"]);
    args.push(window.tail.to_string());
    if let Some(minutes) = window.since_minutes {
        args.push("--since".to_owned());
        args.push(format!("{minutes}m"));
    }
    args.push("--timestamps".to_owned());
    args.push("--".to_owned());
    args.push(container.as_str().to_owned());
    args
}

/// `--env-file PATH` for an app container whose catalog entry has
/// configuration; nothing otherwise.
///
/// Why the file and not `--env NAME=value`: argv is readable by every
/// user in /proc/PID/cmdline, and our process facts and execution records
/// keep the argv; the path names no value. The docker CLI (root, as we
/// are) opens the file itself and sends the values to the daemon in the
/// create request, so they reach the container's environment and
/// `docker inspect` (root's) and nothing else of ours. Its reader takes
/// `NAME=value` verbatim, the grammar `crate::vocab::Configuration`
/// refuses every ambiguity of. The plan recorded the file's hash and the
/// controller checked it again right before this call; between that check
/// and docker's read only root can change a root-owned 0600 file in a
/// root-owned directory. Never the gateway: it gets no configuration.
pub(super) fn env_file(used: Option<&EnvFileUse>) -> Vec<String> {
    match used {
        Some(used) => vec!["--env-file".to_owned(), used.path.display().to_string()],
        None => Vec::new(),
    }
}

/// `--env-file` of the app's accessories' variables (issue 40), after the
/// operator's own ([`env_file`]): for every container of the app's image
/// when it has accessories; nothing otherwise. Written by its deploy,
/// root's 0600 file in the app's directory, as `env_file` explains.
pub(super) fn accessories_env(path: Option<&Path>) -> Vec<String> {
    match path {
        Some(path) => vec!["--env-file".to_owned(), path.display().to_string()],
        None => Vec::new(),
    }
}

/// `--mount` of the app's data directory (its mount point, where
/// `crate::docker::data_volume` mounted the image) at the entry's path, for
/// an app container whose entry has data; nothing otherwise. The mount
/// point's flags (nosuid, nodev, noexec) carry over to the bind mount.
pub(super) fn data_mount(data: Option<&DataUse>) -> Vec<String> {
    match data {
        Some(data) => vec![
            "--mount".to_owned(),
            format!("type=bind,source={},target={}", data.mount.display(), data.path),
        ],
        None => Vec::new(),
    }
}

/// The read-only bind mount of the gateway's nginx.conf.
pub(super) fn config_mount(config_path: &Path) -> String {
    format!("type=bind,source={},target={GATEWAY_CONFIG_PATH},readonly", config_path.display())
}

/// The size of every container's private `/dev/shm` (docker's default is 64m).
pub const SHM_SIZE: &str = "8m";

/// The engine's option that keeps the host off a bridge network: the bridge
/// gets no IPv4 address, so nothing on that network reaches the host's
/// services through it, nor (the network being `--internal`, its default
/// route pointing at that absent address) through any other host address.
pub const INHIBIT_IPV4_OPTION: (&str, &str) = ("com.docker.network.bridge.inhibit_ipv4", "true");
/// The engine's option that leaves a bridge's traffic out of the host's
/// NAT: the edge network publishes (DNAT into it works without it, checked
/// on 20.10) but the gateway's own connections get no masquerade to the
/// outside.
pub const NO_MASQUERADE_OPTION: (&str, &str) = ("com.docker.network.bridge.enable_ip_masquerade", "false");

fn opt((key, value): (&str, &str)) -> String {
    format!("{key}={value}")
}

/// `docker network create` of an app's internal network: `--internal` (no
/// forwarding out) and [`INHIBIT_IPV4_OPTION`] (no host address on it). Measured
/// on Docker 20.10: without the option a container on an `--internal`
/// network reached a host listener on 0.0.0.0 through its own bridge's
/// address, docker0's, the edge bridge's and another app's bridge's; with
/// it, none, while containers on the network still reach each other.
pub(super) fn app_network(labels: Vec<String>, name: &str) -> Vec<String> {
    let mut args = argv(&["network", "create", "--driver", "bridge", "--internal", "--opt"]);
    args.push(opt(INHIBIT_IPV4_OPTION));
    args.extend(labels);
    args.push(name.to_owned());
    args
}

/// `docker network create` of an app's edge network, which carries the
/// gateway's published port. It must keep its host address (the published
/// port is forwarded to the gateway through it), so the gateway reaches the
/// host's services; [`NO_MASQUERADE_OPTION`] at least keeps its connections from
/// being NATed to the outside (docs/docker-policy.md says exactly what it reaches).
pub(super) fn edge_network(labels: Vec<String>, name: &str) -> Vec<String> {
    let mut args = argv(&["network", "create", "--driver", "bridge", "--opt"]);
    args.push(opt(NO_MASQUERADE_OPTION));
    args.extend(labels);
    args.push(name.to_owned());
    args
}

/// The controls every container we start carries. `restart` is
/// `unless-stopped` for the app and gateway, `no` for the one-off check.
pub fn hardening(limits: &ContainerLimits, user: &str, restart: &str) -> Vec<String> {
    let memory = limits.memory_bytes.to_string();
    vec![
        "--user".into(),
        user.into(),
        // docker-init as pid 1: forwards SIGTERM (a bare pid 1 ignores it, so
        // `stop` would wait out its grace period) and reaps zombies.
        "--init".into(),
        "--read-only".into(),
        // The only writable directory: small, no exec, no devices, no setuid;
        // mode 1777 so the unprivileged user can write (nginx's pid and temp files).
        "--tmpfs".into(),
        "/tmp:rw,noexec,nosuid,nodev,size=16m,mode=1777".into(),
        // Its own IPC namespace, never joinable by another container
        // (whatever the daemon's default-ipc-mode), and a small /dev/shm
        // instead of docker's 64 MiB: POSIX shared memory and semaphores
        // (sem_open, Python's multiprocessing locks) keep working, and what
        // is written there is bounded here and charged to --memory.
        "--ipc".into(),
        "private".into(),
        "--shm-size".into(),
        SHM_SIZE.into(),
        "--cap-drop".into(),
        "ALL".into(),
        "--security-opt".into(),
        "no-new-privileges".into(),
        "--pids-limit".into(),
        limits.pids.to_string(),
        "--memory".into(),
        memory.clone(),
        // Equal to --memory: no swap on top of the limit.
        "--memory-swap".into(),
        memory,
        "--cpus".into(),
        format!("{}.{:03}", limits.millicpus / 1000, limits.millicpus % 1000),
        "--log-driver".into(),
        "json-file".into(),
        "--log-opt".into(),
        format!("max-size={}", limits.log_max_size_bytes),
        "--log-opt".into(),
        format!("max-file={}", limits.log_max_files),
        "--restart".into(),
        restart.into(),
        // We pulled by digest already; never let create/run fetch anything else.
        "--pull".into(),
        "never".into(),
    ]
}

/// One JSON object per container with only the fields a snapshot holds.
/// Configured port bindings (HostConfig), not live ones, so a stopped
/// container still shows the port it will take when it starts.
pub const INSPECT_TEMPLATE: &str = concat!(
    r#"{"id":{{json .Id}},"name":{{json .Name}},"image":{{json .Image}},"#,
    r#""state":{{json .State.Status}},"labels":{{json .Config.Labels}},"#,
    r#""ports":{{json .HostConfig.PortBindings}}}"#
);
