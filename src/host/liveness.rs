//! Who claimed a plan, and whether that process still lives: pid, the
//! process start time from `/proc/<pid>/stat`, and the kernel boot id.
//! Runs as root inside the host helper; reads /proc only.
//!
//! A pid alone is not enough: pids are reused, and after a reboot every pid
//! means something else. A claim counts as alive only when the boot id is
//! today's and the same pid still has the same start time and is not a zombie.
//!
//! A live claimer may be stopped (SIGSTOP, or a TSTP its caller relayed
//! before the helper caught it): it holds its plan `executing` and will
//! not finish until someone sends it CONT. Or it may be blocked writing to
//! its stdout or stderr, a pipe someone holds and never reads (a helper
//! from before progress was written without blocking; today's blocks only
//! in its bounded final reply, after the record). Both are still alive,
//! never abandoned (each would act once let go), but the operator is told,
//! with the pid and which of the two, in `list`, `show`, `resolve` and
//! `doctor` ([`Hold`]).

use crate::store::Claim;
use crate::vocab::{Code, PlanId, Refusal};

/// Who this process is, and whether the process behind a claim still lives.
pub trait Liveness {
    /// The claim this process writes when it takes a plan.
    fn me(&self) -> Result<Claim, Refusal>;
    /// Whether the claimer is the same, still running process.
    fn alive(&self, claim: &Claim) -> bool;
    /// The claimer, if it is alive but stopped (it holds its plan
    /// `executing` until someone continues or kills it). A fake that
    /// cannot tell says never.
    fn stopped(&self, _claim: &Claim) -> Option<StoppedClaimer> {
        None
    }
}

const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// What holds a live claimer back from finishing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Stopped by a signal (state T): only CONT or KILL moves it.
    Stopped,
    /// Asleep in a write to its stdout or stderr: whoever holds the other
    /// end of that pipe does not read it.
    StuckOnOutput,
}

impl Hold {
    /// How `list`, `show` and `doctor` name it, in capitals like a state.
    pub fn label(self) -> &'static str {
        match self {
            Hold::Stopped => "STOPPED",
            Hold::StuckOnOutput => "STUCK writing its output",
        }
    }
}

/// A live claimer that is stopped or stuck on its output: what the operator
/// needs to end it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoppedClaimer {
    pub pid: i32,
    /// The claimer leads its own process group (the helper's own session),
    /// so `kill -KILL -- -PID` also ends a docker call it started.
    pub group_leader: bool,
    pub hold: Hold,
}

impl StoppedClaimer {
    /// A claimer stopped by a signal.
    pub fn stopped(pid: i32, group_leader: bool) -> StoppedClaimer {
        StoppedClaimer { pid, group_leader, hold: Hold::Stopped }
    }

    /// The operator's way out, one step a line, and why it cannot run the
    /// action twice: a continued claimer finishes and records it; a killed
    /// one is dead, so the next helper turns the plan into
    /// `needs_inspection` (claimer_died) and nothing ever claims it again.
    pub fn way_out(&self, plan: &PlanId) -> String {
        let pid = self.pid;
        let kill =
            if self.group_leader { format!("kill -KILL -- -{pid}") } else { format!("kill -KILL {pid}") };
        if self.hold == Hold::StuckOnOutput {
            return format!(
                "Its claimer, process {pid}, is STUCK writing its output: whoever holds the other end of its \
                 stdout (ls -l /proc/{pid}/fd/1 names the pipe; fuser or lsof finds who holds it) never reads \
                 it, so the action is neither finished nor abandoned, and nothing else will run it. Either end \
                 the process that holds the pipe (the write then fails, and the claimer finishes and records \
                 the action by itself), or end the claimer{} and mark what it may have left for inspection \
                 (the plan becomes needs_inspection, claimer_died, and never runs again):\n  sudo {kill}\n  \
                 sudo volce-lab-host show {plan}   (names what carries its label)\n  \
                 sudo volce-lab-host resolve {plan}   (after you have inspected)\n",
                if self.group_leader { " with any docker call it started" } else { "" }
            );
        }
        format!(
            "Its claimer, process {pid}, is stopped: the action is neither finished nor abandoned, and nothing \
             else will run it. Either let it finish:\n  sudo kill -CONT {pid}\nor end it{} and mark what it \
             may have left for inspection (the plan becomes needs_inspection, claimer_died, and never runs \
             again):\n  sudo {kill}\n  sudo volce-lab-host show {plan}   (names what carries its label)\n  \
             sudo volce-lab-host resolve {plan}   (after you have inspected)\n",
            if self.group_leader { " with any docker call it started" } else { "" }
        )
    }
}

/// The /proc-backed liveness check.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcLiveness;

/// (state char, start time in clock ticks since boot) of a process.
pub fn proc_stat(pid: i32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain anything, spaces
    // and ')' included: the fields we want follow the LAST ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state); starttime is field 22.
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

/// The process group of a process (field 5 of `/proc/<pid>/stat`).
fn process_group(pid: i32) -> Option<i32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    text[text.rfind(')')? + 1..].split_whitespace().nth(2)?.parse().ok()
}

/// Whether a process is asleep inside a write to its stdout or stderr:
/// `/proc/<pid>/syscall` starts with the number of the syscall it sleeps in
/// and its first argument (the fd) in hex. A sleeping writer is one that
/// waits for room, since a write to a pipe with room returns at once; one
/// look is a hint, not proof, so only the operator's text uses it.
pub fn writing_output(pid: i32) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/syscall")) else {
        return false;
    };
    let mut fields = text.split_whitespace();
    let (Some(number), Some(fd)) = (fields.next(), fields.next()) else {
        return false;
    };
    let writes = [nix::libc::SYS_write, nix::libc::SYS_writev].map(|n| n.to_string());
    writes.iter().any(|n| n == number) && matches!(fd, "0x1" | "0x2")
}

pub fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string(BOOT_ID).ok()?;
    let id = id.trim();
    (!id.is_empty()).then(|| id.to_owned())
}

impl Liveness for ProcLiveness {
    fn me(&self) -> Result<Claim, Refusal> {
        let pid = std::process::id() as i32;
        match (proc_stat(pid), boot_id()) {
            (Some((_, start_time)), Some(boot_id)) => Ok(Claim { pid, start_time, boot_id }),
            _ => {
                Err(Refusal::new(Code::StateUnavailable, "This helper cannot identify itself through /proc."))
            }
        }
    }

    fn stopped(&self, claim: &Claim) -> Option<StoppedClaimer> {
        // Only the same process (same boot, same start time) counts: a
        // stopped process that merely reuses the pid is not our claimer.
        if !self.alive(claim) {
            return None;
        }
        let (state, start) = proc_stat(claim.pid)?;
        let hold = match state {
            'T' | 't' => Hold::Stopped,
            'S' | 'D' if writing_output(claim.pid) => Hold::StuckOnOutput,
            _ => return None,
        };
        if start != claim.start_time {
            return None;
        }
        Some(StoppedClaimer {
            pid: claim.pid,
            group_leader: process_group(claim.pid) == Some(claim.pid),
            hold,
        })
    }

    fn alive(&self, claim: &Claim) -> bool {
        // Declaring a claimer dead moves its plan to needs_inspection while it
        // may still be acting, so only positive evidence counts as death: a
        // different boot, no such process, another start time, or a zombie.
        // Any other failure to read /proc (EMFILE, ENOMEM...) counts as alive.
        match boot_id() {
            Some(today) if today != claim.boot_id => return false,
            Some(_) => {}
            None => return true,
        }
        match std::fs::read_to_string(format!("/proc/{}/stat", claim.pid)) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
            Err(_) => true,
            Ok(_) => match proc_stat(claim.pid) {
                Some((state, start)) => start == claim.start_time && state != 'Z' && state != 'X',
                // Gone between the two reads.
                None => !matches!(
                    std::fs::metadata(format!("/proc/{}", claim.pid)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound
                ),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive() {
        let me = ProcLiveness.me().unwrap();
        assert_eq!(me.pid, std::process::id() as i32);
        assert!(ProcLiveness.alive(&me));
    }

    #[test]
    fn another_boot_or_start_time_is_dead() {
        let me = ProcLiveness.me().unwrap();
        assert!(!ProcLiveness.alive(&Claim { boot_id: "other".into(), ..me.clone() }));
        assert!(!ProcLiveness.alive(&Claim { start_time: me.start_time + 1, ..me.clone() }));
    }

    /// A real `sleep`, stopped with SIGSTOP: alive and stopped; continued:
    /// alive and not stopped; killed and reaped: neither.
    #[test]
    fn a_stopped_sleep_is_alive_and_stopped_until_continued_or_killed() {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let mut child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
        let pid = child.id() as i32;
        let (_, start_time) = proc_stat(pid).unwrap();
        let claim = Claim { pid, start_time, boot_id: boot_id().unwrap() };
        let until = |what: &dyn Fn() -> bool| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !what() {
                assert!(std::time::Instant::now() < deadline, "the sleep never changed state");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        };
        assert_eq!(ProcLiveness.stopped(&claim), None);
        kill(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
        until(&|| ProcLiveness.stopped(&claim).is_some());
        assert!(ProcLiveness.alive(&claim), "a stopped claimer is alive: it acts once continued");
        // The sleep is in this test's process group, not its own.
        assert_eq!(ProcLiveness.stopped(&claim), Some(StoppedClaimer::stopped(pid, false)));
        // Another start time is another process, stopped or not.
        assert_eq!(ProcLiveness.stopped(&Claim { start_time: start_time + 1, ..claim.clone() }), None);
        kill(Pid::from_raw(pid), Signal::SIGCONT).unwrap();
        until(&|| ProcLiveness.stopped(&claim).is_none());
        assert!(ProcLiveness.alive(&claim));
        kill(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
        until(&|| ProcLiveness.stopped(&claim).is_some());
        // SIGKILL ends a stopped process too; once reaped it is dead.
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!ProcLiveness.alive(&claim));
        assert_eq!(ProcLiveness.stopped(&claim), None);
    }

    /// A real writer whose stdout pipe is full and never read (`yes` into
    /// a pipe this test never reads): alive, and named as stuck on its
    /// output with the way out that ends the pipe's holder or the claimer.
    #[test]
    fn a_writer_on_a_full_pipe_nobody_reads_is_stuck_on_its_output() {
        let mut child =
            std::process::Command::new("/usr/bin/yes").stdout(std::process::Stdio::piped()).spawn().unwrap();
        let pid = child.id() as i32;
        let (_, start_time) = proc_stat(pid).unwrap();
        let claim = Claim { pid, start_time, boot_id: boot_id().unwrap() };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while ProcLiveness.stopped(&claim).is_none() {
            assert!(std::time::Instant::now() < deadline, "yes never blocked on its full pipe");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let stuck = ProcLiveness.stopped(&claim).unwrap();
        assert_eq!(stuck.hold, Hold::StuckOnOutput);
        assert!(ProcLiveness.alive(&claim));
        let plan = PlanId::random();
        let text = stuck.way_out(&plan);
        assert!(text.contains(&format!("process {pid}, is STUCK writing its output")), "{text}");
        assert!(text.contains(&format!("/proc/{pid}/fd/1")) && text.contains("kill -KILL"), "{text}");
        // Reading the pipe lets it go on: no longer stuck.
        let mut out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // `yes` writes again at once, so it may be seen asleep in a write
        // now and then; one look in a few must see it free.
        while (0..5).all(|_| ProcLiveness.stopped(&claim).is_some()) {
            assert!(std::time::Instant::now() < deadline, "a read pipe still looks stuck");
        }
        child.kill().unwrap();
        child.wait().unwrap();
        drop(reader.join());
        assert_eq!(ProcLiveness.stopped(&claim), None);
    }

    #[test]
    fn a_reaped_child_is_dead() {
        let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        let claim = Claim { pid, start_time: 0, boot_id: boot_id().unwrap() };
        assert!(!ProcLiveness.alive(&claim));
    }
}
