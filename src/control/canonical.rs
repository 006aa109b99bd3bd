//! Canonical JSON (object keys sorted by their UTF-8 bytes, no whitespace)
//! and the sha256 digest over it. Pure.
//!
//! We write the bytes ourselves instead of trusting `serde_json`'s map order:
//! another crate in the build could switch on `preserve_order` through
//! feature unification and silently change every digest.

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// The canonical bytes of any serializable value.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let value = serde_json::to_value(value)?;
    let mut out = Vec::with_capacity(512);
    write(&value, &mut out)?;
    Ok(out)
}

/// The canonical JSON as a string.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    // Only valid UTF-8 is ever written.
    Ok(String::from_utf8(to_vec(value)?).expect("canonical JSON is UTF-8"))
}

/// sha256 over the canonical JSON, lowercase hex.
pub fn sha256_hex<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    Ok(crate::text::hex(&Sha256::digest(to_vec(value)?)))
}

fn write(value: &Value, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key)?;
                out.push(b':');
                write(item, out)?;
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, out)?;
            }
            out.push(b']');
        }
        scalar => serde_json::to_writer(&mut *out, scalar)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_and_whitespace_is_gone() {
        let value = json!({"b": 1, "a": {"z": [1, 2, {"y": null, "x": true}], "m": "é\n"}});
        assert_eq!(to_string(&value).unwrap(), r#"{"a":{"m":"é\n","z":[1,2,{"x":true,"y":null}]},"b":1}"#);
    }

    #[test]
    fn digest_is_stable() {
        // Golden value: if this changes, every stored plan's digest changes.
        let digest = sha256_hex(&json!({"b": 1, "a": "x"})).unwrap();
        assert_eq!(digest, crate::text::hex(&Sha256::digest(br#"{"a":"x","b":1}"#)));
        assert_eq!(digest.len(), 64);
    }
}
