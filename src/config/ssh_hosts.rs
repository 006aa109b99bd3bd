//! Whether an alias is a `Host` of the ssh_config volce-lab hands ssh,
//! checked before any ssh runs: a mistyped alias would otherwise be
//! resolved through DNS and dialled. Reads files only; runs unprivileged.
//!
//! Why not a parser crate: the maintained one (`ssh2-config`) resolves the
//! options a host gets, where `Host *` makes every name look configured;
//! the question here is narrower (does some `Host` line name this alias
//! other than by a bare `*`), and needs only `Host`, `Include` and
//! `Match` as ssh reads them (keywords case-insensitive, `=` or spaces,
//! `#` comments, quoted arguments, `Include` globs relative to `~/.ssh`
//! for the user's file and `/etc/ssh` for the system's, depth 16).
//!
//! Case, as ssh has it (issue 38): the keyword `Host` is matched in any
//! case, but its patterns are matched against the name given on the
//! command line case-sensitively (readconf.c: `match_pattern(host, arg)`,
//! a plain byte compare; ssh lowercases the name only after reading its
//! configuration). So `RT-A` is not declared by `Host rt-a`: ssh would
//! dial it with the `Host *` defaults. `ssh -G` agrees (a test asks it).

use std::path::{Path, PathBuf};

/// Includes nest at most this deep (ssh's own limit).
const MAX_DEPTH: usize = 16;

/// The files the check reads: the given `-F` file alone, or the user's
/// `~/.ssh/config` and the system's `/etc/ssh/ssh_config`, as ssh does.
#[derive(Debug, Clone)]
pub struct SshConfigFiles {
    /// (file, the directory its relative `Include`s start from).
    roots: Vec<(PathBuf, PathBuf)>,
}

impl SshConfigFiles {
    /// What ssh reads for `-F file` (when given), else the defaults under `home`.
    pub fn of(ssh_config: Option<&Path>, home: Option<&Path>) -> SshConfigFiles {
        let roots = match ssh_config {
            Some(file) => {
                let base = home.map_or_else(|| PathBuf::from("/"), |h| h.join(".ssh"));
                vec![(file.to_owned(), base)]
            }
            None => {
                let mut roots = Vec::new();
                if let Some(home) = home {
                    roots.push((home.join(".ssh/config"), home.join(".ssh")));
                }
                roots.push((PathBuf::from("/etc/ssh/ssh_config"), PathBuf::from("/etc/ssh")));
                roots
            }
        };
        SshConfigFiles { roots }
    }

    /// The files named in a refusal: where the alias was looked for.
    pub fn describe(&self) -> String {
        let names: Vec<String> = self.roots.iter().map(|(file, _)| file.display().to_string()).collect();
        names.join(" and ")
    }

    /// Every `Host` line's patterns, in the order ssh reads them.
    pub fn host_lines(&self) -> Vec<Vec<String>> {
        let mut lines = Vec::new();
        for (file, base) in &self.roots {
            read_file(file, base, 0, &mut lines);
        }
        lines
    }

    /// Whether `alias` is named by some `Host` line other than by a lone
    /// `*` (or a pattern of wildcards only) and not negated on that line.
    pub fn declares(&self, alias: &str) -> bool {
        declares(&self.host_lines(), alias)
    }
}

fn declares(lines: &[Vec<String>], alias: &str) -> bool {
    lines.iter().any(|patterns| {
        let negated = patterns.iter().any(|p| p.strip_prefix('!').is_some_and(|p| glob(p, alias)));
        let named = patterns
            .iter()
            .filter(|p| !p.starts_with('!') && !p.chars().all(|c| c == '*' || c == '?'))
            .any(|p| glob(p, alias));
        named && !negated
    })
}

fn read_file(file: &Path, base: &Path, depth: usize, lines: &mut Vec<Vec<String>>) {
    // A missing or unreadable file declares nothing (ssh skips it too).
    let Ok(text) = std::fs::read_to_string(file) else { return };
    for line in text.lines() {
        let words = words(line);
        let Some((keyword, arguments)) = words.split_first() else { continue };
        match keyword.to_ascii_lowercase().as_str() {
            "host" => lines.push(arguments.to_vec()),
            "include" if depth < MAX_DEPTH => {
                for pattern in arguments {
                    for included in expand(pattern, base) {
                        read_file(&included, base, depth + 1, lines);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The words of one line: `#` starts a comment, the keyword may end in
/// `=`, double quotes group a word.
fn words(line: &str) -> Vec<String> {
    let line = line.trim();
    if line.starts_with('#') {
        return Vec::new();
    }
    let (keyword, rest) = match line.find(|c: char| c.is_whitespace() || c == '=') {
        Some(at) => (&line[..at], line[at..].trim_start_matches(|c: char| c.is_whitespace() || c == '=')),
        None => (line, ""),
    };
    if keyword.is_empty() {
        return Vec::new();
    }
    let mut words = vec![keyword.to_owned()];
    let mut current = String::new();
    let mut quoted = false;
    for c in rest.chars() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted && current.is_empty() => break,
            c if c.is_whitespace() && !quoted => {
                if !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// The files an `Include` pattern names: `~/` and relative paths resolved,
/// `*` and `?` expanded in the last component (what people write:
/// `config.d/*`), sorted as ssh's glob sorts them.
fn expand(pattern: &str, base: &Path) -> Vec<PathBuf> {
    let path = if let Some(rest) = pattern.strip_prefix("~/") {
        base.parent().map_or_else(|| PathBuf::from(rest), |home| home.join(rest))
    } else if pattern.starts_with('/') {
        PathBuf::from(pattern)
    } else {
        base.join(pattern)
    };
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return Vec::new() };
    if !name.contains(['*', '?']) {
        return vec![path];
    }
    let Some(dir) = path.parent() else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(|n| glob(name, n)))
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// ssh's pattern match (`match_pattern`): `*` any run, `?` one character,
/// every other character itself, case included. glob(3), which expands
/// `Include`, is case-sensitive too.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_host_line_names_an_alias_exactly_or_by_a_pattern_but_never_by_a_lone_star() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(
            dir.path(),
            "config",
            "# mine\nHost web-1 web-2\n  HostName 10.0.0.1\nhost=db-*  !db-old\nHOST \"quoted\"\nHost *\n  User x\n",
        );
        let files = SshConfigFiles::of(Some(&file), None);
        for alias in ["web-1", "web-2", "db-main", "quoted"] {
            assert!(files.declares(alias), "{alias}");
        }
        // A typo is matched only by `Host *`, which is no declaration; so
        // is another case (ssh matches Host patterns case-sensitively).
        for alias in ["web-l", "db-old", "web", "anything", "WEB-2", "Web-1", "DB-main"] {
            assert!(!files.declares(alias), "{alias}");
        }
    }

    #[test]
    fn includes_are_followed_relative_to_the_users_ssh_directory_with_globs() {
        let home = tempfile::tempdir().unwrap();
        write(home.path(), ".ssh/config", "Include config.d/*\nInclude ~/.ssh/extra\nHost top\n");
        write(home.path(), ".ssh/config.d/10-work", "Host work-1\n");
        write(home.path(), ".ssh/config.d/20-home", "Match host x\nHost nas\n");
        write(home.path(), ".ssh/extra", "Include extra\nHost extra-1\n");
        let files = SshConfigFiles::of(None, Some(home.path()));
        for alias in ["top", "work-1", "nas", "extra-1"] {
            assert!(files.declares(alias), "{alias}");
        }
        assert!(!files.declares("work-2"));
        assert!(
            files
                .describe()
                .starts_with(&format!("{}/.ssh/config and /etc/ssh/ssh_config", home.path().display()))
        );
    }

    #[test]
    fn a_missing_file_declares_nothing() {
        let files = SshConfigFiles::of(Some(Path::new("/nonexistent/config")), None);
        assert!(!files.declares("web-1"));
        assert_eq!(files.describe(), "/nonexistent/config");
    }

    #[test]
    fn glob_matches_as_ssh_does() {
        assert!(glob("a*c", "abbbc") && glob("a?c", "abc") && glob("*", "") && glob("vl-e2e*", "vl-e2e"));
        assert!(!glob("a?c", "ac") && !glob("a*d", "abc") && !glob("abc", "abcd"));
        assert!(!glob("abc", "ABC") && !glob("A*", "abc") && glob("?b?", "Abc"));
    }

    /// Issue 38 (item 5): `RT-A` passed as declared beside `Host rt-a`
    /// (patterns were compared in any case), and ssh then dialled it with
    /// the `Host *` defaults (port 22, root). Fails on the code before.
    /// What ssh itself does is read from `ssh -G`, which resolves the
    /// configuration and connects nowhere: a declared alias gets its Host
    /// block's port, any other name the `Host *` one; volce-lab's answer
    /// must agree for each name tried.
    #[test]
    fn declares_agrees_with_what_ssh_g_applies_case_included() {
        let dir = tempfile::tempdir().unwrap();
        let extra = write(dir.path(), "extra", "Host Db-1\n  Port 2204\n");
        let file = write(
            dir.path(),
            "config",
            &format!(
                "Include {}\nHost rt-a\n  Port 2201\nHOST RT-B\n  Port 2202\nhost=web-*  !web-old\n  \
                 Port 2203\nHost *\n  Port 22\n  User root\n",
                extra.display()
            ),
        );
        let files = SshConfigFiles::of(Some(&file), None);
        let names =
            ["rt-a", "RT-A", "Rt-a", "RT-B", "rt-b", "web-1", "WEB-1", "web-old", "Db-1", "db-1", "other"];
        let expected = [true, false, false, true, false, true, false, false, true, false, false];
        for (name, declared) in names.iter().zip(expected) {
            assert_eq!(files.declares(name), declared, "{name}");
        }
        let ssh = Path::new("/usr/bin/ssh");
        if !ssh.exists() {
            eprintln!("no /usr/bin/ssh: checked against the expected table only");
            return;
        }
        for name in names {
            let out = std::process::Command::new(ssh)
                .args(["-G", "-F"])
                .arg(&file)
                .args(["--", name])
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
            let port = String::from_utf8_lossy(&out.stdout)
                .lines()
                .find_map(|l| l.strip_prefix("port ").map(str::to_owned))
                .unwrap();
            assert_eq!(files.declares(name), port != "22", "{name}: ssh -G gives port {port}");
        }
    }
}
