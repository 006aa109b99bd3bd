//! The helper's end of the host RPC: reads the bounded request from stdin,
//! and prints the progress lines of a long execute ([`LineProgress`]).
//! The contract itself (request and reply types, the parser, the size
//! limit) is `crate::wire`, shared with the workstation. Runs as root inside
//! `volce-lab-host rpc`.
//!
//! Security invariants: at most [`MAX_REQUEST_BYTES`] are read, however much
//! the caller sends; a longer request is refused, not truncated. A reader
//! that gives up at its deadline (`super::process::DeadlineReader`) makes
//! the refusal `request_timeout`.

use std::io::Read;

use crate::vocab::{Code, Refusal};

use super::output::Output;
use crate::wire::{MAX_REQUEST_BYTES, Received, receive};
pub use crate::wire::{Reply, Request};

/// Reads at most [`MAX_REQUEST_BYTES`] and parses exactly one request and
/// what the workstation sent beside it (its id, protocol, witnessed head).
pub fn read_request(input: impl Read) -> Result<Received, Refusal> {
    let mut bytes = Vec::with_capacity(1024);
    input.take(MAX_REQUEST_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(|error| match error.kind() {
        std::io::ErrorKind::TimedOut => Refusal::new(
            Code::RequestTimeout,
            format!(
                "No complete request arrived on stdin within {} seconds; nothing was done. \
                     Send the whole request and close stdin.",
                super::process::REQUEST_DEADLINE.as_secs()
            ),
        ),
        _ => Refusal::new(Code::InvalidRequest, "The request could not be read from stdin."),
    })?;
    if bytes.len() > MAX_REQUEST_BYTES {
        return Err(Refusal::new(Code::RequestTooLarge, "The request is larger than 16 KiB."));
    }
    receive(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_than_16_kib_is_refused_without_reading_everything() {
        let big = vec![b' '; MAX_REQUEST_BYTES + 1];
        assert_eq!(read_request(&big[..]).unwrap_err().code, Code::RequestTooLarge);
        let mut exact = br#"{"operation":"inventory"}"#.to_vec();
        exact.resize(MAX_REQUEST_BYTES, b' ');
        let received = read_request(&exact[..]).unwrap();
        assert_eq!((received.request, received.id, received.witness), (Request::Inventory {}, None, None));
        // An endless reader is cut at the limit.
        assert_eq!(read_request(std::io::repeat(b' ')).unwrap_err().code, Code::RequestTooLarge);
    }

    #[test]
    fn a_reader_that_times_out_is_request_timeout() {
        struct Late;
        impl Read for Late {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::TimedOut.into())
            }
        }
        let refusal = read_request(Late).unwrap_err();
        assert_eq!(refusal.code, Code::RequestTimeout);
        assert!(refusal.message.contains("5 seconds"), "{}", refusal.message);
    }
}

/// Prints each finished step of a long execute as one progress line, at
/// once, so the workstation sees it while the next step runs
/// (`crate::wire::progress`). At most `MAX_PROGRESS_LINES`, however many
/// steps an engine reports. Never waits: a line the pipe has no room for
/// is dropped and counted (`super::output`), since the reply, not
/// progress, says what happened, and the action and its record must not
/// wait on whoever reads our stdout.
pub struct LineProgress {
    out: std::cell::RefCell<Output>,
    printed: std::cell::Cell<usize>,
}

impl LineProgress {
    pub fn new(out: Output) -> LineProgress {
        LineProgress { out: std::cell::RefCell::new(out), printed: std::cell::Cell::new(0) }
    }

    pub fn into_inner(self) -> Output {
        self.out.into_inner()
    }
}

impl crate::docker::ProgressSink for LineProgress {
    fn step(&self, step: crate::vocab::Step) {
        if self.printed.get() >= crate::wire::progress::MAX_PROGRESS_LINES {
            return;
        }
        self.printed.set(self.printed.get() + 1);
        let line = crate::wire::progress::Progress { progress: step }.to_line();
        self.out.borrow_mut().offer(line.as_bytes());
    }
}

#[cfg(test)]
mod progress_tests {
    use super::*;
    use crate::docker::ProgressSink as _;
    use crate::vocab::Step;
    use crate::wire::progress::{MAX_PROGRESS_LINES, Progress, reply_bytes};

    #[test]
    fn the_helper_prints_at_most_the_bounded_number_of_progress_lines() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let sink = LineProgress::new(Output::new(writer.into()).unwrap());
        for _ in 0..MAX_PROGRESS_LINES + 5 {
            sink.step(Step::HealthCheck);
        }
        // Followed by the reply, the reply is what the workstation reads.
        let reply = Reply::from(Refusal::new(Code::Busy, "Busy.")).to_line();
        let mut output = sink.into_inner();
        output.reply(reply.as_bytes(), std::time::Duration::from_secs(5)).unwrap();
        assert_eq!(output.dropped(), 0);
        drop(output);
        let mut out = Vec::new();
        reader.read_to_end(&mut out).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert_eq!(text.lines().count(), MAX_PROGRESS_LINES + 1);
        assert!(text.lines().take(MAX_PROGRESS_LINES).all(|l| Progress::parse_line(l.as_bytes()).is_some()));
        assert_eq!(reply_bytes(&out), reply.as_bytes());
    }
}
