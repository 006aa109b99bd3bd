//! The gateway's nginx.conf, rendered from validated values only: the agent
//! chooses a server name (already checked to be a lowercase DNS name) and the
//! app's port; everything else is fixed here. Pure, no I/O.
//!
//! The gateway runs as uid 101 with a read-only root filesystem, so the pid
//! file and every temp path live under the /tmp tmpfs, and it listens on an
//! unprivileged port inside its container. A default server answers 404 for
//! every other Host, so only the chosen name reaches the app.

/// The port nginx listens on inside the gateway container.
pub const GATEWAY_LISTEN_PORT: u16 = 8080;
/// The network alias of the app container on the app's private network.
pub const APP_ALIAS: &str = "app";

/// Renders the whole nginx.conf for one app.
pub fn render(server_name: &str, container_port: u16) -> String {
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
    access_log off;
    client_body_temp_path /tmp/client_body;
    proxy_temp_path /tmp/proxy;
    fastcgi_temp_path /tmp/fastcgi;
    uwsgi_temp_path /tmp/uwsgi;
    scgi_temp_path /tmp/scgi;
    server_tokens off;
    # Requests for any other name get 404 and never reach the app.
    server {{
        listen {listen} default_server;
        return 404;
    }}
    server {{
        listen {listen};
        server_name {server_name};
        location / {{
            proxy_pass http://{APP_ALIAS}:{container_port};
            proxy_set_header Host $host;
        }}
    }}
}}
",
        listen = GATEWAY_LISTEN_PORT
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_chosen_name_is_proxied() {
        let config = render("shop.example", 3000);
        assert!(config.contains("listen 8080 default_server;\n        return 404;"));
        assert!(config.contains("server_name shop.example;"));
        assert!(config.contains("proxy_pass http://app:3000;"));
        assert!(config.contains("pid /tmp/nginx.pid;"));
        // Room for the longest valid server name (proven against nginx in
        // tests/host_real_engine_rules.rs).
        assert!(config.contains("server_names_hash_bucket_size 512;"));
    }
}
