//! remove_image against what holds an image on the machine's real engine
//! (issue 28), through the real controller: an image committed from it
//! (a child), an extra tag, a stopped foreign container using it. Each is
//! refused at plan time with its own code; the same hold made between an
//! approved plan and its execute ends the plan `failed` (not_started) with
//! that code, the image untouched, and the next plan is accepted at once.
//! Made after the last check, just before `docker image rm` (an engine
//! that makes it there), docker's refusal is verified: `engine_refused`,
//! `failed`, nothing blocked.
//! Only this test's image and what the test itself makes are touched.

use super::*;

/// One thing that holds the image, made and undone by the test.
#[derive(Clone, Copy, Debug)]
enum Hold {
    Child,
    ExtraTag,
    ForeignContainer,
}

impl Hold {
    fn code(self) -> &'static str {
        match self {
            Hold::Child => "image_has_children",
            Hold::ExtraTag => "image_has_references",
            Hold::ForeignContainer => "image_in_use",
        }
    }

    /// Makes the hold; returns what `undo` removes (also registered with
    /// the lab, so a failing test still cleans up).
    fn make(self, lab: &mut Lab, image: &ImageId) -> String {
        let made = self.make_for(&lab.app, image);
        self.register(lab, &made);
        made
    }

    /// Makes the hold, named after `app`, without the lab.
    fn make_for(self, app: &str, image: &ImageId) -> String {
        let name = format!("t-hold-{app}");
        match self {
            Hold::Child => {
                docker_ok(&["create", "--name", &name, "--network", "none", image.as_str()]);
                let child = docker_ok(&["commit", "--change", "LABEL io.volce-lab.test=child", &name]);
                docker_ok(&["rm", &name]);
                child.trim().to_owned()
            }
            Hold::ExtraTag => {
                let tag = format!("volce-lab-test-{app}:extra");
                docker_ok(&["tag", image.as_str(), &tag]);
                tag
            }
            Hold::ForeignContainer => {
                docker_ok(&["create", "--name", &name, "--network", "none", image.as_str()]).trim().to_owned()
            }
        }
    }

    /// Registers what was made with the lab's drop guard (images before
    /// their parents).
    fn register(self, lab: &mut Lab, made: &str) {
        match self {
            Hold::Child | Hold::ExtraTag => lab.extra_images.insert(0, made.to_owned()),
            Hold::ForeignContainer => lab.extra_containers.push(made.to_owned()),
        }
    }

    fn undo(self, made: &str) {
        match self {
            // --no-prune: never the image under test with the child. A tag
            // beside the image's digest reference is only untagged.
            Hold::Child | Hold::ExtraTag => docker_ok(&["image", "rm", "--no-prune", made]),
            Hold::ForeignContainer => docker_ok(&["rm", made]),
        };
    }
}

const HOLDS: [Hold; 3] = [Hold::Child, Hold::ExtraTag, Hold::ForeignContainer];

#[test]
#[ignore = "real parts: run by scripts/test"]
fn remove_image_is_refused_while_held_and_a_hold_made_after_the_plan_ends_it_failed() {
    let _turn = take_turn();
    let mut lab = Lab::new("rhold");
    let (reference, image) = unique_web_image(&mut lab);
    let policy_dir = tempfile::tempdir().unwrap();
    let mut policy = lab.policy.clone();
    policy["catalog"]["rmi"] = json!(reference);
    let policy_path = policy_dir.path().join("policy.json");
    std::fs::write(&policy_path, policy.to_string()).unwrap();
    let mut host = Host::with_policy(lab, policy_path);
    // Deployed, then removed: the claim on the image stays, no container uses it.
    host.deploy("rmi");
    let id = host.planned("remove_app", json!({"app": host.lab.app}));
    host.approve(&id);
    assert_eq!(host.execute(&id)["result"]["outcome"], "completed");
    let remove = json!({"image_id": image.to_string()});
    let references = || {
        docker_ok(&[
            "image",
            "inspect",
            "--format",
            "{{json .RepoTags}} {{json .RepoDigests}}",
            image.as_str(),
        ])
    };
    let before = references();

    for hold in HOLDS {
        let made = hold.make(&mut host.lab, &image);
        let refused = host.plan("remove_image", remove.clone());
        assert_eq!(refused["code"], hold.code(), "{hold:?} at plan time: {refused}");
        hold.undo(&made);
    }

    for hold in HOLDS {
        let id = host.planned("remove_image", remove.clone());
        host.approve(&id);
        let made = hold.make(&mut host.lab, &image);
        let failed = host.execute(&id);
        assert_eq!(failed["status"], "rejected", "{hold:?}: {failed}");
        assert_eq!(failed["code"], hold.code(), "{hold:?} after the plan: {failed}");
        let stored = host.plan_json(&id);
        assert_eq!(
            (stored["state"].as_str(), stored["outcome"].as_str()),
            (Some("failed"), Some("not_started")),
            "{hold:?}: {stored}"
        );
        assert!(docker(&["image", "inspect", image.as_str()]).0, "{hold:?}: the image is still there");
        hold.undo(&made);
        assert_eq!(references(), before, "{hold:?}: its references are as they were");
    }

    // Nothing blocks: the next plan is accepted at once and, with nothing
    // holding the image, removes it.
    let id = host.planned("remove_image", remove);
    host.approve(&id);
    assert_eq!(host.execute(&id)["result"]["outcome"], "completed");
    assert!(!docker(&["image", "inspect", image.as_str()]).0, "the image is gone");
}

/// The real engine with one thing added: `remove_image` first makes the
/// hold, after the controller's last check and before docker's `image rm`:
/// the narrowest race there is, made on purpose.
struct HoldBeforeRemoval {
    engine: DockerClient,
    hold: Hold,
    app: String,
    /// What it made, for the test to undo.
    made: std::sync::Arc<Mutex<Option<String>>>,
}

impl Engine for HoldBeforeRemoval {
    fn remove_image(&self, image: &ImageId) -> Result<(), EngineError> {
        *self.made.lock().unwrap() = Some(self.hold.make_for(&self.app, image));
        self.engine.remove_image(image)
    }
    fn image_holds(&self, image: &ImageId) -> Result<Option<volce_lab::vocab::ImageHolds>, EngineError> {
        self.engine.image_holds(image)
    }
    fn snapshot(&self) -> Result<Snapshot, EngineError> {
        self.engine.snapshot()
    }
    fn resolve_image(&self, reference: &volce_lab::vocab::ImageRef) -> Result<Option<ImageId>, EngineError> {
        self.engine.resolve_image(reference)
    }
    fn image_volumes(
        &self,
        reference: &volce_lab::vocab::ImageRef,
    ) -> Result<Option<Vec<String>>, EngineError> {
        self.engine.image_volumes(reference)
    }
    fn gateway_answers(&self, port: u16, server_name: &volce_lab::vocab::ServerName) -> bool {
        self.engine.gateway_answers(port, server_name)
    }
    fn edge_name(&self, name: &volce_lab::vocab::ServerName) -> volce_lab::vocab::EdgeNameFacts {
        self.engine.edge_name(name)
    }
    fn edge_answers(
        &self,
        https: std::net::SocketAddr,
        name: &volce_lab::vocab::ServerName,
        path: &volce_lab::vocab::HealthPath,
    ) -> volce_lab::vocab::HttpsAnswer {
        self.engine.edge_answers(https, name, path)
    }
    fn plan_networks(
        &self,
        plan: &volce_lab::vocab::PlanId,
    ) -> Result<Vec<volce_lab::docker::LabelledNetwork>, EngineError> {
        self.engine.plan_networks(plan)
    }
    fn run_task(&self, spec: &volce_lab::vocab::TaskSpec) -> Result<volce_lab::logs::TaskRun, EngineError> {
        self.engine.run_task(spec)
    }
    fn backup(
        &self,
        spec: &volce_lab::vocab::BackupSpec,
    ) -> Result<volce_lab::vocab::BackupRun, EngineError> {
        self.engine.backup(spec)
    }
    fn restore(
        &self,
        spec: &volce_lab::vocab::RestoreSpec,
        progress: &dyn volce_lab::docker::ProgressSink,
    ) -> Result<volce_lab::vocab::RestoreRun, EngineError> {
        self.engine.restore(spec, progress)
    }
    fn edge_apply(&self, change: &volce_lab::vocab::EdgeChange) -> Result<(), EngineError> {
        self.engine.edge_apply(change)
    }
    fn host_port_free(&self, port: u16) -> bool {
        self.engine.host_port_free(port)
    }
    fn capacity(&self) -> Result<Capacity, EngineError> {
        self.engine.capacity()
    }
    fn deploy(
        &self,
        spec: &DeploySpec,
        progress: &dyn volce_lab::docker::ProgressSink,
    ) -> Result<Deployed, EngineError> {
        self.engine.deploy(spec, progress)
    }
    fn update_nginx(
        &self,
        app_dir: &Path,
        gateway: &ContainerId,
        old: &str,
        new: &str,
    ) -> Result<(), EngineError> {
        self.engine.update_nginx(app_dir, gateway, old, new)
    }
    fn stop(&self, containers: &[ContainerId]) -> Result<(), EngineError> {
        self.engine.stop(containers)
    }
    fn remove_app(&self, removal: &AppRemoval<'_>) -> Result<(), EngineError> {
        self.engine.remove_app(removal)
    }
    fn remove_container(&self, container: &ContainerId) -> Result<(), EngineError> {
        self.engine.remove_container(container)
    }
    fn start(
        &self,
        spec: &volce_lab::vocab::StartSpec,
        progress: &dyn volce_lab::docker::ProgressSink,
    ) -> Result<(), EngineError> {
        self.engine.start(spec, progress)
    }
    fn update(
        &self,
        spec: &volce_lab::vocab::UpdateSpec,
        progress: &dyn volce_lab::docker::ProgressSink,
    ) -> Result<ContainerId, EngineError> {
        self.engine.update(spec, progress)
    }
    fn update_accessory(
        &self,
        spec: &volce_lab::vocab::AccessoryUpdateSpec,
        progress: &dyn volce_lab::docker::ProgressSink,
    ) -> Result<ContainerId, EngineError> {
        self.engine.update_accessory(spec, progress)
    }
    fn rotate_credential(
        &self,
        spec: &volce_lab::vocab::RotationSpec,
        progress: &dyn volce_lab::docker::ProgressSink,
    ) -> Result<ContainerId, EngineError> {
        self.engine.rotate_credential(spec, progress)
    }
    fn logs(
        &self,
        container: &ContainerId,
        window: volce_lab::docker::LogWindow,
    ) -> Result<volce_lab::docker::LogStreams, EngineError> {
        self.engine.logs(container, window)
    }
    fn container_env(&self, container: &ContainerId) -> Result<Vec<String>, EngineError> {
        self.engine.container_env(container)
    }
}

#[test]
#[ignore = "real parts: run by scripts/test"]
fn a_hold_made_just_before_image_rm_is_a_verified_refusal_that_blocks_nothing() {
    let _turn = take_turn();
    let mut lab = Lab::new("rrace");
    let (reference, image) = unique_web_image(&mut lab);
    let policy_dir = tempfile::tempdir().unwrap();
    let mut policy = lab.policy.clone();
    policy["catalog"]["rmi"] = json!(reference);
    let policy_path = policy_dir.path().join("policy.json");
    std::fs::write(&policy_path, policy.to_string()).unwrap();
    let mut host = Host::with_policy(lab, policy_path);
    host.deploy("rmi");
    let id = host.planned("remove_app", json!({"app": host.lab.app}));
    host.approve(&id);
    assert_eq!(host.execute(&id)["result"]["outcome"], "completed");
    let remove = json!({"image_id": image.to_string()});
    let references = || {
        docker_ok(&[
            "image",
            "inspect",
            "--format",
            "{{json .RepoTags}} {{json .RepoDigests}}",
            image.as_str(),
        ])
    };
    let before = references();

    for hold in HOLDS {
        let id = host.planned("remove_image", remove.clone());
        host.approve(&id);
        let made = std::sync::Arc::new(Mutex::new(None::<String>));
        let engine = HoldBeforeRemoval {
            engine: DockerClient::new(host.paths.state_dir.clone()),
            hold,
            app: host.lab.app.clone(),
            made: made.clone(),
        };
        let reply = host.rpc_with(engine, AGENT, json!({"operation": "execute", "plan_id": id}));
        let made = made.lock().unwrap().clone().expect("the engine made the hold");
        hold.register(&mut host.lab, &made);
        assert_eq!(reply["status"], "rejected", "{hold:?}: {reply}");
        assert_eq!(reply["code"], "engine_refused", "{hold:?}: {reply}");
        let stored = host.plan_json(&id);
        assert_eq!(
            (stored["state"].as_str(), stored["outcome"].as_str()),
            (Some("failed"), Some("not_started")),
            "{hold:?}: {stored}"
        );
        assert!(docker(&["image", "inspect", image.as_str()]).0, "{hold:?}: the image is still there");
        hold.undo(&made);
        assert_eq!(references(), before, "{hold:?}: its references are as they were");
    }
    // Nothing blocks: the next plan removes it.
    let id = host.planned("remove_image", remove);
    host.approve(&id);
    assert_eq!(host.execute(&id)["result"]["outcome"], "completed");
    assert!(!docker(&["image", "inspect", image.as_str()]).0, "the image is gone");
}
