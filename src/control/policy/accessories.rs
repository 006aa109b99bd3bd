//! The policy's `accessories` object (issue 40): the services apps may have
//! beside them, by name, each an [`AccessorySpec`]. Pure; the messages are
//! the operator's, one per key, naming the accessory.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{PolicyError, bad};
use crate::vocab::{
    AccessoryName, AccessorySpec, DATA_MIB_RANGE, MAX_ACCESSORIES, PLACEHOLDERS, TASK_ARGV_MAX,
    accessory_name_ok,
};

/// The shape every message names.
fn shape() -> String {
    format!(
        "{{\"image\": NAME@sha256:..., \"port\": 1024 to 65535, \"data\": {{\"path\", \"max_mib\": {} to {}}}, \
         \"health\": [\"/argv/0\", ...] (at most {TASK_ARGV_MAX}), \"env\": {{\"NAME\": \"text with {}\"}}, \"rotate\"?, \"dump\"?, \"load\"?: [\"/argv/0\", ...]}}",
        DATA_MIB_RANGE.start(),
        DATA_MIB_RANGE.end(),
        PLACEHOLDERS.join(", ")
    )
}

/// `accessories`: at most [`MAX_ACCESSORIES`], each name an
/// [`AccessoryName`] that no app container's name suffix takes.
pub(super) fn accessories_of(
    raw: &BTreeMap<String, Value>,
) -> Result<BTreeMap<AccessoryName, AccessorySpec>, PolicyError> {
    if raw.len() > MAX_ACCESSORIES {
        return bad(format!("accessories declares {} (at most {MAX_ACCESSORIES})", raw.len()));
    }
    let mut accessories = BTreeMap::new();
    for (key, value) in raw {
        let Some(name) = AccessoryName::parse(key).filter(accessory_name_ok) else {
            return bad(format!(
                "accessory name {key:?} must match ^[a-z][a-z0-9-]{{0,23}}$ and not be app, gateway, check, task \
                 or start with app- or task-"
            ));
        };
        let spec: AccessorySpec = serde_json::from_value(value.clone())
            .map_err(|e| PolicyError(format!("accessory {key:?} must be {}: {e}", shape())))?;
        if spec.port < 1024 {
            return bad(format!("accessory {key:?}: port must be from 1024 to 65535 (it runs unprivileged)"));
        }
        if !DATA_MIB_RANGE.contains(&spec.data.max_mib) {
            return bad(format!(
                "accessory {key:?}: data.max_mib must be from {} to {}",
                DATA_MIB_RANGE.start(),
                DATA_MIB_RANGE.end()
            ));
        }
        if spec.dump.is_some() != spec.load.is_some() {
            return bad(format!(
                "accessory {key:?}: dump and load go together (a dump nothing can load back is no backup, and a \
                 load has nothing to read without a dump): declare both or neither"
            ));
        }
        accessories.insert(name, spec);
    }
    Ok(accessories)
}
