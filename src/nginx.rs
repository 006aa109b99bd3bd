//! The gateway's nginx.conf, rendered from validated values only: the agent
//! chooses the server names (each a [`ServerName`]: a lowercase DNS name;
//! the primary one and at most three others) and the app's port; everything
//! else is fixed here. Pure, no I/O.
//!
//! The gateway runs as uid 101 with a read-only root filesystem, so the pid
//! file and every temp path live under the /tmp tmpfs, and it listens on an
//! unprivileged port inside its container. A default server answers 404 for
//! every other Host, so only the chosen name reaches the app.
//!
//! Requests are logged only when the operator's policy says so
//! ([`AccessLog`]): a request line carries client addresses and URLs, which
//! `service_logs` shows the agent (redacted, marked untrusted).

use crate::vocab::ServerName;

pub mod edge;

/// Whether the gateway logs each request (the policy's
/// `gateway_access_log`), so `service_logs` of the gateway shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AccessLog {
    #[default]
    Off,
    /// nginx's combined format on the container's stdout, which docker
    /// keeps (bounded by the policy's log limits) and `docker logs` reads.
    /// The gateway runs as uid 101: docker gives the container's stdio to
    /// its user, so `/dev/stdout` opens (tests/real: the gateway's log).
    Stdout,
}

impl AccessLog {
    pub fn of(enabled: bool) -> AccessLog {
        if enabled { AccessLog::Stdout } else { AccessLog::Off }
    }

    fn directive(self) -> &'static str {
        match self {
            AccessLog::Off => "access_log off;",
            AccessLog::Stdout => "access_log /dev/stdout combined;",
        }
    }
}

/// The `http` lines every nginx.conf of ours holds: the read-only root
/// leaves only the /tmp tmpfs writable, and no version in answers.
pub const TEMP_PATHS: &str = "    client_body_temp_path /tmp/client_body;
    proxy_temp_path /tmp/proxy;
    fastcgi_temp_path /tmp/fastcgi;
    uwsgi_temp_path /tmp/uwsgi;
    scgi_temp_path /tmp/scgi;
    server_tokens off;
";

/// The port nginx listens on inside the gateway container.
pub const GATEWAY_LISTEN_PORT: u16 = 8080;
/// The network alias of the app container on the app's private network.
pub const APP_ALIAS: &str = "app";

/// The arguments of one `server_name` directive: the primary name first
/// (what [`server_name_of`] reads back and the health check asks for), then
/// the others. Each is a validated [`ServerName`], so each is one word.
pub fn names_directive(primary: &ServerName, also: &[ServerName]) -> String {
    std::iter::once(primary).chain(also).map(ServerName::as_str).collect::<Vec<_>>().join(" ")
}

/// The names a config [`render`]ed for one app serves, primary first: the
/// words of its one `server_name` line, if each is a valid name.
pub fn server_names_of(config: &str) -> Option<Vec<ServerName>> {
    let mut lines = config.lines().filter_map(|l| l.trim().strip_prefix("server_name ")?.strip_suffix(';'));
    let line = lines.next()?;
    if lines.next().is_some() {
        return None;
    }
    line.split(' ').map(ServerName::parse).collect()
}

/// The primary server name of a config [`render`]ed for one app: the first
/// word of its one `server_name` line (see [`server_names_of`]).
pub fn server_name_of(config: &str) -> Option<ServerName> {
    server_names_of(config)?.into_iter().next()
}

/// Renders the whole nginx.conf for one app, whose container answers on
/// the app network as [`APP_ALIAS`] (as deploy creates it). `server_name`
/// is the directive's arguments: one validated name, or [`names_directive`]
/// of several.
pub fn render(server_name: &str, container_port: u16, access: AccessLog) -> String {
    render_for(server_name, container_port, APP_ALIAS, access)
}

/// [`render`] for an app container reachable as `upstream` (an update's
/// new container is named, and aliased, after its plan). `upstream` is a
/// name volce-lab derived (`vl-<app>-app-<hex>`), never an agent's text.
pub fn render_for(server_name: &str, container_port: u16, upstream: &str, access: AccessLog) -> String {
    render_with(server_name, container_port, upstream, "", access)
}

/// An update's nginx.conf while both app containers run: `server_name`
/// still goes to `upstream`, and only `check_name` (derived from the plan
/// id, never the app's name) reaches the new container, so it can be
/// health-checked through the gateway before any request of the app does.
pub fn render_staged(
    server_name: &str,
    container_port: u16,
    upstream: &str,
    check_name: &str,
    new_upstream: &str,
    access: AccessLog,
) -> String {
    let check = format!(
        "    server {{
        listen {GATEWAY_LISTEN_PORT};
        server_name {check_name};
        location / {{
            proxy_pass http://{new_upstream}:{container_port};
            proxy_set_header Host $host;
        }}
    }}
"
    );
    render_with(server_name, container_port, upstream, &check, access)
}

fn render_with(
    server_name: &str,
    container_port: u16,
    upstream: &str,
    extra: &str,
    access: AccessLog,
) -> String {
    format!(
        "# Managed by volce-lab. Changes made by hand are refused by later plans.
worker_processes 1;
pid /tmp/nginx.pid;
error_log stderr warn;
events {{ worker_connections 256; }}
http {{
    # A server name may be 253 bytes (the DNS limit that validation allows);
    # nginx's default bucket (32 or 64 bytes, by CPU cache line) refuses
    # names longer than that at `nginx -t`.
    server_names_hash_bucket_size 512;
    {access_log}
{TEMP_PATHS}    # Requests for any other name get 404 and never reach the app.
    server {{
        listen {listen} default_server;
        return 404;
    }}
    server {{
        listen {listen};
        server_name {server_name};
        location / {{
            proxy_pass http://{upstream}:{container_port};
            proxy_set_header Host $host;
        }}
    }}
{extra}}}
",
        listen = GATEWAY_LISTEN_PORT,
        access_log = access.directive(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_chosen_name_is_proxied() {
        let config = render("shop.example", 3000, AccessLog::Off);
        assert!(config.contains("listen 8080 default_server;\n        return 404;"));
        assert!(config.contains("server_name shop.example;"));
        assert!(config.contains("proxy_pass http://app:3000;"));
        assert!(config.contains("pid /tmp/nginx.pid;"));
        // Room for the longest valid server name (proven against nginx in
        // tests/real/host_real_engine_rules.rs).
        assert!(config.contains("server_names_hash_bucket_size 512;"));
    }

    #[test]
    fn a_staged_config_sends_only_the_check_name_to_the_new_container() {
        assert_eq!(
            render_for("shop.example", 3000, APP_ALIAS, AccessLog::Off),
            render("shop.example", 3000, AccessLog::Off)
        );
        let staged =
            render_staged("shop.example", 3000, "app", "c1.update.invalid", "vl-shop-app-1", AccessLog::Off);
        assert!(staged.contains(
            "server_name shop.example;\n        location / {\n            proxy_pass http://app:3000;"
        ));
        assert!(staged.contains(
            "server_name c1.update.invalid;\n        location / {\n            proxy_pass http://vl-shop-app-1:3000;"
        ));
        assert!(staged.ends_with("    }\n}\n"));
    }

    #[test]
    fn requests_are_logged_only_when_the_policy_says_so() {
        // Tried: the default, and the policy's gateway_access_log, in each renderer.
        let off = render("shop.example", 3000, AccessLog::Off);
        assert!(off.contains("    access_log off;\n") && !off.contains("/dev/stdout"));
        let on = render("shop.example", 3000, AccessLog::of(true));
        assert!(on.contains("    access_log /dev/stdout combined;\n") && !on.contains("access_log off"));
        let staged = render_staged("shop.example", 3000, "app", "c1.update.invalid", "n", AccessLog::Stdout);
        assert!(staged.contains("access_log /dev/stdout combined;"));
        assert_eq!(on.replace("/dev/stdout combined", "off"), off, "nothing else differs");
        assert_eq!(server_name_of(&on).unwrap().as_str(), "shop.example");
    }

    #[test]
    fn the_served_name_is_read_back_from_a_rendered_config_only() {
        assert_eq!(
            server_name_of(&render("shop.example", 8080, AccessLog::Off)).unwrap().as_str(),
            "shop.example"
        );
        assert_eq!(server_name_of("events {}\n"), None);
        assert_eq!(server_name_of("server_name a.example;\nserver_name b.example;\n"), None, "two names");
        assert_eq!(server_name_of("server_name Bad_Name;\n"), None);
        assert_eq!(server_names_of("server_name a.example Bad_Name;\n"), None, "every word is a name");
    }

    /// Tried: the primary name and three others, rendered for a deploy and
    /// staged for an update: one `server_name` line lists them all, primary
    /// first, and reads back as it went in.
    #[test]
    fn every_name_of_an_app_is_on_its_one_server_name_line() {
        let name = |n: &str| ServerName::parse(n).unwrap();
        let also = [name("www.shop.example"), name("old.example"), name("www.old.example")];
        let served = names_directive(&name("shop.example"), &also);
        assert_eq!(served, "shop.example www.shop.example old.example www.old.example");
        assert_eq!(names_directive(&name("shop.example"), &[]), "shop.example");
        let config = render(&served, 3000, AccessLog::Off);
        assert!(config.contains(&format!("        server_name {served};\n        location / {{\n")));
        assert_eq!(config.matches("server_name ").count(), 1);
        let back = server_names_of(&config).unwrap();
        assert_eq!(back[0], name("shop.example"));
        assert_eq!(back[1..], also);
        assert_eq!(server_name_of(&config), Some(name("shop.example")));
        let staged =
            render_staged(&served, 3000, "app", "c1.update.invalid", "vl-shop-app-1", AccessLog::Off);
        assert!(staged.contains(&format!(
            "server_name {served};\n        location / {{\n            proxy_pass http://app:3000;"
        )));
        assert!(staged.contains("server_name c1.update.invalid;\n"));
    }
}
