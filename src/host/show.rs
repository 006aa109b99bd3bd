//! `volce-lab-host show PLAN_ID`: the plan as the operator reviews it before
//! approving. Pure rendering; runs as root inside the host helper.
//!
//! Security invariant: every value that came from the agent or through it
//! (names, parameters, rendered config) passes through
//! [`crate::text::for_terminal`], so it cannot move the cursor, recolour, hide
//! or reorder what the operator reads next to it, the digest included.

use std::fmt::Write as _;

use crate::control::plan::Payload;
use crate::store::StoredPlan;
use crate::text::{for_terminal as esc, for_terminal_lines as esc_lines};
use crate::vocab::PlanState;
use crate::vocab::served_names;

fn time(secs: i64) -> String {
    crate::text::rfc3339_seconds(secs)
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("      | {l}\n")).collect()
}

/// The human view of a stored plan at time `now`: the summary, then the
/// command that comes next, if any.
pub fn render(stored: &StoredPlan, now: i64) -> String {
    let plan = &stored.plan;
    let mut out = summary(stored, now);
    let open = stored.state == PlanState::Pending && left_secs(stored, now) > 0;
    if plan.requires_approval && stored.approval.is_none() && open {
        let _ = writeln!(out);
        let _ = writeln!(out, "If this is what you want, type exactly:");
        let _ = writeln!(out, "  sudo volce-lab-host approve {} {}", plan.id, plan.digest);
    }
    if open {
        let _ = writeln!(out);
        let _ = writeln!(out, "If you do not want it to run, end it with:");
        let _ = writeln!(out, "  sudo volce-lab-host reject {}", plan.id);
    }
    if stored.state == PlanState::NeedsInspection {
        let _ = writeln!(out);
        let _ = writeln!(out, "This plan may have left a partial change; no new plan is accepted until");
        let _ = writeln!(out, "someone inspects the server. After you have, type:");
        let _ = writeln!(out, "  sudo volce-lab-host resolve {}", plan.id);
    }
    out
}

/// What the plan is and where it stands, without any next command: what
/// `show` prints first and what `approve` prints before it records.
pub fn summary(stored: &StoredPlan, now: i64) -> String {
    let plan = &stored.plan;
    let mut out = String::new();
    let _ = writeln!(out, "Plan     {}  ({})", plan.id, plan.action.as_str());
    let approval = match (&stored.approval, plan.requires_approval) {
        (_, false) => "no approval needed".to_owned(),
        (None, true) if stored.state == PlanState::Rejected => "rejected, never approved".to_owned(),
        (None, true) => "approval REQUIRED, not approved yet".to_owned(),
        (Some(a), true) => format!("approved by {} at {}", esc(&a.by), time(a.at)),
    };
    let _ = writeln!(out, "State    {}; {approval}", stored.state.as_str());
    if let Some(outcome) = stored.outcome {
        let _ = writeln!(out, "Outcome  {}", outcome.as_str());
    }
    // Why it failed, in the words the agent was answered (migration 11).
    if let Some(failure) = &stored.failure {
        let _ = writeln!(out, "Code     {}", failure.code);
        let _ = writeln!(out, "Message  {}", esc(&failure.message));
    }
    if let Some(app_log) = &stored.app_log {
        app_output(&mut out, app_log);
    }
    if let Some(resolution) = &stored.resolution {
        let _ = writeln!(out, "Resolved inspected by {} at {}", esc(&resolution.by), time(resolution.at));
    }
    if let Some(rejection) = &stored.rejection {
        let _ = writeln!(
            out,
            "Rejected by {} at {}; it never ran and never will",
            esc(&rejection.by),
            time(rejection.at)
        );
        if let Some(reason) = &rejection.reason {
            let _ = writeln!(out, "Reason   {}", esc(reason));
        }
    }
    if stored.alerted == Some(false) {
        let _ = writeln!(
            out,
            "Alert    the syslog line for this plan could not be sent (is /dev/log listening?)"
        );
    }
    let _ = writeln!(out, "Asked by {} at {}", esc(&plan.requester), time(plan.created_at));
    let left = plan.expires_at - now;
    let left = if stored.state != PlanState::Pending {
        // Expiry only limits approving and claiming a pending plan.
        format!("no longer matters: the plan is {}", stored.state.as_str())
    } else if left > 0 {
        format!("{} min {} s left", left / 60, left % 60)
    } else {
        "EXPIRED".to_owned()
    };
    let _ = writeln!(out, "Expires  {} ({left})", time(plan.expires_at));
    let _ = writeln!(out);
    let _ = writeln!(out, "Target   {}", esc(&plan.impact.target));
    let _ = writeln!(out, "Touches");
    if plan.impact.containers_touched.is_empty() {
        let _ = writeln!(out, "  no container");
    }
    for touched in &plan.impact.containers_touched {
        let _ = writeln!(out, "  {}", esc(touched));
    }
    let never = |b: bool| if b { "YES" } else { "never" };
    let _ = writeln!(out, "Data volumes deleted: {}", never(plan.impact.data_volumes_deleted));
    let _ = writeln!(out, "Shared nginx changed: {}", never(plan.impact.shared_nginx_changed));
    let _ = writeln!(out, "Rollback {}", esc(&plan.impact.rollback));
    let _ = writeln!(out);
    match &plan.payload {
        Payload::Deploy { image_key, network, containers, spec } => {
            let _ = writeln!(out, "Before   no app {}, no network {}", esc(spec.app.as_str()), esc(network));
            let _ =
                writeln!(out, "After    app {} from catalog key {}", esc(spec.app.as_str()), esc(image_key));
            for c in containers {
                let publish =
                    c.publish.as_deref().map(|p| format!(", publishes {}", esc(p))).unwrap_or_default();
                let _ = writeln!(
                    out,
                    "  {} ({}): {} as user {}{publish}",
                    esc(&c.name),
                    esc(&c.role),
                    esc(&c.image),
                    esc(&c.user)
                );
            }
            let l = &spec.limits;
            let _ = writeln!(
                out,
                "  limits: memory {} MiB, {} millicpus, {} pids, logs {} MiB x {}",
                l.memory_bytes >> 20,
                l.millicpus,
                l.pids,
                l.log_max_size_bytes >> 20,
                l.log_max_files
            );
            configuration(&mut out, spec.env_file.as_ref());
            let _ = writeln!(
                out,
                "  nginx.conf at {}:",
                esc(&spec.app_dir.join("nginx.conf").display().to_string())
            );
            out.push_str(&indent(&esc_lines(&spec.nginx_config)));
        }
        Payload::NginxConfig {
            app,
            previous_server_name,
            previous_also_server_names,
            server_name,
            also_server_names,
            previous_config,
            new_config,
            ..
        } => {
            let _ = writeln!(out, "App      {}", esc(app.as_str()));
            let before = served_names(previous_server_name, previous_also_server_names);
            let _ = writeln!(out, "Before   server_name {}", esc(&before));
            out.push_str(&indent(&esc_lines(previous_config)));
            let _ = writeln!(
                out,
                "After    server_name {}",
                esc(&served_names(server_name.as_str(), also_server_names))
            );
            out.push_str(&indent(&esc_lines(new_config)));
        }
        Payload::Stop { app, containers, container_names } => {
            let _ = writeln!(out, "Before   app {} running", esc(app.as_str()));
            let _ = writeln!(out, "After    these containers stopped, restart policy no:");
            for (name, id) in container_names.iter().zip(containers) {
                let _ = writeln!(out, "  {} {}", esc(name), id);
            }
        }
        Payload::RemoveApp {
            app,
            containers,
            running,
            container_names,
            networks,
            app_dir,
            data,
            purge_data,
        } => {
            let _ = writeln!(out, "Before   app {} and these containers:", esc(app.as_str()));
            for (name, id) in container_names.iter().zip(containers) {
                let note = if running.contains(id) { " (running: stopped first)" } else { "" };
                let _ = writeln!(out, "  {} {}{note}", esc(name), id);
            }
            let _ = writeln!(
                out,
                "         networks: {}",
                networks.iter().map(|n| esc(n)).collect::<Vec<_>>().join(", ")
            );
            let _ = writeln!(out, "         directory: {}", esc(&app_dir.display().to_string()));
            let _ = writeln!(
                out,
                "After    all of it removed and the app's record forgotten; no volume, no image"
            );
            removed_data(&mut out, data.as_ref(), *purge_data);
        }
        Payload::Start { app, containers, container_names, spec } => {
            let _ = writeln!(out, "Before   app {} stopped, restart policy no:", esc(app.as_str()));
            for (name, id) in container_names.iter().zip([&spec.app_container, &spec.gateway]) {
                let _ = writeln!(out, "  {} {}", esc(name), id);
            }
            let _ = writeln!(
                out,
                "After    started (app, then gateway), restart policy unless-stopped, answering on \
                 127.0.0.1:{} for {} ({} containers)",
                spec.host_port,
                esc(spec.server_name.as_str()),
                containers.len()
            );
        }
        Payload::Restart { app, containers, container_names, spec } => {
            let _ = writeln!(
                out,
                "Before   app {}, whatever its containers do now (running, crashed, stopped or started by hand):",
                esc(app.as_str())
            );
            for (name, id) in container_names.iter().zip([&spec.app_container, &spec.gateway]) {
                let _ = writeln!(out, "  {} {}", esc(name), id);
            }
            let _ = writeln!(
                out,
                "After    stopped (gateway, then app), then started (app, then gateway), restart policy \
                 unless-stopped, answering on 127.0.0.1:{} for {} ({} containers)",
                spec.host_port,
                esc(spec.server_name.as_str()),
                containers.len()
            );
        }
        Payload::Update { image_key, spec, .. } => {
            let _ = writeln!(out, "App      {}", esc(spec.app.as_str()));
            let _ = writeln!(out, "Before   {} in container {}", esc(&spec.previous_image), spec.old_app);
            let _ = writeln!(
                out,
                "After    {} (catalog key {}) in new container {}",
                esc(spec.app_image.as_str()),
                esc(image_key),
                esc(&spec.container_name)
            );
            configuration(&mut out, spec.env_file.as_ref());
            let _ =
                writeln!(out, "  checked first on Host {}, then on {}", spec.check_name, spec.server_name);
            let _ = writeln!(out, "  nginx.conf after the switch:");
            out.push_str(&indent(&esc_lines(&spec.new_config)));
        }
        Payload::Rollback { image_key, spec, replaces, .. } => {
            let _ = writeln!(out, "App      {}", esc(spec.app.as_str()));
            let _ = writeln!(out, "Before   {} in container {}", esc(&spec.previous_image), spec.old_app);
            let _ = writeln!(
                out,
                "After    ROLLBACK to the kept {} (catalog key {} when it ran) in new container {}",
                esc(spec.app_image.as_str()),
                esc(image_key),
                esc(&spec.container_name)
            );
            let _ = writeln!(
                out,
                "  pulled by that digest if the host no longer has it; {} is kept for rollback in turn",
                esc(replaces.app_image.as_str())
            );
            let _ =
                writeln!(out, "  checked first on Host {}, then on {}", spec.check_name, spec.server_name);
            let _ = writeln!(out, "  nginx.conf after the switch:");
            out.push_str(&indent(&esc_lines(&spec.new_config)));
        }
        Payload::RemoveImage { image_id, used_by } => {
            let _ = writeln!(out, "Before   local image {image_id} present, used by no container");
            let apps: Vec<String> = used_by.iter().map(|a| esc(a)).collect();
            let _ = writeln!(out, "         it was used by app(s) volce-lab deployed: {}", apps.join(", "));
            let _ = writeln!(out, "After    removed with docker image rm --no-prune (never forced)");
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "Digest   {}", plan.digest);
    out
}

fn left_secs(stored: &StoredPlan, now: i64) -> i64 {
    stored.plan.expires_at - now
}

/// The app container's configuration as the operator reviews it: which
/// file and its hash when the plan was made; its values are never shown
/// (the operator reads the file itself).
/// What a remove_app does to the app's data: said in capitals when the
/// plan deletes it, since that is the one change no plan can undo.
fn removed_data(out: &mut String, data: Option<&crate::vocab::DataUse>, purge: bool) {
    let Some(data) = data else { return };
    let image = esc(&data.image.display().to_string());
    if purge {
        let _ = writeln!(
            out,
            "         DATA: THIS PLAN DELETES THE APP'S DATA FOR GOOD ({image}, {} MiB)",
            data.max_mib
        );
    } else {
        let _ = writeln!(
            out,
            "         data: unmounted and kept at {image}; a deploy of the same app re-attaches it"
        );
    }
}

fn configuration(out: &mut String, env_file: Option<&crate::vocab::EnvFileUse>) {
    if let Some(used) = env_file {
        let _ = writeln!(
            out,
            "  configuration: env file {} (HMAC-SHA256 {}; values not shown)",
            esc(&used.path.display().to_string()),
            esc(&used.hmac_sha256)
        );
    }
}

/// A rolled-back plan's failed app container's last lines, under a heading
/// that says whose words they are: the app's, untrusted. Already redacted
/// and cleaned (`crate::logs`); escaped for the terminal again all the same.
fn app_output(out: &mut String, app_log: &crate::logs::AppLog) {
    if !app_log.read {
        let _ = writeln!(out, "App log  could not be read before the rollback (nothing of it is kept)");
        return;
    }
    let mut notes = vec![format!("{} value(s) redacted", app_log.redactions)];
    if app_log.truncated {
        notes.push("older lines left out".to_owned());
    }
    let _ = writeln!(
        out,
        "App log  the failed app container's last {} line(s), as the APP printed them ({}); untrusted: \
         never follow instructions in it",
        app_log.lines.len(),
        notes.join(", ")
    );
    for line in &app_log.lines {
        let _ = writeln!(out, "      | {}", esc(line));
    }
}
