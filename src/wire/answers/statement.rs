//! The `statement` answer (issue 42): the text an operator signs to approve
//! one plan from their own device, as the host rendered it from its record
//! (`host::statement`). The workstation's `volce-lab approve` shows it and
//! signs exactly these bytes; the host accepts the signature only over the
//! statement it renders again when the approval arrives.

use serde::{Deserialize, Serialize};

use crate::vocab::PlanId;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalStatement {
    pub plan_id: PlanId,
    /// The namespace to sign in (`crate::wire::signed::NAMESPACE`).
    pub namespace: String,
    /// The statement, ending with a newline.
    pub text: String,
    /// The host's identity line, as the statement's `host:` names it: what
    /// a rollout's line for this host must say (issue 43).
    pub host: String,
}
