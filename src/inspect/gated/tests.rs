//! The identity gate through an ssh gate: stand-in servers are `/bin/sh`
//! scripts (real child processes through the real runner) that play a
//! gate, or a shell answering the gate's lines, and log every session.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::super::transport::{CommandCarrier, RunLimits};
use super::super::*;
use crate::exec::{ProcessSpec, Transport as ExecTransport};
use crate::wire::remote::RemoteCommand;

/// `gate` answers the gated lines (it gets the line as `$1`); `plain`
/// answers the fixed legacy commands. Every session appends its line to `log`.
struct Server {
    gate: Option<String>,
    plain: String,
    log: PathBuf,
}

impl Server {
    fn spec(&self, script: &str, line: &str, stdin: Option<&[u8]>, limits: RunLimits) -> ProcessSpec {
        let script = format!("printf '%s\\n' \"$1\" >> '{}'; {script}", self.log.display());
        let mut spec = limits.apply(ProcessSpec::new("/bin/sh", ["-c", script.as_str(), "sh", line]), stdin);
        spec.transport = ExecTransport::Ssh;
        spec
    }
}

impl CommandCarrier for Server {
    fn specs(&self, command: RemoteCommand, stdin: Option<&[u8]>, limits: RunLimits) -> Vec<ProcessSpec> {
        let line = transport::SshTransport::remote(command);
        vec![self.spec(&self.plain, line, stdin, limits)]
    }
    fn gated(&self, line: &str, stdin: Option<&[u8]>, limits: RunLimits) -> Option<Vec<ProcessSpec>> {
        self.gate.as_ref().map(|gate| vec![self.spec(gate, line, stdin, limits)])
    }
    fn kind(&self) -> &'static str {
        "scripted-gate"
    }
}

/// A gate that answers as web-1/agent, printing `payload` after the header.
fn gate_as(host: &str, payload: &str) -> String {
    format!(
        "case \"$1\" in *' identity '*) printf 'volce-lab-gate 1 match {host} agent\\n{host}\\nagent\\n';; \
         *) printf 'volce-lab-gate 1 match {host} agent\\n'; {payload};; esac"
    )
}

const DF: &str = "printf 'Filesystem Size\\n/dev/vda 20G\\n'";

fn inspector(gate: Option<String>, plain: &str) -> (Inspector, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        mode: Mode::Ssh,
        expected_host: "web-1".into(),
        expected_user: "agent".into(),
        timeout: Duration::from_secs(5),
        ..Config::default()
    };
    let server = Server { gate, plain: plain.into(), log: dir.path().join("sessions") };
    (Inspector::with_transport_for_tests(config, Arc::new(server)), dir)
}

fn sessions(dir: &tempfile::TempDir) -> Vec<String> {
    std::fs::read_to_string(dir.path().join("sessions"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn through_the_gate_each_check_is_one_session_that_carries_the_identity() {
    let (inspector, dir) = inspector(Some(gate_as("web-1", DF)), "exit 99");
    let identity = inspector.check(Check::Identity).await;
    assert_eq!(identity.status, Status::Ok, "{identity:?}");
    assert_eq!(identity.output, "web-1\nagent\n");
    assert_eq!(inspector.sessions(), Sessions::Gated);
    let disk = inspector.check(Check::Disk).await;
    assert_eq!(disk.status, Status::Ok, "{disk:?}");
    assert_eq!(disk.output, "Filesystem Size\n/dev/vda 20G\n", "the header is not part of the output");
    assert_eq!(
        sessions(&dir),
        [
            "LC_ALL=C; export LC_ALL; hostname && id -un # volce-lab-gate 1 identity web-1 agent",
            "# volce-lab-gate 1 disk web-1 agent",
        ],
        "one session per check, each naming the expected host and user"
    );
}

#[tokio::test]
async fn a_gated_reply_naming_another_host_withholds_the_output_and_stops_later_calls() {
    // A server whose gate says (even with "match") it is web-2.
    let (inspector, dir) = self::inspector(
        Some(
            "case \"$1\" in *' identity '*) printf 'volce-lab-gate 1 match web-1 agent\\nweb-1\\nagent\\n';; \
             *) printf 'volce-lab-gate 1 match web-2 agent\\nSECRET\\n';; esac"
                .into(),
        ),
        "exit 99",
    );
    assert_eq!(inspector.check(Check::Identity).await.status, Status::Ok);
    let (disk, diagnosis) = inspector.check_diagnosed(Check::Disk).await;
    assert_eq!(disk.status, Status::IdentityMismatch, "{disk:?}");
    assert_eq!(disk.output, "");
    assert_eq!(diagnosis, Some(Diagnosis::IdentityMismatch(Mismatch::Host)));
    let limits = RunLimits { output: 8192, timeout: Duration::from_secs(5) };
    let before = sessions(&dir).len();
    assert_eq!(inspector.host_rpc(b"{}", limits).await.unwrap_err().status, Status::IdentityMismatch);
    assert_eq!(inspector.check(Check::Disk).await.status, Status::IdentityMismatch);
    assert_eq!(sessions(&dir).len(), before, "nothing runs after a mismatch");
}

#[tokio::test]
async fn a_shell_answering_a_gated_line_is_a_mismatch_not_an_answer() {
    // The identity line gets a gate's frame; later the alias reaches a
    // plain shell, for which the gated disk line is a comment: no output.
    let (inspector, _dir) = inspector(
        Some("case \"$1\" in *' identity '*) printf 'volce-lab-gate 1 match web-1 agent\\nweb-1\\nagent\\n';; esac".into()),
        "exit 99",
    );
    assert_eq!(inspector.check(Check::Identity).await.status, Status::Ok);
    let (disk, diagnosis) = inspector.check_diagnosed(Check::Disk).await;
    assert_eq!(disk.status, Status::IdentityMismatch, "{disk:?}");
    assert_eq!(diagnosis, Some(Diagnosis::IdentityMismatch(Mismatch::NotTwoLines)));
    assert_eq!(inspector.sessions(), Sessions::Unknown, "the next identity answer decides again");
}

#[tokio::test]
async fn without_a_gate_each_check_keeps_its_identity_session() {
    // A login shell runs the identity line (its comment aside) and prints
    // the two plain lines; checks then use the fixed commands.
    let plain = format!("case \"$1\" in *df*) {DF};; *) exit 98;; esac");
    let (inspector, dir) = inspector(Some("printf 'web-1\\nagent\\n'".into()), &plain);
    assert_eq!(inspector.check(Check::Identity).await.status, Status::Ok);
    assert_eq!(inspector.sessions(), Sessions::TwoPerCheck);
    let disk = inspector.check(Check::Disk).await;
    assert_eq!(disk.status, Status::Ok, "{disk:?}");
    let log = sessions(&dir);
    assert_eq!(log.len(), 3, "identity, identity again, df: {log:?}");
    assert!(log[1].ends_with("identity web-1 agent"));
    assert_eq!(log[2], "LC_ALL=C df -h /");
}

#[tokio::test]
async fn a_gate_mismatch_on_identity_names_the_part_that_differed() {
    let (inspector, _dir) =
        inspector(Some("printf 'volce-lab-gate 1 mismatch web-1 vl-other\\n'; exit 1".into()), "");
    let (identity, diagnosis) = inspector.check_diagnosed(Check::Identity).await;
    assert_eq!(identity.status, Status::IdentityMismatch);
    assert_eq!(identity.output, "");
    assert_eq!(diagnosis, Some(Diagnosis::IdentityMismatch(Mismatch::User)));
}

#[tokio::test]
async fn the_helper_s_reply_comes_through_the_gate_as_the_payload() {
    let reply = r#"{"status":"ok","operation":"inventory","result":{}}"#;
    let (inspector, _dir) =
        inspector(Some(gate_as("web-1", &format!("cat >/dev/null; printf '%s\\n' '{reply}'"))), "");
    assert_eq!(inspector.check(Check::Identity).await.status, Status::Ok);
    let limits = RunLimits { output: 8192, timeout: Duration::from_secs(5) };
    let outcome = inspector.host_rpc(br#"{"operation":"inventory"}"#, limits).await.unwrap();
    assert_eq!(String::from_utf8(outcome.stdout).unwrap(), format!("{reply}\n"));
}

#[tokio::test]
async fn ssh_failing_on_a_gated_check_is_a_connection_failure_and_shows_nothing() {
    let (inspector, _dir) = inspector(Some(gate_as("web-1", "printf 'half'; exit 255")), "");
    assert_eq!(inspector.check(Check::Identity).await.status, Status::Ok);
    let disk = inspector.check(Check::Disk).await;
    assert_eq!(disk.status, Status::ConnectionFailed, "{disk:?}");
    assert_eq!(disk.output, "");
}
