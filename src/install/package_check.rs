//! `volce-lab-host package-check --to VERSION`: may the package VERSION
//! replace this one? The package's prerm asks it before dpkg unpacks an
//! upgrade or a downgrade, while this (the installed) helper is still the
//! one on disk, so the answer comes from the code that wrote the state.
//! Runs as root on the server (dpkg's maintainer scripts).
//!
//! The rule: a package may replace this one unless it is older and cannot
//! read the state database's schema. Which schema each released version
//! reads is [`RELEASES`], written down when a version ships (a shipped
//! entry never changes). A newer package knows every older schema (it
//! migrates them), so an upgrade is never refused here; an upgrade while a
//! plan is executing is the store's to hold (`Store::open_settled`).
//!
//! Read-only: the state database is opened read-only and nothing is
//! migrated, so a refused downgrade leaves the server byte for byte as it was.

use std::cmp::Ordering;
use std::path::Path;

use crate::exit::Exit;
use crate::host::HostPaths;
use crate::vocab::{Code, Refusal};

/// A released version of volce-lab: its upstream version and the highest
/// state schema it reads (its `Store::supported_version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    pub version: Version,
    pub schema: i64,
}

/// Every released version before this build, oldest first. Append one
/// entry when a version ships; never edit one. 0.1.0 is every build made
/// before versions were counted (schemas 1 to 10).
pub const RELEASES: &[Release] = &[Release { version: Version(0, 1, 0), schema: 10 }];

/// An upstream version `MAJOR.MINOR.PATCH`, the only shape volce-lab
/// versions take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// This build's version (Cargo.toml's).
    pub fn this() -> Version {
        Version::parse_upstream(env!("CARGO_PKG_VERSION")).expect("Cargo.toml's version is MAJOR.MINOR.PATCH")
    }

    /// `MAJOR.MINOR.PATCH`, each a decimal number without sign.
    fn parse_upstream(text: &str) -> Option<Version> {
        let mut parts = text.split('.').map(|part| {
            (!part.is_empty() && part.len() <= 9 && part.bytes().all(|b| b.is_ascii_digit()))
                .then(|| part.parse::<u32>().ok())
                .flatten()
        });
        let version = Version(parts.next()??, parts.next()??, parts.next()??);
        parts.next().is_none().then_some(version)
    }

    /// A Debian version of a volce-lab package, `[EPOCH:]UPSTREAM[-REVISION]`,
    /// as dpkg passes it to the maintainer scripts. The epoch must be
    /// absent or 0 (volce-lab has never used one).
    pub fn parse_debian(text: &str) -> Result<Version, Refusal> {
        let without_epoch = text.strip_prefix("0:").unwrap_or(text);
        let upstream = match without_epoch.rsplit_once('-') {
            Some((upstream, revision)) if is_revision(revision) => upstream,
            Some(_) => "",
            None => without_epoch,
        };
        Version::parse_upstream(upstream).ok_or_else(|| {
            Refusal::new(
                Code::InvalidParameters,
                format!(
                    "package-check --to takes the version of a volce-lab package as dpkg gives it \
                     (MAJOR.MINOR.PATCH, then an optional -REVISION, e.g. 0.2.0-1), not {}; nothing was checked.",
                    crate::text::for_terminal(text)
                ),
            )
        })
    }

    /// The highest state schema that version `self` reads, when it is not
    /// newer than this build: the newest release at or before it.
    fn schema_read_by(self) -> i64 {
        RELEASES.iter().rev().find(|release| release.version <= self).map_or(0, |release| release.schema)
    }
}

/// A Debian revision: what dpkg allows there (alphanumerics and `+.~`).
fn is_revision(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"+.~".contains(&b))
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// Whether the package `to` may replace this build (`own`) on a server
/// whose state database is at schema `state` (`None`: no database yet).
/// `Ok` carries the sentence printed to dpkg's output.
pub fn decide(own: Version, to: Version, state: Option<i64>) -> Result<String, Refusal> {
    let Some(state) = state else {
        return Ok(format!("volce-lab {to} may replace {own}: there is no state database yet.\n"));
    };
    match to.cmp(&own) {
        Ordering::Equal => Ok(format!("volce-lab {to} is this version; nothing to check.\n")),
        Ordering::Greater => Ok(format!(
            "volce-lab {to} is newer than {own}: it migrates the state database (schema {state}) itself.\n"
        )),
        Ordering::Less if to.schema_read_by() >= state => Ok(format!(
            "volce-lab {to} reads the state database's schema {state}: the downgrade from {own} may go on.\n"
        )),
        Ordering::Less => Err(Refusal::new(
            Code::DowngradeRefused,
            format!(
                "volce-lab {to} reads state schemas up to {read}, and this server's state database is at schema \
                 {state} (written by {own}), so dpkg stops here and nothing changed: {own} stays installed. \
                 Keep {own} (or install a version at least as new); to go back to {to}, pause the agent \
                 (`volce-lab-host pause --reason downgrade`), restore the backup you took before upgrading \
                 with `volce-lab-host state restore BACKUP --for-downgrade`, then install {to} again: this check \
                 then passes (server-install.md, Upgrading).",
                read = to.schema_read_by()
            ),
        )),
    }
}

/// The check against the state database at `database`.
pub fn check(database: &Path, to: &str) -> Result<String, Refusal> {
    let to = Version::parse_debian(to)?;
    let state = state_schema(database)?;
    decide(Version::this(), to, state)
}

/// The schema of the database at `path`, read without changing it.
fn state_schema(path: &Path) -> Result<Option<i64>, Refusal> {
    crate::store::schema_version_of(path).map_err(|_| {
        Refusal::new(
            Code::StateUnavailable,
            format!(
                "package-check could not read the schema of {}, so it cannot tell whether the package may \
                 replace this one; dpkg stops and nothing changed. Run `volce-lab-host doctor`, fix what it \
                 names, then install the package again (or, knowing the risk, with VOLCE_LAB_PACKAGE_CHECK=skip \
                 in dpkg's environment).",
                path.display()
            ),
        )
    })
}

/// `volce-lab-host package-check --to VERSION` in the shipped binary:
/// exit 0 when the package may replace this one, 1 (the refusal on
/// stderr) when it may not.
pub fn run_package_check(to: &str) -> Exit {
    if !nix::unistd::geteuid().is_root() {
        eprintln!(
            "volce-lab-host: refused (not_root): package-check must run as root (it reads the root-only state)."
        );
        return Exit::Usage;
    }
    crate::host::terminal(check(&HostPaths::fixed().database(), to))
}

#[cfg(test)]
mod tests;
