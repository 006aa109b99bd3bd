//! The HTTPS edge's findings (issue 39): whether the edge runs where apps
//! are exposed, how long each exposed name's certificate has left, and
//! whether the renewal timer is on where a certificate comes from ACME.
//! Reads the records, the engine and the edge's certificate copies; changes
//! nothing.

use std::path::Path;

use super::finding::{Finding, fail, ok, warn};
use crate::text::for_terminal as esc;

/// A certificate with fewer days left than this is a warning.
const WARN_DAYS: i64 = 14;

/// Where the package's renewal timer's enable link is.
const RENEW_TIMER_LINK: &str = "/etc/systemd/system/timers.target.wants/volce-lab-edge-renew.timer";

/// What the doctor reads of the edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeFacts {
    /// `None`: no edge container of ours; else whether it runs.
    pub running: Option<bool>,
    pub names: Vec<NameFacts>,
    /// Whether volce-lab-edge-renew.timer is enabled.
    pub renew_timer: bool,
}

/// One exposed name: its app, whether ACME certifies it, and when the
/// certificate the edge serves expires (or why that cannot be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameFacts {
    pub app: String,
    pub name: String,
    pub acme: bool,
    pub not_after: Result<i64, String>,
}

/// The edge as it is on this host: its container, the records' exposed
/// names and the expiry of the edge's copy of each name's certificate.
pub fn read_edge(state_dir: &Path) -> Result<EdgeFacts, String> {
    let engine = crate::docker::client::DockerClient::new(state_dir);
    let running = engine.edge_state().map_err(|e| e.to_string())?.map(|state| state.running);
    let apps = crate::store::read_apps(&crate::host::HostPaths::database_in(state_dir))
        .map_err(|e| e.to_string())?;
    let certs = crate::docker::edge_files::certs_dir(&engine.edge_dir());
    let mut names = Vec::new();
    for record in apps.values() {
        for exposed in record.exposed.iter().flat_map(|e| &e.names) {
            let (cert, _) = crate::nginx::edge::cert_files(&exposed.name);
            names.push(NameFacts {
                app: record.app.to_string(),
                name: exposed.name.to_string(),
                acme: matches!(exposed.source, crate::vocab::CertSource::Acme { .. }),
                not_after: crate::docker::acme::facts(&certs.join(cert))
                    .map(|f| f.not_after)
                    .map_err(|e| e.to_string()),
            });
        }
    }
    Ok(EdgeFacts { running, names, renew_timer: Path::new(RENEW_TIMER_LINK).exists() })
}

/// The edge's findings; nothing when the policy has no edge and nothing is
/// exposed.
pub fn check_edge(configured: bool, facts: Result<EdgeFacts, String>, now: i64, findings: &mut Vec<Finding>) {
    let facts = match facts {
        Ok(facts) => facts,
        Err(why) if configured => {
            findings.push(fail(
                "edge",
                format!("the edge cannot be read: {why}"),
                "see the docker and state findings",
            ));
            return;
        }
        Err(_) => return,
    };
    if !configured && facts.running.is_none() && facts.names.is_empty() {
        return;
    }
    match (facts.running, facts.names.is_empty()) {
        (Some(true), _) => findings.push(ok("edge", format!("runs, serving {} name(s)", facts.names.len()))),
        (None, true) => {
            findings.push(ok("edge", "configured in the policy, not started (volce-lab-host edge enable)"))
        }
        (running, _) => findings.push(fail(
            "edge",
            format!(
                "the edge {}, so the exposed names do not answer",
                if running.is_none() { "is not there" } else { "is stopped" }
            ),
            "sudo volce-lab-host edge enable (it starts a stopped edge), then volce-lab-host edge status",
        )),
    }
    for name in &facts.names {
        check_name(name, now, findings);
    }
    if facts.names.iter().any(|n| n.acme) && !facts.renew_timer {
        findings.push(warn(
            "edge renewals",
            "names are certified by ACME but volce-lab-edge-renew.timer is not enabled: their certificates will expire",
            "sudo systemctl enable --now volce-lab-edge-renew.timer",
        ));
    }
}

fn check_name(name: &NameFacts, now: i64, findings: &mut Vec<Finding>) {
    let subject = format!("certificate of {} ({})", esc(&name.name), esc(&name.app));
    let renew = if name.acme {
        "sudo volce-lab-host edge renew"
    } else {
        "replace the certificate files the policy names, then an expose plan of the app serves them"
    };
    match &name.not_after {
        Err(why) => findings.push(fail(subject, format!("the edge's copy cannot be read: {why}"), renew)),
        Ok(not_after) => {
            let days = (not_after - now).div_euclid(86_400);
            let when = crate::text::rfc3339_seconds(*not_after);
            if *not_after <= now {
                findings.push(fail(subject, format!("EXPIRED at {when}: browsers refuse it"), renew));
            } else if days < WARN_DAYS {
                findings.push(warn(subject, format!("expires in {days} day(s), at {when}"), renew));
            } else {
                findings.push(ok(subject, format!("valid until {when} ({days} days)")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(acme: bool, not_after: Result<i64, String>) -> NameFacts {
        NameFacts { app: "shop".into(), name: "shop.example.com".into(), acme, not_after }
    }

    fn text(findings: &[Finding]) -> String {
        findings.iter().map(|f| format!("{f:?}")).collect::<Vec<_>>().join("\n")
    }

    /// Tried: an edge that is not there with a name exposed; an expired, a
    /// nearly expired, a missing and a healthy certificate; ACME without the
    /// timer; no edge at all.
    #[test]
    fn each_exposed_name_and_the_edge_are_a_finding_that_says_what_to_do() {
        let now = 1_800_000_000;
        let day = 86_400;
        let facts = EdgeFacts {
            running: None,
            names: vec![
                name(false, Ok(now - 1)),
                name(true, Ok(now + 3 * day)),
                name(false, Err("no file".into())),
                name(false, Ok(now + 60 * day)),
            ],
            renew_timer: false,
        };
        let mut findings = Vec::new();
        check_edge(true, Ok(facts), now, &mut findings);
        let all = text(&findings);
        assert!(all.contains("is not there") && all.contains("edge enable"), "{all}");
        assert!(
            all.contains("EXPIRED") && all.contains("expires in 3 day(s)") && all.contains("edge renew"),
            "{all}"
        );
        assert!(all.contains("cannot be read: no file") && all.contains("(60 days)"), "{all}");
        assert!(all.contains("volce-lab-edge-renew.timer is not enabled"), "{all}");

        let mut findings = Vec::new();
        let none = EdgeFacts { running: None, names: vec![], renew_timer: false };
        check_edge(false, Ok(none.clone()), now, &mut findings);
        assert!(findings.is_empty(), "no edge in the policy, nothing exposed: nothing to say");
        check_edge(true, Ok(none), now, &mut findings);
        assert!(text(&findings).contains("not started"), "{}", text(&findings));
    }
}
