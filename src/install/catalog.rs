//! `volce-lab-host catalog pin|list|remove|gateway-image|env-file`: the
//! operator's commands that change the policy's catalog and its gateway
//! image, so that no part of it is hand-edited JSON. Runs as root on the operator's terminal (`run.rs`: the shipped
//! commands); a layer above `crate::host`, so the agent has no path here
//! (the rpc request enum has no variant for it, and host imports nothing
//! from `install`).
//!
//! Each change is prepared ([`prepare_pin`], [`prepare_remove`],
//! [`prepare_gateway_image`], [`prepare_env_file`]) without
//! writing anything: the policy is read under the loader's owner and mode
//! checks, its parsed JSON value edited in one place (every other key and
//! entry kept as it is), and the whole result validated with
//! `Policy::from_json`, so a policy that would not load is never written.
//! The operator reads what will be written and which pending plans it
//! voids (a plan is sealed with the policy's hash, so any change voids
//! every pending plan made under the old one), confirms, and [`write`]
//! renames the new file into place (`install::setup::write_file`: a unique
//! temporary file, so a reader sees the old policy or the new one, mode
//! 0600, owner root), holding an exclusive lock on the policy's directory
//! from the check that nobody changed the file meanwhile until it has read
//! the written file back.
//!
//! No audit row: the audit table's `operation` CHECK list has no catalog
//! operation, and these commands do not add a schema step. A policy change
//! stays visible in the trail through what it does: every plan it voids is
//! refused `policy_changed` with its own row.

use serde_json::Value;

use crate::control::policy::Policy;
use crate::docker::EngineError;
use crate::docker::client::{DockerClient, LocalImage, PullFailure, Runner};
use crate::host::paths::{HostPaths, POLICY_MAX_BYTES, POLICY_MODE, load_policy, read_policy_bytes};
use crate::install::doctor::{ImageRole, misfits};
use crate::store::StoredPlan;
use crate::text::for_terminal as esc;
use crate::vocab::PlanState;
use crate::vocab::{Code, HealthPath, ImageRef, Refusal, uncovered_volumes};

mod entry;
mod env_file;
mod gateway;
mod reference;
mod run;
use entry::{data_arg, pinned_entry};
pub use env_file::prepare_env_file;
pub use gateway::prepare_gateway_image;
pub use reference::{PortChoice, Reference, choose_port};
pub use run::{
    run_catalog_env_file, run_catalog_gateway_image, run_catalog_list, run_catalog_pin, run_catalog_remove,
};

/// What `catalog pin` needs of the engine: the docker client in the shipped
/// binary, a fake in tests.
pub trait ImageSource {
    /// Pulls `reference` (as `docker pull` takes it); a failure says why.
    fn pull(&self, reference: &str) -> Result<(), PullFailure>;
    /// What the local image says of itself, or `None` when there is none.
    fn local_image(&self, reference: &str) -> Result<Option<LocalImage>, EngineError>;
}

impl<R: Runner> ImageSource for DockerClient<R> {
    fn pull(&self, reference: &str) -> Result<(), PullFailure> {
        self.pull_reference(reference)
    }
    fn local_image(&self, reference: &str) -> Result<Option<LocalImage>, EngineError> {
        DockerClient::local_image(self, reference)
    }
}

/// `catalog pin KEY IMAGE [--container-port N] [--health-path P]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinArgs {
    pub key: String,
    pub image: String,
    pub container_port: Option<u16>,
    pub health_path: Option<String>,
    /// `--data PATH:MAX_MIB`: the app's data directory (`entry::data_arg`).
    pub data: Option<String>,
}

/// A prepared change of the policy: what the operator reads, and the bytes
/// [`write`] puts in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// What the operator types to confirm: the catalog key, or `gateway`.
    pub key: String,
    /// The question that asks for [`Change::key`].
    pub prompt: &'static str,
    /// What will be written and what it voids, for the terminal.
    pub shown: String,
    /// The policy file as it was read: [`write`] refuses if it changed.
    pub before: Vec<u8>,
    /// The new policy file; `None` when the change would write the very
    /// policy that is there (nothing to do, nothing voided).
    pub after: Option<Vec<u8>>,
}

fn refused<T>(code: Code, message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal::new(code, message))
}

fn engine_refusal(_: EngineError) -> Refusal {
    Refusal::new(Code::EngineUnavailable, "The container engine could not be queried; nothing was written.")
}

fn check_key(key: &str) -> Result<(), Refusal> {
    if crate::vocab::is_name(key, 31) {
        return Ok(());
    }
    refused(
        Code::InvalidCatalogKey,
        format!(
            "The catalog key {} is not one: it must match ^[a-z][a-z0-9-]{{0,30}}$. Nothing was written.",
            crate::text::quoted(key, 64)
        ),
    )
}

/// The current policy file's bytes, its parsed JSON value and its policy,
/// under the loader's checks. A policy that does not load is not edited:
/// the operator fixes it by hand first (doctor names the field).
fn current(paths: &HostPaths) -> Result<(Vec<u8>, Value, Policy), Refusal> {
    let bytes = read_policy_bytes(paths)?;
    let policy = load_policy(paths)?;
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|e| Refusal::new(Code::PolicyInvalid, format!("{}: {e}.", paths.policy.display())))?;
    Ok((bytes, value, policy))
}

/// Checks pin's arguments and the image, and prepares the new policy.
/// Pulls the image (or, when the pull fails, reads the local one); writes
/// nothing.
pub fn prepare_pin(
    paths: &HostPaths,
    source: &dyn ImageSource,
    args: &PinArgs,
    now: i64,
) -> Result<Change, Refusal> {
    let checked = check_pin_args(args)?;
    let (before, mut value, policy) = current(paths)?;
    let old = value["catalog"].get(&args.key).cloned();
    let image = fetch_image(source, &checked.reference, ImageRole::App)?;
    // A VOLUME at exactly the entry's data path (given now, or kept from
    // the old entry) is covered by the data directory.
    let old_data = policy.catalog.get(&args.key).and_then(|entry| entry.data.as_ref());
    let data_path = checked.data.as_ref().or(old_data).map(|d| d.path.clone());
    let volumes = uncovered_volumes(image.local.config.volumes.keys().cloned().collect(), data_path.as_ref());
    if !volumes.is_empty() {
        return Err(crate::control::validate::volumes_refusal(
            &esc(&image.pull),
            &volumes,
            "Nothing was written.",
        ));
    }
    let port = entry_port(args.container_port, &image)?;
    let entry_json =
        pinned_entry(old.as_ref(), &image.pinned, port, checked.health_path.as_ref(), checked.data.as_ref());
    value["catalog"][&args.key] = entry_json.clone();
    let mut shown = format!(
        "{} {} ({}).\n",
        if image.pulled { "Pulled" } else { "Could not pull; read the local image" },
        esc(&image.pull),
        if image.pulled { "registry digest" } else { "its registry digest as docker last saw it" }
    );
    shown.push_str(&match &old {
        Some(old) => format!("Catalog key `{}`, now: {}\n", args.key, esc(&old.to_string())),
        None => format!("Catalog key `{}` is new.\n", args.key),
    });
    shown.push_str(&format!("It will be: {}\n", esc(&entry_json.to_string())));
    finish(paths, &policy, args.key.clone(), before, &value, shown, now)
}

/// Pin's arguments, checked before anything is read or pulled.
struct PinChecked {
    reference: Reference,
    health_path: Option<HealthPath>,
    data: Option<crate::vocab::DataSpec>,
}

/// Checks the key, the image reference, the port, the health path and the
/// data directory pin was given, in that order.
fn check_pin_args(args: &PinArgs) -> Result<PinChecked, Refusal> {
    check_key(&args.key)?;
    let reference = check_reference(&args.image)?;
    if args.container_port.is_some_and(|port| port < 1024) {
        return refused(
            Code::InvalidCatalogEntry,
            "--container-port must be from 1024 to 65535: the app runs as uid 1000, which cannot listen below \
             1024. Nothing was written.",
        );
    }
    let health_path = match &args.health_path {
        None => None,
        Some(path) => Some(HealthPath::parse(path).ok_or_else(|| {
            Refusal::new(
                Code::InvalidCatalogEntry,
                format!(
                    "--health-path {} must be an absolute path of at most {} bytes of letters, digits, '/', '-', \
                     '.', '_' and '~' (no query, no '..', no '//'). Nothing was written.",
                    crate::text::quoted(path, 200),
                    crate::vocab::HEALTH_PATH_MAX
                ),
            )
        })?),
    };
    let data = args.data.as_deref().map(data_arg).transpose()?;
    Ok(PinChecked { reference, health_path, data })
}

/// An image as `catalog pin` and `catalog gateway-image` take it.
fn check_reference(image: &str) -> Result<Reference, Refusal> {
    Reference::parse(image).ok_or_else(|| {
        Refusal::new(
            Code::InvalidImageReference,
            format!(
                "{} is not an image reference volce-lab takes: [host[:port]/]name[:tag][@sha256:<64 hex>], \
                 lowercase. Nothing was pulled or written.",
                crate::text::quoted(image, 300)
            ),
        )
    })
}

/// The `catalog_key_not_found` refusal for `key`, naming the keys there
/// are, or saying the catalog is empty and how to fill it.
fn key_not_found(key: &str, policy: &Policy) -> Refusal {
    let message = if policy.catalog.is_empty() {
        format!(
            "The catalog has no key `{key}`: {}. Nothing was written.",
            crate::control::policy::EMPTY_CATALOG
        )
    } else {
        let keys: Vec<&str> = policy.catalog.keys().map(String::as_str).collect();
        format!("The catalog has no key `{key}` (it has: {}). Nothing was written.", keys.join(", "))
    };
    Refusal::new(Code::CatalogKeyNotFound, message)
}

/// The image pin found: how it was asked for, whether the pull worked,
/// what the engine holds, and its pinned reference.
struct FetchedImage {
    pull: String,
    pulled: bool,
    local: LocalImage,
    pinned: ImageRef,
}

/// Pulls `reference` (or reads the local image when the pull fails), pins
/// it by its registry digest, and checks that it fits the container
/// volce-lab starts from it in `role`.
fn fetch_image(
    source: &dyn ImageSource,
    reference: &Reference,
    role: ImageRole,
) -> Result<FetchedImage, Refusal> {
    let pull = reference.pull_form();
    let pull_failure = source.pull(&pull).err();
    let pulled = pull_failure.is_none();
    let Some(image) = source.local_image(&pull).map_err(engine_refusal)? else {
        // The pull worked but the image is gone again: read as the engine's words.
        let failure = pull_failure.unwrap_or(PullFailure::Unrecognised);
        return refused(
            Code::ImagePullFailed,
            format!(
                "{} could not be pulled: {}, and the engine holds no such image. Nothing was written. {}",
                esc(&pull),
                failure.clause(),
                failure.next_step()
            ),
        );
    };
    let Some(digest) = reference.registry_digest(&image.digests) else {
        return refused(
            Code::ImageNotInRegistry,
            format!(
                "{} has no registry digest for {}: it was built here and never pushed, or the registry does not \
                 serve that digest; deploy pulls by digest, so it cannot be pinned. Nothing was written. Push it \
                 to a registry first, then pin it by the registry's reference.",
                esc(&pull),
                esc(&reference.name)
            ),
        );
    };
    let pinned = reference.pinned(&digest);
    let Some(pinned) = ImageRef::parse(&pinned) else {
        return refused(Code::InvalidImageReference, format!("{} cannot be pinned.", esc(&pinned)));
    };
    let misfit = misfits(&image.config, role);
    if !misfit.is_empty() {
        return refused(
            Code::ImageMisfitsTemplate,
            format!(
                "{} does not fit the container volce-lab starts from it: {}. Nothing was written. {}",
                esc(&pull),
                misfit.join("; "),
                role.rebuild_step()
            ),
        );
    }
    Ok(FetchedImage { pull, pulled, local: image, pinned })
}

/// The entry's container port: the one given, or the one port the image
/// exposes.
fn entry_port(given: Option<u16>, image: &FetchedImage) -> Result<u16, Refusal> {
    let why = match choose_port(given, &image.local.config.exposed_ports) {
        PortChoice::Chosen(port) => return Ok(port),
        PortChoice::Several(ports) => format!(
            "exposes several ports ({})",
            ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
        ),
        PortChoice::Privileged(port) => format!("exposes port {port}, below 1024"),
        PortChoice::NoneExposed => "exposes no port".to_owned(),
    };
    refused(
        Code::ContainerPortNeeded,
        format!(
            "{} {why}, so the catalog entry's container_port cannot be taken from it. Nothing was \
             written. Run it again with --container-port N, the port the app listens on.",
            esc(&image.pull)
        ),
    )
}

/// Prepares `catalog remove KEY`: refused while a managed app's record
/// uses the key, as the one it runs or as a version kept for rollback.
pub fn prepare_remove(paths: &HostPaths, key: &str, now: i64) -> Result<Change, Refusal> {
    check_key(key)?;
    let (before, mut value, policy) = current(paths)?;
    if !policy.catalog.contains_key(key) {
        return Err(key_not_found(key, &policy));
    }
    let apps = crate::store::read_apps(&paths.database()).map_err(|e| e.refusal())?;
    // A version kept for rollback counts too: its rollback reads the key's
    // entry again (its env file).
    let uses = |record: &crate::control::app_record::AppRecord| {
        record.image_key == key || record.kept_versions.iter().any(|kept| kept.image_key == key)
    };
    let users: Vec<&str> =
        apps.values().filter(|record| uses(record)).map(|record| record.app.as_str()).collect();
    if !users.is_empty() {
        return refused(
            Code::CatalogKeyInUse,
            format!(
                "The catalog key `{key}` is used by the app{} {}: removing it would leave {} without its entry. \
                 Nothing was written.",
                if users.len() == 1 { "" } else { "s" },
                esc(&users.join(", ")),
                if users.len() == 1 { "it" } else { "them" }
            ),
        );
    }
    let old = value["catalog"].get(key).cloned().unwrap_or(Value::Null);
    if let Some(catalog) = value["catalog"].as_object_mut() {
        catalog.remove(key);
    }
    let shown = format!("Catalog key `{key}` will be removed; it is now: {}\n", esc(&old.to_string()));
    finish(paths, &policy, key.to_owned(), before, &value, shown, now)
}

/// Validates the edited policy as a whole, names the pending plans it
/// voids, and makes the [`Change`].
fn finish(
    paths: &HostPaths,
    policy: &Policy,
    key: String,
    before: Vec<u8>,
    value: &Value,
    mut shown: String,
    now: i64,
) -> Result<Change, Refusal> {
    let mut after = serde_json::to_vec_pretty(value).expect("a JSON value serializes");
    after.push(b'\n');
    let new = Policy::from_json(&after).map_err(|e| {
        Refusal::new(
            Code::CatalogEditInvalid,
            format!(
                "After this change {} would not load ({e}); nothing was written.",
                paths.policy.display()
            ),
        )
    })?;
    // The loader refuses a larger file: it would load here and not there.
    if after.len() as u64 > POLICY_MAX_BYTES {
        return refused(
            Code::CatalogEditInvalid,
            format!(
                "After this change {} would be larger than 256 KiB; nothing was written.",
                paths.policy.display()
            ),
        );
    }
    let old_hash = policy.hash();
    if new.hash() == old_hash {
        shown.push_str("The policy already says this: nothing to write, no plan is voided.\n");
        return Ok(Change { key, prompt: PROMPT, shown, before, after: None });
    }
    let awaiting = crate::store::read_awaiting(&paths.database(), now).map_err(|e| e.refusal())?;
    let voided: Vec<&StoredPlan> = awaiting
        .iter()
        .filter(|stored| stored.state == PlanState::Pending && stored.plan.policy_hash == old_hash)
        .collect();
    if voided.is_empty() {
        shown.push_str("No pending plan is voided.\n");
    } else {
        shown.push_str(&format!(
            "Writing it voids {} pending plan{} (refused policy_changed from then on):\n",
            voided.len(),
            if voided.len() == 1 { "" } else { "s" }
        ));
        for stored in voided {
            let plan = &stored.plan;
            shown.push_str(&format!(
                "  {} {} {}{}\n",
                plan.id,
                plan.action.as_str(),
                plan.payload.app().map(esc).unwrap_or_else(|| "-".to_owned()),
                if stored.approval.is_some() { " (approved)" } else { "" }
            ));
        }
    }
    Ok(Change { key, prompt: PROMPT, shown, before, after: Some(after) })
}

/// The question after [`Change::shown`].
pub const PROMPT: &str = "To write the policy, type the catalog key";

/// Writes a confirmed change under the policy's lock ([`lock_policy`]):
/// refused if the policy file changed since it was read (nothing written),
/// then renamed into place and read back, still under the lock, so what
/// was confirmed is what the file holds. Returns what to print.
///
/// Why the lock: without it two operators (or two scripted `--yes` runs)
/// could both find the file unchanged, and the second rename would drop
/// the first one's entry after it had printed "Wrote".
pub fn write(paths: &HostPaths, change: &Change) -> Result<String, Refusal> {
    let Some(after) = &change.after else { return Ok(String::new()) };
    let _lock = lock_policy(paths)?;
    if read_policy_bytes(paths)? != change.before {
        return refused(
            Code::CatalogEditInvalid,
            format!(
                "{} changed while you were asked; nothing was written. Run the command again.",
                paths.policy.display()
            ),
        );
    }
    crate::install::setup::write_file(&paths.policy, after, POLICY_MODE).map_err(|_| {
        Refusal::new(
            Code::StateUnavailable,
            format!(
                "{} could not be written; it still holds the policy as it was. Check that its directory is \
                 writable by root and not full, then run the command again.",
                paths.policy.display()
            ),
        )
    })?;
    if read_policy_bytes(paths)? != *after {
        return refused(
            Code::StateUnavailable,
            format!(
                "{} does not hold what was written: something wrote it meanwhile without the lock. Run \
                 `volce-lab-host catalog list` to see what it holds, then run the command again.",
                paths.policy.display()
            ),
        );
    }
    load_policy(paths)?;
    Ok(format!("Wrote {} (mode 0600).\n", paths.policy.display()))
}

/// An exclusive `flock` on the policy's directory, checked as the loader
/// checks it, held until the returned guard drops: every operator command
/// that edits the policy takes it for its check-write-verify. The directory
/// rather than a lock file beside the policy, so there is no extra file to
/// create, plant or leave behind in `/etc/volce-lab`.
pub(crate) fn lock_policy(paths: &HostPaths) -> Result<nix::fcntl::Flock<std::fs::File>, Refusal> {
    let dir = paths.policy.parent().unwrap_or(std::path::Path::new("/"));
    let handle = crate::host::paths::open_dir(dir, paths.owner_uid)?;
    nix::fcntl::Flock::lock(handle, nix::fcntl::FlockArg::LockExclusive).map_err(|_| {
        Refusal::new(
            Code::StateUnavailable,
            format!(
                "{} could not be locked for the edit; nothing was written. Run the command again.",
                dir.display()
            ),
        )
    })
}

/// `catalog list`: one line per entry, with the apps that use it, then the
/// gateway image; an empty catalog says so and how to fill it.
/// The tasks an entry declares (issue 40), one line each with its argv as
/// the operator wrote it, escaped for the terminal; the `before_start` one
/// says so.
fn task_lines(entry: &crate::control::policy::CatalogEntry) -> String {
    entry
        .tasks
        .iter()
        .map(|(task, argv)| {
            let argv: Vec<String> = argv.all().iter().map(|arg| format!("{:?}", esc(arg))).collect();
            let first = if entry.before_start.as_ref() == Some(task) { "  (before_start)" } else { "" };
            format!("    task {task}: [{}]{first}\n", argv.join(", "))
        })
        .collect()
}

pub fn list(paths: &HostPaths) -> Result<String, Refusal> {
    let policy = load_policy(paths)?;
    let gateway = format!("Gateway image (nginx_image): {}\n", esc(policy.nginx_image.as_str()));
    if policy.catalog.is_empty() {
        let mut empty = crate::control::policy::EMPTY_CATALOG.to_owned();
        empty[..1].make_ascii_uppercase();
        return Ok(format!("{empty}.\n{gateway}"));
    }
    let apps = crate::store::read_apps(&paths.database()).map_err(|e| e.refusal())?;
    let mut out = format!(
        "{} catalog entr{}:\n",
        policy.catalog.len(),
        if policy.catalog.len() == 1 { "y" } else { "ies" }
    );
    for (key, entry) in &policy.catalog {
        let users: Vec<&str> = apps
            .values()
            .filter(|record| &record.image_key == key)
            .map(|record| record.app.as_str())
            .collect();
        let data =
            entry.data.as_ref().map_or_else(String::new, |d| format!("  data {}:{}", d.path, d.max_mib));
        out.push_str(&format!(
            "  {key}  {}  container_port {}  health_path {}{data}  apps: {}\n",
            esc(entry.image.as_str()),
            entry.container_port.map_or_else(|| "(the agent names it)".to_owned(), |port| port.to_string()),
            esc(&entry.health_path.to_string()),
            if users.is_empty() { "none".to_owned() } else { esc(&users.join(", ")) }
        ));
        out.push_str(&task_lines(entry));
    }
    out.push_str(&gateway);
    Ok(out)
}
