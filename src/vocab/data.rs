//! An app's data directory: where the catalog entry says the app keeps
//! what must survive ([`DataPath`], [`DataSpec`]) and what a plan records of
//! it ([`DataUse`]: the host's image file, where the helper mounts it, the
//! size). Pure; `crate::docker::data_volume` creates and mounts it.
//!
//! Why a fixed-size ext4 image per app, loop-mounted: the cap must be one
//! the kernel enforces at every write (ENOSPC inside the app), not one the
//! helper checks now and then. A directory on the host's filesystem has no
//! such cap without project quotas (which the state directory's filesystem
//! may not have); a docker volume has none at all. The image is allocated
//! in full when it is made, so what the capacity check counted is what the
//! disk gives up, and an app that fills its data leaves the host's free
//! space where it was.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The smallest and largest data cap an entry may give, in MiB.
pub const DATA_MIB_RANGE: std::ops::RangeInclusive<u32> = 16..=1_048_576;
/// The longest data path.
pub const DATA_PATH_MAX: usize = 128;

/// Top-level directories a data path may not be in or be: the kernel's
/// (`/proc`, `/sys`, `/dev`), the hardening's tmpfs (`/tmp`), and the
/// image's system directories, which a mount would hide.
const RESERVED: &[&str] =
    &["bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "proc", "run", "sbin", "sys", "tmp", "usr"];

/// Where the app sees its data: an absolute path of at least one segment,
/// of letters, digits, '/', '-', '.' and '_', no `.`/`..` segment, no `//`,
/// no trailing '/', not in a [`RESERVED`] directory. The character set
/// keeps it safe inside docker's comma-separated `--mount` list.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DataPath(String);

impl DataPath {
    pub fn parse(path: &str) -> Option<DataPath> {
        let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'.' | b'_');
        let rest = path.strip_prefix('/')?;
        let first = rest.split('/').next().unwrap_or("");
        let ok = !rest.is_empty()
            && path.len() <= DATA_PATH_MAX
            && path.bytes().all(allowed)
            && !rest.ends_with('/')
            && rest.split('/').all(|segment| !segment.is_empty() && segment != "." && segment != "..")
            && !RESERVED.contains(&first);
        ok.then(|| DataPath(path.to_owned()))
    }
}

impl DataPath {
    /// Whether an image's declared `VOLUME` is exactly this path (docker
    /// keeps a declared path as written, a trailing '/' included): the data
    /// directory mounted there covers it, so it gets no anonymous volume.
    pub fn covers(&self, volume: &str) -> bool {
        volume.trim_end_matches('/') == self.0
    }
}

/// The declared volumes that `data` (if any) does not cover.
pub fn uncovered_volumes(mut volumes: Vec<String>, data: Option<&DataPath>) -> Vec<String> {
    volumes.retain(|volume| data.is_none_or(|path| !path.covers(volume)));
    volumes
}

super::string_form::string_form!(
    DataPath,
    "a data path must be absolute, of letters, digits, '/', '-', '.', '_', outside the system directories"
);

/// A catalog entry's `data`: where the app keeps it, and its cap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSpec {
    pub path: DataPath,
    pub max_mib: u32,
}

/// What a plan records of an app's data: where the app sees it, the image
/// file on the host, the directory the helper mounts it on (the bind
/// mount's source), and the image's size. The image and the mount point
/// are the app's own under the state directory's `data/`, derived from the
/// app's name by the controller; a deploy finds kept data there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataUse {
    pub path: DataPath,
    pub image: PathBuf,
    pub mount: PathBuf,
    pub max_mib: u32,
}

/// What kept data was made for (issue 38): the catalog entry of the app
/// that kept it and the path that app saw it at. Written beside the image
/// (`<app>.entry`) when a remove_app keeps it, from the app's record; a
/// deploy re-attaches kept data only under the same entry and path, so
/// one app's files (a database among them) never appear at another
/// entry's path (a static server's `/www`, say) because the name matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeptFor {
    pub entry: String,
    pub path: DataPath,
}

impl KeptFor {
    /// Where the record of `image` lives: beside it, `<app>.entry`.
    pub fn beside(image: &std::path::Path) -> PathBuf {
        image.with_extension("entry")
    }
}

/// The uid:gid that owns the root of every data filesystem: the app
/// containers' user (`crate::docker` runs them as `1000:1000`).
pub const DATA_OWNER: &str = "1000:1000";

/// What a completed remove_app did with the app's data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataAfter {
    /// The image on the host (`/var/lib/volce-lab/data/<app>.ext4`).
    pub image: std::path::PathBuf,
    /// Kept (unmounted: a deploy of the same app re-attaches it), or
    /// deleted for good (`purge_data`).
    pub kept: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_paths_are_absolute_clean_and_outside_the_system_directories() {
        for good in ["/data", "/var/lib/app", "/srv/shop-data_1", "/home/app/.cache"] {
            assert!(DataPath::parse(good).is_some(), "{good}");
        }
        let long = format!("/{}", "a".repeat(DATA_PATH_MAX));
        for bad in [
            "",
            "/",
            "data",
            "/data/",
            "//data",
            "/a//b",
            "/a/../b",
            "/a/./b",
            "/tmp",
            "/tmp/x",
            "/proc/1",
            "/etc",
            "/usr/local",
            "/data,readonly",
            "/da ta",
            "/data=x",
            long.as_str(),
        ] {
            assert!(DataPath::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn a_data_path_deserializes_only_when_it_is_valid() {
        assert!(serde_json::from_str::<DataPath>("\"/data\"").is_ok());
        assert!(serde_json::from_str::<DataPath>("\"/tmp\"").is_err());
    }
}
