//! Verifying a signature with OpenSSH's own `ssh-keygen -Y` (fixed argv,
//! through `crate::exec`): the reference implementation of SSH signatures
//! and of the `allowed_signers` format (namespaces, validity windows,
//! certificate authorities), so nothing of either is written by hand here.
//! Runs as root inside the host helper.
//!
//! Security invariant: ssh-keygen reads the exact bytes the helper checked.
//! The `allowed_signers` it is given is a copy, written with the signature
//! into a fresh 0700 directory of the state directory, from the bytes read
//! under the file's ownership checks; so a file swapped after the check is
//! never the one consulted. Of ssh-keygen's output only the principals of
//! `find-principals` (one per line) are read, and only its exit status of
//! `verify`; its stderr is never kept.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::exec::{ExecutionStatus, ProcessSpec, run_blocking};
use crate::vocab::{Code, Refusal, is_user_name};
use crate::wire::signed::NAMESPACE;

/// Where Debian's openssh-client installs it.
pub const SSH_KEYGEN: &str = "/usr/bin/ssh-keygen";

/// A fresh private directory holding the two files ssh-keygen reads,
/// removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch_failed() -> Refusal {
    Refusal::new(
        Code::StateUnavailable,
        "The helper could not write the files it verifies a signature with in its state directory; nothing \
         was recorded. The operator should run volce-lab-host doctor.",
    )
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), Refusal> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(bytes))
        .map_err(|_| scratch_failed())
}

fn invalid(why: &str) -> Refusal {
    Refusal::new(
        Code::SignatureInvalid,
        format!(
            "The signature does not verify: {why}. Nothing was recorded; the operator signs this server's \
             statement again with a key listed in /etc/volce-lab/allowed_signers."
        ),
    )
}

fn keygen(args: &[&str], stdin: Option<&[u8]>) -> crate::exec::ProcessOutput {
    let mut spec = ProcessSpec::new(SSH_KEYGEN, args.iter().copied());
    spec.stdin = stdin.map(<[u8]>::to_vec);
    spec.timeout = Duration::from_secs(10);
    run_blocking(&spec)
}

/// The one principal of `allowed_signers` (its bytes) whose key made
/// `armor` over `message` in volce-lab's namespace, or `signature_invalid`
/// saying why not. `state_dir` holds the scratch directory.
pub fn verified_principal(
    state_dir: &Path,
    allowed_signers: &[u8],
    message: &[u8],
    armor: &str,
) -> Result<String, Refusal> {
    let dir = state_dir.join(format!("verify-{}", uuid::Uuid::new_v4().simple()));
    std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|_| scratch_failed())?;
    let scratch = Scratch(dir);
    let (signers, signature) = (scratch.0.join("allowed_signers"), scratch.0.join("approval.sig"));
    write_private(&signers, allowed_signers)?;
    write_private(&signature, armor.as_bytes())?;
    let (signers, signature) = (path_str(&signers)?, path_str(&signature)?);
    let found = keygen(&["-Y", "find-principals", "-f", signers, "-s", signature], None);
    if found.execution.execution_status == ExecutionStatus::LaunchFailed {
        return Err(Refusal::new(
            Code::SignatureInvalid,
            format!(
                "{SSH_KEYGEN} could not be started, so no signature can be verified on this server; nothing \
                 was recorded. The operator installs openssh-client, or approves at the terminal."
            ),
        ));
    }
    let principals: Vec<String> = if found.execution.execution_status == ExecutionStatus::Ok {
        String::from_utf8_lossy(&found.stdout).lines().map(str::to_owned).collect()
    } else {
        Vec::new()
    };
    let principal = match principals.as_slice() {
        [] => return Err(invalid("no line of allowed_signers lists the key that made it")),
        [one] if is_user_name(one) => one.clone(),
        [_] => return Err(invalid("the line of allowed_signers that lists its key names no user")),
        _ => return Err(invalid("allowed_signers lists its key for more than one person")),
    };
    let verified = keygen(
        &["-Y", "verify", "-f", signers, "-I", &principal, "-n", NAMESPACE, "-s", signature],
        Some(message),
    );
    if verified.execution.execution_status != ExecutionStatus::Ok {
        return Err(invalid(&format!(
            "it was not made over this statement by the key allowed_signers lists for {principal}, in the \
             {NAMESPACE} namespace, within the line's validity"
        )));
    }
    Ok(principal)
}

fn path_str(path: &Path) -> Result<&str, Refusal> {
    path.to_str().ok_or_else(scratch_failed)
}
