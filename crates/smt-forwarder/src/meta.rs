//! What the forwarder reads of a packet: the plaintext header fields it
//! acts on, through `smt_proto::wire`'s checked view, and nothing else.
//!
//! A datagram may hold several SMT packets back to back
//! (`docs/protocol.md` § 2.1); [`split`] cuts it with the wire module's
//! own rule (`first_packet_len`), so the forwarder can pin each packet to
//! its own message. [`Meta::read`] is then given only the packet's
//! header (never its payload: records and MACs stay opaque bytes the
//! forwarder copies), and reads exactly the fields listed in
//! [`FIELDS_READ`]; a test flips every other byte and checks that no
//! decision changes.

use std::ops::Range;

use smt_proto::wire::{first_packet_len, DataFlags, Packet, PacketType, WireError};

/// Byte ranges of a packet's header that [`Meta::read`] and [`split`]
/// read (`docs/protocol.md` §§ 2–4), with why. Everything else — ports,
/// message length, checksum, `incoming`, control bodies, records, MACs —
/// is never looked at. The one exception is a PATH packet
/// (`docs/protocol.md` § 4), which the network writes and the sender
/// addresses to it: the forwarder reads its counts and exclusions and
/// writes a slot (`forwarder.rs`).
pub const FIELDS_READ: &[(Range<usize>, &str)] = &[
    (
        4..8,
        "DATA segment offset: where the packet lies in its message",
    ),
    (
        12..13,
        "header length and key phase: the header's end; the key epoch of the message",
    ),
    (13..14, "type: DATA, control or HANDSHAKE"),
    (
        14..16,
        "DATA mss: payload length, for splitting and offsets",
    ),
    (18..20, "DATA resend index: a retransmission's packet index"),
    (20..28, "message ID: the unit of pinning and replica choice"),
    (28..30, "DATA packet index; ACK count (for splitting)"),
    (30..31, "DATA flags: RETRANSMIT"),
    (31..32, "DATA priority: the queue"),
    (32..36, "DATA message wire length: the message's size"),
    (
        36..40,
        "DATA segment length; HANDSHAKE data length (for splitting)",
    ),
];

/// The plaintext facts of one SMT packet the forwarder acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The packet's type (byte 13 of the header).
    pub ty: PacketType,
    /// Key phase (bit 0 of byte 12): which of two key epochs the message
    /// belongs to; message IDs restart every epoch.
    pub key_phase: bool,
    /// The message (RPC) ID; unused (0) on ACK and HANDSHAKE packets.
    pub id: u64,
    /// DATA only (zero otherwise): the rest of this struct.
    pub data: Option<DataMeta>,
}

/// What a DATA packet says about its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataMeta {
    /// Bytes of the whole message on the wire: its size.
    pub message_wire_len: u32,
    /// Where this packet's payload starts in the message's wire bytes.
    pub wire_offset: u64,
    /// Payload bytes of this packet.
    pub payload_len: u32,
    /// The RETRANSMIT flag: the packet repeats one sent before.
    pub retransmit: bool,
    /// The application's priority (byte 31): 0 default, larger is more
    /// urgent.
    pub priority: u8,
}

impl Meta {
    /// Reads the facts from `header`, a packet's header only (its first
    /// `header_len` bytes; [`split`] gives them). A header too short for
    /// its type is an error (the packet is dropped and counted).
    pub fn read(header: &[u8]) -> Result<Self, WireError> {
        let p = Packet::new_checked(header)?;
        let ty = p.packet_type();
        let data = if ty == PacketType::DATA {
            p.check_data()?;
            Some(data_meta(&p))
        } else {
            None
        };
        Ok(Self {
            ty,
            key_phase: p.key_phase(),
            id: p.id(),
            data,
        })
    }

    /// Whether this packet is about one message (so it follows that
    /// message's path and replica). ACK (a list of IDs in its body),
    /// KEY_UPDATE (the whole session) and HANDSHAKE (no session yet) are
    /// not.
    pub fn is_per_message(&self) -> bool {
        !matches!(
            self.ty,
            PacketType::ACK | PacketType::KEY_UPDATE | PacketType::HANDSHAKE
        )
    }
}

fn data_meta(p: &Packet<&[u8]>) -> DataMeta {
    let retransmit = p.data_flags().contains(DataFlags::RETRANSMIT);
    let index = if retransmit {
        p.resend_index()
    } else {
        p.packet_index()
    };
    let (mss, seg_len) = (u64::from(p.mss()), u64::from(p.segment_len()));
    let start = u64::from(index) * mss;
    DataMeta {
        message_wire_len: p.message_wire_len(),
        wire_offset: u64::from(p.segment_offset()) + start,
        payload_len: seg_len.saturating_sub(start).min(mss) as u32,
        retransmit,
        priority: p.priority(),
    }
}

/// One packet of a datagram: its byte range and its header's length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The packet's bytes within the datagram.
    pub range: Range<usize>,
    /// Bytes of its plaintext header (what [`Meta::read`] takes).
    pub header_len: usize,
}

/// Cuts a datagram into its packets (`docs/protocol.md` § 2.1).
/// `tagged_control`: control packets carry a MAC (the endpoints'
/// `Config::authenticate_control`, on by default). Returns the pieces and
/// the number of trailing bytes that are no packet (dropped).
pub fn split(datagram: &[u8], tagged_control: bool) -> (Vec<Piece>, usize) {
    let mut pieces = Vec::new();
    let mut at = 0;
    while at < datagram.len() {
        let rest = &datagram[at..];
        let Ok(len) = first_packet_len(rest, tagged_control) else {
            return (pieces, rest.len());
        };
        let Ok(p) = Packet::new_checked(rest) else {
            return (pieces, rest.len());
        };
        pieces.push(Piece {
            range: at..at + len,
            header_len: p.header_len().min(len),
        });
        at += len;
    }
    (pieces, 0)
}

#[cfg(test)]
mod tests {
    use smt_proto::wire::{AckIds, Body, DataHeader, Repr};

    use super::*;

    fn packet(body: Body, payload: usize) -> Vec<u8> {
        let repr = Repr {
            src_port: 0x9c40,
            dst_port: 0x1b58,
            key_phase: true,
            id: 0x1234,
            body,
        };
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut out[..]));
        out.extend((0..payload).map(|i| i as u8));
        out
    }

    fn samples() -> Vec<Vec<u8>> {
        let data = DataHeader {
            message_len: 100_000,
            message_wire_len: 100_200,
            segment_offset: 49_218,
            segment_len: 49_218,
            mss: 1428,
            packet_index: 3,
            retransmit: false,
            incoming: 100_200,
            priority: 5,
        };
        let mut ids = AckIds::new();
        ids.push(2);
        ids.push(4);
        vec![
            packet(Body::Data(data), 1428),
            packet(
                Body::Grant {
                    offset: 9,
                    priority: 1,
                },
                16,
            ),
            packet(Body::Ack(ids), 16),
        ]
    }

    fn decide(datagram: &[u8]) -> Vec<(Piece, Meta)> {
        let (pieces, junk) = split(datagram, true);
        assert_eq!(junk, 0);
        pieces
            .into_iter()
            .map(|p| {
                let m = Meta::read(&datagram[p.range.start..p.range.start + p.header_len]).unwrap();
                (p, m)
            })
            .collect()
    }

    /// The forwarder reads what it uses and nothing else: changing any
    /// byte outside `FIELDS_READ` — ports, message length, `incoming`,
    /// control bodies, every record and MAC byte — changes none of its
    /// facts about the packet, nor how the datagram is cut.
    #[test]
    fn bytes_outside_the_fields_read_change_nothing() {
        let read = |i: usize| FIELDS_READ.iter().any(|(r, _)| r.contains(&i));
        for sample in samples() {
            let want = decide(&sample);
            let header = want[0].0.header_len;
            for i in 0..sample.len() {
                // ACK counts and handshake lengths live in body slots that
                // DATA calls packet index and segment length.
                if read(i) && i < header {
                    continue;
                }
                for flip in [0x01u8, 0x80, 0xff] {
                    let mut changed = sample.clone();
                    changed[i] ^= flip;
                    assert_eq!(decide(&changed), want, "byte {i} ^ {flip:#x}");
                }
            }
        }
    }

    #[test]
    fn a_data_packet_says_its_message_size_place_and_priority() {
        let m = Meta::read(&samples()[0][..44]).unwrap();
        let d = m.data.unwrap();
        assert_eq!((m.id, m.key_phase), (0x1234, true));
        assert_eq!(d.message_wire_len, 100_200);
        assert_eq!(d.wire_offset, 49_218 + 3 * 1428);
        assert_eq!((d.payload_len, d.priority, d.retransmit), (1428, 5, false));
    }

    #[test]
    fn a_coalesced_datagram_is_cut_into_its_packets() {
        let s = samples();
        let datagram: Vec<u8> = s.concat();
        let pieces = decide(&datagram);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces[1].0.range, s[0].len()..s[0].len() + s[1].len());
        let (_, junk) = split(&[0u8; 5], true);
        assert_eq!(
            junk, 5,
            "bytes that are no packet are counted, not forwarded"
        );
    }
}
