use serde_json::json;

use super::*;

fn manifest(targets: usize, batch_size: u32, approval: bool) -> Manifest {
    Manifest {
        rollout_id: RolloutId::parse(&"a".repeat(32)).unwrap(),
        action: Action::Update,
        parameters: json!({"app": "web", "image": "web2"}).as_object().unwrap().clone(),
        batch_size,
        health_wait_seconds: 5,
        made_at: "2026-12-07T15:00:00Z".into(),
        entries: (0..targets)
            .map(|i| ManifestEntry {
                target: format!("web-{i}"),
                plan_id: PlanId::parse(&format!("{i:032x}")).unwrap(),
                digest: Digest::sha256(&[i as u8]),
                requires_approval: approval,
                expires_at: "2026-12-07T15:30:00Z".into(),
                host: approval.then(|| format!("web-{i} (machine-id {})", "0".repeat(32))),
                statement_sha256: approval.then(|| "5".repeat(64)),
            })
            .collect(),
    }
}

#[test]
fn batches_take_the_targets_in_order_and_the_last_may_be_short() {
    let ranges = |n, size| manifest(n, size, true).batches();
    assert_eq!(ranges(3, 1), [0..1, 1..2, 2..3]);
    assert_eq!(ranges(3, 3), vec![std::ops::Range { start: 0, end: 3 }]);
    assert_eq!(ranges(5, 2), [0..2, 2..4, 4..5]);
    assert_eq!(ranges(2, 9), vec![std::ops::Range { start: 0, end: 2 }]);
    let view = RolloutView::of(&manifest(5, 2, true));
    assert_eq!(view.hosts.iter().map(|h| h.batch).collect::<Vec<_>>(), [1, 1, 2, 2, 3]);
    assert!(view.hosts.iter().all(|h| h.outcome == HostOutcome::Planned));
}

/// The statement binds the manifest: any change to it (an entry, the
/// order, the batch size) changes the statement the operator signed.
#[test]
fn the_statement_names_the_manifest_and_every_host_that_needs_approval() {
    let m = manifest(3, 1, true);
    let text = m.statement().unwrap().render();
    assert!(text.contains(&format!("manifest: {}", m.sha256())), "{text}");
    assert!(text.contains("\nhost 3: web-2 (machine-id"), "{text}");
    let mut reordered = m.clone();
    reordered.entries.swap(0, 1);
    assert_ne!(reordered.statement().unwrap().render(), text);
    let mut wider = m.clone();
    wider.batch_size = 3;
    assert_ne!(wider.statement().unwrap().render(), text);
    assert_eq!(manifest(3, 1, false).statement(), None, "nothing to sign");
    assert!(!RolloutView::of(&manifest(3, 1, false)).requires_approval);
}

/// What was tried: saving twice, running twice, a file that is not ours.
#[test]
fn a_manifest_is_written_once_and_a_rollout_claimed_once() {
    let dir = tempfile::tempdir().unwrap();
    let rollouts = Rollouts::at(dir.path().join("rollouts"));
    let m = manifest(2, 1, true);
    rollouts.save(&m).unwrap();
    assert!(matches!(rollouts.save(&m), Err(RolloutFileError::Write(..))), "never replaced");
    assert_eq!(rollouts.load(&m.rollout_id).unwrap(), Some(m.clone()));
    let other = RolloutId::parse(&"b".repeat(32)).unwrap();
    assert_eq!(rollouts.load(&other).unwrap(), None);
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir.path().join("rollouts")), 0o700);
    assert_eq!(mode(&dir.path().join(format!("rollouts/{}.json", m.rollout_id))), 0o600);

    let mut view = RolloutView::of(&m);
    view.state = RolloutState::Running;
    assert!(matches!(rollouts.claim(&view).unwrap(), Claim::Claimed));
    view.state = RolloutState::Halted;
    rollouts.record(&view).unwrap();
    match rollouts.claim(&view).unwrap() {
        Claim::Started(recorded) => assert_eq!(recorded.state, RolloutState::Halted),
        Claim::Claimed => panic!("claimed twice"),
    }
    std::fs::write(dir.path().join(format!("rollouts/{other}.json")), "{}").unwrap();
    assert!(matches!(rollouts.load(&other), Err(RolloutFileError::Read(..))));
    assert!(matches!(Rollouts::beside(None).load(&other), Err(RolloutFileError::Off)));
}

/// What was tried: servers that disagree on the approval, two targets
/// that answered as one server, a wait that outlives the plans; and one
/// that fits.
#[test]
fn a_manifest_that_could_not_run_as_signed_is_not_recorded() {
    let now = humantime::parse_rfc3339("2026-12-07T15:00:00Z").unwrap();
    assert_eq!(manifest(3, 1, true).unfit(now), None, "5 s x 2 waits end before 15:30");
    let mut mixed = manifest(3, 1, true);
    mixed.entries[2].requires_approval = false;
    let refusal = mixed.unfit(now).unwrap();
    assert_eq!(refusal.code, Code::ApprovalRulesDiffer);
    assert!(
        refusal.message.contains("On web-0, web-1 this update needs an approval and on web-2"),
        "{refusal:?}"
    );
    let mut twins = manifest(3, 1, true);
    twins.entries[2].host = twins.entries[0].host.clone();
    let refusal = twins.unfit(now).unwrap();
    assert_eq!(refusal.code, Code::TargetsShareIdentity);
    assert!(refusal.message.contains("Targets web-0 and web-2"), "{refusal:?}");
    let mut slow = manifest(3, 1, true);
    slow.health_wait_seconds = 1000;
    let refusal = slow.unfit(now).unwrap();
    assert_eq!(refusal.code, Code::NotAllowed);
    assert!(refusal.message.contains("2000 s from now"), "{refusal:?}");
}

/// What was tried: a rollout written 31 days ago and one written now; a
/// file that is not a rollout's.
#[test]
fn rollouts_older_than_the_keep_are_forgotten_at_the_next_save() {
    let dir = tempfile::tempdir().unwrap();
    let rollouts = Rollouts::at(dir.path().join("rollouts"));
    let old = manifest(1, 1, false);
    rollouts.save(&old).unwrap();
    let path = dir.path().join(format!("rollouts/{}.json", old.rollout_id));
    let month = std::time::SystemTime::now() - std::time::Duration::from_secs(31 * 86_400);
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(month).unwrap();
    std::fs::write(dir.path().join("rollouts/notes.txt"), "mine").unwrap();
    let mut new = manifest(1, 1, false);
    new.rollout_id = RolloutId::parse(&"c".repeat(32)).unwrap();
    rollouts.save(&new).unwrap();
    assert_eq!(rollouts.load(&old.rollout_id).unwrap(), None, "forgotten");
    assert_eq!(rollouts.load(&new.rollout_id).unwrap(), Some(new));
    assert!(dir.path().join("rollouts/notes.txt").exists(), "only rollouts' files are removed");
}
