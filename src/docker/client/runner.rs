//! How a docker process is run: one [`DockerCall`] (argv after the
//! program, timeout, output limit) through a [`Runner`]; the real runner is
//! [`DockerProcess`], tests pass fakes that record argv. Runs as root
//! inside the host helper, through `crate::exec`.
//!
//! Invariant enforced here: the program is always [`DOCKER`], the
//! environment always [`docker_env`] (the local socket, whatever the
//! caller's environment says), and docker's stderr is kept small and never
//! leaves `crate::exec`.

use std::ffi::OsString;
use std::time::Duration;

use crate::exec::{ProcessOutput, ProcessSpec, minimal_env, run_blocking};

/// The only docker program we run.
pub const DOCKER: &str = "/usr/bin/docker";
/// The only engine we talk to: the local socket, whatever the caller's env says.
pub const DOCKER_HOST: &str = "unix:///var/run/docker.sock";
/// What we keep of docker's stderr, and of the stdout of most calls.
pub(super) const SMALL_OUTPUT: usize = 64 * 1024;

/// One docker invocation: the argv after the program, its timeout, and how
/// much stdout we keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerCall {
    pub args: Vec<String>,
    pub timeout: Duration,
    pub stdout_limit: usize,
    /// docker's stderr is data (`crate::exec::ProcessSpec::stderr_is_data`),
    /// kept within `stdout_limit`: only for `docker logs`, where it is the
    /// container's stderr stream.
    pub stderr_is_data: bool,
}

/// Runs one docker call. The real one is [`DockerProcess`]; tests pass fakes
/// that record argv and answer from a script.
pub trait Runner: Sync {
    fn run(&self, call: &DockerCall) -> ProcessOutput;
}

/// Runs `/usr/bin/docker` through `crate::exec::run_blocking`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DockerProcess;

/// The fixed environment of every docker call: the minimal one, our socket,
/// root's own docker config (registry credentials an operator set up), and
/// no CLI hints on stdout.
pub fn docker_env() -> Vec<(OsString, OsString)> {
    let mut env = minimal_env();
    env.push(("DOCKER_HOST".into(), DOCKER_HOST.into()));
    env.push(("HOME".into(), "/root".into()));
    env.push(("DOCKER_CONFIG".into(), "/root/.docker".into()));
    env.push(("DOCKER_CLI_HINTS".into(), "false".into()));
    env
}

impl Runner for DockerProcess {
    fn run(&self, call: &DockerCall) -> ProcessOutput {
        let mut spec = ProcessSpec::new(DOCKER, &call.args);
        spec.env = docker_env();
        spec.timeout = call.timeout;
        spec.stdout_limit = call.stdout_limit;
        spec.stderr_is_data = call.stderr_is_data;
        spec.stderr_limit = if call.stderr_is_data { call.stdout_limit } else { SMALL_OUTPUT };
        run_blocking(&spec)
    }
}
