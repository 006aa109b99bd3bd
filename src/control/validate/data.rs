//! What a plan records of an app's data directory ([`DataUse`]), and the
//! disk it needs. Pure, like the rest of `validate`: whether kept data
//! exists comes in through [`HostFacts::kept_data_mib`].
//!
//! An app's data belongs to its name, not to one deploy: it lives at
//! `<state>/data/<app>.ext4`, mounted on `<state>/data/<app>`, so a later
//! deploy under the same name finds what remove_app kept, and its plan
//! says it re-attaches it. But only under the catalog entry and path it
//! was kept for (issue 38): kept data is bound to its entry, not to the
//! name alone, so another entry's deploy under the name is refused
//! `data_entry_mismatch` (at prepare, and again at execute, which derives
//! the plan anew).

use super::{Context, HostFacts, MIB};
use crate::control::policy::CatalogEntry;
use crate::vocab::{AppName, Code, DataUse, Refusal, refuse};

/// The data a deploy of `entry` as `app` mounts, and whether it was kept
/// from before (then its size is the kept image's, whatever the entry says
/// now: a cap is fixed when the image is made).
pub fn for_deploy(
    app: &AppName,
    key: &str,
    entry: &CatalogEntry,
    ctx: &Context<'_>,
    facts: &dyn HostFacts,
) -> Result<Option<(DataUse, bool)>, Refusal> {
    let Some(spec) = &entry.data else { return Ok(None) };
    let image = ctx.data_dir.join(format!("{app}.ext4"));
    let mount = ctx.data_dir.join(app.as_str());
    let kept = facts.kept_data_mib(&image)?;
    if kept.is_some() {
        kept_for_this_entry(app, ("catalog entry", key), spec, &image, facts)?;
    }
    let data = DataUse { path: spec.path.clone(), image, mount, max_mib: kept.unwrap_or(spec.max_mib) };
    Ok(Some((data, kept.is_some())))
}

/// Kept data is re-attached only under the entry and at the path it was
/// kept for. Data kept without a record (by a build before issue 38) is
/// refused too: nothing says which entry it belongs to, and guessing
/// from the name is what let one app's files reach another's path.
/// `owner` names the entry or accessory (`catalog entry`, `accessory`).
pub(super) fn kept_for_this_entry(
    app: &AppName,
    (owner, key): (&str, &str),
    spec: &crate::vocab::DataSpec,
    image: &std::path::Path,
    facts: &dyn HostFacts,
) -> Result<(), Refusal> {
    let message = match facts.kept_data_for(image)? {
        Some(kept) if kept.entry == key && kept.path == spec.path => return Ok(()),
        Some(kept) => format!(
            "The data kept for {app} ({}) belongs to {owner} `{}` at {}, not to `{key}` at {}: it is \
             re-attached only by a deploy of {app} under `{}`. Deploy under that {owner}, choose another app \
             name, or ask the operator to delete the kept data (`volce-lab-host data purge {app}`); nothing \
             was changed.",
            image.display(),
            kept.entry,
            kept.path,
            spec.path,
            kept.entry
        ),
        None => format!(
            "The data kept for {app} ({}) has no record of the {owner} it was made for (an earlier \
             build kept it), so it is not re-attached under `{key}`: choose another app name, or ask the \
             operator to check what it holds and either delete it (`volce-lab-host data purge {app}`) or \
             record its entry (docs/data.md); nothing was changed.",
            image.display()
        ),
    };
    refuse(Code::DataEntryMismatch, message)
}

/// New data takes its whole size from the disk when it is made: the free
/// disk must cover all of it a deploy makes (`new_mib`, the app's and its
/// accessories') on top of the policy's floor.
pub fn room_for(new_mib: u64, ctx: &Context<'_>, facts: &dyn HostFacts) -> Result<(), Refusal> {
    let floor = ctx.policy.capacity.min_free_disk_mib;
    if new_mib > 0 && facts.capacity()?.free_disk_bytes < (floor + new_mib) * MIB {
        return refuse(
            Code::InsufficientCapacity,
            format!(
                "The app's new data needs {new_mib} MiB of disk on top of the {floor} MiB the host must keep \
                 free; ask the operator to free disk space or to give the catalog entry (or its accessories) a \
                 smaller data max_mib."
            ),
        );
    }
    Ok(())
}

/// A start, restart, update or rollback never makes new, empty data for
/// an app whose image is gone: that would hand the app an empty
/// directory where its data was. Refused `data_not_found` instead (the
/// engine checks again, `data_volume::mount_kept`).
pub fn still_there(
    record: &crate::control::app_record::AppRecord,
    facts: &dyn HostFacts,
) -> Result<(), Refusal> {
    let Some(data) = &record.data else { return Ok(()) };
    if facts.kept_data_mib(&data.image)?.is_some() {
        return Ok(());
    }
    refuse(
        Code::DataNotFound,
        format!(
            "The data image of {} ({}) is missing, and volce-lab never replaces it with an empty one: ask the \
             operator to restore it from a backup; nothing was changed.",
            record.app,
            data.image.display()
        ),
    )
}

/// The impact's line for the data of an app a start, restart, update or
/// rollback starts a container of: mounted first when it is not (after a
/// reboot), and the same data throughout.
pub fn kept_line(record: &crate::control::app_record::AppRecord) -> Option<String> {
    let data = record.data.as_ref()?;
    Some(format!("data {} (the app's, at {}: mounted first if it is not)", data.image.display(), data.path))
}

/// The impact's line for the data a deploy mounts.
pub fn touched(data: &DataUse, kept: bool) -> String {
    let (image, path, mib) = (data.image.display(), &data.path, data.max_mib);
    if kept {
        format!("data {image} (kept from before, {mib} MiB: re-attached at {path})")
    } else {
        format!("data {image} (new, {mib} MiB, mounted at {path})")
    }
}
