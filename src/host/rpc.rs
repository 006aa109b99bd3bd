//! The helper's end of the host RPC: reads the bounded request from stdin.
//! The contract itself (request and reply types, the parser, the size
//! limit) is `crate::wire`, shared with the workstation. Runs as root inside
//! `volce-lab-host rpc`.
//!
//! Security invariants: at most [`MAX_REQUEST_BYTES`] are read, however much
//! the caller sends; a longer request is refused, not truncated. A reader
//! that gives up at its deadline (`super::process::DeadlineReader`) makes
//! the refusal `request_timeout`.

use std::io::Read;

use crate::control::{Code, Refusal};

use crate::wire::{MAX_REQUEST_BYTES, RequestId, parse_envelope};
pub use crate::wire::{Reply, Request};

/// Reads at most [`MAX_REQUEST_BYTES`] and parses exactly one request and
/// the request id the workstation sent with it.
pub fn read_request(input: impl Read) -> Result<(Request, Option<RequestId>), Refusal> {
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
    parse_envelope(&bytes)
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
        assert_eq!(read_request(&exact[..]).unwrap(), (Request::Inventory {}, None));
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
