//! The signed APT repository (issue 45): `scripts/apt-repo` writes one
//! holding the package under test, signed with a key the test makes in a
//! GNUPGHOME of its own; apt, pointed at it with `signed-by` and lists of
//! its own (the machine's sources and lists are not touched), installs the
//! package from it. Then the three ways a repository can lie: a package
//! changed after signing (apt refuses to install it), an index changed
//! after signing (a version bumped) and a Release signed by another key
//! (apt refuses both at `update`, and the lie never reaches the candidate
//! version).

use std::process::Command;

use super::*;

/// apt with this test's sources and lists only.
struct Apt {
    dir: tempfile::TempDir,
}

impl Apt {
    fn new(repo: &Path, keyring: &Path) -> Apt {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["lists/partial", "cache/archives/partial"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        let line = format!("deb [signed-by={}] file:{} ./\n", keyring.display(), repo.display());
        std::fs::write(dir.path().join("sources.list"), line).unwrap();
        Apt { dir }
    }

    fn options(&self) -> Vec<String> {
        let at = |sub: &str| self.dir.path().join(sub).display().to_string();
        vec![
            "-o".into(),
            format!("Dir::Etc::SourceList={}", at("sources.list")),
            "-o".into(),
            "Dir::Etc::SourceParts=/nonexistent".into(),
            "-o".into(),
            format!("Dir::State::Lists={}", at("lists")),
            "-o".into(),
            format!("Dir::Cache={}", at("cache")),
        ]
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        let mut all = self.options();
        all.extend(args.iter().map(|a| (*a).to_owned()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        run(program, &all)
    }

    /// `update` on fresh lists: whether it succeeded, and what it said.
    fn update(&self) -> (bool, String) {
        let lists = self.dir.path().join("lists");
        std::fs::remove_dir_all(&lists).unwrap();
        std::fs::create_dir_all(lists.join("partial")).unwrap();
        let out = self.run("apt-get", &["update"]);
        (
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )
    }

    fn candidate(&self) -> String {
        let out = self.run("apt-cache", &["policy", "volce-lab"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines().find_map(|l| l.trim().strip_prefix("Candidate: ")).unwrap_or("(none)").to_owned()
    }
}

/// A signing key in a GNUPGHOME of its own: (GNUPGHOME, fingerprint).
fn signing_key(home: &Path, name: &str) -> String {
    std::fs::create_dir_all(home).unwrap();
    std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let gpg = |args: &[&str]| {
        let out = Command::new("gpg").args(args).env("GNUPGHOME", home).output().expect("gpg runs");
        assert!(out.status.success(), "gpg {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    gpg(&["--batch", "--passphrase", "", "--quick-gen-key", name, "ed25519", "sign", "never"]);
    let listed = gpg(&["--batch", "--with-colons", "--list-secret-keys"]);
    listed.lines().find_map(|l| l.strip_prefix("fpr:")).unwrap().trim_matches(':').to_owned()
}

/// Ends the gpg-agents the keys started.
struct Agents(Vec<PathBuf>);
impl Drop for Agents {
    fn drop(&mut self) {
        for home in &self.0 {
            let _ = Command::new("gpgconf").args(["--kill", "gpg-agent"]).env("GNUPGHOME", home).status();
        }
    }
}

#[test]
#[ignore = "root: installs the .deb of scripts/package (scripts/test runs it)"]
fn a_signed_repository_installs_the_package_and_apt_refuses_what_its_signature_does_not_cover() {
    let _one = SYSTEM.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let deb = deb();
    assert_clean_machine();
    let _undo = Uninstall;
    let work = tempfile::tempdir().unwrap();
    let (ours, theirs) = (work.path().join("gnupg"), work.path().join("intruder"));
    let _agents = Agents(vec![ours.clone(), theirs.clone()]);
    let key = signing_key(&ours, "volce-lab test archive <archive@volce-lab.invalid>");
    let repo = work.path().join("repo");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/apt-repo");
    let made = Command::new(&script)
        .args(["--key", &key, "--out", repo.to_str().unwrap(), deb.to_str().unwrap()])
        .env("GNUPGHOME", &ours)
        .output()
        .unwrap();
    assert!(made.status.success(), "scripts/apt-repo: {}", String::from_utf8_lossy(&made.stderr));
    let keyring = repo.join("volce-lab-archive-keyring.gpg");
    let apt = Apt::new(&repo, &keyring);
    let (updated, said) = apt.update();
    assert!(updated, "apt-get update of the signed repository: {said}");
    let version =
        String::from_utf8(ok("dpkg-deb", &["-f", deb.to_str().unwrap(), "Version"]).stdout).unwrap();
    assert_eq!(apt.candidate(), version.trim(), "the repository offers the package");
    let installed = apt.run("apt-get", &["install", "-y", "--no-install-recommends", "volce-lab"]);
    assert!(installed.status.success(), "apt-get install: {}", String::from_utf8_lossy(&installed.stderr));
    assert_installed_layout();
    ok("dpkg", &["--purge", "volce-lab"]);

    // A package changed after signing, its index left as signed: apt
    // refuses the download and installs nothing.
    let name = deb.file_name().unwrap();
    let published = std::fs::read(repo.join(name)).unwrap();
    let mut altered = published.clone();
    altered.extend_from_slice(b"one byte more");
    std::fs::write(repo.join(name), &altered).unwrap();
    let (updated, said) = apt.update();
    assert!(updated, "the index is still the signed one: {said}");
    let refused = apt.run("apt-get", &["install", "-y", "--no-install-recommends", "volce-lab"]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "apt installed an altered package");
    assert!(said.contains("Hash Sum mismatch") || said.contains("File has unexpected size"), "{said}");
    let status = run("dpkg-query", &["-W", "-f=${Status}", "volce-lab"]);
    assert!(!String::from_utf8_lossy(&status.stdout).contains(" installed"), "nothing was installed");
    std::fs::write(repo.join(name), &published).unwrap();

    // An index changed after signing: the version bumped in Packages (and
    // its gzip), Release and its signatures left as they were.
    let packages = repo.join("Packages");
    let original = std::fs::read_to_string(&packages).unwrap();
    let lied = original.replace(&format!("Version: {}", version.trim()), "Version: 99.0.0-1");
    assert_ne!(lied, original);
    std::fs::write(&packages, &lied).unwrap();
    let gz = Command::new("gzip").args(["-9nc", packages.to_str().unwrap()]).output().unwrap();
    std::fs::write(repo.join("Packages.gz"), gz.stdout).unwrap();
    let (updated, said) = apt.update();
    assert!(!updated, "apt accepted an index the signed Release does not cover: {said}");
    assert!(said.contains("Hash Sum mismatch") || said.contains("failed to download"), "{said}");
    assert_ne!(apt.candidate(), "99.0.0-1", "the changed index must not be believed");
    std::fs::write(&packages, &original).unwrap();
    let gz = Command::new("gzip").args(["-9nc", packages.to_str().unwrap()]).output().unwrap();
    std::fs::write(repo.join("Packages.gz"), gz.stdout).unwrap();
    assert!(apt.update().0, "the repository as signed is accepted again");

    // A Release signed by another key than the keyring's.
    let other = signing_key(&theirs, "intruder <intruder@volce-lab.invalid>");
    let release = repo.join("Release");
    let resigned = Command::new("gpg")
        .args(["--batch", "--yes", "--local-user", &format!("{other}!"), "--clearsign", "-o"])
        .arg(repo.join("InRelease"))
        .arg(&release)
        .env("GNUPGHOME", &theirs)
        .output()
        .unwrap();
    assert!(resigned.status.success(), "{}", String::from_utf8_lossy(&resigned.stderr));
    std::fs::remove_file(repo.join("Release.gpg")).unwrap();
    let (updated, said) = apt.update();
    assert!(!updated && said.contains("NO_PUBKEY"), "apt accepted another key's signature: {said}");
}
