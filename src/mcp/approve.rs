//! `volce-lab approve`: the operator's side of a signed approval (issue 42),
//! on their own machine, as themselves. Fetches the statement the host
//! renders for one plan (through the same checked rpc path the MCP tools
//! use: the identity gate, the management switch, the server's protocol),
//! shows it, and either leaves the signing to the operator, or signs it with
//! `ssh-keygen -Y sign` (a FIDO key asks for its touch and PIN on this
//! terminal) and prints the signed approval for the agent to carry, or
//! sends it to the host itself. Runs unprivileged.
//!
//! Nothing here decides: a statement shown here that was changed on its way
//! only makes the signature useless, since the host accepts a signature
//! over its own statement alone.

use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

use super::server::{Options, VolceLab};
use crate::config::Fleet;
use crate::exit::Exit;
use crate::inspect::{Check, Inspector, Status};
use crate::vocab::{PlanId, RolloutId};
use crate::wire::Request;
use crate::wire::answers::statement::ApprovalStatement;
use crate::wire::signed::{NAMESPACE, SignedApproval, statement_field};

/// What `volce-lab approve` was asked.
#[derive(Debug, Clone)]
pub struct ApproveArgs {
    pub target: Option<String>,
    pub plan_id: String,
    /// Sign here with this key (`ssh-keygen -Y sign -f`).
    pub key: Option<PathBuf>,
    /// An approval signed already (elsewhere), to send.
    pub signed: Option<PathBuf>,
    /// Send the signed approval to the host instead of printing it.
    pub send: bool,
    /// `plan_id` is a rollout's id (issue 43): [`run_rollout`].
    pub rollout: bool,
}

/// Runs `volce-lab approve` on `fleet`.
pub fn run(fleet: &Fleet, runtime: &tokio::runtime::Runtime, args: &ApproveArgs) -> anyhow::Result<Exit> {
    if args.rollout {
        return run_rollout(fleet, runtime, args);
    }
    // Bad arguments exit 2, as `inspect`'s do; a refusal by the server exits 1.
    let Ok(plan_id) = PlanId::parse(&args.plan_id) else {
        eprintln!(
            "volce-lab: approve: the plan id must be 32 lowercase hex characters, as the agent gave it"
        );
        return Ok(Exit::Usage);
    };
    let target = match choose(fleet, args.target.as_deref()) {
        Ok(target) => target,
        Err(error) => {
            eprintln!("volce-lab: approve: {error}");
            return Ok(Exit::Usage);
        }
    };
    let server =
        VolceLab::for_fleet(fleet, |t| Inspector::new(t.config.clone()).named(&t.name), Options::from_env());
    runtime.block_on(async {
        let identity = server.inspector(&target).check(Check::Identity).await;
        if identity.status != Status::Ok {
            bail!(
                "{target}: the identity check did not pass ({}); run `volce-lab inspect --target {target}`",
                identity.status.as_str()
            );
        }
        let signed = match &args.signed {
            Some(file) => read_signed(file)?,
            None => {
                let statement = statement(&server, &target, &plan_id).await?;
                print!("{}", statement.text);
                let Some(key) = &args.key else {
                    eprintln!(
                        "\nSign exactly the text above (ssh-keygen -Y sign -f KEY -n {NAMESPACE}), or run this again \
                         with --key KEY."
                    );
                    return Ok(Exit::Ok);
                };
                let digest = statement_field(&statement.text, "digest").context("the statement names no digest")?;
                confirm(digest, "digest")?;
                sign(&statement.text, key)?
            }
        };
        if !args.send {
            eprintln!("\nGive the agent this signed approval, unchanged (service_execute's signed_approval):\n");
            print!("{}", signed.to_text());
            return Ok(Exit::Ok);
        }
        let (answer, _) = server.ask_target(&target, &Request::signed_approval(&plan_id, &signed)).await;
        println!("{}: {}", answer.status.as_str(), answer.message);
        Ok(if answer.status == Status::Ok { Exit::Ok } else { Exit::Failure })
    })
}

fn choose(fleet: &Fleet, target: Option<&str>) -> anyhow::Result<String> {
    match (target, fleet.names().as_slice()) {
        (None, [one]) => Ok((*one).to_owned()),
        (None, names) => {
            bail!("several targets are configured ({}); name one with --target NAME", names.join(", "))
        }
        (Some(name), names) if names.contains(&name) => Ok(name.to_owned()),
        (Some(name), names) => bail!(
            "--target {} names no configured target; the targets are {}",
            crate::text::quoted(name, 40),
            names.join(", ")
        ),
    }
}

async fn statement(server: &VolceLab, target: &str, plan_id: &PlanId) -> anyhow::Result<ApprovalStatement> {
    let (answer, _) = server.ask_target(target, &Request::statement(plan_id)).await;
    if answer.status != Status::Ok {
        bail!("{target}: {}: {}", answer.status.as_str(), answer.message);
    }
    let body = answer.result.map(|r| r.object).context("the host's answer carries no statement")?;
    serde_json::from_value(serde_json::Value::Object(body))
        .context("the host's statement does not follow the contract")
}

/// `volce-lab approve --rollout ID`: each server of the rollout renders its
/// statement of its plan again, which must hash to what the manifest
/// recorded; then the rollout's one statement is printed, and with `--key`
/// confirmed and signed. Never sent: the agent carries it to each server
/// when that server's batch starts.
fn run_rollout(fleet: &Fleet, runtime: &tokio::runtime::Runtime, args: &ApproveArgs) -> anyhow::Result<Exit> {
    let Ok(rollout_id) = RolloutId::parse(&args.plan_id) else {
        eprintln!("volce-lab: approve: a rollout id is 32 lowercase hex characters, as the agent gave it");
        return Ok(Exit::Usage);
    };
    let audit = super::audit::Audit::from_env();
    let manifest = super::rollout::Rollouts::beside(audit.path())
        .load(&rollout_id)?
        .with_context(|| format!("this workstation recorded no rollout {rollout_id}"))?;
    let statement = manifest.statement().context("no server of this rollout needs an approval")?;
    let server =
        VolceLab::for_fleet(fleet, |t| Inspector::new(t.config.clone()).named(&t.name), Options::from_env());
    runtime.block_on(async {
        for entry in manifest.entries.iter().filter(|e| e.requires_approval) {
            let target = entry.target.as_str();
            if !fleet.names().contains(&target) {
                bail!("{target}, a server of this rollout, is no longer a configured target");
            }
            let identity = server.inspector(target).check(Check::Identity).await;
            if identity.status != Status::Ok {
                bail!("{target}: the identity check did not pass ({})", identity.status.as_str());
            }
            let now = self::statement(&server, target, &entry.plan_id).await?;
            let hash = crate::text::hex(&<sha2::Sha256 as sha2::Digest>::digest(now.text.as_bytes()));
            if entry.statement_sha256.as_deref() != Some(hash.as_str())
                || entry.host.as_deref() != Some(now.host.as_str())
            {
                bail!(
                    "{target} renders its plan {} differently from what the rollout recorded; nothing was \
                     signed. Plan the rollout again.",
                    entry.plan_id
                );
            }
        }
        Ok(())
    })?;
    let text = statement.render();
    print!("{text}");
    let Some(key) = &args.key else {
        eprintln!(
            "\nSign exactly the text above (ssh-keygen -Y sign -f KEY -n {NAMESPACE}), or run this again with --key KEY."
        );
        return Ok(Exit::Ok);
    };
    confirm(&statement.manifest_sha256, "manifest")?;
    let signed = sign(&text, key)?;
    eprintln!(
        "\nGive the agent this signed rollout, unchanged (service_execute's signed_approval, with `rollout`):\n"
    );
    print!("{}", signed.to_text());
    Ok(Exit::Ok)
}

/// The operator types the first 8 characters of `digest`, the statement's
/// `field:` line (a plan's digest, a rollout's manifest hash): they read it.
fn confirm(digest: &str, field: &str) -> anyhow::Result<()> {
    eprint!("\nTo sign this statement, type the first 8 characters of its {field}: ");
    std::io::stderr().flush().ok();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).context("cannot read the answer")?;
    if line.trim().len() != 8 || !digest.starts_with(line.trim()) {
        bail!("that is not the digest's first 8 characters; nothing was signed");
    }
    Ok(())
}

/// `ssh-keygen -Y sign` over the statement, on this terminal (a FIDO key
/// asks for its touch and PIN here), in a private temporary directory.
fn sign(statement: &str, key: &Path) -> anyhow::Result<SignedApproval> {
    let dir = tempfile_dir()?;
    let file = dir.0.join("statement");
    std::fs::write(&file, statement).context("cannot write the statement to sign")?;
    let status = Command::new(crate::host::signed::keygen::SSH_KEYGEN)
        .args(["-Y", "sign", "-n", NAMESPACE, "-f"])
        .arg(key)
        .arg(&file)
        .status()
        .context("cannot start ssh-keygen (package openssh-client)")?;
    if !status.success() {
        bail!("ssh-keygen did not sign (it exited {status}); nothing was signed");
    }
    let signature =
        std::fs::read_to_string(dir.0.join("statement.sig")).context("ssh-keygen wrote no signature")?;
    Ok(SignedApproval { statement: statement.to_owned(), signature })
}

fn read_signed(file: &Path) -> anyhow::Result<SignedApproval> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    SignedApproval::parse(&text).map_err(|refusal| anyhow::anyhow!("{}: {}", refusal.code, refusal.message))
}

/// A private directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempfile_dir() -> anyhow::Result<TempDir> {
    use std::os::unix::fs::DirBuilderExt as _;
    let dir = std::env::temp_dir().join(format!("volce-lab-approve-{}", uuid::Uuid::new_v4().simple()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .context("cannot make a private temporary directory")?;
    Ok(TempDir(dir))
}
