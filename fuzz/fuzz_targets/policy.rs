//! Fuzz target: the policy loader (`volce_lab::control::policy::Policy::from_json`),
//! which runs as root on the operator's policy file. It must never panic, and
//! a policy it accepts keeps the bounds it promises.
#![no_main]

use libfuzzer_sys::fuzz_target;
use volce_lab::vocab::Action;
use volce_lab::control::policy::Policy;

fuzz_target!(|data: &[u8]| {
    let Ok(policy) = Policy::from_json(data) else { return };
    assert!(!policy.catalog.is_empty());
    let (low, high) = policy.port_range;
    assert!(1024 <= low && low <= high);
    assert!((1..=64).contains(&policy.max_apps));
    for action in Action::ALL {
        if action.always_requires_approval() {
            assert!(policy.requires_approval(*action), "{action:?}");
        }
    }
    // The hash is a function of the accepted policy.
    assert_eq!(policy.hash(), Policy::from_json(data).expect("accepted twice").hash());
});
