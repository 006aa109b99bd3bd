//! The validated identifiers: a plan's id and digest, Docker's full
//! container and image ids, and a pinned image reference. Pure; each
//! `parse` is the one place its shape is checked.

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::{Code, Refusal};

/// An id of 32 lowercase hex characters, made fresh from a uuid v4: the
/// plan's, and the rollout's (issue 43). One shape, two names that never
/// stand for each other.
macro_rules! hex_id {
    ($(#[$doc:meta])* $name:ident, $code:expr, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn parse(value: &str) -> Result<$name, Refusal> {
                if crate::text::is_lower_hex(value, 32) {
                    Ok($name(value.to_owned()))
                } else {
                    Err(Refusal::new($code, concat!("A ", $what, " is 32 lowercase hex characters.")))
                }
            }
            /// A fresh random id (uuid v4, hex without dashes).
            pub fn random() -> $name {
                $name(uuid::Uuid::new_v4().simple().to_string())
            }
        }

        super::string_form::string_form!($name);
    };
}

hex_id!(
    /// A plan id: 32 lowercase hex characters.
    PlanId,
    Code::InvalidPlanId,
    "plan id"
);

hex_id!(
    /// A rollout's id (issue 43), made by the workstation that recorded the
    /// rollout's manifest.
    RolloutId,
    Code::InvalidRolloutId,
    "rollout id"
);

/// A plan digest: 64 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest(String);

impl Digest {
    pub fn parse(value: &str) -> Result<Digest, Refusal> {
        if crate::text::is_lower_hex(value, 64) {
            Ok(Digest(value.to_owned()))
        } else {
            Err(Refusal::new(Code::InvalidDigest, "A plan digest is 64 lowercase hex characters."))
        }
    }
    /// The sha256 of `bytes` (a plan's canonical JSON): lowercase hex, so
    /// always a valid digest.
    pub fn sha256(bytes: &[u8]) -> Digest {
        Digest(crate::text::hex(&Sha256::digest(bytes)))
    }
}

super::string_form::string_form!(Digest);

/// A full container id: 64 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ContainerId(String);

/// A full local image id: `sha256:` and 64 lowercase hex characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ImageId(String);

impl ContainerId {
    pub fn parse(value: &str) -> Option<ContainerId> {
        crate::text::is_lower_hex(value, 64).then(|| ContainerId(value.to_owned()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl ImageId {
    pub fn parse(value: &str) -> Option<ImageId> {
        value
            .strip_prefix("sha256:")
            .filter(|hex| crate::text::is_lower_hex(hex, 64))
            .map(|_| ImageId(value.to_owned()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ContainerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Display for ImageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A pinned image reference `name@sha256:<64 lowercase hex>`. Its serde
/// form is the plain string, and deserializing validates it (a stored plan
/// with an unpinned reference is refused as corrupt).
///
/// Security invariant: the agent never names an image reference; every one
/// the operator writes in the policy's catalog must pass this, so what runs
/// is what was reviewed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ImageRef(String);

impl ImageRef {
    pub fn parse(value: &str) -> Option<ImageRef> {
        let (name, digest) = value.split_once("@sha256:")?;
        let name_ok = !name.is_empty()
            && name.len() <= 255
            && name.as_bytes()[0].is_ascii_alphanumeric()
            && name.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'/' | b':' | b'_' | b'-')
            });
        (name_ok && crate::text::is_lower_hex(digest, 64)).then(|| ImageRef(value.to_owned()))
    }
}

super::string_form::string_form!(
    ImageRef,
    "an image reference must be pinned as name@sha256:<64 lowercase hex>"
);

/// The longest health path, in bytes.
pub const HEALTH_PATH_MAX: usize = 128;

/// The path an app's health check asks through its gateway (the catalog
/// entry's `health_path`, `/` by default): absolute, at most
/// [`HEALTH_PATH_MAX`] bytes, only letters, digits, `/`, `-`, `.`, `_` and
/// `~` (so no query, fragment, percent-escape, space or CR/LF), and no `.`
/// or `..` segment and no `//`, so it goes into the request line as it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HealthPath(String);

impl HealthPath {
    pub fn parse(path: &str) -> Option<HealthPath> {
        let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'.' | b'_' | b'~');
        let ok = path.starts_with('/')
            && path.len() <= HEALTH_PATH_MAX
            && path.bytes().all(allowed)
            && !path.contains("//")
            && !path.split('/').any(|segment| segment == ".." || segment == ".");
        ok.then(|| HealthPath(path.to_owned()))
    }

    /// `/`, the default: a spec or entry at it says nothing more than before
    /// health paths existed.
    pub fn is_root(&self) -> bool {
        self.0 == "/"
    }
}

impl Default for HealthPath {
    fn default() -> Self {
        HealthPath("/".to_owned())
    }
}

super::string_form::string_form!(
    HealthPath,
    "a health path must be absolute, of letters, digits, '/', '-', '.', '_', '~'"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_digests_are_strict() {
        assert!(PlanId::parse(&"a".repeat(32)).is_ok());
        assert_eq!(PlanId::parse(&"A".repeat(32)).unwrap_err().code, Code::InvalidPlanId);
        assert!(PlanId::parse(&"a".repeat(31)).is_err());
        assert!(PlanId::parse("../../etc/passwd").is_err());
        assert_eq!(PlanId::random().as_str().len(), 32);
        assert!(PlanId::parse(PlanId::random().as_str()).is_ok());
        assert!(Digest::parse(&"f".repeat(64)).is_ok());
        assert_eq!(Digest::parse(&"f".repeat(63)).unwrap_err().code, Code::InvalidDigest);
        assert!(Digest::parse(Digest::sha256(b"x").as_str()).is_ok());
    }

    /// Tried: every trick that would change the request line or its target.
    #[test]
    fn health_paths_are_plain_absolute_paths() {
        for good in ["/", "/healthz", "/api/v1/health", "/a.b-c_d~e"] {
            assert!(HealthPath::parse(good).is_some(), "{good}");
        }
        let long = format!("/{}", "a".repeat(HEALTH_PATH_MAX));
        for bad in [
            "",
            "healthz",
            "/a?b=1",
            "/a#x",
            "/a%2e",
            "/a b",
            "/a\r\nHost: x",
            "//evil",
            "/a//b",
            "/../etc",
            "/a/./b",
            "/a/..",
            long.as_str(),
            "/\u{e9}",
        ] {
            assert!(HealthPath::parse(bad).is_none(), "{bad:?}");
        }
        assert!(HealthPath::default().is_root());
    }

    #[test]
    fn ids_are_strict() {
        let hex = "a".repeat(64);
        assert!(ContainerId::parse(&hex).is_some());
        assert!(ContainerId::parse(&"A".repeat(64)).is_none());
        assert!(ContainerId::parse(&hex[..12]).is_none());
        assert!(ImageId::parse(&format!("sha256:{hex}")).is_some());
        assert!(ImageId::parse(&hex).is_none());
        assert!(ImageId::parse(&format!("sha256:{hex}0")).is_none());
    }
}
