//! The witness file: what answers do to it, and the operator's way out.

use std::os::unix::fs::PermissionsExt as _;

use super::*;
use crate::wire::witness::link;

const NOW: i64 = 2_000_000_000;

/// A host chain of `n` rows (content: seq and time), as (content, hash).
fn chain(n: i64) -> Vec<(String, String)> {
    let mut prev = "0".repeat(64);
    (1..=n)
        .map(|seq| {
            let text = format!(r#"{{"at":{},"seq":{seq}}}"#, NOW - 100 + seq);
            prev = link(&prev, text.as_bytes());
            (text, prev.clone())
        })
        .collect()
}

/// The proof a host of `rows` gives to a workstation that witnessed `after`.
fn proof(rows: &[(String, String)], after: Option<i64>) -> AuditProof {
    let last = rows.len() as i64;
    let from = after.map_or(last, |a| a + 1);
    AuditProof {
        seq: last,
        hash: rows[last as usize - 1].1.clone(),
        anchor_seq: 1,
        after,
        prev: after.is_none().then(|| rows[from as usize - 2].1.clone()),
        rows: (from..=last).map(|seq| rows[seq as usize - 1].0.clone()).collect(),
    }
}

fn ok(proof: &AuditProof) -> Observed<'_> {
    Observed { carries: true, ok: true, proof: Some(proof) }
}

fn witness() -> (tempfile::TempDir, Witness) {
    let dir = tempfile::tempdir().unwrap();
    let witness = Witness::beside(Some(&dir.path().join("volce-lab/audit.jsonl")));
    (dir, witness)
}

#[test]
fn growth_is_witnessed_in_a_private_file() {
    let (dir, witness) = witness();
    let first = chain(3);
    assert_eq!(witness.observe("web-1", &ok(&proof(&first, None)), NOW).unwrap().head.seq, 3);
    let grown = chain(5);
    let entry = witness.observe("web-1", &ok(&proof(&grown, Some(3))), NOW + 5).unwrap();
    assert_eq!(
        (entry.head.seq, entry.head.hash.as_str(), entry.checked_at),
        (5, grown[4].1.as_str(), NOW + 5)
    );
    let path = dir.path().join("volce-lab").join(FILE_NAME);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(path.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(witness.held("web-1"), Some(entry));
}

/// Tried: a rolled-back host; then a later answer that proves from the old
/// head again (it must not clear the mismatch); then the operator's accept
/// with a hash that is not the host's head, and with the right one.
#[test]
fn a_mismatch_stays_until_the_operator_accepts_the_hosts_head() {
    let (_dir, witness) = witness();
    let rows = chain(6);
    witness.observe("web-1", &ok(&proof(&rows, None)), NOW).unwrap();
    let restored = chain(4);
    let entry = witness.observe("web-1", &ok(&proof(&restored, None)), NOW + 1).unwrap();
    let found = entry.mismatch.clone().unwrap();
    assert_eq!(found.mismatch, Mismatch::RolledBack { seq: 6, host_seq: 4 });
    assert!(found.refusal_message("web-1").contains("seq 6"), "{}", found.refusal_message("web-1"));
    assert_eq!(entry.head.seq, 6, "the witnessed head stays the last one proven");
    let again = witness.observe("web-1", &ok(&proof(&chain(7), Some(6))), NOW + 2).unwrap();
    assert!(again.mismatch.is_some(), "only the operator clears it");
    assert_eq!(again.head.seq, 6);
    let host = again.mismatch.unwrap().host.unwrap();
    assert_eq!(host.seq, 7, "the host's latest head is the one to compare");
    let refused = witness.accept("web-1", &"e".repeat(64), NOW + 3).unwrap().unwrap_err();
    assert!(refused.contains(&host.hash), "{refused}");
    assert!(witness.held("web-1").unwrap().mismatch.is_some(), "nothing changed");
    assert_eq!(witness.accept("web-1", &host.hash, NOW + 3).unwrap(), Ok(host.clone()));
    let accepted = witness.held("web-1").unwrap();
    assert_eq!((accepted.head.seq, accepted.mismatch), (7, None));
    let grown = chain(8);
    assert_eq!(witness.observe("web-1", &ok(&proof(&grown, Some(7))), NOW + 4).unwrap().head.seq, 8);
}

#[test]
fn an_ok_answer_without_a_head_after_one_with_it_is_withheld() {
    let (_dir, witness) = witness();
    let rows = chain(2);
    witness.observe("web-1", &ok(&proof(&rows, None)), NOW).unwrap();
    // A refusal before the host's store was open carries none: no mismatch.
    let refused = Observed { carries: true, ok: false, proof: None };
    assert_eq!(witness.observe("web-1", &refused, NOW).unwrap().mismatch, None);
    let bare = Observed { carries: true, ok: true, proof: None };
    let found = witness.observe("web-1", &bare, NOW).unwrap().mismatch.unwrap();
    assert_eq!(found.mismatch, Mismatch::Withheld { seq: 2 });
    assert!(witness.accept("web-1", &rows[1].1, NOW).unwrap().is_err(), "no head was named");
    assert!(witness.forget("web-1").unwrap());
    assert_eq!(witness.held("web-1"), None);
    // A target never witnessed on a 0.1.0 server stays not witnessed.
    let old = Observed { carries: false, ok: true, proof: None };
    assert_eq!(witness.observe("web-2", &old, NOW), None);
}

#[test]
fn an_unreadable_file_is_never_overwritten() {
    let (dir, witness) = witness();
    let path = dir.path().join("volce-lab").join(FILE_NAME);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "not json").unwrap();
    assert_eq!(witness.observe("web-1", &ok(&proof(&chain(2), None)), NOW), None);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "not json");
    assert!(matches!(witness.entries(), Err(WitnessError::Read(..))));
}

#[test]
fn the_listing_names_each_target_its_head_age_and_mismatch() {
    let (_dir, witness) = witness();
    let rows = chain(6);
    witness.observe("web-1", &ok(&proof(&rows, None)), NOW).unwrap();
    witness.observe("web-1", &ok(&proof(&chain(4), None)), NOW + 30).unwrap();
    let (text, exit) = resolve_with(&witness, &["web-1", "web-2"], &Resolve::Show, NOW + 120).unwrap();
    assert_eq!(exit, crate::exit::Exit::Ok);
    assert!(text.contains(&format!("web-1: seq 6 hash {}", rows[5].1)), "{text}");
    assert!(text.contains("checked 2m ago"), "{text}");
    assert!(text.contains("MISMATCH at seq 6 (1m ago)"), "{text}");
    assert!(text.contains("--accept web-1 --head "), "{text}");
    assert!(
        text.contains("reinstalled from scratch has a new chain: volce-lab audit witness --forget web-1"),
        "{text}"
    );
    assert!(text.contains("web-2: not witnessed"), "{text}");
    let unknown = Resolve::Forget { target: "db-9".into() };
    assert_eq!(resolve_with(&witness, &["web-1"], &unknown, NOW).unwrap().1, crate::exit::Exit::Usage);
    let short = Resolve::Accept { target: "web-1".into(), hash: "abc".into() };
    assert_eq!(resolve_with(&witness, &["web-1"], &short, NOW).unwrap().1, crate::exit::Exit::Usage);
}

#[test]
fn ages_are_one_short_word() {
    assert_eq!([age(-3), age(42), age(300), age(7_200), age(3 * 86_400)], ["0s", "42s", "5m", "2h", "3d"]);
}
