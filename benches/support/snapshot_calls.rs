//! What two docker benchmarks share (`snapshot_cost`, `plan_foreign`): the
//! bare docker calls a full snapshot wraps, and removing the containers a
//! bench created. Each bench passes its own way of running docker. Root,
//! against the real engine.

use volce_lab::docker::client::INSPECT_TEMPLATE;

/// `docker ps`, `inspect` of every container, `image ls` and `network ls`,
/// with the argv the snapshot uses, output not parsed.
pub fn bare_calls(docker: &dyn Fn(&[&str]) -> String) {
    let ids = docker(&["ps", "-aq", "--no-trunc"]);
    let ids: Vec<&str> = ids.lines().collect();
    if !ids.is_empty() {
        let mut args = vec!["inspect", "--type", "container", "--format", INSPECT_TEMPLATE];
        args.extend(&ids);
        docker(&args);
    }
    docker(&["image", "ls", "-q", "--no-trunc"]);
    docker(&["network", "ls", "--no-trunc", "--filter", "name=vl-", "--format", "{{.Name}}"]);
}

/// Removes every container `filter` (a `docker ps --filter` value) selects,
/// 50 per call.
pub fn remove_containers(docker: &dyn Fn(&[&str]) -> String, filter: &str) {
    let ids = docker(&["ps", "-aq", "--no-trunc", "--filter", filter]);
    let ids: Vec<&str> = ids.lines().collect();
    for chunk in ids.chunks(50) {
        let mut args = vec!["rm", "-f"];
        args.extend(chunk);
        docker(&args);
    }
}
