//! Fuzz target: canonical JSON and its digest (`volce_lab::control::canonical`),
//! over any JSON value. Properties: the canonical bytes parse back to the
//! same value; canonical form is a fixed point; a value written any other
//! way (pretty, keys in another order) and read back gives the same digest.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use volce_lab::control::canonical;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    let bytes = canonical::to_vec(&value).expect("a value serializes");
    let back: Value = serde_json::from_slice(&bytes).expect("canonical JSON parses");
    assert_eq!(back, value, "parse(canonical(x)) == x");
    assert_eq!(canonical::to_vec(&back).unwrap(), bytes, "canonical is a fixed point");
    let pretty: Value = serde_json::from_slice(&serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    assert_eq!(pretty, value);
    assert_eq!(canonical::sha256_hex(&pretty).unwrap(), canonical::sha256_hex(&value).unwrap());
});
