//! The two messages of the 0-RTT exchange, byte by byte.
//!
//! Every message starts with the same 4-byte header, so a reader of a byte
//! stream can find its end ([`frame_len`]) before it knows the type:
//!
//! | Offset | Size | Field | Rule |
//! |---:|---:|---|---|
//! | 0 | 1 | type | `0x01` ClientHello0, `0x02` ServerReply0 |
//! | 1 | 1 | version | `0x02` |
//! | 2 | 2 | body length | exactly the type's body length |
//!
//! ClientHello0 (4 + 105 = [`CLIENT_HELLO_LEN`] bytes):
//!
//! | Offset | Size | Field |
//! |---:|---:|---|
//! | 4 | 32 | ticket hash: SHA-256 of the ticket's bytes |
//! | 36 | 32 | client random |
//! | 68 | 32 | client ephemeral X25519 public key `e_c.pub` |
//! | 100 | 1 | flags: bit 0 = forward secrecy requested; other bits 0 |
//! | 101 | 8 | client time: the client's clock when it built the hello, unix milliseconds, big-endian |
//!
//! Version `0x01` had no client time; its messages are refused as an
//! unsupported version (a server cannot judge their freshness).
//!
//! ServerReply0 (4 + 64 = [`SERVER_REPLY_LEN`] bytes; sent only when the
//! hello asked for forward secrecy):
//!
//! | Offset | Size | Field |
//! |---:|---:|---|
//! | 4 | 32 | server ephemeral X25519 public key `e_s.pub` |
//! | 36 | 32 | confirmation: HMAC-SHA256(finished_key, th1) |

use std::fmt;

use crate::codec::Reader;
use crate::keys::{Hex, KEY_SHARE_LEN};
use crate::schedule::HASH_LEN;
use crate::TicketError;

/// The message format version this crate speaks.
pub const MESSAGE_VERSION: u8 = 0x02;

/// Length of the common header.
pub const HEADER_LEN: usize = 4;

/// Length of a whole ClientHello0.
pub const CLIENT_HELLO_LEN: usize = HEADER_LEN + HELLO_BODY_LEN;

/// Length of a whole ServerReply0.
pub const SERVER_REPLY_LEN: usize = HEADER_LEN + REPLY_BODY_LEN;

/// Length of the client random.
pub const CLIENT_RANDOM_LEN: usize = 32;

/// Length of the client time (unix milliseconds).
const CLIENT_TIME_LEN: usize = 8;

const HELLO_BODY_LEN: usize = HASH_LEN + CLIENT_RANDOM_LEN + KEY_SHARE_LEN + 1 + CLIENT_TIME_LEN;
const REPLY_BODY_LEN: usize = KEY_SHARE_LEN + HASH_LEN;

/// A message type code point. Unknown values survive a round trip and print
/// in hex.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct MessageType(pub u8);

impl MessageType {
    /// The client's first flight.
    pub const CLIENT_HELLO0: Self = Self(0x01);
    /// The server's forward-secrecy answer.
    pub const SERVER_REPLY0: Self = Self(0x02);
}

impl fmt::Debug for MessageType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::CLIENT_HELLO0 => f.write_str("ClientHello0"),
            Self::SERVER_REPLY0 => f.write_str("ServerReply0"),
            Self(other) => write!(f, "MessageType({other:#04x})"),
        }
    }
}

/// The hello's flags byte.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flags(u8);

impl Flags {
    /// No option: the SMT-key protects the whole session.
    pub const NONE: Self = Self(0);
    /// The client asks for a ServerReply0 and a forward-secret fs-key.
    pub const FORWARD_SECRECY: Self = Self(0x01);
    const KNOWN: u8 = 0x01;

    /// [`Flags::FORWARD_SECRECY`] if `fs`, [`Flags::NONE`] otherwise.
    pub fn with_forward_secrecy(fs: bool) -> Self {
        if fs {
            Self::FORWARD_SECRECY
        } else {
            Self::NONE
        }
    }

    /// Whether forward secrecy is requested.
    pub fn forward_secrecy(self) -> bool {
        self.0 & Self::FORWARD_SECRECY.0 != 0
    }

    /// The byte on the wire.
    pub fn bits(self) -> u8 {
        self.0
    }

    fn parse(bits: u8) -> Result<Self, TicketError> {
        if bits & !Self::KNOWN != 0 {
            return Err(TicketError::Malformed("unknown ClientHello0 flags"));
        }
        Ok(Self(bits))
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Flags({:#04x}", self.0)?;
        if self.forward_secrecy() {
            f.write_str(" FS")?;
        }
        f.write_str(")")
    }
}

/// The client's first flight: which ticket, a fresh random, an ephemeral
/// key share and the options.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientHello0 {
    /// SHA-256 of the ticket's bytes.
    pub ticket_hash: [u8; HASH_LEN],
    /// Fresh per hello; the server's replay cache remembers it.
    pub client_random: [u8; CLIENT_RANDOM_LEN],
    /// `e_c.pub`.
    pub key_share: [u8; KEY_SHARE_LEN],
    /// Options.
    pub flags: Flags,
    /// The client's clock when it built the hello (unix milliseconds). Part
    /// of the transcript `th0`, so changing it changes the keys; the server
    /// refuses a hello whose time is outside its freshness window or before
    /// its own start (`docs/handshake.md` § 3).
    pub client_time: u64,
}

impl ClientHello0 {
    /// Parses exactly one ClientHello0 (never panics).
    pub fn decode(bytes: &[u8]) -> Result<Self, TicketError> {
        let mut r = body(bytes, MessageType::CLIENT_HELLO0, HELLO_BODY_LEN)?;
        let hello = Self {
            ticket_hash: r.array("ClientHello0 ticket hash")?,
            client_random: r.array("ClientHello0 client random")?,
            key_share: r.array("ClientHello0 key share")?,
            flags: Flags::parse(r.u8("ClientHello0 flags")?)?,
            client_time: u64::from_be_bytes(r.array("ClientHello0 client time")?),
        };
        r.finish("trailing bytes after ClientHello0")?;
        Ok(hello)
    }

    /// Appends the encoding to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        header(out, MessageType::CLIENT_HELLO0, HELLO_BODY_LEN);
        out.extend_from_slice(&self.ticket_hash);
        out.extend_from_slice(&self.client_random);
        out.extend_from_slice(&self.key_share);
        out.push(self.flags.bits());
        out.extend_from_slice(&self.client_time.to_be_bytes());
    }

    /// The encoding.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(CLIENT_HELLO_LEN);
        self.emit(&mut out);
        out
    }
}

impl fmt::Debug for ClientHello0 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientHello0")
            .field("ticket_hash", &Hex(&self.ticket_hash))
            .field("client_random", &Hex(&self.client_random))
            .field("key_share", &Hex(&self.key_share))
            .field("flags", &self.flags)
            .field("client_time", &self.client_time)
            .finish()
    }
}

/// The server's answer to a hello that asked for forward secrecy.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerReply0 {
    /// `e_s.pub`.
    pub key_share: [u8; KEY_SHARE_LEN],
    /// HMAC-SHA256(finished_key, th1).
    pub confirm: [u8; HASH_LEN],
}

impl ServerReply0 {
    /// Parses exactly one ServerReply0 (never panics).
    pub fn decode(bytes: &[u8]) -> Result<Self, TicketError> {
        let mut r = body(bytes, MessageType::SERVER_REPLY0, REPLY_BODY_LEN)?;
        let reply = Self {
            key_share: r.array("ServerReply0 key share")?,
            confirm: r.array("ServerReply0 confirmation")?,
        };
        r.finish("trailing bytes after ServerReply0")?;
        Ok(reply)
    }

    /// Appends the encoding to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        header(out, MessageType::SERVER_REPLY0, REPLY_BODY_LEN);
        out.extend_from_slice(&self.key_share);
        out.extend_from_slice(&self.confirm);
    }

    /// The encoding.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(SERVER_REPLY_LEN);
        self.emit(&mut out);
        out
    }
}

impl fmt::Debug for ServerReply0 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerReply0")
            .field("key_share", &Hex(&self.key_share))
            .field("confirm", &Hex(&self.confirm))
            .finish()
    }
}

/// The length of the message at the start of `stream`: `Ok(None)` while
/// fewer than [`HEADER_LEN`] bytes are there, an error for a header no
/// message of this version has.
pub fn frame_len(stream: &[u8]) -> Result<Option<usize>, TicketError> {
    let Some(head) = stream.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let body_len = expected_body_len(MessageType(head[0]), head[1])?;
    if usize::from(u16::from_be_bytes([head[2], head[3]])) != body_len {
        return Err(TicketError::Malformed("0-RTT message length"));
    }
    Ok(Some(HEADER_LEN + body_len))
}

fn expected_body_len(kind: MessageType, version: u8) -> Result<usize, TicketError> {
    if version != MESSAGE_VERSION {
        return Err(TicketError::Malformed("unsupported 0-RTT message version"));
    }
    match kind {
        MessageType::CLIENT_HELLO0 => Ok(HELLO_BODY_LEN),
        MessageType::SERVER_REPLY0 => Ok(REPLY_BODY_LEN),
        _ => Err(TicketError::Malformed("unknown 0-RTT message type")),
    }
}

/// Checks the header of a message of type `kind` and returns a reader over
/// its body.
fn body(bytes: &[u8], kind: MessageType, body_len: usize) -> Result<Reader<'_>, TicketError> {
    let mut r = Reader::new(bytes);
    if MessageType(r.u8("0-RTT message type")?) != kind {
        return Err(TicketError::Malformed("unexpected 0-RTT message type"));
    }
    if r.u8("0-RTT message version")? != MESSAGE_VERSION {
        return Err(TicketError::Malformed("unsupported 0-RTT message version"));
    }
    if usize::from(r.u16("0-RTT message length")?) != body_len || r.remaining() != body_len {
        return Err(TicketError::Malformed("0-RTT message length"));
    }
    Ok(r)
}

fn header(out: &mut Vec<u8>, kind: MessageType, body_len: usize) {
    out.push(kind.0);
    out.push(MESSAGE_VERSION);
    // NOTE(as): both body lengths are constants below 2^16.
    out.extend_from_slice(&(body_len as u16).to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    const POISON: u8 = 0xa5;

    fn hello() -> ClientHello0 {
        ClientHello0 {
            ticket_hash: [0x11; 32],
            client_random: [0x22; 32],
            key_share: [0x33; 32],
            flags: Flags::FORWARD_SECRECY,
            client_time: 0x0102_0304_0506_0708,
        }
    }

    /// Byte-exact: every field where the table says, into a buffer that
    /// already holds poison so an unwritten byte would show.
    #[test]
    fn client_hello_layout_is_byte_exact() {
        let mut out = vec![POISON; 3];
        hello().emit(&mut out);
        let msg = &out[3..];
        assert_eq!(msg.len(), CLIENT_HELLO_LEN);
        assert_eq!(CLIENT_HELLO_LEN, 109);
        assert_eq!(&msg[..4], &[0x01, 0x02, 0x00, 105]);
        assert_eq!(&msg[4..36], &[0x11; 32]);
        assert_eq!(&msg[36..68], &[0x22; 32]);
        assert_eq!(&msg[68..100], &[0x33; 32]);
        assert_eq!(msg[100], 0x01);
        assert_eq!(&msg[101..109], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(ClientHello0::decode(msg).unwrap(), hello());
        assert_eq!(frame_len(msg).unwrap(), Some(109));
    }

    #[test]
    fn server_reply_layout_is_byte_exact() {
        let reply = ServerReply0 {
            key_share: [0x44; 32],
            confirm: [0x55; 32],
        };
        let mut out = vec![POISON; 2];
        reply.emit(&mut out);
        let msg = &out[2..];
        assert_eq!(msg.len(), SERVER_REPLY_LEN);
        assert_eq!(SERVER_REPLY_LEN, 68);
        assert_eq!(&msg[..4], &[0x02, 0x02, 0x00, 64]);
        assert_eq!(&msg[4..36], &[0x44; 32]);
        assert_eq!(&msg[36..68], &[0x55; 32]);
        assert_eq!(ServerReply0::decode(msg).unwrap(), reply);
        assert_eq!(frame_len(msg).unwrap(), Some(68));
    }

    #[test]
    fn decoding_is_strict() {
        let good = hello().to_bytes();
        let mut longer = good.clone();
        longer.push(0);
        assert!(ClientHello0::decode(&longer).is_err());
        assert!(ClientHello0::decode(&good[..108]).is_err());
        for (at, value) in [(0, 0x02), (1, 0x01), (3, 104), (100, 0x02)] {
            let mut bad = good.clone();
            bad[at] = value;
            assert!(
                ClientHello0::decode(&bad).is_err(),
                "byte {at} = {value:#x}"
            );
        }
        assert!(ServerReply0::decode(&good).is_err());
        assert_eq!(frame_len(&good[..3]).unwrap(), None);
        assert!(frame_len(&[0x09, 0x02, 0, 105]).is_err());
        assert!(frame_len(&[0x01, 0x02, 0xff, 0xff]).is_err());
        assert!(
            frame_len(&[0x01, 0x01, 0, 97]).is_err(),
            "version 1 is refused"
        );
    }

    #[test]
    fn code_points_print_in_hex() {
        assert_eq!(format!("{:?}", MessageType(0x7f)), "MessageType(0x7f)");
        assert_eq!(format!("{:?}", MessageType::CLIENT_HELLO0), "ClientHello0");
        assert_eq!(format!("{:?}", Flags::FORWARD_SECRECY), "Flags(0x01 FS)");
    }
}
