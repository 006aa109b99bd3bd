//! The edge's nginx.conf (issue 39), rendered from validated values only:
//! each exposed app's server names (each a [`ServerName`]) and its
//! gateway's container name (derived from its [`AppName`]); everything else
//! is fixed here. Pure, no I/O.
//!
//! What the rendered edge does:
//! - HTTPS on [`EDGE_HTTPS_PORT`]: a `server` per exposed name with that
//!   name's certificate, proxying to the app's gateway with the client's
//!   `Host`; a handshake for any other name is refused
//!   (`ssl_reject_handshake`), so no certificate is shown to a stranger;
//! - plain HTTP on [`EDGE_HTTP_PORT`]: each exposed name redirected to
//!   HTTPS, or served too when the operator turned the redirect off; any
//!   other name gets 404;
//! - the probe on [`EDGE_PROBE_PORT`] (published on 127.0.0.1 only): the
//!   same routing in plain HTTP, through which the helper checks that each
//!   name reaches its app after a change.
//!
//! The gateway is found by name at request time through docker's DNS
//! (`resolver 127.0.0.11` and a variable in `proxy_pass`): a gateway that is
//! stopped makes its names answer 502 instead of keeping the edge from
//! starting, and a gateway recreated under its name is found again.

use crate::vocab::{AppName, EDGE_HTTP_PORT, EDGE_HTTPS_PORT, EDGE_PROBE_PORT, ServerName};

use super::{GATEWAY_LISTEN_PORT, TEMP_PATHS};

/// Where the edge's certificates are mounted (read-only) in its container.
pub const CERT_DIR: &str = "/etc/volce-lab-edge/certs";
/// Where the ACME client's HTTP-01 answers are mounted (read-only): the
/// webroot lego writes `.well-known/acme-challenge/<token>` into.
pub const ACME_WEBROOT: &str = "/etc/volce-lab-edge/acme";

/// The location that answers the ACME CA's HTTP-01 challenges, on plain
/// HTTP for every name: a name is challenged before it is exposed.
fn challenges() -> String {
    format!(
        "        location /.well-known/acme-challenge/ {{
            root {ACME_WEBROOT};
        }}
"
    )
}

/// One exposed app: its names, primary first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    pub app: AppName,
    pub names: Vec<ServerName>,
}

/// How plain HTTP and HTTPS answer (the policy's `edge` switches).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switches {
    pub redirect_http: bool,
    pub hsts: bool,
    /// `:PORT` when HTTPS is not on 443, for the redirect's URL.
    pub https_port_suffix: String,
}

/// The certificate and key file names of `name` under [`CERT_DIR`] (and
/// under the edge's certificate directory on the host).
pub fn cert_files(name: &ServerName) -> (String, String) {
    (format!("{name}.crt"), format!("{name}.key"))
}

/// Whether a config [`render`] made uses `name`'s certificate copies (an
/// undo keeps those: the config it puts back still needs them).
pub fn uses_certificate_of(config: &str, name: &ServerName) -> bool {
    let (cert, _) = cert_files(name);
    config.contains(&format!("ssl_certificate {CERT_DIR}/{cert};"))
}

/// Renders the whole edge nginx.conf for `sites`.
pub fn render(sites: &[Site], switches: &Switches) -> String {
    let mut servers = String::new();
    for site in sites {
        let gateway = site.app.names().gateway_container;
        for name in &site.names {
            servers.push_str(&https_server(name, &gateway, switches));
            servers.push_str(&http_server(name, &gateway, switches));
        }
    }
    format!(
        "# Managed by volce-lab (the HTTPS edge). Changes made by hand are replaced by the next expose or unexpose.
worker_processes 1;
pid /tmp/nginx.pid;
error_log stderr warn;
events {{ worker_connections 1024; }}
http {{
    server_names_hash_bucket_size 512;
    access_log off;
{TEMP_PATHS}    # Docker's DNS on the edge's networks: gateways are found by name at
    # request time.
    resolver 127.0.0.11 valid=10s ipv6=off;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:edge:1m;
    # Any other name: no certificate shown, no app reached.
    server {{
        listen {https} ssl default_server;
        ssl_reject_handshake on;
    }}
    server {{
        listen {http} default_server;
{challenges}        location / {{
            return 404;
        }}
    }}
    server {{
        listen {probe} default_server;
        return 404;
    }}
{servers}}}
",
        https = EDGE_HTTPS_PORT,
        http = EDGE_HTTP_PORT,
        probe = EDGE_PROBE_PORT,
        challenges = challenges(),
    )
}

/// The proxying part every server of a name shares.
fn proxy(gateway: &str) -> String {
    format!(
        "        location / {{
            set $gateway {gateway};
            proxy_pass http://$gateway:{GATEWAY_LISTEN_PORT};
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Forwarded-Proto $scheme;
        }}
"
    )
}

fn https_server(name: &ServerName, gateway: &str, switches: &Switches) -> String {
    let (cert, key) = cert_files(name);
    let hsts = if switches.hsts {
        "        add_header Strict-Transport-Security \"max-age=31536000\" always;\n"
    } else {
        ""
    };
    format!(
        "    server {{
        listen {EDGE_HTTPS_PORT} ssl;
        listen {EDGE_PROBE_PORT};
        server_name {name};
        ssl_certificate {CERT_DIR}/{cert};
        ssl_certificate_key {CERT_DIR}/{key};
{hsts}{proxy}    }}
",
        proxy = proxy(gateway),
    )
}

fn http_server(name: &ServerName, gateway: &str, switches: &Switches) -> String {
    let body = if switches.redirect_http {
        format!(
            "        location / {{
            return 301 https://{name}{}$request_uri;
        }}
",
            switches.https_port_suffix
        )
    } else {
        proxy(gateway)
    };
    format!(
        "    server {{
        listen {EDGE_HTTP_PORT};
        server_name {name};
{challenges}{body}    }}
",
        challenges = challenges(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(app: &str, names: &[&str]) -> Site {
        Site {
            app: AppName::parse(app).unwrap(),
            names: names.iter().map(|n| ServerName::parse(n).unwrap()).collect(),
        }
    }

    fn switches(redirect_http: bool, hsts: bool) -> Switches {
        Switches { redirect_http, hsts, https_port_suffix: ":18443".into() }
    }

    #[test]
    fn each_name_has_its_certificate_and_goes_to_its_apps_gateway() {
        let conf = render(
            &[
                site("shop", &["shop.example.com", "www.shop.example.com"]),
                site("blog", &["blog.example.com"]),
            ],
            &switches(true, false),
        );
        for (name, gateway) in [
            ("shop.example.com", "vl-shop-gateway"),
            ("www.shop.example.com", "vl-shop-gateway"),
            ("blog.example.com", "vl-blog-gateway"),
        ] {
            let https = conf
                .split("    server {")
                .find(|s| s.contains(&format!("server_name {name};")) && s.contains("ssl_certificate "))
                .unwrap();
            assert!(https.contains(&format!("ssl_certificate {CERT_DIR}/{name}.crt;")), "{https}");
            assert!(https.contains(&format!("ssl_certificate_key {CERT_DIR}/{name}.key;")));
            assert!(https.contains(&format!("set $gateway {gateway};")));
            assert!(https.contains("listen 8081;"), "the probe routes the name too");
            assert!(!https.contains("Strict-Transport-Security"));
        }
        assert!(conf.contains("return 301 https://shop.example.com:18443$request_uri;"));
        assert!(conf.contains("ssl_reject_handshake on;"));
        assert!(uses_certificate_of(&conf, &ServerName::parse("www.shop.example.com").unwrap()));
        assert!(!uses_certificate_of(&conf, &ServerName::parse("shop.example").unwrap()));
        // Every name's plain HTTP, and any other name's, answers challenges.
        assert_eq!(conf.matches("location /.well-known/acme-challenge/").count(), 4);
    }

    #[test]
    fn the_switches_turn_the_redirect_off_and_hsts_on() {
        let conf = render(&[site("shop", &["shop.example.com"])], &switches(false, true));
        assert!(!conf.contains("return 301"));
        assert_eq!(conf.matches("set $gateway vl-shop-gateway;").count(), 2, "https and plain http");
        assert_eq!(conf.matches("Strict-Transport-Security").count(), 1);
    }

    #[test]
    fn an_edge_with_no_site_answers_nothing() {
        let conf = render(&[], &switches(true, false));
        assert!(!conf.contains("proxy_pass"));
        assert!(conf.contains("return 404;"));
    }
}
