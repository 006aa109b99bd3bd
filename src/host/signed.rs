//! Approvals signed on the operator's own device (issue 42): the checks
//! that turn a carried [`SignedApproval`] into a verified signer, before the
//! controller records the approval as the terminal's `approve` does. Runs
//! as root inside the host helper's `rpc`.
//!
//! Security invariants:
//! - off unless the operator turned it on twice: the policy's
//!   `signed_approvals` and root's `/etc/volce-lab/allowed_signers`;
//! - `allowed_signers` passes the policy's checks (root's, not group- or
//!   world-writable, no symlink, in a directory that passes them too), or
//!   nothing is verified (`signers_file_unsafe`);
//! - the signature is verified by ssh-keygen over the statement as carried,
//!   in volce-lab's namespace, against the checked bytes of that file
//!   (`keygen.rs`); only then are its key type and principal believed, and
//!   a key held in a file counts only where the policy allows it;
//! - the controller then requires the carried statement to be, byte for
//!   byte, the one this host renders from its own record of the plan
//!   (`statement.rs`), so what the operator signed is what runs.

pub mod keygen;
pub mod sshsig;
pub mod statement;

use std::io::Read as _;
use std::path::PathBuf;

use sha2::{Digest as _, Sha256};

use super::paths::{self, HostPaths};
use crate::control::policy::Policy;
use crate::store::SignedBy;
use crate::vocab::{Code, Refusal};
use crate::wire::signed::{NAMESPACE, SignedApproval};
pub use statement::HostIdentity;

/// The most bytes of `allowed_signers` read: thousands of key lines.
pub const SIGNERS_MAX_BYTES: u64 = 256 * 1024;

/// A signature that verified: who signed, with which key, over what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    /// The principal `allowed_signers` names for the key: a user name.
    pub principal: String,
    pub key: sshsig::SigFacts,
    /// sha256 (hex) of the statement as signed.
    pub statement_sha256: String,
}

impl Signer {
    /// What the `approved` row records of it.
    pub fn signed_by(&self) -> SignedBy {
        SignedBy { key: self.key.fingerprint.clone(), statement_sha256: self.statement_sha256.clone() }
    }
}

/// Where and as what a host verifies signatures.
#[derive(Debug, Clone)]
pub struct Verifier {
    pub allowed_signers: PathBuf,
    pub owner_uid: u32,
    /// Where ssh-keygen's scratch directory goes: the state directory.
    pub scratch: PathBuf,
    pub identity: HostIdentity,
}

impl Verifier {
    /// The verifier of the helper on `paths`, as this machine names itself.
    pub fn of(paths: &HostPaths) -> Verifier {
        Verifier {
            allowed_signers: paths.allowed_signers(),
            owner_uid: paths.owner_uid,
            scratch: paths.state_dir.clone(),
            identity: HostIdentity::observe(),
        }
    }

    /// Verifies `signed`'s signature and says who made it, or refuses with
    /// the code of the first check that fails. Does not look at the plan.
    pub fn verify(&self, policy: &Policy, signed: &SignedApproval) -> Result<Signer, Refusal> {
        let Some(rules) = policy.signed_approvals else {
            return Err(off("the policy has no `signed_approvals`"));
        };
        let signers = self.signers()?;
        let facts = sshsig::facts(&signed.signature).ok_or_else(|| {
            Refusal::new(
                Code::SignedApprovalMalformed,
                "The signature block is not an OpenSSH signature; nothing was recorded. Give the whole text \
                 `volce-lab approve` printed, unchanged.",
            )
        })?;
        if facts.namespace != NAMESPACE {
            return Err(Refusal::new(
                Code::SignatureNamespace,
                format!(
                    "The signature was made for the namespace {:?}, not {NAMESPACE}: it signs something else, \
                     not a volce-lab approval. Nothing was recorded; sign with `volce-lab approve`.",
                    crate::text::for_terminal(&facts.namespace)
                ),
            ));
        }
        let principal = keygen::verified_principal(
            &self.scratch,
            &signers,
            signed.statement.as_bytes(),
            &signed.signature,
        )?;
        if !facts.hardware_key() && !rules.software_keys {
            return Err(Refusal::new(
                Code::SoftwareKeyRefused,
                format!(
                    "The signature verifies, but {principal}'s key {} ({}) is held in a file, and this server's \
                     policy accepts only hardware (FIDO, sk-) keys for approvals. Nothing was recorded; sign \
                     with a FIDO key listed in allowed_signers.",
                    facts.fingerprint, facts.key_type
                ),
            ));
        }
        let statement_sha256 = crate::text::hex(&Sha256::digest(signed.statement.as_bytes()));
        Ok(Signer { principal, key: facts, statement_sha256 })
    }

    /// The bytes of `allowed_signers`, read under the policy's checks.
    fn signers(&self) -> Result<Vec<u8>, Refusal> {
        let path = &self.allowed_signers;
        let file = paths::open_owned_file(path, self.owner_uid)
            .map_err(|refusal| {
                Refusal::new(
                    Code::SignersFileUnsafe,
                    format!(
                        "{} Nothing was verified; the operator makes it root's file, writable by root only \
                         (chown root:root, chmod 0644), and runs volce-lab-host doctor.",
                        refusal.message
                    ),
                )
            })?
            .ok_or_else(|| off(&format!("{} does not exist", path.display())))?;
        let mut bytes = Vec::new();
        file.take(SIGNERS_MAX_BYTES + 1).read_to_end(&mut bytes).map_err(|_| {
            Refusal::new(
                Code::SignersFileUnsafe,
                format!(
                    "{} cannot be read; nothing was verified. Run volce-lab-host doctor.",
                    path.display()
                ),
            )
        })?;
        if bytes.len() as u64 > SIGNERS_MAX_BYTES {
            return Err(Refusal::new(
                Code::SignersFileUnsafe,
                format!("{} is larger than 256 KiB; nothing was verified.", path.display()),
            ));
        }
        Ok(bytes)
    }
}

fn off(why: &str) -> Refusal {
    Refusal::new(
        Code::SignedApprovalsOff,
        format!(
            "This server takes approvals at its terminal only ({why}); nothing was recorded. The operator \
             approves there with `sudo volce-lab-host approve`, or enables signed approvals (docs/operator.md)."
        ),
    )
}
