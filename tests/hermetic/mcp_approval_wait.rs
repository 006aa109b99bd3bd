//! `service_execute` waits for the operator inside the call when the
//! client declared form elicitation (issue 24, 2025-11-25 mode): a form
//! names the plan, Accept only makes the server look again, the plan runs
//! once and only after the host says it is approved; Decline runs nothing;
//! a client without the capability gets today's answer. The same under
//! 2026-07-28 through `InputRequiredResult` and a sealed `requestState`,
//! which a tampered, replayed or foreign retry cannot get past. Against a
//! stand-in helper whose approval is a file the test writes (the
//! "operator"), through an rmcp client over an in-memory duplex.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, Implementation, ProtocolVersion,
};
use rmcp::service::{
    ClientLifecycleMode, RequestContext, RoleClient, RunningService, serve_client_with_lifecycle,
};
use rmcp::{ClientHandler, ErrorData};
use serde_json::{Value, json};

use crate::support::mcp::{arguments, structured};

const PLAN_ID: &str = "0123456789abcdef0123456789abcdef";

/// The stand-in helper: execute runs (and counts a run) only once the file
/// `approved` exists; inventory lists the plan, approved or not.
fn helper() -> String {
    let plan = |approved: bool| {
        json!({"status": "ok", "operation": "inventory", "result": {"plans": [{
            "plan_id": PLAN_ID, "action": "stop", "app": "shop", "state": "pending", "requester": "agent",
            "requested_at": "2026-12-02T05:00:00Z", "expires_at": "2099-01-01T00:00:00Z",
            "requires_approval": true, "approved": approved}]}})
    };
    let refused = json!({"status": "rejected", "code": "approval_required", "message":
        format!("An operator must approve this plan on the server first: ask them to run `sudo volce-lab-host show {PLAN_ID}` there and approve it with the command show prints; nothing ran.")});
    let done = json!({"status": "ok", "operation": "execute", "result": {"plan_id": PLAN_ID, "outcome": "completed"}});
    format!(
        r#"echo x >> "$DIR/rpc_calls"; cat > "$DIR/request"
if grep -q '"operation":"execute"' "$DIR/request"; then
  if [ -e "$DIR/approved" ]; then echo x >> "$DIR/executed"; printf '%s\n' '{done}'; else printf '%s\n' '{refused}'; exit 1; fi
elif [ -e "$DIR/approved" ]; then printf '%s\n' '{yes}'; else printf '%s\n' '{no}'; fi"#,
        yes = plan(true),
        no = plan(false),
    )
}

/// How the scripted user answers each form.
#[derive(Clone, Copy, PartialEq, Eq)]
enum User {
    /// Accepts every form; the operator approves after form `n` was shown
    /// (0: never).
    AcceptsOperatorApprovesAfter(usize),
    Declines,
}

#[derive(Clone)]
struct FormClient {
    user: User,
    dir: PathBuf,
    forms: Arc<Mutex<Vec<String>>>,
    elicitation: bool,
    version: ProtocolVersion,
    /// When each accept was handed back.
    accepted: Arc<Mutex<Vec<std::time::Instant>>>,
}

impl ClientHandler for FormClient {
    fn get_info(&self) -> ClientConfig {
        let capabilities: ClientCapabilities = if self.elicitation {
            serde_json::from_value(json!({"elicitation": {"form": {}}})).unwrap()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(capabilities, Implementation::new("form-client", "1"))
            .with_protocol_version(self.version.clone())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } = request else {
            panic!("only forms are asked for");
        };
        assert!(requested_schema.properties.is_empty(), "the form asks for no data");
        let shown = {
            let mut forms = self.forms.lock().unwrap();
            forms.push(message);
            forms.len()
        };
        match self.user {
            User::Declines => Ok(ElicitResult::new(ElicitationAction::Decline)),
            User::AcceptsOperatorApprovesAfter(n) => {
                if n != 0 && shown == n {
                    std::fs::write(self.dir.join("approved"), "").unwrap();
                }
                self.accepted.lock().unwrap().push(std::time::Instant::now());
                Ok(ElicitResult::new(ElicitationAction::Accept))
            }
        }
    }
}

struct World {
    client: RunningService<RoleClient, FormClient>,
    forms: Arc<Mutex<Vec<String>>>,
    accepted: Arc<Mutex<Vec<std::time::Instant>>>,
    dir: tempfile::TempDir,
}

async fn start(user: User, elicitation: bool) -> World {
    start_at(user, elicitation, ProtocolVersion::V_2025_11_25).await
}

async fn start_at(user: User, elicitation: bool, version: ProtocolVersion) -> World {
    let dir = tempfile::tempdir().unwrap();
    let client_io = crate::support::mcp::serve_in_memory(dir.path(), helper());
    let forms = Arc::new(Mutex::new(Vec::new()));
    let handler = FormClient {
        user,
        dir: dir.path().to_owned(),
        forms: forms.clone(),
        elicitation,
        version: version.clone(),
        accepted: Default::default(),
    };
    let accepted = handler.accepted.clone();
    let lifecycle = if version >= ProtocolVersion::V_2026_07_28 {
        ClientLifecycleMode::Discover { preferred_versions: vec![version.clone()] }
    } else {
        ClientLifecycleMode::Initialize
    };
    let client = serve_client_with_lifecycle(handler, client_io, lifecycle).await.expect("open the session");
    let spoken = client.peer_info().expect("the server's answer").protocol_version.clone();
    assert_eq!(spoken, version, "the session speaks the version under test");
    World { client, forms, accepted, dir }
}

impl World {
    async fn call(&self, name: &str, args: Value) -> Value {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments(args));
        let result = self.client.call_tool(params).await.unwrap();
        let tools = self.client.list_all_tools().await.unwrap();
        structured(tools.iter().find(|t| t.name == name).unwrap(), &result)
    }

    async fn execute(&self) -> Value {
        let identity = self.call("cloud_check", json!({"check": "identity"})).await;
        assert_eq!(identity["status"], "ok", "{identity}");
        self.call("service_execute", json!({"plan_id": PLAN_ID})).await
    }

    fn count(&self, name: &str) -> usize {
        count(self.dir.path(), name)
    }
}

fn count(dir: &Path, name: &str) -> usize {
    std::fs::read_to_string(dir.join(name)).map(|t| t.lines().count()).unwrap_or(0)
}

#[tokio::test]
async fn accept_before_the_operator_approved_runs_nothing_and_the_plan_runs_once_after() {
    // The operator approves while the second form is shown.
    let world = start(User::AcceptsOperatorApprovesAfter(2), true).await;
    let result = world.execute().await;
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(world.count("executed"), 1, "exactly one execution, after the approval");
    let forms = world.forms.lock().unwrap().clone();
    assert_eq!(forms.len(), 2, "the first accept found the plan unapproved and asked again: {forms:?}");
    let form = &forms[0];
    for part in [
        "Target: course-demo",
        &format!("Plan: {PLAN_ID}"),
        "Action: stop of app shop",
        "Time left: ",
        &format!("sudo volce-lab-host show {PLAN_ID}"),
        "accepting approves nothing",
    ] {
        assert!(form.contains(part), "the form names {part:?}: {form}");
    }
    // execute (refused), inventory, inventory, inventory (approved), execute.
    assert_eq!(world.count("rpc_calls"), 5);
    let round = world.accepted.lock().unwrap()[1].elapsed();
    eprintln!("elicitation path, stand-in helper: accept -> result {round:?} (one look, one execute)");
}

#[tokio::test]
async fn accepting_every_form_while_the_operator_never_approves_runs_nothing() {
    let world = start(User::AcceptsOperatorApprovesAfter(0), true).await;
    let result = world.execute().await;
    assert_eq!(result["status"], "rejected", "{result}");
    assert_eq!(result["code"], "approval_required");
    assert!(
        result["message"].as_str().unwrap().contains("had not approved the plan after 5 looks"),
        "{result}"
    );
    assert_eq!(world.forms.lock().unwrap().len(), 5, "bounded rounds");
    assert_eq!(world.count("executed"), 0);
}

#[tokio::test]
async fn decline_answers_approval_required_with_the_users_decline_and_runs_nothing() {
    let world = start(User::Declines, true).await;
    let result = world.execute().await;
    assert_eq!(result["code"], "approval_required", "{result}");
    assert!(result["message"].as_str().unwrap().starts_with("The user declined"), "{result}");
    assert_eq!(world.count("executed"), 0);
    assert_eq!(world.forms.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_client_without_form_elicitation_gets_todays_answer_and_no_form() {
    let world = start(User::AcceptsOperatorApprovesAfter(1), false).await;
    let result = world.execute().await;
    assert_eq!(result["code"], "approval_required", "{result}");
    assert!(result["message"].as_str().unwrap().contains("An operator must approve"), "{result}");
    assert!(world.forms.lock().unwrap().is_empty());
    assert_eq!(world.count("rpc_calls"), 1, "one execute, nothing more");
}

// --- 2026-07-28: InputRequiredResult and the sealed requestState -------------

const STATELESS: ProtocolVersion = ProtocolVersion::V_2026_07_28;

#[tokio::test]
async fn under_2026_07_28_the_form_travels_in_input_required_and_the_plan_runs_once_after_approval() {
    // rmcp's client drives the input_required rounds through its handler.
    let world = start_at(User::AcceptsOperatorApprovesAfter(2), true, STATELESS).await;
    let result = world.execute().await;
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(world.count("executed"), 1);
    let forms = world.forms.lock().unwrap().clone();
    assert_eq!(forms.len(), 2, "{forms:?}");
    assert!(forms[0].contains(&format!("sudo volce-lab-host show {PLAN_ID}")), "{}", forms[0]);
}

#[tokio::test]
async fn under_2026_07_28_a_decline_asks_the_host_nothing_and_runs_nothing() {
    let world = start_at(User::Declines, true, STATELESS).await;
    let result = world.execute().await;
    assert_eq!(result["code"], "approval_required", "{result}");
    assert!(result["message"].as_str().unwrap().starts_with("The user declined"), "{result}");
    assert_eq!(world.count("executed"), 0);
    // The first execute and its look; the retry's decline asked nothing.
    assert_eq!(world.count("rpc_calls"), 2);
}

fn execute_params(state: Option<String>, action: &str) -> CallToolRequestParams {
    let mut params =
        CallToolRequestParams::new("service_execute").with_arguments(arguments(json!({"plan_id": PLAN_ID})));
    params.request_state = state;
    params.input_responses = Some(
        [("operator_approval".to_owned(), json!({"action": action, "content": {}}))].into_iter().collect(),
    );
    params
}

/// One round by hand: the result's structured content, or the state of
/// an InputRequiredResult.
async fn once(world: &World, params: CallToolRequestParams) -> Result<Value, String> {
    match world.client.peer().call_tool_once(params).await.unwrap() {
        rmcp::model::CallToolResponse::Complete(result) => Ok(result.structured_content.unwrap()),
        rmcp::model::CallToolResponse::InputRequired(ask) => Err(ask.request_state.expect("a sealed state")),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn a_tampered_replayed_or_foreign_request_state_is_refused_with_its_own_code_and_runs_nothing() {
    let world = start_at(User::Declines, true, STATELESS).await;
    let identity = world.call("cloud_check", json!({"check": "identity"})).await;
    assert_eq!(identity["status"], "ok");
    let first =
        CallToolRequestParams::new("service_execute").with_arguments(arguments(json!({"plan_id": PLAN_ID})));
    let state = once(&world, first).await.expect_err("input required");
    // One character changed.
    let mut tampered = state.clone().into_bytes();
    let last = tampered.len() - 1;
    tampered[last] = if tampered[last] == b'0' { b'1' } else { b'0' };
    let refused =
        once(&world, execute_params(Some(String::from_utf8(tampered).unwrap()), "accept")).await.unwrap();
    assert_eq!(refused["code"], "request_state_tampered", "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("nothing ran"), "{refused}");
    // The real state, accepted: the host is asked, not approved, asked again.
    let next = once(&world, execute_params(Some(state.clone()), "accept")).await.expect_err("asked again");
    assert_ne!(next, state, "a new state each round");
    // The spent state again: replayed.
    let replayed = once(&world, execute_params(Some(state), "accept")).await.unwrap();
    assert_eq!(replayed["code"], "request_state_replayed", "{replayed}");
    // A state of another server process (another key): foreign.
    let other = start_at(User::Declines, true, STATELESS).await;
    let identity = other.call("cloud_check", json!({"check": "identity"})).await;
    assert_eq!(identity["status"], "ok");
    let foreign = once(&other, execute_params(Some(next.clone()), "accept")).await.unwrap();
    assert_eq!(foreign["code"], "request_state_foreign", "{foreign}");
    // Another call's arguments with our state: foreign too.
    let mut params = execute_params(Some(next), "accept");
    params.arguments = Some(arguments(json!({"plan_id": "f".repeat(32)})));
    let moved = once(&world, params).await.unwrap();
    assert_eq!(moved["code"], "request_state_foreign", "{moved}");
    for w in [&world, &other] {
        assert_eq!(w.count("executed"), 0, "nothing ran");
    }
}

#[tokio::test]
async fn a_2026_client_without_form_elicitation_gets_todays_answer() {
    let world = start_at(User::AcceptsOperatorApprovesAfter(1), false, STATELESS).await;
    let result = world.execute().await;
    assert_eq!(result["code"], "approval_required", "{result}");
    assert!(world.forms.lock().unwrap().is_empty());
    assert_eq!(world.count("rpc_calls"), 1);
}
