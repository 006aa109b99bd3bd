//! The docker program and the one environment it runs with, for every
//! caller in the helper: the client's calls (`super::client`) and the
//! commands piped into or out of restic (`super::dump`). A leaf: it
//! imports nothing of the engine.

use std::ffi::OsString;

use crate::exec::minimal_env;

/// The only docker program we run.
pub const DOCKER: &str = "/usr/bin/docker";
/// The only engine we talk to: the local socket, whatever the caller's env says.
pub const DOCKER_HOST: &str = "unix:///var/run/docker.sock";
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
