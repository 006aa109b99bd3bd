//! The helper's process guard: slots, limits, signals and the request read.

use super::*;
use std::io::Write as _;

#[test]
fn the_caught_signals_never_include_kill_stop_or_the_childs_own() {
    for never in [Signal::SIGKILL, Signal::SIGSTOP, Signal::SIGCHLD, Signal::SIGCONT] {
        assert!(!caught().contains(&(never as i32)), "{never}");
    }
    // The C library's own real-time signals (32, 33 with glibc) keep
    // their handlers.
    assert!(caught().iter().all(|n| *n < 32 || *n >= nix::libc::SIGRTMIN()));
    // TERM is signal 15: bit 14 of SigCgt.
    assert_eq!(proc_mask_for_tests(&[Signal::SIGTERM as i32]), 1 << 14);
}

/// What the guard catches, read back from the kernel: every standard
/// signal but the ones [`CAUGHT`] leaves out for a reason is caught or
/// ignored (PIPE, by the Rust runtime), and so is every real-time
/// signal below SIGRTMAX. Issue 22: USR1 relayed by sudo killed the
/// helper between its claim and its record. The catching runs in a
/// child (this test binary again, running only
/// `caught_signals_child`), so this test process keeps its own TERM
/// and INT.
#[test]
fn every_relayable_signal_is_caught_or_ignored_in_the_kernels_own_masks() {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "host::process::tests::caught_signals_child", "--nocapture", "--test-threads=1"])
        .env("VOLCE_LAB_CAUGHT_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let status = stdout.split("--status--").nth(1).expect("the child printed its status");
    let held = field(status, "SigCgt") | field(status, "SigIgn");
    let left_out = [
        Signal::SIGKILL,
        Signal::SIGSTOP,
        Signal::SIGCHLD,
        Signal::SIGCONT,
        Signal::SIGSEGV,
        Signal::SIGBUS,
        Signal::SIGILL,
        Signal::SIGFPE,
    ];
    for signal in Signal::iterator().filter(|signal| !left_out.contains(signal)) {
        let bit = proc_mask_for_tests(&[signal as i32]);
        assert_eq!(held & bit, bit, "{signal} is neither caught nor ignored:\n{status}");
    }
    // The ones sudo relays or answers (ALRM, see the module header),
    // by name, so a change to the list above cannot hide them.
    for signal in [Signal::SIGUSR1, Signal::SIGUSR2, Signal::SIGALRM, Signal::SIGWINCH, Signal::SIGTERM] {
        let bit = proc_mask_for_tests(&[signal as i32]);
        assert_eq!(field(status, "SigCgt") & bit, bit, "{signal} is not caught:\n{status}");
    }
    assert_eq!(field(status, "SigIgn") & proc_mask_for_tests(&[Signal::SIGPIPE as i32]), 1 << 12);
    for number in realtime() {
        let bit = proc_mask_for_tests(&[number]);
        assert_eq!(field(status, "SigCgt") & bit, bit, "real-time signal {number} is not caught:\n{status}");
    }
    assert!(realtime().len() >= 29, "{:?}", realtime());
    // And nothing is blocked: the children must not inherit a mask.
    assert_eq!(field(status, "SigBlk"), 0, "{status}");
}

/// The child of the test above: does nothing unless it was started by
/// it.
#[test]
fn caught_signals_child() {
    if std::env::var_os("VOLCE_LAB_CAUGHT_CHILD").is_none() {
        return;
    }
    catch(&caught()).unwrap();
    // This thread's own status: /proc/self is the main thread, whose
    // mask glibc blocks whole for a moment while it creates this thread,
    // so under load it read as everything blocked (dispositions, SigCgt
    // and SigIgn, are the process's either way).
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    println!("--status--{status}--status--");
}

#[test]
fn the_limits_leave_no_write_size_or_cpu_cap_and_no_core() {
    let find = |wanted: Resource| LIMITS.iter().find(|(r, ..)| *r == wanted).map(|(_, s, h)| (*s, *h));
    assert_eq!(find(Resource::RLIMIT_FSIZE), Some((RLIM_INFINITY, RLIM_INFINITY)));
    assert_eq!(find(Resource::RLIMIT_CPU), Some((RLIM_INFINITY, RLIM_INFINITY)));
    assert_eq!(find(Resource::RLIMIT_AS), Some((RLIM_INFINITY, RLIM_INFINITY)));
    assert_eq!(find(Resource::RLIMIT_CORE), Some((0, 0)));
    let (soft, hard) = find(Resource::RLIMIT_NOFILE).unwrap();
    assert!(soft >= 1024 && soft == hard);
}

#[test]
fn a_complete_request_is_read_and_a_silent_pipe_times_out() {
    let (reader, mut writer) = std::io::pipe().unwrap();
    writer.write_all(b"{}").unwrap();
    drop(writer);
    let mut text = String::new();
    DeadlineReader::new(reader, Duration::from_secs(5)).read_to_string(&mut text).unwrap();
    assert_eq!(text, "{}");

    // A writer that keeps the pipe open and sends nothing after a byte.
    let (reader, mut writer) = std::io::pipe().unwrap();
    writer.write_all(b"{").unwrap();
    let started = Instant::now();
    let mut bytes = Vec::new();
    let error = DeadlineReader::new(reader, Duration::from_millis(200)).read_to_end(&mut bytes).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
    assert_eq!(bytes, b"{");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(200) && took < Duration::from_secs(2), "{took:?}");
    drop(writer);
}

/// A state directory of the test's own uid (no policy: slots need none).
fn temp_paths() -> (tempfile::TempDir, HostPaths) {
    let root = tempfile::tempdir().unwrap();
    let paths = HostPaths {
        policy: root.path().join("policy.json"),
        state_dir: root.path().join("state"),
        owner_uid: nix::unistd::geteuid().as_raw(),
    };
    (root, paths)
}

#[test]
fn slots_are_counted_and_a_full_house_answers_busy() {
    let (_root, paths) = temp_paths();
    let held: Vec<Slot> = (0..RPC_SLOTS).map(|_| take_slot(&paths).unwrap()).collect();
    let indexes: std::collections::BTreeSet<usize> = held.iter().map(|slot| slot.index).collect();
    assert_eq!(indexes.len(), RPC_SLOTS);
    let refusal = take_slot(&paths).unwrap_err();
    assert_eq!(refusal.code, Code::Busy);
    assert!(refusal.message.contains("do not retry in a loop"), "{}", refusal.message);
    drop(held);
    take_slot(&paths).unwrap();
}

#[test]
fn a_symlinked_slot_file_is_refused() {
    let (root, paths) = temp_paths();
    paths::prepare_state(&paths).unwrap();
    std::os::unix::fs::symlink(root.path().join("elsewhere"), paths.state_dir.join("rpc-slot-0")).unwrap();
    assert_eq!(take_slot(&paths).unwrap_err().code, Code::UnsafePath);
    assert!(!root.path().join("elsewhere").exists(), "nothing is created through the link");
}

/// Why the helper catches instead of blocking: std's spawn hands a
/// blocked mask on to the child (seen on Rust 1.95: SigBlk of the child
/// equal to ours). If this starts failing, std began to reset the mask.
#[test]
fn a_blocked_mask_would_reach_the_children() {
    std::thread::spawn(|| {
        // Only this thread's mask changes; the thread ends after.
        let set: nix::sys::signal::SigSet = [Signal::SIGUSR1].into_iter().collect();
        set.thread_block().unwrap();
        let spec = crate::exec::ProcessSpec::new("/bin/cat", ["/proc/self/status"]);
        let status = String::from_utf8(crate::exec::run_blocking(&spec).stdout).unwrap();
        assert_eq!(
            field(&status, "SigBlk") & proc_mask_for_tests(&[Signal::SIGUSR1 as i32]),
            proc_mask_for_tests(&[Signal::SIGUSR1 as i32])
        );
    })
    .join()
    .unwrap();
}

/// The docker children start with the default disposition of a signal
/// the helper catches, and nothing blocked: a real child spawned
/// through the runner reports its own SigCgt/SigIgn/SigBlk. SIGUSR2
/// stands in for [`CAUGHT`] (same code path) so the test binary keeps
/// its own TERM and INT.
#[test]
fn children_spawned_through_the_runner_do_not_inherit_a_caught_signal() {
    catch(&[Signal::SIGUSR2 as i32]).unwrap();
    let mine = std::fs::read_to_string("/proc/self/status").unwrap();
    let usr2 = proc_mask_for_tests(&[Signal::SIGUSR2 as i32]);
    assert_eq!(field(&mine, "SigCgt") & usr2, usr2, "{mine}");
    let spec = crate::exec::ProcessSpec::new("/bin/cat", ["/proc/self/status"]);
    let status = String::from_utf8(crate::exec::run_blocking(&spec).stdout).unwrap();
    assert_eq!(field(&status, "SigCgt") & usr2, 0, "{status}");
    assert_eq!(field(&status, "SigIgn") & usr2, 0, "{status}");
    assert_eq!(field(&status, "SigBlk") & usr2, 0, "{status}");
}

fn field(status: &str, name: &str) -> u64 {
    let line = status.lines().find(|line| line.starts_with(&format!("{name}:"))).unwrap();
    u64::from_str_radix(line[name.len() + 1..].trim(), 16).unwrap()
}
