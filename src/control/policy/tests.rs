//! The policy loader: good policies, and every bad key refused by name.

use super::*;
use serde_json::{Value, json};

pub(crate) fn sample() -> Value {
    json!({
        "catalog": {"web": format!("127.0.0.1:15000/volce-lab/web@sha256:{}", "a".repeat(64))},
        "nginx_image": format!("127.0.0.1:15000/volce-lab/gateway@sha256:{}", "b".repeat(64)),
        "approvers": ["alice"]
    })
}

pub(crate) fn sample_policy() -> Policy {
    Policy::from_json(sample().to_string().as_bytes()).unwrap()
}

fn with(patch: impl FnOnce(&mut Value)) -> Result<Policy, PolicyError> {
    let mut value = sample();
    patch(&mut value);
    Policy::from_json(value.to_string().as_bytes())
}

#[test]
fn minimal_policy_gets_the_documented_defaults() {
    let policy = sample_policy();
    assert_eq!(policy.port_range, (18000, 18999));
    assert_eq!(policy.max_apps, 4);
    assert_eq!(policy.capacity, CapacityFloors { min_free_memory_mib: 1536, min_free_disk_mib: 3072 });
    assert_eq!(policy.limits.memory_bytes, 256 * MIB);
    assert_eq!(policy.limits.millicpus, 500);
    assert_eq!(policy.limits.pids, 128);
    assert_eq!(policy.limits.log_max_files, 3);
}

#[test]
fn writing_a_default_out_does_not_change_the_hash() {
    let explicit = with(|v| v["max_apps"] = json!(4)).unwrap();
    assert_eq!(explicit.hash(), sample_policy().hash());
    let changed = with(|v| v["max_apps"] = json!(3)).unwrap();
    assert_ne!(changed.hash(), sample_policy().hash());
}

#[test]
fn unknown_fields_are_refused() {
    let error = with(|v| v["allow_everything"] = json!(true)).unwrap_err();
    assert!(error.0.contains("unknown field"), "{error}");
    assert!(with(|v| v["limits"] = json!({"privileged": true})).is_err());
    assert!(with(|v| v["capacity"] = json!({"min_free_cpu": 1})).is_err());
}

#[test]
fn unpinned_references_are_refused() {
    for reference in [
        "nginx:latest".to_owned(),
        "nginx".to_owned(),
        format!("nginx@sha256:{}", "A".repeat(64)),
        format!("nginx@sha256:{}", "a".repeat(63)),
        format!("@sha256:{}", "a".repeat(64)),
        format!("Nginx@sha256:{}", "a".repeat(64)),
        format!("nginx latest@sha256:{}", "a".repeat(64)),
    ] {
        assert!(with(|v| v["catalog"]["web"] = json!(reference)).is_err(), "{reference}");
        assert!(with(|v| v["nginx_image"] = json!(reference)).is_err(), "{reference}");
        assert!(serde_json::from_value::<ImageRef>(json!(reference)).is_err(), "{reference}");
    }
}

#[test]
fn bad_catalog_keys_are_refused_and_an_empty_catalog_is_valid() {
    let pinned = format!("x@sha256:{}", "c".repeat(64));
    assert!(with(|v| v["catalog"] = json!({"Web": pinned})).is_err());
    assert!(with(|v| v["catalog"] = json!({"a b": pinned})).is_err());
    // Issue 37: setup's skeleton starts empty; the operator pins from there.
    assert!(with(|v| v["catalog"] = json!({})).unwrap().catalog.is_empty());
}

#[test]
fn bad_numbers_are_refused() {
    assert!(with(|v| v["port_range"] = json!([80, 18999])).is_err());
    assert!(with(|v| v["port_range"] = json!([19000, 18000])).is_err());
    assert!(with(|v| v["port_range"] = json!([18000, 70000])).is_err());
    assert!(with(|v| v["max_apps"] = json!(0)).is_err());
    assert!(with(|v| v["max_apps"] = json!(true)).is_err());
    assert!(with(|v| v["limits"] = json!({"cpus": 0})).is_err());
    assert!(with(|v| v["limits"] = json!({"memory_mib": 1})).is_err());
    assert!(with(|v| v["limits"] = json!({"pids": 0})).is_err());
}

#[test]
fn plan_ttl_seconds_defaults_to_600_and_is_refused_outside_60_to_3600_naming_the_key() {
    assert_eq!(sample_policy().plan_ttl_seconds, 600);
    assert_eq!(sample_policy().terms(Action::Stop, "h").ttl_seconds, 600);
    assert_eq!(with(|v| v["plan_ttl_seconds"] = json!(60)).unwrap().plan_ttl_seconds, 60);
    assert_eq!(with(|v| v["plan_ttl_seconds"] = json!(3600)).unwrap().plan_ttl_seconds, 3600);
    // Tried: one below, one above, a string, a float, a negative, a boolean, null.
    for bad in [json!(59), json!(3601), json!("600"), json!(600.0), json!(-1), json!(true), Value::Null] {
        let error = with(|v| v["plan_ttl_seconds"] = bad.clone()).unwrap_err();
        assert!(error.0.contains("plan_ttl_seconds") && error.0.contains("60 to 3600"), "{bad}: {error}");
    }
}

#[test]
fn approval_required_keeps_the_fixed_minimum_and_accepts_only_additions() {
    let minimum = sample_policy();
    assert_eq!(
        minimum.approval_required,
        [
            Action::Stop,
            Action::RemoveImage,
            Action::RemoveApp,
            Action::Start,
            Action::Update,
            Action::Restart,
            Action::Rollback,
            Action::RunTask,
            Action::Restore,
            Action::Expose,
            Action::Unexpose,
            Action::UpdateAccessory,
            Action::RotateCredential
        ]
    );
    let all = with(|v| {
        v["approval_required"] = json!([
            "nginx_config",
            "remove_image",
            "update",
            "deploy",
            "stop",
            "backup",
            "start",
            "remove_app"
        ])
    })
    .unwrap();
    assert_eq!(all.approval_required, Action::ALL, "kept in one order, whatever was written");
    assert!(all.terms(Action::Deploy, "h").requires_approval);
    assert!(!minimum.terms(Action::Deploy, "h").requires_approval);
    // A list that leaves fixed actions out still requires them: the policy
    // of a helper from before start and update (or restart) joined the
    // minimum, an empty list, and a list naming only an addition.
    for partial in [
        json!(["stop", "remove_image", "remove_app"]),
        json!([]),
        json!(["deploy"]),
        json!(["remove_image", "remove_app", "start", "update"]),
        json!(["stop", "remove_image", "remove_app", "start", "update"]),
    ] {
        let policy = with(|v| v["approval_required"] = partial.clone()).unwrap();
        for action in [
            Action::Stop,
            Action::RemoveImage,
            Action::RemoveApp,
            Action::Start,
            Action::Update,
            Action::Restart,
            Action::Rollback,
        ] {
            assert!(policy.terms(action, "h").requires_approval, "{partial}: {action:?}");
        }
        assert_eq!(
            policy.terms(Action::Deploy, "h").requires_approval,
            partial == json!(["deploy"]),
            "{partial}"
        );
    }
    // Tried: an unknown action, a repeat, a string instead of a list, a number.
    for (bad, words) in [
        (
            json!(["stop", "remove_image", "remove_app", "start", "update", "shell"]),
            "\"shell\" is not an action",
        ),
        (json!(["stop", "remove_image", "remove_app", "start", "update", "stop"]), "lists stop twice"),
        (json!("stop"), "must be a list"),
        (json!(["stop", "remove_image", "remove_app", "start", "update", 1]), "1 is not an action"),
    ] {
        let error = with(|v| v["approval_required"] = bad.clone()).unwrap_err();
        assert!(error.0.contains("approval_required") && error.0.contains(words), "{bad}: {error}");
    }
}

#[test]
fn the_new_keys_at_their_defaults_do_not_change_the_hash() {
    let explicit = with(|v| {
        v["plan_ttl_seconds"] = json!(600);
        v["approval_required"] = json!(["update", "remove_app", "start", "remove_image", "stop"]);
    })
    .unwrap();
    assert_eq!(explicit.hash(), sample_policy().hash(), "plans made before the keys existed stay valid");
    assert_ne!(with(|v| v["plan_ttl_seconds"] = json!(601)).unwrap().hash(), sample_policy().hash());
    let deploy = with(|v| {
        v["approval_required"] = json!(["stop", "remove_image", "remove_app", "start", "update", "deploy"])
    })
    .unwrap();
    assert_ne!(deploy.hash(), sample_policy().hash());
}

#[test]
fn approvers_must_be_user_names_listed_once() {
    assert!(with(|v| v["approvers"] = json!(["root; rm"])).is_err());
    assert!(with(|v| v["approvers"] = json!(["alice", "alice"])).is_err());
    assert!(
        with(|v| {
            v.as_object_mut().unwrap().remove("approvers");
        })
        .is_err()
    );
    assert!(with(|v| v["approvers"] = json!([])).is_ok());
}

fn web_ref() -> String {
    format!("127.0.0.1:15000/volce-lab/web@sha256:{}", "a".repeat(64))
}

#[test]
fn a_catalog_object_says_the_port_and_the_health_path() {
    let policy = with(|v| {
        v["catalog"]["api"] = json!({"image": web_ref(), "container_port": 3000, "health_path": "/healthz"})
    })
    .unwrap();
    let api = &policy.catalog["api"];
    assert_eq!(api.image.as_str(), web_ref());
    assert_eq!(api.container_port, Some(3000));
    assert_eq!(api.health_path.as_str(), "/healthz");
    // A bare reference keeps today's meaning: no port, the check asks `/`.
    assert_eq!(policy.catalog["web"], CatalogEntry::bare(ImageRef::parse(&web_ref()).unwrap()));
    // Tried: an object with only the image, and with the defaults written out.
    let only_image = with(|v| v["catalog"]["web"] = json!({"image": web_ref()})).unwrap();
    assert_eq!(only_image.catalog["web"], policy.catalog["web"]);
    let root = with(|v| v["catalog"]["web"] = json!({"image": web_ref(), "health_path": "/"})).unwrap();
    assert_eq!(root.catalog["web"], policy.catalog["web"]);
}

/// The digest a plan is sealed with: a policy that does not use the object
/// form serializes its catalog as bare strings, exactly as before objects
/// existed, so plans made before the upgrade stay valid; an object that
/// says no more than a bare reference hashes as one; a port or health path
/// changes the digest (and so voids pending plans, as any policy change).
#[test]
fn catalog_objects_count_in_the_hash_only_for_what_they_add() {
    let canonical = serde_json::to_value(sample_policy()).unwrap();
    assert_eq!(canonical["catalog"], json!({"web": web_ref()}));
    let only_image = with(|v| v["catalog"]["web"] = json!({"image": web_ref()})).unwrap();
    assert_eq!(only_image.hash(), sample_policy().hash());
    let port = with(|v| v["catalog"]["web"] = json!({"image": web_ref(), "container_port": 8080})).unwrap();
    assert_ne!(port.hash(), sample_policy().hash());
    let path = with(|v| v["catalog"]["web"] = json!({"image": web_ref(), "health_path": "/up"})).unwrap();
    assert_ne!(path.hash(), sample_policy().hash());
    assert_ne!(path.hash(), port.hash());
}

#[test]
fn bad_catalog_objects_are_refused_naming_the_key() {
    let refused = |entry: Value| with(|v| v["catalog"]["web"] = entry).unwrap_err().0;
    let unknown = refused(json!({"image": web_ref(), "env": "x"}));
    assert!(unknown.contains(r#"catalog entry "web" has the unknown key "env""#), "{unknown}");
    assert!(unknown.contains("image, container_port, health_path, env_file"), "{unknown}");
    assert!(refused(json!({"container_port": 8080})).contains("is not pinned"));
    assert!(refused(json!({"image": "web:latest"})).contains("is not pinned"));
    assert!(refused(json!(["x"])).contains("must be a pinned reference or an object"));
    for port in [json!(80), json!(70000), json!(8080.5), json!("8080"), json!(true), json!(-1)] {
        let message = refused(json!({"image": web_ref(), "container_port": port}));
        assert!(
            message.contains("container_port must be an integer from 1024 to 65535"),
            "{port}: {message}"
        );
    }
    for path in [json!("healthz"), json!("/a?b"), json!("/../x"), json!("/a b"), json!(""), json!(1)] {
        let message = refused(json!({"image": web_ref(), "health_path": path}));
        assert!(message.contains("health_path must be an absolute path"), "{path}: {message}");
    }
    // A key written as null is a wrong value, not a missing key.
    assert!(refused(json!({"image": null})).contains("is not pinned"));
    for (key, message) in [
        ("container_port", "container_port must be an integer"),
        ("health_path", "health_path must be an absolute path"),
        ("env_file", "env_file must be the absolute path"),
        ("data", "data must be an object with exactly path"),
    ] {
        let refusal = refused(json!({"image": web_ref(), key: null}));
        assert!(refusal.contains(message), "{key}: null: {refusal}");
    }
    // Two unknown keys: the first in the object's key order is named.
    let two = refused(json!({"image": web_ref(), "zz": 1, "aa": 2}));
    assert!(two.contains(r#"has the unknown key "aa""#), "{two}");
}

/// Tried: an entry naming an env file: the policy keeps the name (and its
/// path is what the hash covers, so pointing at another file voids plans);
/// paths outside `/etc/volce-lab/apps/` or below it are refused.
#[test]
fn a_catalog_object_may_name_an_env_file_in_the_fixed_directory() {
    let env = with(|v| {
        v["catalog"]["web"] = json!({"image": web_ref(), "env_file": "/etc/volce-lab/apps/web.env"})
    })
    .unwrap();
    assert_eq!(env.catalog["web"].env_file.as_ref().map(|n| n.as_str()), Some("web.env"));
    let canonical = serde_json::to_value(&env).unwrap();
    assert_eq!(canonical["catalog"]["web"]["env_file"], "/etc/volce-lab/apps/web.env");
    assert_ne!(env.hash(), sample_policy().hash());
    let refused = |entry: Value| with(|v| v["catalog"]["web"] = entry).unwrap_err().0;
    for path in [
        json!("web.env"),
        json!("/etc/volce-lab/web.env"),
        json!("/etc/volce-lab/apps/../policy.json"),
        json!("/etc/volce-lab/apps/a/web.env"),
        json!("/tmp/web.env"),
        json!(1),
    ] {
        let message = refused(json!({"image": web_ref(), "env_file": path}));
        assert!(
            message.contains("env_file must be the absolute path of a file directly in /etc/volce-lab/apps/"),
            "{path}: {message}"
        );
    }
}

#[test]
fn gateway_access_log_is_a_boolean_off_by_default_and_counts_in_the_hash_when_on() {
    // Tried: absent, false written out, true, and a string.
    assert!(!sample_policy().gateway_access_log);
    let off = with(|v| v["gateway_access_log"] = json!(false)).unwrap();
    assert_eq!(off.hash(), sample_policy().hash(), "plans made before the key existed stay valid");
    let on = with(|v| v["gateway_access_log"] = json!(true)).unwrap();
    assert_eq!(on.access_log(), crate::nginx::AccessLog::Stdout);
    assert_ne!(on.hash(), sample_policy().hash(), "turning it on voids plans rendered without it");
    let error = with(|v| v["gateway_access_log"] = json!("yes")).unwrap_err();
    assert!(error.0.contains("invalid type"), "{error}");
}

/// Tried: the default (2), both ends of 1..=10, and each kind of wrong
/// value; the default is left out of the hash (a policy without the key
/// hashes as before it existed), another value is not.
#[test]
fn keep_versions_is_bounded_and_hashed_only_when_set() {
    let default = sample_policy();
    assert_eq!(default.keep_versions, 2);
    assert_eq!(with(|v| v["keep_versions"] = json!(2)).unwrap().hash(), default.hash());
    for n in [1, 10] {
        let policy = with(|v| v["keep_versions"] = json!(n)).unwrap();
        assert_eq!(policy.keep_versions, n);
        assert_ne!(policy.hash(), default.hash(), "{n}");
    }
    for bad in [json!(0), json!(11), json!("2"), json!(2.0), json!(-1), json!(true), Value::Null] {
        let error = with(|v| v["keep_versions"] = bad.clone()).unwrap_err();
        assert!(error.0.contains("keep_versions") && error.0.contains("1 to 10"), "{bad}: {error}");
    }
}

/// Tried: an entry with data {"/data", 512}: kept, and part of the hash;
/// then each malformed `data`: not an object, a missing or extra key, a
/// path in /tmp, relative or with '..', and max_mib 0, 15, a float, and
/// above the range: each refused with the one sentence that names the rule.
#[test]
fn a_catalog_object_may_give_the_app_a_capped_data_directory() {
    let with_data = with(|v| {
        v["catalog"]["web"] = json!({"image": web_ref(), "data": {"path": "/data", "max_mib": 512}})
    })
    .unwrap();
    let data = with_data.catalog["web"].data.as_ref().unwrap();
    assert_eq!((data.path.as_str(), data.max_mib), ("/data", 512));
    let canonical = serde_json::to_value(&with_data).unwrap();
    assert_eq!(canonical["catalog"]["web"]["data"], json!({"path": "/data", "max_mib": 512}));
    assert_ne!(with_data.hash(), sample_policy().hash());
    let refused = |data: Value| {
        with(|v| v["catalog"]["web"] = json!({"image": web_ref(), "data": data})).unwrap_err().0
    };
    for data in [
        json!("/data"),
        json!({"path": "/data"}),
        json!({"path": "/data", "max_mib": 64, "owner": 0}),
        json!({"path": "/tmp/data", "max_mib": 64}),
        json!({"path": "data", "max_mib": 64}),
        json!({"path": "/a/../etc", "max_mib": 64}),
        json!({"path": "/data", "max_mib": 0}),
        json!({"path": "/data", "max_mib": 15}),
        json!({"path": "/data", "max_mib": 64.5}),
        json!({"path": "/data", "max_mib": 1_048_577}),
        json!({"path": "/data", "max_mib": 4_294_967_296u64}),
        json!({"path": "/data", "max_mib": -64}),
        json!({"path": null, "max_mib": 64}),
        json!({"max_mib": 64, "other": 1}),
    ] {
        let message = refused(data.clone());
        assert!(message.contains("data must be an object with exactly path"), "{data}: {message}");
    }
}

/// Tried: no `backup` (no repository), a good one, and each way one can be
/// wrong (a relative repository, an option-like sftp host, a relative
/// password file, no retention rule, a rule of 0, an unknown key, an ssh
/// configuration with a path repository, the `sftp://` form, a relative
/// path, a space or `..`). A
/// present `backup` is part of the hash; an absent one leaves it as it was.
#[test]
fn backup_names_a_repository_a_private_password_file_and_a_retention() {
    let good = json!({"repository": "/srv/backup/volce-lab", "password_file": "/etc/volce-lab/backup.password",
                      "keep": {"daily": 7, "weekly": 4}});
    assert_eq!(sample_policy().backup, None);
    let policy = with(|v| v["backup"] = good.clone()).unwrap();
    let backup = policy.backup.clone().unwrap();
    assert_eq!(backup.repository.as_str(), "/srv/backup/volce-lab");
    assert_eq!(backup.keep.describe(), "daily 7, weekly 4");
    assert_ne!(policy.hash(), sample_policy().hash(), "the repository is part of what a plan was made for");
    let bad = |key: &str, value: Value| {
        let mut backup = good.clone();
        backup[key] = value;
        with(|v| v["backup"] = backup).unwrap_err().0
    };
    assert!(bad("repository", json!("backups")).contains("repository"));
    assert!(bad("repository", json!("sftp:-oProxyCommand=x")).contains("repository"));
    assert!(bad("password_file", json!("backup.password")).contains("absolute path"));
    assert!(bad("keep", json!({})).contains("at least one"));
    assert!(bad("keep", json!({"daily": 0})).contains("from 1 to 1000"));
    assert!(bad("keep", json!({"hourly": 3})).contains("unknown field"));
    assert!(bad("extra", json!(1)).contains("unknown field"));
    assert!(bad("schedule", json!({"blog": "monthly"})).contains("unknown variant"));
    assert!(bad("schedule", json!({"Not An App": "daily"})).contains("backup must be"));
    // The ssh configuration only with a repository ssh reaches as user@host.
    assert!(bad("ssh_config", json!("/etc/volce-lab/backup.ssh_config")).contains("sftp:user@host:/path"));
    let mut over_ssh = good.clone();
    over_ssh["repository"] = json!("sftp:backup@vault:/srv/restic");
    over_ssh["ssh_config"] = json!("/etc/volce-lab/backup.ssh_config");
    let policy = with(|v| v["backup"] = over_ssh.clone()).unwrap();
    assert_eq!(policy.backup.unwrap().ssh_config.unwrap().to_str(), Some("/etc/volce-lab/backup.ssh_config"));
    for wrong in ["backup.ssh_config", "/etc/volce-lab/my ssh", "/etc/../root/.ssh/config"] {
        let mut backup = over_ssh.clone();
        backup["ssh_config"] = json!(wrong);
        assert!(
            with(|v| v["backup"] = backup).unwrap_err().0.contains("absolute path without spaces"),
            "{wrong}"
        );
    }
    let mut url_form = over_ssh.clone();
    url_form["repository"] = json!("sftp://backup@vault:2222//srv/restic");
    assert!(with(|v| v["backup"] = url_form).unwrap_err().0.contains("sftp:user@host:/path"));
    let mut scheduled = good.clone();
    scheduled["schedule"] = json!({"blog": "daily"});
    let policy = with(|v| v["backup"] = scheduled).unwrap();
    let every = policy.backup.unwrap().schedule.into_iter().next().unwrap();
    assert_eq!((every.0.as_str(), every.1), ("blog", crate::vocab::BackupEvery::Daily));
}

fn with_db(patch: impl FnOnce(&mut Value)) -> Result<Policy, PolicyError> {
    with(|v| {
        v["accessories"] = json!({"db": {
            "image": format!("127.0.0.1:15000/volce-lab/pg@sha256:{}", "c".repeat(64)),
            "port": 5432,
            "data": {"path": "/srv/pgdata", "max_mib": 256},
            "health": ["/usr/bin/pg_isready", "-q"],
            "env": {"POSTGRES_PASSWORD": "{password}"}
        }});
        v["catalog"]["notes"] = json!({
            "image": format!("127.0.0.1:15000/volce-lab/notes@sha256:{}", "d".repeat(64)),
            "accessories": {"db": {"DATABASE_URL": "postgresql://app:{password}@{host}:{port}/app"}}
        });
        patch(v);
    })
}

/// Issue 40. Tried: a policy with an accessory an entry names (read, and
/// hashed unlike one without); then each wrong key: an entry naming an
/// undeclared accessory, a misspelt placeholder, an unknown key, a
/// privileged port, a data cap out of range, a name an app container
/// takes, an unpinned image, a dump without a load and a load without a
/// dump. Each refused naming the accessory or entry.
#[test]
fn accessories_are_read_and_each_wrong_key_is_refused_by_name() {
    let policy = with_db(|_| {}).unwrap();
    let db = crate::vocab::AccessoryName::parse("db").unwrap();
    assert_eq!(policy.accessories[&db].port, 5432);
    assert_eq!(policy.catalog["notes"].accessories[&db].names().collect::<Vec<_>>(), ["DATABASE_URL"]);
    assert_ne!(policy.hash(), sample_policy().hash());
    let refused = |patch: fn(&mut Value)| with_db(patch).unwrap_err().0;
    let message = refused(|v| v["catalog"]["notes"]["accessories"] = json!({"cache": {}}));
    assert!(message.contains("names the accessory \"cache\""), "{message}");
    let message = refused(|v| v["catalog"]["notes"]["accessories"]["db"]["URL"] = json!("x{passwrd}"));
    assert!(message.contains("brace"), "{message}");
    let message = refused(|v| v["accessories"]["db"]["user"] = json!("0:0"));
    assert!(message.contains("accessory \"db\" must be"), "{message}");
    let message = refused(|v| v["accessories"]["db"]["port"] = json!(80));
    assert!(message.contains("port must be from 1024"), "{message}");
    let message = refused(|v| v["accessories"]["db"]["data"]["max_mib"] = json!(0));
    assert!(message.contains("data.max_mib"), "{message}");
    let message = refused(|v| v["accessories"] = json!({"gateway": v["accessories"]["db"].clone()}));
    assert!(message.contains("accessory name \"gateway\""), "{message}");
    let message = refused(|v| v["accessories"]["db"]["image"] = json!("postgres:15"));
    assert!(message.contains("accessory \"db\" must be"), "{message}");
    let message = refused(|v| v["accessories"]["db"]["dump"] = json!(["/bin/dump-pg"]));
    assert!(message.contains("accessory \"db\": dump and load go together"), "{message}");
    let message = refused(|v| v["accessories"]["db"]["load"] = json!(["/bin/load-pg"]));
    assert!(message.contains("dump and load go together"), "{message}");
    let both = with_db(|v| {
        v["accessories"]["db"]["dump"] = json!(["/bin/dump-pg"]);
        v["accessories"]["db"]["load"] = json!(["/bin/load-pg"]);
    })
    .unwrap();
    assert_eq!(both.accessories[&db].load.as_ref().unwrap().all(), ["/bin/load-pg"]);
}
