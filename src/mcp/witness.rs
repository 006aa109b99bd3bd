//! The workstation's witness of each target's audit chain (issue 45): the
//! head last proven of each target's hash chain, kept in `witness.json`
//! beside the local audit log (`$XDG_STATE_HOME/volce-lab/`, 0600, written
//! whole to a temporary file and renamed over it, under `witness.lock`),
//! what an answer's proof does to it (`crate::wire::witness::check`), and
//! the operator's `volce-lab audit witness` that shows and resolves it.
//! Runs unprivileged.
//!
//! Invariants enforced here:
//! - a mismatch is recorded the first time a proof fails and stays until
//!   the operator accepts the host's head or forgets the target: no later
//!   answer clears it, and the witnessed head is never replaced by one
//!   that did not extend it;
//! - while a target has a mismatch, every request that may change it
//!   (`plan`, `execute`, `signed_approval`) is refused here with
//!   `audit_witness_mismatch` before anything is sent; read-only ones run
//!   and their answer says so;
//! - a file that cannot be read is never overwritten: the target is then
//!   "not witnessed" and the error is on stderr.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::wire::witness::{self, AuditProof, Head, Mismatch, Witnessed};

/// The file's name, beside `audit.jsonl`.
pub const FILE_NAME: &str = "witness.json";

/// One target's witness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The last head proven to extend the one before it.
    pub head: Head,
    /// When this workstation last checked a proof of this target (unix seconds).
    pub checked_at: i64,
    /// The first failed check, kept until the operator resolves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<Found>,
}

impl Entry {
    /// The head a request to the target carries (its `witness` field).
    pub fn witnessed(&self) -> Witnessed {
        Witnessed { seq: self.head.seq, hash: self.head.hash.clone() }
    }
}

/// A failed check: how, when, and the head the host named then (the
/// latest answer's, which the operator compares with `audit head`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Found {
    pub mismatch: Mismatch,
    pub found_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<Witnessed>,
}

impl Found {
    /// The refusal's sentence for a management call to `target`.
    pub fn refusal_message(&self, target: &str) -> String {
        format!(
            "Target {target}: {}; nothing was sent, and management to it is refused until the operator \
             checks the server and runs `volce-lab audit witness --accept {target} --head HASH` \
             (security.md, The trail witnessed off the host).",
            self.mismatch.describe()
        )
    }

    /// The sentence a read-only answer carries.
    pub fn note(&self, target: &str) -> String {
        format!(
            "Witness: {}; management to {target} is refused (audit_witness_mismatch) until the operator \
             resolves it (volce-lab audit witness).",
            self.mismatch.describe()
        )
    }
}

/// The whole file: one entry per target name.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Book {
    targets: BTreeMap<String, Entry>,
}

/// What the server's answer carried, for [`Witness::observe`].
#[derive(Debug, Clone)]
pub struct Observed<'a> {
    /// Whether the server's protocol carries a head at all (2 or later).
    pub carries: bool,
    /// Whether the answer was `ok` (a refusal before the host's store was
    /// open carries no head, and that is no mismatch).
    pub ok: bool,
    pub proof: Option<&'a AuditProof>,
}

/// Where the witness is kept; `None` when the local state directory is off.
pub struct Witness {
    path: Option<PathBuf>,
    /// One update at a time within this process (the lock file orders
    /// processes).
    busy: Mutex<()>,
}

/// Why the witness file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum WitnessError {
    #[error("the witness file {0} cannot be read: {1}")]
    Read(PathBuf, String),
    #[error("the witness file {0} cannot be written: {1}")]
    Write(PathBuf, String),
    #[error("no local state directory (neither XDG_STATE_HOME nor HOME is set)")]
    Off,
}

impl Witness {
    pub fn at(path: PathBuf) -> Witness {
        Witness { path: Some(path), busy: Mutex::new(()) }
    }

    pub fn disabled() -> Witness {
        Witness { path: None, busy: Mutex::new(()) }
    }

    /// The witness beside the audit log at `audit` (its directory).
    pub fn beside(audit: Option<&Path>) -> Witness {
        match audit.and_then(Path::parent) {
            Some(dir) => Witness::at(dir.join(FILE_NAME)),
            None => Witness::disabled(),
        }
    }

    /// Every target's entry.
    pub fn entries(&self) -> Result<BTreeMap<String, Entry>, WitnessError> {
        let path = self.path.as_ref().ok_or(WitnessError::Off)?;
        Ok(read(path)?.targets)
    }

    /// `target`'s entry, if it was ever witnessed (`None` too when the
    /// file is off or unreadable: reported on stderr).
    pub fn held(&self, target: &str) -> Option<Entry> {
        match self.entries() {
            Ok(mut entries) => entries.remove(target),
            Err(WitnessError::Off) => None,
            Err(error) => {
                eprintln!("volce-lab: {error}");
                None
            }
        }
    }

    /// Takes what one answer of `target` carried at `now`: the entry as it
    /// stands after it (with its mismatch, if any), `None` when the target
    /// is not witnessed.
    pub fn observe(&self, target: &str, observed: &Observed<'_>, now: i64) -> Option<Entry> {
        let updated = self.update(|book| {
            let held = book.targets.get(target).cloned();
            let next = judge(held.as_ref(), observed, now);
            match &next {
                Some(entry) => book.targets.insert(target.to_owned(), entry.clone()),
                None => book.targets.remove(target),
            };
            Ok(next)
        });
        match updated {
            Ok(entry) => entry,
            Err(WitnessError::Off) => None,
            Err(error) => {
                eprintln!("volce-lab: {error}");
                None
            }
        }
    }

    /// The operator's `--accept TARGET --head HASH`: the head the host last
    /// named (the operator checked it against `audit head`) becomes the
    /// witnessed one, and the mismatch is gone. Refused when there is no
    /// mismatch, or `hash` is not that head's.
    pub fn accept(
        &self,
        target: &str,
        hash: &str,
        now: i64,
    ) -> Result<Result<Witnessed, String>, WitnessError> {
        self.update(|book| {
            let Some(entry) = book.targets.get_mut(target) else {
                return Ok(Err(format!("{target} has no witnessed head; nothing to accept")));
            };
            let Some(found) = &entry.mismatch else {
                return Ok(Err(format!(
                    "{target}'s witness holds (seq {}); nothing to accept",
                    entry.head.seq
                )));
            };
            let Some(host) = found.host.clone() else {
                return Ok(Err(format!(
                    "{target}'s host named no head to accept; use --forget {target} once you have checked it"
                )));
            };
            if host.hash != hash {
                return Ok(Err(format!(
                    "the head {target} last named is seq {} with hash {}, not {hash}; compare it with \
                     `sudo volce-lab-host audit head` on the server",
                    host.seq, host.hash
                )));
            }
            let at = found.found_at;
            *entry =
                Entry { head: Head::new(host.seq, host.hash.clone(), at), checked_at: now, mismatch: None };
            Ok(Ok(host))
        })
    }

    /// The operator's `--forget TARGET`: the next answer is witnessed as a
    /// first one. `false` when the target had no entry.
    pub fn forget(&self, target: &str) -> Result<bool, WitnessError> {
        self.update(|book| Ok(book.targets.remove(target).is_some()))
    }

    /// Reads, changes and writes the file whole, under both locks.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut Book) -> Result<T, WitnessError>,
    ) -> Result<T, WitnessError> {
        let path = self.path.as_ref().ok_or(WitnessError::Off)?;
        let _busy = self.busy.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let _lock = lock(path)?;
        let mut book = read(path)?;
        let answer = change(&mut book)?;
        write(path, &book)?;
        Ok(answer)
    }
}

/// What one answer does to a target's entry.
fn judge(held: Option<&Entry>, observed: &Observed<'_>, now: i64) -> Option<Entry> {
    let proof = match (observed.proof, held) {
        (Some(proof), _) => proof,
        // A target witnessed before whose helper stopped carrying a head.
        (None, Some(entry)) if observed.ok || !observed.carries => {
            let mismatch = Mismatch::Withheld { seq: entry.head.seq };
            return Some(found(entry.clone(), mismatch, None, now));
        }
        (None, held) => return held.cloned(),
    };
    let host = Some(Witnessed { seq: proof.seq, hash: proof.hash.clone() });
    match (witness::check(held.map(|e| &e.head), proof, now), held) {
        (Ok(None), held) => held.cloned(),
        // The head a mismatched target names is kept for the operator to
        // compare; the witnessed head stays the last one proven.
        (Ok(Some(_)), Some(entry)) if entry.mismatch.is_some() => {
            let mut entry = entry.clone();
            if let Some(found) = &mut entry.mismatch {
                found.host = host;
            }
            Some(entry)
        }
        (Ok(Some(head)), _) => Some(Entry { head, checked_at: now, mismatch: None }),
        (Err(mismatch), Some(entry)) => Some(found(entry.clone(), mismatch, host, now)),
        // Never witnessed: nothing to mismatch.
        (Err(_), None) => None,
    }
}

/// `entry` with a mismatch: the first one found is kept, with the host's
/// latest head.
fn found(mut entry: Entry, mismatch: Mismatch, host: Option<Witnessed>, now: i64) -> Entry {
    match &mut entry.mismatch {
        Some(first) => first.host = host.or(first.host.take()),
        None => entry.mismatch = Some(Found { mismatch, found_at: now, host }),
    }
    entry
}

fn read(path: &Path) -> Result<Book, WitnessError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| {
            WitnessError::Read(path.to_owned(), format!("it is not a witness file ({error})"))
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Book::default()),
        Err(error) => Err(WitnessError::Read(path.to_owned(), error.to_string())),
    }
}

/// The directory 0700 (as the audit log's), then `witness.lock` held
/// exclusively until the returned lock is dropped.
fn lock(path: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, WitnessError> {
    let failed = |error: String| WitnessError::Write(path.to_owned(), error);
    if let Some(dir) = path.parent() {
        super::state_file::private_dir(dir).map_err(|e| failed(e.to_string()))?;
    }
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_CLOEXEC.bits())
        .open(path.with_extension("lock"))
        .map_err(|e| failed(e.to_string()))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).map_err(|(_, e)| failed(e.to_string()))
}

/// Writes the whole file to a fresh 0600 file beside it and renames it
/// over the old one: a reader sees the old file or the new, never half.
fn write(path: &Path, book: &Book) -> Result<(), WitnessError> {
    let mut bytes = serde_json::to_vec_pretty(book).expect("a witness serializes");
    bytes.push(b'\n');
    super::state_file::replace(path, &bytes).map_err(|e| WitnessError::Write(path.to_owned(), e.to_string()))
}

/// How long ago, in one short word: `42s`, `5m`, `3h`, `12d`.
pub fn age(seconds: i64) -> String {
    let seconds = seconds.max(0);
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3_600 => format!("{}m", seconds / 60),
        3_600..86_400 => format!("{}h", seconds / 3_600),
        _ => format!("{}d", seconds / 86_400),
    }
}

/// What `volce-lab audit witness` was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolve {
    Show,
    Accept { target: String, hash: String },
    Forget { target: String },
}

impl Resolve {
    /// From the command line (clap lets `--head` come only with `--accept`).
    pub fn of(accept: Option<String>, head: Option<String>, forget: Option<String>) -> Resolve {
        match (accept, head, forget) {
            (Some(target), Some(hash), _) => Resolve::Accept { target, hash },
            (_, _, Some(target)) => Resolve::Forget { target },
            _ => Resolve::Show,
        }
    }
}

/// `volce-lab audit witness` on `fleet`, with the witness beside the audit
/// log the environment gives.
pub fn run(fleet: &crate::config::Fleet, resolve: Resolve) -> anyhow::Result<crate::exit::Exit> {
    let audit = super::audit::Audit::from_env();
    let witness = Witness::beside(audit.path());
    let names: Vec<&str> = fleet.targets().iter().map(|t| t.name.as_str()).collect();
    let (text, exit) = resolve_with(&witness, &names, &resolve, now())?;
    print!("{text}");
    Ok(exit)
}

/// The work of [`run`]: its text and exit code.
pub fn resolve_with(
    witness: &Witness,
    names: &[&str],
    resolve: &Resolve,
    now: i64,
) -> anyhow::Result<(String, crate::exit::Exit)> {
    use crate::exit::Exit;
    let unknown = |target: &str| {
        (!names.contains(&target)).then(|| {
            format!("volce-lab: audit witness: {target} is not a configured target ({})\n", names.join(", "))
        })
    };
    match resolve {
        Resolve::Show => Ok((show(&witness.entries()?, names, now), Exit::Ok)),
        Resolve::Accept { target, hash } => {
            if let Some(text) = unknown(target) {
                return Ok((text, Exit::Usage));
            }
            if !crate::text::is_lower_hex(hash, 64) {
                let text = "volce-lab: audit witness: --head takes the 64 lowercase hex characters `audit head` printed\n";
                return Ok((text.to_owned(), Exit::Usage));
            }
            Ok(match witness.accept(target, hash, now)? {
                Ok(head) => (
                    format!(
                        "{target}: the head at seq {} is witnessed; management to {target} is allowed again.\n",
                        head.seq
                    ),
                    Exit::Ok,
                ),
                Err(why) => (format!("volce-lab: audit witness: {why}; nothing changed.\n"), Exit::Failure),
            })
        }
        Resolve::Forget { target } => {
            if let Some(text) = unknown(target) {
                return Ok((text, Exit::Usage));
            }
            Ok(if witness.forget(target)? {
                (format!("{target}: forgotten; its next answer is witnessed as a first one.\n"), Exit::Ok)
            } else {
                (format!("{target}: not witnessed; nothing changed.\n"), Exit::Ok)
            })
        }
    }
}

/// One line per configured target (then any other entry of the file).
fn show(entries: &BTreeMap<String, Entry>, names: &[&str], now: i64) -> String {
    let mut text = String::new();
    let others = entries.keys().map(String::as_str).filter(|name| !names.contains(name));
    for name in names.iter().copied().chain(others) {
        let Some(entry) = entries.get(name) else {
            text.push_str(&format!(
                "{name}: not witnessed (no answer carried an audit head yet; a 0.1.0 server never does)\n"
            ));
            continue;
        };
        let head = &entry.head;
        text.push_str(&format!(
            "{name}: seq {} hash {} (row of {}), checked {} ago",
            head.seq,
            head.hash,
            crate::text::rfc3339_seconds(head.at),
            age(now - entry.checked_at)
        ));
        if let Some(claimed) = &head.claimed {
            text.push_str(&format!("; the host named seq {}, proven in the next calls", claimed.seq));
        }
        text.push('\n');
        if let Some(found) = &entry.mismatch {
            text.push_str(&format!(
                "  MISMATCH at seq {} ({} ago): {}.\n",
                found.mismatch.seq(),
                age(now - found.found_at),
                found.mismatch.describe()
            ));
            match &found.host {
                Some(host) => text.push_str(&format!(
                    "  The host now names seq {} hash {}. Check it against `sudo volce-lab-host audit head` and \
                     `audit verify` on the server, then: volce-lab audit witness --accept {name} --head {}\n  \
                     (A server reinstalled from scratch has a new chain: volce-lab audit witness --forget {name})\n",
                    host.seq, host.hash, host.hash
                )),
                None => text.push_str(&format!(
                    "  The host named no head. Check the server, then: volce-lab audit witness --forget {name}\n"
                )),
            }
        }
    }
    text
}

/// The workstation's clock, unix seconds.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64)
}

#[cfg(test)]
mod tests;
