//! Property tests (proptest) of the invariants the fuzz targets in fuzz/
//! check too, here on stable in the hermetic suite: canonical JSON and the
//! plan digest, the helper's request parser, the nginx renderer, the ssh
//! gate's framing (fuzz target ssh_gate). Pure: no
//! files, no processes. The fuzz targets explore raw bytes for longer; these
//! pin the same claims into every `cargo test`.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use volce_lab::control::canonical;
use volce_lab::nginx::{AccessLog, names_directive, render};
use volce_lab::vocab::{Code, ServerName};
use volce_lab::wire::gate::{self, GateRequest, Header};
use volce_lab::wire::parse_request;
use volce_lab::wire::remote::RemoteCommand;

use crate::support::nginx_shape::{only_our_directives, only_our_directives_for};

/// Any JSON value a request or a plan could hold: nested objects and
/// arrays of strings (any Unicode), integers of both signs and finite floats.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("JSON numbers are finite", |f| f.is_finite()).prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((".{0,8}", inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

/// The same value as JSON text with every object's keys in reverse order
/// and whitespace between tokens: equal value, different bytes.
fn reordered_text(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .rev()
                .map(|(k, v)| format!("{} :\n {}", serde_json::to_string(k).unwrap(), reordered_text(v)))
                .collect();
            format!("{{ {} }}", entries.join(" , "))
        }
        Value::Array(items) => {
            format!("[ {} ]", items.iter().map(reordered_text).collect::<Vec<_>>().join(" ,\t"))
        }
        scalar => serde_json::to_string(scalar).unwrap(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// parse(canonical(x)) == x, and canonical form is a fixed point.
    #[test]
    fn canonical_json_parses_back_to_the_same_value(value in json_value()) {
        let bytes = canonical::to_vec(&value).unwrap();
        let back: Value = serde_json::from_slice(&bytes).unwrap();
        prop_assert_eq!(&back, &value);
        prop_assert_eq!(canonical::to_vec(&back).unwrap(), bytes);
    }

    /// Equal values give equal digests, however the JSON was written.
    #[test]
    fn equal_values_written_differently_give_equal_digests(value in json_value()) {
        let other: Value = serde_json::from_str(&reordered_text(&value)).unwrap();
        prop_assert_eq!(&other, &value);
        prop_assert_eq!(canonical::sha256_hex(&other).unwrap(), canonical::sha256_hex(&value).unwrap());
    }

    /// Different values give different canonical bytes (so different digests
    /// short of a sha256 collision).
    #[test]
    fn different_values_give_different_canonical_bytes(a in json_value(), b in json_value()) {
        prop_assume!(a != b);
        prop_assert_ne!(canonical::to_vec(&a).unwrap(), canonical::to_vec(&b).unwrap());
    }

    /// Arbitrary bytes: the parser returns (never panics), and every refusal is invalid_request.
    #[test]
    fn request_parser_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Err(refusal) = parse_request(&bytes) {
            prop_assert_eq!(refusal.code, Code::InvalidRequest);
        }
    }

    /// Arbitrary JSON objects, often with a real operation name.
    #[test]
    fn request_parser_never_panics_on_objects(
        operation in prop_oneof![
            Just("inventory".to_owned()),
            Just("gateway_status".to_owned()),
            Just("plan".to_owned()),
            Just("execute".to_owned()),
            Just("logs".to_owned()),
            ".{0,8}",
        ],
        fields in prop::collection::vec((".{0,8}", json_value()), 0..5),
    ) {
        let mut map: Map<String, Value> = fields.into_iter().collect();
        map.insert("operation".into(), Value::from(operation));
        if let Ok(request) = parse_request(&serde_json::to_vec(&map).unwrap()) {
            prop_assert_eq!(parse_request(&request.to_bytes()).unwrap(), request);
        }
    }

    /// A valid request plus any one field outside its operation's is refused.
    #[test]
    fn request_with_an_unknown_field_is_refused(
        base in prop_oneof![
            Just(json!({"operation": "inventory"})),
            Just(json!({"operation": "gateway_status"})),
            Just(json!({"operation": "plan", "action": "stop", "parameters": {"app": "web"}})),
            Just(json!({"operation": "execute", "plan_id": "0123456789abcdef0123456789abcdef"})),
            Just(json!({"operation": "logs", "app": "web", "container": "app", "tail": 5})),
        ],
        key in ".{0,12}",
        extra in json_value(),
    ) {
        let known = ["operation", "action", "parameters", "plan_id", "app", "container", "tail", "since_minutes"];
        prop_assume!(!known.contains(&key.as_str()));
        prop_assert!(parse_request(&serde_json::to_vec(&base).unwrap()).is_ok());
        let mut with_extra = base.as_object().unwrap().clone();
        with_extra.insert(key, extra);
        let refusal = parse_request(&serde_json::to_vec(&with_extra).unwrap()).unwrap_err();
        prop_assert_eq!(refusal.code, Code::InvalidRequest);
    }

    /// Every valid server name and port renders to exactly our statements.
    #[test]
    fn renderer_writes_only_our_statements_for_valid_names(
        name in "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?){0,4}",
        port in 1024u16..=65535,
    ) {
        let name = ServerName::parse(&name).expect("the strategy writes valid names");
        let config = render(name.as_str(), port, AccessLog::Off);
        prop_assert_eq!(only_our_directives(&config, name.as_str(), port), Ok(()));
    }

    /// Every list of valid names a gateway may serve (the primary one and
    /// up to three others) renders to our statements with exactly those
    /// names, in order, as the one `server_name` statement's arguments.
    #[test]
    fn renderer_writes_every_name_as_one_argument_of_server_name(
        names in prop::collection::vec("[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?){0,3}", 1..=4),
        port in 1024u16..=65535,
    ) {
        let names: Vec<ServerName> = names.iter().map(|n| ServerName::parse(n).expect("valid names")).collect();
        let config = render(&names_directive(&names[0], &names[1..]), port, AccessLog::Off);
        let words: Vec<&str> = names.iter().map(ServerName::as_str).collect();
        prop_assert_eq!(only_our_directives_for(&config, &words, port), Ok(()));
    }

    /// Any text that validation accepts as a name renders safely, drawn
    /// from an alphabet full of nginx's special characters.
    #[test]
    fn renderer_is_safe_for_whatever_validation_accepts(text in "[a-z0-9.;{}$#\\\\\"' \n-]{1,40}", port in 1024u16..=65535) {
        if let Some(name) = ServerName::parse(&text) {
            prop_assert_eq!(only_our_directives(&render(name.as_str(), port, AccessLog::Off), name.as_str(), port), Ok(()));
        }
    }

    /// The gate accepts a remote command only byte for byte: a legacy line,
    /// or `request_line` of its check and two identifiers. Drawn from the
    /// gate's own words and shell characters, so near misses are common.
    #[test]
    fn gate_accepts_only_the_fixed_lines(
        words in prop::collection::vec(
            prop_oneof![Just("#"), Just("volce-lab-gate"), Just("1"), Just("2"), Just("identity"), Just("disk"), Just("rpc"), Just("web-1"), Just("vl-agent"), Just("LC_ALL=C;"), Just("export"), Just("LC_ALL;"), Just("hostname"), Just("&&"), Just("id"), Just("-un"), Just(";"), Just("$(id)"), Just("\n"), Just("")],
            0..10),
        separator in prop_oneof![Just(" "), Just("  "), Just("\t"), Just(";")],
    ) {
        let text = words.join(separator);
        match gate::parse_request(Some(text.as_bytes())) {
            Ok(GateRequest::Legacy(_)) => prop_assert!(
                [gate::LEGACY_IDENTITY, gate::LEGACY_DISK, gate::LEGACY_RPC].contains(&text.as_str())),
            Ok(GateRequest::Gated { check, host, user }) => {
                prop_assert_eq!(gate::request_line(check, &host, &user), text.clone());
                prop_assert!(!text.contains('\n') && !host.contains(' ') && !user.contains(' '));
            }
            Err(reason) => prop_assert_eq!(reason, gate::RefusalReason::NotAFixedRequest),
        }
    }

    /// Whatever bytes come back, the reply parser does not panic, and a
    /// frame it accepts starts with exactly its header's line.
    #[test]
    fn gate_reply_parser_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..128)) {
        if let Ok((header, payload)) = gate::parse_reply(&bytes) {
            let line = header.line();
            prop_assert!(bytes.starts_with(line.as_bytes()));
            prop_assert_eq!(&bytes[line.len()..], payload);
        }
    }

    /// The gate's header parses back with its verdict, and it is a match
    /// only when the observed names are the expected identifiers.
    #[test]
    fn gate_header_round_trips_and_matches_only_equal_names(
        names in prop::collection::vec(prop_oneof![Just("web-1"), Just("vl-agent"), Just("a b"), Just("?"), Just("-x"), Just(""), Just("h\u{e9}")], 4),
    ) {
        let header = Header::judge(names[0], names[1], names[2], names[3]);
        let line = header.line();
        let (parsed, payload) = gate::parse_reply(line.as_bytes()).expect("a frame");
        prop_assert_eq!(&parsed, &header);
        prop_assert!(payload.is_empty());
        let identifier = volce_lab::config::is_identifier;
        let same = names[0] == names[2] && names[1] == names[3] && identifier(names[2]) && identifier(names[3]);
        prop_assert_eq!(header.matched, same);
    }
}

/// Every check's gated line is accepted, and every one-character edit of it
/// (a deletion, or a space, `;` or newline inserted) is refused unless it
/// is still a fixed line.
#[test]
fn gate_refuses_every_small_edit_of_a_fixed_line() {
    for check in [RemoteCommand::Identity, RemoteCommand::Disk, RemoteCommand::Rpc] {
        let line = gate::request_line(check, "web-1", "vl-agent");
        assert!(gate::parse_request(Some(line.as_bytes())).is_ok(), "{line}");
        for at in 0..=line.len() {
            let mut edits =
                vec![format!("{}{}", &line[..at.min(line.len())], &line[(at + 1).min(line.len())..])];
            for c in [" ", ";", "\n"] {
                edits.push(format!("{}{c}{}", &line[..at], &line[at..]));
            }
            for edit in edits {
                if let Ok(request) = gate::parse_request(Some(edit.as_bytes())) {
                    // Only a one-letter shorter host or user stays a fixed line.
                    let GateRequest::Gated { check: c, host, user } = &request else { panic!("{edit:?}") };
                    assert_eq!(gate::request_line(*c, host, user), edit);
                }
            }
        }
    }
}

/// The checker itself catches a smuggled directive (a name that is not valid).
#[test]
fn shape_check_catches_an_injected_directive() {
    let evil = "x; include /etc/passwd";
    assert!(only_our_directives(&render(evil, 3000, AccessLog::Off), evil, 3000).is_err());
    let block = "x { } server { listen 80";
    assert!(only_our_directives(&render(block, 3000, AccessLog::Off), block, 3000).is_err());
}

/// A plan body as the helper stores it reads back, from its canonical JSON
/// too, as the same plan with the same digest (the fuzz target plan_stored
/// starts from this body: fuzz/seeds/plan_stored/legacy).
#[test]
fn a_stored_plan_reads_back_from_its_canonical_json() {
    use volce_lab::actions::plan::Plan;
    let harness = crate::support::harness::Harness::new();
    let db = rusqlite::Connection::open(harness.paths.state_dir.join("state.db")).unwrap();
    let body: String = db.query_row("SELECT body FROM plans LIMIT 1", [], |row| row.get(0)).unwrap();
    let plan = Plan::from_stored(&body).unwrap();
    assert_eq!(plan.canonical_json(), body, "the helper stores canonical JSON");
    assert_eq!(Plan::from_stored(&plan.canonical_json()).unwrap(), plan);
    let seed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/plan_stored/legacy"));
    assert_eq!(Plan::from_stored(&seed.unwrap()).unwrap().digest, plan.digest, "the fuzz seed is this plan");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Any text the parser accepts as a data path is absolute, stays inside
    /// docker's `--mount` list (no ',', '=', ':', quote or space), has no
    /// `.`/`..` segment, and is outside the system directories a mount
    /// would hide; and it round-trips through serde.
    #[test]
    fn an_accepted_data_path_is_safe_in_a_mount_list(path in "(/[a-z.]{0,4}){1,3}|/[ -~]{0,12}|.{0,12}") {
        use volce_lab::vocab::DataPath;
        if let Some(parsed) = DataPath::parse(&path) {
            prop_assert!(path.starts_with('/') && path.len() > 1);
            prop_assert!(!path.bytes().any(|b| b",=:\"' \\".contains(&b)));
            prop_assert!(path.split('/').skip(1).all(|s| !s.is_empty() && s != "." && s != ".."));
            let first = path.split('/').nth(1).unwrap();
            prop_assert!(!["tmp", "proc", "sys", "dev", "etc", "usr", "run"].contains(&first));
            let json = serde_json::to_string(&parsed).unwrap();
            prop_assert_eq!(serde_json::from_str::<DataPath>(&json).unwrap(), parsed);
        }
    }
}
