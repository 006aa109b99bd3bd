//! The validated names: app names and every Docker name derived from one
//! ([`AppNames`]), unix user names, and the DNS names the gateway serves
//! ([`ServerName`]). Pure; each validator is the one place its pattern is
//! written. Validation (the squat check), the controller and the docker
//! engine all take the Docker names from here, so they agree on each.
//!
//! Security invariant: a deploy never adopts an object that already stands
//! on one of its app's names. That check is only as good as the list of
//! names it compares against, so the list is one struct, [`AppNames`], and
//! the engine creates nothing under a name that is not in it.
//!
//! Every Docker name starts with [`NAME_PREFIX`]; the edge network alone
//! contains `_`, which no app name can, so no app's network is another
//! app's edge network.

use serde::{Deserialize, Serialize};

use super::Container;

/// Every Docker object of ours is named `vl-...`.
pub const NAME_PREFIX: &str = "vl-";

/// Lowercase ASCII letters and digits only, the first a letter, then `-`
/// too, at most `max` bytes: the shape of app names and catalog keys.
pub(crate) fn is_name(value: &str, max: usize) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= max
        && bytes[0].is_ascii_lowercase()
        && bytes.iter().all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// An app name: `^[a-z][a-z0-9-]{0,30}$`.
pub fn is_app_name(value: &str) -> bool {
    is_name(value, 31)
}

/// A unix user name as sudo hands it over (`SUDO_USER`) and as the
/// operator writes it in `approvers`: `^[a-z_][a-z0-9_-]{0,31}$`.
pub fn is_user_name(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 32
        && (bytes[0].is_ascii_lowercase() || bytes[0] == b'_')
        && bytes.iter().all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// An app name: `^[a-z][a-z0-9-]{0,30}$`. Its serde form is the plain
/// string, and deserializing validates it (a stored plan with a bad name is
/// refused as corrupt, never trusted).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AppName(String);

impl AppName {
    pub fn parse(value: &str) -> Option<AppName> {
        is_app_name(value).then(|| AppName(value.to_owned()))
    }
    /// The names of everything Docker holds for this app.
    pub fn names(&self) -> AppNames {
        AppNames::of(self)
    }
}

super::string_form::string_form!(AppName, "an app name must match ^[a-z][a-z0-9-]{0,30}$");

/// The Docker objects of one app (see `crate::docker::client` for why
/// there are two networks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppNames {
    pub app: AppName,
    /// `vl-<app>`: the internal network the app and the gateway share.
    pub network: String,
    /// `vl-<app>_edge`: the ordinary bridge that carries the published port.
    pub edge_network: String,
    /// `vl-<app>-app`.
    pub app_container: String,
    /// `vl-<app>-gateway`.
    pub gateway_container: String,
    /// `vl-<app>-check`: the one-off `nginx -t` container of a deploy.
    pub check_container: String,
}

impl AppNames {
    pub fn of(app: &AppName) -> AppNames {
        let base = format!("{NAME_PREFIX}{app}");
        AppNames {
            app: app.clone(),
            network: base.clone(),
            edge_network: format!("{base}_edge"),
            app_container: format!("{base}-app"),
            gateway_container: format!("{base}-gateway"),
            check_container: format!("{base}-check"),
        }
    }

    /// Whether `container` stands on this app's names: labelled with the
    /// app, or named like one of the containers a deploy creates.
    pub fn claims_container(&self, container: &Container) -> bool {
        container.app() == Some(self.app.as_str())
            || [&self.app_container, &self.gateway_container, &self.check_container]
                .iter()
                .any(|name| **name == container.name)
    }

    /// Whether a network called `name` stands on this app's names.
    pub fn claims_network(&self, name: &str) -> bool {
        name == self.network || name == self.edge_network
    }
}

/// A lowercase DNS name: labels of a-z, 0-9 and inner `-`, joined by dots,
/// at most 253 bytes. This excludes whitespace, `;`, braces and quotes, so
/// the value cannot break out of nginx's `server_name` directive.
pub fn is_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
                && b.iter().all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        })
}

/// A server name that passed [`is_server_name`]. Its serde form is the plain
/// string, and deserializing validates it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ServerName(String);

impl ServerName {
    pub fn parse(value: &str) -> Option<ServerName> {
        is_server_name(value).then(|| ServerName(value.to_owned()))
    }
}

super::string_form::string_form!(ServerName, "a server name must be a lowercase DNS name");

/// `name (also a, b)`, or `name` alone: how a target and `show` name what
/// a gateway serves.
pub fn served_names(primary: &str, also: &[ServerName]) -> String {
    if also.is_empty() {
        return primary.to_owned();
    }
    let also: Vec<&str> = also.iter().map(ServerName::as_str).collect();
    format!("{primary} (also {})", also.join(", "))
}

/// The most names an app's gateway serves besides its primary
/// `server_name`: four in all, enough for an apex and its `www` and, during
/// a move, the old host and its `www`. Bounded so that a plan, its `show`
/// and the gateway's one `server_name` line stay short.
pub const MAX_ALSO_SERVER_NAMES: usize = 3;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_names_follow_the_pattern() {
        assert!(is_app_name("a"));
        assert!(is_app_name("web-1"));
        assert!(is_app_name(&format!("a{}", "b".repeat(30))));
        assert!(!is_app_name(&format!("a{}", "b".repeat(31))));
        for bad in ["", "1web", "-web", "Web", "we_b", "../x", "web.x", "wéb", "web\n"] {
            assert!(!is_app_name(bad), "{bad:?} must be refused");
        }
    }

    #[test]
    fn user_names_follow_the_pattern() {
        assert!(is_user_name("alice"));
        assert!(is_user_name("vl-operator"));
        assert!(is_user_name("_svc"));
        for bad in ["", "Alice", "1x", "a b", "a;b", &"a".repeat(33)] {
            assert!(!is_user_name(bad), "{bad:?} must be refused");
        }
    }

    #[test]
    fn every_name_comes_from_the_one_prefix_and_the_app() {
        let names = AppName::parse("shop").unwrap().names();
        assert_eq!(names.network, "vl-shop");
        assert_eq!(names.edge_network, "vl-shop_edge");
        assert_eq!(names.app_container, "vl-shop-app");
        assert_eq!(names.gateway_container, "vl-shop-gateway");
        assert_eq!(names.check_container, "vl-shop-check");
        assert!(names.claims_network("vl-shop_edge") && !names.claims_network("vl-shop1"));
    }

    #[test]
    fn app_names_are_validated_also_when_deserialized() {
        assert!(AppName::parse("web-1").is_some());
        for bad in ["", "Shop", "1web", "we_b", "../x", &"a".repeat(32)] {
            assert!(AppName::parse(bad).is_none(), "{bad:?}");
            assert!(serde_json::from_value::<AppName>(serde_json::json!(bad)).is_err(), "{bad:?}");
        }
        let name: AppName = serde_json::from_str("\"shop\"").unwrap();
        assert_eq!(serde_json::to_string(&name).unwrap(), "\"shop\"");
    }

    #[test]
    fn server_names_are_validated_also_when_deserialized() {
        assert!(ServerName::parse("a-b.c1.example").is_some());
        for bad in ["", "a b", "A.example", "x;y", "-a.example", "a..b", &format!("{}.com", "a".repeat(64))] {
            assert!(ServerName::parse(bad).is_none(), "{bad:?}");
            assert!(serde_json::from_value::<ServerName>(serde_json::json!(bad)).is_err(), "{bad:?}");
        }
    }
}
