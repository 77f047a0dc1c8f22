//! One datagram into its SMT packets (`docs/protocol.md` § 2.1) and each
//! packet's header, with smt-proto's own wire code: `first_packet_len`
//! splits, `Packet::new_checked` and `Repr::parse` decode.

use serde::Serialize;
use smt_proto::crypto::TAG_LEN;
use smt_proto::wire::{self, Body, Packet, PacketType, Repr, WireError};

/// A packet's header as the wire module parsed it. In JSON the fields sit
/// beside the packet's own (`type` names the variant) and are named as the
/// Wireshark dissector names them (`smt.grant_offset` is `grant_offset`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type")]
pub enum Header {
    /// A DATA packet: one piece of a segment of a message's records.
    #[serde(rename = "DATA")]
    Data {
        /// Application bytes of the whole message.
        message_len: u32,
        /// Bytes of the whole message on the wire (records with headers and tags).
        message_wire_len: u32,
        /// Where the packet's segment starts in the message's wire bytes.
        segment_offset: u32,
        /// Bytes of the segment.
        segment_len: u32,
        /// The sender's packet payload size: the segment is cut into pieces of this size.
        mss: u16,
        /// The packet's index in its segment (the resend index on a
        /// retransmission).
        packet_index: u16,
        /// Set on a retransmitted packet.
        retransmit: bool,
        /// Wire bytes of the message the sender may send without further grants.
        incoming: u32,
        /// Where the payload sits in the message's wire bytes.
        wire_offset: u64,
        /// Payload bytes in this packet.
        payload_len: usize,
    },
    /// A GRANT: the receiver lets the sender send up to an offset.
    #[serde(rename = "GRANT")]
    Grant {
        /// Wire bytes of the message the sender may send, from its start.
        #[serde(rename = "grant_offset")]
        offset: u32,
        /// The priority the sender is to use.
        priority: u8,
    },
    /// A RESEND: the receiver asks for a range again.
    #[serde(rename = "RESEND")]
    Resend {
        /// Where the missing range starts in the message's wire bytes.
        #[serde(rename = "resend_offset")]
        offset: u32,
        /// Bytes missing.
        #[serde(rename = "resend_length")]
        length: u32,
        /// The priority the sender is to use.
        priority: u8,
    },
    /// RPC_UNKNOWN: the receiver has no state for this RPC.
    #[serde(rename = "RPC_UNKNOWN")]
    RpcUnknown,
    /// BUSY: the server works on the request; keep the RPC alive.
    #[serde(rename = "BUSY")]
    Busy,
    /// NEED_ACK: the server asks the client to acknowledge a response.
    #[serde(rename = "NEED_ACK")]
    NeedAck,
    /// OVERLOADED: the server refused the request for lack of room.
    #[serde(rename = "OVERLOADED")]
    Overloaded,
    /// ABANDONED: the client gave up on the RPC.
    #[serde(rename = "ABANDONED")]
    Abandoned,
    /// CREDIT: the receiver's limit on a sender's outstanding bytes.
    #[serde(rename = "CREDIT")]
    Credit {
        /// The limit, in bytes.
        #[serde(rename = "credit_limit")]
        limit: u32,
        /// The sender's CREDIT number (1, 2, 3, …): a receiver keeps the limit
        /// of the largest it has seen.
        #[serde(rename = "credit_sequence")]
        sequence: u32,
    },
    /// ACK: the client acknowledges responses (their IDs).
    #[serde(rename = "ACK")]
    Ack {
        /// The acknowledged RPC IDs, hex.
        #[serde(rename = "ack_ids")]
        ids: Vec<String>,
    },
    /// KEY_UPDATE: a move to the next key epoch.
    #[serde(rename = "KEY_UPDATE")]
    KeyUpdate {
        /// ID 0 announces the sender's move to the next epoch; 1 confirms.
        announce: bool,
    },
    /// HANDSHAKE: a piece of the handshake byte stream.
    #[serde(rename = "HANDSHAKE")]
    Handshake {
        /// Where the piece starts in the handshake stream.
        #[serde(rename = "hs_offset")]
        offset: u32,
        /// Bytes of the peer's stream received in order so far.
        #[serde(rename = "hs_ack")]
        ack: u32,
        /// Bytes in the piece.
        #[serde(rename = "hs_len")]
        len: u16,
        /// The handshake kind (0 TLS 1.3, 1 0-RTT ticket, 2 PSK nonce exchange).
        #[serde(rename = "hs_kind")]
        kind: u8,
        /// Flags: `0x01` RETRY, `0x02` TOKEN (stateless retry).
        #[serde(rename = "hs_flags")]
        flags: u8,
    },
    /// Bytes that are no valid packet: dropped by a receiver.
    #[serde(rename = "MALFORMED")]
    Malformed {
        /// The type byte, if the bytes reach it (hex).
        type_byte: Option<String>,
        /// Why the bytes are no packet.
        error: String,
    },
}

/// One packet of a datagram.
#[derive(Clone, Debug)]
pub struct Split<'a> {
    /// Offset in the datagram.
    pub offset: usize,
    /// The packet's bytes, tag included.
    pub bytes: &'a [u8],
    /// The packet without its control tag.
    pub body: &'a [u8],
    /// The control tag, if the packet carries one.
    pub tag: Option<&'a [u8; TAG_LEN]>,
    /// The parsed header, or why it does not parse.
    pub repr: Result<Repr, WireError>,
}

/// Splits `datagram` into its packets as a receiver does: each packet's
/// length from its own header; what cannot be measured is one last
/// (malformed) packet. `tagged_control`: control packets carry a MAC.
pub fn split(datagram: &[u8], tagged_control: bool) -> Vec<Split<'_>> {
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < datagram.len() {
        let rest = &datagram[offset..];
        let (len, measured) = match wire::first_packet_len(rest, tagged_control) {
            Ok(len) => (len, Ok(())),
            Err(e) => (rest.len(), Err(e)),
        };
        let bytes = &rest[..len];
        out.push(packet(offset, bytes, tagged_control, measured));
        offset += len;
    }
    out
}

fn packet(
    offset: usize,
    bytes: &[u8],
    tagged_control: bool,
    measured: Result<(), WireError>,
) -> Split<'_> {
    let ty = bytes.get(13).map(|&t| PacketType(t));
    let tagged = match ty {
        Some(PacketType::HANDSHAKE) | Some(PacketType::DATA) | None => false,
        Some(PacketType::KEY_UPDATE) => true,
        Some(_) => tagged_control,
    };
    let (body, tag) = match tagged.then(|| bytes.len().checked_sub(TAG_LEN)).flatten() {
        Some(at) => (&bytes[..at], bytes[at..].try_into().ok()),
        None => (bytes, None),
    };
    let repr = measured.and_then(|()| Packet::new_checked(body).and_then(|p| Repr::parse(&p)));
    Split {
        offset,
        bytes,
        body,
        tag,
        repr,
    }
}

impl Split<'_> {
    /// The header, or why the packet is malformed.
    pub fn header(&self) -> Header {
        match &self.repr {
            Ok(repr) => header(repr),
            Err(e) => Header::Malformed {
                type_byte: self.bytes.get(13).map(|t| format!("{t:#04x}")),
                error: e.to_string(),
            },
        }
    }

    /// The DATA payload (empty for other packets).
    pub fn payload(&self) -> &[u8] {
        self.body.get(wire::DATA_HEADER_LEN..).unwrap_or(&[])
    }

    /// HANDSHAKE data (empty for other packets).
    pub fn handshake_data(&self) -> &[u8] {
        self.body.get(40..).unwrap_or(&[])
    }
}

fn header(repr: &Repr) -> Header {
    match &repr.body {
        Body::Data(d) => Header::Data {
            message_len: d.message_len,
            message_wire_len: d.message_wire_len,
            segment_offset: d.segment_offset,
            segment_len: d.segment_len,
            mss: d.mss,
            packet_index: d.packet_index,
            retransmit: d.retransmit,
            incoming: d.incoming,
            wire_offset: d.wire_offset(),
            payload_len: d.payload_len(),
        },
        Body::Grant { offset, priority } => Header::Grant {
            offset: *offset,
            priority: *priority,
        },
        Body::Resend {
            offset,
            length,
            priority,
        } => Header::Resend {
            offset: *offset,
            length: *length,
            priority: *priority,
        },
        Body::RpcUnknown => Header::RpcUnknown,
        Body::Busy => Header::Busy,
        Body::NeedAck => Header::NeedAck,
        Body::Overloaded => Header::Overloaded,
        Body::Abandoned => Header::Abandoned,
        Body::Credit { limit, sequence } => Header::Credit {
            limit: *limit,
            sequence: *sequence,
        },
        Body::Ack(ids) => Header::Ack {
            ids: ids.as_slice().iter().map(|id| format!("{id:#x}")).collect(),
        },
        Body::KeyUpdate => Header::KeyUpdate {
            announce: repr.id != 1,
        },
        Body::Handshake {
            offset,
            ack,
            len,
            kind,
            flags,
        } => Header::Handshake {
            offset: *offset,
            ack: *ack,
            len: *len,
            kind: kind.0,
            flags: *flags,
        },
    }
}

impl Header {
    /// The header in one line, fields as `name=value`.
    pub fn summary(&self) -> String {
        match self {
            Self::Data {
                message_len,
                message_wire_len,
                segment_offset,
                segment_len,
                mss,
                packet_index,
                retransmit,
                incoming,
                wire_offset,
                payload_len,
            } => format!(
                "DATA len={message_len} wire_len={message_wire_len} seg={segment_offset}+{segment_len} \
                 mss={mss} pkt={packet_index}{} bytes={wire_offset}..{} incoming={incoming}",
                if *retransmit { " RETRANSMIT" } else { "" },
                wire_offset + *payload_len as u64
            ),
            Self::Grant { offset, priority } => format!("GRANT offset={offset} priority={priority}"),
            Self::Resend {
                offset,
                length,
                priority,
            } => format!("RESEND bytes={offset}..{} priority={priority}", u64::from(*offset) + u64::from(*length)),
            Self::RpcUnknown => "RPC_UNKNOWN".into(),
            Self::Busy => "BUSY".into(),
            Self::NeedAck => "NEED_ACK".into(),
            Self::Overloaded => "OVERLOADED".into(),
            Self::Abandoned => "ABANDONED".into(),
            Self::Credit { limit, sequence } => format!("CREDIT limit={limit} sequence={sequence}"),
            Self::Ack { ids } => format!("ACK ids=[{}]", ids.join(",")),
            Self::KeyUpdate { announce } => {
                format!("KEY_UPDATE {}", if *announce { "announce" } else { "confirm" })
            }
            Self::Handshake {
                offset,
                ack,
                len,
                kind,
                flags,
            } => format!(
                "HANDSHAKE kind={kind} ({}) offset={offset} ack={ack} len={len}{}",
                kind_name(*kind),
                match flags {
                    0 => String::new(),
                    1 => " RETRY".into(),
                    2 => " TOKEN".into(),
                    f => format!(" flags={f:#04x}"),
                }
            ),
            Self::Malformed { type_byte, error } => match type_byte {
                Some(t) => format!("MALFORMED (type {t}): {error}"),
                None => format!("MALFORMED: {error}"),
            },
        }
    }
}

/// The handshake protocol a HANDSHAKE kind names (`docs/protocol.md` § 4).
pub fn kind_name(kind: u8) -> &'static str {
    match kind {
        0 => "TLS 1.3",
        1 => "0-RTT SMT-ticket",
        2 => "PSK nonce exchange",
        _ => "unassigned",
    }
}
