//! Every `volce-lab-host` request leaves an audit row (issue 14): rpc
//! operations and their refusals, the operator's commands with both uids,
//! refusals folded within a window, metadata only, and fail closed when the
//! row cannot be written. Hermetic: the fake engine, a temporary state dir.

use serde_json::{Value, json};
use volce_lab::host::Caller;
use volce_lab::host::rpc::Reply;
use volce_lab::store::{AuditOperation, AuditOutcome, FOLD_WINDOW_SECS, RequestMeta};
use volce_lab::vocab::Code;

use crate::support::fake_engine::unused_image;
use crate::support::harness::{Harness, deploy_params};

const AGENT: &str = "agent";

/// Every row of the trail, as `audit export --json` prints them.
fn rows(h: &Harness) -> Vec<Value> {
    volce_lab::host::audit::export(&h.paths, None, true)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn last(h: &Harness) -> Value {
    rows(h).pop().unwrap()
}

fn code_of(reply: &Reply) -> Code {
    match reply {
        Reply::Rejected { refusal, .. } => refusal.code,
        other => panic!("not a refusal: {other:?}"),
    }
}

fn intact(h: &Harness) -> bool {
    volce_lab::host::audit::verify(&h.paths, None).unwrap().1
}

#[test]
fn a_read_leaves_one_request_row_with_the_workstations_request_id() {
    let h = Harness::new();
    let reply = h.rpc(AGENT, br#"{"operation":"inventory","request_id":"r-inventory-1"}"#);
    assert!(matches!(reply, Reply::Ok { .. }), "{reply:?}");
    let row = last(&h);
    assert_eq!(row["event"], "request");
    assert_eq!(row["operation"], "inventory");
    assert_eq!(row["outcome"], "ok");
    assert_eq!(row["request_id"], "r-inventory-1");
    assert_eq!(row["actor"], AGENT);
    assert!(row["duration_ms"].is_i64(), "{row}");
    assert_eq!(row["code"], Value::Null);
}

#[test]
fn a_prepare_is_recorded_by_its_own_prepared_row_stamped_with_the_request() {
    let h = Harness::new();
    let before = rows(&h).len();
    let request = json!({"operation": "plan", "action": "deploy", "parameters": deploy_params("demo", 18001),
        "request_id": "r-plan-1"});
    let reply = h.rpc(AGENT, request.to_string().as_bytes());
    assert!(matches!(reply, Reply::Ok { .. }), "{reply:?}");
    let all = rows(&h);
    assert_eq!(all.len(), before + 1, "one row: the state change's own");
    let row = &all[before];
    assert_eq!((row["event"].as_str(), row["operation"].as_str()), (Some("prepared"), Some("plan")));
    assert_eq!(row["request_id"], "r-plan-1");
    assert_eq!(row["app"], "demo");
    assert_eq!(row["action"], "deploy");
    assert!(intact(&h));
}

#[test]
fn each_kind_of_refused_rpc_leaves_a_row_with_its_code() {
    let h = Harness::new();
    // A request that does not parse: its operation is unknown.
    assert_eq!(code_of(&h.rpc(AGENT, b"not json")), Code::InvalidRequest);
    let row = last(&h);
    assert_eq!((row["operation"].as_str(), row["code"].as_str()), (Some("rpc"), Some("invalid_request")));
    assert_eq!(row["outcome"], "refused");
    // An approval smuggled into the parameters.
    let smuggled = json!({"operation": "plan", "action": "stop", "parameters": {"app": "legacy", "approved": true},
        "request_id": "r-smuggle"});
    let code = code_of(&h.rpc(AGENT, smuggled.to_string().as_bytes()));
    let row = last(&h);
    assert_eq!(row["code"], code.as_str());
    assert_eq!((row["operation"].as_str(), row["request_id"].as_str()), (Some("plan"), Some("r-smuggle")));
    assert_eq!(row["action"], "stop");
    // An unknown plan, then an expired one.
    let unknown = format!(r#"{{"operation":"execute","plan_id":"{}"}}"#, "ab".repeat(16));
    assert_eq!(code_of(&h.rpc(AGENT, unknown.as_bytes())), Code::PlanNotFound);
    assert_eq!(last(&h)["plan_id"], "ab".repeat(16));
    let plan =
        h.controller().prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    h.clock.advance(7 * 24 * 3600);
    let execute = format!(r#"{{"operation":"execute","plan_id":"{}","request_id":"r-late"}}"#, plan.plan.id);
    let code = code_of(&h.rpc(AGENT, execute.as_bytes()));
    let row = last(&h);
    assert_eq!(row["code"], code.as_str());
    assert_eq!(
        (row["plan_id"].as_str(), row["request_id"].as_str()),
        (Some(plan.plan.id.as_str()), Some("r-late"))
    );
    assert!(intact(&h));
}

#[test]
fn a_secret_planted_in_a_parameter_or_a_bad_request_reaches_no_audit_row() {
    let h = Harness::new();
    let secret = "PLANTED-SECRET-7f3a";
    let mut params = deploy_params("demo", 18001);
    params["server_name"] = json!(format!("{secret}.example.com"));
    h.rpc(
        AGENT,
        json!({"operation": "plan", "action": "deploy", "parameters": params}).to_string().as_bytes(),
    );
    params["extra"] = json!(secret);
    h.rpc(
        AGENT,
        json!({"operation": "plan", "action": "deploy", "parameters": params}).to_string().as_bytes(),
    );
    h.rpc(AGENT, json!({"operation": "plan", "action": secret, "parameters": {}}).to_string().as_bytes());
    h.rpc(
        AGENT,
        json!({"operation": "inventory", "request_id": secret.replace('-', "_")}).to_string().as_bytes(),
    );
    h.rpc(AGENT, format!(r#"{{"operation":"{secret}"}}"#).as_bytes());
    let logs = json!({"operation": "logs", "app": secret, "container": "app", "tail": 5});
    h.rpc(AGENT, logs.to_string().as_bytes());
    let text = volce_lab::host::audit::export(&h.paths, None, true).unwrap();
    assert!(rows(&h).len() >= 6, "every request left a row");
    assert!(!text.contains("PLANTED"), "an audit row holds request text: {text}");
    assert!(!text.to_lowercase().contains("planted"), "{text}");
}

#[test]
fn operator_commands_leave_rows_with_both_uids() {
    let h = Harness::new();
    let plan =
        h.controller().prepare("remove_image", &json!({"image_id": unused_image().as_str()}), AGENT).unwrap();
    let id = plan.plan.id.clone();
    let alice = Caller { name: "alice".into(), sudo_uid: Some(1001), login_uid: Some(1001) };
    let wrong = "0".repeat(64);
    let refused = h.host().approve(&alice, id.as_str(), &wrong, |_, _| volce_lab::host::Decision::Confirmed);
    assert_eq!(refused.unwrap_err().code, Code::DigestMismatch);
    let row = last(&h);
    assert_eq!((row["operation"].as_str(), row["code"].as_str()), (Some("approve"), Some("digest_mismatch")));
    assert_eq!((row["sudo_uid"].as_i64(), row["login_uid"].as_i64()), (Some(1001), Some(1001)));
    assert_eq!(row["plan_id"], id.as_str());
    h.show(&id);
    assert_eq!((last(&h)["operation"].as_str(), last(&h)["outcome"].as_str()), (Some("show"), Some("ok")));
    h.host().reject(&alice, id.as_str(), None).unwrap();
    let row = last(&h);
    assert_eq!((row["event"].as_str(), row["operation"].as_str()), (Some("rejected"), Some("reject")));
    assert_eq!(row["sudo_uid"], 1001, "the state change's row carries the uids");
    assert_eq!(h.resolve(&id, "bob").unwrap_err().code, Code::NotAwaitingInspection);
    assert_eq!(last(&h)["operation"], "resolve");
    assert_eq!(h.reject("nope", "alice").unwrap_err().code, Code::InvalidPlanId);
    assert_eq!(last(&h)["code"], "invalid_plan_id");
    assert!(intact(&h));
}

#[test]
fn identical_refusals_within_the_window_fold_into_one_counted_row_and_the_chain_holds() {
    let h = Harness::new();
    let unknown = format!(r#"{{"operation":"execute","plan_id":"{}"}}"#, "cd".repeat(16));
    let before = rows(&h).len();
    for _ in 0..50 {
        assert_eq!(code_of(&h.rpc(AGENT, unknown.as_bytes())), Code::PlanNotFound);
        h.clock.advance(1);
    }
    // The first is there at once; the 49 repeats are counted, not appended.
    assert_eq!(rows(&h).len(), before + 1);
    // Another caller, or another code, is its own kind.
    h.rpc("other", unknown.as_bytes());
    assert_eq!(rows(&h).len(), before + 2);
    // Once the window closed, the next request appends the count first.
    h.clock.advance(FOLD_WINDOW_SECS);
    h.rpc(AGENT, br#"{"operation":"inventory"}"#);
    let all = rows(&h);
    let folded: Vec<&Value> = all.iter().filter(|r| r["count"].is_i64()).collect();
    assert_eq!(folded.len(), 1, "{all:?}");
    assert_eq!(folded[0]["count"], 49);
    assert_eq!(folded[0]["code"], "plan_not_found");
    assert_eq!(folded[0]["actor"], AGENT);
    assert_eq!(all.len(), before + 4, "first, other, fold, inventory");
    assert!(intact(&h));
    // A new window starts with a row of its own again.
    h.rpc(AGENT, unknown.as_bytes());
    assert_eq!(rows(&h).len(), before + 5);
}

#[test]
fn when_the_row_cannot_be_written_nothing_changes_and_the_caller_gets_audit_unavailable() {
    let h = Harness::new();
    let mut c = h.controller();
    let plans = |c: &mut crate::support::harness::TestController| -> i64 {
        c.store_for_tests()
            .dangerous_connection_for_tests()
            .query_row("SELECT count(*) FROM plans", [], |r| r.get(0))
            .unwrap()
    };
    let before = plans(&mut c);
    // A read-only database (as after a remount, or a file made immutable).
    let conn = c.store_for_tests().dangerous_connection_for_tests();
    conn.pragma_update(None, "query_only", true).unwrap();
    c.begin_request(RequestMeta::new(AuditOperation::Plan, AGENT));
    // A prepare's plan and its row are one transaction: neither is stored.
    let refused = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap_err();
    assert_eq!(refused.code, Code::StateUnavailable);
    assert_eq!(plans(&mut c), before, "no plan without its audit row");
    // A refusal, or a read, whose row cannot be written is not answered.
    let answered = c.answer(Err::<(), _>(refused), None, None).unwrap_err();
    assert_eq!(answered.code, Code::AuditUnavailable);
    c.begin_request(RequestMeta::new(AuditOperation::Inventory, AGENT));
    let read = c.inventory(AGENT);
    assert_eq!(c.answer(read, None, None).unwrap_err().code, Code::AuditUnavailable);
    // A full database: no page may be added; rows fill the last ones, then
    // the next answer fails.
    let conn = c.store_for_tests().dangerous_connection_for_tests();
    conn.pragma_update(None, "query_only", false).unwrap();
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
    conn.pragma_update(None, "max_page_count", pages).unwrap();
    let mut outcome = Ok(());
    for n in 0..2000 {
        let mut meta = RequestMeta::new(AuditOperation::Logs, &format!("u{n}"));
        meta.request_id = Some("r".repeat(64));
        c.begin_request(meta);
        outcome = c.end_request(AuditOutcome::Ok, None, None, None);
        if outcome.is_err() {
            break;
        }
    }
    assert_eq!(outcome.unwrap_err().code, Code::AuditUnavailable);
}

/// Issue 13: the ssh gate's refusals are rows. The gate sends the helper a
/// `gate_refusal` (why, and the command's length and sha256); the helper
/// records it as a refusal of operation `ssh_gate` with code
/// `gate_refused`, folded like any other, and never sees the command.
#[test]
fn a_gate_refusal_is_a_folded_row_with_its_reason_length_and_digest_and_never_the_command() {
    use volce_lab::wire::gate::{RefusalReason, RefusalRecord};
    let h = Harness::new();
    let command = b"cat /etc/shadow # password=e2e-planted-51c2";
    let record = RefusalRecord::of(RefusalReason::NotAFixedRequest, Some(command));
    let before = rows(&h).len();
    assert_eq!(code_of(&h.rpc(AGENT, &record.request().to_bytes())), Code::GateRefused);
    let all = rows(&h);
    assert_eq!(all.len(), before + 1);
    let row = &all[before];
    assert_eq!(
        (row["event"].as_str(), row["operation"].as_str(), row["outcome"].as_str(), row["code"].as_str()),
        (Some("request"), Some("ssh_gate"), Some("refused"), Some("gate_refused")),
        "{row}"
    );
    assert_eq!(row["actor"], AGENT);
    assert_eq!(row["gate_reason"], "not_a_fixed_request");
    assert_eq!(row["command_bytes"], command.len());
    assert_eq!(row["command_sha256"], record.command_sha256.clone().unwrap());
    let text = rows(&h).iter().map(Value::to_string).collect::<String>();
    assert!(!text.contains("shadow") && !text.contains("planted"), "the command's text is in the trail");

    // A login without a command, then a flood: another reason, so a row of
    // its own (issue 22: windows are per reason), then one kind, folded.
    let login = RefusalRecord::of(RefusalReason::NoCommand, None).request().to_bytes();
    for _ in 0..100 {
        assert_eq!(code_of(&h.rpc(AGENT, &login)), Code::GateRefused);
    }
    assert_eq!(rows(&h).len(), before + 2, "repeats within the window are counted, not appended");
    h.clock.advance(FOLD_WINDOW_SECS);
    assert_eq!(code_of(&h.rpc(AGENT, &login)), Code::GateRefused);
    let all = rows(&h);
    assert_eq!(all[before + 1]["gate_reason"], "no_command");
    let count = &all[before + 2];
    assert_eq!(
        (count["operation"].as_str(), count["count"].as_i64()),
        (Some("ssh_gate"), Some(99)),
        "{count}"
    );
    // Since issue 22 a count row names its reason (windows are per reason);
    // a login has no command, so no length or digest.
    assert_eq!(count["gate_reason"], "no_command");
    assert_eq!((&count["command_bytes"], &count["command_sha256"]), (&Value::Null, &Value::Null));
    let next = &all[before + 3];
    assert_eq!((next["gate_reason"].as_str(), next["command_bytes"].as_i64()), (Some("no_command"), None));
    assert!(intact(&h));
}

/// Whoever can run the helper can send `gate_refusal`: anything but the
/// shape a gate sends is refused and recorded as such, with no detail.
#[test]
fn a_gate_refusal_of_another_shape_is_invalid_parameters_and_records_no_detail() {
    let h = Harness::new();
    for bad in [
        json!({"operation": "gate_refusal", "reason": "no_command", "command_bytes": 3,
               "command_sha256": "a".repeat(64)}),
        json!({"operation": "gate_refusal", "reason": "not_a_fixed_request", "command_bytes": 3,
               "command_sha256": "not hex at all, a text the caller chose......................!!"}),
        json!({"operation": "gate_refusal", "reason": "too_long", "command_bytes": 10,
               "command_sha256": "a".repeat(64)}),
    ] {
        assert_eq!(code_of(&h.rpc(AGENT, bad.to_string().as_bytes())), Code::InvalidParameters, "{bad}");
        h.clock.advance(FOLD_WINDOW_SECS);
    }
    let all = rows(&h);
    let refused: Vec<&Value> = all.iter().filter(|r| r["operation"] == "ssh_gate").collect();
    assert!(!refused.is_empty());
    for row in refused {
        assert_eq!(row["code"], "invalid_parameters", "{row}");
        assert_eq!((&row["gate_reason"], &row["command_sha256"]), (&Value::Null, &Value::Null), "{row}");
    }
    let text = all.iter().map(Value::to_string).collect::<String>();
    assert!(!text.contains("caller chose"));
    // Text in a field the request does not have is refused before anything.
    let extra = json!({"operation": "gate_refusal", "reason": "no_command", "command": "id"});
    assert_eq!(code_of(&h.rpc(AGENT, extra.to_string().as_bytes())), Code::InvalidRequest);
}

/// Issue 22: the agent's account can send `gate_refusal` itself. A forged
/// refusal opened the one window of `ssh_gate`/`gate_refused`, so a real
/// refused command right after it, of any reason, was only a count, and
/// its digest never reached the trail. Fails on the code before (the
/// too_long refusal was counted into the forged window, and the count row
/// carried no digest): windows are per reason, and the count row keeps the
/// length and digest of the latest refused command.
#[test]
fn a_forged_gate_refusal_hides_neither_another_reason_nor_the_digest_of_a_real_refusal_after_it() {
    use volce_lab::wire::gate::{RefusalReason, RefusalRecord};
    let h = Harness::new();
    let before = rows(&h).len();
    let send = |record: &RefusalRecord| code_of(&h.rpc(AGENT, &record.request().to_bytes()));
    let forged = RefusalRecord::of(RefusalReason::NotAFixedRequest, Some(b"forged by the agent"));
    assert_eq!(send(&forged), Code::GateRefused);
    h.clock.advance(1);
    let long = vec![b'x'; 4000];
    let too_long = RefusalRecord::of(RefusalReason::TooLong, Some(&long));
    assert_eq!(send(&too_long), Code::GateRefused);
    let all = rows(&h);
    assert_eq!(all.len(), before + 2, "another reason is a row of its own: {all:?}");
    assert_eq!(all[before + 1]["gate_reason"], "too_long");
    assert_eq!(all[before + 1]["command_sha256"], too_long.command_sha256.clone().unwrap());
    assert_eq!(all[before + 1]["command_bytes"], 4000);

    // A real refusal of the forged one's reason, inside its window.
    h.clock.advance(1);
    let real = RefusalRecord::of(RefusalReason::NotAFixedRequest, Some(b"cat /etc/shadow"));
    assert_eq!(send(&real), Code::GateRefused);
    assert_eq!(rows(&h).len(), before + 2, "counted in the window");
    h.clock.advance(FOLD_WINDOW_SECS);
    h.rpc(AGENT, br#"{"operation":"gateway_status"}"#);
    let all = rows(&h);
    let count = all[before + 2..].iter().find(|r| r["count"].is_i64()).expect("the count row");
    assert_eq!(count["count"], 1);
    assert_eq!(count["gate_reason"], "not_a_fixed_request");
    assert_eq!(
        count["command_sha256"],
        real.command_sha256.clone().unwrap(),
        "the real one's digest: {count}"
    );
    assert_eq!(count["command_bytes"], 15);
    assert!(intact(&h));
}

/// Issue 38 (item 7): a window kept only its latest command's digest, so a
/// real refused command (`cat /etc/shadow`) counted in the window of a
/// forged refusal of the same reason vanished from the trail once another
/// forgery followed it. Tried: forged, real, forged again, then a flood of
/// 20 more distinct forgeries in the next window. Fails on the code before
/// (the count row carried the last forgery's digest alone): the count row
/// carries every distinct digest of its window, in the order first seen,
/// at most 16, and how many repeats came beyond them.
#[test]
fn a_forged_gate_refusal_after_a_real_one_in_its_window_hides_neither_digest() {
    use volce_lab::wire::gate::{RefusalReason, RefusalRecord};
    let h = Harness::new();
    let before = rows(&h).len();
    let send = |record: &RefusalRecord| code_of(&h.rpc(AGENT, &record.request().to_bytes()));
    let forged = RefusalRecord::of(RefusalReason::NotAFixedRequest, Some(b"forged by the agent"));
    let real = RefusalRecord::of(RefusalReason::NotAFixedRequest, Some(b"cat /etc/shadow"));
    for record in [&forged, &real, &forged] {
        assert_eq!(send(record), Code::GateRefused);
        h.clock.advance(1);
    }
    h.clock.advance(FOLD_WINDOW_SECS);
    h.rpc(AGENT, br#"{"operation":"gateway_status"}"#);
    let all = rows(&h);
    assert_eq!(all[before]["command_sha256"], forged.command_sha256.clone().unwrap(), "the window's first");
    let count = all[before + 1..].iter().find(|r| r["count"].is_i64()).expect("the count row");
    assert_eq!(count["count"], 2);
    let digests = [real.command_sha256.clone().unwrap(), forged.command_sha256.clone().unwrap()];
    assert_eq!(count["command_digests"], json!(digests), "every distinct digest, first seen first: {count}");
    assert_eq!(count["commands_beyond"], Value::Null, "{count}");
    assert_eq!(count["command_sha256"], forged.command_sha256.clone().unwrap(), "the latest, as before");

    // Bounded: 1 row, then 20 repeats of 20 distinct commands.
    let flood: Vec<RefusalRecord> = (0..21)
        .map(|n| RefusalRecord::of(RefusalReason::NotAFixedRequest, Some(format!("forged {n}").as_bytes())))
        .collect();
    for record in &flood {
        assert_eq!(send(record), Code::GateRefused);
    }
    h.clock.advance(FOLD_WINDOW_SECS);
    h.rpc(AGENT, br#"{"operation":"inventory"}"#);
    let all = rows(&h);
    let count = all.iter().rev().find(|r| r["count"].is_i64() && r["operation"] == "ssh_gate").unwrap();
    assert_eq!(count["count"], 20);
    let kept: Vec<Value> = flood[1..17].iter().map(|r| json!(r.command_sha256.clone().unwrap())).collect();
    assert_eq!(count["command_digests"], Value::Array(kept), "the first 16 distinct: {count}");
    assert_eq!(count["commands_beyond"], 4);
    assert!(intact(&h));
}

/// Issue 22: `too_long` accepted any length (99,999,999,999 bytes), though
/// no command longer than `MAX_RECEIVABLE_COMMAND_BYTES` can reach the
/// gate. Fails on the code before (it was recorded as a gate refusal).
#[test]
fn a_gate_refusal_longer_than_the_gate_can_receive_is_invalid_parameters() {
    let h = Harness::new();
    let forged = json!({"operation": "gate_refusal", "reason": "too_long", "command_bytes": 99_999_999_999u64,
                        "command_sha256": "a".repeat(64)});
    assert_eq!(code_of(&h.rpc(AGENT, forged.to_string().as_bytes())), Code::InvalidParameters);
    let row = last(&h);
    assert_eq!(row["code"], "invalid_parameters");
    assert_eq!(row["command_bytes"], Value::Null, "{row}");
}

/// Issue 22: every successful read added a chained row (~225 B), so a
/// flood of reads grew the trail without bound. Fails on the code before
/// (100 rows): successful reads fold per actor, operation and window like
/// refusals, while state changes and refusals stay rows of their own.
#[test]
fn a_flood_of_reads_folds_per_actor_operation_and_window_and_state_changes_stay_whole() {
    let h = Harness::new();
    let before = rows(&h).len();
    for _ in 0..100 {
        assert!(matches!(h.rpc(AGENT, br#"{"operation":"inventory"}"#), Reply::Ok { .. }));
    }
    assert_eq!(rows(&h).len(), before + 1, "the first read is a row, its repeats a count");
    h.rpc(AGENT, br#"{"operation":"gateway_status"}"#);
    h.rpc("other", br#"{"operation":"inventory"}"#);
    assert_eq!(rows(&h).len(), before + 3, "another operation, another actor: kinds of their own");
    // A prepare is a state change: its own row each time, window or not.
    let prepared_before = rows(&h).iter().filter(|r| r["event"] == "prepared").count();
    for port in [18001, 18002] {
        let request = json!({"operation": "plan", "action": "deploy",
                             "parameters": deploy_params(&format!("demo{port}"), port)});
        assert!(matches!(h.rpc(AGENT, request.to_string().as_bytes()), Reply::Ok { .. }));
    }
    let prepared = rows(&h).iter().filter(|r| r["event"] == "prepared").count();
    assert_eq!(prepared, prepared_before + 2);
    h.clock.advance(FOLD_WINDOW_SECS);
    h.rpc(AGENT, br#"{"operation":"gateway_status"}"#);
    let all = rows(&h);
    let counts: Vec<&Value> = all.iter().filter(|r| r["count"].is_i64() && r["event"] == "request").collect();
    assert_eq!(counts.len(), 1, "{counts:?}");
    assert_eq!(
        (counts[0]["operation"].as_str(), counts[0]["outcome"].as_str(), counts[0]["count"].as_i64()),
        (Some("inventory"), Some("ok"), Some(99))
    );
    assert!(intact(&h));
}

/// Issue 22: below the free-space floor a read wrote its row anyway (only
/// a prepare looked at the floor). Fails on the code before (the read was
/// answered and its row written): every write needs the floor, and a
/// request whose row cannot be written for it is answered `state_full`.
#[test]
fn below_the_free_space_floor_a_read_is_answered_state_full_and_leaves_no_row() {
    let h = Harness::new();
    let before = rows(&h).len();
    let mut c = h.controller();
    c.store_for_tests().set_free_space_floor_for_tests(u64::MAX);
    c.begin_request(RequestMeta::new(AuditOperation::Inventory, AGENT));
    let read = c.inventory(AGENT);
    assert!(read.is_ok());
    assert_eq!(c.answer(read, None, None).unwrap_err().code, Code::StateFull);
    c.begin_request(RequestMeta::new(AuditOperation::Plan, AGENT));
    let refused = c.prepare("deploy", &deploy_params("demo", 18001), AGENT).unwrap_err();
    assert_eq!(refused.code, Code::StateFull);
    drop(c);
    assert_eq!(rows(&h).len(), before, "nothing was written");
}

/// Issue 26: `audit export`'s table has a column for every `--json` field,
/// CODE among them, each as wide as its widest cell: a long operation
/// (`gateway_status`) and a gate refusal's code stay in their own columns.
/// Held to tests/golden/audit/export_table.txt (`VOLCE_LAB_BLESS_GOLDEN=1`
/// rewrites it; review its diff like code).
#[test]
fn the_export_table_has_every_json_field_as_an_aligned_column() {
    use volce_lab::host::audit_rows::{Table, json_line};
    use volce_lab::store::ChainedEntry;
    let text = |s: &str| Some(s.to_owned());
    let hex = |c: char, n: usize| Some(c.to_string().repeat(n));
    let entries = [
        ChainedEntry {
            seq: 1,
            at: 1_800_000_000,
            event: "prepared".into(),
            plan_id: hex('1', 32),
            action: text("deploy"),
            outcome: "ok".into(),
            duration_ms: Some(12),
            actor: "agent".into(),
            operation: text("plan"),
            app: text("demo"),
            request_id: text("r-plan-1"),
            prev_hash: hex('0', 64),
            hash: hex('a', 64),
            ..ChainedEntry::default()
        },
        ChainedEntry {
            seq: 2,
            at: 1_800_000_060,
            event: "request".into(),
            outcome: "ok".into(),
            duration_ms: Some(3),
            actor: "agent".into(),
            operation: text("gateway_status"),
            prev_hash: hex('a', 64),
            hash: hex('b', 64),
            ..ChainedEntry::default()
        },
        ChainedEntry {
            seq: 3,
            at: 1_800_000_120,
            event: "request".into(),
            outcome: "refused".into(),
            actor: "agent".into(),
            operation: text("ssh_gate"),
            code: text("gate_refused"),
            gate_reason: text("not_a_fixed_request"),
            command_bytes: Some(43),
            command_sha256: hex('c', 64),
            prev_hash: hex('b', 64),
            hash: hex('d', 64),
            ..ChainedEntry::default()
        },
        ChainedEntry {
            seq: 4,
            at: 1_800_000_200,
            event: "request".into(),
            outcome: "refused".into(),
            actor: "agent".into(),
            operation: text("execute"),
            code: text("approval_required"),
            count: Some(7),
            sudo_uid: Some(1000),
            login_uid: Some(1000),
            prev_hash: hex('d', 64),
            hash: hex('e', 64),
            ..ChainedEntry::default()
        },
        // Issue 38: a gate count row names every distinct digest.
        ChainedEntry {
            seq: 5,
            at: 1_800_000_240,
            event: "request".into(),
            outcome: "refused".into(),
            actor: "agent".into(),
            operation: text("ssh_gate"),
            code: text("gate_refused"),
            count: Some(3),
            gate_reason: text("not_a_fixed_request"),
            command_bytes: Some(15),
            command_sha256: hex('c', 64),
            command_digests: Some(vec!["1".repeat(64), "c".repeat(64)]),
            commands_beyond: Some(1),
            prev_hash: hex('e', 64),
            hash: hex('f', 64),
            ..ChainedEntry::default()
        },
    ];
    let mut table = Table::default();
    for entry in &entries {
        table.push(entry);
    }
    let rendered = table.render();
    // Every --json field has its column, by name.
    let header: Vec<&str> = rendered.lines().next().unwrap().split_whitespace().collect();
    let json: Value = serde_json::from_str(&json_line(&entries[2])).unwrap();
    for key in json.as_object().unwrap().keys() {
        assert!(header.contains(&key.to_uppercase().as_str()), "no column for {key}: {header:?}");
    }
    assert_eq!(header.len(), json.as_object().unwrap().len());
    // Aligned: each left-aligned column's cells start where its header does.
    let lines: Vec<&str> = rendered.lines().collect();
    for name in ["OPERATION", "OUTCOME", "CODE", "GATE_REASON", "ACTOR", "PLAN_ID"] {
        let at = lines[0].find(name).unwrap();
        for line in &lines[1..] {
            assert!(line[..at].ends_with("  ") && !line[at..].starts_with(' '), "{name}:\n{rendered}");
        }
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/audit/export_table.txt");
    if std::env::var_os("VOLCE_LAB_BLESS_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &rendered).unwrap();
    }
    let golden = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(rendered, golden, "the table differs from {}:\n{rendered}", path.display());
}

/// The table of a real trail (a read, a gate refusal, a plan) lines up the
/// same way, through `audit export` itself.
#[test]
fn the_exported_table_of_a_trail_lines_up_its_code_column() {
    use volce_lab::wire::gate::{RefusalReason, RefusalRecord};
    let h = Harness::new();
    assert!(matches!(h.rpc(AGENT, br#"{"operation":"gateway_status"}"#), Reply::Ok { .. }));
    let record = RefusalRecord::of(RefusalReason::NotAFixedRequest, Some(b"id"));
    assert_eq!(code_of(&h.rpc(AGENT, &record.request().to_bytes())), Code::GateRefused);
    let table = volce_lab::host::audit::export(&h.paths, None, false).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    let code = lines[0].find("CODE").unwrap();
    let gate = lines.iter().find(|l| l.contains("ssh_gate")).unwrap();
    assert_eq!(gate.find("gate_refused"), Some(code), "{table}");
    let status = lines.iter().find(|l| l.contains("gateway_status")).unwrap();
    assert_eq!(status.find("gateway_status"), lines[0].find("OPERATION"), "{table}");
    assert_eq!(lines.len(), rows(&h).len() + 1, "a header and one line per row: {table}");
}
