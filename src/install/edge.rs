//! `volce-lab-host edge enable|status|disable`: the operator's commands for
//! the HTTPS edge the policy's `edge` object describes (issue 39). Runs as
//! root on the operator's terminal; a layer above `crate::host`, so the
//! agent has no path here. What routes through the edge is `expose` and
//! `unexpose` plans (`crate::actions::Expose`); these start it, show it and
//! remove it.
//!
//! No audit row, as for `catalog` and `data`: the audit table's operation
//! list has no edge command. The edge's effect is in the trail anyway:
//! every app it serves was put there by an audited expose plan, and
//! `disable` refuses while any is.

use std::fmt::Write as _;

use crate::control::app_record::AppRecord;
use crate::control::policy::Policy;
use crate::docker::EngineError;
use crate::docker::client::{DockerClient, EdgeSetup, EdgeState};
use crate::docker::host_probe::port_holder;
use crate::exit::Exit;
use crate::host::paths::load_policy;
use crate::host::request_row;
use crate::host::{HostPaths, ShippedHost, process_check, terminal};
use crate::nginx::edge::{Switches, render};
use crate::text::for_terminal as esc;
use crate::vocab::{AcmeOrder, Code, EDGE_CONTAINER, EdgeConfig, Refusal};

/// One of the commands in the shipped binary: root, the fixed paths.
pub fn run(command: fn(&HostPaths) -> Result<String, Refusal>) -> Exit {
    terminal(process_check().and_then(|()| command(&ShippedHost::shipped().paths)))
}

/// `edge enable`: starts the edge on the policy's addresses, serving no app
/// yet. Already running, it says so and changes nothing.
pub fn enable(paths: &HostPaths) -> Result<String, Refusal> {
    let (policy, edge) = configured(paths)?;
    let edge = &edge;
    let engine = DockerClient::new(paths.state_dir.clone());
    match engine.edge_state().map_err(unavailable)? {
        Some(state) if state.running => {
            return Ok(format!("The edge already runs ({}); nothing was changed.\n", describe(edge, &state)));
        }
        Some(state) => {
            // Stopped by hand, or the engine did not bring it back: start it
            // as it is, serving what the records say it serves.
            let state = engine.edge_start(&state.id).map_err(|error| {
                Refusal::new(
                    Code::EngineUnavailable,
                    format!(
                        "The edge's container is there but stopped, and starting it failed ({error}). Read \
                         `docker logs vl_edge`, or run `volce-lab-host edge disable` once no app is exposed."
                    ),
                )
            })?;
            return Ok(format!("The edge was stopped; it runs again ({}).\n", describe(edge, &state)));
        }
        None => {}
    }
    let exposed = exposed_apps(paths)?;
    if !exposed.is_empty() {
        return Err(Refusal::new(
            Code::EdgeInUse,
            format!(
                "No edge runs, yet the records say these apps are exposed: {}; nothing was changed. Run \
                 `volce-lab-host state diff` and `volce-lab-host doctor`.",
                exposed.join(", ")
            ),
        ));
    }
    let conf = render(&[], &switches(edge));
    let setup =
        EdgeSetup { image: &policy.nginx_image, config: edge, limits: &policy.limits, nginx_conf: &conf };
    let state = engine.edge_enable(&setup).map_err(|error| match error {
        EngineError::AddressTaken { address } => Refusal::new(
            Code::EdgeAddressTaken,
            format!(
                "{address} is taken by {}; nothing was created. Stop it or change the policy's edge addresses, \
                 then run `volce-lab-host edge enable` again.",
                port_holder(address.port()).unwrap_or_else(|| "another listener".into())
            ),
        ),
        other => Refusal::new(
            Code::EngineUnavailable,
            format!(
                "The edge could not be started ({other}); what this command made was removed again. Check \
                 `docker ps -a` and `volce-lab-host doctor`, then run it again."
            ),
        ),
    })?;
    Ok(format!(
        "The edge runs ({}). No app is exposed yet: an expose plan puts an app's names on it.\n",
        describe(edge, &state)
    ))
}

/// `edge status`: the policy's edge, its container, and the apps it serves.
pub fn status(paths: &HostPaths) -> Result<String, Refusal> {
    let (_, edge) = configured(paths)?;
    let edge = &edge;
    let engine = DockerClient::new(paths.state_dir.clone());
    let mut out = String::new();
    match engine.edge_state().map_err(unavailable)? {
        None => out.push_str("The edge is not running (volce-lab-host edge enable starts it).\n"),
        Some(state) => {
            let _ = writeln!(
                out,
                "The edge {} ({}).",
                if state.running { "runs" } else { "is STOPPED" },
                describe(edge, &state)
            );
        }
    }
    let records = records(paths)?;
    let exposed: Vec<&AppRecord> = records.values().filter(|r| r.exposed.is_some()).collect();
    if exposed.is_empty() {
        out.push_str("No app is exposed.\n");
    }
    for record in exposed {
        let exposure = record.exposed.as_ref().expect("filtered");
        for name in &exposure.names {
            let _ = writeln!(
                out,
                "{}: {} with {}",
                esc(record.app.as_str()),
                esc(name.name.as_str()),
                esc(&name.source.describe())
            );
        }
    }
    Ok(out)
}

/// How many days before its expiry `edge renew` renews a certificate
/// (Let's Encrypt's advice for its 90-day certificates).
pub const RENEW_DAYS: u32 = 30;

/// `edge renew` in the shipped binary (the package's
/// volce-lab-edge-renew.timer runs it daily): exits 1 when a renewal failed.
pub fn run_renew(days: u32) -> Exit {
    if let Err(refusal) = process_check() {
        return terminal(Err(refusal));
    }
    match renew(&ShippedHost::shipped().paths, days) {
        Ok((text, true)) => terminal(Ok(text)),
        Ok((text, false)) => {
            print!("{text}");
            Exit::Failure
        }
        Err(refusal) => terminal(Err(refusal)),
    }
}

/// `edge renew`: for each exposed app with names certified by ACME, its
/// certificate renewed when fewer than `days` are left, the edge's copies
/// replaced and the edge reloaded. A line per app, and whether all went well.
pub fn renew(paths: &HostPaths, days: u32) -> Result<(String, bool), Refusal> {
    let (_, edge) = configured(paths)?;
    let Some(acme) = edge.acme.clone() else {
        return Ok(("The policy names no edge.acme: nothing to renew.\n".into(), true));
    };
    let engine = DockerClient::new(paths.state_dir.clone());
    let (mut out, mut all) = (String::new(), true);
    for record in records(paths)?.values() {
        let names = record.exposed.as_ref().map(|e| e.acme_names()).unwrap_or_default();
        if names.is_empty() {
            continue;
        }
        let order = AcmeOrder { acme: acme.clone(), names };
        let line = match engine.edge_renew(&order, days) {
            Ok(true) => "renewed; the edge serves the new certificate".to_owned(),
            Ok(false) => format!("not due (more than {days} days left)"),
            Err(error) => {
                all = false;
                format!("FAILED: {error}; the edge serves the certificate it had")
            }
        };
        let _ = writeln!(out, "{}: {line}", esc(record.app.as_str()));
    }
    if out.is_empty() {
        out.push_str("No exposed name has a certificate from ACME: nothing to renew.\n");
    }
    Ok((out, all))
}

/// `edge disable`: removes the edge, its network and its files; refused
/// while an app is exposed.
pub fn disable(paths: &HostPaths) -> Result<String, Refusal> {
    let exposed = exposed_apps(paths)?;
    if !exposed.is_empty() {
        return Err(Refusal::new(
            Code::EdgeInUse,
            format!(
                "These apps are exposed through the edge: {}; nothing was changed. An unexpose plan for each \
                 takes it off, then run `volce-lab-host edge disable` again.",
                exposed.join(", ")
            ),
        ));
    }
    let engine = DockerClient::new(paths.state_dir.clone());
    engine.edge_remove().map_err(|error| {
        Refusal::new(
            Code::EngineUnavailable,
            format!("The edge could not be removed ({error}). Check `docker ps -a --filter name={EDGE_CONTAINER}`, then run it again."),
        )
    })?;
    Ok("The edge is removed: its container, its network and its files. Nothing listens beyond 127.0.0.1 for volce-lab now.\n".into())
}

/// The policy and its edge, refused when it has none.
fn configured(paths: &HostPaths) -> Result<(Policy, EdgeConfig), Refusal> {
    let policy = load_policy(paths)?;
    let Some(edge) = policy.edge.clone() else {
        return Err(Refusal::new(
            Code::EdgeNotConfigured,
            "The policy has no edge object; nothing was done. Add one to /etc/volce-lab/policy.json \
             (docs/edge.md), then run this again.",
        ));
    };
    Ok((policy, edge))
}

fn switches(edge: &EdgeConfig) -> Switches {
    Switches {
        redirect_http: edge.redirect_http,
        hsts: edge.hsts,
        https_port_suffix: edge.https_port_suffix(),
    }
}

fn describe(edge: &EdgeConfig, state: &EdgeState) -> String {
    let probe = state.probe_port.map_or(String::new(), |p| format!(", its probe on 127.0.0.1:{p}"));
    let redirect = if edge.redirect_http { "redirected to HTTPS" } else { "served too" };
    format!("HTTPS on {}, plain HTTP on {} {redirect}{probe}", edge.https, edge.http)
}

fn unavailable(error: EngineError) -> Refusal {
    Refusal::new(
        Code::EngineUnavailable,
        format!(
            "The engine could not be asked about the edge ({error}); nothing was changed. Check `docker ps`, then run this again."
        ),
    )
}

/// The app records, read once.
fn records(paths: &HostPaths) -> Result<std::collections::BTreeMap<String, AppRecord>, Refusal> {
    let Some(mut store) = request_row::open_for_rows(paths)? else {
        return Ok(Default::default());
    };
    store.read(|tx| tx.apps().map_err(|e| e.refusal()))
}

/// The apps whose record says they are exposed.
fn exposed_apps(paths: &HostPaths) -> Result<Vec<String>, Refusal> {
    Ok(records(paths)?.values().filter(|r| r.exposed.is_some()).map(|r| r.app.to_string()).collect())
}
