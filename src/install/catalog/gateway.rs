//! `catalog gateway-image IMAGE`: the policy's `nginx_image`, pulled,
//! pinned by its registry digest and checked against the gateway's
//! container as `catalog pin` checks an app's, so the operator never edits
//! it by hand (issue 37: setup's skeleton names a placeholder). Runs as
//! root on the operator's terminal; writes nothing itself (`super::write`).
//!
//! The gateway image is used by the gateways made from then on (deploy,
//! update, nginx_config); a running gateway keeps the image it was made
//! from.

use super::{
    Change, ImageSource, Refusal, check_reference, current, esc, fetch_image, finish, uncovered_volumes,
};
use crate::host::paths::HostPaths;
use crate::install::doctor::ImageRole;

/// What the operator types to write a new gateway image.
pub const GATEWAY_WORD: &str = "gateway";
/// The question that asks for [`GATEWAY_WORD`].
pub const GATEWAY_PROMPT: &str = "To write the policy, type gateway";

/// Checks `image`, pulls it (or reads the local one when the pull fails)
/// and prepares the policy with it as `nginx_image`; writes nothing.
pub fn prepare_gateway_image(
    paths: &HostPaths,
    source: &dyn ImageSource,
    image: &str,
    now: i64,
) -> Result<Change, Refusal> {
    let reference = check_reference(image)?;
    let (before, mut value, policy) = current(paths)?;
    let fetched = fetch_image(source, &reference, ImageRole::Gateway)?;
    // Deploy refuses a gateway image with a VOLUME (it has no data path).
    let volumes = uncovered_volumes(fetched.local.config.volumes.keys().cloned().collect(), None);
    if !volumes.is_empty() {
        return Err(crate::control::validate::volumes_refusal(
            &esc(&fetched.pull),
            &volumes,
            "Nothing was written.",
        ));
    }
    value["nginx_image"] = fetched.pinned.as_str().into();
    let shown = format!(
        "{} {} ({}).\nGateway image (nginx_image), now: {}\nIt will be: {}\n\
         Gateways made from now on use it; running ones keep theirs until a plan makes them anew.\n",
        if fetched.pulled { "Pulled" } else { "Could not pull; read the local image" },
        esc(&fetched.pull),
        if fetched.pulled { "registry digest" } else { "its registry digest as docker last saw it" },
        esc(policy.nginx_image.as_str()),
        esc(fetched.pinned.as_str())
    );
    let change = finish(paths, &policy, GATEWAY_WORD.to_owned(), before, &value, shown, now)?;
    Ok(Change { prompt: GATEWAY_PROMPT, ..change })
}
