//! MCP progress for a long `service_execute`: the helper's progress lines
//! (`crate::wire::progress`), read as they arrive, become
//! `notifications/progress` for the client's progress token, and while no
//! step finishes a heartbeat goes out every [`HEARTBEAT`], so a client with
//! a 60 s idle timeout keeps waiting through a long pull. Runs unprivileged
//! on the workstation.
//!
//! Invariants enforced here:
//! - without a progress token nothing is watched and nothing extra is sent;
//! - a notification carries only words of this file (a step of the closed
//!   [`Step`] set, never text from the server), with `progress` counting
//!   up by one per notification, as MCP requires it to increase;
//! - every step the helper printed is sent before the call's result: the
//!   steps still queued when the run ends are sent first;
//! - progress is news only: the reply is read from the whole stdout as
//!   before (`crate::mcp::rpc::interpret`), and a notification that cannot
//!   be sent (the client went away) changes nothing about the call.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::exec::StdoutTap;
use crate::vocab::Step;
use crate::wire::progress::LineReader;

/// The longest a watched call goes without a notification.
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// What a client is told when `step` finishes.
pub fn step_message(step: Step) -> &'static str {
    match step {
        Step::Pulled => "pulled: the images are on the server",
        Step::Network => "network: the app's networks exist",
        Step::AppStarted => "app started: the app container runs",
        Step::GatewayTested => "gateway tested: nginx accepted the configuration",
        Step::HealthCheck => "health check: the app answered through the gateway",
        Step::Switched => "switched: the app's name now routes to the new container",
    }
}

/// The heartbeat's message, naming the last finished step.
pub fn heartbeat_message(last: Option<Step>) -> String {
    match last {
        None => "still working; no step finished yet".to_owned(),
        Some(step) => format!("still working; last step finished: {}", step.as_str().replace('_', " ")),
    }
}

/// Runs `work` with a tap on the helper's stdout, and calls `notify` with
/// (progress count, message) for every step and every heartbeat until
/// `work` ends. `heartbeat` is [`HEARTBEAT`] in the shipped server; tests
/// shorten it.
pub async fn watched<F: Future, N: Future<Output = ()>>(
    work: impl FnOnce(StdoutTap) -> F,
    heartbeat: Duration,
    mut notify: impl FnMut(u32, String) -> N,
) -> F::Output {
    let (sender, mut steps) = tokio::sync::mpsc::unbounded_channel::<Step>();
    let reader = Mutex::new(LineReader::default());
    let tap = StdoutTap(Arc::new(move |chunk: &[u8]| {
        let mut reader = reader.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for step in reader.feed(chunk) {
            // The receiver lives as long as the work: a failed send means
            // the call is over and nobody is told any more.
            let _ = sender.send(step);
        }
    }));
    let work = work(tap);
    tokio::pin!(work);
    let mut count = 0u32;
    let mut last = None;
    let start = tokio::time::Instant::now() + heartbeat;
    let mut ticker = tokio::time::interval_at(start, heartbeat);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            Some(step) = steps.recv() => {
                count += 1;
                last = Some(step);
                told(notify(count, step_message(step).to_owned()), heartbeat).await;
                ticker.reset();
            }
            output = &mut work => {
                // Steps printed just before the reply are still queued.
                while let Ok(step) = steps.try_recv() {
                    count += 1;
                    told(notify(count, step_message(step).to_owned()), heartbeat).await;
                }
                return output;
            }
            _ = ticker.tick() => {
                count += 1;
                told(notify(count, heartbeat_message(last)), heartbeat).await;
            }
        }
    }
}

/// Waits for one notification to be written, at most `limit`: a client
/// that stops reading must not stall the run itself (its timeout, its
/// output limit), which is polled only between notifications.
async fn told(notification: impl Future<Output = ()>, limit: Duration) {
    let _ = tokio::time::timeout(limit, notification).await;
}

#[cfg(test)]
mod tests {
    use strum::VariantArray as _;

    use super::*;

    #[test]
    fn every_step_has_a_message_starting_with_its_name() {
        for step in Step::VARIANTS {
            let name = step.as_str().replace('_', " ");
            assert!(step_message(*step).starts_with(&format!("{name}: ")), "{step:?}");
        }
        assert_eq!(
            heartbeat_message(Some(Step::AppStarted)),
            "still working; last step finished: app started"
        );
    }

    /// The heartbeat is 50 ms here and the slow step 400 ms (the shipped
    /// one is 10 s): at least a few heartbeats, all between the two steps.
    #[tokio::test]
    async fn steps_are_told_in_order_and_heartbeats_fill_a_slow_step() {
        let told = std::cell::RefCell::new(Vec::new());
        let output = watched(
            async |tap: StdoutTap| {
                (tap.0)(b"{\"progress\":\"pulled\"}\n");
                tokio::time::sleep(Duration::from_millis(400)).await;
                (tap.0)(b"{\"progress\":\"network\"}\n{\"status\":\"ok\"}\n");
                7
            },
            Duration::from_millis(50),
            |count, message| {
                told.borrow_mut().push((count, message));
                std::future::ready(())
            },
        )
        .await;
        assert_eq!(output, 7);
        let told = told.into_inner();
        let messages: Vec<&str> = told.iter().map(|(_, m)| m.as_str()).collect();
        let (first, rest) = messages.split_first().unwrap();
        let (last, beats) = rest.split_last().unwrap();
        assert_eq!((*first, *last), (step_message(Step::Pulled), step_message(Step::Network)));
        assert!(beats.len() >= 3, "{messages:?}");
        assert!(beats.iter().all(|m| *m == "still working; last step finished: pulled"), "{messages:?}");
        let counts: Vec<u32> = told.iter().map(|(c, _)| *c).collect();
        assert_eq!(counts, (1..=told.len() as u32).collect::<Vec<_>>(), "progress counts up by one");
    }
}
