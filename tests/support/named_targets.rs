//! A targets file of `count` ssh targets named `t01`..., each its own alias
//! expecting its own name as host: what the tests and the benches of the
//! workstation's size and memory use when the number of servers is what
//! varies (nothing connects to them unless the caller's ssh_config says
//! where). Shared by tests/hermetic and benches/mcp_stdio.rs.
#![allow(dead_code)]

/// The names `t01`... of `count` targets.
pub fn names(count: usize) -> Vec<String> {
    (1..=count).map(|i| format!("t{i:02}")).collect()
}

/// The targets file naming each of `names`.
pub fn targets_toml(names: &[String]) -> String {
    names
        .iter()
        .map(|n| {
            format!(
                "[targets.{n}]\nssh_alias = \"{n}\"\nexpected_host = \"{n}\"\nexpected_user = \"agent\"\n"
            )
        })
        .collect()
}
