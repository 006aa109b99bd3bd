//! Issue 45: the audit proof a reply carries (`Tx::audit_proof`), checked
//! by the workstation's own code (`crate::wire::witness::check`) against
//! real chains in temporary SQLite files.

use super::*;
use crate::wire::witness::{
    self, AuditProof, MAX_PROOF_BYTES, MAX_PROOF_ROWS, Mismatch, RETENTION_SECS, Witnessed,
};

fn proof(store: &mut Store, witnessed: Option<&Witnessed>) -> AuditProof {
    store.read(|tx| tx.audit_proof(witnessed)).unwrap().expect("a trail with rows")
}

/// What a workstation holds after taking `store`'s head on its word.
fn first(store: &mut Store) -> witness::Head {
    witness::check(None, &proof(store, None), 2_000).unwrap().unwrap()
}

fn sent(head: &witness::Head) -> Witnessed {
    Witnessed { seq: head.seq, hash: head.hash.clone() }
}

#[test]
fn the_witness_retention_is_the_trails() {
    assert_eq!(RETENTION_SECS, super::super::AUDIT_RETENTION_DAYS * 86_400);
}

/// The host's own proof, read back by the workstation's check: the head
/// taken first, then growth proven row by row from the witnessed hash.
#[test]
fn a_growing_chain_proves_itself_from_the_witnessed_head() {
    let (_dir, mut store) = chained(3);
    let held = first(&mut store);
    assert_eq!((held.seq, held.hash.as_str()), (3, head_hash(&mut store).as_str()));
    store
        .write(|tx| {
            for k in 4..=6 {
                tx.insert_plan(&plan(k, 1000), &row(Event::Prepared, "agent"))?;
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let grown = proof(&mut store, Some(&sent(&held)));
    assert_eq!((grown.after, grown.rows.len()), (Some(3), 3));
    let next = witness::check(Some(&held), &grown, 2_000).unwrap().unwrap();
    assert_eq!((next.seq, next.hash), (6, head_hash(&mut store)));
}

/// Tried: a witnessed hash the host does not hold at that seq (its chain
/// was rewritten), and a seq beyond its head (it was rolled back): neither
/// is proven from, and the workstation names each.
#[test]
fn a_witnessed_row_the_host_does_not_hold_is_not_proven_from() {
    let (_dir, mut store) = chained(5);
    let mut held = first(&mut store);
    held.hash = "e".repeat(64);
    let rewritten = proof(&mut store, Some(&sent(&held)));
    assert_eq!((rewritten.after, rewritten.rows.len()), (None, 1));
    assert_eq!(witness::check(Some(&held), &rewritten, 2_000), Err(Mismatch::Rewritten { seq: 5 }));
    let ahead = witness::Head::new(9, "d".repeat(64), 1_009);
    let restored = proof(&mut store, Some(&sent(&ahead)));
    assert_eq!(restored.after, None);
    assert_eq!(
        witness::check(Some(&ahead), &restored, 2_000),
        Err(Mismatch::RolledBack { seq: 9, host_seq: 5 })
    );
}

/// A host far ahead gives at most MAX_PROOF_ROWS rows (and MAX_PROOF_BYTES);
/// the workstation is witnessed in steps, each proven.
#[test]
fn a_long_way_ahead_is_proven_in_bounded_steps() {
    let (_dir, mut store) = chained(1);
    let mut held = first(&mut store);
    let rows = MAX_PROOF_ROWS as u32 + 40;
    store
        .write(|tx| {
            for k in 2..=rows + 1 {
                tx.insert_plan(&plan(k, 1000), &row(Event::Prepared, "agent"))?;
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
    let mut steps = 0;
    while held.seq < i64::from(rows) + 1 {
        let step = proof(&mut store, Some(&sent(&held)));
        assert!(step.rows.len() as i64 <= MAX_PROOF_ROWS);
        assert!(step.rows.iter().map(String::len).sum::<usize>() <= MAX_PROOF_BYTES);
        held = witness::check(Some(&held), &step, 2_000).unwrap().unwrap();
        steps += 1;
    }
    assert_eq!((steps, held.claimed, held.hash), (2, None, head_hash(&mut store)));
}
