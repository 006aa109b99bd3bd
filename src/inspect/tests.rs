//! Gate and status tests. The stand-in targets are real child processes
//! (`/bin/sh` scripts playing the server), run through the real runner.

use std::sync::Arc;
use std::time::Duration;

use super::transport::{CommandCarrier, RunLimits, SshFailure};
use super::*;
use crate::exec::{ProcessSpec, Transport as ExecTransport};
use crate::wire::remote::RemoteCommand;

struct Scripted {
    identity: String,
    disk: String,
    rpc: String,
    ssh: bool,
}

impl CommandCarrier for Scripted {
    fn specs(&self, command: RemoteCommand, stdin: Option<&[u8]>, limits: RunLimits) -> Vec<ProcessSpec> {
        let script = match command {
            RemoteCommand::Identity => &self.identity,
            RemoteCommand::Disk => &self.disk,
            RemoteCommand::Rpc => &self.rpc,
        };
        let mut spec = limits.apply(ProcessSpec::new("/bin/sh", ["-c", script.as_str()]), stdin);
        spec.transport = if self.ssh { ExecTransport::Ssh } else { ExecTransport::Local };
        vec![spec]
    }
    fn kind(&self) -> &'static str {
        "scripted"
    }
}

fn ssh_config() -> Config {
    Config {
        mode: Mode::Ssh,
        expected_host: "web-1".into(),
        expected_user: "agent".into(),
        timeout: Duration::from_secs(5),
        ..Config::default()
    }
}

fn scripted(identity: &str, disk: &str, rpc: &str) -> Inspector {
    Inspector::with_transport_for_tests(
        ssh_config(),
        Arc::new(Scripted { identity: identity.into(), disk: disk.into(), rpc: rpc.into(), ssh: true }),
    )
}

const GOOD_ID: &str = "printf 'web-1\\nagent\\n'";
const DF: &str = "printf 'Filesystem Size Used Avail Use%% Mounted on\\n/dev/vda 20G 5G 15G 25%% /\\n'";

#[tokio::test]
async fn demo_needs_identity_first_then_everything_is_ok_and_labelled() {
    let inspector = Inspector::new(Config::default());
    let early = inspector.check(Check::Disk).await;
    assert_eq!(early.status, Status::IdentityRequired);
    assert!(early.execution.is_none(), "nothing runs before identity");
    for check in Check::ALL {
        let result = inspector.check(check).await;
        assert_eq!(result.status, Status::Ok, "{check:?}");
        assert!(result.is_demo);
        assert_eq!(result.mode, "demo");
        assert_eq!(uuid::Uuid::parse_str(&result.request_id).unwrap().get_version_num(), 4);
        assert!(result.timestamp.ends_with('Z'));
        assert_eq!(result.exit_code, Some(0));
    }
}

/// A target is named in its results as the agent names it: the fleet
/// name a targets file gives, else its configuration's own name.
#[tokio::test]
async fn results_name_the_target_by_its_fleet_name() {
    assert_eq!(Inspector::new(Config::default()).check(Check::Identity).await.target, "demo");
    let named = Inspector::new(Config::default()).named("web-1");
    assert_eq!(named.check(Check::Identity).await.target, "web-1");
}

#[tokio::test]
async fn disk_before_identity_runs_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let touch = format!("touch {}", marker.display());
    let inspector = scripted(&touch, &touch, &touch);
    assert_eq!(inspector.check(Check::Disk).await.status, Status::IdentityRequired);
    assert_eq!(inspector.check(Check::WebStatus).await.status, Status::IdentityRequired);
    assert!(!marker.exists());
}

#[tokio::test]
async fn identity_ok_then_disk_reports_df() {
    let inspector = scripted(GOOD_ID, DF, "exit 1");
    let identity = inspector.check(Check::Identity).await;
    assert_eq!(identity.status, Status::Ok);
    assert_eq!(identity.output, "web-1\nagent\n");
    assert!(!identity.is_demo);
    let disk = inspector.check(Check::Disk).await;
    assert_eq!(disk.status, Status::Ok);
    assert!(disk.output.contains("/dev/vda"));
}

#[tokio::test]
async fn target_drift_stops_hides_output_and_clears_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let count = dir.path().join("count");
    // First identity answers as expected, every later one as another machine.
    let identity = format!(
        "if [ -e {0} ]; then printf 'other-host\\nroot\\nSECRET\\n'; else touch {0}; printf 'web-1\\nagent\\n'; fi",
        count.display()
    );
    let inspector = scripted(&identity, DF, "exit 1");
    assert_eq!(inspector.check(Check::Identity).await.status, Status::Ok);
    let disk = inspector.check(Check::Disk).await;
    assert_eq!(disk.status, Status::IdentityMismatch);
    assert_eq!(disk.output, "");
    assert!(!serde_json::to_string(&disk).unwrap().contains("SECRET"));
    assert!(inspector.gate_refusal().await.is_some(), "the gate is closed");
    // The mismatch sticks: later calls stop before anything runs.
    let later = inspector.check(Check::Disk).await;
    assert_eq!(later.status, Status::IdentityMismatch);
    assert!(later.execution.is_none(), "nothing runs after a mismatch");
    let limits = RunLimits { output: 1024, timeout: Duration::from_secs(2) };
    assert_eq!(inspector.host_rpc(b"{}", limits).await.unwrap_err().status, Status::IdentityMismatch);
}

#[tokio::test]
async fn only_a_matching_identity_clears_a_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("drifted");
    // The target answers as another machine while the flag file exists.
    let identity = format!(
        "if [ -e {0} ]; then printf 'other\\nagent\\n'; else printf 'web-1\\nagent\\n'; fi",
        flag.display()
    );
    let inspector = scripted(&identity, DF, "exit 1");
    std::fs::write(&flag, b"").unwrap();
    assert_eq!(inspector.check(Check::Identity).await.status, Status::IdentityMismatch);
    assert_eq!(inspector.check(Check::Disk).await.status, Status::IdentityMismatch);
    std::fs::remove_file(&flag).unwrap();
    assert_eq!(inspector.check(Check::Disk).await.status, Status::IdentityMismatch, "not before identity");
    assert_eq!(inspector.check(Check::Identity).await.status, Status::Ok);
    assert_eq!(inspector.check(Check::Disk).await.status, Status::Ok);
}

#[tokio::test]
async fn identity_mismatch_on_first_call_withholds_the_answer() {
    let inspector = scripted("printf 'web-2\\nagent\\n'", DF, "exit 1");
    let result = inspector.check(Check::Identity).await;
    assert_eq!(result.status, Status::IdentityMismatch);
    assert_eq!(result.output, "");
}

#[tokio::test]
async fn ssh_255_is_a_connection_failure_not_an_identity() {
    let inspector = scripted("echo PRIVATE >&2; exit 255", DF, "exit 1");
    let result = inspector.check(Check::Identity).await;
    assert_eq!(result.status, Status::ConnectionFailed);
    assert_eq!(result.exit_code, Some(255));
    assert_eq!(result.output, "");
    let execution = result.execution.unwrap();
    assert_eq!(execution.execution_status, ExecutionStatus::SshOrRemote255);
}

#[tokio::test]
async fn web_status_keeps_diagnosis_apart_from_failure() {
    let cases = [
        (
            r#"echo '{"status":"ok","operation":"gateway_status","result":{"gateways":[{"name":"vl-a-gateway","state":"running"}]}}'"#,
            Status::Ok,
        ),
        (
            r#"echo '{"status":"ok","operation":"gateway_status","result":{"gateways":[]}}'"#,
            Status::CheckFailed,
        ),
        (
            r#"echo '{"status":"ok","operation":"gateway_status","result":{"gateways":[{"name":"a","state":"running"},{"name":"b","state":"exited"}]}}'"#,
            Status::CheckFailed,
        ),
        (r#"echo '{"gateways":[]}'"#, Status::HelperUnavailable),
        ("echo 'not json'", Status::HelperUnavailable),
        (r#"echo '{"status":"rejected","code":"x","message":"y"}'; exit 1"#, Status::HelperUnavailable),
        ("echo 'sudo: a password is required' >&2; exit 1", Status::HelperUnavailable),
        ("exit 255", Status::ConnectionFailed),
        ("sleep 10", Status::Timeout),
        ("yes", Status::OutputLimit),
    ];
    for (rpc, expected) in cases {
        let mut config = ssh_config();
        config.timeout = Duration::from_secs(1);
        let inspector = Inspector::with_transport_for_tests(
            config,
            Arc::new(Scripted { identity: GOOD_ID.into(), disk: DF.into(), rpc: rpc.into(), ssh: true }),
        );
        assert_eq!(inspector.check(Check::Identity).await.status, Status::Ok);
        let result = inspector.check(Check::WebStatus).await;
        assert_eq!(result.status, expected, "helper script: {rpc}");
        assert!(!result.output.contains("password"), "stderr never reaches output");
    }
}

#[tokio::test]
async fn web_status_sends_the_fixed_request_on_stdin() {
    let inspector = scripted(
        GOOD_ID,
        DF,
        r#"read line; [ "$line" = '{"operation":"gateway_status"}' ] && echo '{"status":"ok","operation":"gateway_status","result":{"gateways":[{"name":"g","state":"running"}]}}'"#,
    );
    inspector.check(Check::Identity).await;
    assert_eq!(inspector.check(Check::WebStatus).await.status, Status::Ok);
}

/// A reply carrying a proof larger than a check's 8 KiB (a host far ahead
/// of the witness) is read whole; the proof goes up in `carried` and the
/// agent's output is the reply without it.
#[tokio::test]
async fn web_status_reads_a_large_proof_and_shows_the_reply_without_it() {
    let rows = format!("\"{}\"", "r".repeat(1000));
    let rows = vec![rows; 20].join(",");
    let reply = format!(
        r#"{{"status":"ok","operation":"gateway_status","result":{{"gateways":[{{"name":"g","state":"running"}}]}},"audit":{{"seq":9,"hash":"{}","anchor_seq":1,"after":3,"rows":[{rows}]}}}}"#,
        "a".repeat(64)
    );
    let inspector = scripted(GOOD_ID, DF, &format!("cat > /dev/null; printf '%s\\n' '{reply}'"));
    inspector.check(Check::Identity).await;
    let result = inspector.check(Check::WebStatus).await;
    assert_eq!(result.status, Status::Ok, "{}", result.output);
    assert!(!result.output.contains("audit") && result.output.contains("gateways"), "{}", result.output);
    let carried = result.carried.expect("the helper ran");
    assert!(carried.ok && !carried.carries, "a server without the gate's version is protocol 1");
    assert_eq!(carried.proof.map(|p| (p.seq, p.rows.len())), Some((9, 20)));
}

#[tokio::test]
async fn concurrent_checks_are_serialized_and_none_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let step =
        |name: &str| format!("echo start-{name} >> {0}; sleep 0.05; echo end-{name} >> {0}", log.display());
    let identity = format!("{}; printf 'web-1\\nagent\\n'", step("id"));
    let disk = format!("{}; {DF}", step("disk"));
    let inspector = Arc::new(scripted(&identity, &disk, "exit 1"));
    assert_eq!(inspector.check(Check::Identity).await.status, Status::Ok);
    let mut handles = Vec::new();
    for _ in 0..6 {
        let inspector = Arc::clone(&inspector);
        handles.push(tokio::spawn(async move { inspector.check(Check::Disk).await }));
    }
    for handle in handles {
        assert_eq!(handle.await.unwrap().status, Status::Ok);
    }
    let lines: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(String::from).collect();
    // 1 identity + 6 x (identity + disk), each a start/end pair, never interleaved.
    assert_eq!(lines.len(), 2 * 13);
    for pair in lines.chunks(2) {
        assert_eq!(pair[0].strip_prefix("start-"), pair[1].strip_prefix("end-"), "{lines:?}");
    }
}

#[tokio::test]
async fn host_rpc_is_gated_like_a_check() {
    let inspector = scripted(GOOD_ID, DF, "cat");
    let limits = RunLimits { output: 1024, timeout: Duration::from_secs(2) };
    let refused = inspector.host_rpc(b"{}", limits).await.unwrap_err();
    assert_eq!(refused.status, Status::IdentityRequired);
    inspector.check(Check::Identity).await;
    let outcome = inspector.host_rpc(b"{\"a\":1}", limits).await.unwrap();
    assert_eq!(outcome.stdout, b"{\"a\":1}");
}

#[test]
fn healthy_needs_a_non_empty_all_running_list() {
    let reply = |list: &str| {
        format!(r#"{{"status":"ok","operation":"gateway_status","result":{{"gateways":{list}}}}}"#)
            .into_bytes()
    };
    assert_eq!(gateways_healthy(&reply(r#"[{"name":"a","state":"running"}]"#)), Some(true));
    assert_eq!(gateways_healthy(&reply("[]")), Some(false));
    assert_eq!(gateways_healthy(&reply(r#"[{"state":"restarting"}]"#)), Some(false));
    assert_eq!(gateways_healthy(br#"{"gateways":[]}"#), None);
    assert_eq!(gateways_healthy(br#"[]"#), None);
    assert_eq!(gateways_healthy(b""), None);
    // An ok that answers another operation is no answer to gateway_status.
    let other = br#"{"status":"ok","operation":"inventory","result":{"gateways":[{"state":"running"}]}}"#;
    assert_eq!(gateways_healthy(other), None);
}

#[test]
fn stopped_on_purpose_is_healthy_while_drift_and_silence_are_not() {
    let reply = |list: &str| {
        format!(r#"{{"status":"ok","operation":"gateway_status","result":{{"gateways":{list}}}}}"#)
            .into_bytes()
    };
    let up = r#"{"app":"a","state":"running","answers":true,"stopped_on_purpose":false}"#;
    let stopped = r#"{"app":"b","state":"stopped","answers":null,"stopped_on_purpose":true}"#;
    assert_eq!(gateways_healthy(&reply(&format!("[{up},{stopped}]"))), Some(true));
    assert_eq!(gateways_healthy(&reply(&format!("[{stopped}]"))), Some(true), "nothing should run");
    // Stopped, but not by a stop plan: an outage.
    let crashed = r#"{"app":"c","state":"stopped","answers":null,"stopped_on_purpose":false}"#;
    assert_eq!(gateways_healthy(&reply(&format!("[{up},{crashed}]"))), Some(false));
    // Runs, but the gateway does not answer its server name.
    let silent = r#"{"app":"d","state":"running","answers":false,"stopped_on_purpose":false}"#;
    assert_eq!(gateways_healthy(&reply(&format!("[{silent}]"))), Some(false));
    let drifted = r#"{"app":"e","state":"drifted","answers":null,"stopped_on_purpose":false,
        "drift":{"reason":"record_stopped_but_running"}}"#;
    assert_eq!(gateways_healthy(&reply(&format!("[{up},{drifted}]"))), Some(false));
}

/// Runs the report's three checks and renders them as `inspect` does.
async fn report(inspector: &Inspector) -> (Vec<(CheckResult, Option<Diagnosis>)>, String) {
    let mut diagnosed = Vec::new();
    for check in Check::ALL {
        diagnosed.push(inspector.check_diagnosed(check).await);
    }
    let text = report::render(inspector, &diagnosed);
    (diagnosed, text)
}

#[tokio::test]
async fn inspect_says_which_part_of_the_identity_differed_and_never_what_the_target_said() {
    // Tried: another host, another user, both, and a login banner before the answer.
    for (answer, mismatch, line) in [
        (
            "printf 'SPY-HOST\\nagent\\n'",
            Mismatch::Host,
            "the host differed (expected web-1); the user was agent as expected",
        ),
        (
            "printf 'web-1\\nSPY-USER\\n'",
            Mismatch::User,
            "the user differed (expected agent); the host was web-1 as expected",
        ),
        (
            "printf 'SPY-HOST\\nSPY-USER\\n'",
            Mismatch::Both,
            "the host and the user both differed (expected agent@web-1)",
        ),
        (
            "printf 'SPY-BANNER\\nweb-1\\nagent\\n'",
            Mismatch::NotTwoLines,
            "the answer was not the two lines hostname and id -un print (expected web-1, then agent); a login \
             script that prints can cause this",
        ),
    ] {
        let inspector = scripted(answer, DF, "exit 1");
        let (diagnosed, text) = report(&inspector).await;
        let (identity, diagnosis) = &diagnosed[0];
        assert_eq!(identity.status, Status::IdentityMismatch);
        assert_eq!(*diagnosis, Some(Diagnosis::IdentityMismatch(mismatch)));
        assert!(text.contains(line), "{text}");
        assert!(!text.contains("SPY"), "the target's answer stays withheld: {text}");
        // What the agent gets (and `inspect --json` prints) carries none of it.
        let json = report::json_lines(&diagnosed.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>());
        assert!(!json.contains("SPY") && !json.contains("differed"), "{json}");
        assert_eq!(inspector.check(Check::Identity).await.output, "");
    }
}

#[tokio::test]
async fn inspect_names_ssh_s_reason_and_the_command_to_see_it_while_results_keep_stderr_out() {
    // Tried: ssh exiting 255 after refusing an unknown host key, after a
    // refused connection, and with words it never prints.
    for (stderr, reason, line) in [
        (
            "No ED25519 host key is known for web-1 and you have requested strict checking.\\nHost key verification failed.",
            SshFailure::HostKeyUnknown,
            "ssh: the server's host key is not in known_hosts",
        ),
        (
            "ssh: connect to host web-1 port 22: Connection refused",
            SshFailure::ConnectionRefused,
            "ssh: connection refused",
        ),
        ("PRIVATE-NOISE", SshFailure::Unrecognized, "ssh failed (or the remote command exited 255)"),
    ] {
        let inspector = scripted(&format!("printf '{stderr}\\n' >&2; exit 255"), DF, "exit 1");
        let (diagnosed, text) = report(&inspector).await;
        let (identity, diagnosis) = &diagnosed[0];
        assert_eq!(identity.status, Status::ConnectionFailed);
        assert_eq!(*diagnosis, Some(Diagnosis::Ssh(reason)));
        assert!(text.contains(line), "{text}");
        assert!(text.contains("to see ssh's own words, run: ssh course-demo true"), "{text}");
        assert!(!text.contains("ED25519") && !text.contains("PRIVATE"), "stderr is never echoed: {text}");
        let json = report::json_lines(&diagnosed.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>());
        for word in ["ED25519", "verification", "refused", "PRIVATE", "known_hosts", "ssh -"] {
            assert!(!json.contains(word), "{word}: {json}");
        }
    }
    // A 255 from a plain local process is no ssh failure to explain.
    let local = Inspector::with_transport_for_tests(
        ssh_config(),
        Arc::new(Scripted {
            identity: "echo 'Connection refused' >&2; exit 255".into(),
            disk: DF.into(),
            rpc: "exit 1".into(),
            ssh: false,
        }),
    );
    assert_eq!(local.check_diagnosed(Check::Identity).await.1, None);
}
