//! What a deploy records of the accessories its catalog entry names
//! ([`AccessoryUse`]), and whether each one's data is kept from before.
//! Pure, like the rest of `validate`.
//!
//! An accessory's data belongs to the app and the accessory's name: it
//! lives at `<state>/data/<app>@<name>.ext4` beside its credential, so a
//! later deploy of the app finds what remove_app kept, its database and the
//! password that opens it together. Kept data is re-attached only for the
//! same accessory at the same path, as an app's own is (issue 38).

use super::data::kept_for_this_entry;
use super::{Context, HostFacts};
use crate::control::app_record::AppRecord;
use crate::control::policy::CatalogEntry;
use crate::vocab::{AccessoryName, AccessoryStart, AccessoryUse, AppName, Code, DataUse, Refusal, refuse};

/// The accessories a deploy of `entry` as `app` creates, in name order,
/// each with whether its data was kept from before.
pub fn for_deploy(
    app: &AppName,
    entry: &CatalogEntry,
    ctx: &Context<'_>,
    facts: &dyn HostFacts,
) -> Result<Vec<(AccessoryUse, bool)>, Refusal> {
    let mut accessories = Vec::new();
    for (name, app_env) in &entry.accessories {
        let Some(spec) = ctx.policy.accessories.get(name) else {
            // The policy's load refuses this; a refusal here keeps that one rule.
            return refuse(
                Code::PolicyInvalid,
                format!("The catalog names the accessory {name}, which the policy does not declare."),
            );
        };
        let (image, mount) = AccessoryUse::data_paths(ctx.data_dir, app, name);
        let kept = facts.kept_data_mib(&image)?;
        if kept.is_some() {
            kept_for_this_entry(app, ("accessory", name.as_str()), &spec.data, &image, facts)?;
        }
        let data = DataUse {
            path: spec.data.path.clone(),
            image,
            mount,
            max_mib: kept.unwrap_or(spec.data.max_mib),
        };
        let accessory = AccessoryUse {
            name: name.clone(),
            image: spec.image.clone(),
            port: spec.port,
            container_name: AccessoryUse::container_name(app, name),
            data,
            health: spec.health.clone(),
            env: spec.env.clone(),
            app_env: app_env.clone(),
        };
        accessories.push((accessory, kept.is_some()));
    }
    Ok(accessories)
}

/// The impact's line for one accessory a deploy creates.
pub fn touched(accessory: &AccessoryUse, kept: bool) -> String {
    let data = &accessory.data;
    let state = if kept {
        "kept from before: re-attached, with its credential"
    } else {
        "new, with a new credential"
    };
    format!(
        "{} (new, accessory {}, on the app's network only) with data {} ({state}, {} MiB at {})",
        accessory.container_name,
        accessory.name,
        data.image.display(),
        data.max_mib,
        data.path
    )
}

/// An update keeps the accessories the app was deployed with, and the
/// variables that tell it where they are: refused `accessories_changed`
/// when `entry` names others or other variables (checking the names the
/// variables set, and their templates, against the deploy's record).
pub fn unchanged(record: &AppRecord, key: &str, entry: &CatalogEntry) -> Result<(), Refusal> {
    let deployed: Vec<_> = record.accessories.iter().map(|a| (&a.name, &a.app_env)).collect();
    let wanted: Vec<_> = entry.accessories.iter().collect();
    if deployed == wanted {
        return Ok(());
    }
    let names = |list: Vec<&crate::vocab::AccessoryName>| {
        let names: Vec<&str> = list.iter().map(|n| n.as_str()).collect();
        if names.is_empty() { "none".to_owned() } else { names.join(", ") }
    };
    refuse(
        Code::AccessoriesChanged,
        format!(
            "{} was deployed with the accessories {} and their variables; the catalog entry `{key}` names {} or \
             other variables. An app keeps the accessories of its deploy: update to an entry with the same ones, \
             or remove_app (its data is kept) and deploy again; nothing was changed.",
            record.app,
            names(deployed.iter().map(|(n, _)| *n).collect()),
            names(wanted.iter().map(|(n, _)| *n).collect()),
        ),
    )
}

/// The accessories a start or restart of `record` starts first, each by
/// its recorded container as the engine shows it under its name; refused
/// `container_set_changed` when one is gone (only an operator knows why).
pub fn to_start(record: &AppRecord, ctx: &Context<'_>) -> Result<Vec<AccessoryStart>, Refusal> {
    let mut started = Vec::new();
    for accessory in &record.accessories {
        let Some(container) = container_of(record, accessory, ctx.snapshot) else {
            return refuse(
                Code::ContainerSetChanged,
                format!(
                    "The accessory container {} of {} is gone from the engine; nothing was changed. An operator \
                     inspects it; a remove_app plan (the data is kept) and a new deploy bring it back.",
                    accessory.container_name, record.app
                ),
            );
        };
        started.push(AccessoryStart { container: container.id.clone(), accessory: accessory.clone() });
    }
    Ok(started)
}

/// The container of `record`'s `accessory` as the engine shows it: the one
/// under its name whose id the record holds (a container of that name
/// made by hand is not it).
pub fn container_of<'s>(
    record: &AppRecord,
    accessory: &AccessoryUse,
    snapshot: &'s crate::vocab::Snapshot,
) -> Option<&'s crate::vocab::Container> {
    snapshot.containers.iter().find(|c| {
        c.name.trim_start_matches('/') == accessory.container_name && record.containers.contains(&c.id)
    })
}

/// The recorded accessory of `record` the agent named; refused
/// `invalid_parameters`, naming the ones it has, when it has no such one.
pub fn named<'r>(record: &'r AppRecord, asked: &str) -> Result<&'r AccessoryUse, Refusal> {
    let found =
        AccessoryName::parse(asked).and_then(|name| record.accessories.iter().find(|a| a.name == name));
    found.ok_or_else(|| {
        let has = record.accessory_names();
        Refusal::new(
            Code::InvalidParameters,
            format!(
                "{} has no accessory {:?}; its accessories: {has}. Nothing was changed.",
                record.app,
                crate::text::for_model(asked, 40)
            ),
        )
    })
}

/// The container of `record`'s `accessory`, running; refused
/// `app_not_running` otherwise (a restart plan brings it back).
pub fn running(
    record: &AppRecord,
    accessory: &AccessoryUse,
    snapshot: &crate::vocab::Snapshot,
) -> Result<crate::vocab::ContainerId, Refusal> {
    match container_of(record, accessory, snapshot) {
        Some(c) if c.state == "running" => Ok(c.id.clone()),
        _ => refuse(
            Code::AppNotRunning,
            format!(
                "The accessory {} of {} is not running: a restart plan brings it back first.",
                accessory.name, record.app
            ),
        ),
    }
}
