//! The trace's schema: one [`Line`] per line of the file, as serde types.
//! [`Trace`](super::Trace) serialises them and `smt dump --trace`
//! deserialises them, so the two cannot disagree on a field.
//!
//! On the wire a line is one flat JSON object: the common fields, `ev`
//! naming the [`Event`], and the event's own fields beside them (absent
//! ones left out), as `docs/observability.md` § 6 lists them. This is
//! format version [`TRACE_FORMAT_VERSION`](super::TRACE_FORMAT_VERSION):
//! the first line (`trace_start`) says which version a file holds.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use smt_proto::wire::PacketType;

/// One line of a trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// Wall clock, seconds since the Unix epoch (microsecond resolution).
    pub t: f64,
    /// The endpoint's clock (the `now` the core was given), microseconds
    /// since the trace was made.
    #[serde(default)]
    pub us: i64,
    /// The core's tick count.
    #[serde(default)]
    pub tick: u64,
    /// The endpoint's address (absent on `trace_start` and `trace_end`,
    /// which belong to the file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ep: Option<SocketAddr>,
    /// What happened; its `ev` and fields sit beside the ones above.
    #[serde(flatten)]
    pub event: Event,
}

/// What a line records, tagged by its `ev` field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// The first line of a file.
    TraceStart {
        /// The format's version ([`super::TRACE_FORMAT_VERSION`]).
        version: u32,
    },
    /// The last line of a finished file.
    TraceEnd {
        /// Events written.
        events: u64,
        /// Events the writer dropped (it fell behind).
        count: u64,
    },
    /// A packet left in a datagram (`poll_transmit`).
    Sent(Packet),
    /// A packet arrived (before it is handled; coalesced packets one by one).
    Received(Packet),
    /// The packet received last was dropped.
    Dropped {
        /// Who sent it.
        peer: SocketAddr,
        /// The `DropReason` name (`malformed`, `replay`, `duplicate`, ...).
        reason: String,
    },
    /// A message was framed into records.
    Sealed {
        /// The message (peer, key epoch, ID).
        #[serde(flatten)]
        msg: MessageRef,
        /// Which message of the RPC.
        message: Role,
        /// Plaintext bytes.
        length: u64,
        /// Bytes on the wire (records, headers and tags).
        wire_len: u64,
        /// Records sealed.
        records: u64,
    },
    /// Records of an incoming message authenticated and opened.
    Opened {
        /// The message (peer, key epoch, ID).
        #[serde(flatten)]
        msg: MessageRef,
        /// Records opened.
        records: u64,
    },
    /// A segment did not open (a retransmitted copy can still complete it).
    OpenFailed {
        /// The message (peer, key epoch, ID).
        #[serde(flatten)]
        msg: MessageRef,
        /// `auth_failure`, or `protocol_violation` for lengths that disagree.
        reason: String,
    },
    /// A complete message went to the application.
    Delivered {
        /// The message (peer, key epoch, ID).
        #[serde(flatten)]
        msg: MessageRef,
        /// Which message of the RPC.
        message: Role,
        /// Plaintext bytes.
        length: u64,
        /// The client RPC's handle (responses).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rpc: Option<u64>,
    },
    /// The application started an RPC.
    RpcStarted {
        /// The client RPC's handle (stable across restarts).
        rpc: u64,
        /// The message (peer, key epoch, ID).
        #[serde(flatten)]
        msg: MessageRef,
        /// The request's plaintext bytes.
        length: u64,
    },
    /// The server lost the request (RPC_UNKNOWN): sent again under a new ID.
    RpcRestarted {
        /// The client RPC's handle.
        rpc: u64,
        /// The new epoch and ID.
        #[serde(flatten)]
        msg: MessageRef,
        /// The key epoch it had.
        old_epoch: u64,
        /// The message ID it had.
        old_id: MessageId,
    },
    /// A client RPC failed.
    RpcFailed {
        /// The client RPC's handle.
        rpc: u64,
        /// The message (peer, key epoch, ID).
        #[serde(flatten)]
        msg: MessageRef,
        /// `timeout`, `overloaded`, `abandoned`, `session_closed`, ...
        reason: String,
    },
    /// The application gave up on an RPC.
    RpcAborted {
        /// The client RPC's handle.
        rpc: u64,
        /// The message (peer, key epoch, ID).
        #[serde(flatten)]
        msg: MessageRef,
    },
    /// A server RPC's state was freed.
    ServerFreed {
        /// The message (peer, key epoch, ID).
        #[serde(flatten)]
        msg: MessageRef,
        /// `acked`, `timeout`, `client_gone`, `abandoned`, `overloaded`.
        reason: String,
    },
    /// This side opened a handshake.
    HandshakeStarted {
        /// With whom.
        peer: SocketAddr,
        /// 0 TLS 1.3, 1 0-RTT, 2 PSK.
        kind: u8,
    },
    /// A handshake installed keys.
    HandshakeDone {
        /// With whom.
        peer: SocketAddr,
    },
    /// A handshake failed.
    HandshakeFailed {
        /// With whom.
        peer: SocketAddr,
        /// Why, in words.
        error: String,
    },
    /// The session moved to a new key epoch.
    Rekeyed {
        /// With whom.
        peer: SocketAddr,
        /// The new epoch.
        epoch: u64,
        /// On the peer's KEY_UPDATE (else our own rekey).
        by_peer: bool,
    },
    /// The core's queue was full: events are missing before this line.
    Lost {
        /// How many.
        count: u64,
    },
    /// An event this version does not know (a newer writer's; or a core
    /// event the writer could not name, written as `"ev":"unknown"`).
    #[serde(other)]
    Unknown,
}

/// The message an event is about: the peer, the key epoch, the ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageRef {
    /// The other endpoint.
    pub peer: SocketAddr,
    /// The key epoch (its low bit is the packets' key phase).
    pub epoch: u64,
    /// The message ID.
    pub id: MessageId,
}

/// Which message of an RPC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The client's.
    Request,
    /// The server's.
    Response,
}

/// A packet's header as the trace shows it. The fields after `len` are
/// there as the packet type has them (absent ones are left out):
///
/// | `type` | fields |
/// |---|---|
/// | DATA | `offset`, `length` (the payload's place in the message's wire bytes), `retransmit`, `pkt`, `msg_len`, `wire_len`, `seg_offset`, `seg_len`, `incoming` |
/// | GRANT | `offset` (granted up to), `priority` |
/// | RESEND | `offset`, `length` (the range asked for), `priority` |
/// | ACK | `ids` |
/// | HANDSHAKE | `offset`, `ack`, `length` (stream offset and data length), `kind`, `flags` |
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Packet {
    /// The other endpoint.
    pub peer: SocketAddr,
    /// The message ID in the header.
    pub id: MessageId,
    /// The packet type: its name (`DATA`, `ACK`, ...), or its code in
    /// hex when it has none.
    #[serde(rename = "type", with = "packet_type")]
    pub ty: PacketType,
    /// The key phase bit.
    pub phase: u8,
    /// Bytes of the packet in its datagram, MAC included.
    pub len: u64,
    /// The header does not parse (a receiver drops it as malformed); the
    /// type's fields are absent then.
    #[serde(default, skip_serializing_if = "is_false")]
    pub malformed: bool,
    /// DATA: the payload's wire offset; GRANT: granted up to; RESEND: the range's start; HANDSHAKE: the stream offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// DATA: payload bytes; RESEND: the range's length; HANDSHAKE: data bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<u64>,
    /// DATA: the RETRANSMIT flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmit: Option<bool>,
    /// DATA: the packet's index in its segment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pkt: Option<u16>,
    /// DATA: the message's plaintext length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_len: Option<u32>,
    /// DATA: the message's wire length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_len: Option<u64>,
    /// DATA: where its segment starts in the message's wire bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seg_offset: Option<u32>,
    /// DATA: its segment's wire length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seg_len: Option<u32>,
    /// DATA: bytes the sender may send unscheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incoming: Option<u32>,
    /// GRANT, RESEND: the priority asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// ACK: the IDs acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids: Option<Vec<MessageId>>,
    /// HANDSHAKE: the peer's stream acknowledged up to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack: Option<u32>,
    /// HANDSHAKE: 0 TLS 1.3, 1 0-RTT, 2 PSK.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<u8>,
    /// HANDSHAKE: its flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags: Option<u8>,
}

impl Packet {
    /// A packet with no type-specific fields (add them with `..`).
    pub fn new(peer: SocketAddr, id: MessageId, ty: PacketType, phase: u8, len: u64) -> Self {
        Self {
            peer,
            id,
            ty,
            phase,
            len,
            malformed: false,
            offset: None,
            length: None,
            retransmit: None,
            pkt: None,
            msg_len: None,
            wire_len: None,
            seg_offset: None,
            seg_len: None,
            incoming: None,
            priority: None,
            ids: None,
            ack: None,
            kind: None,
            flags: None,
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Line {
    /// Reads one line of a trace file.
    pub fn parse(json: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// The line as JSON, without the newline.
    pub fn to_json(&self) -> String {
        // NOTE(unwrap): every field is a number, a string, a bool or a
        // list of strings, and the map's keys are fixed names: serde_json
        // cannot fail on them.
        serde_json::to_string(self).unwrap()
    }

    /// The other endpoint, if the event names one.
    pub fn peer(&self) -> Option<SocketAddr> {
        match &self.event {
            Event::Sent(p) | Event::Received(p) => Some(p.peer),
            Event::Dropped { peer, .. }
            | Event::HandshakeStarted { peer, .. }
            | Event::HandshakeDone { peer }
            | Event::HandshakeFailed { peer, .. }
            | Event::Rekeyed { peer, .. } => Some(*peer),
            _ => self.message().map(|m| m.peer),
        }
    }

    /// The message the event is about, for events about one message
    /// (not packets: [`Line::packet`]).
    pub fn message(&self) -> Option<&MessageRef> {
        match &self.event {
            Event::Sealed { msg, .. }
            | Event::Opened { msg, .. }
            | Event::OpenFailed { msg, .. }
            | Event::Delivered { msg, .. }
            | Event::RpcStarted { msg, .. }
            | Event::RpcRestarted { msg, .. }
            | Event::RpcFailed { msg, .. }
            | Event::RpcAborted { msg, .. }
            | Event::ServerFreed { msg, .. } => Some(msg),
            _ => None,
        }
    }

    /// The packet of a `sent` or `received` line.
    pub fn packet(&self) -> Option<&Packet> {
        match &self.event {
            Event::Sent(p) | Event::Received(p) => Some(p),
            _ => None,
        }
    }
}

impl Event {
    /// The `ev` name this event has in the file.
    pub fn name(&self) -> &'static str {
        match self {
            Self::TraceStart { .. } => "trace_start",
            Self::TraceEnd { .. } => "trace_end",
            Self::Sent(_) => "sent",
            Self::Received(_) => "received",
            Self::Dropped { .. } => "dropped",
            Self::Sealed { .. } => "sealed",
            Self::Opened { .. } => "opened",
            Self::OpenFailed { .. } => "open_failed",
            Self::Delivered { .. } => "delivered",
            Self::RpcStarted { .. } => "rpc_started",
            Self::RpcRestarted { .. } => "rpc_restarted",
            Self::RpcFailed { .. } => "rpc_failed",
            Self::RpcAborted { .. } => "rpc_aborted",
            Self::ServerFreed { .. } => "server_freed",
            Self::HandshakeStarted { .. } => "handshake_started",
            Self::HandshakeDone { .. } => "handshake_done",
            Self::HandshakeFailed { .. } => "handshake_failed",
            Self::Rekeyed { .. } => "rekeyed",
            Self::Lost { .. } => "lost",
            Self::Unknown => "unknown",
        }
    }
}

impl Role {
    /// `request` or `response`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Response => "response",
        }
    }
}

/// A message ID, written in hex (`"0xa0"`) as the wire spec shows IDs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MessageId(pub u64);

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// A message ID that is neither `0x` and hex digits nor decimal digits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadMessageId(pub String);

impl fmt::Display for BadMessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a message ID (hex as 0xa0, or decimal)",
            self.0
        )
    }
}

impl std::error::Error for BadMessageId {}

impl FromStr for MessageId {
    type Err = BadMessageId;

    /// `0x` and hex digits, or decimal digits.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parsed = match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => s.parse(),
        };
        parsed.map(Self).map_err(|_| BadMessageId(s.to_string()))
    }
}

impl Serialize for MessageId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MessageId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A packet type as its name, or its code in hex (`"0x1f"`) when it has
/// none: both read back to the same code.
mod packet_type {
    use super::*;

    pub(super) fn serialize<S: Serializer>(ty: &PacketType, s: S) -> Result<S::Ok, S::Error> {
        match ty.name() {
            Some(name) => s.serialize_str(name),
            None => s.collect_str(&format_args!("{:#04x}", ty.0)),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PacketType, D::Error> {
        let text = String::deserialize(d)?;
        let code = match text.strip_prefix("0x") {
            Some(hex) => u8::from_str_radix(hex, 16).ok(),
            None => (0..=u8::MAX).find(|&c| PacketType(c).name() == Some(&text)),
        };
        code.map(PacketType).ok_or_else(|| {
            serde::de::Error::custom(format!("{text:?} is not a packet type's name or code"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The four lines `docs/observability.md` § 6 shows (version 1, as
    /// `smt` wrote them before this crate existed) read, and write back
    /// as the same JSON.
    #[test]
    fn the_lines_the_docs_show_read_and_write_back_unchanged() {
        let docs = [
            r#"{"t":1795643913.078924,"us":594981,"tick":64,"ep":"127.0.0.1:7878","ev":"received","peer":"127.0.0.2:35594","id":"0xa0","type":"DATA","phase":0,"len":1210,"offset":2856,"length":1166,"retransmit":false,"pkt":2,"msg_len":4000,"wire_len":4022,"seg_offset":0,"seg_len":4022,"incoming":4022}"#,
            r#"{"t":1795643913.083433,"us":599490,"tick":69,"ep":"127.0.0.1:7878","ev":"sent","peer":"127.0.0.2:35594","id":"0xa0","type":"RESEND","phase":0,"len":56,"offset":1428,"length":1428,"priority":0}"#,
            r#"{"t":1795643913.083629,"us":599686,"tick":69,"ep":"127.0.0.1:7878","ev":"received","peer":"127.0.0.2:35594","id":"0xa0","type":"DATA","phase":0,"len":1472,"offset":1428,"length":1428,"retransmit":true,"pkt":1,"msg_len":4000,"wire_len":4022,"seg_offset":0,"seg_len":4022,"incoming":4022}"#,
            r#"{"t":1795643913.083629,"us":599686,"tick":69,"ep":"127.0.0.1:7878","ev":"opened","peer":"127.0.0.2:35594","epoch":0,"id":"0xa0","records":1}"#,
            r#"{"t":1.5,"us":0,"tick":0,"ev":"trace_start","version":1}"#,
            r#"{"t":2.5,"us":0,"tick":0,"ev":"trace_end","events":4,"count":0}"#,
        ];
        for text in docs {
            let line = Line::parse(text).unwrap_or_else(|e| panic!("{e}: {text}"));
            let want: serde_json::Value = serde_json::from_str(text).unwrap();
            let got: serde_json::Value = serde_json::from_str(&line.to_json()).unwrap();
            assert_eq!(got, want, "{text}");
        }
        let opened = Line::parse(docs[3]).unwrap();
        assert_eq!(opened.message().unwrap().id, MessageId(0xa0));
        let resend = Line::parse(docs[1]).unwrap();
        assert_eq!(resend.packet().unwrap().ty, PacketType::RESEND);
    }

    #[test]
    fn unknown_events_and_packet_types_still_read() {
        let newer = Line::parse(r#"{"t":1,"ep":"10.0.0.1:1","ev":"from_the_future","x":1}"#);
        assert_eq!(newer.unwrap().event, Event::Unknown);
        let text = r#"{"t":1,"ev":"sent","peer":"10.0.0.1:1","id":"0x0","type":"0x7f","phase":1,"len":9,"malformed":true}"#;
        let line = Line::parse(text).unwrap();
        assert_eq!(line.packet().unwrap().ty, PacketType(0x7f));
        assert!(line.to_json().contains(r#""type":"0x7f""#));
    }

    #[test]
    fn a_line_missing_a_field_says_which() {
        let err = Line::parse(r#"{"t":1,"ev":"opened","peer":"10.0.0.1:1","epoch":0}"#);
        let err = err.unwrap_err().to_string();
        assert!(err.contains("missing field"), "{err}");
        let err = "0xzz".parse::<MessageId>().unwrap_err().to_string();
        assert!(err.contains("not a message ID"), "{err}");
    }
}
