//! The approval statement: the canonical text an operator signs to approve
//! one plan from their own device, rendered by the host from its own record
//! of the plan and its own identity. Pure but for [`HostIdentity::observe`].
//!
//! The same bytes come out for the same plan on the same host every time
//! (nothing in it depends on the clock or the plan's state), so the host
//! can render it again when a signature arrives and compare byte for byte:
//! a statement changed anywhere on its way to the operator's screen, or
//! one of another plan or host, never matches.

use std::fmt::Write as _;

use crate::control::canonical;
use crate::store::StoredPlan;
use crate::wire::signed::STATEMENT_HEADER;

/// Which host a statement is for: its name and its machine id, which
/// differs between two hosts even where their names do not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostIdentity {
    pub hostname: String,
    pub machine_id: String,
}

impl HostIdentity {
    /// This machine's: the kernel's host name and `/etc/machine-id`
    /// (`unknown` where either cannot be read: the statement then binds
    /// what it can, and says so).
    pub fn observe() -> HostIdentity {
        let hostname = nix::unistd::gethostname()
            .ok()
            .and_then(|name| name.into_string().ok())
            .filter(|name| !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic()))
            .unwrap_or_else(|| "unknown".to_owned());
        let machine_id = std::fs::read_to_string("/etc/machine-id")
            .ok()
            .map(|id| id.trim().to_owned())
            .filter(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
            .unwrap_or_else(|| "unknown".to_owned());
        HostIdentity { hostname, machine_id }
    }

    /// The statement's `host` line's value.
    pub fn line(&self) -> String {
        format!("{} (machine-id {})", self.hostname, self.machine_id)
    }
}

/// The statement of `stored` on `host`, ending with a newline.
pub fn render(host: &HostIdentity, stored: &StoredPlan) -> String {
    let plan = &stored.plan;
    let time = crate::text::rfc3339_seconds;
    let mut out = String::new();
    let _ = writeln!(out, "{STATEMENT_HEADER}");
    let _ = writeln!(out, "host: {}", host.line());
    let _ = writeln!(out, "plan: {}", plan.id);
    let _ = writeln!(out, "action: {}", plan.action.as_str());
    // Validated values, as canonical JSON: control characters escaped, one line.
    let _ = writeln!(out, "parameters: {}", canonical::to_string(&plan.parameters).unwrap_or_default());
    let _ = writeln!(out, "requested by: {}", plan.requester);
    let _ = writeln!(out, "made: {}", time(plan.created_at));
    let _ = writeln!(out, "expires: {}", time(plan.expires_at));
    let _ = writeln!(out, "digest: {}", plan.digest);
    let _ = writeln!(out, "I approve this plan to run once on this host, and nothing else.");
    out
}
