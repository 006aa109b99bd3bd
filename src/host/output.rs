//! The helper's stdout: progress lines written without ever waiting, and
//! the one reply line written within [`REPLY_DEADLINE`]. Runs as root
//! inside `volce-lab-host rpc`; no unsafe, no shell.
//!
//! Why: the caller's account chooses what the helper's stdout is. A pipe it
//! filled to 64 KiB and never reads blocks a plain write forever, and a
//! write between the claim and the record would hold the plan `executing`
//! for as long as that process lives (issue 22). So:
//! - the descriptor is put in non-blocking mode ([`Output::new`]), and a
//!   progress line that does not fit now is dropped and counted
//!   ([`Output::offer`]), never waited for: the action and its record
//!   never wait on the reader;
//! - a line the pipe took only part of is finished before anything else is
//!   written, so the reader never sees two lines run together;
//! - the reply comes after the record (`super::pipeline`), and waits for
//!   room at most [`REPLY_DEADLINE`] in all ([`Output::reply`]); then the
//!   helper gives up on it and exits, the plan long since recorded;
//! - the descriptor's flags are put back when the [`Output`] is dropped
//!   (the open file is shared with whoever handed it to us, a terminal
//!   perhaps).

use std::fs::File;
use std::io::Write as _;
use std::os::fd::{AsFd as _, OwnedFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// How long the helper waits, in all, for room for its reply. The
/// workstation reads its stdout as the reply arrives, so a pipe that stays
/// full this long has nobody reading it.
pub const REPLY_DEADLINE: Duration = Duration::from_secs(10);

/// The helper's stdout, non-blocking.
#[derive(Debug)]
pub struct Output {
    file: File,
    /// The flags the descriptor had, put back on drop.
    flags: OFlag,
    /// The rest of a line the pipe took only part of.
    pending: Vec<u8>,
    dropped: usize,
}

/// The reply could not be written within the deadline, or the pipe failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unwritten;

impl Output {
    /// Our own handle on fd 1, in non-blocking mode.
    pub fn stdout() -> std::io::Result<Output> {
        Output::new(std::io::stdout().as_fd().try_clone_to_owned()?)
    }

    /// `fd` in non-blocking mode (the flag is on the open file, which the
    /// caller shares: put back on drop).
    pub fn new(fd: OwnedFd) -> std::io::Result<Output> {
        let flags = OFlag::from_bits_truncate(fcntl(&fd, FcntlArg::F_GETFL)?);
        fcntl(&fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
        Ok(Output { file: File::from(fd), flags, pending: Vec::new(), dropped: 0 })
    }

    /// How many progress lines were dropped because the pipe was full (or
    /// failed).
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// Writes `line` if the pipe has room now, else drops it (counted).
    /// Never waits.
    pub fn offer(&mut self, line: &[u8]) {
        if self.flush_pending().is_err() || !self.pending.is_empty() {
            self.dropped += 1;
            return;
        }
        match self.write_some(line) {
            Ok(0) => self.dropped += 1,
            Ok(written) => self.pending.extend_from_slice(&line[written..]),
            Err(_) => self.dropped += 1,
        }
    }

    /// Writes `line` (after the rest of a partly written progress line),
    /// waiting for room at most `within` in all.
    pub fn reply(&mut self, line: &[u8], within: Duration) -> Result<(), Unwritten> {
        let deadline = Instant::now() + within;
        self.pending.extend_from_slice(line);
        while !self.pending.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Unwritten);
            }
            let millis = left.as_millis().saturating_add(1).min(i32::MAX as u128);
            let timeout = PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX);
            let mut fds = [PollFd::new(self.file.as_fd(), PollFlags::POLLOUT)];
            match poll(&mut fds, timeout) {
                Ok(0) | Err(Errno::EINTR) => continue,
                Ok(_) => self.flush_pending().map_err(|_| Unwritten)?,
                Err(_) => return Err(Unwritten),
            }
        }
        Ok(())
    }

    /// Writes as much of `pending` as fits now.
    fn flush_pending(&mut self) -> std::io::Result<()> {
        while !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            let written = self.write_some(&pending);
            self.pending = pending;
            match written? {
                0 => return Ok(()),
                written => drop(self.pending.drain(..written)),
            }
        }
        Ok(())
    }

    /// One write; 0 when the pipe is full. EINTR is retried.
    fn write_some(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        loop {
            match self.file.write(bytes) {
                Ok(written) => return Ok(written),
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => return Ok(0),
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            }
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        let _ = fcntl(&self.file, FcntlArg::F_SETFL(self.flags));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    /// A pipe already filled to its capacity (64 KiB) by someone who never
    /// reads it: what the attack of issue 22 hands the helper as stdout.
    fn full_pipe() -> (std::io::PipeReader, Output) {
        let (reader, writer) = std::io::pipe().unwrap();
        let mut output = Output::new(OwnedFd::from(writer)).unwrap();
        let filler = vec![b'x'; 4096];
        while output.write_some(&filler).unwrap() > 0 {}
        (reader, output)
    }

    #[test]
    fn progress_on_a_full_pipe_is_dropped_and_counted_at_once() {
        let (_reader, mut output) = full_pipe();
        let started = Instant::now();
        for _ in 0..100 {
            output.offer(b"{\"progress\":\"health_check\"}\n");
        }
        assert_eq!(output.dropped(), 100);
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    }

    #[test]
    fn the_reply_to_a_full_pipe_gives_up_at_its_deadline() {
        let (_reader, mut output) = full_pipe();
        let started = Instant::now();
        assert_eq!(output.reply(b"{\"ok\":true}\n", Duration::from_millis(300)), Err(Unwritten));
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(3), "{took:?}");
    }

    #[test]
    fn a_reader_that_drains_late_gets_whole_lines_and_the_reply() {
        let (mut reader, mut output) = full_pipe();
        output.offer(b"{\"progress\":\"image_pulled\"}\n");
        assert_eq!(output.dropped(), 1);
        // One page of room, and a line longer than that (longer than
        // PIPE_BUF, so the pipe takes part of it): the rest is kept, not
        // dropped, and nothing else is written before it.
        let mut page = vec![0u8; 4096];
        reader.read_exact(&mut page).unwrap();
        let long = format!("{}\n", "p".repeat(6000));
        output.offer(long.as_bytes());
        assert_eq!(output.dropped(), 1, "a partly written line is kept, not dropped");
        assert!(!output.pending.is_empty());
        output.offer(b"{\"progress\":\"health_check\"}\n");
        assert_eq!(output.dropped(), 2, "nothing is written while a line is unfinished");
        let drain = std::thread::spawn(move || {
            let mut all = Vec::new();
            reader.read_to_end(&mut all).unwrap();
            all
        });
        output.reply(b"{\"ok\":true}\n", Duration::from_secs(10)).unwrap();
        drop(output);
        let text = String::from_utf8(drain.join().unwrap()).unwrap();
        assert!(text.ends_with(&format!("x{long}{{\"ok\":true}}\n")), "{}", &text[text.len() - 80..]);
    }

    #[test]
    fn the_descriptors_flags_are_put_back() {
        let (_reader, writer) = std::io::pipe().unwrap();
        let fd = OwnedFd::from(writer);
        let kept = fd.try_clone().unwrap();
        let before = fcntl(&kept, FcntlArg::F_GETFL).unwrap();
        let output = Output::new(fd).unwrap();
        assert_ne!(fcntl(&kept, FcntlArg::F_GETFL).unwrap() & OFlag::O_NONBLOCK.bits(), 0);
        drop(output);
        assert_eq!(fcntl(&kept, FcntlArg::F_GETFL).unwrap(), before);
    }
}
