//! How a docker process is run: one [`DockerCall`] (argv after the
//! program, timeout, output limit) through a [`Runner`]; the real runner is
//! [`DockerProcess`], tests pass fakes that record argv. Runs as root
//! inside the host helper, through `crate::exec`.
//!
//! Invariant enforced here: the program is always [`DOCKER`], the
//! environment always [`docker_env`] (the local socket, whatever the
//! caller's environment says), and docker's stderr is kept small and never
//! leaves `crate::exec`.

use std::time::Duration;

use crate::docker::program::{DOCKER, docker_env};
use crate::exec::{ProcessOutput, ProcessSpec, run_blocking};

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
