//! Helpers shared by the test crates (tests/hermetic, tests/real) and the
//! controller benchmark. Each of them includes this module the same one way,
//! from its root:
//!
//! ```ignore
//! #[path = "../support/mod.rs"]
//! mod support;
//! ```
//!
//! and its suites name what they use as `crate::support::NAME`. Test-only:
//! nothing here is compiled into the shipped library.
//!
//! - `fake_engine`, `harness`: the controller over a fake Docker world and a
//!   temporary policy and state directory (hermetic);
//! - `load`: N processes × R rounds of mixed operations on one state directory (hermetic);
//! - `mcp`: a strict checker for our tool schemas, result helpers (hermetic);
//! - `named_targets`: a targets file of N ssh targets `t01`... (hermetic, also
//!   benches/mcp_stdio.rs);
//! - `nginx_shape`: the statements of a rendered nginx.conf (hermetic, also fuzz/);
//! - `unprivileged`: the binary where an unprivileged account can run it;
//! - `docker_lab`: the real engine and the images of `scripts/test-images` (root);
//! - `e2e`: the installation of `scripts/e2e-setup`, acting as agent, operator and root;
//! - `procfs`: a running helper found by its argv, a field of a process's status (root).

// Every crate uses only some of the helpers.
#![allow(dead_code)]

pub mod docker_lab;
pub mod e2e;
pub mod fake_engine;
pub mod harness;
pub mod load;
pub mod mcp;
pub mod named_targets;
pub mod nginx_shape;
pub mod procfs;
pub mod unprivileged;
