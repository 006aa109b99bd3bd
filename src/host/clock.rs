//! The clocks the root helper runs on: the wall clock and the boot clock
//! (CLOCK_BOOTTIME with the kernel's boot id), read here beside
//! `liveness::boot_id` so that `crate::control` keeps only the pure
//! [`Clock`] trait and the expiry rule (`control::clock::check_expiry`).
//! Runs as root in the host helper; reads the system clocks and /proc.

use crate::control::Clock;
use crate::control::clock::BootInstant;

/// The wall clock, and the boot clock beside it.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
    }
    fn boot(&self) -> Option<BootInstant> {
        boot_now()
    }
}

/// The boot clock now, `None` where the kernel does not say.
pub fn boot_now() -> Option<BootInstant> {
    let time = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).ok()?;
    let millis = time.tv_sec().checked_mul(1000)? + time.tv_nsec() / 1_000_000;
    Some(BootInstant { boot_id: super::liveness::boot_id()?, millis })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boot_clock_reads_on_this_machine() {
        let first = boot_now().expect("Linux has CLOCK_BOOTTIME and a boot id");
        let second = boot_now().unwrap();
        assert_eq!(first.boot_id, second.boot_id);
        assert!(second.millis >= first.millis);
    }
}
