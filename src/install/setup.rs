//! `volce-lab-host setup --agent NAME --operator NAME --key FILE` and
//! `setup --undo`: the steps of docs/server-install.md after the package, done
//! idempotently and shown one line each. Runs as root on the server.
//!
//! What it makes, in order: the agent's account (the gate as its shell, key
//! login only), its home and `~/.ssh` owned by root so the account can neither
//! edit its key line nor plant a login script, the key bound to the ssh
//! gate (`restrict,command="exec ... ssh-gate"`), the one sudoers rule (written
//! beside the drop-in directory's real files under a name sudo ignores,
//! checked with `visudo -cf`, then renamed into place), a policy skeleton
//! when there is none, the state directory and database; then it runs the
//! smoke request as the agent and `doctor`. It never writes root's
//! `allowed_signers` (who may sign approvals, issue 42): that is the
//! operator's, like an existing policy; setup says whether it exists.
//!
//! Invariants:
//! - it never replaces a file it did not write unless `--replace` is given,
//!   and never touches an existing policy at all;
//! - everything it creates is recorded in a manifest under the state
//!   directory, with the sha256 of each file it wrote; `--undo` removes
//!   exactly those, and only files whose content is still what it wrote
//!   (an operator's edit is kept, and said so);
//! - no shell: each program is a fixed absolute path with argv built from
//!   validated names.
//!
//! Here: the steps, top to bottom as one pipeline. Beside it: what setup
//! accepts and writes (`setup/content.rs`), the manifest, the files written
//! through it and `--undo` (`setup/manifest.rs`); the tests are in
//! `setup/tests.rs`.

use std::fs;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use crate::exec::{self, ProcessSpec};
use crate::host::HostPaths;

const SUDOERS: &str = HostPaths::SUDOERS;
const SUDOERS_CANDIDATE: &str = HostPaths::SUDOERS_CANDIDATE;
const POLICY: &str = HostPaths::POLICY;
const STATE_DIR: &str = HostPaths::STATE_DIR;

mod adopt;
mod content;
mod manifest;
pub use content::{
    PLACEHOLDER_REGISTRY, authorized_keys_line, check_account, parse_public_key, policy_skeleton,
};
pub(crate) use manifest::write_file;
pub use manifest::{Manifest, WrittenFile, undo};
use manifest::{load_manifest, place_file, place_sudoers, save_manifest};

/// Why setup stopped. Each message names what to do next.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SetupError {
    #[error("setup must run as root (sudo volce-lab-host setup ...)")]
    NotRoot,
    #[error("{0}")]
    BadArgument(String),
    #[error(
        "{path} exists and was not written by setup; review it, then run again with --replace to overwrite it"
    )]
    WouldReplace { path: String },
    #[error("{step} failed: {why}")]
    Step { step: String, why: String },
}

fn step_failed(step: &str, why: impl std::fmt::Display) -> SetupError {
    SetupError::Step { step: step.to_owned(), why: why.to_string() }
}

/// Runs one fixed program; its stderr is not shown (only whether it worked).
fn run(step: &str, program: &str, args: &[&str], stdin: Option<&[u8]>) -> Result<Vec<u8>, SetupError> {
    let mut spec = ProcessSpec::new(program, args.iter().copied());
    spec.stdin = stdin.map(<[u8]>::to_vec);
    spec.timeout = std::time::Duration::from_secs(60);
    spec.stdout_limit = 256 * 1024;
    let outcome = exec::run_blocking(&spec);
    let execution = &outcome.execution;
    if execution.execution_status != exec::ExecutionStatus::Ok {
        return Err(step_failed(step, format!("{program} {args:?} ended {:?}", execution.execution_status)));
    }
    Ok(outcome.stdout)
}

fn say(done: bool, step: &str, detail: impl std::fmt::Display) {
    println!("{} {step}: {detail}", if done { "done" } else { "ok  " });
}

/// The arguments of `setup`.
#[derive(Debug, Clone)]
pub struct SetupArgs {
    pub agent: String,
    pub operator: String,
    pub key_file: PathBuf,
    pub replace: bool,
    /// Let setup change an existing `--agent` account (`adopt`).
    pub adopt: bool,
}

/// `setup`: each step in order; stops at the first that fails, with what
/// was done so far recorded in the manifest.
pub fn setup(args: &SetupArgs) -> Result<(), SetupError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(SetupError::NotRoot);
    }
    check_account("agent", &args.agent)?;
    check_account("operator", &args.operator)?;
    if args.agent == args.operator {
        return Err(SetupError::BadArgument("--agent and --operator must be different accounts".into()));
    }
    let key_text = fs::read_to_string(&args.key_file).map_err(|e| {
        SetupError::BadArgument(format!("--key {}: cannot read it ({})", args.key_file.display(), e.kind()))
    })?;
    let (kind, blob) = parse_public_key(&key_text)?;
    if nix::unistd::User::from_name(&args.operator).ok().flatten().is_none() {
        return Err(SetupError::BadArgument(format!(
            "--operator {}: no such account; create the person's account first (adduser {})",
            args.operator, args.operator
        )));
    }

    // Refusals that need the manifest come before anything is made.
    let mut manifest = load_manifest();
    if let Some(bound) = manifest.bound_agent().filter(|bound| *bound != args.agent) {
        return Err(SetupError::BadArgument(format!(
            "--agent {}: setup has bound {bound} to the ssh gate on this server (its key's forced command \
             and the sudoers rule that lets the gate record its refusals), and a server has one agent \
             account; run `volce-lab-host setup --undo` first, then setup for {}",
            args.agent, args.agent
        )));
    }
    let ours = manifest.created_account.as_deref() == Some(args.agent.as_str())
        || manifest.adopted.as_ref().is_some_and(|adopted| adopted.name == args.agent);
    let existing = nix::unistd::User::from_name(&args.agent).ok().flatten().filter(|_| !ours);
    let adopting = match existing {
        Some(user) => {
            let before = adopt::observe(&user)?;
            if !args.adopt {
                return Err(adopt::refusal(&before));
            }
            Some(before)
        }
        None => None,
    };

    fs::create_dir_all(STATE_DIR).map_err(|e| step_failed("state directory", e))?;
    fs::set_permissions(STATE_DIR, fs::Permissions::from_mode(0o700))
        .map_err(|e| step_failed("state directory", e))?;
    if let Some(before) = adopting {
        // Recorded before the first change, so that undo can put it back
        // whatever step stops setup.
        say(true, "agent account", format!("adopted {}: setup --undo restores it", before.name));
        manifest.adopted = Some(before);
        save_manifest(&manifest)?;
    }
    let result = setup_steps(args, &kind, &blob, &mut manifest);
    save_manifest(&manifest)?;
    result
}

/// Setup's steps in order; the first that fails stops the rest (the
/// manifest records what the earlier ones changed, for undo).
fn setup_steps(args: &SetupArgs, kind: &str, blob: &str, manifest: &mut Manifest) -> Result<(), SetupError> {
    let agent = args.agent.as_str();

    // 1. The account: key login only, the gate as its shell (sshd starts
    //    it with no shell between, and nothing else can run), in no
    //    privileged group.
    let user = agent_account(agent, manifest)?;

    // 2. Home, dotfiles and ~/.ssh owned by root: out of the account's reach.
    let home = user.dir.clone();
    if !home.is_absolute() || home == Path::new("/") {
        return Err(step_failed(
            "agent home",
            format!("{} is not a home directory setup can protect", home.display()),
        ));
    }
    protect_home(&home)?;

    // 3. The key, bound to the gate.
    agent_key(&home, kind, blob, manifest, args.replace)?;

    // 4. The one sudoers rule and its command's options, in force only
    // once visudo accepted them.
    place_sudoers(manifest, super::sudoers_file(agent).as_bytes(), args.replace)?;
    manifest.agent = Some(agent.to_owned());

    // 5. A policy skeleton, never over an existing policy.
    if Path::new(POLICY).exists() {
        say(false, "policy", format!("{POLICY} exists (left as it is)"));
    } else {
        let skeleton = policy_skeleton(&args.operator);
        if let Some(etc) = Path::new(POLICY).parent() {
            fs::create_dir_all(etc).map_err(|e| step_failed("policy", e))?;
        }
        place_file(manifest, "policy", Path::new(POLICY), skeleton.as_bytes(), 0o600, false)?;
        println!(
            "     the catalog is empty: pin the gateway and the app images you reviewed with\n       \
             sudo volce-lab-host catalog gateway-image IMAGE\n       \
             sudo volce-lab-host catalog pin KEY IMAGE"
        );
    }

    // 5b. Who may sign approvals on their own device: the operator's file,
    //     which setup neither writes nor removes (so --undo never takes it).
    let signers = HostPaths::fixed().allowed_signers();
    say(false, "allowed_signers", signers_note(&signers, signers.exists()));

    // 6. The database, so doctor has something to check before any rpc.
    let database = HostPaths::fixed().database();
    crate::store::Store::open(&database).map_err(|e| step_failed("database", e))?;
    say(false, "database", format!("{} is at the current schema", database.display()));

    // 7. The smoke request, as the agent, through the exact sudoers rule.
    smoke_request(agent);
    Ok(())
}

/// Setup's line on `allowed_signers`: signed approvals stay off without
/// it, and doctor (run next) lists its signers when it exists.
fn signers_note(path: &Path, exists: bool) -> String {
    if exists {
        format!(
            "{} exists (the operator's, left as it is): doctor lists who may sign approvals",
            path.display()
        )
    } else {
        format!(
            "{} does not exist: approvals are taken at this server's terminal only; to approve from your own \
             device, see docs/operator.md (\"Approve from your own device\")",
            path.display()
        )
    }
}

/// Step 1: the agent's account, made when it is missing, with the gate's
/// shell, no usable password, and in no privileged group.
fn agent_account(agent: &str, manifest: &mut Manifest) -> Result<nix::unistd::User, SetupError> {
    let user = match nix::unistd::User::from_name(agent).ok().flatten() {
        Some(user) => {
            say(false, "agent account", format!("{agent} exists"));
            user
        }
        None => {
            run(
                "agent account",
                "/usr/sbin/useradd",
                &["--create-home", "--shell", adopt::SHELL, "--", agent],
                None,
            )?;
            let user = nix::unistd::User::from_name(agent).ok().flatten().ok_or_else(|| {
                step_failed("agent account", "useradd succeeded but the account is not there")
            })?;
            manifest.created_account = Some(agent.to_owned());
            manifest.created_home = Some(user.dir.clone());
            say(true, "agent account", format!("created {agent}"));
            user
        }
    };
    if user.shell != Path::new(adopt::SHELL) {
        run("agent shell", "/usr/sbin/usermod", &["--shell", adopt::SHELL, "--", agent], None)?;
        say(true, "agent shell", format!("{} -> {}", user.shell.display(), adopt::SHELL));
    } else {
        say(false, "agent shell", adopt::SHELL);
    }
    // `*` (not `!`): a locked password makes sshd refuse key logins too.
    run("agent password", "/usr/sbin/usermod", &["-p", adopt::PASSWORD, "--", agent], None)?;
    let groups = String::from_utf8_lossy(&run("agent groups", "/usr/bin/id", &["-Gn", "--", agent], None)?)
        .into_owned();
    if let Some(bad) = groups.split_whitespace().find(|g| super::PRIVILEGED_GROUPS.contains(g)) {
        return Err(step_failed(
            "agent groups",
            format!(
                "{agent} is in group {bad}, which bypasses every rule; remove it (gpasswd -d {agent} {bad}) and run again"
            ),
        ));
    }
    Ok(user)
}

/// Step 3: `~/.ssh` root's, and the one authorized key, bound to the gate.
fn agent_key(
    home: &Path,
    kind: &str,
    blob: &str,
    manifest: &mut Manifest,
    replace: bool,
) -> Result<(), SetupError> {
    let ssh_dir = home.join(".ssh");
    if !ssh_dir.is_dir() {
        fs::create_dir(&ssh_dir).map_err(|e| step_failed("agent ~/.ssh", e))?;
    }
    nix::unistd::chown(&ssh_dir, Some(nix::unistd::Uid::from_raw(0)), Some(nix::unistd::Gid::from_raw(0)))
        .map_err(|e| step_failed("agent ~/.ssh", e))?;
    fs::set_permissions(&ssh_dir, fs::Permissions::from_mode(0o755))
        .map_err(|e| step_failed("agent ~/.ssh", e))?;
    let line = authorized_keys_line(kind, blob);
    place_file(manifest, "agent key", &ssh_dir.join("authorized_keys"), line.as_bytes(), 0o644, replace)
}

/// Step 7: the agent's rpc through the exact sudoers rule, as the agent.
/// Reported, never fatal: doctor says why it failed.
fn smoke_request(agent: &str) {
    let reply = run(
        "smoke request",
        "/usr/sbin/runuser",
        &[&["-u", agent, "--", HostPaths::SUDO][..], crate::wire::remote::RPC_ARGS].concat(),
        Some(br#"{"operation":"gateway_status"}"#),
    );
    match reply {
        Ok(reply) => {
            say(false, "smoke request", format!("rpc answered: {}", String::from_utf8_lossy(&reply).trim()))
        }
        Err(why) => {
            println!("FAIL smoke request: {why}\n     fix: run `sudo volce-lab-host doctor` for the reason")
        }
    }
}

/// The home directory and every dotfile in it become root's and lose group
/// and world write; the account keeps read access to what it had.
fn protect_home(home: &Path) -> Result<(), SetupError> {
    let (root, root_group) = (Some(nix::unistd::Uid::from_raw(0)), Some(nix::unistd::Gid::from_raw(0)));
    nix::unistd::chown(home, root, root_group).map_err(|e| step_failed("agent home", e))?;
    let mode = fs::metadata(home).map_err(|e| step_failed("agent home", e))?.mode() & 0o7777;
    fs::set_permissions(home, fs::Permissions::from_mode((mode & !0o022) | 0o755))
        .map_err(|e| step_failed("agent home", e))?;
    for entry in fs::read_dir(home).map_err(|e| step_failed("agent home", e))?.flatten() {
        if !entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let meta = fs::symlink_metadata(&path).map_err(|e| step_failed("agent dotfiles", e))?;
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            &path,
            root,
            root_group,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(|e| step_failed("agent dotfiles", e))?;
        if !meta.file_type().is_symlink() {
            fs::set_permissions(&path, fs::Permissions::from_mode(meta.mode() & 0o7777 & !0o022))
                .map_err(|e| step_failed("agent dotfiles", e))?;
        }
    }
    say(false, "agent home", format!("{} and its dotfiles are root's", home.display()));
    Ok(())
}

/// `volce-lab-host setup ...` in the shipped binary: the steps, then
/// doctor's report; exit 0 only when both are content.
pub fn run_setup(args: Option<SetupArgs>) -> crate::exit::Exit {
    use crate::exit::Exit;
    let outcome = match &args {
        Some(args) => setup(args),
        None => undo(),
    };
    match outcome {
        Err(SetupError::NotRoot) => {
            eprintln!("volce-lab-host: {}", SetupError::NotRoot);
            Exit::Usage
        }
        Err(error @ SetupError::BadArgument(_)) => {
            eprintln!("volce-lab-host setup: {error}");
            Exit::Usage
        }
        Err(error) => {
            eprintln!("volce-lab-host setup: {error}");
            Exit::Failure
        }
        Ok(()) if args.is_some() => {
            println!("\nvolce-lab-host doctor:");
            super::doctor::run_doctor()
        }
        Ok(()) => Exit::Ok,
    }
}

#[cfg(test)]
mod tests;
