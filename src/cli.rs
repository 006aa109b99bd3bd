//! Command-line entry: clap types, the choice between the workstation CLI and
//! host mode, and the mapping of outcomes to exit codes. Runs with the
//! caller's privilege; host mode checks for root itself (see `host`).
//!
//! A leaf: it converts arguments into typed calls of the library's entry
//! functions (`inspect::report::run`, `mcp::serve_stdio`, `host::run_*`,
//! `install::doctor::run_doctor`, `install::setup::run_setup`, `install::catalog`, `install::data`, `install::state`), and nothing it calls imports anything from here.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use crate::config::Fleet;
use crate::exit::Exit;
use crate::inspect::report::Which;

/// The file name that selects host mode. Exact match only: a copy named
/// `volce-lab-host2` or `volce-lab-host.bak` is the ordinary CLI.
pub const HOST_NAME: &str = "volce-lab-host";

#[derive(Debug, Parser)]
#[command(name = "volce-lab", version, about = "Let an AI agent look after Linux servers, safely.")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run identity, disk and web_status once and print a short report.
    Inspect {
        /// Print one JSON result per line instead of the report.
        #[arg(long)]
        json: bool,
        /// The configured target to check (needed when several are configured).
        #[arg(long, value_name = "NAME", conflicts_with = "all")]
        target: Option<String>,
        /// Check every configured target, one after another.
        #[arg(long)]
        all: bool,
    },
    /// List the configured targets, their groups and whether an ssh master is up; starts nothing.
    Targets,
    /// Serve the MCP tools on stdin/stdout (started by an agent client).
    McpServe,
    /// Approve a plan from your own machine: print the server's statement of it, sign it with your
    /// SSH key (a FIDO key is the documented choice), and print or send the signed approval.
    Approve {
        /// The plan id the agent gave you.
        plan_id: String,
        /// The configured target (needed when several are configured).
        #[arg(long, value_name = "NAME")]
        target: Option<String>,
        /// Sign with this key (ssh-keygen -Y sign -f KEY); without it the statement is only printed.
        #[arg(long, value_name = "KEY", conflicts_with = "signed")]
        key: Option<PathBuf>,
        /// Send an approval signed already (the statement and its signature block) instead.
        #[arg(long, value_name = "FILE")]
        signed: Option<PathBuf>,
        /// Send the signed approval to the server now, instead of printing it for the agent.
        #[arg(long)]
        send: bool,
        /// The id is a rollout's (service_plan with `targets`): check each server's statement of
        /// its plan, then print (and with --key sign) the one statement over all of them.
        #[arg(long, conflicts_with_all = ["target", "signed", "send"])]
        rollout: bool,
    },
    /// This workstation's witness of each target's audit trail.
    #[command(subcommand)]
    Audit(WorkstationAudit),
    /// Server side: the root helper (installed as /usr/local/bin/volce-lab-host).
    #[command(subcommand)]
    Host(HostCommand),
}

/// `volce-lab audit ...`: the workstation's side of the audit trail.
#[derive(Debug, Subcommand)]
pub enum WorkstationAudit {
    /// Show each target's witnessed audit head and its age, and any mismatch; or resolve one.
    Witness {
        /// After a mismatch: take the head the target last named as witnessed (check it first against
        /// `sudo volce-lab-host audit head` on the server).
        #[arg(long, value_name = "TARGET", requires = "head", conflicts_with = "forget")]
        accept: Option<String>,
        /// With --accept: the head hash `audit head` printed on the server (64 lowercase hex).
        #[arg(long, value_name = "HASH", requires = "accept")]
        head: Option<String>,
        /// Drop the target's witnessed head; its next answer is witnessed as a first one.
        #[arg(long, value_name = "TARGET")]
        forget: Option<String>,
    },
}

/// What `volce-lab-host rpc --help` says about the request: the contract of
/// `crate::wire` in one screen (a test holds it to `wire::Operation` and
/// `wire::MAX_REQUEST_BYTES`), with the actions filled in by [`rpc_help`].
pub const RPC_HELP: &str = "Answer one JSON request from stdin (the only command the agent may run).

Reads one JSON object of at most 16 KiB on stdin; its \"operation\" key names one of eight operations, \
each with exactly these fields and no others:

  {\"operation\":\"gateway_status\"}                     each managed app's gateway: state, drift, answers
  {\"operation\":\"inventory\"}                          managed apps (with drift), the offer, open plans
  {\"operation\":\"plan\",\"action\":A,\"parameters\":{..}}  store a plan; A is one of {actions}
  {\"operation\":\"execute\",\"plan_id\":\"<32 hex>\"}       run a stored plan once
  {\"operation\":\"logs\",\"app\":N,\"container\":C,\"tail\":T}   read-only: safe log lines of a managed container
  {\"operation\":\"gate_refusal\",\"reason\":R,...}         the ssh gate's: record one refusal (R, the command's length and sha256)
  {\"operation\":\"statement\",\"plan_id\":\"<32 hex>\"}     read-only: the approval statement an operator signs
  {\"operation\":\"signed_approval\",\"plan_id\":P,\"approval\":S}  an operator's signed statement, verified here

The whole request must arrive within 5 seconds (else code request_timeout), and at most 8 helpers run at once \
(else code busy, at once; nothing is done). \
Prints one JSON reply on one line (status ok, rejected or needs_inspection) and exits 0 for ok, 1 otherwise. \
Before the reply, an execute of deploy, start, restart, update or rollback prints one line per finished step, at most 16, \
as {\"progress\":S} with S one of pulled, network, app_started, gateway_tested, health_check, switched; \
a line stdout has no room for at once is dropped, never waited for; \
the reply is always the last line, written after the record, and waits at most 10 seconds for room. \
Nothing here approves but an operator's signature this host verifies against /etc/volce-lab/allowed_signers; \
rejecting, resolving and listing plans are the operator's terminal commands.";

/// [`RPC_HELP`] with the actions named from their one name table, so a new
/// action is listed without an edit here.
pub fn rpc_help() -> String {
    let names: Vec<&str> = crate::vocab::Action::ALL.iter().map(|a| a.as_str()).collect();
    RPC_HELP.replace("{actions}", &names.join(", "))
}

/// `volce-lab host ...`, or `volce-lab-host ...` through the symlink.
#[derive(Debug, Subcommand)]
pub enum HostCommand {
    /// Answer one JSON request from stdin (the only command the agent may run).
    #[command(long_about = rpc_help())]
    Rpc,
    /// The process `rpc` starts in its own session to do the work (so that
    /// sudo's answer to an ALRM, a KILL of rpc's process group, cannot cut
    /// an action); not for people.
    #[command(name = "rpc-worker", hide = true)]
    RpcWorker,
    /// List what awaits you (plans to approve, running, or to check after a
    /// failure), newest first, then the apps volce-lab manages.
    #[command(visible_alias = "pending")]
    List {
        /// Print one JSON object instead (stable field names, RFC 3339 UTC times).
        #[arg(long, conflicts_with = "watch")]
        json: bool,
        /// Keep watching: read the store again every second and print the
        /// list again when a plan arrives or changes (until Ctrl-C).
        #[arg(long)]
        watch: bool,
        /// With --watch: ring the terminal's bell when a new plan waits for
        /// your approval.
        #[arg(long, requires = "watch")]
        bell: bool,
    },
    /// Show a stored plan to the operator.
    Show {
        plan_id: String,
        /// Print the stored plan as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve a pending plan whose digest you checked with `show`; prints
    /// the plan's summary first, then asks you to confirm it by typing the
    /// app name or the digest's first 8 characters.
    Approve {
        plan_id: String,
        digest: String,
        /// Do not ask (for scripts that checked the digest themselves).
        /// Without a terminal on stdin, approve refuses unless this is given.
        #[arg(long)]
        yes: bool,
    },
    /// End a pending plan you do not want: it becomes `rejected` and never runs.
    Reject {
        plan_id: String,
        /// Why, in your words (at most 500 characters): recorded, shown by
        /// `show`, and given to the agent marked as untrusted text.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },
    /// Record that you checked the server after a failed plan, so that new
    /// plans are accepted again.
    Resolve { plan_id: String },
    /// Check the installation and print one line per finding.
    Doctor,
    /// The forced command of the agent's ssh key (authorized_keys
    /// `restrict,command="exec /usr/local/bin/volce-lab-host ssh-gate"`): runs
    /// only volce-lab's fixed requests from SSH_ORIGINAL_COMMAND, as the
    /// agent's account, after checking the host and account the workstation
    /// expects. Not run as root and not through sudo.
    SshGate,
    /// Do the rest of docs/server-install.md after the package, idempotently: the
    /// agent's account (created; an existing one only with --adopt; the gate
    /// as its shell, home and ~/.ssh root's), its key bound
    /// to the ssh gate, the one sudoers rule (checked with visudo -cf), a
    /// policy skeleton if there is none, the database; then a smoke request
    /// as the agent and doctor. `--undo` removes what setup made, nothing else.
    Setup {
        /// The agent's account (created when missing).
        #[arg(long, value_name = "NAME", required_unless_present = "undo")]
        agent: Option<String>,
        /// The operator's existing account: the policy skeleton's approver.
        #[arg(long, value_name = "NAME", required_unless_present = "undo")]
        operator: Option<String>,
        /// The agent's public key (the .pub file ssh-keygen wrote).
        #[arg(long, value_name = "FILE", required_unless_present = "undo")]
        key: Option<std::path::PathBuf>,
        /// Overwrite an authorized_keys or sudoers file setup did not write.
        #[arg(long, conflicts_with = "undo")]
        replace: bool,
        /// Let setup change an existing --agent account (its shell, password
        /// and home's owner); --undo then restores them. Without it setup
        /// refuses an existing account and says what it would change.
        #[arg(long, conflicts_with = "undo")]
        adopt: bool,
        /// Remove what an earlier setup made (files only while unchanged).
        #[arg(long, conflicts_with_all = ["agent", "operator", "key"])]
        undo: bool,
    },
    /// The audit trail: check its hash chain, print its head, export it.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// The policy's catalog: pin an image by its registry digest, list the
    /// entries, remove one, name an entry's env file, pin the gateway image.
    #[command(subcommand)]
    Catalog(CatalogCommand),
    /// Whether the volce-lab package VERSION may replace this one: refused
    /// when it is older and cannot read the state database's schema. The
    /// package's prerm asks before every upgrade and downgrade.
    #[command(name = "package-check")]
    PackageCheck {
        /// The incoming package's version, as dpkg gives it (e.g. 0.1.0-1).
        #[arg(long, value_name = "VERSION")]
        to: String,
    },
    /// The apps' data images: list them, mount the apps' data (at boot,
    /// before docker), delete kept data no app holds.
    #[command(subcommand)]
    Data(DataCommand),
    /// An accessory's credential (a database beside an app): print it, or
    /// give it a new one (a rotate_credential plan you request, approve
    /// and execute at once).
    #[command(subcommand)]
    Accessory(AccessoryCommand),
    /// The backup repository the policy's `backup` names: make it, list the
    /// snapshots volce-lab made, verify it. The copies are `backup` plans.
    #[command(subcommand)]
    Backup(BackupCommand),
    /// The HTTPS edge of the policy's `edge` object: start it, show it,
    /// remove it (expose and unexpose plans choose what it serves).
    #[command(subcommand)]
    Edge(EdgeCommand),
    /// Refuse every agent request (rpc) from now on, before the state is
    /// opened, until `resume`: for a downgrade, maintenance or an incident.
    /// Your own commands keep working; the refusals are counted in the
    /// audit trail when the pause ends.
    Pause {
        /// Why, in your words (at most 500 characters): given to the agent
        /// with each refusal.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },
    /// Lift the pause: agent requests are served again.
    Resume,
    /// The state database: back it up, restore a backup (also the way back
    /// to an older package).
    #[command(subcommand)]
    State(StateCommand),
}

/// `volce-lab-host state ...`: copies of the state database.
#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// Copy the state database (SQLite's online backup; refused while a
    /// plan executes), the env files and the data images' index into a
    /// new directory named with the time and the audit head it ends at.
    Backup {
        /// Where to put it (made root's 0700; default /var/backups/volce-lab).
        #[arg(long, value_name = "DIR")]
        into: Option<std::path::PathBuf>,
    },
    /// Put a backup (its directory, or a state.db) in place of the state
    /// database; only while the agent is paused and no plan executes.
    Restore {
        backup: std::path::PathBuf,
        /// The backup is for an older package you install next: this
        /// version then never migrates it (every command answers
        /// downgrade_pending until the old package is in), and the pause is
        /// lifted.
        #[arg(long)]
        for_downgrade: bool,
    },
    /// Read-only: what the state database and the engine disagree on
    /// (containers volce-lab labelled that no record holds, plans the
    /// engine contradicts, records whose containers are gone), each with
    /// the command that ends it. `restore` prints it too.
    Diff,
    /// Stop and remove one container that carries volce-lab's app label
    /// and that no app record holds (as `state diff` lists them); only
    /// while the agent is paused and no plan executes; asks you to type
    /// its name. Never a container without volce-lab's labels.
    #[command(name = "remove-container")]
    RemoveContainer {
        /// The container's full id or its name.
        container: String,
        /// Do not ask (for scripts); without a terminal on stdin it is needed.
        #[arg(long)]
        yes: bool,
    },
}

/// `volce-lab-host data ...`: the operator's view of the apps' data
/// images under /var/lib/volce-lab/data, and their removal.
#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Print every data image: app, size, mounted (and MiB used) or not,
    /// and the app record that holds it, or that it is kept with no app.
    List,
    /// Mount the data image of every managed app that has data and is not
    /// mounted (never makes one: a missing image is reported); exits 1 if
    /// any could not be mounted. The package's volce-lab-data.service runs
    /// it at boot, before docker.service.
    Mount,
    /// Delete the kept data of APP, which no app record holds (a removed
    /// app's): unmounts it, deletes the image and its mount point, after
    /// you type APP. A managed app's data goes with its remove_app plan
    /// (purge_data: true) instead.
    Purge {
        app: String,
        /// Do not ask (for scripts); without a terminal on stdin it is needed.
        #[arg(long)]
        yes: bool,
    },
}

/// `volce-lab-host accessory ...`: an accessory's credential.
#[derive(Debug, Subcommand)]
pub enum AccessoryCommand {
    /// Print the credential of APP's accessory NAME (as `data list` shows
    /// it, APP@NAME), kept beside its data until the data is purged.
    Secret { app: String, name: String },
    /// Give APP's accessory NAME a new credential with the policy's
    /// `rotate` command, and APP a new container that has it: a
    /// rotate_credential plan, shown, approved by you (type the app name)
    /// and executed.
    Rotate {
        app: String,
        name: String,
        /// Do not ask (for scripts); without a terminal on stdin it is needed.
        #[arg(long)]
        yes: bool,
    },
}

/// `volce-lab-host backup ...`: the operator's repository commands.
#[derive(Debug, Subcommand)]
pub enum BackupCommand {
    /// Make the repository (`restic init`) with the policy's password file.
    Init,
    /// Print the snapshots volce-lab made, of APP or of every app, oldest
    /// first: id, time, app, catalog entry, image and plan.
    List { app: Option<String> },
    /// Verify the repository's structure (`restic check`).
    Check,
    /// Back up each app of the policy's `backup.schedule` whose last
    /// backup is a period old (what the package's volce-lab-backup.timer
    /// runs hourly once enabled); exits 1 if a due backup did not complete.
    RunDue,
}

/// `volce-lab-host edge ...`: the operator's commands for the HTTPS edge.
#[derive(Debug, Subcommand)]
pub enum EdgeCommand {
    /// Start the edge on the policy's edge.http and edge.https addresses,
    /// serving no app yet; refused if an address is taken (naming what holds it).
    Enable,
    /// Print the edge's addresses, whether it runs, and each exposed name
    /// with its certificate.
    Status,
    /// Remove the edge, its network and its files; refused while an app is exposed.
    Disable,
    /// Renew each exposed name's certificate from the policy's edge.acme that
    /// has fewer than DAYS left, and reload the edge (what the package's
    /// volce-lab-edge-renew.timer runs daily once enabled); exits 1 if one failed.
    Renew {
        #[arg(long, value_name = "DAYS", default_value_t = crate::install::edge::RENEW_DAYS,
              value_parser = clap::value_parser!(u32).range(1..=3650))]
        days: u32,
    },
}

/// `volce-lab-host catalog ...`: the operator's changes to the catalog.
#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Pull IMAGE (name[:tag] or name@sha256:...), check it fits the app
    /// container, and write KEY's entry with its registry digest and port;
    /// prints the entry and the pending plans it voids, then asks you to
    /// type KEY.
    Pin {
        key: String,
        image: String,
        /// The port the app listens on (default: the one the image exposes).
        #[arg(long, value_name = "N")]
        container_port: Option<u16>,
        /// The path the health check asks (default /).
        #[arg(long, value_name = "P")]
        health_path: Option<String>,
        /// A data directory for the app: where it sees it and its cap, such as /data:512.
        #[arg(long, value_name = "PATH:MAX_MIB")]
        data: Option<String>,
        /// Do not ask (for scripts); without a terminal on stdin it is needed.
        #[arg(long)]
        yes: bool,
    },
    /// Print each catalog entry and the apps that use it.
    List,
    /// Remove KEY from the catalog (refused while an app uses it).
    Remove {
        key: String,
        #[arg(long)]
        yes: bool,
    },
    /// Pull IMAGE (name[:tag] or name@sha256:...), check it fits the
    /// gateway container (uid 101, nginx in the foreground), and write it
    /// as the policy's nginx_image with its registry digest; prints what
    /// changes and the pending plans it voids, then asks you to type gateway.
    #[command(name = "gateway-image")]
    GatewayImage {
        image: String,
        /// Do not ask (for scripts); without a terminal on stdin it is needed.
        #[arg(long)]
        yes: bool,
    },
    /// Name the env file of KEY's entry (an absolute path directly in
    /// /etc/volce-lab/apps/, root's, mode 0600, already there), or with
    /// --none stop naming one; asks you to type KEY.
    #[command(name = "env-file")]
    EnvFile {
        key: String,
        #[arg(required_unless_present = "none", conflicts_with = "none")]
        path: Option<String>,
        /// The entry names no env file any more (the file is left as it is).
        #[arg(long)]
        none: bool,
        /// Do not ask (for scripts); without a terminal on stdin it is needed.
        #[arg(long)]
        yes: bool,
    },
}

/// `volce-lab-host audit ...`: views of the audit trail, and dropping its
/// archived start.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Walk the hash chain and name the first row that was edited, deleted,
    /// inserted or reordered; exit 0 only when it is intact.
    Verify {
        /// Also check that this head (printed by `audit head` earlier and
        /// kept off the host) is on the chain: catches a cut tail.
        #[arg(long, value_name = "HASH")]
        from: Option<String>,
    },
    /// Print the current head hash (first line) and the number of rows.
    Head,
    /// Print the rows, oldest first: an aligned table, or JSON lines.
    Export {
        /// Only rows at or after this RFC 3339 UTC time (2026-12-01T10:00:00Z).
        #[arg(long, value_name = "RFC3339")]
        since: Option<String>,
        /// One JSON object per line (stable field names, hashes included).
        #[arg(long)]
        json: bool,
    },
    /// Drop the rows older than a time, after exporting them: the kept
    /// chain still verifies, from the first kept row.
    Prune {
        /// Drop rows before this RFC 3339 UTC time (2026-09-01T00:00:00Z).
        #[arg(long, value_name = "RFC3339")]
        before: String,
    },
}

/// `volce-lab-host` has only the host subcommands. Public so that
/// `examples/package-assets.rs` renders its man pages and completions.
#[derive(Debug, Parser)]
#[command(name = "volce-lab-host", version, about = "The volce-lab root helper on the server.")]
pub struct HostCli {
    #[command(subcommand)]
    command: HostCommand,
}

/// Whether `argv[0]` names the host helper.
pub fn is_host_name(argv0: &OsString) -> bool {
    Path::new(argv0).file_name().is_some_and(|name| name == HOST_NAME)
}

/// The host commands started once per request, whose argv is fixed,
/// matched before clap builds its whole command tree to parse one word
/// (a fifth of such a start, docs/benchmarks.md):
/// - `ssh-gate`, and the gate as the agent's login shell: sshd runs a
///   session's command as `volce-lab-host -c COMMAND` (the shell's base
///   name, `-c`, the key line's forced command, which the gate needs not
///   read: it answers `SSH_ORIGINAL_COMMAND` only), and a login with no
///   command as `-volce-lab-host`, which the gate refuses;
/// - `rpc`, as the sudoers rule runs it, and `rpc-worker`, as the front
///   starts it.
///
/// Any other argv, even one that starts with these words, goes to clap.
fn per_request(args: &[OsString]) -> Option<HostCommand> {
    match args {
        [login] if login.as_bytes().strip_prefix(b"-") == Some(HOST_NAME.as_bytes()) => {
            Some(HostCommand::SshGate)
        }
        [shell, flag, _command] if shell == HOST_NAME && flag == "-c" => Some(HostCommand::SshGate),
        [_, word] if is_host_name(&args[0]) && word == "ssh-gate" => Some(HostCommand::SshGate),
        [_, word] if is_host_name(&args[0]) && word == "rpc" => Some(HostCommand::Rpc),
        [_, word] if is_host_name(&args[0]) && word == crate::host::front::WORKER => {
            Some(HostCommand::RpcWorker)
        }
        _ => None,
    }
}

/// Parses `args` (argv including `argv[0]`) and runs the chosen entry.
pub fn main(args: Vec<OsString>) -> ExitCode {
    if let Some(command) = per_request(&args) {
        return dispatch(Command::Host(command)).into();
    }
    let host_mode = args.first().is_some_and(is_host_name);
    let command = if host_mode {
        HostCli::try_parse_from(&args).map(|cli| Command::Host(cli.command))
    } else {
        Cli::try_parse_from(&args).map(|cli| cli.command)
    };
    let command = match command {
        Ok(command) => command,
        Err(error) => {
            // clap prints help/version to stdout with success, errors to stderr.
            let _ = error.print();
            return if error.use_stderr() { Exit::Usage.into() } else { Exit::Ok.into() };
        }
    };
    dispatch(command).into()
}

fn dispatch(command: Command) -> Exit {
    match command {
        Command::Inspect { json, target, all } => workstation(|fleet, runtime| {
            let which = if all { Which::All } else { Which::One(target) };
            Ok(crate::inspect::report::run(fleet, &runtime, json, which))
        }),
        Command::Targets => workstation(|fleet, runtime| {
            print!("{}", crate::inspect::report::targets(&fleet, &runtime));
            Ok(Exit::Ok)
        }),
        Command::McpServe => workstation(|fleet, runtime| {
            crate::mcp::serve_stdio(&fleet, &runtime)
                .map_err(|error| anyhow::anyhow!(error))
                .context("the MCP session ended with an error")?;
            Ok(Exit::Ok)
        }),
        Command::Approve { plan_id, target, key, signed, send, rollout } => workstation(|fleet, runtime| {
            let args = crate::mcp::approve::ApproveArgs { target, plan_id, key, signed, send, rollout };
            crate::mcp::approve::run(&fleet, &runtime, &args)
        }),
        Command::Audit(WorkstationAudit::Witness { accept, head, forget }) => workstation(|fleet, _| {
            let args = crate::mcp::witness::Resolve::of(accept, head, forget);
            crate::mcp::witness::run(&fleet, args)
        }),
        Command::Host(command) => host(command),
    }
}

fn host(command: HostCommand) -> Exit {
    match command {
        HostCommand::Rpc => crate::host::run_rpc(),
        HostCommand::RpcWorker => crate::host::run_rpc_worker(),
        HostCommand::List { watch: true, bell, .. } => crate::host::run_watch(bell),
        HostCommand::List { json, .. } => crate::host::run_list(json),
        HostCommand::Show { plan_id, json } => crate::host::run_show(&plan_id, json),
        HostCommand::Approve { plan_id, digest, yes } => crate::host::run_approve(&plan_id, &digest, yes),
        HostCommand::Reject { plan_id, reason } => crate::host::run_reject(&plan_id, reason.as_deref()),
        HostCommand::Resolve { plan_id } => crate::host::run_resolve(&plan_id),
        HostCommand::Doctor => crate::install::doctor::run_doctor(),
        HostCommand::PackageCheck { to } => crate::install::package_check::run_package_check(&to),
        HostCommand::SshGate => crate::host::gate::run_ssh_gate(),
        HostCommand::Setup { agent, operator, key, replace, adopt, undo } => {
            let request = match (agent, operator, key) {
                (Some(agent), Some(operator), Some(key_file)) if !undo => {
                    Some(crate::install::setup::SetupArgs { agent, operator, key_file, replace, adopt })
                }
                _ => None, // clap allows only --undo here
            };
            crate::install::setup::run_setup(request)
        }
        HostCommand::Catalog(CatalogCommand::Pin { key, image, container_port, health_path, data, yes }) => {
            let args = crate::install::catalog::PinArgs { key, image, container_port, health_path, data };
            crate::install::catalog::run_catalog_pin(&args, yes)
        }
        HostCommand::Catalog(CatalogCommand::List) => crate::install::catalog::run_catalog_list(),
        HostCommand::Catalog(CatalogCommand::GatewayImage { image, yes }) => {
            crate::install::catalog::run_catalog_gateway_image(&image, yes)
        }
        HostCommand::Catalog(CatalogCommand::EnvFile { key, path, none: _, yes }) => {
            crate::install::catalog::run_catalog_env_file(&key, path.as_deref(), yes)
        }
        HostCommand::Catalog(CatalogCommand::Remove { key, yes }) => {
            crate::install::catalog::run_catalog_remove(&key, yes)
        }
        HostCommand::Data(DataCommand::List) => crate::install::data::run_data_list(),
        HostCommand::Data(DataCommand::Mount) => crate::install::data::run_data_mount(),
        HostCommand::Data(DataCommand::Purge { app, yes }) => crate::install::data::run_data_purge(&app, yes),
        HostCommand::Accessory(AccessoryCommand::Secret { app, name }) => {
            crate::install::accessory::run_secret(&app, &name)
        }
        HostCommand::Accessory(AccessoryCommand::Rotate { app, name, yes }) => {
            crate::install::accessory::run_rotate(&app, &name, yes)
        }
        HostCommand::Backup(BackupCommand::Init) => crate::install::backup::run(crate::install::backup::init),
        HostCommand::Backup(BackupCommand::List { app }) => crate::install::backup::run_list(app.as_deref()),
        HostCommand::Backup(BackupCommand::RunDue) => crate::install::backup::run_due_shipped(),
        HostCommand::Backup(BackupCommand::Check) => {
            crate::install::backup::run(crate::install::backup::check)
        }
        HostCommand::Edge(EdgeCommand::Enable) => crate::install::edge::run(crate::install::edge::enable),
        HostCommand::Edge(EdgeCommand::Status) => crate::install::edge::run(crate::install::edge::status),
        HostCommand::Edge(EdgeCommand::Disable) => crate::install::edge::run(crate::install::edge::disable),
        HostCommand::Edge(EdgeCommand::Renew { days }) => crate::install::edge::run_renew(days),
        HostCommand::Pause { reason } => crate::host::run_pause(reason.as_deref()),
        HostCommand::Resume => crate::host::run_resume(),
        HostCommand::State(StateCommand::Backup { into }) => {
            crate::install::state::run_state_backup(into.as_deref())
        }
        HostCommand::State(StateCommand::Restore { backup, for_downgrade }) => {
            crate::install::state::run_state_restore(&backup, for_downgrade)
        }
        HostCommand::State(StateCommand::Diff) => crate::install::state::run_state_diff(),
        HostCommand::State(StateCommand::RemoveContainer { container, yes }) => {
            crate::install::state::run_state_remove_container(&container, yes)
        }
        HostCommand::Audit(AuditCommand::Verify { from }) => crate::host::run_audit_verify(from.as_deref()),
        HostCommand::Audit(AuditCommand::Head) => crate::host::run_audit_head(),
        HostCommand::Audit(AuditCommand::Prune { before }) => crate::host::run_audit_prune(&before),
        HostCommand::Audit(AuditCommand::Export { since, json }) => {
            crate::host::run_audit_export(since.as_deref(), json)
        }
    }
}

/// What every workstation entry (`inspect`, `mcp-serve`) starts with: the
/// validated configuration and a one-thread runtime (one client needs no
/// pool, and it starts faster). Bad configuration exits 2 with its one
/// sentence; any other failure exits 1, printed with its causes.
fn workstation(entry: impl FnOnce(Fleet, tokio::runtime::Runtime) -> anyhow::Result<Exit>) -> Exit {
    let config = match Fleet::from_env() {
        Ok(fleet) => fleet,
        Err(error) => {
            eprintln!("volce-lab: {error}");
            return Exit::Usage;
        }
    };
    let started = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
        .and_then(|runtime| entry(config, runtime));
    match started {
        Ok(exit) => exit,
        Err(error) => {
            eprintln!("volce-lab: {error:#}");
            Exit::Failure
        }
    }
}

#[cfg(test)]
mod tests;
