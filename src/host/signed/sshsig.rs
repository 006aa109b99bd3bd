//! What an OpenSSH signature says about itself, read from its armor
//! (PROTOCOL.sshsig: "SSHSIG", a version, then length-prefixed strings: the
//! public key, the namespace, a reserved string, the hash algorithm and the
//! signature). Pure; reads claims only: nothing here verifies anything, and
//! the host acts on these facts only after ssh-keygen verified the
//! signature (`keygen.rs`), except the namespace, which it reads first so
//! that a signature made for something else is refused with its own code.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use sha2::{Digest as _, Sha256};

use crate::wire::signed::{SIGNATURE_BEGIN, SIGNATURE_END};

/// The facts of one signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigFacts {
    /// The key's type as OpenSSH names it, e.g. `sk-ssh-ed25519@openssh.com`.
    pub key_type: String,
    /// `SHA256:` and the unpadded base64 of the key blob's sha256, as
    /// `ssh-keygen -l` prints it.
    pub fingerprint: String,
    pub namespace: String,
}

impl SigFacts {
    /// A key whose private half lives on a FIDO authenticator.
    pub fn hardware_key(&self) -> bool {
        hardware_key_type(&self.key_type)
    }
}

/// Whether `key_type` is one of OpenSSH's `sk-` types, whose private half
/// lives on a FIDO authenticator. Any other key is a file someone could copy.
pub fn hardware_key_type(key_type: &str) -> bool {
    key_type.starts_with("sk-")
}

/// What a public key says about itself: its type and fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFacts {
    /// The type named inside the key blob, e.g. `ssh-ed25519`.
    pub key_type: String,
    /// As in [`SigFacts::fingerprint`].
    pub fingerprint: String,
}

/// Reads a public key given as the base64 blob of an OpenSSH key line (the
/// word after the key type in a `.pub` file or `allowed_signers`), or
/// `None` when it is not one. Like [`facts`], reads claims only; a blob is
/// taken for a key when, as every OpenSSH key type's is, it is its type
/// then at least one more length-prefixed string, and nothing else.
pub fn public_key(base64_blob: &str) -> Option<KeyFacts> {
    let blob = STANDARD.decode(base64_blob).ok()?;
    let mut reader = Reader(&blob);
    let mut strings = 0;
    while !reader.0.is_empty() {
        reader.string()?;
        strings += 1;
    }
    if strings < 2 {
        return None;
    }
    key_facts(&blob)
}

/// The type and fingerprint of a key blob; its fingerprint is what
/// `ssh-keygen -l` prints: the unpadded base64 of the blob's sha256.
fn key_facts(blob: &[u8]) -> Option<KeyFacts> {
    let key_type = String::from_utf8(Reader(blob).string()?.to_vec()).ok()?;
    if key_type.is_empty() || key_type.len() > 64 || !key_type.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    let fingerprint = format!("SHA256:{}", STANDARD_NO_PAD.encode(Sha256::digest(blob)));
    Some(KeyFacts { key_type, fingerprint })
}

/// Reads the facts of an armored signature, or `None` when it is not one.
pub fn facts(armor: &str) -> Option<SigFacts> {
    let body: String = armor
        .trim()
        .strip_prefix(SIGNATURE_BEGIN)?
        .strip_suffix(SIGNATURE_END)?
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let blob = STANDARD.decode(body).ok()?;
    let mut reader = Reader(blob.strip_prefix(b"SSHSIG")?);
    if reader.u32()? != 1 {
        return None;
    }
    let key = reader.string()?;
    let namespace = String::from_utf8(reader.string()?.to_vec()).ok()?;
    let KeyFacts { key_type, fingerprint } = key_facts(key)?;
    Some(SigFacts { key_type, fingerprint, namespace })
}

/// SSH wire format: big-endian u32 and u32-length-prefixed strings.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn u32(&mut self) -> Option<u32> {
        let (head, rest) = self.0.split_first_chunk::<4>()?;
        self.0 = rest;
        Some(u32::from_be_bytes(*head))
    }

    fn string(&mut self) -> Option<&'a [u8]> {
        let len = self.u32()? as usize;
        if len > self.0.len() {
            return None;
        }
        let (text, rest) = self.0.split_at(len);
        self.0 = rest;
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(bytes: &[u8]) -> Vec<u8> {
        let mut out = (bytes.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(bytes);
        out
    }

    /// An armor around a blob of the given key type and namespace.
    fn armor(key_type: &str, namespace: &str, version: u32) -> String {
        let key = [string(key_type.as_bytes()), string(&[7; 32])].concat();
        let blob = [
            b"SSHSIG".to_vec(),
            version.to_be_bytes().to_vec(),
            string(&key),
            string(namespace.as_bytes()),
            string(b""),
            string(b"sha512"),
            string(&[1; 64]),
        ]
        .concat();
        let base = STANDARD.encode(blob);
        let lines: Vec<&str> = base.as_bytes().chunks(70).map(|c| std::str::from_utf8(c).unwrap()).collect();
        format!("{SIGNATURE_BEGIN}\n{}\n{SIGNATURE_END}\n", lines.join("\n"))
    }

    #[test]
    fn the_key_type_namespace_and_fingerprint_are_read() {
        let facts = facts(&armor("sk-ssh-ed25519@openssh.com", "volce-lab-approval", 1)).unwrap();
        assert_eq!(facts.key_type, "sk-ssh-ed25519@openssh.com");
        assert_eq!(facts.namespace, "volce-lab-approval");
        assert!(facts.hardware_key());
        assert!(facts.fingerprint.starts_with("SHA256:") && !facts.fingerprint.ends_with('='));
        let software = facts_of("ssh-ed25519", "file");
        assert!(!software.hardware_key());
        assert_eq!(software.namespace, "file");
    }

    fn facts_of(key_type: &str, namespace: &str) -> SigFacts {
        facts(&armor(key_type, namespace, 1)).unwrap()
    }

    /// The fingerprint `ssh-keygen -l` prints for a real key, from its
    /// `.pub` line's blob and from a signature it made: the same function.
    #[test]
    fn a_public_keys_fingerprint_is_ssh_keygens() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("k");
        let status = std::process::Command::new(crate::host::signed::keygen::SSH_KEYGEN)
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "", "-f"])
            .arg(&key)
            .status()
            .unwrap();
        assert!(status.success());
        let listed = std::process::Command::new(crate::host::signed::keygen::SSH_KEYGEN)
            .arg("-lf")
            .arg(key.with_extension("pub"))
            .output()
            .unwrap();
        let listed = String::from_utf8(listed.stdout).unwrap();
        let line = std::fs::read_to_string(key.with_extension("pub")).unwrap();
        let blob = line.split_whitespace().nth(1).unwrap();
        let facts = public_key(blob).unwrap();
        assert_eq!(facts.key_type, "ssh-ed25519");
        assert_eq!(listed.split_whitespace().nth(1), Some(facts.fingerprint.as_str()), "{listed}");
        let message = dir.path().join("m");
        std::fs::write(&message, b"statement").unwrap();
        let signed = std::process::Command::new(crate::host::signed::keygen::SSH_KEYGEN)
            .args(["-q", "-Y", "sign", "-n", "volce-lab-approval", "-f"])
            .arg(&key)
            .arg(&message)
            .status()
            .unwrap();
        assert!(signed.success());
        let armor = std::fs::read_to_string(message.with_extension("sig")).unwrap();
        assert_eq!(super::facts(&armor).unwrap().fingerprint, facts.fingerprint);
        assert_eq!(public_key("not base64!"), None);
        assert_eq!(public_key(&STANDARD.encode(string(b""))), None, "no key type");
        assert_eq!(public_key(&STANDARD.encode(string(b"ssh-ed25519"))), None, "no key after its type");
        let trailing = [STANDARD.decode(blob).unwrap(), vec![0, 0]].concat();
        assert_eq!(public_key(&STANDARD.encode(trailing)), None, "bytes after its last string");
    }

    #[test]
    fn what_is_not_a_signature_says_nothing() {
        assert_eq!(facts(""), None);
        assert_eq!(facts(&armor("ssh-ed25519", "x", 2)), None, "another version");
        assert_eq!(facts(&armor("", "x", 1)), None, "no key type");
        assert_eq!(facts(&armor("ssh ed25519", "x", 1)), None, "a key type with a space");
        let good = armor("ssh-ed25519", "x", 1);
        assert_eq!(facts(&good.replace(SIGNATURE_END, "")), None);
        // Cut short: a length that runs past the end.
        let lines: Vec<&str> = good.lines().collect();
        assert_eq!(facts(&format!("{}\n{}\n{SIGNATURE_END}\n", lines[0], lines[1])), None);
    }
}
