//! The witness check on synthetic chains: rows whose content is only
//! their seq and time, hashed as the host hashes its rows.

use super::*;

const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
const NOW: i64 = 2_000_000_000;
const DAY: i64 = 86_400;

/// Rows 1..=n, each an hour after the one before, the last at `last_at`:
/// (content, hash) by seq (index 0 is seq 1).
fn chain(n: i64, last_at: i64) -> Vec<(String, String)> {
    let mut prev = GENESIS.to_owned();
    (1..=n)
        .map(|seq| {
            let text = format!(r#"{{"at":{},"seq":{seq}}}"#, last_at - (n - seq) * 3600);
            prev = link(&prev, text.as_bytes());
            (text, prev.clone())
        })
        .collect()
}

/// Seq and hash, what a check's new head is compared by.
fn key(checked: Result<Option<Head>, Mismatch>) -> Result<Option<(i64, String)>, Mismatch> {
    checked.map(|head| head.map(|head| (head.seq, head.hash)))
}

fn at(rows: &[(String, String)], seq: i64) -> Result<Option<(i64, String)>, Mismatch> {
    Ok(Some((seq, rows[seq as usize - 1].1.clone())))
}

fn head(rows: &[(String, String)], seq: i64) -> Head {
    let (text, hash) = &rows[seq as usize - 1];
    let at = serde_json::from_str::<serde_json::Value>(text).unwrap()["at"].as_i64().unwrap();
    Head::new(seq, hash.clone(), at)
}

/// The proof a host of `rows` gives: rows `from..=to` after `after`.
fn proof(rows: &[(String, String)], after: Option<i64>, from: i64, to: i64) -> AuditProof {
    let last = rows.len() as i64;
    AuditProof {
        seq: last,
        hash: rows[last as usize - 1].1.clone(),
        anchor_seq: 1,
        after,
        prev: after
            .is_none()
            .then(|| if from == 1 { GENESIS.to_owned() } else { rows[from as usize - 2].1.clone() }),
        rows: (from..=to).map(|seq| rows[seq as usize - 1].0.clone()).collect(),
    }
}

#[test]
fn growth_from_the_witnessed_head_is_accepted() {
    let rows = chain(6, NOW);
    let held = head(&rows, 3);
    assert_eq!(key(check(Some(&held), &proof(&rows, Some(3), 4, 6), NOW)), at(&rows, 6));
    // Nothing new: the head is the witnessed one.
    let same = chain(3, NOW);
    let unchanged = AuditProof { rows: vec![], ..proof(&same, Some(3), 4, 3) };
    assert_eq!(key(check(Some(&head(&same, 3)), &unchanged, NOW)), at(&same, 3));
}

#[test]
fn a_first_answer_is_taken_on_the_hosts_word() {
    let rows = chain(6, NOW);
    assert_eq!(key(check(None, &proof(&rows, None, 6, 6), NOW)), at(&rows, 6));
}

/// Tried: a host whose rows up to the witnessed one were rewritten (it
/// cannot chain from the witnessed hash), and one that claims it does and
/// sends its rewritten rows after it.
#[test]
fn a_rewritten_chain_is_named_at_the_witnessed_seq() {
    let rows = chain(6, NOW);
    let held = head(&rows, 3);
    let mut other = chain(6, NOW);
    other[1].0 = other[1].0.replace("\"seq\":2", "\"seq\":2,\"x\":1");
    let mut prev = other[0].1.clone();
    for row in other.iter_mut().skip(1) {
        row.1 = link(&prev, row.0.as_bytes());
        prev = row.1.clone();
    }
    assert_eq!(check(Some(&held), &proof(&other, None, 6, 6), NOW), Err(Mismatch::Rewritten { seq: 3 }));
    assert_eq!(check(Some(&held), &proof(&other, Some(3), 4, 6), NOW), Err(Mismatch::Rewritten { seq: 3 }));
}

#[test]
fn a_head_behind_the_witnessed_one_is_a_roll_back() {
    let rows = chain(6, NOW);
    let restored = chain(4, NOW);
    let found = check(Some(&head(&rows, 6)), &proof(&restored, None, 4, 4), NOW);
    assert_eq!(found, Err(Mismatch::RolledBack { seq: 6, host_seq: 4 }));
    assert!(found.unwrap_err().describe().contains("seq 6"));
}

/// Tried: the witnessed row (10 days old) is no longer kept; then the same
/// with a row older than the retention, which retention may have dropped.
#[test]
fn a_front_cut_past_a_young_witness_is_refused_and_past_an_old_one_re_anchored() {
    let rows = chain(8, NOW);
    let cut = AuditProof { anchor_seq: 6, ..proof(&rows, None, 8, 8) };
    let mut held = head(&rows, 3);
    held.at = NOW - 10 * DAY;
    assert_eq!(check(Some(&held), &cut, NOW), Err(Mismatch::FrontCut { seq: 3, anchor_seq: 6 }));
    held.at = NOW - RETENTION_SECS - 1;
    assert_eq!(key(check(Some(&held), &cut, NOW)), at(&rows, 8));
}

/// Rows cut from the start up to a row witnessed earlier (a mark), while
/// the newest witnessed row is kept: still a cut beyond the retention.
#[test]
fn a_front_cut_before_the_witnessed_head_is_named_by_an_earlier_mark() {
    let rows = chain(9, NOW);
    let mut held = head(&rows, 3);
    held.at = NOW - 30 * DAY;
    let later = AuditProof { ..proof(&rows, Some(3), 4, 6) };
    let later = AuditProof { seq: 6, hash: rows[5].1.clone(), ..later };
    let mut held = check(Some(&held), &later, NOW).unwrap().unwrap();
    assert_eq!(held.marks, [Mark { seq: 3, at: NOW - 30 * DAY }]);
    held.at = NOW - DAY;
    let cut = AuditProof { anchor_seq: 5, ..proof(&rows, Some(6), 7, 9) };
    assert_eq!(check(Some(&held), &cut, NOW), Err(Mismatch::FrontCut { seq: 3, anchor_seq: 5 }));
    // Once that row is older than the retention, the same start is fine.
    assert_eq!(key(check(Some(&held), &cut, NOW + RETENTION_SECS - 29 * DAY)), at(&rows, 9));
}

/// The host pruned exactly up to the witnessed row: the kept chain starts
/// from its hash, so the rows after it still prove the extension; but a
/// row younger than the retention is gone, and that is named.
#[test]
fn pruning_up_to_the_witnessed_row_proves_and_is_named_when_young() {
    let rows = chain(8, NOW);
    let pruned = AuditProof { anchor_seq: 5, ..proof(&rows, Some(4), 5, 8) };
    let mut held = head(&rows, 4);
    assert_eq!(check(Some(&held), &pruned, NOW), Err(Mismatch::FrontCut { seq: 4, anchor_seq: 5 }));
    held.at = NOW - RETENTION_SECS - 10;
    assert_eq!(key(check(Some(&held), &pruned, NOW)), at(&rows, 8));
}

/// A host far ahead is witnessed in steps; the head it named is checked
/// when a later proof passes it.
#[test]
fn a_bounded_proof_keeps_the_named_head_and_checks_it_later() {
    let rows = chain(9, NOW);
    let step = AuditProof { seq: 9, hash: rows[8].1.clone(), ..proof(&rows, Some(3), 4, 5) };
    let after_step = check(Some(&head(&rows, 3)), &step, NOW).unwrap().unwrap();
    assert_eq!((after_step.seq, after_step.claimed.as_ref().map(|c| c.seq)), (5, Some(9)));
    assert_eq!(key(check(Some(&after_step), &proof(&rows, Some(5), 6, 9), NOW)), at(&rows, 9));
    let mut lied = after_step.clone();
    lied.claimed = Some(Witnessed { seq: 7, hash: "f".repeat(64) });
    assert_eq!(check(Some(&lied), &proof(&rows, Some(5), 6, 9), NOW), Err(Mismatch::Rewritten { seq: 7 }));
}

/// Tried: a row left out of the middle, rows after another seq than the
/// one sent, a head that is not the last row's hash, and no rows at all
/// for a head that moved.
#[test]
fn a_proof_that_does_not_add_up_is_a_rewrite() {
    let rows = chain(6, NOW);
    let held = head(&rows, 3);
    let mut gap = proof(&rows, Some(3), 4, 6);
    gap.rows.remove(1);
    assert_eq!(check(Some(&held), &gap, NOW), Err(Mismatch::Rewritten { seq: 3 }));
    assert_eq!(check(Some(&held), &proof(&rows, Some(2), 3, 6), NOW), Err(Mismatch::Rewritten { seq: 3 }));
    let wrong_head = AuditProof { hash: "e".repeat(64), ..proof(&rows, Some(3), 4, 6) };
    assert_eq!(check(Some(&held), &wrong_head, NOW), Err(Mismatch::Rewritten { seq: 3 }));
    let empty = AuditProof { rows: vec![], ..proof(&rows, Some(3), 4, 6) };
    assert_eq!(check(Some(&held), &empty, NOW), Err(Mismatch::Rewritten { seq: 3 }));
    let garbage = AuditProof { rows: vec!["not json".into()], ..proof(&rows, Some(3), 4, 4) };
    assert_eq!(check(Some(&held), &garbage, NOW), Err(Mismatch::Rewritten { seq: 3 }));
}

#[test]
fn the_proof_travels_beside_the_reply_and_old_readers_ignore_it() {
    let rows = chain(2, NOW);
    let audit = proof(&rows, None, 2, 2);
    let reply = crate::wire::Reply::Ok {
        operation: crate::wire::Operation::Inventory,
        result: serde_json::json!({}),
    };
    let line = crate::wire::Answered { reply: reply.clone(), audit: Some(audit.clone()) }.to_line();
    assert_eq!(carried(line.as_bytes()), Some(audit));
    assert_eq!(crate::wire::Reply::parse(line.as_bytes()).unwrap(), reply);
    assert_eq!(carried(reply.to_line().as_bytes()), None);
    assert_eq!(crate::wire::Answered::from(reply.clone()).to_line(), reply.to_line());
}

/// Tried: a witness of seq 0, a short hash, upper-case hex, and an extra
/// field; then a well-formed one, which a protocol-1 helper refuses.
#[test]
fn a_malformed_witness_is_refused_and_changes_nothing() {
    let bytes = |witness: &str| format!(r#"{{"operation":"inventory","protocol":2,"witness":{witness}}}"#);
    let good = format!(r#"{{"seq":3,"hash":"{}"}}"#, "a".repeat(64));
    for bad in [
        format!(r#"{{"seq":0,"hash":"{}"}}"#, "a".repeat(64)),
        r#"{"seq":3,"hash":"abc"}"#.to_owned(),
        format!(r#"{{"seq":3,"hash":"{}"}}"#, "A".repeat(64)),
        format!(r#"{{"seq":3,"hash":"{}","x":1}}"#, "a".repeat(64)),
    ] {
        let refusal = crate::wire::receive(bytes(&bad).as_bytes()).unwrap_err();
        assert_eq!(refusal.code, crate::vocab::Code::InvalidRequest, "{bad}");
    }
    let received = crate::wire::receive(bytes(&good).as_bytes()).unwrap();
    assert_eq!(received.witness, Some(Witnessed { seq: 3, hash: "a".repeat(64) }));
    let old = crate::wire::versions::Helper { protocol: 1, oldest_client: 1 };
    let without_protocol = format!(r#"{{"operation":"inventory","witness":{good}}}"#);
    assert_eq!(
        crate::wire::receive_as(without_protocol.as_bytes(), old).unwrap_err().code,
        crate::vocab::Code::InvalidRequest
    );
}

/// A workstation sends the witness only to a server whose protocol reads it.
#[test]
fn the_witness_goes_only_to_a_server_of_protocol_2() {
    use crate::wire::versions::{HelperVersion, ServerVersion};
    let witness = Witnessed { seq: 3, hash: "a".repeat(64) };
    let request = crate::wire::Request::Inventory {};
    let old = request.to_bytes_witnessed(None, &ServerVersion::Before020, Some(&witness));
    assert_eq!(old, request.to_bytes());
    let new = ServerVersion::Known(HelperVersion { version: "0.2.0".into(), protocol: 2 });
    let sent: serde_json::Value =
        serde_json::from_slice(&request.to_bytes_witnessed(None, &new, Some(&witness))).unwrap();
    assert_eq!(sent["witness"]["seq"], 3);
}
