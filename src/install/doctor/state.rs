//! The doctor's rules on the state directory: its owner and mode, the
//! database's integrity, schema and audit chain, the managed apps held
//! against the engine, and plans stuck executing or needing inspection.
//! Runs as root inside `volce-lab-host doctor`; reads only.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use super::{AppDrift, DoctorPaths, DoctorProbe, Finding, fail, ok, plans};

pub(super) fn check_state(paths: &DoctorPaths, probe: &dyn DoctorProbe, findings: &mut Vec<Finding>) {
    let dir = &paths.state_dir;
    if !state_dir_findings(paths, findings) {
        return;
    }
    check_pause(dir, findings);
    // What a damaged database needs: the helper refuses it
    // (`state_corrupt`) until then. docs/operator.md says how the backup is kept.
    let restore = format!(
        "the helper refuses it (state_corrupt); keep a copy of {} as \
         evidence, then restore state.db from the backup operator.md has you keep \
         (`volce-lab-host state backup`, or `sqlite3 state.db .backup`) and delete state.db-wal and state.db-shm",
        dir.display()
    );
    match probe.store(dir) {
        Err(why) => findings.push(fail("database", format!("cannot be opened: {why}"), restore)),
        Ok(None) => findings.push(ok("database", "not created yet: the first rpc creates it")),
        Ok(Some(health)) => {
            if health.integrity_ok {
                findings.push(ok("database", "PRAGMA integrity_check: ok"));
            } else {
                findings.push(fail("database", "PRAGMA integrity_check reports damage", restore));
            }
            let held = crate::store::hold::held(&crate::host::HostPaths::database_in(dir));
            if health.schema_version == health.expected_schema_version {
                findings.push(ok("schema", format!("version {}", health.schema_version)));
            } else if held && health.schema_version < health.expected_schema_version {
                // Read-only, as every probe here: the hold is reported, never lifted.
                findings.push(fail(
                    "schema",
                    format!(
                        "version {}, restored for a downgrade (state restore --for-downgrade): this binary \
                         (schema {}) holds it unmigrated and refuses every request (downgrade_pending)",
                        health.schema_version, health.expected_schema_version
                    ),
                    "install the old package now (server-install.md, Upgrading); installing this one again \
                     lifts the hold instead",
                ));
            } else {
                findings.push(fail(
                    "schema",
                    format!(
                        "version {} but this binary expects {}",
                        health.schema_version, health.expected_schema_version
                    ),
                    "install the volce-lab version that wrote this database, or run any rpc to migrate an older one",
                ));
            }
            match &health.audit_break {
                None => findings.push(ok(
                    "audit chain",
                    format!(
                        "{} rows chain intact (check a kept head: volce-lab-host audit verify --from HASH)",
                        health.audit_rows
                    ),
                )),
                Some(broken) => {
                    let (seq, at) = broken.row();
                    findings.push(fail(
                        "audit chain",
                        format!("broken at row seq {seq} ({})", crate::text::rfc3339_seconds(at)),
                        "volce-lab-host audit verify names what changed; keep state.db as evidence (operator.md)",
                    ));
                }
            }
            if health.stuck_plans.is_empty() {
                findings.push(ok("plans", "none executing or needing inspection"));
            }
            check_drift(dir, probe, findings);
            for (plan, state) in health.stuck_plans {
                findings.push(plans::stuck_plan(dir, probe, plan.as_str(), state.as_str()));
            }
        }
    }
}

/// A pause in force is said, with who set it and why (`host::pause`).
fn check_pause(dir: &Path, findings: &mut Vec<Finding>) {
    let paths = crate::host::HostPaths { state_dir: dir.to_owned(), ..crate::host::HostPaths::fixed() };
    let owner = std::fs::symlink_metadata(dir).map(|meta| meta.uid()).unwrap_or(0);
    if let Ok(Some(pause)) =
        crate::host::pause::current(&crate::host::HostPaths { owner_uid: owner, ..paths })
    {
        findings.push(super::warn(
            "agent access",
            format!(
                "paused by {} at {}{}: every rpc is refused (paused)",
                crate::text::for_terminal(&pause.by),
                crate::text::rfc3339_seconds(pause.at),
                pause.reason.map(|r| format!(" ({})", crate::text::for_terminal(&r))).unwrap_or_default()
            ),
            "sudo volce-lab-host resume, once the maintenance is done",
        ));
    }
}

/// Each managed app held against the engine: drift is a finding with the
/// reviewed change that settles it (the agent plans it, an approver approves).
/// The state directory's owner and mode; false when there is none to look in.
fn state_dir_findings(paths: &DoctorPaths, findings: &mut Vec<Finding>) -> bool {
    let dir = &paths.state_dir;
    match std::fs::symlink_metadata(dir) {
        Ok(meta)
            if meta.is_dir()
                && meta.uid() == paths.owner_uid
                && crate::host::paths::state_dir_mode_ok(meta.permissions().mode()) =>
        {
            findings.push(ok(
                "state directory",
                format!("{} owned by uid {}, mode 0700", dir.display(), meta.uid()),
            ))
        }
        Ok(meta) if meta.is_dir() => findings.push(fail(
            "state directory",
            format!(
                "{} is owned by uid {} with mode {:04o}; it must be root's alone (mode 0700), and the helper \
                 refuses it until then (unsafe_path)",
                dir.display(),
                meta.uid(),
                meta.permissions().mode() & 0o7777
            ),
            format!("chown root:root {0} && chmod 0700 {0}", dir.display()),
        )),
        _ => {
            findings.push(fail(
                "state directory",
                format!("{} is missing or not a directory", dir.display()),
                "it is created by the first `volce-lab-host rpc`; check the helper runs",
            ));
            return false;
        }
    }
    true
}

fn check_drift(dir: &Path, probe: &dyn DoctorProbe, findings: &mut Vec<Finding>) {
    match probe.drift(dir) {
        Err(why) => findings.push(fail(
            "apps",
            format!("cannot be held against the engine: {why}"),
            "see the docker finding; volce-lab-host list shows the records meanwhile",
        )),
        Ok(drifted) if drifted.is_empty() => findings.push(ok("apps", "every managed app is as recorded")),
        Ok(drifted) => {
            for AppDrift { app, reason, message } in drifted {
                findings.push(fail(
                    format!("app {}", crate::text::for_terminal(&app)),
                    format!("drifted ({}): {}", reason.as_str(), crate::text::for_terminal(&message)),
                    format!(
                        "{}; the agent plans it (service_plan), you approve it (volce-lab-host list, show, approve)",
                        reason.fix()
                    ),
                ));
            }
        }
    }
}
