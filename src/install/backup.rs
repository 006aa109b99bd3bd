//! `volce-lab-host backup init|list|check`: the operator's commands for the
//! backup repository the policy's `backup` object names (issue 41). Runs as
//! root on the operator's terminal; a layer above `crate::host`, so the
//! agent has no path here. The copies themselves are `backup` plans
//! (`crate::actions::Backup`); these make the repository, show what it
//! holds of volce-lab's, and verify it.
//!
//! What they print is restic's facts as we read them (ids, times, tags),
//! never restic's own words: a failure names the step and the next one.

use crate::docker::EngineError;
use crate::docker::backup::{self, Listed};
use crate::exit::Exit;
use crate::host::paths::load_policy;
use crate::host::{HostPaths, ShippedHost, process_check, terminal};
use crate::text::for_terminal as esc;
use crate::vocab::{AppName, BackupConfig, Code, Refusal};

/// One of the commands in the shipped binary: root, the fixed paths.
pub fn run(command: fn(&HostPaths) -> Result<String, Refusal>) -> Exit {
    terminal(process_check().and_then(|()| command(&ShippedHost::shipped().paths)))
}

/// `backup list [APP]` in the shipped binary.
pub fn run_list(app: Option<&str>) -> Exit {
    terminal(process_check().and_then(|()| list(&ShippedHost::shipped().paths, app)))
}

/// `backup init`: makes the repository with the policy's password.
pub fn init(paths: &HostPaths) -> Result<String, Refusal> {
    let config = configured(paths)?;
    backup::init(&config)
        .map_err(|e| failed(&config, &e, "restic init makes a repository only where none is"))?;
    Ok(format!(
        "Made the backup repository {}. Keep a copy of {} off this server: without it no snapshot can be read.\n",
        esc(config.repository.as_str()),
        config.password_file.display()
    ))
}

/// `backup check`: restic's check of the repository's structure.
pub fn check(paths: &HostPaths) -> Result<String, Refusal> {
    let config = configured(paths)?;
    backup::check(&config).map_err(|e| failed(&config, &e, "run `sudo restic check` by hand to read why"))?;
    Ok(format!("The backup repository {} is sound (restic check).\n", esc(config.repository.as_str())))
}

/// `backup list [APP]`: the snapshots volce-lab made, of one app or all,
/// oldest first: id, time, app, catalog entry, image digest and plan.
pub fn list(paths: &HostPaths, app: Option<&str>) -> Result<String, Refusal> {
    let app = app
        .map(|name| {
            AppName::parse(name).ok_or_else(|| {
                Refusal::new(
                    Code::InvalidAppName,
                    format!("{} is not an app name; nothing was read.", esc(name)),
                )
            })
        })
        .transpose()?;
    let config = configured(paths)?;
    let listed =
        backup::list(&config, app.as_ref()).map_err(|e| failed(&config, &e, "`backup check` tells why"))?;
    Ok(render(&listed, app.as_ref()))
}

/// The listing's text.
fn render(listed: &[Listed], app: Option<&AppName>) -> String {
    if listed.is_empty() {
        let of = app.map_or_else(|| "of any app".to_owned(), |app| format!("of {app}"));
        return format!("No snapshot {of} that volce-lab made is in the repository.\n");
    }
    let mut text = String::from("SNAPSHOT TIME APP ENTRY IMAGE PLAN\n");
    for snapshot in listed {
        let tag = |key| esc(snapshot.tag(key).unwrap_or("-"));
        let time = snapshot.time.get(..19).unwrap_or(&snapshot.time);
        let image = snapshot.tag("image").map_or("-".to_owned(), |d| esc(d.get(..19).unwrap_or(d)));
        text.push_str(&format!(
            "{} {}Z {} {} {image} {}\n",
            snapshot.short_id,
            esc(time),
            tag("app"),
            tag("entry"),
            tag("plan")
        ));
    }
    text
}

/// The policy's `backup`, or the refusal saying there is none.
fn configured(paths: &HostPaths) -> Result<BackupConfig, Refusal> {
    load_policy(paths)?.backup.ok_or_else(|| {
        Refusal::new(
            Code::BackupNotConfigured,
            format!(
                "{} has no backup object, so there is no repository; nothing was done. Add one \
                 (docs/policy.md#backup), then run `sudo volce-lab-host backup init`.",
                paths.policy.display()
            ),
        )
    })
}

/// A repository command that failed: the step, and what to look at.
fn failed(config: &BackupConfig, error: &EngineError, next: &str) -> Refusal {
    let step = match error {
        EngineError::BackupFailed { step } | EngineError::Call { step, .. } => *step,
        _ => "restic",
    };
    let why = if step == "check the backup password file" {
        format!("{} must be root's regular file with mode 0600", config.password_file.display())
    } else {
        format!("the repository {} did not answer as asked", esc(config.repository.as_str()))
    };
    Refusal::new(
        Code::BackupFailed,
        format!("The step '{step}' failed: {why}; nothing was changed. Next: {next}."),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_prints_our_tags_and_says_when_there_is_nothing() {
        let listed: Vec<Listed> = serde_json::from_str(&format!(
            r#"[{{"time":"2026-12-06T16:14:45.115529559Z","short_id":"1e4d6c43","id":"1e4d6c43ff",
                 "tags":["volce-lab","app=blog","entry=web","image=sha256:{}","plan=abc"]}}]"#,
            "5".repeat(64)
        ))
        .unwrap();
        let text = render(&listed, None);
        assert!(text.contains("1e4d6c43 2026-12-06T16:14:45Z blog web sha256:555555555555 abc"), "{text}");
        let blog = AppName::parse("blog").unwrap();
        assert_eq!(
            render(&[], Some(&blog)),
            "No snapshot of blog that volce-lab made is in the repository.\n"
        );
    }
}
