//! `catalog env-file KEY PATH|--none`: names (or stops naming) a catalog
//! entry's env file, so the operator never edits the entry by hand (issue
//! 37). The path follows the policy's rule (a file directly in
//! `/etc/volce-lab/apps/`, docs/env-files.md), and the file must already be
//! what the helper reads at deploy (root's, 0600, every line `NAME=value`):
//! an entry that names a file deploy would refuse is not written. Runs as
//! root on the operator's terminal; writes nothing itself (`super::write`).

use serde_json::Value;

use super::{Change, Code, Refusal, current, esc, finish, key_not_found};
use crate::control::policy::EntryFields;
use crate::host::env_files::EnvDir;
use crate::host::paths::HostPaths;
use crate::vocab::{ENV_DIR, EnvFileName};

/// Prepares KEY's entry naming `file` (the policy's absolute path), or no
/// env file when `file` is `None`; every other field of the entry is kept.
/// Writes nothing.
pub fn prepare_env_file(
    paths: &HostPaths,
    key: &str,
    file: Option<&str>,
    now: i64,
) -> Result<Change, Refusal> {
    super::check_key(key)?;
    let name = file.map(|path| checked_file(paths, path)).transpose()?;
    let (before, mut value, policy) = current(paths)?;
    let Some(old) = value["catalog"].get(key).cloned() else {
        return Err(key_not_found(key, &policy));
    };
    // A bare reference becomes an object with its image; the object form
    // with nothing but the image hashes as the bare one did.
    let mut entry = EntryFields::of(&old)
        .unwrap_or_else(|| EntryFields { image: Some(old.clone()), ..Default::default() });
    entry.env_file = name.as_ref().map(|name| Value::from(name.policy_path()));
    let new = serde_json::to_value(&entry).expect("an entry serializes");
    value["catalog"][key] = new.clone();
    let shown = format!(
        "Catalog key `{key}`, now: {}\nIt will be: {}\n",
        esc(&old.to_string()),
        esc(&new.to_string())
    );
    finish(paths, &policy, key.to_owned(), before, &value, shown, now)
}

/// The env file `path` names, checked as the policy's loader and the
/// helper check it: the name rule, then the file itself.
fn checked_file(paths: &HostPaths, path: &str) -> Result<EnvFileName, Refusal> {
    let Some(name) = EnvFileName::from_policy_path(path) else {
        return Err(Refusal::new(
            Code::InvalidCatalogEntry,
            format!(
                "{} is not an env file volce-lab takes: the absolute path of a file directly in {ENV_DIR}/, \
                 named with [a-z0-9][a-z0-9._-]{{0,63}} (env-files.md). Nothing was written.",
                crate::text::quoted(path, 200)
            ),
        ));
    };
    EnvDir::of(paths).configuration(&name).map_err(|refusal| {
        Refusal::new(
            refusal.code,
            format!(
                "{} Nothing was written: create or correct it first (root's, mode 0600, NAME=value lines; \
                 env-files.md), then run this again.",
                refusal.message
            ),
        )
    })?;
    Ok(name)
}
