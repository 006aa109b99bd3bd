//! volce-lab: let an AI agent look after Linux servers through a few fixed MCP
//! tools, with destructive Docker changes approved by a human on each server.
//!
//! One executable, installed twice. On the workstation it is an MCP stdio
//! server (`volce-lab mcp-serve`) and a terminal report (`volce-lab inspect`),
//! both unprivileged. On the server it is the root helper, reached as
//! `/usr/local/bin/volce-lab-host` (a symlink: that file name selects host mode).
//!
//! The map lists the modules top first: each refers only to modules below
//! it, `control` (the decision logic) reaches no I/O layer, and `vocab`
//! (what the layers share) nothing but `text`. tests/hermetic/layers.rs
//! holds the code to this map and to having no import cycle.
//!
//! ```text
//! src/main.rs       thin: hands argv to cli::main and returns its exit code
//! src/cli.rs        clap types; picks the entry (file name `volce-lab-host` =>
//!                   host) and calls the typed entry functions below
//! src/mcp/          rmcp server (server.rs), the tools' schemas and argument
//!                   validation (tools/), host-rpc client (rpc.rs), audit.rs,
//!                   each target's witnessed audit head (witness.rs)
//! src/install/      the installation, above host: setup and undo (setup.rs),
//!                   the doctor's rules (doctor.rs; doctor/system.rs probes
//!                   the system), the operator's `catalog pin|list|remove|
//!                   gateway-image|env-file` (catalog.rs), `data list|mount|
//!                   purge` (data.rs) and `state backup|restore|diff|
//!                   remove-container` (state.rs: the way back to an older
//!                   package, and what a restore left differing from the engine),
//!                   the sudoers rule and privileged groups
//! src/host/         root helper: the binary's edge (entry.rs), `Host` and
//!                   the rpc/list/show/approve/reject/resolve pipelines
//!                   (pipeline.rs), the controller (controller.rs, with
//!                   execute in controller/execute.rs), the one table of
//!                   installed paths (paths.rs), the operator's env files
//!                   and their hash key (env_files.rs), the real clocks (clock.rs),
//!                   the operator's views (show.rs, list.rs), the rpc process
//!                   guard (process.rs), its front and worker (front.rs),
//!                   its stdout (output.rs), who the operator is (operator.rs),
//!                   the audit trail's verify/head/export (audit.rs), the
//!                   operator's pause of the agent (pause.rs) and the
//!                   refusals counted while the store cannot record them
//!                   (counted.rs)
//! src/inspect/      read-only checks: demo/local/ssh targets, identity gate,
//!                   multiplexed ssh (ssh_mux.rs) and its master's control
//!                   protocol spoken in-process (mux_client/), the human
//!                   report (report.rs)
//! src/store/        SQLite: every statement in one table (sql.rs), schema,
//!                   rows, transitions, plan/app/trail reads, retention, the
//!                   audit hash chain (chain.rs, verify.rs), health
//! src/wire.rs       the host-RPC contract both ends share: request and reply
//!                   types, the request parser, the 16 KiB limit, one typed
//!                   body per operation that answers ok (answers/), progress
//!                   lines (progress.rs), the ssh gate's frames (gate.rs),
//!                   the audit head witnessed off the host and its proof
//!                   (witness.rs),
//!                   the closed set of commands run on a target with their
//!                   argv and shell lines (remote.rs)
//! src/config.rs     workstation configuration from the environment, validated once
//! src/actions/      the plan actions, one file each behind one trait
//!                   (mod.rs: `PlanAction`, the registration that gives the
//!                   sealed `Payload` and its dispatch): parameters and their
//!                   validation, scope, the lines `show` prints, the engine
//!                   steps and the record effect; the sealed plan and its
//!                   digest (plan.rs); execute, show and the records ask
//!                   the action, the generic path only claims, verifies,
//!                   acts and records
//! src/docker/       trait Engine, what it returns and how it fails (mod.rs);
//!                   the engine that runs the docker client (client.rs,
//!                   client/), the managed nginx.conf (gateway_file.rs), host
//!                   probes (host_probe.rs)
//! src/exec.rs       the one bounded process runner (fixed argv, cleared env,
//!                   limits, timeout, process group, Execution record); its
//!                   supervision of a started run (supervise.rs) also
//!                   watches the sessions an ssh master runs for us
//! src/control/      the decision logic: policy and a plan's terms,
//!                   canonical JSON, the checks every action's validation
//!                   shares, the scope of the engine snapshot a plan is bound
//!                   to, the app record, plan expiry; no files, no
//!                   processes, no clock (host facts and time come in
//!                   through traits)
//! src/nginx.rs      gateway config rendering from validated values only
//! src/exit.rs       the closed set of exit codes
//! src/logs.rs       container log text made safe: escapes, hidden characters,
//!                   secret-looking values matched on the normalised line
//!                   (logs/normal.rs, redact.rs, shapes.rs), private-key
//!                   blocks (keyblock.rs), the 16 KiB cut, and the 20-line
//!                   cut a rolled-back plan keeps (app_log.rs)
//! src/vocab/        what the layers share: refusal codes, plan and Docker
//!                   ids, validated names, pinned image references, the
//!                   engine's snapshot and the specs it acts on
//! src/text.rs       small shared helpers: hex, RFC 3339, escaping text for a
//!                   terminal or a model
//! ```
#![forbid(unsafe_code)]

pub mod actions;
pub mod cli;
pub mod config;
pub mod control;
pub mod docker;
pub mod exec;
pub mod exit;
pub mod host;
pub mod inspect;
pub mod install;
pub mod logs;
pub mod mcp;
pub mod nginx;
pub mod store;
pub mod text;
pub mod vocab;
pub mod wire;
