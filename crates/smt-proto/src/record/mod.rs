//! TLS 1.3 record protection with SMT's per-message sequence numbers.
//!
//! A record on the wire is exactly an RFC 8446 §5.2 `TLSCiphertext`:
//! `17 03 03 <len:u16>` followed by the AEAD output of
//! `TLSInnerPlaintext = data || 0x17 || zeros`. The nonce is `iv XOR seq`
//! with `seq = message_id << index_bits | record_index` ([`SeqLayout`]).
//! Records never span segments or messages; a segment holds whole records
//! and at most [`MAX_SEGMENT_LEN`] bytes (the SMT paper §4.3).

mod layout;
mod open;
mod seal;

pub use layout::{MessageLayout, RecordPlan, SegmentPlan};
pub(crate) use open::{open_decrypted_in_place, open_marked_into, OffloadTally, PacketMarks};
pub use open::{open_segment, open_segment_in_place, open_segment_into, OpenError, OpenedSegment};
pub use seal::{frame_message_into, seal_message, seal_message_into, Plaintext, SealedMessage};

use crate::crypto::{RECORD_HEADER_LEN, TAG_LEN};

/// Largest plaintext a record may carry (RFC 8446 §5.1: 2^14).
pub const MAX_RECORD_PLAINTEXT: usize = 16384;
/// Largest `length` field a TLS 1.3 record may carry (RFC 8446 §5.2).
pub const MAX_RECORD_CIPHERTEXT: usize = MAX_RECORD_PLAINTEXT + 256;
/// Largest segment: what one TSO/GSO super-packet can carry.
pub const MAX_SEGMENT_LEN: usize = 65536;
/// Bytes a record adds to its plaintext: header, content type, tag.
pub const RECORD_OVERHEAD: usize = RECORD_HEADER_LEN + 1 + TAG_LEN;
/// TLS content type of application data.
pub const CONTENT_APPLICATION_DATA: u8 = 0x17;
/// TLS legacy record version, always `03 03` in TLS 1.3.
pub const LEGACY_VERSION: [u8; 2] = [0x03, 0x03];

/// How a 64-bit TLS record sequence number is split between the message ID
/// (high bits) and the record index within the message (low bits).
///
/// The SMT paper (§4.4.1) uses 48/16. Both ends of a session must use the same
/// split; the handshake will negotiate it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqLayout {
    index_bits: u8,
}

impl SeqLayout {
    /// The paper's default: 48-bit message IDs, 16-bit record indexes.
    pub const DEFAULT: Self = Self { index_bits: 16 };

    /// A split with `index_bits` bits of record index (1..=62, leaving at
    /// least two bits of message ID).
    pub fn new(index_bits: u8) -> Option<Self> {
        (1..=62)
            .contains(&index_bits)
            .then_some(Self { index_bits })
    }

    /// Bits of record index.
    pub fn index_bits(self) -> u8 {
        self.index_bits
    }

    /// Bits of message ID.
    pub fn id_bits(self) -> u8 {
        64 - self.index_bits
    }

    /// Number of distinct message IDs: IDs must be below this.
    pub fn id_limit(self) -> u64 {
        1u64 << self.id_bits()
    }

    /// Records one message may hold.
    pub fn max_records(self) -> u64 {
        1u64 << self.index_bits
    }

    /// The record sequence number, or `None` if either part overflows its
    /// bits (which would alias another message's sequence space).
    pub fn seq(self, message_id: u64, record_index: u64) -> Option<u64> {
        if message_id >= self.id_limit() || record_index >= self.max_records() {
            return None;
        }
        Some(message_id << self.index_bits | record_index)
    }
}

impl Default for SeqLayout {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The 5-byte record header for a ciphertext of `len` bytes.
pub fn record_header(len: u16) -> [u8; RECORD_HEADER_LEN] {
    let l = len.to_be_bytes();
    [
        CONTENT_APPLICATION_DATA,
        LEGACY_VERSION[0],
        LEGACY_VERSION[1],
        l[0],
        l[1],
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_split_is_48_16() {
        let l = SeqLayout::DEFAULT;
        assert_eq!(l.id_bits(), 48);
        assert_eq!(l.seq(0x1234, 7), Some(0x1234_0007));
        assert_eq!(l.seq(1 << 48, 0), None);
        assert_eq!(
            l.seq(1, 1 << 16),
            None,
            "index must never spill into the ID bits"
        );
    }

    #[test]
    fn split_bounds() {
        assert!(SeqLayout::new(0).is_none());
        assert!(SeqLayout::new(63).is_none());
        let tiny_ids = SeqLayout::new(56).unwrap();
        assert_eq!(tiny_ids.id_limit(), 256);
    }
}
