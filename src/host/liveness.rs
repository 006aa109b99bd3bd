//! Who claimed a plan, and whether that process still lives: pid, the
//! process start time from `/proc/<pid>/stat`, and the kernel boot id.
//! Runs as root inside the host helper; reads /proc only.
//!
//! A pid alone is not enough: pids are reused, and after a reboot every pid
//! means something else. A claim counts as alive only when the boot id is
//! today's and the same pid still has the same start time and is not a zombie.
//!
//! A live claimer may be stopped (SIGSTOP, or a TSTP its caller relayed
//! before the helper blocked it): it holds its plan `executing` and will
//! not finish until someone sends it CONT. That is still alive, never
//! abandoned (it would act once continued), but the operator is told, with
//! the pid, in `list`, `show`, `resolve` and `doctor`.

use crate::store::Claim;
use crate::vocab::{Code, PlanId, Refusal};

use super::controller::Liveness;

const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// A live claimer that is stopped: what the operator needs to end it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoppedClaimer {
    pub pid: i32,
    /// The claimer leads its own process group (the helper's own session),
    /// so `kill -KILL -- -PID` also ends a docker call it started.
    pub group_leader: bool,
}

impl StoppedClaimer {
    /// The operator's way out, one step a line, and why it cannot run the
    /// action twice: a continued claimer finishes and records it; a killed
    /// one is dead, so the next helper turns the plan into
    /// `needs_inspection` (claimer_died) and nothing ever claims it again.
    pub fn way_out(&self, plan: &PlanId) -> String {
        let pid = self.pid;
        let kill =
            if self.group_leader { format!("kill -KILL -- -{pid}") } else { format!("kill -KILL {pid}") };
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
        if start != claim.start_time || !matches!(state, 'T' | 't') {
            return None;
        }
        Some(StoppedClaimer { pid: claim.pid, group_leader: process_group(claim.pid) == Some(claim.pid) })
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
        assert_eq!(ProcLiveness.stopped(&claim), Some(StoppedClaimer { pid, group_leader: false }));
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

    #[test]
    fn a_reaped_child_is_dead() {
        let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        let claim = Claim { pid, start_time: 0, boot_id: boot_id().unwrap() };
        assert!(!ProcLiveness.alive(&claim));
    }
}
