//! `volce-lab-host accessory secret|rotate APP NAME`: the operator's own
//! view of an accessory's credential, and its rotation (issue 40). Runs as
//! root on the operator's terminal; a layer above `crate::host`, so the
//! agent has no path here.
//!
//! `secret` prints the credential the host generated, for the operator to
//! reach the database by hand. `rotate` is a `rotate_credential` plan like
//! the agent's, requested by this command for the operator (requester
//! `NAME (accessory rotate)`), approved by them after the same summary and
//! question as `approve`, and executed at once: the plan, its approval and
//! its outcome are in the audit trail as any other's.

use crate::docker::accessory_files::existing_secret;
use crate::exit::Exit;
use crate::host::{
    Caller, Confirmation, Decision, Executed, HostPaths, ShippedHost, ask, operator_check, process_check,
    terminal,
};
use crate::text::for_terminal as esc;
use crate::vocab::{AccessoryName, AccessoryUse, AppName, Code, Refusal};

/// `accessory secret APP NAME` in the shipped binary.
pub fn run_secret(app: &str, name: &str) -> Exit {
    terminal(process_check().and_then(|()| secret(&ShippedHost::shipped().paths, app, name)))
}

/// `accessory rotate APP NAME [--yes]` in the shipped binary: the operator
/// named by sudo requests, approves (asked on the terminal unless `yes`)
/// and executes the plan.
pub fn run_rotate(app: &str, name: &str, yes: bool) -> Exit {
    use std::io::IsTerminal as _;
    let operator = match operator_check() {
        Ok(operator) => operator,
        Err(refusal) => return terminal(Err(refusal)),
    };
    if !yes && !std::io::stdin().is_terminal() {
        return terminal(Err(Refusal::new(
            Code::NotConfirmed,
            "accessory rotate asks for confirmation on a terminal, and stdin is not one; nothing was changed. \
             Run it on a terminal, or pass --yes if a script checked the plan.",
        )));
    }
    let decide = |shown: &str, expected: &Confirmation| {
        ask(std::io::stdin().lock(), std::io::stdout().lock(), shown, expected, yes)
    };
    terminal(rotate(&ShippedHost::shipped().paths, Caller::from(&operator), app, name, decide))
}

/// `accessory secret`: the credential of APP's accessory NAME, kept beside
/// its data (also after remove_app, until the data is purged).
pub fn secret(paths: &HostPaths, app: &str, name: &str) -> Result<String, Refusal> {
    let (app, name) = names(app, name)?;
    let (image, _) = AccessoryUse::data_paths(&paths.data_dir(), &app, &name);
    let path = crate::vocab::secret_beside(&image);
    let secret = existing_secret(&path).map_err(|_| {
        Refusal::new(
            Code::InvalidParameters,
            format!(
                "No credential of {app}@{name} can be read at {} (no such accessory's data here, or not a \
                 root-only file of volce-lab's); nothing was shown. `volce-lab-host data list` lists the \
                 accessories' data as APP@NAME.",
                path.display()
            ),
        )
    })?;
    let pending = crate::vocab::pending_secret_beside(&image);
    match existing_secret(&pending) {
        // A rotation stopped part-way (data.md): the database has one of the two.
        Ok(new) => Ok(format!(
            "{}\nA rotation stopped part-way also left this new one, which the database may have instead \
             (docs/data.md, An accessory's data):\n{}\n",
            secret.expose(),
            new.expose()
        )),
        Err(_) => Ok(format!("{}\n", secret.expose())),
    }
}

/// `accessory rotate`: a `rotate_credential` plan of APP's accessory NAME
/// requested by `who`, approved by `who` once `decide` confirmed the
/// summary, then executed; the outcome in a sentence.
pub fn rotate(
    paths: &HostPaths,
    who: Caller,
    app: &str,
    name: &str,
    decide: impl FnOnce(&str, &Confirmation) -> Decision,
) -> Result<String, Refusal> {
    let (app, name) = names(app, name)?;
    // The operator decides and confirms here: the request is this command's
    // on their behalf, so the approval (theirs, after the summary) is not
    // refused as a self-approval, and the audit trail says which it was.
    let requester = format!("{} (accessory rotate)", who.name);
    let parameters = serde_json::json!({"app": app, "accessory": name});
    let plan =
        ShippedHost::real(paths.clone()).open()?.prepare("rotate_credential", &parameters, &requester)?;
    let id = plan.plan.id.to_string();
    let mut text = ShippedHost::real(paths.clone()).approve(who, &id, plan.plan.digest.as_str(), decide)?;
    let executed = ShippedHost::real(paths.clone()).open()?.execute(&plan.plan.id, &requester)?;
    text.push_str(&match executed {
        Executed::Completed(_) => format!(
            "Rotated: {app}@{name} has a new credential, and {app} runs in a new container that has it. \
             `volce-lab-host accessory secret {app} {name}` prints it.\n"
        ),
        Executed::Failed { refusal, .. } => {
            return Err(refusal);
        }
        Executed::NeedsInspection { plan_id, message } => {
            return Err(Refusal::new(
                Code::NeedsInspection,
                format!("{} Run `volce-lab-host show {plan_id}`.", esc(&message)),
            ));
        }
    });
    Ok(text)
}

/// The app's and the accessory's names, or the refusal that says which
/// one is not a name.
fn names(app: &str, name: &str) -> Result<(AppName, AccessoryName), Refusal> {
    let app = AppName::parse(app).ok_or_else(|| {
        Refusal::new(Code::InvalidAppName, format!("{} is not an app name; nothing was done.", esc(app)))
    })?;
    let name = AccessoryName::parse(name).ok_or_else(|| {
        Refusal::new(
            Code::InvalidParameters,
            format!(
                "{} is not an accessory name (the policy's accessories, as `data list` shows them after @); \
                 nothing was done.",
                esc(name)
            ),
        )
    })?;
    Ok((app, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tried: a name that is no app name, one that is no accessory name,
    /// an accessory with no credential, and one whose file others can
    /// read: each refused with nothing shown; then a kept credential,
    /// printed whole.
    #[test]
    fn secret_prints_only_a_private_credential_of_ours() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let paths = HostPaths {
            policy: dir.path().join("policy.json"),
            state_dir: dir.path().to_path_buf(),
            owner_uid: nix::unistd::geteuid().as_raw(),
        };
        std::fs::create_dir(paths.data_dir()).unwrap();
        assert_eq!(secret(&paths, "Shop", "db").unwrap_err().code, Code::InvalidAppName);
        assert_eq!(secret(&paths, "shop", "DB!").unwrap_err().code, Code::InvalidParameters);
        let missing = secret(&paths, "shop", "db").unwrap_err();
        assert!(missing.message.contains("data list"), "{}", missing.message);
        let file = paths.data_dir().join("shop@db.secret");
        let hex = "5a".repeat(32);
        std::fs::write(&file, &hex).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(secret(&paths, "shop", "db").is_err(), "others could read it");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(secret(&paths, "shop", "db").unwrap(), format!("{hex}\n"));
    }
}
