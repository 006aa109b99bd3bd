use serde_json::json;

use super::*;
use crate::vocab::PlanId;

fn view(outcomes: &[HostOutcome]) -> RolloutView {
    RolloutView {
        rollout_id: RolloutId::parse(&"a".repeat(32)).unwrap(),
        action: crate::vocab::Action::Update,
        state: RolloutState::Halted,
        manifest_sha256: Some("0".repeat(64)),
        batch_size: 1,
        health_wait_seconds: 5,
        requires_approval: true,
        statement: None,
        hosts: outcomes
            .iter()
            .enumerate()
            .map(|(i, outcome)| HostStep {
                target: format!("web-{}", i + 1),
                plan_id: Some(PlanId::parse(&format!("{i:032x}")).unwrap()),
                batch: i as u32 + 1,
                outcome: *outcome,
                code: (*outcome == HostOutcome::Failed).then(|| Code::HealthCheckFailed.into()),
                message: Some(format!("host {} said so.", i + 1)),
            })
            .collect(),
    }
}

/// What was tried: a failed host then an unconfirmed one in the same
/// batch; a host left `running` by a run that stopped; a plain failure.
#[test]
fn a_halt_that_may_hide_an_action_is_unknown_and_names_the_first_host_that_did_not_change() {
    use HostOutcome::*;
    let mixed = halted(&view(&[Changed, Failed, Unconfirmed, Untouched]));
    assert_eq!(mixed.status, Status::Unknown, "an unconfirmed host is never hidden behind rejected");
    assert_eq!(mixed.code, Some(Code::HealthCheckFailed.into()));
    assert!(mixed.message.contains("halted at web-2 (batch 2): host 2 said so."), "{}", mixed.message);
    for part in
        ["Changed: web-1", "Failed, left as they were: web-2.", "Unconfirmed: web-3", "Not touched: web-4"]
    {
        assert!(mixed.message.contains(part), "{part}: {}", mixed.message);
    }
    let stopped = halted(&view(&[Changed, Running]));
    assert_eq!(stopped.status, Status::Unknown);
    assert!(stopped.message.contains("In flight when the rollout stopped: web-2"), "{}", stopped.message);
    let plain = halted(&view(&[Changed, Failed, Untouched]));
    assert_eq!(plain.status, Status::Rejected);
}

#[test]
fn a_cancelled_or_finished_rollout_says_so_with_its_code() {
    use HostOutcome::*;
    let mut cancelled = view(&[Changed, Untouched]);
    cancelled.state = RolloutState::Cancelled;
    let said = ended(&cancelled);
    assert_eq!((said.status, said.code), (Status::Rejected, Some(Code::RolloutCancelled.into())));
    assert!(said.message.contains("Not touched: web-2"), "{}", said.message);
    let mut done = view(&[Changed, Changed]);
    done.state = RolloutState::Done;
    let said = ended(&done);
    assert_eq!((said.status, said.code), (Status::Ok, None));
    assert!(said.message.contains("ran on web-1, web-2"), "{}", said.message);
    let again = already_started(&cancelled);
    assert_eq!(again.code, Some(Code::RolloutAlreadyStarted.into()));
    assert!(again.message.contains("(it is cancelled)"), "{}", again.message);
}

/// The golden inventory (tests/golden/answers), its one app renamed and in `state`.
fn inventory(app: &str, state: &str) -> Answer {
    let mut body: serde_json::Value =
        serde_json::from_str(include_str!("../../../../../tests/golden/answers/inventory.json")).unwrap();
    body["apps"][0]["app"] = json!(app);
    body["apps"][0]["state"] = json!(state);
    let mut answer = Answer::new(Status::Ok, None, String::new());
    answer.result = Some(crate::mcp::rpc::Returned::of_view(&body));
    answer
}

/// What was tried: the app running, stopped, gone, an inventory that
/// does not read, and a server that does not answer.
#[test]
fn after_the_wait_a_host_is_unhealthy_only_when_it_said_so_and_unconfirmed_when_it_did_not_say() {
    assert_eq!(unhealthy(&inventory("roll", "running"), "roll"), None);
    let stopped = unhealthy(&inventory("roll", "stopped"), "roll").unwrap();
    assert_eq!((stopped.0, stopped.1), (HostOutcome::Unhealthy, Some(Code::UnhealthyAfterWait)));
    assert_eq!(stopped.2, "the app is stopped");
    let gone = unhealthy(&inventory("other", "running"), "roll").unwrap();
    assert_eq!(gone.2, "the app is no longer listed");
    let mut unread = Answer::new(Status::Ok, None, String::new());
    unread.result = Some(crate::mcp::rpc::Returned::of_view(&json!({"apps": "no"})));
    assert_eq!(unhealthy(&unread, "roll").unwrap().0, HostOutcome::Unconfirmed);
    let silent = unhealthy(&Answer::new(Status::ConnectionFailed, None, String::new()), "roll").unwrap();
    assert_eq!(silent.0, HostOutcome::Unconfirmed);
}
