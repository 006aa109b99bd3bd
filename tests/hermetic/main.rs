//! The hermetic integration tests: everything here runs under plain
//! `cargo test`, unprivileged, with no Docker, no network and no change to
//! the system. One crate (one link step) for all of them; each file is a
//! suite, so `cargo test --test hermetic -- host_controller::` runs one.
//! No test here is `#[ignore]`d: real-parts tests live in tests/real.

#[path = "../support/mod.rs"]
mod support;

mod bench_rules;
mod cli;
mod docs;
mod file_circles;
mod host_audit_rows;
mod host_bounded_state;
mod host_broken_state;
mod host_catalog;
mod host_clock;
mod host_configuration;
mod host_controller;
mod host_data;
mod host_failed_show;
mod host_image_holds;
mod host_inventory;
mod host_leftovers;
mod host_lifecycle;
mod host_load;
mod host_logs;
mod host_operator_wait;
mod host_pause_restore;
mod host_policy_files;
mod host_processes;
mod host_server_names;
mod host_signed_approval;
mod host_tasks;
mod layers;
mod mcp_approval_task;
mod mcp_approval_wait;
mod mcp_conformance;
mod mcp_examples;
mod mcp_management;
mod mcp_packaging;
mod mcp_progress;
mod mcp_stdio;
mod mcp_targets;
mod mcp_witness;
mod properties;
mod wire_answers;
