//! The catalog entry `catalog pin` writes: the pinned image, the port, and
//! what the operator gave on the command line (`--health-path`, `--data`),
//! over whatever else an old object entry held, as the one entry type
//! (`crate::control::policy::EntryFields`). Pure.

use serde_json::Value;

use crate::control::policy::EntryFields;
use crate::vocab::{Code, DATA_MIB_RANGE, DataPath, DataSpec, HealthPath, ImageRef, Refusal};

/// The entry pin writes for a key whose value was `old`: the pinned image
/// and the port, and the health path when one was given ("/" is the
/// default, so it is left out), and the data directory when one was given.
/// Every other key of an old object entry (its `env_file`, its health path
/// or data when none was given) is kept: re-pinning a
/// new version must not drop the operator's configuration.
pub(super) fn pinned_entry(
    old: Option<&Value>,
    pinned: &ImageRef,
    port: u16,
    health_path: Option<&HealthPath>,
    data: Option<&DataSpec>,
) -> Value {
    let mut entry = old.and_then(EntryFields::of).unwrap_or_default();
    entry.image = Some(Value::from(pinned.as_str()));
    entry.container_port = Some(Value::from(port));
    match health_path {
        Some(path) if path.is_root() => entry.health_path = None,
        Some(path) => entry.health_path = Some(Value::from(path.to_string())),
        None => {}
    }
    if let Some(data) = data {
        entry.data = Some(serde_json::to_value(data).expect("a data spec serializes"));
    }
    serde_json::to_value(&entry).expect("an entry serializes")
}

/// `--data PATH:MAX_MIB` (`/data:512`): the app's data directory. The path
/// holds no ':' (`DataPath`), so the last one separates the size.
pub(super) fn data_arg(arg: &str) -> Result<DataSpec, Refusal> {
    let parsed = arg.rsplit_once(':').and_then(|(path, mib)| {
        let max_mib = mib.parse::<u32>().ok().filter(|n| DATA_MIB_RANGE.contains(n))?;
        Some(DataSpec { path: DataPath::parse(path)?, max_mib })
    });
    parsed.ok_or_else(|| {
        Refusal::new(
            Code::InvalidCatalogEntry,
            format!(
                "--data {} must be PATH:MAX_MIB, such as /data:512: an absolute path of letters, digits, '/', \
                 '-', '.' and '_' outside /tmp, /proc, /sys, /dev, /etc, /usr, /run and the other system \
                 directories, and a cap from {} to {} MiB. Nothing was written.",
                crate::text::quoted(arg, 200),
                DATA_MIB_RANGE.start(),
                DATA_MIB_RANGE.end()
            ),
        )
    })
}
