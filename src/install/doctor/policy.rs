//! The doctor's rules on the policy's content: the helper's parser accepts
//! it, each approver is a person's account and not the agent's, each env
//! file is root's private file and parses, each pinned image fits the
//! container volce-lab starts from it. Runs as root inside
//! `volce-lab-host doctor`, on what the probe read.

use std::path::Path;

use super::{DoctorPaths, DoctorProbe, Finding, ImageConfig, PolicyFacts, fail, ok, protected, warn};
use crate::host::env_files::EnvDir;
use crate::vocab::EnvFileName;

pub(super) fn check_policy(
    paths: &DoctorPaths,
    probe: &dyn DoctorProbe,
    agent: Option<&str>,
    findings: &mut Vec<Finding>,
) {
    if let Some(dir) = paths.policy.parent() {
        findings.push(protected(paths, "policy directory", dir, "0755"));
    }
    let file = protected(paths, "policy file", &paths.policy, "0600");
    let present = !file.detail.ends_with("is missing");
    findings.push(file);
    if !present {
        return;
    }
    match probe.policy(&paths.policy) {
        Err(why) => findings.push(fail(
            "policy content",
            format!("refused: {why}"),
            format!("correct {} (see /usr/share/doc/volce-lab/policy.example.jsonc)", paths.policy.display()),
        )),
        Ok(PolicyFacts { images, catalog_entries, gateway, approvers, env_files, .. }) => {
            findings.push(if catalog_entries == 0 {
                // Valid (setup's skeleton starts so), but nothing can be deployed yet.
                warn(
                    "policy content",
                    "valid, but the catalog is empty: nothing can be deployed yet",
                    "pin an image you reviewed: sudo volce-lab-host catalog pin KEY IMAGE",
                )
            } else {
                ok("policy content", format!("valid, {} pinned image(s)", images.len()))
            });
            check_approvers(&paths.policy, &approvers, agent, probe, findings);
            check_env_files(paths, &env_files, findings);
            for image in &images {
                let role = if *image == gateway { ImageRole::Gateway } else { ImageRole::App };
                findings.push(check_image(image, role, probe));
            }
        }
    }
}

/// Each env file the catalog names, through the helper's own reader
/// (`crate::host::env_files`): in the directory beside the policy, root's,
/// 0600, not a symlink, within its bounds, every line `NAME=value`. A
/// finding names the file and the line, never a value.
fn check_env_files(paths: &DoctorPaths, names: &[EnvFileName], findings: &mut Vec<Finding>) {
    let env = EnvDir::of(&paths.host());
    for name in names {
        let path = env.path(name);
        let finding = match env.configuration(name) {
            Ok(configuration) => ok(
                "env file",
                format!("{} is root's, mode 0600, {} variable(s)", path.display(), configuration.len()),
            ),
            Err(refusal) => fail(
                "env file",
                refusal.message.trim_end_matches(" nothing was changed.").trim_end_matches(';').to_owned(),
                format!(
                    "create or correct it as root: one NAME=value per line, then chown root:root {0} and \
                     chmod 600 {0} (the directory {1}: root's, 0755)",
                    path.display(),
                    env.dir.display()
                ),
            ),
        };
        findings.push(finding);
    }
}

/// Which container a pinned image becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageRole {
    /// A catalog image: run as `--user 1000:1000`, its own command.
    App,
    /// `nginx_image`: run as `--user 101:101`, nginx in the foreground.
    Gateway,
}

/// A pinned image held against the container volce-lab starts from it
/// (server-install.md, "The catalog's images"). Only warnings: deploy pulls by
/// digest, so an image not present yet is normal on a fresh server, and
/// whether a mismatched image still works only a deploy can tell.
///
/// It fits when its `User` is the uid (or uid:gid) volce-lab runs it as, so
/// the files the image made for its user are that user's in the
/// container, and its default command starts something: for the gateway,
/// nginx in the foreground (`daemon off;`), since volce-lab gives it no
/// command.
fn check_image(image: &str, role: ImageRole, probe: &dyn DoctorProbe) -> Finding {
    let shown = crate::text::for_terminal(image);
    let Some(config) = probe.image_config(image) else {
        // The pin commands pull and check it, and replace a placeholder.
        let pin = match role {
            ImageRole::App => "sudo volce-lab-host catalog pin KEY IMAGE",
            ImageRole::Gateway => "sudo volce-lab-host catalog gateway-image IMAGE",
        };
        // The skeleton's placeholder (issue 37's walk: its fix began with a
        // `docker pull` of an image no registry serves).
        if image.starts_with(crate::install::setup::PLACEHOLDER_REGISTRY) {
            return warn(
                "image",
                format!("{shown} is the policy skeleton's placeholder, which no registry serves"),
                format!("pin the image you reviewed in its place: {pin}"),
            );
        }
        return warn(
            "image",
            format!("{shown} is not in the local engine (deploy pulls it by digest)"),
            format!("docker pull {shown}, or check the registry serves it; to pin another image: {pin}"),
        );
    };
    let runs_as = role.runs_as();
    let misfits = misfits(&config, role);
    if misfits.is_empty() {
        ok("image", format!("{shown} is present, runs as {runs_as} with its own command"))
    } else {
        warn(
            "image",
            format!("{shown} does not fit the {} template: {}", role.name(), misfits.join("; ")),
            "rebuild it with USER and CMD as server-install.md's images section says, then pin the new digest",
        )
    }
}

/// What in an image's config does not fit the container volce-lab starts
/// from it in `role`, one phrase each; empty when it fits. The one check of
/// an image against the templates: the doctor warns with it, and
/// `volce-lab-host catalog pin` refuses with it (`image_misfits_template`).
pub fn misfits(config: &ImageConfig, role: ImageRole) -> Vec<String> {
    let (uid, runs_as) = (role.uid(), role.runs_as());
    let command: Vec<&str> = config.entrypoint.iter().chain(&config.cmd).map(String::as_str).collect();
    let user = crate::text::for_terminal(&config.user);
    let mut misfits = Vec::new();
    if config.user != uid && config.user != runs_as {
        let built_for =
            if config.user.is_empty() { "root (no USER)".to_owned() } else { format!("`{user}`") };
        misfits.push(format!("its USER is {built_for}, but volce-lab runs it as {runs_as}"));
    }
    match role {
        ImageRole::App if command.is_empty() => {
            misfits.push("it has no CMD or ENTRYPOINT, and volce-lab gives it no command".to_owned())
        }
        ImageRole::Gateway
            if !command.iter().any(|word| Path::new(word).file_name().is_some_and(|n| n == "nginx"))
                || !command.contains(&"daemon off;") =>
        {
            misfits.push(format!(
                "its command {} does not start nginx in the foreground (nginx -g 'daemon off;')",
                crate::text::for_terminal(&format!("{command:?}"))
            ))
        }
        _ => {}
    }
    misfits
}

impl ImageRole {
    fn uid(self) -> &'static str {
        match self {
            ImageRole::App => "1000",
            ImageRole::Gateway => "101",
        }
    }

    /// What to do about an image that misfits this role, one whole sentence.
    pub fn rebuild_step(self) -> &'static str {
        match self {
            ImageRole::App => crate::vocab::Code::ImageMisfitsTemplate.fix(),
            ImageRole::Gateway => {
                "Rebuild the gateway image with USER 101 and nginx -g 'daemon off;' as its command, push it, \
                 then pin it again with catalog gateway-image."
            }
        }
    }

    /// The `--user` volce-lab gives the container.
    pub fn runs_as(self) -> &'static str {
        match self {
            ImageRole::App => "1000:1000",
            ImageRole::Gateway => "101:101",
        }
    }

    fn name(self) -> &'static str {
        match self {
            ImageRole::App => "app",
            ImageRole::Gateway => "gateway",
        }
    }
}

/// An approver must be a person's account that exists, and never the
/// agent's: the parser cannot know either (accounts come and go, and the
/// agent is named only in sudoers), so the doctor checks both.
fn check_approvers(
    policy: &Path,
    approvers: &[String],
    agent: Option<&str>,
    probe: &dyn DoctorProbe,
    findings: &mut Vec<Finding>,
) {
    for approver in approvers {
        if Some(approver.as_str()) == agent {
            findings.push(fail(
                "approver",
                format!("`{approver}` is the agent's own account: the agent could approve its own plans"),
                format!("remove `{approver}` from approvers in {}", policy.display()),
            ));
        } else if probe.groups_of(approver).is_none() {
            findings.push(fail(
                "approver",
                format!("`{approver}` is not an account on this server: nobody can approve as it"),
                format!(
                    "create the operator's account (useradd --create-home {approver}) or correct approvers"
                ),
            ));
        } else {
            findings.push(ok("approver", format!("`{approver}` is an account and not the agent's")));
        }
    }
}
