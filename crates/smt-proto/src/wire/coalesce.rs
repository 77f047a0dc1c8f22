//! Coalesced datagrams: several SMT packets to the same peer back to back
//! in one datagram, each packet byte for byte what it would be alone (as
//! QUIC coalesces packets). Every packet's length follows from its own
//! header, so the receiver splits without any framing added: DATA from its
//! segment fields, control packets from their type (plus the MAC), ACK from
//! its count, HANDSHAKE from its length field. `docs/protocol.md` § 2.1.

use super::{packet::field, Packet, PacketType, WireError, ACK_MAX_IDS};
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
    let tag = if ty == PacketType::KEY_UPDATE || (tagged_control && ty.is_control()) {
        TAG_LEN
    } else {
        0
    };
    let len = match ty {
        PacketType::DATA => header + data_payload_len(&packet)?,
        PacketType::ACK => header + 8 * ack_count(buf)? + tag,
        PacketType::HANDSHAKE => header + handshake_payload_len(buf)?,
        _ => header + tag,
    };
    if len > buf.len() {
        return Err(WireError::Truncated);
    }
    Ok(len)
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
    let b = field::BODY;
    let count = match buf.get(b..b + 2) {
        Some(c) => usize::from(u16::from_be_bytes([c[0], c[1]])),
        None => return Err(WireError::Truncated),
    };
    if count == 0 || count > ACK_MAX_IDS {
        return Err(WireError::BadField("ACK count"));
    }
    Ok(count)
}

fn handshake_payload_len(buf: &[u8]) -> Result<usize, WireError> {
    let at = field::BODY + 8;
    match buf.get(at..at + 2) {
        Some(l) => Ok(usize::from(u16::from_be_bytes([l[0], l[1]]))),
        None => Err(WireError::Truncated),
    }
}
