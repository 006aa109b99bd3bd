//! What setup accepts and what it writes, pure: the account names and the
//! public key it takes ([`check_account`], [`parse_public_key`]), the line
//! it binds the key with ([`authorized_keys_line`]) and the policy skeleton
//! ([`policy_skeleton`]). Runs as root inside `volce-lab-host setup`.

use super::SetupError;

/// A Unix account name as setup accepts it: what Debian's `useradd`
/// accepts by default, minus `$`, and never root.
pub fn check_account(role: &str, name: &str) -> Result<(), SetupError> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !first_ok || !rest_ok || name.len() > 32 {
        return Err(SetupError::BadArgument(format!(
            "--{role} {name:?} is not an account name (a lowercase letter or _, then up to 31 of a-z 0-9 _ -)"
        )));
    }
    if name == "root" {
        return Err(SetupError::BadArgument(format!("--{role} cannot be root")));
    }
    Ok(())
}

/// The key types OpenSSH's `authorized_keys` takes without options.
const KEY_TYPES: &[&str] = &[
    "ssh-ed25519",
    "sk-ssh-ed25519@openssh.com",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ecdsa-sha2-nistp256@openssh.com",
    "ssh-rsa",
];

/// One public key, as `ssh-keygen` writes it (`TYPE BASE64 [comment]`).
/// Options in front (`command=...`), a second line or anything but base64
/// in the key are refused: the line setup writes carries only its own
/// options, and the comment is replaced.
pub fn parse_public_key(text: &str) -> Result<(String, String), SetupError> {
    let bad =
        |why: &str| SetupError::BadArgument(format!("--key: {why} (give the .pub file ssh-keygen wrote)"));
    let mut lines = text.lines().filter(|line| !line.trim().is_empty());
    let (Some(line), None) = (lines.next(), lines.next()) else {
        return Err(bad("the file must hold exactly one public key line"));
    };
    let mut fields = line.split_ascii_whitespace();
    let kind = fields.next().unwrap_or_default();
    if !KEY_TYPES.contains(&kind) {
        return Err(bad(
            "the line does not start with a key type such as ssh-ed25519 (options are not accepted)",
        ));
    }
    let blob = fields.next().unwrap_or_default();
    let base64 = |c: char| c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '=';
    if blob.len() < 16 || blob.len() > 16 * 1024 || !blob.chars().all(base64) {
        return Err(bad("the key is not base64"));
    }
    Ok((kind.to_owned(), blob.to_owned()))
}

/// The agent's one `authorized_keys` line: the gate's options
/// ([`crate::install::gate_key_options`]), the key, a fixed comment.
pub fn authorized_keys_line(kind: &str, blob: &str) -> String {
    format!("{} {kind} {blob} volce-lab-agent\n", crate::install::gate_key_options())
}

/// The registry of the example's placeholder images (example.com is
/// reserved: nothing is served there). The doctor tells a placeholder from
/// an image that is merely not pulled yet by it.
pub const PLACEHOLDER_REGISTRY: &str = "registry.example.com/";

/// The annotated example without its comments, with the operator as the
/// one approver and an empty catalog: the operator pins the images they
/// reviewed (`catalog pin`), with no placeholder entries to remove first
/// (issue 37). Its gateway image is a placeholder digest the parser accepts
/// and no registry serves, which `catalog gateway-image` replaces (doctor
/// says so: the image is not present).
pub fn policy_skeleton(operator: &str) -> String {
    let example = include_str!("../../../policy/policy.example.jsonc");
    let json: String = example
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .map(|line| format!("{line}\n"))
        .collect();
    let mut policy: serde_json::Value = serde_json::from_str(&json).expect("the example policy is JSON");
    policy["approvers"] = serde_json::json!([operator]);
    policy["catalog"] = serde_json::json!({});
    let mut text = serde_json::to_string_pretty(&policy).expect("a JSON value serializes");
    text.push('\n');
    text
}
