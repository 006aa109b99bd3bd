//! The facts about the session an operator command runs in that no
//! environment variable carries: the `sudo` process that started the
//! helper (its real uid) and that sudo's controlling terminal (its owner).
//! Read from `/proc` and `/dev` as root, behind the small [`Proc`] trait so
//! that the walk and the terminal naming are tested with fake processes;
//! `operator::verify` decides on what [`observe`] returns.
//!
//! Why these facts: sudo is set-uid root, so its real uid is the account
//! that ran it, and only root can change it. The terminal the operator
//! types at was given to their login (sshd, login and script chown it to
//! the user); another account cannot open it, let alone own it. Neither is
//! set by the caller the way `SUDO_USER` and `SUDO_UID` are under a
//! `SETENV` rule.
//!
//! The sudo found is the nearest `/usr/bin/sudo` among the helper's
//! ancestors (so `sudo -i`, then the helper from that root shell, works),
//! with the sudo processes directly above it: with `use_pty` sudo runs the
//! command under a monitor process of its own, whose terminal is a new pty
//! owned by the target user (root); the terminal that counts is the one of
//! the outermost sudo of that run, the front end the operator started.

use std::path::{Path, PathBuf};

/// The one sudo binary whose processes count (Debian's `sudo` package).
pub const SUDO: &str = super::HostPaths::SUDO;

/// How far up the helper's ancestors the sudo is looked for.
const MAX_DEPTH: usize = 16;

/// A controlling terminal, as far as `operator::verify` needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Terminal {
    /// The process has no controlling terminal.
    None,
    /// A terminal device under `/dev` and its owner.
    Owned { path: PathBuf, uid: u32 },
    /// A terminal whose device (major, minor) is not a pty under
    /// `/dev/pts` or a `/dev/tty*` line, or whose node did not match:
    /// its owner cannot be checked.
    Unnamed { major: u64, minor: u64 },
}

/// The sudo that started the helper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SudoRun {
    /// The real uid of each sudo process of the run, nearest first.
    pub real_uids: Vec<u32>,
    /// The controlling terminal of the outermost one.
    pub terminal: Terminal,
}

/// What [`observe`] reads; [`SystemProc`] reads `/proc` and `/dev`.
pub trait Proc {
    /// `/proc/PID/stat`.
    fn stat(&self, pid: u32) -> Option<String>;
    /// `/proc/PID/status`.
    fn status(&self, pid: u32) -> Option<String>;
    /// The target of `/proc/PID/exe`.
    fn exe(&self, pid: u32) -> Option<PathBuf>;
    /// A character device node at `path` (not followed if a symlink): its
    /// device (major, minor) and its owner.
    fn char_device(&self, path: &Path) -> Option<(u64, u64, u32)>;
}

/// The real `/proc` and `/dev`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemProc;

impl Proc for SystemProc {
    fn stat(&self, pid: u32) -> Option<String> {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()
    }
    fn status(&self, pid: u32) -> Option<String> {
        std::fs::read_to_string(format!("/proc/{pid}/status")).ok()
    }
    fn exe(&self, pid: u32) -> Option<PathBuf> {
        std::fs::read_link(format!("/proc/{pid}/exe")).ok()
    }
    fn char_device(&self, path: &Path) -> Option<(u64, u64, u32)> {
        use nix::sys::stat::{SFlag, lstat, major, minor};
        let stat = lstat(path).ok()?;
        let is_char = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFCHR;
        is_char.then(|| (major(stat.st_rdev), minor(stat.st_rdev), stat.st_uid))
    }
}

/// The parent pid and the controlling terminal's device number from
/// `/proc/PID/stat` (fields 4 and 7; the command name before them is in
/// parentheses and may itself hold spaces and parentheses).
fn parent_and_tty(stat: &str) -> Option<(u32, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    // tty_nr is printed as a signed int; negative values do not occur.
    let tty = fields.get(4)?.parse::<i64>().ok()?;
    Some((ppid, u64::try_from(tty).ok()?))
}

/// The real uid: the first number of the `Uid:` line of `/proc/PID/status`.
fn real_uid(status: &str) -> Option<u32> {
    status.lines().find_map(|line| line.strip_prefix("Uid:"))?.split_whitespace().next()?.parse().ok()
}

/// The kernel's `tty_nr` encoding: minor in bits 0-7 and 20-31, major in 8-19.
fn device(tty_nr: u64) -> (u64, u64) {
    ((tty_nr >> 8) & 0xfff, (tty_nr & 0xff) | ((tty_nr >> 12) & 0xfff00))
}

/// Names the terminal `tty_nr` and checks that the node there is that
/// device, then takes its owner.
fn terminal(proc: &impl Proc, tty_nr: u64) -> Terminal {
    if tty_nr == 0 {
        return Terminal::None;
    }
    let (major, minor) = device(tty_nr);
    let path = match major {
        // Unix98 pty slaves: 136:N is /dev/pts/N (the legacy majors up
        // to 143 held 256 each).
        136..=143 => PathBuf::from(format!("/dev/pts/{}", (major - 136) * 256 + minor)),
        4 if minor < 64 => PathBuf::from(format!("/dev/tty{minor}")),
        4 => PathBuf::from(format!("/dev/ttyS{}", minor - 64)),
        _ => return Terminal::Unnamed { major, minor },
    };
    match proc.char_device(&path) {
        Some((found_major, found_minor, uid)) if (found_major, found_minor) == (major, minor) => {
            Terminal::Owned { path, uid }
        }
        _ => Terminal::Unnamed { major, minor },
    }
}

fn is_sudo(proc: &impl Proc, pid: u32) -> bool {
    proc.exe(pid).is_some_and(|exe| exe == Path::new(SUDO))
}

/// The sudo run above process `pid` (the helper: `std::process::id()`),
/// or `None` when there is none within [`MAX_DEPTH`] ancestors, or when a
/// process of the chain could not be read. The helper's own parent is
/// read again at the end: had it ended meanwhile (its pid free for another
/// process), the walk is not trusted.
pub fn observe(proc: &impl Proc, pid: u32) -> Option<SudoRun> {
    let parent_of = |pid: u32| proc.stat(pid).and_then(|stat| parent_and_tty(&stat));
    let (first_parent, _) = parent_of(pid)?;
    let mut current = first_parent;
    let mut depth = 0;
    while !is_sudo(proc, current) {
        depth += 1;
        if current <= 1 || depth >= MAX_DEPTH {
            return None;
        }
        current = parent_of(current)?.0;
    }
    let mut real_uids = Vec::new();
    let terminal = loop {
        real_uids.push(real_uid(&proc.status(current)?)?);
        let (parent, tty_nr) = parent_of(current)?;
        if parent <= 1 || !is_sudo(proc, parent) || real_uids.len() >= MAX_DEPTH {
            break terminal(proc, tty_nr);
        }
        current = parent;
    };
    (parent_of(pid)?.0 == first_parent).then_some(SudoRun { real_uids, terminal })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Fake processes: pid -> (exe, ppid, real uid, tty_nr), and device
    /// nodes: path -> (major, minor, owner).
    #[derive(Default)]
    struct Fake {
        processes: BTreeMap<u32, (&'static str, u32, u32, u64)>,
        nodes: BTreeMap<&'static str, (u64, u64, u32)>,
    }

    impl Fake {
        fn process(mut self, pid: u32, exe: &'static str, ppid: u32, uid: u32, tty: u64) -> Fake {
            self.processes.insert(pid, (exe, ppid, uid, tty));
            self
        }
        fn node(mut self, path: &'static str, major: u64, minor: u64, uid: u32) -> Fake {
            self.nodes.insert(path, (major, minor, uid));
            self
        }
    }

    impl Proc for Fake {
        fn stat(&self, pid: u32) -> Option<String> {
            let (exe, ppid, _, tty) = self.processes.get(&pid)?;
            // A command name with a space and a parenthesis, as a hostile one may be.
            Some(format!("{pid} ({}) x) S {ppid} {pid} {pid} {tty} 0 0", exe.rsplit('/').next().unwrap()))
        }
        fn status(&self, pid: u32) -> Option<String> {
            let (_, _, uid, _) = self.processes.get(&pid)?;
            Some(format!("Name:\tx\nUmask:\t0022\nUid:\t{uid}\t0\t0\t0\nGid:\t0\t0\t0\t0\n"))
        }
        fn exe(&self, pid: u32) -> Option<PathBuf> {
            self.processes.get(&pid).map(|(exe, ..)| PathBuf::from(exe))
        }
        fn char_device(&self, path: &Path) -> Option<(u64, u64, u32)> {
            self.nodes.get(path.to_str()?).copied()
        }
    }

    /// /dev/pts/3 as the kernel prints it in tty_nr: major 136, minor 3.
    const PTS3: u64 = (136 << 8) | 3;
    const HELPER: &str = "/usr/lib/volce-lab/volce-lab";

    #[test]
    fn the_sudo_front_end_gives_the_real_uid_and_the_operators_terminal() {
        // use_pty: front end (alice, her pts/3) -> monitor (alice, sudo's own pty) -> helper.
        let fake = Fake::default()
            .process(10, "/usr/bin/bash", 1, 1000, PTS3)
            .process(20, SUDO, 10, 1000, PTS3)
            .process(21, SUDO, 20, 1000, (136 << 8) | 4)
            .process(30, HELPER, 21, 0, (136 << 8) | 4)
            .node("/dev/pts/3", 136, 3, 1000)
            .node("/dev/pts/4", 136, 4, 0);
        let run = observe(&fake, 30).unwrap();
        assert_eq!(run.real_uids, vec![1000, 1000]);
        assert_eq!(run.terminal, Terminal::Owned { path: "/dev/pts/3".into(), uid: 1000 });
    }

    #[test]
    fn the_nearest_sudo_counts_even_above_a_root_shell() {
        // alice: sudo -i, then the helper from that shell; higher up, bob's sudo.
        let fake = Fake::default()
            .process(5, SUDO, 1, 1001, PTS3)
            .process(10, "/usr/bin/bash", 5, 1000, PTS3)
            .process(20, SUDO, 10, 1000, PTS3)
            .process(25, "/usr/bin/bash", 20, 0, PTS3)
            .process(30, HELPER, 25, 0, PTS3)
            .node("/dev/pts/3", 136, 3, 1000);
        assert_eq!(observe(&fake, 30).unwrap().real_uids, vec![1000]);
    }

    #[test]
    fn no_sudo_or_an_unreadable_chain_is_none() {
        let fake = Fake::default().process(10, "/usr/bin/bash", 1, 0, 0).process(30, HELPER, 10, 0, 0);
        assert_eq!(observe(&fake, 30), None);
        // A parent that cannot be read (it ended): none, not a guess.
        let fake = Fake::default().process(30, HELPER, 10, 0, 0);
        assert_eq!(observe(&fake, 30), None);
        // A sudo elsewhere on the path ("/usr/local/bin/sudo") is not sudo.
        let fake =
            Fake::default().process(20, "/usr/local/bin/sudo", 1, 1000, PTS3).process(30, HELPER, 20, 0, 0);
        assert_eq!(observe(&fake, 30), None);
    }

    #[test]
    fn terminals_are_named_and_their_node_must_match() {
        let base = Fake::default().process(30, HELPER, 20, 0, 0);
        let with_tty =
            |tty: u64, fake: Fake| observe(&fake.process(20, SUDO, 1, 1000, tty), 30).unwrap().terminal;
        assert_eq!(with_tty(0, Fake::default().process(30, HELPER, 20, 0, 0)), Terminal::None);
        // pts 300 is 136:300; the minor's high bits sit above the major in tty_nr.
        let fake = Fake::default().process(30, HELPER, 20, 0, 0).node("/dev/pts/300", 136, 300, 1000);
        let pts300 = (136 << 8) | (300 & 0xff) | ((300 & !0xff) << 12);
        assert_eq!(with_tty(pts300, fake), Terminal::Owned { path: "/dev/pts/300".into(), uid: 1000 });
        let fake = Fake::default().process(30, HELPER, 20, 0, 0).node("/dev/tty2", 4, 2, 1000);
        assert_eq!(with_tty((4 << 8) | 2, fake), Terminal::Owned { path: "/dev/tty2".into(), uid: 1000 });
        let fake = Fake::default().process(30, HELPER, 20, 0, 0).node("/dev/ttyS0", 4, 64, 1000);
        assert_eq!(with_tty((4 << 8) | 64, fake), Terminal::Owned { path: "/dev/ttyS0".into(), uid: 1000 });
        // A node that is another device, or none: unnamed.
        let fake = Fake::default().process(30, HELPER, 20, 0, 0).node("/dev/pts/3", 136, 9, 1000);
        assert_eq!(with_tty(PTS3, fake), Terminal::Unnamed { major: 136, minor: 3 });
        assert_eq!(with_tty(PTS3, base), Terminal::Unnamed { major: 136, minor: 3 });
        // /dev/console (5:1) is not a line we name.
        let fake = Fake::default().process(30, HELPER, 20, 0, 0);
        assert_eq!(with_tty((5 << 8) | 1, fake), Terminal::Unnamed { major: 5, minor: 1 });
    }

    #[test]
    fn the_stat_and_status_lines_are_parsed_from_the_right() {
        assert_eq!(parent_and_tty("7 (a) b) S 5 7 7 34816 7"), Some((5, 34816)));
        assert_eq!(parent_and_tty("7 (a) S"), None);
        assert_eq!(real_uid("Name:\tx\nUid:\t1001\t0\t0\t0\n"), Some(1001));
        assert_eq!(real_uid("Name:\tx\n"), None);
        assert_eq!(device((136 << 8) | 1), (136, 1));
        // minor 300 of major 136: the high minor bits sit above the major.
        assert_eq!(device((136 << 8) | (300 & 0xff) | ((300 & !0xff) << 12)), (136, 300));
    }
}
