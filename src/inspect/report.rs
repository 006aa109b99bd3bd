//! `volce-lab inspect`: the human way in. Runs the three checks once and
//! prints a report read at a glance, or JSON lines. Runs unprivileged.

use std::io::Write as _;

use super::transport::SshTransport;
use super::{Check, CheckResult, Diagnosis, Inspector, Mismatch, Status};
use crate::config::{Config, Fleet, FleetTarget};
use crate::exit::Exit;
use crate::wire::answers::Open;
use crate::wire::answers::app_state::EngineState;

/// Which targets `inspect` reports on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Which {
    /// `--target NAME`, or nothing when one target is configured.
    One(Option<String>),
    /// `--all`: every configured target, one after another.
    All,
}

/// Runs identity, disk and web_status against the chosen targets once
/// and prints the report (or JSON lines, each naming its target) on stdout.
pub fn run(fleet: Fleet, runtime: &tokio::runtime::Runtime, json: bool, which: Which) -> Exit {
    let chosen: Vec<&FleetTarget> = match (&which, fleet.targets()) {
        (Which::All, targets) => targets.iter().collect(),
        (Which::One(None), [one]) => vec![one],
        (Which::One(None), _) => {
            eprintln!(
                "volce-lab: inspect: several targets are configured ({}); name one with --target NAME, or use --all",
                fleet.names().join(", ")
            );
            return Exit::Usage;
        }
        (Which::One(Some(name)), targets) => match targets.iter().find(|t| t.name == *name) {
            Some(target) => vec![target],
            None => {
                eprintln!(
                    "volce-lab: inspect: --target {} names no configured target; the targets are {}",
                    crate::text::quoted(name, 40),
                    fleet.names().join(", ")
                );
                return Exit::Usage;
            }
        },
    };
    let mut all_ok = true;
    let mut text = String::new();
    let mut table_rows: Vec<CheckResult> = Vec::new();
    let mut versions = String::new();
    let several = chosen.len() > 1;
    for target in chosen {
        let inspector = Inspector::new(target.config.clone()).named(&target.name);
        let diagnosed = runtime.block_on(async {
            let mut diagnosed = Vec::new();
            for check in Check::ALL {
                diagnosed.push(inspector.check_diagnosed(check).await);
            }
            diagnosed
        });
        let results: Vec<CheckResult> = diagnosed.iter().map(|(result, _)| result.clone()).collect();
        all_ok &= results.iter().all(|r| r.status == Status::Ok);
        // JSON lines are the results as the agent gets them: no diagnosis.
        if json {
            text.push_str(&json_lines(&results));
        } else if several {
            table_rows.extend(results);
            let version = inspector.server_version().describe();
            versions.push_str(&format!("{}: volce-lab {version}\n", target.name));
        } else {
            text.push_str(&render(&inspector, &diagnosed));
        }
    }
    if several && !json {
        text = table(&table_rows) + &versions;
    }
    let mut stdout = std::io::stdout().lock();
    if stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).is_err() {
        return Exit::Failure;
    }
    if all_ok { Exit::Ok } else { Exit::Failure }
}

/// `volce-lab targets`: one line per configured target with its alias,
/// expected identity, management switch, groups, whether this user has an
/// ssh master up for it and, through a master that is up, the server's
/// volce-lab version (its gate's identity answer: one identity check over
/// the connection that is already open). A target whose master is down is
/// not contacted; a stale socket makes that one check connect afresh.
pub fn targets(fleet: &Fleet, runtime: &tokio::runtime::Runtime) -> String {
    let mut rows =
        vec![["TARGET", "ALIAS", "EXPECTED", "MANAGEMENT", "GROUPS", "MASTER", "VERSION"].map(String::from)];
    for target in fleet.targets() {
        let config = &target.config;
        let present = match config.mode {
            crate::config::Mode::Ssh => {
                super::ssh_mux::MultiplexedSsh::new(SshTransport::of(config)).master_socket_present()
            }
            _ => None,
        };
        let master = match (config.mode, present) {
            (crate::config::Mode::Ssh, Some(true)) => "up",
            (crate::config::Mode::Ssh, Some(false)) => "down",
            (crate::config::Mode::Ssh, None) => "none (no private socket directory)",
            _ => "-",
        };
        let version = if present == Some(true) {
            let inspector = Inspector::new(config.clone());
            let identity = runtime.block_on(inspector.check(Check::Identity));
            match identity.status {
                Status::Ok => inspector.server_version().describe(),
                status => format!("- (identity: {})", status.as_str()),
            }
        } else {
            "-".into()
        };
        rows.push([
            target.name.clone(),
            if config.mode == crate::config::Mode::Ssh { config.ssh_alias.clone() } else { "-".into() },
            format!("{}@{}", config.expected_user, config.expected_host),
            if config.management { "enabled" } else { "disabled" }.into(),
            if target.groups.is_empty() { "-".into() } else { target.groups.join(",") },
            master.into(),
            version,
        ]);
    }
    let widths: Vec<usize> =
        (0..7).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// `inspect --all`: one row per target and check, columns sized to their
/// content, and the count of checks that are ok. Every cell is ours or
/// made safe for a terminal (`evidence`).
pub fn table(results: &[CheckResult]) -> String {
    let mut rows = vec![["TARGET", "CHECK", "STATUS", "EVIDENCE", "MS"].map(String::from)];
    for result in results {
        let duration = result.execution.as_ref().map_or(0, |e| e.duration_ms);
        rows.push([
            result.target.clone(),
            result.check.as_str().to_owned(),
            result.status.as_str().to_owned(),
            evidence(result),
            duration.to_string(),
        ]);
    }
    let widths: Vec<usize> =
        (0..5).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    let ok = results.iter().filter(|r| r.status == Status::Ok).count();
    let targets = {
        let mut names: Vec<&str> = results.iter().map(|r| r.target.as_str()).collect();
        names.dedup();
        names.len()
    };
    out.push_str(&format!("{ok} of {} checks ok on {targets} targets\n", results.len()));
    out
}

/// One JSON object per line, one line per check.
pub fn json_lines(results: &[CheckResult]) -> String {
    results.iter().map(|r| serde_json::to_string(r).expect("results serialize") + "\n").collect()
}

/// The report: a header that says what was contacted, then one line per
/// check with its status, key evidence and duration, and under a failed one
/// what the diagnosis adds (which part of the identity differed, why ssh
/// gave up and the command that shows ssh's own words).
pub fn render(inspector: &Inspector, diagnosed: &[(CheckResult, Option<Diagnosis>)]) -> String {
    let config = inspector.config();
    let mut out = String::new();
    if inspector.is_demo() {
        out.push_str("volce-lab inspect: DEMO - simulated results, no server was contacted\n");
    } else {
        out.push_str(&format!(
            "volce-lab inspect: {} mode, target {}, expecting {}@{}\n",
            config.mode.as_str(),
            config.target(),
            config.expected_user,
            config.expected_host
        ));
    }
    for (result, diagnosis) in diagnosed {
        let duration = result.execution.as_ref().map(|e| e.duration_ms).unwrap_or(0);
        out.push_str(&format!(
            "  {:<11} {:<19} {:<52} {:>6} ms\n",
            result.check.as_str(),
            result.status.as_str(),
            evidence(result),
            duration
        ));
        for line in diagnosis.map(|d| explain(config, d)).unwrap_or_default() {
            out.push_str(&format!("  {:<11} {}\n", "", crate::text::for_terminal(&line)));
        }
    }
    // Which way the checks went: through the server's ssh gate (one session
    // each) or with an identity session before each (no gate).
    if config.mode == crate::config::Mode::Ssh {
        out.push_str(&format!("  {}\n", inspector.sessions().explain()));
        out.push_str(&format!("  server: volce-lab {}\n", inspector.server_version().describe()));
    }
    let healthy = diagnosed.iter().filter(|(r, _)| r.status == Status::Ok).count();
    out.push_str(&format!("{healthy} of {} checks ok\n", diagnosed.len()));
    out
}

/// The lines a diagnosis adds under its check. Only the configuration's
/// values and fixed sentences: never what the target or ssh printed.
fn explain(config: &Config, diagnosis: Diagnosis) -> Vec<String> {
    let (host, user) = (&config.expected_host, &config.expected_user);
    match diagnosis {
        Diagnosis::IdentityMismatch(mismatch) => vec![match mismatch {
            Mismatch::Host => format!("the host differed (expected {host}); the user was {user} as expected"),
            Mismatch::User => format!("the user differed (expected {user}); the host was {host} as expected"),
            Mismatch::Both => format!("the host and the user both differed (expected {user}@{host})"),
            Mismatch::NotTwoLines => format!(
                "the answer was not the two lines hostname and id -un print (expected {host}, then {user}); \
                 a login script that prints can cause this"
            ),
        }],
        Diagnosis::Ssh(reason) => {
            let ssh = SshTransport {
                alias: config.ssh_alias.clone(),
                config_file: config.ssh_config.clone(),
                connect_timeout: config.timeout,
                auth_sock: None,
            };
            vec![
                reason.explain().to_owned(),
                format!("to see ssh's own words, run: {}", ssh.command_to_see_for_yourself()),
                // With the ssh gate, `true` is refused after a good login:
                // that line is the gate working, not the fault.
                "(if it ends with \"volce-lab-gate: refused (gate_refused)\", ssh logged in and the server's \
                 gate refused `true`, as it refuses every command but volce-lab's own: ssh itself works)"
                    .to_owned(),
            ]
        }
    }
}

/// The one fact a person wants from each check, made safe for a terminal.
fn evidence(result: &CheckResult) -> String {
    let text = match (result.check, result.status) {
        (Check::Identity, Status::Ok) => {
            let mut lines = result.output.lines();
            format!("host={} user={}", lines.next().unwrap_or("?"), lines.next().unwrap_or("?"))
        }
        (Check::Disk, Status::Ok) => {
            disk_evidence(&result.output).unwrap_or_else(|| "df output not understood".into())
        }
        (Check::WebStatus, Status::Ok | Status::CheckFailed) => gateway_evidence(&result.output),
        (_, Status::IdentityRequired) => "not run: identity not verified".into(),
        (_, Status::IdentityMismatch) => "target is not the expected host/user; answer withheld".into(),
        (_, Status::HelperUnavailable) => "host helper not reachable through sudo -n".into(),
        (_, Status::ConnectionFailed) => "could not reach the target".into(),
        (_, Status::Timeout) => "no answer in time; outcome unconfirmed".into(),
        (_, Status::OutputLimit) => "answer too large; stopped".into(),
        (_, Status::SshUnavailable) => "ssh client could not be started".into(),
        (_, Status::CheckFailed) => match result.exit_code {
            Some(code) => format!("command failed with exit code {code}"),
            None => "command failed".into(),
        },
        (_, other) => other.as_str().into(),
    };
    // Text from a server must not move the cursor or recolour the terminal.
    crate::text::for_terminal(&text)
}

/// `df -h /`: size, used, available, use% of the root filesystem.
fn disk_evidence(output: &str) -> Option<String> {
    let line = output.lines().nth(1)?;
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 6 {
        return None;
    }
    Some(format!("/ {} free of {} ({} used)", fields[3], fields[1], fields[4]))
}

fn gateway_evidence(output: &str) -> String {
    let Some(gateways) = super::gateway_states(output.as_bytes()) else {
        return "unparsable answer".into();
    };
    if gateways.is_empty() {
        return "no managed gateway yet: no app deployed".into();
    }
    let running = gateways.iter().filter(|g| g.state == Open::Known(EngineState::Running)).count();
    let mut text = format!("{running} of {} gateways running", gateways.len());
    for gateway in &gateways {
        // A helper older than drift may not name the app.
        let app = if gateway.app.is_empty() { "?" } else { gateway.app.as_str() };
        if gateway.stopped_on_purpose {
            text.push_str(&format!("; {app} stopped on purpose"));
        } else if let Some(drift) = &gateway.drift {
            text.push_str(&format!("; {app} drifted ({})", drift.reason.as_str()));
        } else if gateway.answers == Some(false) {
            text.push_str(&format!("; {app} runs but its gateway does not answer"));
        }
    }
    text
}

#[cfg(test)]
mod fleet_tests {
    use super::*;
    use crate::config::Fleet;

    fn result(target: &str, check: Check, status: Status) -> CheckResult {
        CheckResult {
            request_id: "r".into(),
            timestamp: "t".into(),
            is_demo: false,
            mode: "ssh".into(),
            target: target.into(),
            check,
            status,
            exit_code: None,
            output: String::new(),
            execution: None,
            reply: None,
            carried: None,
        }
    }

    #[test]
    fn the_all_table_has_one_aligned_row_per_target_and_check_and_counts_them() {
        let text = table(&[
            result("web-1", Check::Identity, Status::Ok),
            result("web-1", Check::Disk, Status::Ok),
            result("database-2", Check::Identity, Status::ConnectionFailed),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("TARGET      CHECK     STATUS"), "{text}");
        assert!(lines[3].starts_with("database-2  identity  connection_failed"), "{text}");
        assert_eq!(lines[4], "2 of 3 checks ok on 2 targets");
    }

    #[test]
    fn targets_lists_each_target_and_starts_nothing() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let text = targets(&Fleet::one(Config::default()), &runtime);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].starts_with("TARGET  ALIAS  EXPECTED"), "{text}");
        assert_eq!(lines[1], "demo    -      deploy@demo-host  disabled    -       -       -", "{text}");
    }
}
