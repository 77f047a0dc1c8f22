//! Record streams shaped like SMT's, built here so the engine's tests and
//! benchmarks need no SMT crate: a message becomes TLS 1.3 records of at
//! most `record_size` data bytes (plaintext, tags left empty for the NIC),
//! grouped into segments of whole records of at most 64 KiB
//! (`docs/protocol.md` §7; the SMT paper §4.3), each record numbered
//! `message_id << 16 | index` (§8; the SMT paper §4.4.1).

use crate::descriptor::MAX_SEGMENT_PAYLOAD;
use crate::gcm::TAG_LEN;
use crate::record::{plaintext_record, HEADER_LEN};

/// Data bytes in the largest TLS 1.3 record.
pub const MAX_RECORD_DATA: usize = 1 << 14;

/// Bytes a record adds to its data: header, inner content type, tag.
pub const RECORD_OVERHEAD: usize = HEADER_LEN + 1 + TAG_LEN;

/// Bits of the record index in SMT's sequence number (the 48/16 split).
pub const INDEX_BITS: u32 = 16;

/// SMT's record sequence number: message ID in the high 48 bits, record
/// index in the low 16.
pub fn smt_seq(message_id: u64, record_index: u16) -> u64 {
    (message_id << INDEX_BITS) | u64::from(record_index)
}

/// Whole records ready for the NIC, as one segment's payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlainSegment {
    /// Index (within the message) of the segment's first record.
    pub first_record: u16,
    /// Records in the segment.
    pub records: u16,
    /// The records: headers, plaintext inner content, zero tags.
    pub payload: Vec<u8>,
}

/// Lays `data` out as SMT does: records of at most `record_size` data
/// bytes (clamped to 1..=16384), an empty message as one empty record, and
/// as many whole records per segment as fit in 64 KiB.
///
/// Messages with more than 2^16 records do not fit SMT's index bits; the
/// indices wrap here and the caller must keep messages smaller.
pub fn smt_segments(data: &[u8], record_size: usize) -> Vec<PlainSegment> {
    smt_segments_with(data, record_size, Vec::with_capacity)
}

/// [`smt_segments`] writing each segment into a buffer from `buffer`
/// (called with the bytes needed; whatever it returns is cleared first),
/// so a caller can recycle buffers the way a driver recycles pages.
pub fn smt_segments_with(
    data: &[u8],
    record_size: usize,
    mut buffer: impl FnMut(usize) -> Vec<u8>,
) -> Vec<PlainSegment> {
    let record_size = record_size.clamp(1, MAX_RECORD_DATA);
    let per_segment = (MAX_SEGMENT_PAYLOAD / (record_size + RECORD_OVERHEAD)).max(1);
    let mut chunks: Vec<&[u8]> = data.chunks(record_size).collect();
    if chunks.is_empty() {
        chunks.push(&[]);
    }
    chunks
        .chunks(per_segment)
        .enumerate()
        .map(|(s, records)| segment_of(records, s * per_segment, &mut buffer))
        .collect()
}

fn segment_of(
    records: &[&[u8]],
    first: usize,
    buffer: &mut impl FnMut(usize) -> Vec<u8>,
) -> PlainSegment {
    let len = records.iter().map(|r| r.len() + RECORD_OVERHEAD).sum();
    let mut payload = buffer(len);
    payload.clear();
    for record in records {
        // NOTE(unwrap): records were cut to at most MAX_RECORD_DATA bytes.
        plaintext_record(record, &mut payload).expect("record_size is clamped");
    }
    PlainSegment {
        first_record: first as u16,
        records: records.len() as u16,
        payload,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_protocol_md() {
        // 16 KiB records: three to a segment, 49218 bytes.
        let data = vec![7; 5 * 16384 + 10];
        let segments = smt_segments(&data, 16384);
        assert_eq!(segments.len(), 2);
        assert_eq!(segments[0].payload.len(), 3 * (16384 + 22));
        assert_eq!((segments[1].first_record, segments[1].records), (3, 3));
        assert_eq!(segments[1].payload.len(), 2 * (16384 + 22) + 10 + 22);
        // The empty message is one empty record.
        let empty = smt_segments(&[], 16384);
        assert_eq!(empty.len(), 1);
        assert_eq!(empty[0].payload.len(), 22);
    }

    #[test]
    fn sequence_numbers() {
        assert_eq!(smt_seq(0x1122_3344_5566, 2), 0x1122_3344_5566_0002);
    }
}
