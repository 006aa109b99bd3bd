//! Fuzz target: a stored plan body (`volce_lab::actions::plan::Plan::from_stored`),
//! which the root helper reads back from its database. It must never panic;
//! a body it accepts has the digest of its canonical JSON, and that canonical
//! JSON reads back as the same plan.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volce_lab::actions::plan::Plan;

fuzz_target!(|data: &[u8]| {
    let Ok(body) = std::str::from_utf8(data) else { return };
    let Ok(plan) = Plan::from_stored(body) else { return };
    assert_eq!(plan.compute_digest(), plan.digest);
    let again = Plan::from_stored(&plan.canonical_json()).expect("canonical body is accepted");
    assert_eq!(again, plan);
    assert_eq!(again.canonical_json(), plan.canonical_json());
});
