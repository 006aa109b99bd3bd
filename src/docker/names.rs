//! [`AppName`] and the Docker object names derived from it ([`AppNames`]),
//! in one place. Pure; used by validation (the squat check), the controller
//! and the docker-CLI engine, which must all agree on every name.
//!
//! Security invariant: a deploy never adopts an object that already stands
//! on one of its app's names. That check is only as good as the list of
//! names it compares against, so the list is this one struct, and the
//! engine creates nothing under a name that is not in it.
//!
//! Every name starts with [`PREFIX`]; the edge network alone contains `_`,
//! which no app name can, so no app's network is another app's edge network.

use serde::{Deserialize, Serialize};

use super::Container;

/// Every Docker object of ours is named `vl-...`.
pub const PREFIX: &str = "vl-";

/// An app name: `^[a-z][a-z0-9-]{0,30}$`. Its serde form is the plain
/// string, and deserializing validates it (a stored plan with a bad name is
/// refused as corrupt, never trusted).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AppName(String);

impl AppName {
    pub fn parse(value: &str) -> Option<AppName> {
        crate::control::is_app_name(value).then(|| AppName(value.to_owned()))
    }
    /// The names of everything Docker holds for this app.
    pub fn names(&self) -> AppNames {
        AppNames::of(self)
    }
}

crate::control::canonical::string_form!(AppName, "an app name must match ^[a-z][a-z0-9-]{0,30}$");

/// The Docker objects of one app (see `crate::docker::cli` for why there
/// are two networks).
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
        let base = format!("{PREFIX}{app}");
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
