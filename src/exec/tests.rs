//! The runner against real child processes: `/bin/sh` scripts play the
//! misbehaving children (sleep, flood, self-signal, exit codes); the runner
//! itself never involves a shell.

use super::*;

fn sh(script: &str) -> ProcessSpec {
    // Tests use /bin/sh as the *program under test*, to play misbehaving
    // children; the runner itself never involves a shell.
    let mut spec = ProcessSpec::new("/bin/sh", ["-c", script]);
    spec.timeout = Duration::from_secs(5);
    spec
}

#[tokio::test]
async fn clean_exit_is_ok_and_confirmed() {
    let outcome = run(&sh("printf hello")).await;
    assert_eq!(outcome.execution.execution_status, ExecutionStatus::Ok);
    assert_eq!(outcome.execution.exit_code, Some(0));
    assert_eq!(outcome.execution.signal, None);
    assert!(!outcome.execution.timed_out);
    assert!(!outcome.execution.output_truncated);
    assert_eq!(outcome.execution.completion, Completion::Confirmed);
    assert_eq!(outcome.stdout, b"hello");
}

#[tokio::test]
async fn exit_seven_is_nonzero_and_confirmed() {
    let outcome = run(&sh("echo out; echo secret-stderr >&2; exit 7")).await;
    assert_eq!(outcome.execution.execution_status, ExecutionStatus::NonzeroExit);
    assert_eq!(outcome.execution.exit_code, Some(7));
    assert_eq!(outcome.execution.completion, Completion::Confirmed);
    assert_eq!(outcome.stdout, b"out\n");
    assert_eq!(outcome.stderr_len, 14);
}

#[tokio::test]
async fn exit_255_is_ambiguous_only_for_ssh() {
    let local = run(&sh("exit 255")).await;
    assert_eq!(local.execution.execution_status, ExecutionStatus::NonzeroExit);
    assert_eq!(local.execution.completion, Completion::Confirmed);

    let mut spec = sh("exit 255");
    spec.transport = Transport::Ssh;
    let ssh = run(&spec).await;
    assert_eq!(ssh.execution.execution_status, ExecutionStatus::SshOrRemote255);
    assert_eq!(ssh.execution.exit_code, Some(255));
    assert_eq!(ssh.execution.completion, Completion::Unconfirmed);
}

#[tokio::test]
async fn sleeping_child_times_out_and_its_group_is_killed() {
    let mut spec = sh("sleep 30 & sleep 30; wait");
    spec.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let outcome = run(&spec).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(outcome.execution.execution_status, ExecutionStatus::Timeout);
    assert!(outcome.execution.timed_out);
    assert_eq!(outcome.execution.exit_code, None);
    assert_eq!(outcome.execution.signal, Some(9));
    assert_eq!(outcome.execution.completion, Completion::Unconfirmed);
    assert!(outcome.execution.duration_ms >= 300);
}

#[tokio::test]
async fn stdout_flood_hits_the_limit_and_is_killed() {
    let mut spec = sh("while :; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done");
    spec.stdout_limit = 4096;
    let outcome = run(&spec).await;
    assert_eq!(outcome.execution.execution_status, ExecutionStatus::OutputLimit);
    assert!(outcome.execution.output_truncated);
    assert!(!outcome.execution.timed_out);
    assert_eq!(outcome.execution.completion, Completion::Unconfirmed);
    assert!(outcome.stdout.is_empty(), "a partial answer is never handed back");
}

#[tokio::test]
async fn stderr_flood_hits_the_limit_and_is_never_returned() {
    let mut spec = sh("echo visible; while :; do echo PRIVATE-ERROR >&2; done");
    spec.stderr_limit = 4096;
    let outcome = run(&spec).await;
    assert_eq!(outcome.execution.execution_status, ExecutionStatus::OutputLimit);
    assert!(outcome.execution.output_truncated);
    assert!(!String::from_utf8_lossy(&outcome.stdout).contains("PRIVATE"));
}

#[tokio::test]
async fn self_signal_is_reported_as_signaled() {
    let outcome = run(&sh("kill -TERM $$")).await;
    assert_eq!(outcome.execution.execution_status, ExecutionStatus::Signaled);
    assert_eq!(outcome.execution.signal, Some(15));
    assert_eq!(outcome.execution.exit_code, None);
    assert_eq!(outcome.execution.completion, Completion::Confirmed);

    let mut spec = sh("kill -TERM $$");
    spec.transport = Transport::Ssh;
    assert_eq!(run(&spec).await.execution.completion, Completion::Unconfirmed);
}

#[tokio::test]
async fn missing_program_is_launch_failed() {
    let outcome = run(&ProcessSpec::new("/nonexistent/volce-lab-test", ["x"])).await;
    assert_eq!(outcome.execution.execution_status, ExecutionStatus::LaunchFailed);
    assert_eq!(outcome.execution.exit_code, None);
    assert_eq!(outcome.execution.completion, Completion::Confirmed);
}

#[tokio::test]
async fn relative_program_is_never_started() {
    let outcome = run(&ProcessSpec::new("sh", ["-c", "exit 0"])).await;
    assert_eq!(outcome.execution.execution_status, ExecutionStatus::LaunchFailed);
}

#[tokio::test]
async fn stdin_bytes_arrive_intact() {
    let payload: Vec<u8> = {
        let mut p = b"'\"$(id) `id` <<'EOF'\nEOF\n\\ ; | & \x00 \xff".to_vec();
        p.extend(std::iter::repeat_n(b'z', 5000));
        p
    };
    let mut spec = ProcessSpec::new("/bin/cat", Vec::<OsString>::new());
    spec.stdin = Some(payload.clone());
    spec.stdout_limit = 16 * 1024;
    let outcome = run(&spec).await;
    assert_eq!(outcome.execution.execution_status, ExecutionStatus::Ok);
    assert_eq!(outcome.stdout, payload);
}

#[tokio::test]
async fn environment_is_cleared() {
    // The test process has PATH and HOME; the child must see neither.
    assert!(std::env::var_os("PATH").is_some());
    let mut spec = ProcessSpec::new("/usr/bin/env", Vec::<OsString>::new());
    spec.env = vec![("ONLY".into(), "this".into())];
    let outcome = run(&spec).await;
    assert_eq!(outcome.stdout, b"ONLY=this\n");
}

#[tokio::test]
async fn dropping_the_future_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("alive");
    let script = format!("sleep 1; touch {}", marker.display());
    let spec = sh(&script);
    let _ = tokio::time::timeout(Duration::from_millis(200), run(&spec)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!marker.exists(), "the cancelled child must not live on");
}

#[test]
fn blocking_wrapper_runs() {
    let outcome = run_blocking(&sh("exit 3"));
    assert_eq!(outcome.execution.exit_code, Some(3));
}

#[test]
fn children_get_a_fixed_minimal_environment_whatever_ours_is() {
    let env = minimal_env();
    let keys: Vec<_> = env.iter().map(|(k, _)| k.to_str().unwrap()).collect();
    assert_eq!(keys, ["PATH", "LC_ALL"]);
    assert!(ProcessSpec::new("/bin/true", ["x"]).env == env, "a new spec starts from it");
}

#[tokio::test]
async fn the_stderr_tail_keeps_only_the_end_and_never_shows_it() {
    // Tried: 3000 bytes of noise, then the line ssh ends with.
    let spec =
        sh("head -c 3000 /dev/zero | tr '\\000' x >&2; echo 'Host key verification failed.' >&2; exit 255");
    let (outcome, tail) = run_with_stderr_tail(&spec).await;
    assert_eq!(outcome.execution.exit_code, Some(255));
    assert_eq!(outcome.stderr_len, 3000 + 30);
    assert_eq!(tail.bytes().len(), STDERR_TAIL);
    assert!(tail.bytes().ends_with(b"Host key verification failed.\n"));
    assert_eq!(format!("{tail:?}"), format!("StderrTail({STDERR_TAIL} bytes)"));
    // The plain runner keeps nothing of it.
    assert!(!format!("{:?}", run(&spec).await).contains("verification"));
}

#[tokio::test]
async fn stderr_as_data_is_kept_whole_and_apart_from_stdout() {
    let mut spec = sh("printf 'out1\\n'; printf 'err1\\n' >&2; printf 'out2\\n'; printf 'err2\\n' >&2");
    spec.stderr_is_data = true;
    spec.stderr_limit = 100;
    let outcome = run(&spec).await;
    assert_eq!(outcome.execution.execution_status, ExecutionStatus::Ok);
    assert_eq!(outcome.stdout, b"out1\nout2\n");
    assert_eq!((outcome.stderr.as_slice(), outcome.stderr_len), (&b"err1\nerr2\n"[..], 10));
    // Without the flag stderr is still only counted.
    let outcome = run(&sh("printf 'out1\\n'; printf 'err1\\n' >&2")).await;
    assert_eq!((outcome.stdout.as_slice(), outcome.stderr_len), (&b"out1\n"[..], 5));
    assert!(outcome.stderr.is_empty());
}

#[tokio::test]
async fn a_flood_of_stderr_as_data_hits_its_limit_and_keeps_nothing() {
    let mut spec = sh("head -c 100000 /dev/zero >&2");
    spec.stderr_is_data = true;
    spec.stderr_limit = 1000;
    let outcome = run(&spec).await;
    assert_eq!(outcome.execution.execution_status, ExecutionStatus::OutputLimit);
    assert!(outcome.stdout.is_empty() && outcome.stderr.is_empty());
}

#[test]
fn every_failed_run_has_the_references_category_and_serde_says_the_same_word() {
    use strum::VariantArray as _;
    let of = |status| ProcessOutcome::of(&Execution::not_started(status)).map(ProcessOutcome::as_str);
    assert_eq!(of(ExecutionStatus::Ok), None, "a clean exit has no failure category");
    let words: Vec<_> = ExecutionStatus::VARIANTS.iter().filter_map(|&s| of(s)).collect();
    assert_eq!(
        words,
        [
            "COMMAND_EXIT_NONZERO",
            "COMMAND_TIMEOUT",
            "COMMAND_OUTPUT_LIMIT",
            "COMMAND_SIGNALED",
            "COMMAND_LAUNCH_FAILED",
            "SSH_OR_REMOTE_EXIT_255"
        ]
    );
    for outcome in ProcessOutcome::VARIANTS {
        assert_eq!(serde_json::to_value(outcome).unwrap(), serde_json::json!(outcome.as_str()));
        assert_eq!(outcome.as_str().parse::<ProcessOutcome>().ok(), Some(*outcome));
    }
}

/// Tried: 1 MiB through the pipe (128 times the consumer's own stdout
/// limit: the bytes never pass through us); a producer that fails; a
/// consumer that quits while the producer still writes; a producer past
/// its deadline. Each ends, and each side says how it ended.
#[tokio::test]
async fn a_pipe_carries_any_amount_and_each_end_reports_its_own_end() {
    let counted = |producer: ProcessSpec| async move {
        let mut consumer = sh("wc -c");
        consumer.stdout_limit = 64;
        run_piped(&producer, &consumer).await
    };
    let (out, into) = counted(sh("head -c 1048576 /dev/zero")).await;
    assert_eq!(out.execution.execution_status, ExecutionStatus::Ok);
    assert_eq!(into.execution.execution_status, ExecutionStatus::Ok);
    assert_eq!(String::from_utf8_lossy(&into.stdout).trim(), "1048576");

    let (out, into) = counted(sh("printf partial; exit 3")).await;
    assert_eq!(out.execution.exit_code, Some(3), "the producer's failure is its own");
    assert_eq!(String::from_utf8_lossy(&into.stdout).trim(), "7", "the consumer saw the end of its input");

    let mut flood = ProcessSpec::new("/usr/bin/yes", ["flood"]);
    flood.timeout = Duration::from_secs(5);
    let (out, into) = run_piped(&flood, &sh("head -c 10 >/dev/null")).await;
    assert_eq!(into.execution.execution_status, ExecutionStatus::Ok);
    assert!(!out.execution.timed_out, "a consumer that quits ends the producer: {:?}", out.execution);
    assert_ne!(out.execution.execution_status, ExecutionStatus::Ok);

    let mut slow = sh("sleep 5");
    slow.timeout = Duration::from_millis(300);
    let (out, into) = counted(slow).await;
    assert!(out.execution.timed_out);
    assert_eq!(String::from_utf8_lossy(&into.stdout).trim(), "0");
}
