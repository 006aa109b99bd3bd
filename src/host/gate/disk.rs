//! The disk check's answer, read in-process: what `df -h /` prints, from
//! `statvfs(2)` and `/proc/self/mounts`, without starting `df` (issue 44:
//! one process less per gated check, and one program less the agent's
//! account reaches through the gate). Runs as the agent's account,
//! unprivileged, inside `volce-lab-host ssh-gate`.
//!
//! Invariant: the text is the same facts in the same format GNU df 9 prints
//! for `-h` in the C locale (the workstation parses it, `inspect::report`,
//! and the agent reads it): a header and one line, sizes in powers of 1024
//! rounded up as coreutils' `human_readable` does (one decimal below 10),
//! Use% = ceil(used * 100 / (used + avail)), columns as df aligns them.
//! The hermetic test compares it with the real `df -h` for the mount
//! points of the machine it runs on.

use std::path::Path;

/// Why the answer could not be read (df's own failures, in our words).
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error("cannot read /proc/self/mounts: {0}")]
    Mounts(#[from] std::io::Error),
    #[error("no mounted file system holds {0}")]
    NotMounted(String),
    #[error("statvfs of {0} failed: {1}")]
    Statvfs(String, nix::Error),
}

/// df's minimum widths of its -h columns: Filesystem, Size, Used, Avail, Use%.
const MIN_WIDTHS: [usize; 5] = [14, 5, 5, 5, 4];
const HEADER: [&str; 6] = ["Filesystem", "Size", "Used", "Avail", "Use%", "Mounted on"];

/// `df -h <path>` as text: header and one line.
pub fn df_h(path: &str) -> Result<String, DiskError> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")?;
    let (source, mount) = mount_of(&mounts, path).ok_or_else(|| DiskError::NotMounted(path.into()))?;
    let stat = nix::sys::statvfs::statvfs(Path::new(path)).map_err(|e| DiskError::Statvfs(path.into(), e))?;
    let block = u128::from(stat.fragment_size());
    let total = u128::from(stat.blocks()) * block;
    let used = u128::from(stat.blocks().saturating_sub(stat.blocks_free())) * block;
    let avail = u128::from(stat.blocks_available()) * block;
    Ok(table([source, human(total), human(used), human(avail), percent(used, avail), mount]))
}

/// The mount holding `path` as df picks it: the longest mount point that
/// contains it, the last such entry when several are stacked there.
/// (source, mount point), unescaped as getmntent does.
pub fn mount_of(mounts: &str, path: &str) -> Option<(String, String)> {
    let contains = |mount: &str| {
        mount == "/" || path == mount || path.strip_prefix(mount).is_some_and(|rest| rest.starts_with('/'))
    };
    let mut best: Option<(String, String)> = None;
    for line in mounts.lines() {
        let mut fields = line.split(' ');
        let (Some(source), Some(mount)) = (fields.next(), fields.next()) else { continue };
        let mount = unescape(mount);
        if contains(&mount) && best.as_ref().is_none_or(|(_, m)| m.len() <= mount.len()) {
            best = Some((shown(&unescape(source)), mount));
        }
    }
    best.map(|(source, mount)| (source, shown(&mount)))
}

/// The kernel writes space, tab, newline and backslash as `\ooo` octal.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push(d.iter().fold(0u8, |n, b| n.wrapping_mul(8).wrapping_add(b - b'0')));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// As df shows a name: control characters become `?`.
fn shown(name: &str) -> String {
    name.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

/// coreutils `human_readable` with `-h`: autoscale, base 1024, rounding up.
pub fn human(bytes: u128) -> String {
    const SUFFIXES: &[u8] = b"KMGTPEZYRQ";
    if bytes < 1024 {
        return bytes.to_string();
    }
    let mut exponent = 0;
    let mut scale: u128 = 1;
    while bytes / scale >= 1024 && exponent < SUFFIXES.len() {
        scale *= 1024;
        exponent += 1;
    }
    let suffix = |e: usize| SUFFIXES[e - 1] as char;
    if bytes / scale < 10 {
        let tenths = (bytes * 10).div_ceil(scale);
        if tenths < 100 {
            return format!("{}.{}{}", tenths / 10, tenths % 10, suffix(exponent));
        }
        return format!("10{}", suffix(exponent));
    }
    let whole = bytes.div_ceil(scale);
    if whole == 1024 && exponent < SUFFIXES.len() {
        return format!("1.0{}", suffix(exponent + 1));
    }
    format!("{whole}{}", suffix(exponent))
}

/// df's Use%: rounded up; `-` when nothing is usable at all.
pub fn percent(used: u128, avail: u128) -> String {
    match used + avail {
        0 => "-".into(),
        total => format!("{}%", (used * 100).div_ceil(total)),
    }
}

/// df's two lines: Filesystem left-aligned, the numbers right-aligned, each
/// column as wide as its widest cell (at least df's minimum), one space
/// between, the last column unpadded.
fn table(row: [String; 6]) -> String {
    let mut out = String::new();
    for cells in [HEADER.map(String::from), row.clone()] {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let width =
                if i < 5 { MIN_WIDTHS[i].max(HEADER[i].len()).max(row[i].chars().count()) } else { 0 };
            let pad = " ".repeat(width.saturating_sub(cell.chars().count()));
            match i {
                0 => line.push_str(&format!("{cell}{pad}")),
                5 => line.push_str(&format!(" {cell}")),
                _ => line.push_str(&format!(" {pad}{cell}")),
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u128 = 1024;

    /// Golden values of GNU df 9.1 `-h` (coreutils human.c, ceiling).
    #[test]
    fn sizes_round_up_as_df_does() {
        let cases = [
            (0, "0"),
            (1023, "1023"),
            (1024, "1.0K"),
            (1025, "1.1K"),
            (10 * K - 1, "10K"),
            (10 * K, "10K"),
            (10 * K + 1, "11K"),
            (1023 * K + 1, "1.0M"),
            (1024 * K * K - 1, "1.0G"),
            (45 * K * K * K + 1, "46G"),
            (252 * K * K * K, "252G"),
            (9 * K * K * K + 9 * K * K * K / 10, "9.9G"),
            (9 * K * K * K + 9 * K * K * K / 10 + 1, "10G"),
        ];
        for (bytes, text) in cases {
            assert_eq!(human(bytes), text, "{bytes}");
        }
        assert_eq!(percent(0, 0), "-");
        assert_eq!(percent(1, 199), "1%");
        assert_eq!(percent(50, 50), "50%");
        assert_eq!(percent(0, 7), "0%");
    }

    #[test]
    fn the_mount_is_the_longest_match_and_the_last_stacked() {
        let mounts = "rootfs / rootfs rw 0 0\n/dev/vda / ext4 rw 0 0\ntmpfs /dev/shm tmpfs rw 0 0\n\
                      /dev/vdb /srv/my\\040data ext4 rw 0 0\n";
        let of = |path| mount_of(mounts, path).unwrap();
        assert_eq!(of("/"), ("/dev/vda".into(), "/".into()));
        assert_eq!(of("/dev/shm"), ("tmpfs".into(), "/dev/shm".into()));
        assert_eq!(of("/dev/shmx"), ("/dev/vda".into(), "/".into()));
        assert_eq!(of("/srv/my data/x"), ("/dev/vdb".into(), "/srv/my data".into()));
        assert_eq!(mount_of("", "/"), None);
    }

    #[test]
    fn the_table_is_aligned_as_df_aligns_it() {
        let row = ["/dev/vda", "252G", "45G", "46G", "50%", "/"].map(String::from);
        assert_eq!(
            table(row),
            "Filesystem      Size  Used Avail Use% Mounted on\n/dev/vda        252G   45G   46G  50% /\n"
        );
        let long = ["/dev/mapper/vg0-root-volume", "1.0T", "0", "1.0T", "0%", "/"].map(String::from);
        assert_eq!(
            table(long),
            "Filesystem                   Size  Used Avail Use% Mounted on\n\
             /dev/mapper/vg0-root-volume  1.0T     0  1.0T   0% /\n"
        );
    }

    /// The same text as the real `df -h` for the mount points here, run
    /// before and after ours: free space may change in between, so ours
    /// must equal one of the two, in one of five tries.
    #[test]
    fn the_answer_is_what_df_prints_on_this_machine() {
        let df = |path: &str| {
            let output = std::process::Command::new("/usr/bin/df")
                .args(["-h", path])
                .env_clear()
                .env("LC_ALL", "C")
                .output()
                .unwrap();
            String::from_utf8(output.stdout).unwrap()
        };
        if !Path::new("/usr/bin/df").exists() {
            return; // nothing to compare with
        }
        for path in ["/", "/tmp", "/dev/shm", "/proc"].into_iter().filter(|p| Path::new(p).exists()) {
            let matched = (0..5).any(|_| {
                let before = df(path);
                let ours = df_h(path).unwrap();
                ours == before || ours == df(path)
            });
            assert!(matched, "{path}: ours\n{}df\n{}", df_h(path).unwrap(), df(path));
        }
    }
}
