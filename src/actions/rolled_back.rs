//! The refusals for a plan whose change failed and whose rollback was
//! verified: what failed, what to fix, and that the host is free for the
//! corrected plan (the plan is `failed`, blocking nothing). One sentence
//! set per kind of rollback, which the actions name in
//! `PlanAction::rolled_back`. Runs as root inside the host helper; pure
//! (no engine call, no store).

use crate::docker::EngineError;
use crate::vocab::{Code, PlanId, Refusal};

/// A change that created things (a deploy) and whose rollback removed
/// them and verified it: what failed, what to fix, and that the host is
/// free for the corrected plan.
pub(super) fn created_and_removed(cause: &EngineError, id: &PlanId) -> Refusal {
    const AFTER: &str = "Everything the plan created (containers, networks, app directory) was removed and \
                         verified gone; nothing is retried and nothing else changed.";
    match cause {
        EngineError::ImageDeclaresVolumes { image, volumes } => crate::control::validate::volumes_refusal(
            &format!("The image {}", image.as_str()),
            volumes,
            &format!("Plan {id} failed before any container was created; {AFTER}"),
        ),
        EngineError::HealthCheckFailed => Refusal::new(
            Code::HealthCheckFailed,
            format!(
                "The new app did not answer through its gateway with 2xx/3xx in time, so plan {id} failed and \
                 was rolled back. {AFTER} Check container_port (the port the app listens on inside its \
                 container) and that the image serves HTTP there, then prepare a new deploy plan."
            ),
        ),
        EngineError::NginxRejected => Refusal::new(
            Code::NginxRejected,
            format!(
                "nginx rejected the gateway configuration (nginx -t), so plan {id} failed and was rolled back. \
                 {AFTER} Check server_name, then prepare a new deploy plan."
            ),
        ),
        EngineError::AccessoryNotReady { name } => Refusal::new(
            Code::DeployFailed,
            format!(
                "The accessory {name} did not pass its health command in time, so plan {id} failed and was \
                 rolled back before the app started. {AFTER} Kept data was only unmounted again. Its last lines \
                 are in app_log (untrusted output); the operator checks the accessory's image, health command \
                 and variables in the policy (docs/policy.md#accessories) before a new deploy plan."
            ),
        ),
        EngineError::TaskFailed { .. } | EngineError::TaskTimedOut { .. } => {
            before_start_failed(cause, id, AFTER)
        }
        EngineError::Call { step, .. } => Refusal::new(
            Code::DeployFailed,
            format!(
                "The deploy failed at step '{step}', so plan {id} failed and was rolled back. {AFTER} An \
                 operator can read the details on the server (volce-lab-host show {id}); a pull that fails \
                 usually means the registry is unreachable."
            ),
        ),
        _ => Refusal::new(
            Code::DeployFailed,
            format!("The deploy failed ({cause}), so plan {id} failed and was rolled back. {AFTER}"),
        ),
    }
}

/// A deploy or update whose `before_start` task failed (`cause`), rolled
/// back as `after` says: the task's code, with what the task did left to
/// the user (it ran before the new version, and may have done part).
fn before_start_failed(cause: &EngineError, id: &PlanId, after: &str) -> Refusal {
    let (code, what) = match cause {
        EngineError::TaskFailed { run } => {
            (Code::TaskFailed, format!("task {} exited with code {}", run.task, run.exit_code))
        }
        _ => (
            Code::TaskTimedOut,
            format!("task ran longer than its {} s", crate::vocab::TASK_TIMEOUT.as_secs()),
        ),
    };
    Refusal::new(
        code,
        format!(
            "The before_start {what}, so plan {id} failed and was rolled back before the new version started. \
             {after} What the task did before it ended stays; its last lines are in app_log (untrusted output)."
        ),
    )
}

/// A run_task whose container is removed and seen gone: the task ran and
/// exited with another code than 0, ran out of its time, or (any other
/// cause) never ran because Docker could not set its container up.
pub(super) fn task(cause: &EngineError, id: &PlanId) -> Refusal {
    match cause {
        EngineError::TaskFailed { run } => Refusal::new(
            Code::TaskFailed,
            format!(
                "The task {} ran and exited with code {}; its container was removed and seen gone. Plan {id} \
                 is failed: volce-lab changed nothing of the app, but what the task did before it exited \
                 stays. Its last lines are in app_log (untrusted output).",
                run.task, run.exit_code
            ),
        ),
        EngineError::TaskTimedOut { .. } => Refusal::new(
            Code::TaskTimedOut,
            format!(
                "The task ran longer than its {} s and was stopped; its container was removed and seen \
                 gone. Plan {id} is failed: volce-lab changed nothing of the app, but what the task did \
                 before it was stopped stays. Its last lines are in app_log (untrusted output).",
                crate::vocab::TASK_TIMEOUT.as_secs()
            ),
        ),
        _ => Refusal::new(
            Code::TaskFailed,
            format!(
                "The task never ran: Docker failed to set up its container ({cause}). Plan {id} is failed; \
                 the container was removed and seen gone, and nothing else changed. An operator can read the \
                 details on the server (volce-lab-host show {id})."
            ),
        ),
    }
}

/// A backup that failed before a snapshot was recorded: its data was only
/// read, and thawed again if it was frozen.
pub(super) fn backup(cause: &EngineError, id: &PlanId) -> Refusal {
    let step = match cause {
        EngineError::BackupFailed { step } => step,
        _ => "the copy",
    };
    Refusal::new(
        Code::BackupFailed,
        format!(
            "The backup failed at step '{step}', so no backup is counted (a snapshot of the app's data made \
             before that step stays in the repository; a cut dump is never kept). Plan {id} is failed: the \
             app's data and databases were only read (the data thawed again if it was frozen), nothing of the \
             app changed and nothing is retried. An operator can read the details on the server (volce-lab-host show {id}; \
             volce-lab-host backup check for the repository)."
        ),
    )
}

/// A restore that failed, or whose app did not answer on the restored
/// data: the data is as it was (never touched, or its safety snapshot put
/// back) and the app runs again if it ran.
pub(super) fn restore(cause: &EngineError, id: &PlanId) -> Refusal {
    let what = match cause {
        EngineError::BackupFailed { step } => format!("The restore failed at step '{step}'"),
        EngineError::HealthCheckFailed => {
            "The app did not answer its health check on what was restored".into()
        }
        other => format!("The restore failed ({other})"),
    };
    Refusal::new(
        Code::RestoreFailed,
        format!(
            "{what}, so plan {id} failed: what it was to replace (the app's data, or an accessory's database) \
             is as it was before the plan (untouched, or its safety snapshot put back) and the app was started \
             again if it ran. Nothing is retried. An \
             operator can read the details on the server (volce-lab-host show {id})."
        ),
    )
}

/// An expose or unexpose whose edge change was undone: the old
/// configuration back and reloaded, the joined network left, the new
/// certificate copies deleted.
pub(super) fn edge(cause: &EngineError, id: &PlanId) -> Refusal {
    let what = match cause {
        EngineError::NginxRejected => "The edge's nginx refused the new configuration (nginx -t)".to_owned(),
        EngineError::HealthCheckFailed => {
            "A name did not reach its app through the edge with 2xx/3xx in time".to_owned()
        }
        EngineError::EdgeNotRunning => "The edge was not running".to_owned(),
        EngineError::Acme(error) => format!("No certificate came from ACME ({}: {error})", error.code()),
        other => format!("The edge change failed ({other})"),
    };
    // Before its first change (no certificate, no edge to change), or undone.
    let how = match cause {
        EngineError::Acme(_) | EngineError::EdgeNotRunning => "nothing of it was changed",
        _ => "its old configuration put back and reloaded, the certificate copies of this plan deleted",
    };
    Refusal::new(
        Code::EdgeFailed,
        format!(
            "{what}, so plan {id} failed: the edge serves what it served before ({how}). Nothing is retried. \
             An operator can read the details on the server (volce-lab-host show {id}, volce-lab-host edge \
             status)."
        ),
    )
}

/// A start whose containers were stopped again and seen stopped.
pub(super) fn start(cause: &EngineError, id: &PlanId) -> Refusal {
    const AFTER: &str = "Both containers were stopped again (restart policy no) and seen stopped: the app is \
                         stopped as before, nothing is retried and nothing else changed.";
    match cause {
        EngineError::HealthCheckFailed => Refusal::new(
            Code::HealthCheckFailed,
            format!(
                "The app did not answer through its gateway with 2xx/3xx in time, so plan {id} failed and was \
                 rolled back. {AFTER} Read its logs (service_logs) before another start plan."
            ),
        ),
        _ => Refusal::new(
            Code::StartFailed,
            format!(
                "The start failed ({cause}), so plan {id} failed and was rolled back. {AFTER} An operator can \
                 read the details on the server (volce-lab-host show {id})."
            ),
        ),
    }
}

/// A restart whose start failed: both containers stopped again and seen
/// stopped, so the app is down (not as it was, unless it was down before).
pub(super) fn restart(cause: &EngineError, id: &PlanId) -> Refusal {
    const AFTER: &str = "Both containers were stopped again (restart policy no) and seen stopped: the app is \
                         now stopped and recorded so, nothing is retried and nothing is blocked; a start plan \
                         brings it back once the cause is fixed.";
    match cause {
        EngineError::HealthCheckFailed => Refusal::new(
            Code::HealthCheckFailed,
            format!(
                "The app was stopped and started again but did not answer through its gateway with 2xx/3xx in \
                 time, so plan {id} failed and was rolled back. {AFTER} Read its logs (service_logs) first."
            ),
        ),
        _ => Refusal::new(
            Code::StartFailed,
            format!(
                "The restart failed while starting ({cause}), so plan {id} failed and was rolled back. {AFTER} \
                 An operator can read the details on the server (volce-lab-host show {id})."
            ),
        ),
    }
}

/// An update whose new container was removed while the old one kept serving.
pub(super) fn update(cause: &EngineError, id: &PlanId) -> Refusal {
    const AFTER: &str = "The old container kept serving throughout; the new container was removed and the \
                         previous nginx.conf restored, and that was verified. Nothing is retried.";
    match cause {
        EngineError::ImageDeclaresVolumes { image, volumes } => crate::control::validate::volumes_refusal(
            &format!("The image {}", image.as_str()),
            volumes,
            &format!("Plan {id} failed before the new container was created. {AFTER}"),
        ),
        EngineError::HealthCheckFailed => Refusal::new(
            Code::HealthCheckFailed,
            format!(
                "The new container did not answer through the gateway with 2xx/3xx in time, so plan {id} \
                 failed and was rolled back. {AFTER} Check that the image serves HTTP on the app's \
                 container_port; a new update plan can be made at once."
            ),
        ),
        EngineError::NginxRejected => Refusal::new(
            Code::NginxRejected,
            format!(
                "nginx rejected the switched configuration, so plan {id} failed and was rolled back. {AFTER}"
            ),
        ),
        EngineError::TaskFailed { .. } | EngineError::TaskTimedOut { .. } => {
            before_start_failed(cause, id, AFTER)
        }
        _ => Refusal::new(
            Code::UpdateFailed,
            format!(
                "The update failed ({cause}), so plan {id} failed and was rolled back. {AFTER} An operator can \
                 read the details on the server (volce-lab-host show {id})."
            ),
        ),
    }
}

/// An update_accessory whose switch failed and whose old container runs
/// again, ready, with the app answering.
pub(super) fn accessory(cause: &EngineError, id: &PlanId) -> Refusal {
    const AFTER: &str = "The new container was removed and the old one started again on the same data, passed \
                         its health command, and the app answered; nothing is retried.";
    match cause {
        EngineError::ImageDeclaresVolumes { image, volumes } => crate::control::validate::volumes_refusal(
            &format!("The image {}", image.as_str()),
            volumes,
            &format!("Plan {id} failed before the old container was stopped; nothing changed."),
        ),
        EngineError::AccessoryNotReady { name } => Refusal::new(
            Code::UpdateFailed,
            format!(
                "The new image of accessory {name} did not pass its health command in time, so plan {id} failed \
                 and was rolled back. {AFTER} Its last lines are in app_log (untrusted output); the operator \
                 checks the image and health command the policy pins for it (docs/policy.md#accessories)."
            ),
        ),
        EngineError::HealthCheckFailed => Refusal::new(
            Code::HealthCheckFailed,
            format!(
                "The app did not answer through its gateway with 2xx/3xx once the accessory ran its new image, so \
                 plan {id} failed and was rolled back. {AFTER} The app may need a version that works with the \
                 new image first."
            ),
        ),
        _ => Refusal::new(
            Code::UpdateFailed,
            format!(
                "The accessory's update failed ({cause}), so plan {id} failed and was rolled back. {AFTER} An \
                 operator can read the details on the server (volce-lab-host show {id})."
            ),
        ),
    }
}

/// A rotate_credential whose rotate command failed (nothing changed), or
/// whose app did not answer in its new container and was put back with
/// the old credential, that verified.
pub(super) fn rotation(cause: &EngineError, id: &PlanId) -> Refusal {
    const AFTER: &str = "The accessory keeps its old credential and the app its old container, which served \
                         throughout; nothing is retried.";
    match cause {
        EngineError::HealthCheckFailed => Refusal::new(
            Code::HealthCheckFailed,
            format!(
                "The app's new container, with the new credential, did not answer through its gateway with \
                 2xx/3xx, so plan {id} failed and was rolled back (the rotate command ran again the other \
                 way). {AFTER}"
            ),
        ),
        EngineError::Call { step, .. } => Refusal::new(
            Code::UpdateFailed,
            format!(
                "The rotation failed at step '{step}', so plan {id} failed. {AFTER} When the step is the rotate \
                 command, the operator runs it by hand to read why (docs/policy.md#accessories)."
            ),
        ),
        _ => Refusal::new(
            Code::UpdateFailed,
            format!("The rotation failed ({cause}), so plan {id} failed and was rolled back. {AFTER}"),
        ),
    }
}
