//! Audit chain benchmark (shipped; `cargo bench --bench audit_chain`).
//!
//! `audit verify` walks the whole chain and recomputes every hash, so its
//! cost is linear in the rows. This fills a temporary store with 1,000,000
//! chained rows (through the raw connection, hashed with
//! `store::chain_link` exactly as the helper hashes its own) and times one
//! full verification (best of 3) and `audit head`. Target: 1,000,000 rows
//! verify in under 10 s on the 2-core reference machine. Under
//! `cargo test --all-targets` (no `--bench`) it runs 10,000 rows instead.

use std::time::{Duration, Instant};

use rusqlite::params;
use volce_lab::store::{ChainContent, GENESIS, Store, chain_link};

const PLANS: i64 = 1_000;

fn fill(store: &mut Store, rows: i64) {
    let conn = store.dangerous_connection_for_tests();
    let tx = conn.transaction().unwrap();
    {
        let mut plan = tx
            .prepare(
                "INSERT INTO plans (id, action, body, digest, requires_approval, requester, created_at, expires_at)
                 VALUES (?1, 'stop', '{}', ?2, 1, 'agent', 0, 600)",
            )
            .unwrap();
        for p in 0..PLANS {
            plan.execute(params![format!("{p:032x}"), "d".repeat(64)]).unwrap();
        }
        let mut audit = tx
            .prepare(
                "INSERT INTO audit (seq, at, event, plan_id, action, outcome, exit_code, duration_ms, actor, prev_hash, hash)
                 VALUES (?1, ?2, ?3, ?4, 'stop', 'ok', ?5, ?6, 'agent', ?7, ?8)",
            )
            .unwrap();
        let mut prev = GENESIS.to_owned();
        for seq in 1..=rows {
            let id = format!("{:032x}", seq % PLANS);
            let event = ["prepared", "approved", "claimed", "completed"][(seq % 4) as usize];
            let (exit_code, duration_ms) =
                if seq % 4 == 3 { (Some(0), Some(seq % 5000)) } else { (None, None) };
            let content = ChainContent {
                seq,
                at: 1_700_000_000 + seq,
                event,
                plan_id: Some(&id),
                action: Some("stop"),
                outcome: "ok",
                exit_code,
                duration_ms,
                actor: "agent",
                ..ChainContent::default()
            };
            let hash = chain_link(&prev, &content);
            audit.execute(params![seq, content.at, event, id, exit_code, duration_ms, prev, hash]).unwrap();
            prev = hash;
        }
    }
    tx.commit().unwrap();
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn main() {
    // `cargo test --all-targets` runs this with --bench absent (a debug
    // build): keep it quick then.
    let rows: i64 = if std::env::args().any(|a| a == "--bench") { 1_000_000 } else { 10_000 };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let mut store = Store::open(&path).unwrap();
    let started = Instant::now();
    fill(&mut store, rows);
    let filled = started.elapsed();
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0)
        + std::fs::metadata(dir.path().join("state.db-wal")).map(|m| m.len()).unwrap_or(0);
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let started = Instant::now();
        let checked = store.read(|tx| tx.verify_audit(None)).unwrap();
        best = best.min(started.elapsed());
        assert!(checked.intact() && checked.rows == rows as u64, "{checked:?}");
    }
    let started = Instant::now();
    let head = store.read(|tx| tx.audit_head()).unwrap();
    let head_took = started.elapsed();
    assert_eq!(head.rows, rows as u64);
    println!("audit chain: {rows} rows (filled in {}, database {:.0} MB)", secs(filled), size as f64 / 1e6);
    println!(
        "  audit verify (best of 3): {} ({:.2} us/row)",
        secs(best),
        best.as_secs_f64() * 1e6 / rows as f64
    );
    println!("  audit head: {:.3} ms", head_took.as_secs_f64() * 1000.0);
}
