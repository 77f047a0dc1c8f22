//! The checked zero-copy view of an SMT packet.

use super::{DataFlags, PacketType, WireError, COMMON_HEADER_LEN, DATA_HEADER_LEN};

/// Byte ranges of the fields, in the order they appear on the wire.
pub(crate) mod field {
    use std::ops::Range;
    pub(crate) const SPORT: Range<usize> = 0..2;
    pub(crate) const DPORT: Range<usize> = 2..4;
    /// TCP sequence-number slot: DATA segment offset.
    pub(crate) const SEG_OFFSET: Range<usize> = 4..8;
    /// TCP acknowledgment slot: DATA message length.
    pub(crate) const MSG_LEN: Range<usize> = 8..12;
    pub(crate) const DOFF: usize = 12;
    pub(crate) const TYPE: usize = 13;
    /// TCP window slot: DATA per-packet payload size of this segment.
    pub(crate) const MSS: Range<usize> = 14..16;
    /// TCP checksum slot: always zero (integrity comes from the AEAD).
    pub(crate) const CHECKSUM: Range<usize> = 16..18;
    /// TCP urgent-pointer slot: original packet index of a retransmission.
    pub(crate) const RESEND_INDEX: Range<usize> = 18..20;
    /// TCP options slot: the message (RPC) ID.
    pub(crate) const ID: Range<usize> = 20..28;
    // DATA extension.
    pub(crate) const PKT_INDEX: Range<usize> = 28..30;
    pub(crate) const FLAGS: usize = 30;
    /// The message's priority, set by the sending application (MTP's
    /// "Msg Pri"): 0 is the default, larger is more urgent.
    pub(crate) const PRIORITY: usize = 31;
    pub(crate) const MSG_WIRE_LEN: Range<usize> = 32..36;
    pub(crate) const SEG_LEN: Range<usize> = 36..40;
    pub(crate) const INCOMING: Range<usize> = 40..44;
    // Control bodies start right after the common header (at 28).

    /// GRANT (`docs/protocol.md` § 4): the offset granted up to, the
    /// receiver's rank for the message, three reserved bytes.
    pub(crate) mod grant {
        use std::ops::Range;
        pub(crate) const OFFSET: Range<usize> = 28..32;
        pub(crate) const PRIORITY: usize = 32;
        pub(crate) const RESERVED: Range<usize> = 33..36;
    }

    /// CREDIT: how many requests the receiver may have outstanding at the
    /// sender, and the sequence number that orders CREDIT packets.
    pub(crate) mod credit {
        use std::ops::Range;
        pub(crate) const LIMIT: Range<usize> = 28..32;
        pub(crate) const SEQUENCE: Range<usize> = 32..36;
    }

    /// RESEND: the byte range asked for, a priority, three reserved bytes.
    pub(crate) mod resend {
        use std::ops::Range;
        pub(crate) const OFFSET: Range<usize> = 28..32;
        pub(crate) const LENGTH: Range<usize> = 32..36;
        pub(crate) const PRIORITY: usize = 36;
        pub(crate) const RESERVED: Range<usize> = 37..40;
    }

    /// ACK: how many IDs follow the header, two reserved bytes, then the
    /// IDs, 8 bytes each.
    pub(crate) mod ack {
        use std::ops::Range;
        pub(crate) const COUNT: Range<usize> = 28..30;
        pub(crate) const RESERVED: Range<usize> = 30..32;
        pub(crate) const IDS: usize = 32;
    }

    /// HANDSHAKE: the chunk's stream offset, the cumulative ACK of the
    /// peer's stream, the chunk's length, the protocol, the retry flags.
    pub(crate) mod handshake {
        use std::ops::Range;
        pub(crate) const OFFSET: Range<usize> = 28..32;
        pub(crate) const ACK: Range<usize> = 32..36;
        pub(crate) const LEN: Range<usize> = 36..38;
        pub(crate) const KIND: usize = 38;
        pub(crate) const FLAGS: usize = 39;
    }

    /// PATH (`docs/protocol.md` § 4): slots reserved, slots used,
    /// exclusions, flags; then the exclusions (4 bytes each) and the slots
    /// (8 bytes each).
    pub(crate) mod path {
        pub(crate) const SLOTS: usize = 28;
        pub(crate) const USED: usize = 29;
        pub(crate) const EXCLUDES: usize = 30;
        pub(crate) const FLAGS: usize = 31;
        pub(crate) const LIST: usize = 32;
    }

    /// PATH_ECHO: entry count, flags, a reserved byte, the echo's
    /// sequence number; then the entries, 24 bytes each.
    pub(crate) mod path_echo {
        use std::ops::Range;
        pub(crate) const COUNT: Range<usize> = 28..30;
        pub(crate) const FLAGS: usize = 30;
        pub(crate) const RESERVED: usize = 31;
        pub(crate) const SEQUENCE: Range<usize> = 32..36;
        pub(crate) const ENTRIES: usize = 36;
    }
}

/// A read/write view over a buffer holding one SMT packet.
///
/// After [`Packet::new_checked`] the buffer is at least as long as the header
/// length the packet declares, and that length is at least the common
/// header, so every accessor of the common header is in bounds. DATA
/// accessors are in bounds once [`Packet::check_data`] passed.
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(b: &[u8], r: std::ops::Range<usize>) -> u16 {
    let mut a = [0; 2];
    a.copy_from_slice(&b[r]);
    u16::from_be_bytes(a)
}

fn be32(b: &[u8], r: std::ops::Range<usize>) -> u32 {
    let mut a = [0; 4];
    a.copy_from_slice(&b[r]);
    u32::from_be_bytes(a)
}

fn be64(b: &[u8], r: std::ops::Range<usize>) -> u64 {
    let mut a = [0; 8];
    a.copy_from_slice(&b[r]);
    u64::from_be_bytes(a)
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it; accessors may panic. Use for
    /// building packets into buffers of known size.
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer after checking that it holds a whole common header
    /// and the header length it declares.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    fn check_len(&self) -> Result<(), WireError> {
        let buf = self.buffer.as_ref();
        if buf.len() < COMMON_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let header_len = self.header_len();
        if header_len < COMMON_HEADER_LEN {
            return Err(WireError::BadHeaderLength);
        }
        if buf.len() < header_len {
            return Err(WireError::Truncated);
        }
        Ok(())
    }

    /// Checks that a DATA packet declares exactly the DATA header length.
    pub fn check_data(&self) -> Result<(), WireError> {
        if self.header_len() != DATA_HEADER_LEN {
            return Err(WireError::BadHeaderLength);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The sender's SMT port (bytes 0–1).
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SPORT)
    }
    /// The receiver's SMT port (bytes 2–3).
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DPORT)
    }
    /// DATA: the wire offset of this packet's segment within the message (bytes 4–7, TCP's
    /// sequence-number slot); 0 on control packets.
    pub fn segment_offset(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SEG_OFFSET)
    }
    /// DATA: the message length in bytes including padding (bytes 8–11, TCP's acknowledgment slot);
    /// 0 on control packets.
    pub fn message_len(&self) -> u32 {
        be32(self.buffer.as_ref(), field::MSG_LEN)
    }
    /// Header length in bytes, from the 4-bit data-offset field.
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::DOFF] >> 4) * 4
    }
    /// The low nibble of the data-offset byte without the key-phase bit;
    /// must be zero.
    pub fn doff_reserved(&self) -> u8 {
        self.buffer.as_ref()[field::DOFF] & 0x0e
    }
    /// The key-phase bit (bit 0 of byte 12, a reserved bit in TCP): which
    /// of two consecutive key epochs protects this packet.
    #[inline]
    pub fn key_phase(&self) -> bool {
        self.buffer.as_ref()[field::DOFF] & 0x01 != 0
    }
    /// The packet type (byte 13, TCP's flags byte); unknown values are kept for the caller to
    /// reject.
    pub fn packet_type(&self) -> PacketType {
        PacketType(self.buffer.as_ref()[field::TYPE])
    }
    /// DATA: payload bytes in every packet of this segment except possibly the last (bytes 14–15,
    /// TCP's window slot).
    pub fn mss(&self) -> u16 {
        be16(self.buffer.as_ref(), field::MSS)
    }
    /// The checksum slot (bytes 16–17): always 0 on the wire; integrity comes from the AEAD and the
    /// control MAC.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }
    /// DATA: on a retransmission, the packet's original index in its segment (bytes 18–19);
    /// otherwise 0.
    pub fn resend_index(&self) -> u16 {
        be16(self.buffer.as_ref(), field::RESEND_INDEX)
    }
    /// The message (RPC) ID (bytes 20–27); its low bit names the side that started the RPC.
    pub fn id(&self) -> u64 {
        be64(self.buffer.as_ref(), field::ID)
    }
    /// DATA: this packet's position in its segment, from 0; 0 on a retransmission (bytes 28–29).
    pub fn packet_index(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PKT_INDEX)
    }
    /// DATA: the flags byte (byte 30); only `DataFlags::RETRANSMIT` is defined.
    pub fn data_flags(&self) -> DataFlags {
        DataFlags(self.buffer.as_ref()[field::FLAGS])
    }
    /// The message priority (byte 31 of a DATA packet): 0 by default,
    /// larger is more urgent; a hint for the network, never authenticated.
    pub fn priority(&self) -> u8 {
        self.buffer.as_ref()[field::PRIORITY]
    }
    /// DATA: the bytes of the whole message on the wire, every record with its header and tag
    /// (bytes 32–35).
    pub fn message_wire_len(&self) -> u32 {
        be32(self.buffer.as_ref(), field::MSG_WIRE_LEN)
    }
    /// DATA: the wire bytes of this packet's segment (bytes 36–39).
    pub fn segment_len(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SEG_LEN)
    }
    /// DATA: the wire bytes of the message the sender may send without further grants (bytes
    /// 40–43).
    pub fn incoming(&self) -> u32 {
        be32(self.buffer.as_ref(), field::INCOMING)
    }
    /// Everything after the declared header.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn put(&mut self, r: std::ops::Range<usize>, v: &[u8]) {
        self.buffer.as_mut()[r].copy_from_slice(v);
    }
    /// Writes a whole DATA header (`DataHeader::header_bytes`).
    pub(crate) fn set_data_header(&mut self, header: &[u8; DATA_HEADER_LEN]) {
        self.put(0..DATA_HEADER_LEN, header);
    }
    /// Writes src port; see [`Packet::src_port`].
    pub fn set_src_port(&mut self, v: u16) {
        self.put(field::SPORT, &v.to_be_bytes());
    }
    /// Writes dst port; see [`Packet::dst_port`].
    pub fn set_dst_port(&mut self, v: u16) {
        self.put(field::DPORT, &v.to_be_bytes());
    }
    /// Writes segment offset; see [`Packet::segment_offset`].
    pub fn set_segment_offset(&mut self, v: u32) {
        self.put(field::SEG_OFFSET, &v.to_be_bytes());
    }
    /// Writes message len; see [`Packet::message_len`].
    pub fn set_message_len(&mut self, v: u32) {
        self.put(field::MSG_LEN, &v.to_be_bytes());
    }
    /// Sets the data-offset byte from a header length in bytes (a multiple
    /// of 4, at most 60).
    pub fn set_header_len(&mut self, len: usize) {
        debug_assert!(len.is_multiple_of(4) && len <= super::MAX_HEADER_LEN);
        let phase = self.buffer.as_ref()[field::DOFF] & 0x01;
        self.buffer.as_mut()[field::DOFF] = (((len / 4) as u8) << 4) | phase;
    }
    /// Writes the key-phase bit; see [`Packet::key_phase`].
    pub fn set_key_phase(&mut self, phase: bool) {
        let b = &mut self.buffer.as_mut()[field::DOFF];
        *b = (*b & 0xfe) | u8::from(phase);
    }
    /// Writes packet type; see [`Packet::packet_type`].
    pub fn set_packet_type(&mut self, v: PacketType) {
        self.buffer.as_mut()[field::TYPE] = v.0;
    }
    /// Writes mss; see [`Packet::mss`].
    pub fn set_mss(&mut self, v: u16) {
        self.put(field::MSS, &v.to_be_bytes());
    }
    /// Writes checksum; see [`Packet::checksum`].
    pub fn set_checksum(&mut self, v: u16) {
        self.put(field::CHECKSUM, &v.to_be_bytes());
    }
    /// Writes resend index; see [`Packet::resend_index`].
    pub fn set_resend_index(&mut self, v: u16) {
        self.put(field::RESEND_INDEX, &v.to_be_bytes());
    }
    /// Writes id; see [`Packet::id`].
    pub fn set_id(&mut self, v: u64) {
        self.put(field::ID, &v.to_be_bytes());
    }
    /// Writes packet index; see [`Packet::packet_index`].
    pub fn set_packet_index(&mut self, v: u16) {
        self.put(field::PKT_INDEX, &v.to_be_bytes());
    }
    /// Writes data flags; see [`Packet::data_flags`].
    pub fn set_data_flags(&mut self, v: DataFlags) {
        self.buffer.as_mut()[field::FLAGS] = v.0;
    }
    /// Writes the message priority; see [`Packet::priority`].
    pub fn set_priority(&mut self, v: u8) {
        self.buffer.as_mut()[field::PRIORITY] = v;
    }
    /// Writes message wire len; see [`Packet::message_wire_len`].
    pub fn set_message_wire_len(&mut self, v: u32) {
        self.put(field::MSG_WIRE_LEN, &v.to_be_bytes());
    }
    /// Writes segment len; see [`Packet::segment_len`].
    pub fn set_segment_len(&mut self, v: u32) {
        self.put(field::SEG_LEN, &v.to_be_bytes());
    }
    /// Writes incoming; see [`Packet::incoming`].
    pub fn set_incoming(&mut self, v: u32) {
        self.put(field::INCOMING, &v.to_be_bytes());
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The whole underlying buffer, by reference.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The whole underlying buffer, mutably.
    pub fn inner_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
}
