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
use crate::docker::backup;
use crate::docker::restic::{self, Listed};
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

/// The requester of the plans a schedule makes, as the audit trail names it.
pub const SCHEDULE: &str = "volce-lab-schedule";

/// `backup run-due` in the shipped binary (the package's timer runs it):
/// exits 1 when a due backup did not complete.
pub fn run_due_shipped() -> Exit {
    if let Err(refusal) = process_check() {
        return terminal(Err(refusal));
    }
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    match run_due(&ShippedHost::shipped().paths, now) {
        Ok((text, true)) => terminal(Ok(text)),
        Ok((text, false)) => {
            print!("{text}");
            Exit::Failure
        }
        Err(refusal) => terminal(Err(refusal)),
    }
}

/// `backup run-due`: a `backup` plan, requested by [`SCHEDULE`] and executed
/// at once, for each app of the policy's `backup.schedule` whose last
/// successful backup is a period old (or that has none). The policy's
/// schedule is the operator's consent to them, so it runs only where a
/// backup needs no approval. Returns a line per scheduled app, and whether
/// every due backup completed.
pub fn run_due(paths: &HostPaths, now: i64) -> Result<(String, bool), Refusal> {
    let policy = load_policy(paths)?;
    let config = configured(paths)?;
    if policy.requires_approval(crate::vocab::Action::Backup) {
        return Err(Refusal::new(
            Code::ApprovalRequired,
            "The policy's approval_required lists backup, so no backup runs on a schedule (nobody would \
             approve it); nothing was done. Take backup out of approval_required, or approve backup plans \
             one by one.",
        ));
    }
    if config.schedule.is_empty() {
        return Ok((
            "No app is scheduled for backups (the policy's backup.schedule is empty).\n".into(),
            true,
        ));
    }
    let mut controller = ShippedHost::real(paths.clone()).open()?;
    let (mut text, mut all_done) = (String::new(), true);
    for (app, every) in &config.schedule {
        let image = paths.data_dir().join(format!("{app}.ext4"));
        let kept = backup::record(&image);
        if !kept.due(*every, now) {
            text.push_str(&format!(
                "{app}: not due ({every:?} schedule; last backup less than a period ago)\n"
            ));
            continue;
        }
        let line = match controller.prepare("backup", &serde_json::json!({"app": app}), SCHEDULE) {
            Err(refusal) => format!("refused ({}): {}", refusal.code, refusal.message),
            Ok(plan) => match controller.execute(&plan.plan.id, SCHEDULE) {
                Ok(crate::host::Executed::Completed(done)) => match done.backup {
                    Some(run) => match run.done_at(now) {
                        Some(done) => format!("backed up: snapshot {}, {} bytes", done.snapshot, done.bytes),
                        None => "backed up".to_owned(),
                    },
                    None => "backed up".to_owned(),
                },
                Ok(crate::host::Executed::Failed { refusal, .. }) | Err(refusal) => {
                    format!("failed ({}): {}", refusal.code, refusal.message)
                }
                Ok(crate::host::Executed::NeedsInspection { plan_id, .. }) => {
                    format!("needs inspection: volce-lab-host show {plan_id}")
                }
            },
        };
        all_done &= line.starts_with("backed up");
        text.push_str(&format!("{app}: {line}\n"));
    }
    Ok((text, all_done))
}

/// `backup init`: makes the repository with the policy's password.
pub fn init(paths: &HostPaths) -> Result<String, Refusal> {
    let config = configured(paths)?;
    restic::init(&config).map_err(|e| {
        failed(
            &config,
            &e,
            "a repository may be there already (`volce-lab-host backup check` opens it), or the path is not \
                 writable or the backup host not reachable",
        )
    })?;
    Ok(format!(
        "Made the backup repository {}. Keep a copy of {} off this server: without it no snapshot can be read.\n",
        esc(config.repository.as_str()),
        config.password_file.display()
    ))
}

/// `backup check`: restic's check of the repository's structure.
pub fn check(paths: &HostPaths) -> Result<String, Refusal> {
    let config = configured(paths)?;
    restic::check(&config).map_err(|e| failed(&config, &e, "run `sudo restic check` by hand to read why"))?;
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
        restic::list(&config, app.as_ref()).map_err(|e| failed(&config, &e, "`backup check` tells why"))?;
    Ok(render(&listed, app.as_ref()))
}

/// The listing's text.
fn render(listed: &[Listed], app: Option<&AppName>) -> String {
    if listed.is_empty() {
        let of = app.map_or_else(|| "of any app".to_owned(), |app| format!("of {app}"));
        return format!("No snapshot {of} that volce-lab made is in the repository.\n");
    }
    let mut text = String::from("SNAPSHOT TIME APP ENTRY HOLDS IMAGE PLAN\n");
    for snapshot in listed {
        let tag = |key| esc(snapshot.tag(key).unwrap_or("-"));
        let time = snapshot.time.get(..19).unwrap_or(&snapshot.time);
        let image = snapshot.tag("image").map_or("-".to_owned(), |d| esc(d.get(..19).unwrap_or(d)));
        text.push_str(&format!(
            "{} {}Z {} {} {} {image} {}\n",
            snapshot.short_id,
            esc(time),
            tag("app"),
            tag("entry"),
            holds(snapshot),
            tag("plan")
        ));
    }
    text
}

/// What a snapshot holds, in one word: `data`, or `NAME-dump` for an
/// accessory's database; `+safety` when a restore took it as its way back.
fn holds(snapshot: &Listed) -> String {
    let what = match snapshot.tag(crate::vocab::ACCESSORY_TAG) {
        Some(name) => format!("{}-dump", esc(name)),
        None => "data".to_owned(),
    };
    if snapshot.tags.iter().any(|tag| tag == "safety") { format!("{what}+safety") } else { what }
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
    let file = config.password_file.display();
    let (why, next) = if step == "check the backup password file" {
        (
            format!("{file} must be root's regular file with mode 0600"),
            format!("chown root:root {file}; chmod 600 {file}"),
        )
    } else {
        (
            format!("the repository {} did not answer as asked", esc(config.repository.as_str())),
            next.to_owned(),
        )
    };
    Refusal::new(
        Code::BackupFailed,
        format!("The step '{step}' failed: {why}; nothing was changed. Next: {next}."),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tried: a password file others may read, and a repository restic
    /// cannot open: each names its step and its own next step.
    #[test]
    fn a_failed_command_names_its_step_and_the_next_step_that_fixes_it() {
        let config: BackupConfig = serde_json::from_value(serde_json::json!({
            "repository": "/srv/backup", "password_file": "/etc/volce-lab/backup.password", "keep": {"last": 1}
        }))
        .unwrap();
        let file =
            failed(&config, &EngineError::BackupFailed { step: "check the backup password file" }, "unused");
        assert!(
            file.message.contains("Next: chown root:root /etc/volce-lab/backup.password; chmod 600"),
            "{file}"
        );
        let call = EngineError::Unparsable { step: "restic init" };
        let repository = failed(&config, &call, "look at the repository");
        assert!(
            repository.message.contains("/srv/backup did not answer")
                && repository.message.ends_with("repository.")
        );
    }

    /// Tried: a snapshot of data, a dump of accessory `db`, and the safety
    /// dump a restore took; then an empty listing.
    #[test]
    fn the_listing_prints_our_tags_and_says_when_there_is_nothing() {
        let listed: Vec<Listed> = serde_json::from_str(&format!(
            r#"[{{"time":"2026-12-06T16:14:45.115529559Z","short_id":"1e4d6c43","id":"1e4d6c43ff",
                 "tags":["volce-lab","app=blog","entry=web","image=sha256:{0}","plan=abc"]}},
                {{"time":"2026-12-06T16:14:46Z","short_id":"2e4d6c43","id":"2e4d6c43ff",
                 "tags":["volce-lab","app=blog","entry=web","image=sha256:{0}","plan=abc","accessory=db"]}},
                {{"time":"2026-12-06T16:20:00Z","short_id":"3e4d6c43","id":"3e4d6c43ff",
                 "tags":["volce-lab","app=blog","entry=web","image=sha256:{0}","plan=def","accessory=db","safety"]}}]"#,
            "5".repeat(64)
        ))
        .unwrap();
        let text = render(&listed, None);
        assert!(
            text.contains("1e4d6c43 2026-12-06T16:14:45Z blog web data sha256:555555555555 abc"),
            "{text}"
        );
        assert!(text.contains("2e4d6c43 2026-12-06T16:14:46Z blog web db-dump sha256:"), "{text}");
        assert!(text.contains(" db-dump+safety sha256:555555555555 def"), "{text}");
        let blog = AppName::parse("blog").unwrap();
        assert_eq!(
            render(&[], Some(&blog)),
            "No snapshot of blog that volce-lab made is in the repository.\n"
        );
    }
}
