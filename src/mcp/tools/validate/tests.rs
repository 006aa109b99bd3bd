//! Every tool argument refusal, with its code and what was tried.

use serde_json::json;

use super::*;

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("not an object"),
    }
}

#[test]
fn good_arguments_are_accepted() {
    let call = validate(ToolName::CloudCheck, Some(&args(json!({"check": "disk"})))).unwrap();
    assert_eq!(call, Call::Check(Check::Disk));
    assert_eq!(validate(ToolName::ServiceInventory, None).unwrap(), Call::Inventory);
    assert_eq!(validate(ToolName::ServiceInventory, Some(&Map::new())).unwrap(), Call::Inventory);
    let plan = json!({"action": "stop", "parameters": {"app": "web"}});
    assert!(matches!(
        validate(ToolName::ServicePlan, Some(&args(plan))).unwrap(),
        Call::Plan { action: Action::Stop, .. }
    ));
    let deploy = json!({"action": "deploy", "parameters": {
        "app": "web", "image": "web", "host_port": 18001, "container_port": 8080, "server_name": "x"}});
    assert!(validate(ToolName::ServicePlan, Some(&args(deploy))).is_ok());
    // Tried: a deploy without container_port: the catalog entry may set it,
    // so only the host helper can say whether it is missing.
    let deploy = json!({"action": "deploy", "parameters": {
        "app": "web", "image": "web", "host_port": 18001, "server_name": "x"}});
    assert!(validate(ToolName::ServicePlan, Some(&args(deploy))).is_ok());
    // Tried: other names on deploy and nginx_config, up to three; the
    // helper judges each name.
    let deploy = json!({"action": "deploy", "parameters": {
        "app": "web", "image": "web", "host_port": 18001, "server_name": "x",
        "also_server_names": ["www.x", "y", "z"]}});
    assert!(validate(ToolName::ServicePlan, Some(&args(deploy))).is_ok());
    let nginx = json!({"action": "nginx_config", "parameters": {
        "app": "web", "server_name": "x", "also_server_names": []}});
    assert!(validate(ToolName::ServicePlan, Some(&args(nginx))).is_ok());
    let stop = json!({"action": "stop", "parameters": {}});
    assert_eq!(validate(ToolName::ServicePlan, Some(&args(stop))).unwrap_err().code, Code::MissingField);
    let id = "0123456789abcdef0123456789abcdef";
    let call = validate(ToolName::ServiceExecute, Some(&args(json!({"plan_id": id})))).unwrap();
    assert_eq!(call, Call::Execute { plan_id: PlanId::parse(id).unwrap(), signed_approval: None });
}

/// Issue 42: a signed approval's shape is checked before anything is sent
/// (the host alone judges its signature). Tried: a statement with its
/// block, the block alone, plain words, a number.
#[test]
fn a_signed_approval_is_carried_only_in_its_shape() {
    use crate::wire::signed::{SIGNATURE_BEGIN, SIGNATURE_END, STATEMENT_HEADER};
    let id = "0123456789abcdef0123456789abcdef";
    let block = format!("{SIGNATURE_BEGIN}\nU1NIU0lH\n{SIGNATURE_END}\n");
    let text = format!("{STATEMENT_HEADER}\nplan: {id}\n{block}");
    let call =
        validate(ToolName::ServiceExecute, Some(&args(json!({"plan_id": id, "signed_approval": text}))));
    let Ok(Call::Execute { signed_approval: Some(signed), .. }) = call else { panic!("{call:?}") };
    assert_eq!(signed.to_text(), text);
    for (bad, code) in [
        (json!(block), Code::SignedApprovalMalformed),
        (json!("approve it, please"), Code::SignedApprovalMalformed),
        (json!(1), Code::WrongType),
    ] {
        let refused =
            validate(ToolName::ServiceExecute, Some(&args(json!({"plan_id": id, "signed_approval": bad}))));
        assert_eq!(refused.unwrap_err().code, code);
    }
}

#[test]
fn every_bad_argument_is_refused_with_its_code() {
    use Code::{MissingField, NotAllowed, TooLarge, UnexpectedField, WrongType};
    let big = "x".repeat(MAX_ARGUMENT_BYTES);
    let table: Vec<(ToolName, Option<Value>, Code)> = vec![
        (ToolName::CloudCheck, None, MissingField),
        (ToolName::CloudCheck, Some(json!({})), MissingField),
        (ToolName::CloudCheck, Some(json!({"check": "disk", "host": "evil"})), UnexpectedField),
        (ToolName::CloudCheck, Some(json!({"check": "disk", "command": "rm -rf /"})), UnexpectedField),
        (ToolName::CloudCheck, Some(json!({"check": "disk", "path": "/etc"})), UnexpectedField),
        (ToolName::CloudCheck, Some(json!({"check": 1})), WrongType),
        (ToolName::CloudCheck, Some(json!({"check": ["disk"]})), WrongType),
        (ToolName::CloudCheck, Some(json!({"check": null})), WrongType),
        (ToolName::CloudCheck, Some(json!({"check": "Disk"})), NotAllowed),
        (ToolName::CloudCheck, Some(json!({"check": "disk; id"})), NotAllowed),
        (ToolName::CloudCheck, Some(json!({"check": big})), TooLarge),
        (ToolName::ServiceInventory, Some(json!({"approved": true})), UnexpectedField),
        (ToolName::ServicePlan, Some(json!({"action": "deploy"})), MissingField),
        (ToolName::ServicePlan, Some(json!({"action": "reboot", "parameters": {}})), NotAllowed),
        (ToolName::ServicePlan, Some(json!({"action": "restart", "parameters": {}})), MissingField),
        (ToolName::ServicePlan, Some(json!({"action": "stop", "parameters": "app=web"})), WrongType),
        (
            ToolName::ServicePlan,
            Some(json!({"action": "stop", "parameters": {"app": "web"}, "approved": true})),
            UnexpectedField,
        ),
        (
            ToolName::ServicePlan,
            Some(json!({"action": "stop", "parameters": {"app": "web", "command": "x"}})),
            UnexpectedField,
        ),
        (ToolName::ServicePlan, Some(json!({"action": "stop", "parameters": {}})), MissingField),
        (ToolName::ServicePlan, Some(json!({"action": "stop", "parameters": {"app": 7}})), WrongType),
        (
            ToolName::ServicePlan,
            Some(json!({"action": "deploy", "parameters": {
            "app": "web", "image": "web", "host_port": 70000, "container_port": 8080, "server_name": "x"}})),
            NotAllowed,
        ),
        (
            ToolName::ServicePlan,
            Some(json!({"action": "deploy", "parameters": {
            "app": "web", "image": "web", "host_port": 18001, "container_port": 80, "server_name": "x"}})),
            NotAllowed,
        ),
        (
            ToolName::ServicePlan,
            Some(json!({"action": "deploy", "parameters": {
            "app": "web", "image": "web", "host_port": 18001.5, "container_port": 8080, "server_name": "x"}})),
            WrongType,
        ),
        (
            ToolName::ServicePlan,
            Some(json!({"action": "deploy", "parameters": {
            "app": "web", "image": "web", "host_port": "18001", "container_port": 8080, "server_name": "x"}})),
            WrongType,
        ),
        (
            ToolName::ServicePlan,
            Some(json!({"action": "nginx_config", "parameters": {
            "app": "web", "server_name": "x", "also_server_names": "www.x"}})),
            WrongType,
        ),
        (
            ToolName::ServicePlan,
            Some(json!({"action": "nginx_config", "parameters": {
            "app": "web", "server_name": "x", "also_server_names": ["www.x", 1]}})),
            WrongType,
        ),
        (
            ToolName::ServicePlan,
            Some(json!({"action": "nginx_config", "parameters": {
            "app": "web", "server_name": "x", "also_server_names": ["a", "b", "c", "d"]}})),
            NotAllowed,
        ),
        (
            ToolName::ServicePlan,
            Some(json!({"action": "stop", "parameters": {"app": "web", "also_server_names": []}})),
            UnexpectedField,
        ),
        (ToolName::ServiceExecute, Some(json!({"plan_id": "0123456789ABCDEF0123456789ABCDEF"})), NotAllowed),
        (ToolName::ServiceExecute, Some(json!({"plan_id": "0123"})), NotAllowed),
        (
            ToolName::ServiceExecute,
            Some(json!({"plan_id": "0123456789abcdef0123456789abcdef\n"})),
            NotAllowed,
        ),
        (
            ToolName::ServiceExecute,
            Some(json!({"plan_id": "0123456789abcdef0123456789abcdef", "approved": true})),
            UnexpectedField,
        ),
    ];
    for (tool, arguments, code) in table {
        let map = arguments.clone().map(args);
        let refusal = validate(tool, map.as_ref())
            .expect_err(&format!("{} {arguments:?} must be refused", tool.as_str()));
        assert_eq!(refusal.code, code, "{} {arguments:?}: {}", tool.as_str(), refusal.message);
        assert!(refusal.message.ends_with("nothing was run."), "{}", refusal.message);
        assert!(refusal.message.len() < 400, "{}", refusal.message);
    }
}

#[test]
fn service_logs_arguments_are_checked_to_the_schema() {
    use crate::wire::ContainerRole;
    let call = |value: Value| validate(ToolName::ServiceLogs, Some(&args(value)));
    assert_eq!(
        call(json!({"app": "web", "container": "app"})).unwrap(),
        Call::Logs { app: "web".into(), container: ContainerRole::App.into(), tail: 50, since_minutes: None }
    );
    assert_eq!(
        call(json!({"app": "web", "container": "gateway", "tail": 200, "since_minutes": 1440})).unwrap(),
        Call::Logs {
            app: "web".into(),
            container: ContainerRole::Gateway.into(),
            tail: 200,
            since_minutes: Some(1440)
        }
    );
    assert_eq!(
        call(json!({"app": "web", "container": "app", "tail": 1, "since_minutes": 1})).unwrap(),
        Call::Logs {
            app: "web".into(),
            container: ContainerRole::App.into(),
            tail: 1,
            since_minutes: Some(1)
        }
    );
    // An accessory by its name (issue 40): whether the app has one is the helper's to say.
    let db = crate::wire::LogContainer::parse("db").unwrap();
    assert_eq!(
        call(json!({"app": "web", "container": "db"})).unwrap(),
        Call::Logs { app: "web".into(), container: db, tail: 50, since_minutes: None }
    );
    use Code::{MissingField, NotAllowed, UnexpectedField, WrongType};
    let table = [
        (json!({}), MissingField),
        (json!({"app": "web"}), MissingField),
        (json!({"container": "app"}), MissingField),
        (json!({"app": "web", "container": "app", "name": "prod"}), UnexpectedField),
        (json!({"app": "web", "container": "app", "container_id": "ab"}), UnexpectedField),
        (json!({"app": "web", "container": "App"}), NotAllowed),
        (json!({"app": "web", "container": "db;rm"}), NotAllowed),
        (json!({"app": 7, "container": "app"}), WrongType),
        (json!({"app": "web", "container": null}), WrongType),
        (json!({"app": "web", "container": "app", "tail": 0}), NotAllowed),
        (json!({"app": "web", "container": "app", "tail": 201}), NotAllowed),
        (json!({"app": "web", "container": "app", "tail": -1}), NotAllowed),
        (json!({"app": "web", "container": "app", "tail": "5"}), WrongType),
        (json!({"app": "web", "container": "app", "tail": 5.5}), WrongType),
        (json!({"app": "web", "container": "app", "since_minutes": 0}), NotAllowed),
        (json!({"app": "web", "container": "app", "since_minutes": 1441}), NotAllowed),
        (json!({"app": "web", "container": "app", "since_minutes": null}), WrongType),
    ];
    for (arguments, code) in table {
        let refusal = call(arguments.clone()).expect_err(&format!("{arguments} must be refused"));
        assert_eq!(refusal.code, code, "{arguments}: {}", refusal.message);
        assert!(refusal.message.ends_with("nothing was run."), "{}", refusal.message);
    }
    assert_eq!(
        call(json!({"app": "web", "container": "app", "tail": 201})).unwrap_err().message,
        "`tail` must be a whole number from 1 to 200 (got `201`); nothing was run."
    );
}

#[test]
fn refusals_name_what_is_allowed() {
    let refused = |tool, value| validate(tool, Some(&args(value))).unwrap_err().message;
    assert_eq!(
        refused(ToolName::CloudCheck, json!({"check": "cpu"})),
        "`check` must be one of identity, disk, web_status (got `cpu`); nothing was run."
    );
    assert_eq!(
        refused(ToolName::ServicePlan, json!({"action": "reboot", "parameters": {}})),
        "`action` must be one of deploy, nginx_config, stop, remove_image, remove_app, start, update, restart, rollback, run_task, backup, restore, expose, unexpose, update_accessory, rotate_credential (got `reboot`); nothing was run."
    );
    let deploy = json!({"action": "deploy", "parameters": {
        "app": "web", "image": "web", "host_port": 80, "container_port": 8080, "server_name": "x"}});
    assert_eq!(
        refused(ToolName::ServicePlan, deploy),
        "parameter `host_port` must be a port number from 1024 to 65535 and inside the operator's range, \
         which service_inventory shows as offer.port_range; nothing was run."
    );
}

#[test]
fn refused_names_are_escaped_and_capped() {
    let refusal = validate(ToolName::CloudCheck, Some(&args(json!({"check": "disk", "a\u{1b}[2J\nb": 1}))))
        .unwrap_err();
    assert!(!refusal.message.contains('\u{1b}') && !refusal.message.contains('\n'), "{}", refusal.message);
    let long = "y".repeat(500);
    let refusal = validate(ToolName::CloudCheck, Some(&args(json!({"check": long})))).unwrap_err();
    assert!(refusal.message.len() < 200, "{}", refusal.message);
}

/// Issue 43. What was tried: a batch size of 0 and 17, a wait of 301 s and
/// of "10", a rollout id that is not one, `rollout` with `plan_id`.
#[test]
fn a_rollouts_arguments_are_checked_to_the_schema() {
    let plan = |extra: Value| {
        let mut arguments = args(json!({"action": "update", "parameters": {"app": "web", "image": "web2"}}));
        arguments.extend(args(extra));
        validate(ToolName::ServicePlan, Some(&arguments))
    };
    match plan(json!({"batch_size": 3, "health_wait_seconds": 0})).unwrap() {
        Call::Plan { batches, .. } => {
            assert_eq!(batches, Batches { batch_size: Some(3), health_wait_seconds: Some(0) })
        }
        other => panic!("{other:?}"),
    }
    assert!(!matches!(plan(json!({})).unwrap(), Call::Plan { batches, .. } if batches.given()));
    for (extra, code) in [
        (json!({"batch_size": 0}), Code::NotAllowed),
        (json!({"batch_size": 17}), Code::NotAllowed),
        (json!({"health_wait_seconds": 301}), Code::NotAllowed),
        (json!({"health_wait_seconds": "10"}), Code::WrongType),
    ] {
        let refusal = plan(extra.clone()).unwrap_err();
        assert_eq!(refusal.code, code, "{extra}");
        assert!(refusal.message.ends_with("nothing was run."), "{}", refusal.message);
    }
    let id = "a".repeat(32);
    let call = validate(ToolName::ServiceExecute, Some(&args(json!({"rollout": id})))).unwrap();
    assert!(matches!(call, Call::ExecuteRollout { signed_approval: None, .. }), "{call:?}");
    let refusal = validate(ToolName::ServiceExecute, Some(&args(json!({"rollout": "x1"})))).unwrap_err();
    assert_eq!(refusal.code, Code::InvalidRolloutId);
    let both =
        validate(ToolName::ServiceExecute, Some(&args(json!({"rollout": id, "plan_id": id})))).unwrap_err();
    assert_eq!(both.code, Code::UnexpectedField, "{both:?}");
    // A rollout's signed approval with one plan: refused, nothing sent.
    let signed = format!(
        "{}\nrollout: x\n-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n",
        crate::wire::signed::ROLLOUT_HEADER
    );
    let alone =
        validate(ToolName::ServiceExecute, Some(&args(json!({"plan_id": id, "signed_approval": signed}))));
    assert_eq!(alone.unwrap_err().code, Code::RolloutApprovalAlone);
}
