//! End-to-end: what the agent account cannot do even through its one sudo
//! rule, against the real host helper, and defence in depth when that rule is
//! made too broad. Runs as root: it acts as the agent through the loopback
//! sshd (scripts/e2e-setup) and as the operator through the operator's sudo
//! rule.
//!
//! Needs the host controller and the docker engine in the installed binary,
//! the Docker engine and the test images (scripts/test-images); without them
//! each test fails with a sentence saying what is missing.

use crate::support::e2e::*;
use serde_json::json;

const PLAN: &str = "0123456789abcdef0123456789abcdef";

#[test]
#[ignore = "real parts: run by scripts/test"]
fn rpc_requests_that_carry_approval_are_refused() {
    require_setup();
    require_host_helper();
    let _serial = serial();
    let digest = "a".repeat(64);
    let requests = [
        json!({"operation": "approve", "plan_id": PLAN, "digest": digest}),
        json!({"operation": "approve", "plan_id": PLAN}),
        json!({"operation": "execute", "plan_id": PLAN, "approved": true}),
        json!({"operation": "execute", "plan_id": PLAN, "approval": {"by": OPERATOR}}),
        json!({"operation": "plan", "action": "stop", "parameters": {"app": "e2e-x"}, "approved": true}),
        json!({"operation": "plan", "action": "stop", "parameters": {"app": "e2e-x", "approved": true}}),
        json!({"operation": "plan", "action": "approve", "parameters": {"plan_id": PLAN}}),
        json!({"operation": "inventory", "approver": OPERATOR}),
        json!({"operation": "show", "plan_id": PLAN}),
        json!({"operation": "list"}),
        json!({"operation": "pending"}),
        json!({"operation": "reject", "plan_id": PLAN}),
        json!({"operation": "execute", "plan_id": PLAN, "reject": true}),
    ];
    for request in &requests {
        let (code, reply) = agent_rpc(request);
        assert_eq!(code, Some(1), "{request} -> {reply}");
        assert_eq!(reply["status"], "rejected", "{request} -> {reply}");
        assert!(reply["code"].as_str().is_some_and(|c| !c.is_empty()), "{request} -> {reply}");
    }
    // The operator's terminal commands are not behind the agent's sudo rule
    // (it allows exactly `rpc`): sudo refuses before the helper runs, so
    // there is no helper output at all.
    for command in ["list", "list --json", "pending", &format!("reject {PLAN}"), &format!("show {PLAN}")] {
        let ran = as_agent(&format!("sudo -n {HOST_LINK} {command}"), None);
        assert!(!ran.ok(), "the agent ran `{command}` through sudo: {ran:?}");
        assert!(ran.stdout.is_empty(), "`{command}` printed something: {ran:?}");
        assert!(!ran.stderr.contains("volce-lab-host: refused"), "sudo must refuse, not the helper: {ran:?}");
    }
    // The same helper answers a well-formed request: the refusals above were
    // about the requests, not a broken installation.
    let (code, reply) = agent_rpc(&json!({"operation": "gateway_status"}));
    assert_eq!((code, &reply["status"]), (Some(0), &json!("ok")), "{reply}");
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn under_a_too_broad_sudo_rule_the_agent_still_cannot_approve_its_own_plan() {
    require_setup();
    require_host_helper();
    require_docker_and_policy();
    let _serial = serial();
    let app = "e2e-did";
    fresh_host_state(&[app]);

    // Deliberately wrong configuration: any helper subcommand through sudo,
    // with SETENV (so the agent may set SUDO_USER and SUDO_UID), and the
    // agent listed as an approver. Both undone when the test ends.
    let _broad = SudoersDropIn::install(
        "volce-lab-e2e-broad",
        &format!("{AGENT} ALL=(root) NOPASSWD:SETENV: {HOST_LINK} *"),
    );
    let _policy = PolicyChange::apply(|policy| {
        policy["approvers"].as_array_mut().expect("approvers").push(json!(AGENT));
    });
    let cleanup = Cleanup(app);

    // A running app of the agent's own making.
    let port = free_port();
    let deploy = json!({"operation": "plan", "action": "deploy", "parameters": {
        "app": app, "image": "web", "host_port": port, "container_port": 8080,
        "server_name": "did.e2e.test"}});
    for attempt in 1..=3 {
        let (code, planned) = agent_rpc(&deploy);
        assert_eq!(code, Some(0), "deploy plan: {planned}");
        let deploy_id = find_str(&planned, "id").to_owned();
        let (code, done) = agent_rpc(&json!({"operation": "execute", "plan_id": deploy_id}));
        // Other Docker activity on a shared machine voids a plan (nothing
        // changed): plan again, as an agent would.
        if done["code"] == "snapshot_changed" && attempt < 3 {
            continue;
        }
        assert_eq!(code, Some(0), "deploy execute: {done}");
        break;
    }

    // A plan that needs approval, requested by the agent.
    let (code, planned) =
        agent_rpc(&json!({"operation": "plan", "action": "stop", "parameters": {"app": app}}));
    assert_eq!(code, Some(0), "stop plan: {planned}");
    let plan_id = find_str(&planned, "id").to_owned();
    let digest = find_str(&planned, "digest").to_owned();
    assert_eq!(find(&planned, "requires_approval"), Some(&json!(true)), "{planned}");

    // sudo now lets the agent run `approve`; the helper must still refuse it.
    // With --yes, so that the refusal is the helper's checks of who asks,
    // not the missing terminal.
    for attempt in [
        format!("sudo -n {HOST_LINK} approve {plan_id} {digest} --yes"),
        format!("SUDO_USER={OPERATOR} sudo -n {HOST_LINK} approve {plan_id} {digest} --yes"),
        format!("sudo -n SUDO_USER={OPERATOR} {HOST_LINK} approve {plan_id} {digest} --yes"),
        format!("sudo -n -u {OPERATOR} {HOST_LINK} approve {plan_id} {digest} --yes"),
    ] {
        let ran = as_agent(&attempt, None);
        assert!(!ran.ok(), "the agent approved its own plan with `{attempt}`: {ran:?}");
    }
    // Issue 22: both variables forged consistently, the operator's name and
    // uid, which the account database confirms. Without a terminal, at the
    // agent's own terminal, and from a process of the agent's left on the
    // operator's terminal: the sudo that started the helper was run by the
    // agent, and the helper says so.
    let operator_uid = nix::unistd::User::from_name(OPERATOR).unwrap().unwrap().uid.to_string();
    let agent_uid = nix::unistd::User::from_name(AGENT).unwrap().unwrap().uid.to_string();
    let forged_user = format!("SUDO_USER={OPERATOR}");
    let forged_uid = format!("SUDO_UID={operator_uid}");
    let forged =
        ["/usr/bin/sudo", "-n", &forged_user, &forged_uid, HOST_LINK, "approve", &plan_id, &digest, "--yes"];
    let headless = as_agent(&forged.join(" "), None);
    for (terminal, ran) in [
        ("no terminal", headless),
        ("the agent's terminal", at_terminal(AGENT, AGENT, &forged)),
        ("the operator's terminal", at_terminal(OPERATOR, AGENT, &forged)),
    ] {
        assert_eq!(ran.code, Some(1), "{terminal}: {ran:?}");
        assert!(ran.stderr.contains("refused (caller_mismatch)"), "{terminal}: {ran:?}");
        assert!(
            ran.stderr.contains(&format!("was run by uid {agent_uid}")),
            "{terminal}: the refusal names the fact that disagrees: {ran:?}"
        );
    }
    let (code, refused) = agent_rpc(&json!({"operation": "execute", "plan_id": plan_id}));
    assert_eq!(code, Some(1), "execute after self-approval attempts: {refused}");
    assert_eq!(refused["status"], "rejected", "{refused}");
    let stored = stored_plan(&plan_id);
    assert_eq!(stored["state"], "pending", "{stored}");
    assert!(stored["approval"].is_null(), "no approval may be recorded: {stored}");

    // The plan itself was fine: the operator's approval makes it run.
    let approved = as_operator(&["approve", &plan_id, &digest, "--yes"]);
    assert!(approved.ok(), "operator approve: {approved:?}");
    let (mut code, mut done) = agent_rpc(&json!({"operation": "execute", "plan_id": plan_id}));
    for _ in 0..2 {
        if done["code"] != "snapshot_changed" {
            break;
        }
        // Voided by other Docker activity: a new plan, approved again.
        let (_, planned) =
            agent_rpc(&json!({"operation": "plan", "action": "stop", "parameters": {"app": app}}));
        let plan_id = find_str(&planned, "id").to_owned();
        let approved = as_operator(&["approve", &plan_id, find_str(&planned, "digest"), "--yes"]);
        assert!(approved.ok(), "operator approve: {approved:?}");
        (code, done) = agent_rpc(&json!({"operation": "execute", "plan_id": plan_id}));
    }
    assert_eq!(code, Some(0), "execute after the operator's approval: {done}");
    drop(cleanup);
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn the_operator_lists_and_rejects_an_agent_plan_and_the_agent_sees_plan_rejected() {
    require_setup();
    require_host_helper();
    require_docker_and_policy();
    let _serial = serial();
    let app = "e2e-rej";
    fresh_host_state(&[app]);
    let (code, planned) = agent_rpc(&json!({"operation": "plan", "action": "deploy", "parameters": {
        "app": app, "image": "web", "host_port": free_port(), "container_port": 8080,
        "server_name": "rej.e2e.test"}}));
    assert_eq!(code, Some(0), "deploy plan: {planned}");
    let plan_id = find_str(&planned, "id").to_owned();

    // The operator's list, through the operator's sudo rule.
    let listed = as_operator(&["list", "--json"]);
    assert!(listed.ok(), "list --json: {listed:?}");
    let listed: serde_json::Value = serde_json::from_str(listed.stdout.trim()).expect("list --json is JSON");
    let entry = listed["plans"].as_array().expect("plans").iter().find(|p| p["plan_id"] == plan_id.as_str());
    let entry = entry.unwrap_or_else(|| panic!("{plan_id} not listed: {listed}"));
    assert_eq!((&entry["requester"], &entry["action"]), (&json!(AGENT), &json!("deploy")), "{entry}");
    let text = as_operator(&["pending"]);
    assert!(text.ok() && text.stdout.contains(&plan_id), "pending: {text:?}");

    let rejected = as_operator(&["reject", &plan_id]);
    assert!(rejected.ok() && rejected.stdout.contains("Rejected plan"), "reject: {rejected:?}");
    let (code, refused) = agent_rpc(&json!({"operation": "execute", "plan_id": plan_id}));
    assert_eq!((code, &refused["code"]), (Some(1), &json!("plan_rejected")), "{refused}");
    let stored = stored_plan(&plan_id);
    assert_eq!(
        (&stored["state"], &stored["rejection"]["by"]),
        (&json!("rejected"), &json!(OPERATOR)),
        "{stored}"
    );
    let again = as_operator(&["reject", &plan_id]);
    assert!(!again.ok() && again.stderr.contains("plan_rejected"), "reject twice: {again:?}");
    let listed = as_operator(&["list"]);
    assert!(listed.ok() && !listed.stdout.contains(&plan_id), "a rejected plan awaits nothing: {listed:?}");
    let ps = run(DOCKER, &["ps", "-aq", "--filter", &format!("label=io.volce-lab.app={app}")], None);
    assert!(ps.stdout.trim().is_empty(), "nothing of the rejected deploy exists: {ps:?}");
}

/// `SUDO_USER` is what a `SETENV` sudo rule lets its user set: approve,
/// reject and resolve cross-check it with `SUDO_UID`, the account database
/// and the session's login uid before they open anything. Tried, as root
/// with a forged environment: the operator's name with another account's
/// uid; a name with no account; the name without a uid; and (where the
/// kernel keeps login uids) both variables consistent but the session
/// opened by another account; and the consistent pair itself, which no
/// sudo started. Each is `caller_mismatch` before the plan is even looked
/// up; the operator's own sudo at their terminal gets past the check
/// (`plan_not_found`).
#[test]
#[ignore = "real parts: run by scripts/test"]
fn a_forged_sudo_user_cannot_approve_reject_or_resolve() {
    require_setup();
    require_host_helper();
    // The answers compared below (plan_not_found) need the installed policy.
    require_docker_and_policy();
    let _serial = serial();
    let uid = |name: &str| {
        nix::unistd::User::from_name(name)
            .unwrap()
            .unwrap_or_else(|| panic!("no account {name}"))
            .uid
            .to_string()
    };
    let (operator_uid, other_uid) = (uid(OPERATOR), uid(OTHER));
    let digest = "a".repeat(64);
    let commands: [Vec<&str>; 3] =
        [vec!["approve", PLAN, &digest, "--yes"], vec!["reject", PLAN], vec!["resolve", PLAN]];
    let helper = |args: &[&str], env: &[(&str, &str)], login_uid: Option<&str>| {
        let mut command = match login_uid {
            // Only a test does this: root may set a login uid once, in a
            // fresh process, before it execs the helper.
            Some(login) => {
                let mut command = std::process::Command::new("/bin/sh");
                command.arg("-c").arg(format!("echo {login} > /proc/self/loginuid && exec \"$0\" \"$@\""));
                command.arg(HOST_LINK);
                command
            }
            None => std::process::Command::new(HOST_LINK),
        };
        command.args(args).env_clear().env("PATH", "/usr/bin:/bin");
        for (key, value) in env {
            command.env(key, value);
        }
        let output = command.stdin(std::process::Stdio::null()).output().unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned(), output.stdout.is_empty())
    };
    for args in &commands {
        for env in [
            vec![("SUDO_USER", OPERATOR), ("SUDO_UID", other_uid.as_str())],
            vec![("SUDO_USER", "vl-nobody-here"), ("SUDO_UID", operator_uid.as_str())],
            vec![("SUDO_USER", OPERATOR)],
        ] {
            let (code, stderr, quiet) = helper(args, &env, None);
            assert_eq!(code, Some(1), "{args:?} {env:?}: {stderr}");
            assert!(stderr.contains("refused (caller_mismatch)"), "{args:?} {env:?}: {stderr}");
            assert!(stderr.contains("nothing was recorded") && quiet, "{args:?} {env:?}: {stderr}");
        }
        // The consistent pair, set by root without sudo: no sudo confirms it.
        let honest = [("SUDO_USER", OPERATOR), ("SUDO_UID", operator_uid.as_str())];
        let (code, stderr, quiet) = helper(args, &honest, None);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains("refused (caller_mismatch)") && quiet, "{args:?}: {stderr}");
        assert!(stderr.contains("no /usr/bin/sudo process"), "{args:?}: {stderr}");
        // The operator's own sudo at the operator's terminal passes the check
        // (their sudo rule has no resolve).
        if args[0] != "resolve" {
            let ran = as_operator(args);
            assert!(
                ran.stderr.contains("plan_not_found"),
                "the operator at their terminal: {args:?}: {ran:?}"
            );
        }
        let (code, stderr, _) = helper(args, &honest, Some(&other_uid));
        if stderr.contains("loginuid") || (code == Some(1) && !stderr.contains("volce-lab-host")) {
            eprintln!(
                "note: cannot set a login uid here ({}); the login uid case is not proved",
                stderr.trim()
            );
        } else {
            assert!(
                stderr.contains("refused (caller_mismatch)"),
                "another login's session: {args:?}: {stderr}"
            );
            assert!(stderr.contains(&format!("opened by uid {other_uid}")), "{stderr}");
        }
    }
}

/// A TERM and a TSTP relayed through sudo while the helper waits for its
/// request (stdin held open), from a job-control shell, which sudo
/// needs to relay a TSTP: the helper is neither ended nor stopped, still
/// answers when the request comes, and a stdin that never closes gets
/// `request_timeout`. TERM/TSTP at each step of a deploy, with the helper
/// held at each docker call, is suite host_kill_matrix.
#[test]
#[ignore = "real parts: run by scripts/test"]
fn term_and_tstp_relayed_through_sudo_do_not_stop_or_end_the_helper() {
    require_setup();
    require_host_helper();
    // The answers compared below (plan_not_found) need the installed policy.
    require_docker_and_policy();
    let _serial = serial();
    // sudo's options before issue 44 (it forks, waits, relays and answers
    // signals): the drop-in setup writes lets sudo exec the helper in its
    // place instead, leaving no sudo to signal (suite host_sudo_rule).
    let _before = SudoersDropIn::install(
        "volce-lab-e2e-before",
        &format!("Defaults!{} use_pty, pam_session, pam_setcred", volce_lab::install::RPC_ALIAS),
    );
    // As the agent's account: start the helper through the exact rule with
    // a stdin that stays open 2 s, signal sudo (only sudo: it relays to the
    // helper), then send the request.
    let script = r#"set -m
{ sleep 2; printf '%s' '{"operation":"execute","plan_id":"0123456789abcdef0123456789abcdef"}'; } \
  | sudo -n /usr/local/bin/volce-lab-host rpc > /tmp/vl-e2e-sig.out &
sudo_pid=$!
sleep 1
kill -TERM $sudo_pid; kill -TSTP $sudo_pid; sleep 0.3
ps -o stat= -C volce-lab-host > /tmp/vl-e2e-sig.stat || true
kill -CONT $sudo_pid 2>/dev/null
wait $sudo_pid
cat /tmp/vl-e2e-sig.out; echo "stat=$(tr -d ' \n' < /tmp/vl-e2e-sig.stat)""#;
    let ran = as_agent(&format!("bash -c '{}'", script.replace('\'', r"'\''")), None);
    assert!(ran.stdout.contains(r#""code":"plan_not_found""#), "the helper still answered: {ran:?}");
    assert!(!ran.stdout.contains("stat=T"), "the helper was stopped: {ran:?}");
}

/// Issue 22, as the agent's account through the exact sudo rule: USR1,
/// USR2, PIPE and WINCH (which sudo relays) and then ALRM (which sudo
/// answers by HUP, TERM and KILL of the command's process group) sent to
/// `sudo` while the helper waits for its request. The helper's worker, in
/// its own session, still reads the request and answers it into the
/// stdout it was given, after sudo itself has gone. The same signals at
/// each step of each action, with the helper holding a claim: suite
/// host_kill_matrix.
#[test]
#[ignore = "real parts: run by scripts/test"]
fn relayed_usr1_usr2_pipe_winch_and_alrm_to_sudo_do_not_end_the_helper() {
    require_setup();
    require_host_helper();
    require_docker_and_policy();
    let _serial = serial();
    // sudo's options before issue 44 (it forks, waits, relays and answers
    // signals): the drop-in setup writes lets sudo exec the helper in its
    // place instead, leaving no sudo to signal (suite host_sudo_rule).
    let _before = SudoersDropIn::install(
        "volce-lab-e2e-before",
        &format!("Defaults!{} use_pty, pam_session, pam_setcred", volce_lab::install::RPC_ALIAS),
    );
    let script = r#"rm -f /tmp/vl-e2e-sig22.out
{ sleep 3; printf '%s' '{"operation":"execute","plan_id":"0123456789abcdef0123456789abcdef"}'; } \
  | sudo -n /usr/local/bin/volce-lab-host rpc > /tmp/vl-e2e-sig22.out &
sudo_pid=$!
sleep 1
for s in USR1 USR2 PIPE WINCH; do kill -s $s $sudo_pid; sleep 0.1; done
kill -0 $sudo_pid && echo sudo=alive-after-relayed
kill -s ALRM $sudo_pid
wait $sudo_pid; echo "sudo=$?"
sleep 4
cat /tmp/vl-e2e-sig22.out"#;
    let ran = as_agent(&format!("bash -c '{}'", script.replace('\'', r"'\''")), None);
    assert!(
        ran.stdout.contains("sudo=alive-after-relayed"),
        "the relayed signals ended sudo's command: {ran:?}"
    );
    assert!(
        ran.stdout.contains(r#""code":"plan_not_found""#),
        "the helper still answered after ALRM: {ran:?}"
    );
}

/// Removes the test's app when the test ends, passed or failed.
struct Cleanup(&'static str);

impl Drop for Cleanup {
    fn drop(&mut self) {
        remove_apps(&[self.0]);
    }
}

/// Issue 14: what the agent tried and was refused is on the server's trail
/// (`audit export`), with its code and the request id it sent, and nothing
/// the agent sent (a secret planted in a parameter) is in any row.
/// Tried: an approval smuggled beside the request, an unknown plan, the
/// operator's approve with a wrong digest of a plan that needs none.
#[test]
#[ignore = "real parts: run by scripts/test"]
fn an_agents_refused_attempts_are_in_audit_export_with_their_codes_and_nothing_it_sent() {
    require_setup();
    require_host_helper();
    require_docker_and_policy();
    let _serial = serial();
    let app = "e2e-aud";
    fresh_host_state(&[app]);
    let secret = "e2e-planted-secret-51c2";
    let (code, planned) =
        agent_rpc(&json!({"operation": "plan", "action": "deploy", "request_id": "e2e-aud-1",
        "parameters": {"app": app, "image": "web", "host_port": free_port(), "container_port": 8080,
        "server_name": format!("{secret}.e2e.test")}}));
    assert_eq!(code, Some(0), "deploy plan: {planned}");
    let plan_id = find_str(&planned, "id").to_owned();
    let (_, smuggled) = agent_rpc(&json!({"operation": "execute", "plan_id": plan_id, "approved": true,
        "request_id": "e2e-aud-2"}));
    assert_eq!(smuggled["code"], "invalid_request", "{smuggled}");
    let (_, unknown) =
        agent_rpc(&json!({"operation": "execute", "plan_id": PLAN, "request_id": "e2e-aud-3"}));
    assert_eq!(unknown["code"], "plan_not_found", "{unknown}");
    let wrong = as_operator(&["approve", &plan_id, &"0".repeat(64), "--yes"]);
    assert!(!wrong.ok(), "{wrong:?}");

    let export = run(HOST_LINK, &["audit", "export", "--json"], None);
    assert!(export.ok(), "{export:?}");
    let rows: Vec<serde_json::Value> =
        export.stdout.lines().map(|line| serde_json::from_str(line).expect("one JSON row")).collect();
    let by_request = |id: &str| rows.iter().rev().find(|r| r["request_id"] == id).cloned();
    let prepared = by_request("e2e-aud-1").expect("the prepare's row");
    assert_eq!((&prepared["event"], &prepared["plan_id"]), (&json!("prepared"), &json!(plan_id)));
    let refused = by_request("e2e-aud-3").expect("the unknown plan's row");
    assert_eq!((&refused["code"], &refused["actor"]), (&json!("plan_not_found"), &json!(AGENT)), "{refused}");
    // The smuggled approval did not parse, so its id was not read: the row
    // is the rpc's own, with its code.
    assert!(
        rows.iter().any(|r| r["operation"] == "rpc" && r["code"] == "invalid_request" && r["actor"] == AGENT),
        "no row for the smuggled approval"
    );
    let approve = rows.iter().rev().find(|r| r["operation"] == "approve").expect("the approve's row");
    assert_eq!(approve["actor"], OPERATOR);
    assert!(approve["sudo_uid"].is_i64(), "{approve}");
    assert!(!export.stdout.contains(secret), "a parameter reached the audit trail");
    let verify = run(HOST_LINK, &["audit", "verify"], None);
    assert!(verify.ok(), "{verify:?}");
    remove_apps(&[app]);
}
