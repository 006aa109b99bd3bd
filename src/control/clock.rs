//! Expiry that a step of the wall clock cannot stretch or shrink. Pure: the
//! readings come in through [`crate::control::Clock`] (the real clocks are
//! `crate::host::clock`); runs as root in the host helper at prepare,
//! approve and execute.
//!
//! Invariant enforced here: a plan prepared on this boot expires when the
//! boot clock (CLOCK_BOOTTIME: monotonic, counts suspend, never set by
//! anyone) says its time to live has passed, whatever the wall clock does
//! meanwhile. When the wall clock and the boot clock disagree about the
//! time since prepare by more than [`TOLERANCE_SECONDS`], the clock was
//! stepped (by hand, or a large NTP correction): the plan is refused with
//! `clock_skew` rather than trusted on either reading. After a reboot, or
//! for a plan stored before boot times were kept, only the wall clock is
//! there to go by.

use crate::vocab::{Code, Refusal};

/// How far the two clocks may drift apart between prepare and execute:
/// NTP slews by far less within a plan's lifetime (600 s by default).
pub const TOLERANCE_SECONDS: i64 = 120;

/// One reading of the boot clock, and which boot it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootInstant {
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    /// CLOCK_BOOTTIME in milliseconds.
    pub millis: i64,
}

/// Refuses a plan made at `created_at` (wall, with `created_boot` if kept)
/// that expires at `expires_at`, at wall time `now` and boot time `boot`.
pub fn check_expiry(
    created_at: i64,
    expires_at: i64,
    created_boot: Option<&BootInstant>,
    now: i64,
    boot: Option<&BootInstant>,
) -> Result<(), Refusal> {
    let expired = || Refusal::new(Code::PlanExpired, "The plan has expired; ask for a new one.");
    match (created_boot, boot) {
        (Some(then), Some(today)) if then.boot_id == today.boot_id => {
            let elapsed = (today.millis - then.millis).max(0) / 1000;
            if created_at + elapsed > expires_at {
                return Err(expired());
            }
            let skew = (now - created_at) - elapsed;
            if skew.abs() > TOLERANCE_SECONDS {
                return Err(Refusal::new(
                    Code::ClockSkew,
                    format!(
                        "The server's wall clock moved {skew} s against its boot clock since this plan was made; \
                         it is not trusted: prepare a new plan (and check the server's time)."
                    ),
                ));
            }
            Ok(())
        }
        _ if now > expires_at => Err(expired()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(millis: i64) -> BootInstant {
        BootInstant { boot_id: "b".into(), millis }
    }

    const T: i64 = 1_800_000_000;

    #[test]
    fn on_one_boot_the_boot_clock_decides_expiry() {
        let then = at(5_000);
        assert!(check_expiry(T, T + 600, Some(&then), T + 599, Some(&at(5_000 + 599_000))).is_ok());
        let code = |now, boot| check_expiry(T, T + 600, Some(&then), now, Some(&at(boot))).unwrap_err().code;
        assert_eq!(code(T + 601, 5_000 + 601_000), Code::PlanExpired);
        // Wall clock stepped back an hour: the boot clock still says expired.
        assert_eq!(code(T + 601 - 3600, 5_000 + 601_000), Code::PlanExpired);
    }

    #[test]
    fn a_wall_clock_step_of_an_hour_is_refused_as_clock_skew() {
        let then = at(5_000);
        let code = |now, boot| check_expiry(T, T + 600, Some(&then), now, Some(&at(boot))).unwrap_err().code;
        assert_eq!(code(T + 60 + 3600, 5_000 + 60_000), Code::ClockSkew, "stepped forward");
        assert_eq!(code(T + 60 - 3600, 5_000 + 60_000), Code::ClockSkew, "stepped back");
        assert!(check_expiry(T, T + 600, Some(&then), T + 60 + TOLERANCE_SECONDS, Some(&at(65_000))).is_ok());
    }

    #[test]
    fn after_a_reboot_or_without_a_boot_time_the_wall_clock_decides() {
        let other = BootInstant { boot_id: "other".into(), millis: 1 };
        assert!(check_expiry(T, T + 600, Some(&at(5_000)), T + 600, Some(&other)).is_ok());
        assert_eq!(
            check_expiry(T, T + 600, Some(&at(5_000)), T + 601, Some(&other)).unwrap_err().code,
            Code::PlanExpired
        );
        assert_eq!(
            check_expiry(T, T + 600, None, T + 601, Some(&at(9))).unwrap_err().code,
            Code::PlanExpired
        );
        assert!(check_expiry(T, T + 600, None, T + 10, None).is_ok());
    }
}
