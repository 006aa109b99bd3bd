//! The operator's view of the audit trail: `audit verify [--from HASH]`,
//! `audit head` and `audit export [--since RFC3339] [--json]`. Runs as root
//! on the server's terminal (the rpc request enum has no variant that
//! reaches any of this).
//!
//! Invariants enforced here:
//! - input (a kept head, a time) is checked before the store is opened, so
//!   bad input changes nothing;
//! - everything is read in one read transaction: the chain that is walked
//!   is one consistent snapshot, and nothing is written;
//! - the trail holds metadata only (categories, numbers, user names, plan
//!   ids): export prints exactly the stored columns, each text escaped for
//!   the terminal, never plan parameters.

use crate::control::Clock as _;
use crate::store::{Break, Store, Verification};
use crate::text::rfc3339_seconds;
use crate::vocab::{Code, Refusal};

use super::audit_rows::{Table, json_line};
use super::paths;
use super::{Caller, HostPaths};
use crate::store::AuditOperation;

/// The store, opened on checked paths (migrated like every other command).
fn open(paths: &HostPaths) -> Result<Store, Refusal> {
    paths::prepare_state(paths)?;
    let alive = |claim: &crate::store::Claim| super::Liveness::alive(&super::ProcLiveness, claim);
    Store::open_settled(&paths.database(), &alive).map_err(|e| e.refusal())
}

/// A kept head as the operator typed it: 64 lowercase hex characters.
pub fn parse_head(text: &str) -> Result<String, Refusal> {
    if crate::text::is_lower_hex(text, 64) {
        Ok(text.to_owned())
    } else {
        Err(Refusal::new(
            Code::InvalidHash,
            "--from takes a head hash as `volce-lab-host audit head` printed it: 64 lowercase hex characters; \
             nothing was checked.",
        ))
    }
}

/// An RFC 3339 UTC time (`2026-12-01T10:00:00Z`) as unix seconds.
pub fn parse_since(text: &str) -> Result<i64, Refusal> {
    parse_time(text, "--since takes an RFC 3339 UTC time such as 2026-12-01T10:00:00Z; nothing was printed.")
}

fn parse_time(text: &str, refusal: &'static str) -> Result<i64, Refusal> {
    let refused = || Refusal::new(Code::InvalidTime, refusal);
    let at = humantime::parse_rfc3339(text).map_err(|_| refused())?;
    let secs = at.duration_since(std::time::UNIX_EPOCH).map_err(|_| refused())?.as_secs();
    i64::try_from(secs).map_err(|_| refused())
}

/// `audit prune --before RFC3339`: drops the rows older than `before`
/// (export them first), leaving the chain verifiable from the first kept
/// row, and records the pruning in a row of its own (by `operator`, at
/// `now`). Refuses a time in the future: that would drop every row.
pub fn prune(paths: &HostPaths, before: &str, operator: &Caller, now: i64) -> Result<String, Refusal> {
    let before = parse_time(
        before,
        "--before takes an RFC 3339 UTC time such as 2026-09-01T00:00:00Z; nothing was dropped.",
    )?;
    if before > now {
        return Err(Refusal::new(
            Code::InvalidTime,
            "--before is in the future; export the rows, then prune before a time that has passed. Nothing was dropped.",
        ));
    }
    let mut store = open(paths)?;
    store.begin_request(operator.request(AuditOperation::AuditPrune));
    let dropped = store.write(|tx| tx.prune_audit(before, now, &operator.name)).map_err(|e| e.refusal())?;
    Ok(format!(
        "Dropped {dropped} audit rows older than {}; the kept rows still verify from their new start \
         (volce-lab-host audit verify). A head kept from before still names its row only if that row was kept.\n",
        rfc3339_seconds(before)
    ))
}

/// `audit head`: the head hash on its own line (for scripts: `| head -n 1`),
/// then the row count and the last row.
///
/// While a migration waits for a plan the previous version executes
/// (`upgrade_waiting`), the head is read without migrating, on a read-only
/// connection (issue 46: the operator's reads answer then too); the note
/// after it says so.
pub fn head(paths: &HostPaths) -> Result<String, Refusal> {
    let (head, note) = match open(paths) {
        Ok(mut store) => (store.read(|tx| tx.audit_head()).map_err(|e| e.refusal())?, ""),
        Err(refusal) if refusal.code == Code::UpgradeWaiting => {
            let head = crate::store::read_head(&paths.database()).map_err(|_| refusal.clone())?;
            let note = "(Read without migrating: the state database waits for a plan the previous version \
                        executes, upgrade_waiting.)\n";
            (head.ok_or(refusal)?, note)
        }
        Err(refusal) => return Err(refusal),
    };
    let Some(hash) = head.hash() else {
        return Err(Refusal::new(
            Code::AuditChainBroken,
            "The last audit row has no hash; run volce-lab-host audit verify.",
        ));
    };
    let last = match &head.last {
        Some((seq, at, _)) => format!("the last is seq {seq} at {}", rfc3339_seconds(*at)),
        None => "the chain starts from the genesis value".to_owned(),
    };
    Ok(format!(
        "{hash}\n{} rows; {last}. The kept rows start at seq {} from anchor {}{}. Keep this hash (and \
         the anchor) off the host to check the chain against later: volce-lab-host audit verify --from HASH.\n",
        head.rows,
        head.anchor_seq,
        head.anchor,
        if head.anchor_seq == 1 {
            " (the genesis value: nothing was ever pruned)"
        } else {
            " (set by audit prune)"
        },
    ) + note)
}

/// `audit verify [--from HASH]`: the report, and whether the chain is intact
/// (and holds `from`).
pub fn verify(paths: &HostPaths, from: Option<&str>) -> Result<(String, bool), Refusal> {
    let from = from.map(parse_head).transpose()?;
    let mut store = open(paths)?;
    let checked = store.read(|tx| tx.verify_audit(from.as_deref())).map_err(|e| e.refusal())?;
    Ok((render_verification(&checked, from.as_deref()), checked.intact()))
}

fn render_verification(checked: &Verification, from: Option<&str>) -> String {
    let row = |seq: &i64, at: &i64| format!("seq {seq} ({})", rfc3339_seconds(*at));
    if let Some(broken) = &checked.broken {
        let what = match broken {
            Break::Unhashed { seq, at } => format!("row {} has no valid hash", row(seq, at)),
            Break::Altered { seq, at } => {
                format!("row {} was edited or moved: its content no longer matches its hash", row(seq, at))
            }
            Break::Deleted { seq, at, missing_from, missing_to } => format!(
                "rows seq {missing_from} to {missing_to} were deleted: row {} does not chain from the row before it",
                row(seq, at)
            ),
            Break::Unlinked { seq, at, after } => format!(
                "row {} was inserted, or rows were reordered: it does not chain from seq {after}",
                row(seq, at)
            ),
            Break::Unaccounted { seq, at, missing_from, missing_to } => format!(
                "rows seq {missing_from} to {missing_to} are missing and no audit prune row on the chain \
                 accounts for them: they were deleted from the start and the anchor (audit_anchor) set to \
                 hide it (the kept rows start at {})",
                row(seq, at)
            ),
            Break::NotFromGenesis { seq, at } => format!(
                "the rows before {} were deleted: the first row does not chain from the genesis value \
                 (or, after audit prune, from where the kept rows start)",
                row(seq, at)
            ),
        };
        return format!(
            "audit chain BROKEN: {what}. Rows after it were not checked ({} rows in all).\n",
            checked.rows
        );
    }
    let end = match &checked.head.last {
        Some((seq, at, Some(hash))) => format!("head {hash} at {}", row(seq, at)),
        _ => "no rows yet".to_owned(),
    };
    let start = match checked.head.anchor_seq {
        1 => "from the genesis value".to_owned(),
        seq => {
            format!("from seq {seq}, anchor {}, which the last audit prune row names", checked.head.anchor)
        }
    };
    let mut text =
        format!("audit chain intact: {} rows, {end}; the kept rows start {start}.\n", checked.rows);
    match (from, checked.from_found) {
        (Some(kept), Some(true)) => text.push_str(&format!("The head you kept, {kept}, is on the chain.\n")),
        (Some(kept), _) => text.push_str(&format!(
            "But the head you kept, {kept}, is NOT on the chain: rows were cut from its end, or the chain \
             was rewritten after that head. Compare with an export you kept.\n"
        )),
        (None, _) => {}
    }
    text
}

/// `audit export [--since RFC3339] [--json]`: every row at or after `since`,
/// oldest first, as an aligned table or as JSON lines (`audit_rows`: the
/// same fields either way).
pub fn export(paths: &HostPaths, since: Option<&str>, json: bool) -> Result<String, Refusal> {
    let since = since.map(parse_since).transpose()?.unwrap_or(i64::MIN);
    let mut store = open(paths)?;
    // Counts of folded refusals whose window has closed go onto the chain
    // first, so the export holds them (`store::fold`).
    let now = super::clock::SystemClock.now();
    // Below the free-space floor the counts stay in their windows: the
    // export is what the operator needs before freeing space.
    match store.write(|tx| tx.flush_folds(now)) {
        Err(error) if !crate::store::space::is_below_floor(&error) => return Err(error.refusal()),
        _ => {}
    }
    let mut out = String::new();
    let mut table = Table::default();
    store
        .read(|tx| {
            tx.audit_since(
                since,
                |entry| if json { out.push_str(&json_line(&entry)) } else { table.push(&entry) },
            )
        })
        .map_err(|e| e.refusal())?;
    Ok(if json { out } else { table.render() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ChainedEntry;

    #[test]
    fn a_kept_head_must_be_64_lowercase_hex() {
        assert!(parse_head(&"a".repeat(64)).is_ok());
        for bad in
            ["", "abc", &"A".repeat(64), &"a".repeat(63), &"a".repeat(65), &format!("{}g", "a".repeat(63))]
        {
            assert_eq!(parse_head(bad).unwrap_err().code, Code::InvalidHash, "{bad:?}");
        }
    }

    #[test]
    fn since_is_an_rfc3339_utc_time() {
        assert_eq!(parse_since("1970-01-01T00:16:40Z").unwrap(), 1000);
        for bad in ["", "yesterday", "1000", "2026-12-01", "2026-13-01T00:00:00Z"] {
            assert_eq!(parse_since(bad).unwrap_err().code, Code::InvalidTime, "{bad:?}");
        }
    }

    #[test]
    fn an_rpc_request_cannot_name_an_audit_command() {
        for operation in ["audit", "audit_verify", "verify", "head", "audit_head", "export", "audit_export"] {
            let request = format!("{{\"operation\":\"{operation}\"}}");
            let refused = crate::wire::parse_request(request.as_bytes()).unwrap_err();
            assert_eq!(refused.code, Code::InvalidRequest, "{operation}");
        }
    }

    #[test]
    fn an_exported_row_is_escaped_and_holds_only_the_stored_columns() {
        let entry = ChainedEntry {
            seq: 3,
            at: 1000,
            event: "approved".into(),
            plan_id: Some("0".repeat(32)),
            action: Some("stop".into()),
            outcome: "ok".into(),
            exit_code: None,
            duration_ms: Some(5),
            actor: "al\u{1b}[31mice\u{202e}".into(),
            prev_hash: Some("a".repeat(64)),
            hash: Some("b".repeat(64)),
            ..ChainedEntry::default()
        };
        let line = json_line(&entry);
        assert!(!line.contains('\u{1b}') && !line.contains('\u{202e}'), "{line}");
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["actor"], "al\u{1b}[31mice\u{202e}", "escaping keeps the value");
        assert_eq!(value["time"], "1970-01-01T00:16:40Z");
        let keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 29, "{keys:?}");
        let mut table = Table::default();
        table.push(&entry);
        let row = table.render();
        assert!(row.contains("al\\u{001b}[31mice\\u{202e}"), "{row}");
    }

    /// Paths under a fresh temporary directory, owned by whoever runs the test.
    fn temp_paths() -> (tempfile::TempDir, HostPaths) {
        let dir = tempfile::tempdir().unwrap();
        let paths = HostPaths {
            policy: dir.path().join("policy.json"),
            state_dir: dir.path().join("state"),
            owner_uid: nix::unistd::getuid().as_raw(),
        };
        (dir, paths)
    }

    fn fill(paths: &HostPaths, n: u32) {
        let mut store = open(paths).unwrap();
        store
            .write(|tx| {
                for k in 1..=n {
                    let id = crate::vocab::PlanId::parse(&format!("{k:032x}")).unwrap();
                    let plan = crate::actions::plan::test_plan(id, 1000);
                    let row = crate::store::AuditRow {
                        at: 1000 + i64::from(k),
                        event: crate::store::Event::Prepared,
                        outcome: crate::store::AuditOutcome::Ok,
                        exit_code: None,
                        duration_ms: Some(3),
                        actor: "agent".into(),
                        process: None,
                    };
                    tx.insert_plan(&plan, &row)?;
                }
                Ok::<_, crate::store::StoreError>(())
            })
            .unwrap();
    }

    #[test]
    fn bad_input_is_refused_before_anything_is_opened() {
        let (_dir, paths) = temp_paths();
        assert_eq!(verify(&paths, Some("nope")).unwrap_err().code, Code::InvalidHash);
        assert_eq!(export(&paths, Some("yesterday"), false).unwrap_err().code, Code::InvalidTime);
        assert!(!paths.state_dir.exists(), "nothing was created");
    }

    #[test]
    fn a_prune_before_a_future_time_is_refused_in_one_whole_sentence() {
        let (_dir, paths) = temp_paths();
        let refusal = prune(&paths, "2099-01-01T00:00:00Z", &Caller::from("op"), 1_800_000_000).unwrap_err();
        assert_eq!(refusal.code, Code::InvalidTime);
        // The message once carried a run of spaces from a string continuation.
        assert!(
            refusal.message.ends_with("before a time that has passed. Nothing was dropped."),
            "{refusal:?}"
        );
        assert!(!paths.state_dir.exists(), "nothing was created");
    }

    #[test]
    fn verify_head_and_export_read_the_chain() {
        let (_dir, paths) = temp_paths();
        fill(&paths, 4);
        let head_text = head(&paths).unwrap();
        let kept = head_text.lines().next().unwrap().to_owned();
        assert!(crate::text::is_lower_hex(&kept, 64), "{head_text}");
        assert!(head_text.contains("4 rows; the last is seq 4 at 1970-01-01T00:16:44Z"), "{head_text}");
        let (text, intact) = verify(&paths, Some(&kept)).unwrap();
        assert!(intact, "{text}");
        assert!(text.contains("intact: 4 rows") && text.contains("is on the chain"), "{text}");

        let table = export(&paths, Some("1970-01-01T00:16:43Z"), false).unwrap();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "a header and rows 3 and 4: {table}");
        assert!(lines[0].trim_start().starts_with("SEQ"));
        assert_eq!(lines[1].find("prepared"), lines[0].find("EVENT"), "aligned: {table}");
        let json = export(&paths, None, true).unwrap();
        let rows: Vec<serde_json::Value> = json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[3]["hash"], kept.as_str());
        assert_eq!(rows[1]["prev_hash"], rows[0]["hash"]);

        // Edited, then cut: each named, exit status false.
        let mut store = open(&paths).unwrap();
        store
            .dangerous_connection_for_tests()
            .execute("UPDATE audit SET actor = 'x' WHERE seq = 2", [])
            .unwrap();
        let (text, intact) = verify(&paths, None).unwrap();
        assert!(!intact);
        assert!(text.contains("BROKEN: row seq 2 (1970-01-01T00:16:42Z) was edited or moved"), "{text}");
        store.dangerous_connection_for_tests().execute("DELETE FROM audit WHERE seq >= 2", []).unwrap();
        let (text, intact) = verify(&paths, None).unwrap();
        assert!(intact, "{text}");
        let (text, intact) = verify(&paths, Some(&kept)).unwrap();
        assert!(!intact);
        assert!(text.contains("is NOT on the chain"), "{text}");
    }
}
