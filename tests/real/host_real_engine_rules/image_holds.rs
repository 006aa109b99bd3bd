//! remove_image against what holds an image on the machine's real engine
//! (issue 28), through the real controller: an image committed from it
//! (a child), an extra tag, a stopped foreign container using it. Each is
//! refused at plan time with its own code; the same hold made between an
//! approved plan and its execute ends the plan `failed` (not_started) with
//! that code, the image untouched, and the next plan is accepted at once.
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
        let name = format!("t-hold-{}", lab.app);
        match self {
            Hold::Child => {
                docker_ok(&["create", "--name", &name, "--network", "none", image.as_str()]);
                let child = docker_ok(&["commit", "--change", "LABEL io.volce-lab.test=child", &name]);
                docker_ok(&["rm", &name]);
                let child = child.trim().to_owned();
                lab.extra_images.insert(0, child.clone());
                child
            }
            Hold::ExtraTag => {
                let tag = format!("volce-lab-test-{}:extra", lab.app);
                docker_ok(&["tag", image.as_str(), &tag]);
                lab.extra_images.insert(0, tag.clone());
                tag
            }
            Hold::ForeignContainer => {
                let id = docker_ok(&["create", "--name", &name, "--network", "none", image.as_str()]);
                lab.extra_containers.push(name);
                id.trim().to_owned()
            }
        }
    }

    fn undo(self, made: &str) {
        match self {
            // A tag beside the image's digest reference: only untagged.
            Hold::Child | Hold::ExtraTag => docker_ok(&["image", "rm", made]),
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
