//! What `expose`, `unexpose` and `remove_app` share about the HTTPS edge
//! (issue 39): that the operator configured and started it, the sites it
//! routes (from the app records) and the change that gives it a new
//! configuration. Pure; runs inside the root helper.

use std::fmt::Write as _;

use crate::control::app_record::AppRecord;
use crate::control::validate::Context;
use crate::nginx::edge::{Site, Switches, render};
use crate::text::for_terminal as esc;
use crate::vocab::{
    AppName, Code, EDGE_CONTAINER, EDGE_ROLE, EdgeChange, EdgeConfig, Exposure, Refusal, ServerName, refuse,
};

/// The policy's edge, refused when there is none or when no edge of ours
/// runs (the snapshot's container of that name, with our role label).
pub(super) fn running_edge<'a>(ctx: &'a Context<'_>) -> Result<&'a EdgeConfig, Refusal> {
    let Some(config) = ctx.policy.edge.as_ref() else {
        return refuse(
            Code::EdgeNotConfigured,
            "This server's policy has no edge object, so nothing can answer beyond 127.0.0.1; nothing was \
             changed.",
        );
    };
    let running = ctx.snapshot.containers.iter().any(|c| {
        c.name.trim_start_matches('/') == EDGE_CONTAINER
            && c.role() == Some(EDGE_ROLE)
            && c.state == "running"
    });
    if !running {
        return refuse(
            Code::EdgeNotEnabled,
            "The HTTPS edge is not running on this server (the operator starts it with `volce-lab-host edge \
             enable`); nothing was changed.",
        );
    }
    Ok(config)
}

/// An app's names, primary first: what an exposure serves.
pub(super) fn names_of(record: &AppRecord) -> Vec<ServerName> {
    std::iter::once(record.server_name.clone()).chain(record.also_server_names.iter().cloned()).collect()
}

/// The edge's configuration for the exposed apps of the records, with
/// `app` exposed as `exposure` (or taken off, with `None`).
pub(super) fn config_with(
    ctx: &Context<'_>,
    edge: &EdgeConfig,
    app: &AppName,
    exposure: Option<&Exposure>,
) -> String {
    let others =
        ctx.apps.values().filter(|r| r.app != *app).filter_map(|r| Some((&r.app, r.exposed.as_ref()?)));
    let sites: Vec<Site> = others
        .chain(exposure.map(|e| (app, e)))
        .map(|(app, e)| Site { app: app.clone(), names: e.names.iter().map(|n| n.name.clone()).collect() })
        .collect();
    let switches = Switches {
        redirect_http: edge.redirect_http,
        hsts: edge.hsts,
        https_port_suffix: edge.https_port_suffix(),
    };
    render(&sites, &switches)
}

/// The change that takes `app`'s exposure off the edge: the config without
/// it, its network left and its copies deleted once that serves.
fn taken_off(ctx: &Context<'_>, edge: &EdgeConfig, app: &AppName, exposure: &Exposure) -> EdgeChange {
    EdgeChange {
        plan_id: ctx.plan_id.clone(),
        config: config_with(ctx, edge, app, None),
        install: Vec::new(),
        obtain: None,
        remove: exposure.names.iter().map(|n| n.name.clone()).collect(),
        connect: None,
        disconnect: Some(app.names().edge_network),
        probe: Vec::new(),
        health_path: Default::default(),
    }
}

/// The change that takes `app`'s exposure off the edge, or `None` when no
/// container of the edge's name exists at all (removed by hand, or lost
/// with the engine's state): then nothing routes the names any more and
/// only the app's record forgets them, so the way out is not raw SQL. An
/// edge that exists but is stopped (or is not ours) is still refused: a
/// stopped edge would route the names again once started.
pub(super) fn taken_off_if_there(
    ctx: &Context<'_>,
    app: &AppName,
    exposure: &Exposure,
) -> Result<Option<EdgeChange>, Refusal> {
    let exists = ctx.snapshot.containers.iter().any(|c| c.name.trim_start_matches('/') == EDGE_CONTAINER);
    if !exists {
        return Ok(None);
    }
    Ok(Some(taken_off(ctx, running_edge(ctx)?, app, exposure)))
}

/// The lines `show` prints of an exposure: each name with its certificate.
pub(super) fn review_names(out: &mut String, exposure: &Exposure) {
    for exposed in &exposure.names {
        let _ = writeln!(out, "Name     {}: {}", esc(exposed.name.as_str()), esc(&exposed.source.describe()));
    }
}
