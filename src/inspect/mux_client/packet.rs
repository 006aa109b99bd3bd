//! The packets of OpenSSH's multiplexing protocol (PROTOCOL.mux) that a
//! passenger client needs: the hello, the new-session request and the
//! master's replies. Pure: bytes in, bytes out.
//!
//! Framing (PROTOCOL.mux, mux.c): every packet is a uint32 length followed
//! by that many bytes, which start with a uint32 message type; integers are
//! big-endian (SSH's uint32), a string is a uint32 length and its bytes, a
//! bool is sent as a uint32.

/// `MUX_MSG_HELLO`, both ways, first.
pub const MUX_MSG_HELLO: u32 = 0x0000_0001;
/// `MUX_C_NEW_SESSION`: a passenger session running one command.
pub const MUX_C_NEW_SESSION: u32 = 0x1000_0002;
pub const MUX_S_OK: u32 = 0x8000_0001;
pub const MUX_S_PERMISSION_DENIED: u32 = 0x8000_0002;
pub const MUX_S_FAILURE: u32 = 0x8000_0003;
pub const MUX_S_EXIT_MESSAGE: u32 = 0x8000_0004;
pub const MUX_S_SESSION_OPENED: u32 = 0x8000_0006;
pub const MUX_S_TTY_ALLOC_FAIL: u32 = 0x8000_0008;

/// The protocol version we speak; a master speaking another is refused.
pub const VERSION: u32 = 4;
/// "escape char" value that disables the escape character.
pub const NO_ESCAPE: u32 = 0xffff_ffff;
/// The largest packet we accept from a master: its replies are a few bytes
/// plus at most a reason sentence.
pub const MAX_PACKET: u32 = 64 * 1024;

/// Why bytes from the master are not a packet we understand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    #[error("the packet ends before its fields do")]
    Truncated,
    #[error("the packet announces {0} bytes, more than a master ever sends")]
    TooLong(u32),
    #[error("the packet is shorter than its message type")]
    Empty,
}

/// What a master said, as far as a passenger client cares. Reasons the
/// master gives with a refusal are not kept: they are the master's words
/// and go nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    Hello {
        version: u32,
    },
    Ok {
        request_id: u32,
    },
    SessionOpened {
        request_id: u32,
        session_id: u32,
    },
    PermissionDenied {
        request_id: u32,
    },
    Failure {
        request_id: u32,
    },
    ExitMessage {
        session_id: u32,
        exit_value: u32,
    },
    TtyAllocFail {
        session_id: u32,
    },
    /// A message type a passenger session does not expect.
    Other {
        kind: u32,
    },
}

/// A packet being written: its body built field by field, then framed
/// with its length. (Not `crate::wire::answers::Body`, the helper's answer.)
#[derive(Default)]
struct PacketWriter(Vec<u8>);

impl PacketWriter {
    fn u32(mut self, value: u32) -> PacketWriter {
        self.0.extend_from_slice(&value.to_be_bytes());
        self
    }

    fn string(self, bytes: &[u8]) -> PacketWriter {
        let mut body = self.u32(bytes.len() as u32);
        body.0.extend_from_slice(bytes);
        body
    }

    fn framed(self) -> Vec<u8> {
        let mut packet = Vec::with_capacity(4 + self.0.len());
        packet.extend_from_slice(&(self.0.len() as u32).to_be_bytes());
        packet.extend_from_slice(&self.0);
        packet
    }
}

/// Our hello: version 4, no extensions.
pub fn hello() -> Vec<u8> {
    PacketWriter::default().u32(MUX_MSG_HELLO).u32(VERSION).framed()
}

/// A passenger session that runs `command`: no tty, no X11 or agent
/// forwarding, no subsystem, no escape character, an empty TERM and no
/// environment, whatever the master's configuration would allow.
pub fn new_session(request_id: u32, command: &str) -> Vec<u8> {
    PacketWriter::default()
        .u32(MUX_C_NEW_SESSION)
        .u32(request_id)
        .string(b"") // reserved
        .u32(0) // want tty
        .u32(0) // want X11 forwarding
        .u32(0) // want agent forwarding
        .u32(0) // subsystem
        .u32(NO_ESCAPE)
        .string(b"") // terminal type
        .string(command.as_bytes())
        .framed()
}

/// The body length a packet header announces, if it is one we accept.
pub fn body_length(header: [u8; 4]) -> Result<usize, PacketError> {
    let length = u32::from_be_bytes(header);
    if length > MAX_PACKET {
        return Err(PacketError::TooLong(length));
    }
    if length < 4 {
        return Err(PacketError::Empty);
    }
    Ok(length as usize)
}

/// Reads fields off the front of a body.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn u32(&mut self) -> Result<u32, PacketError> {
        let (head, rest) = self.0.split_first_chunk::<4>().ok_or(PacketError::Truncated)?;
        self.0 = rest;
        Ok(u32::from_be_bytes(*head))
    }

    fn string(&mut self) -> Result<&'a [u8], PacketError> {
        let length = self.u32()? as usize;
        if self.0.len() < length {
            return Err(PacketError::Truncated);
        }
        let (bytes, rest) = self.0.split_at(length);
        self.0 = rest;
        Ok(bytes)
    }
}

/// The message in one packet body (without its length header).
pub fn parse(body: &[u8]) -> Result<Message, PacketError> {
    let mut fields = Fields(body);
    let kind = fields.u32().map_err(|_| PacketError::Empty)?;
    let message = match kind {
        MUX_MSG_HELLO => {
            let version = fields.u32()?;
            // Extensions: name/value string pairs. None is used; each must
            // still be whole.
            while !fields.0.is_empty() {
                fields.string()?;
                fields.string()?;
            }
            Message::Hello { version }
        }
        MUX_S_OK => Message::Ok { request_id: fields.u32()? },
        MUX_S_SESSION_OPENED => {
            Message::SessionOpened { request_id: fields.u32()?, session_id: fields.u32()? }
        }
        MUX_S_PERMISSION_DENIED | MUX_S_FAILURE => {
            let request_id = fields.u32()?;
            fields.string()?;
            if kind == MUX_S_FAILURE {
                Message::Failure { request_id }
            } else {
                Message::PermissionDenied { request_id }
            }
        }
        MUX_S_EXIT_MESSAGE => Message::ExitMessage { session_id: fields.u32()?, exit_value: fields.u32()? },
        MUX_S_TTY_ALLOC_FAIL => Message::TtyAllocFail { session_id: fields.u32()? },
        kind => Message::Other { kind },
    };
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(packet: &[u8]) -> &[u8] {
        let length = body_length(packet[..4].try_into().unwrap()).unwrap();
        assert_eq!(packet.len(), 4 + length, "the header counts the body exactly");
        &packet[4..]
    }

    #[test]
    fn hello_is_type_one_version_four_without_extensions() {
        assert_eq!(hello(), [0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 4]);
    }

    /// The field order of mux.c's mux_master_process_new_session.
    #[test]
    fn a_new_session_asks_for_nothing_but_the_command() {
        let packet = new_session(7, "df -h /");
        let mut fields = Fields(body(&packet));
        assert_eq!(fields.u32(), Ok(MUX_C_NEW_SESSION));
        assert_eq!(fields.u32(), Ok(7), "request id");
        assert_eq!(fields.string(), Ok(&b""[..]), "reserved");
        for flag in ["tty", "X11", "agent", "subsystem"] {
            assert_eq!(fields.u32(), Ok(0), "want {flag}");
        }
        assert_eq!(fields.u32(), Ok(0xffff_ffff), "no escape character");
        assert_eq!(fields.string(), Ok(&b""[..]), "TERM");
        assert_eq!(fields.string(), Ok(&b"df -h /"[..]));
        assert!(fields.0.is_empty(), "no environment strings");
    }

    fn packet(fields: &[Result<u32, &[u8]>]) -> Vec<u8> {
        fields
            .iter()
            .fold(PacketWriter::default(), |body, field| match field {
                Ok(value) => body.u32(*value),
                Err(bytes) => body.string(bytes),
            })
            .framed()
    }

    /// Tried: every reply a passenger session can get, a hello with the
    /// "info" extension a 9.x master sends, and unknown types.
    #[test]
    fn the_master_s_replies_are_read_field_by_field() {
        for (fields, expected) in [
            (vec![Ok(MUX_MSG_HELLO), Ok(4)], Message::Hello { version: 4 }),
            (
                vec![Ok(MUX_MSG_HELLO), Ok(4), Err(&b"info"[..]), Err(&b"0"[..])],
                Message::Hello { version: 4 },
            ),
            (vec![Ok(MUX_MSG_HELLO), Ok(3)], Message::Hello { version: 3 }),
            (vec![Ok(MUX_S_OK), Ok(9)], Message::Ok { request_id: 9 }),
            (
                vec![Ok(MUX_S_SESSION_OPENED), Ok(1), Ok(5)],
                Message::SessionOpened { request_id: 1, session_id: 5 },
            ),
            (
                vec![Ok(MUX_S_FAILURE), Ok(1), Err(&b"Session open refused by peer"[..])],
                Message::Failure { request_id: 1 },
            ),
            (
                vec![Ok(MUX_S_PERMISSION_DENIED), Ok(2), Err(&b"Permission denied"[..])],
                Message::PermissionDenied { request_id: 2 },
            ),
            (
                vec![Ok(MUX_S_EXIT_MESSAGE), Ok(5), Ok(3)],
                Message::ExitMessage { session_id: 5, exit_value: 3 },
            ),
            (vec![Ok(MUX_S_TTY_ALLOC_FAIL), Ok(5)], Message::TtyAllocFail { session_id: 5 }),
            (vec![Ok(0x8000_000f)], Message::Other { kind: 0x8000_000f }),
        ] {
            assert_eq!(parse(body(&packet(&fields))), Ok(expected), "{fields:?}");
        }
    }

    /// Tried: a body cut inside each field kind, a string longer than its
    /// packet, a header over the limit and one too short for a type.
    #[test]
    fn short_or_oversized_packets_are_refused() {
        assert_eq!(parse(&[]), Err(PacketError::Empty));
        assert_eq!(parse(&[0x80, 0, 0]), Err(PacketError::Empty));
        let opened = packet(&[Ok(MUX_S_SESSION_OPENED), Ok(1), Ok(5)]);
        assert_eq!(parse(&body(&opened)[..10]), Err(PacketError::Truncated));
        let failure = packet(&[Ok(MUX_S_FAILURE), Ok(1), Err(&b"no"[..])]);
        assert_eq!(parse(&body(&failure)[..13]), Err(PacketError::Truncated));
        let hello = packet(&[Ok(MUX_MSG_HELLO), Ok(4), Err(&b"info"[..])]);
        assert_eq!(parse(body(&hello)), Err(PacketError::Truncated), "an extension without its value");
        assert_eq!(body_length((MAX_PACKET + 1).to_be_bytes()), Err(PacketError::TooLong(MAX_PACKET + 1)));
        assert_eq!(body_length(3u32.to_be_bytes()), Err(PacketError::Empty));
        assert_eq!(body_length(MAX_PACKET.to_be_bytes()), Ok(MAX_PACKET as usize));
    }
}
