//! Coalesced datagrams: several SMT packets to the same peer back to back
//! in one datagram, each packet byte for byte what it would be alone (as
//! QUIC coalesces packets). Every packet's length follows from its own
//! header, so the receiver splits without any framing added: DATA from its
//! segment fields, control packets from their type (plus the MAC), ACK from
//! its count, HANDSHAKE from its length field. `docs/protocol.md` § 2.1.

use super::{packet::field, DataHeader, Packet, PacketType, WireError, ACK_MAX_IDS};
use crate::crypto::TAG_LEN;

/// Smallest packet there is (a 28-byte control packet without a MAC):
/// less room than this ends a coalesced datagram.
pub const MIN_PACKET_LEN: usize = super::COMMON_HEADER_LEN;

/// The length of the first packet in `buf` (which may hold more packets
/// after it), from its header alone. `tagged_control`: control packets
/// carry a MAC (`Config::authenticate_control`); KEY_UPDATE always does,
/// HANDSHAKE never. The packet is not validated beyond what its length
/// needs: [`super::Repr::parse`] does that on the split-off bytes.
pub fn first_packet_len(buf: &[u8], tagged_control: bool) -> Result<usize, WireError> {
    let packet = Packet::new_checked(buf)?;
    let header = packet.header_len();
    let ty = packet.packet_type();
    if ty.name().is_none() {
        // A type we do not know may carry anything after its header.
        return Err(WireError::UnknownType(ty));
    }
    let tag = if ty == PacketType::KEY_UPDATE || (tagged_control && ty.is_control()) {
        TAG_LEN
    } else {
        0
    };
    let len = match ty {
        PacketType::DATA => header + data_payload_len(&packet)?,
        PacketType::ACK => header + 8 * ack_count(buf)? + tag,
        PacketType::HANDSHAKE => header + handshake_payload_len(buf)?,
        // Written by the network: never MAC'd.
        PacketType::PATH => super::pathlet::path_len(buf)?,
        PacketType::PATH_ECHO => super::pathlet::path_echo_len(buf)? + tag,
        _ => header + tag,
    };
    if len > buf.len() {
        return Err(WireError::Truncated);
    }
    Ok(len)
}

/// The packets of a datagram, in order, each split off by the length its
/// own header gives ([`first_packet_len`]). Bytes whose length cannot be
/// told (a truncated or malformed header, an unknown type) come out as one
/// last packet holding the rest, for the receiver to drop with the reason
/// its header earns; an empty datagram comes out as one empty packet. The
/// one loop that splits datagrams: the endpoint, its
/// trace, the driver's worker routing, the offload model and `smt dump`
/// all walk a datagram with it.
#[derive(Clone, Debug)]
pub struct Packets<'a> {
    rest: &'a [u8],
    tagged_control: bool,
    started: bool,
}

impl<'a> Packets<'a> {
    /// The packets of `datagram`; `tagged_control` as for
    /// [`first_packet_len`].
    pub fn new(datagram: &'a [u8], tagged_control: bool) -> Self {
        Self {
            rest: datagram,
            tagged_control,
            started: false,
        }
    }
}

impl<'a> Packets<'a> {
    /// The next packet as [`Iterator::next`] splits it, with its DATA
    /// header when it is a DATA packet whose header passes
    /// [`DataHeader::parse`]: the receive path parses each DATA header
    /// once, here, where its payload length is worked out anyway.
    #[inline]
    pub fn next_split(&mut self) -> Option<Split<'a>> {
        // The end is told here, inlined into the caller's loop: a call
        // to find there is nothing left was one per datagram.
        if self.done() {
            return None;
        }
        Some(self.split_off())
    }

    /// Splits off the next packet (there is one): a DATA packet by its
    /// parsed header, any other by [`first_packet_len`].
    fn split_off(&mut self) -> Split<'a> {
        let data = Packet::new_checked(self.rest)
            .ok()
            .filter(|p| p.packet_type() == PacketType::DATA)
            .and_then(|p| DataHeader::parse_leading(&p).ok());
        let Some((header, len)) = data else {
            let bytes = self.next_len();
            return Split { bytes, data: None };
        };
        let (bytes, rest) = self.rest.split_at(len);
        self.rest = rest;
        Split {
            bytes,
            data: Some(header),
        }
    }

    /// Whether every packet was handed out (an empty datagram still gives
    /// one, empty, packet).
    fn done(&mut self) -> bool {
        let started = std::mem::replace(&mut self.started, true);
        self.rest.is_empty() && started
    }

    /// Splits off the next packet by [`first_packet_len`].
    fn next_len(&mut self) -> &'a [u8] {
        let len = first_packet_len(self.rest, self.tagged_control).unwrap_or(self.rest.len());
        let (packet, rest) = self.rest.split_at(len);
        self.rest = rest;
        packet
    }
}

impl<'a> Iterator for Packets<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.done() {
            return None;
        }
        Some(self.next_len())
    }
}

/// One packet split off a datagram by [`Packets::next_split`]: its bytes,
/// and the header of a DATA packet the split parsed and checked in full.
#[derive(Clone, Copy, Debug)]
pub struct Split<'a> {
    bytes: &'a [u8],
    data: Option<DataHeader>,
}

impl<'a> Split<'a> {
    /// The packet's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// What [`DataHeader::parse`] gives for [`Split::bytes`] when they are
    /// a DATA packet it accepts; `None` for any other packet, and for a
    /// DATA packet it rejects (parse it to learn why).
    pub fn data_header(&self) -> Option<&DataHeader> {
        self.data.as_ref()
    }
}

/// A DATA packet's payload length: `min(mss, segment_len - i * mss)` for
/// its packet index `i` (the resend index on a retransmission).
fn data_payload_len(packet: &Packet<&[u8]>) -> Result<usize, WireError> {
    packet.check_data()?;
    let index = match packet.resend_index() {
        0 => packet.packet_index(),
        i => i,
    };
    let (mss, seg) = (u64::from(packet.mss()), u64::from(packet.segment_len()));
    let start = u64::from(index) * mss;
    if mss == 0 || start >= seg {
        return Err(WireError::BadField("packet index beyond segment"));
    }
    // Bounded by mss (a u16): the cast cannot truncate.
    Ok((seg - start).min(mss) as usize)
}

fn ack_count(buf: &[u8]) -> Result<usize, WireError> {
    let count = match buf.get(field::ack::COUNT) {
        Some(c) => usize::from(u16::from_be_bytes([c[0], c[1]])),
        None => return Err(WireError::Truncated),
    };
    if count == 0 || count > ACK_MAX_IDS {
        return Err(WireError::BadField("ACK count"));
    }
    Ok(count)
}

fn handshake_payload_len(buf: &[u8]) -> Result<usize, WireError> {
    match buf.get(field::handshake::LEN) {
        Some(l) => Ok(usize::from(u16::from_be_bytes([l[0], l[1]]))),
        None => Err(WireError::Truncated),
    }
}
