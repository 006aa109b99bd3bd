//! A look at the state database's write-ahead log before SQLite opens it:
//! a log cut short in the middle of a frame. Runs as root in the host
//! helper (every open) and in its doctor; reads 32 bytes, writes nothing.
//!
//! Why: SQLite reads a torn log as "the last transactions never happened"
//! and, when the last connection closes, folds what is left into state.db
//! and deletes the log. After a truncation that is silent loss of
//! committed plans and approvals, so the helper refuses instead
//! (`state_corrupt`) and leaves both files as they are for the operator.
//! A log cut exactly at a frame boundary cannot be told from a shorter
//! log; it reads as an earlier, consistent state (and a plan that already
//! ran is then refused by its engine snapshot, which the run changed).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The log's header and each frame's header (SQLite's WAL format).
const HEADER_BYTES: u64 = 32;
const FRAME_HEADER_BYTES: u64 = 24;
const MAGIC: [u32; 2] = [0x377f_0682, 0x377f_0683];

/// How often, and how far apart, a misaligned length is looked at again:
/// another helper writes a frame in two `pwrite`s (header, then page), so a
/// live log can be misaligned for microseconds; a torn one stays torn.
const SETTLE: (u32, Duration) = (5, Duration::from_millis(20));

/// `<database>-wal`.
pub fn log_path(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// `Some(length)` when the log beside `database` is cut short: shorter
/// than its header, a header that is not SQLite's, or a length that is
/// not the header plus whole frames, and it stays so for a moment.
pub fn torn_log(database: &Path) -> Option<u64> {
    let path = log_path(database);
    let (tries, pause) = SETTLE;
    for attempt in 0..tries {
        let length = std::fs::symlink_metadata(&path).ok()?.len();
        if !misaligned(&path, length) {
            return None;
        }
        if attempt + 1 < tries {
            std::thread::sleep(pause);
        } else {
            return Some(length);
        }
    }
    None
}

fn misaligned(path: &Path, length: u64) -> bool {
    if length == 0 {
        return false;
    }
    let mut header = [0u8; HEADER_BYTES as usize];
    let read = std::fs::File::open(path).and_then(|mut file| file.read_exact(&mut header));
    if length < HEADER_BYTES || read.is_err() {
        return true;
    }
    let word = |at: usize| u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]);
    if !MAGIC.contains(&word(0)) {
        return true;
    }
    // A page size is a power of two from 512 to 65536 (65536 is stored as 1).
    let page = match word(8) {
        1 => 65536,
        n if (512..=32768).contains(&n) && n.is_power_of_two() => u64::from(n),
        _ => return true,
    };
    !(length - HEADER_BYTES).is_multiple_of(FRAME_HEADER_BYTES + page)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(dir: &Path, bytes: &[u8]) -> PathBuf {
        let db = dir.join("state.db");
        std::fs::write(log_path(&db), bytes).unwrap();
        db
    }

    fn header(page: u32) -> Vec<u8> {
        let mut h = vec![0u8; 32];
        h[..4].copy_from_slice(&MAGIC[0].to_be_bytes());
        h[8..12].copy_from_slice(&page.to_be_bytes());
        h
    }

    #[test]
    fn whole_frames_or_no_log_are_not_torn() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(torn_log(&dir.path().join("state.db")), None, "no log");
        let mut bytes = header(4096);
        bytes.resize(32 + 2 * (24 + 4096), 0);
        assert_eq!(torn_log(&log(dir.path(), &bytes)), None);
        assert_eq!(torn_log(&log(dir.path(), b"")), None, "empty log");
    }

    #[test]
    fn a_log_cut_inside_a_frame_or_its_header_is_torn() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = header(4096);
        bytes.resize(32 + 24 + 100, 0);
        assert_eq!(torn_log(&log(dir.path(), &bytes)), Some(156));
        assert_eq!(torn_log(&log(dir.path(), &header(4096)[..20])), Some(20));
        assert_eq!(torn_log(&log(dir.path(), &[7u8; 64])), Some(64), "not SQLite's header");
    }
}
