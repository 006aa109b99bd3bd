//! The suites with real parts: `#[ignore]`d tests that need root, the
//! machine's Docker engine, the images of `scripts/test-images` or the
//! installation of `scripts/e2e-setup`. `scripts/test` runs them suite by
//! suite (`cargo test --test real -- --ignored SUITE::`), each after the
//! setup step it needs and one after another, as separate test binaries ran
//! before. Their non-ignored tests (host_binary's non-root ones) are
//! hermetic and run under plain `cargo test`.

#[path = "../support/mod.rs"]
mod support;

// Before the test images: root, runuser, the helper's fixed paths.
// host_disk_full: root mounts a small tmpfs.
mod host_binary;
mod host_disk_full;
// host_sudo_rule: root, sudo, unshare; the agent's drop-in in a mount namespace of its own.
mod host_sudo_rule;
mod local_mode;
mod mcp_local;

// host_acme: root, Debian's lego and pebble on 127.0.0.1 (no Docker).
mod host_acme;

// After scripts/test-images: the machine's Docker engine.
mod docker_engine;
mod host_real_engine;
mod host_real_engine_rules;
mod host_real_lifecycle;
// The kill matrix: the shipped helper in a mount namespace with a docker wrapper, on the fixed paths.
mod host_kill_matrix;

// After scripts/e2e-setup: sshd, the accounts, the sudoers rule, the installed helper.
mod e2e_accessories;
mod e2e_agent;
mod e2e_doctor;
mod e2e_fleet;
mod e2e_gate;
mod e2e_host;
mod e2e_scenario;
mod e2e_ssh;
// First of the e2e suites: it starts on the previous release's package and upgrades it.
mod e2e_upgrade;

// After scripts/package and the e2e teardown: the Debian package, installed and purged.
mod package;

// After scripts/test's venv with the pinned Python MCP SDK (and ssh from e2e-setup).
mod mcp_python;
// The same venv's jsonschema: the .mcpb bundle and server.json against their published schemas.
mod mcp_bundle;
// The same venv's SDK, and three servers from scripts/fleet-servers: rollouts over a fleet.
mod fleet_rollout;
