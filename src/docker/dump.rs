//! An accessory's database through its own tool (issue 41): the policy's
//! `dump` command run in the accessory's container, its stdout streamed
//! into `restic backup --stdin` as one file (`<app>@<name>.dump`); and back,
//! `restic dump` of that file streamed into the policy's `load` command.
//! Runs as root in the host helper; both processes are fixed paths with
//! argv from the sealed plan, joined by a pipe in `crate::exec` (no shell,
//! nothing written to the app's data or the host's disk on the way).
//!
//! Invariants enforced here:
//! - the accessory's credential reaches its command only through a 0600
//!   env file named in argv by path ([`CREDENTIAL`]), deleted when the
//!   command ends, as a rotation hands its own;
//! - a dump is whole or it is not kept: when the dump command fails, writes
//!   nothing, or restic's run cannot be read, every snapshot with the
//!   dump's tags is forgotten at once (restic may have kept what it got),
//!   and the backup fails either way;
//! - a load is trusted only as its contract says (docs/policy.md): a
//!   nonzero exit changed nothing (the plan `failed`); a load that said yes
//!   to a stream restic did not finish, or that was killed, leaves a
//!   database nobody can vouch for (an error the plan needs an operator for).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::EngineError;
use super::accessory_files::{existing_secret, remove_secret, write_env};
use super::program::{DOCKER, docker_env};
use super::restic::{forget_tagged, restic_spec, summary};
use crate::exec::{ExecutionStatus, ProcessOutput, ProcessSpec, run_piped_blocking};
use crate::vocab::{AppName, BackupConfig, CREDENTIAL, DumpDone, DumpUse, SnapshotId};

/// The step of a dump that failed and whose snapshot could not be
/// forgotten either: the operator forgets it by hand.
pub const CUT_DUMP_KEPT: &str = "forget a cut dump (the operator forgets it: docs/data.md)";

/// What a command may print on stdout or stderr before it is stopped (all
/// of it discarded): a load that reports as it goes must not die halfway.
const COMMAND_OUTPUT: usize = 1 << 20;
/// SIGPIPE: what the docker CLI dies of when restic stopped reading.
const SIGPIPE: i32 = 13;

/// Streams `dump`'s database into the repository as a snapshot with
/// `tags`, within `timeout`. `BackupFailed` when nothing was kept; the
/// database only read.
pub fn stream_out(
    config: &BackupConfig,
    dump: &DumpUse,
    app: &AppName,
    tags: &[String],
    timeout: Duration,
) -> Result<DumpDone, EngineError> {
    let failed = |step| EngineError::BackupFailed { step };
    let started = std::time::Instant::now();
    let env = CommandEnv::write(dump).map_err(|_| failed("hand the dump command its credential"))?;
    let producer = docker_exec(&env.path, dump, dump.dump.all(), false, timeout);
    let mut args =
        vec!["backup".to_owned(), "--stdin".to_owned(), "--stdin-filename".to_owned(), dump.file_name(app)];
    for tag in tags {
        args.extend(["--tag".to_owned(), tag.clone()]);
    }
    let (out, into) = run_piped_blocking(&producer, &restic_spec(config, &args, timeout));
    drop(env);
    let recorded = ok(&into).then(|| summary(&into.stdout)).flatten();
    let written = recorded.as_ref().map(|kept| kept.total_bytes_processed);
    let Some(step) = failed_step(&out.execution, ok(&into), written) else {
        let kept = recorded.ok_or(failed("read restic's summary of the dump"))?;
        return Ok(DumpDone {
            accessory: dump.accessory.name.clone(),
            snapshot: kept.snapshot_id,
            bytes: kept.total_bytes_processed,
            added_bytes: kept.data_added,
        });
    };
    // A restic that exited nonzero by itself kept nothing (an unreachable
    // repository, say: its own step is the news).
    if !ok(&into) && into.execution.completion == crate::exec::Completion::Confirmed {
        return Err(failed(step));
    }
    // Whatever restic got may be in the repository under these tags (a
    // restic killed after it wrote the snapshot too): a cut dump must never
    // pass for a backup.
    let left = timeout.saturating_sub(started.elapsed());
    match forget_tagged(config, tags, left) {
        Ok(()) => Err(failed(step)),
        Err(_) => Err(failed(CUT_DUMP_KEPT)),
    }
}

/// Why a dump is not kept, or `None` when it is: the dump command ended
/// well (`dump`), restic too (`restic_ok`) and read `written` bytes of it.
fn failed_step(dump: &crate::exec::Execution, restic_ok: bool, written: Option<u64>) -> Option<&'static str> {
    let dump_ok = dump.execution_status == ExecutionStatus::Ok;
    match written {
        Some(bytes) if dump_ok && bytes > 0 => None,
        Some(_) if dump_ok => Some("the dump command wrote nothing"),
        // The docker CLI died of SIGPIPE: restic stopped reading first.
        _ if !dump_ok && dump.signal != Some(SIGPIPE) => Some("dump the accessory's database"),
        None if !restic_ok => Some("restic backup of the accessory's dump"),
        _ => Some("read restic's summary of the dump"),
    }
}

/// Streams the dump `snapshot` holds into `dump`'s `load` command.
/// `BackupFailed` when the load says it changed nothing; an error of the
/// host when it may have changed something nobody can vouch for.
pub fn stream_in(
    config: &BackupConfig,
    dump: &DumpUse,
    app: &AppName,
    snapshot: &SnapshotId,
    timeout: Duration,
) -> Result<(), EngineError> {
    let env = CommandEnv::write(dump)
        .map_err(|_| EngineError::BackupFailed { step: "hand the load command its credential" })?;
    let args = ["dump".to_owned(), snapshot.as_str().to_owned(), dump.snapshot_path(app)];
    let producer = restic_spec(config, &args, timeout);
    let (out, into) =
        run_piped_blocking(&producer, &docker_exec(&env.path, dump, dump.load.all(), true, timeout));
    drop(env);
    load_outcome(&into.execution, &out.execution)
}

/// What a load's end says, beside restic's that sent it the dump.
fn load_outcome(loaded: &crate::exec::Execution, restic: &crate::exec::Execution) -> Result<(), EngineError> {
    let unchanged = |step| Err(EngineError::BackupFailed { step });
    let restic_ok = restic.execution_status == ExecutionStatus::Ok;
    // restic dies of SIGPIPE when the load stopped reading first: the
    // load's failure, not the repository's.
    let restic_failed_first = !restic_ok && restic.signal != Some(SIGPIPE);
    match (loaded.execution_status, loaded.exit_code, restic_ok) {
        (ExecutionStatus::Ok, _, true) => Ok(()),
        // It took a stream restic did not finish and said yes: its
        // contract says a cut dump fails, so only an operator can tell.
        (ExecutionStatus::Ok, _, false) => {
            Err(EngineError::Host { step: "read the whole dump from the repository" })
        }
        // Nothing ran: the load never started, or docker could not run it
        // (125 to 127 are docker exec's own exits).
        (ExecutionStatus::LaunchFailed, ..) => unchanged("start the load command"),
        (ExecutionStatus::NonzeroExit, Some(125..=127), _) => unchanged("start the load command"),
        // The contract: a nonzero exit changed nothing. 128 and above is a
        // load killed inside the container (the OOM killer, say): unknown.
        (ExecutionStatus::NonzeroExit, Some(code), _) if code < 128 => {
            unchanged(if restic_failed_first { "restic dump" } else { "load the dump" })
        }
        _ => Err(EngineError::Host { step: "load the dump (it did not end by itself)" }),
    }
}

fn ok(output: &ProcessOutput) -> bool {
    output.execution.execution_status == ExecutionStatus::Ok
}

/// `docker exec [-i] --env-file ENV CONTAINER argv...`: the accessory's
/// own command, as its image's user.
fn docker_exec(env: &Path, dump: &DumpUse, argv: &[String], stdin: bool, timeout: Duration) -> ProcessSpec {
    let mut args = vec!["exec".to_owned()];
    if stdin {
        args.push("-i".to_owned());
    }
    args.extend(["--env-file".to_owned(), env.display().to_string(), dump.container.to_string()]);
    args.extend(argv.iter().cloned());
    let mut spec = ProcessSpec::new(DOCKER, args);
    spec.env = docker_env();
    spec.timeout = timeout;
    (spec.stdout_limit, spec.stderr_limit) = (COMMAND_OUTPUT, COMMAND_OUTPUT);
    spec
}

/// The env file that hands the command the accessory's credential, in the
/// app's directory (`dump-<name>.env`, 0600), deleted when dropped; one a
/// stopped helper left goes first (remove_app deletes it too).
struct CommandEnv {
    path: PathBuf,
}

impl CommandEnv {
    fn write(dump: &DumpUse) -> Result<CommandEnv, EngineError> {
        let credential = existing_secret(&dump.accessory.secret_of())?;
        let path = dump.accessory.dump_env_of(&dump.app_dir);
        remove_secret(&path);
        write_env(&path, &format!("{CREDENTIAL}={}\n", credential.expose()))?;
        Ok(CommandEnv { path })
    }
}

impl Drop for CommandEnv {
    fn drop(&mut self) {
        remove_secret(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump_use(dir: &Path) -> DumpUse {
        let (image, mount) = (dir.join("blog@db.ext4"), dir.join("blog@db"));
        serde_json::from_value(serde_json::json!({
            "accessory": {
                "name": "db", "image": format!("registry.example/pg@sha256:{}", "4".repeat(64)), "port": 5432,
                "container_name": "vl-blog-db",
                "data": {"path": "/srv/pgdata", "image": image, "mount": mount, "max_mib": 128},
                "health": ["/usr/bin/pg_isready"]
            },
            "container": "c".repeat(64),
            "app_dir": dir,
            "dump": ["/bin/dump-pg", "--format", "custom"],
            "load": ["/bin/load-pg"]
        }))
        .unwrap()
    }

    fn ended(status: ExecutionStatus, exit_code: Option<i32>) -> crate::exec::Execution {
        crate::exec::Execution { exit_code, ..crate::exec::Execution::not_started(status) }
    }

    /// Tried: a whole dump, an empty one, a dump command that failed (with
    /// or without restic keeping what it got), one that died of SIGPIPE
    /// because restic failed first, restic's summary unreadable.
    #[test]
    fn a_dump_is_kept_only_when_both_ends_say_it_is_whole() {
        use ExecutionStatus::{NonzeroExit, Signaled};
        let ok = ended(ExecutionStatus::Ok, Some(0));
        assert_eq!(failed_step(&ok, true, Some(2048)), None);
        assert_eq!(failed_step(&ok, true, Some(0)), Some("the dump command wrote nothing"));
        let failed = ended(NonzeroExit, Some(1));
        assert_eq!(failed_step(&failed, true, Some(512)), Some("dump the accessory's database"));
        assert_eq!(failed_step(&failed, false, None), Some("dump the accessory's database"));
        let piped = crate::exec::Execution { signal: Some(SIGPIPE), ..ended(Signaled, None) };
        assert_eq!(failed_step(&piped, false, None), Some("restic backup of the accessory's dump"));
        assert_eq!(failed_step(&ok, true, None), Some("read restic's summary of the dump"));
    }

    /// Tried: each way a load ends, with restic's stream whole, cut by
    /// restic's own failure, or cut because the load stopped reading.
    /// Only "nothing ran" and a plain nonzero exit are `failed` (its
    /// contract: it changed nothing); a yes to a cut stream, a load killed
    /// inside the container, a timeout are for an operator.
    #[test]
    fn a_load_is_trusted_only_as_its_contract_says() {
        use ExecutionStatus::{LaunchFailed, NonzeroExit, Signaled, Timeout};
        let whole = ended(ExecutionStatus::Ok, Some(0));
        let cut = ended(NonzeroExit, Some(1));
        let piped = crate::exec::Execution { signal: Some(SIGPIPE), ..ended(Signaled, None) };
        let step = |status, code, restic: &crate::exec::Execution| match load_outcome(
            &ended(status, code),
            restic,
        ) {
            Ok(()) => "ok",
            Err(EngineError::BackupFailed { step }) => step,
            Err(EngineError::Host { .. }) => "needs inspection",
            Err(_) => "other",
        };
        assert_eq!(step(ExecutionStatus::Ok, Some(0), &whole), "ok");
        assert_eq!(step(ExecutionStatus::Ok, Some(0), &cut), "needs inspection");
        assert_eq!(step(LaunchFailed, None, &cut), "start the load command");
        assert_eq!(step(NonzeroExit, Some(126), &whole), "start the load command");
        assert_eq!(step(NonzeroExit, Some(1), &whole), "load the dump");
        assert_eq!(
            step(NonzeroExit, Some(1), &piped),
            "load the dump",
            "restic died because the load stopped"
        );
        assert_eq!(step(NonzeroExit, Some(1), &cut), "restic dump");
        assert_eq!(step(NonzeroExit, Some(137), &whole), "needs inspection");
        assert_eq!(step(Timeout, None, &whole), "needs inspection");
        assert_eq!(step(Signaled, None, &whole), "needs inspection");
    }

    /// Tried: the dump's and the load's docker argv; only the load reads stdin.
    #[test]
    fn the_command_runs_in_the_recorded_container_with_its_env_file() {
        let dir = tempfile::tempdir().unwrap();
        let dump = dump_use(dir.path());
        let env = Path::new("/state/apps/blog/dump-db.env");
        let out = docker_exec(env, &dump, dump.dump.all(), false, Duration::from_secs(5));
        let argv: Vec<String> = out.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        let container = "c".repeat(64);
        assert_eq!(
            argv,
            [
                "exec",
                "--env-file",
                "/state/apps/blog/dump-db.env",
                container.as_str(),
                "/bin/dump-pg",
                "--format",
                "custom"
            ]
        );
        let into = docker_exec(env, &dump, dump.load.all(), true, Duration::from_secs(5));
        assert_eq!(into.args[1], "-i");
        assert_eq!(out.program, Path::new(DOCKER));
    }

    /// Tried: the env file holds the credential, 0600, and is gone once
    /// dropped; a leftover from a stopped helper is replaced, not refused.
    #[test]
    fn the_credential_reaches_the_command_through_a_private_file_that_goes() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let dump = dump_use(dir.path());
        let secret = "ab".repeat(32);
        std::fs::write(dump.accessory.secret_of(), &secret).unwrap();
        std::fs::set_permissions(dump.accessory.secret_of(), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(dir.path().join("dump-db.env"), "left by a stopped helper").unwrap();
        let env = CommandEnv::write(&dump).unwrap();
        assert_eq!(std::fs::read_to_string(&env.path).unwrap(), format!("VOLCE_LAB_PASSWORD={secret}\n"));
        assert_eq!(std::fs::metadata(&env.path).unwrap().permissions().mode() & 0o777, 0o600);
        let path = env.path.clone();
        drop(env);
        assert!(!path.exists());
        assert_eq!(dump.snapshot_path(&AppName::parse("blog").unwrap()), "/blog@db.dump");
    }
}
