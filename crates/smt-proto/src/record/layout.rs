//! Where records and segments fall in a message. The layout is arithmetic:
//! every record but the last carries `record_size` padded-plaintext bytes and
//! every segment but the last carries `records_per_segment` records, so no
//! per-message table is needed.

use super::{MAX_RECORD_PLAINTEXT, MAX_SEGMENT_LEN, RECORD_OVERHEAD};

/// The record and segment layout of one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageLayout {
    data_len: u64,
    padded_len: u64,
    record_size: u64,
    records_per_segment: u64,
    records: u64,
    /// `padded_len + records × RECORD_OVERHEAD`, kept: asked several times
    /// per packet.
    wire_len: u64,
}

/// One segment of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentPlan {
    /// Offset of the segment in the message's wire bytes.
    pub wire_offset: u64,
    /// Wire bytes of the segment.
    pub wire_len: u64,
    /// Index of the segment's first record within the message.
    pub first_record: u64,
    /// Records in the segment.
    pub records: u64,
}

/// One record of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordPlan {
    /// Offset of the record's first byte in the padded plaintext.
    pub padded_start: u64,
    /// Padded plaintext bytes in the record (data then padding).
    pub padded_len: u64,
    /// Of those, application data bytes; the rest is padding.
    pub data_len: u64,
}

impl RecordPlan {
    /// Wire bytes of this record (header, ciphertext, tag).
    pub fn wire_len(&self) -> u64 {
        self.padded_len + RECORD_OVERHEAD as u64
    }
}

impl MessageLayout {
    /// Lays out `data_len` bytes of data padded to `padded_len` bytes in
    /// records of at most `record_size` bytes and segments of at most
    /// [`MAX_SEGMENT_LEN`] wire bytes.
    ///
    /// # Panics
    /// If `record_size` is 0 or above [`MAX_RECORD_PLAINTEXT`], or
    /// `padded_len < data_len` (configuration is validated earlier).
    pub fn new(data_len: u64, padded_len: u64, record_size: usize) -> Self {
        assert!(record_size > 0 && record_size <= MAX_RECORD_PLAINTEXT);
        assert!(padded_len >= data_len);
        let record_size = record_size as u64;
        let records = padded_len.div_ceil(record_size).max(1);
        let per_segment = (MAX_SEGMENT_LEN as u64) / (record_size + RECORD_OVERHEAD as u64);
        Self {
            data_len,
            padded_len,
            record_size,
            records_per_segment: per_segment,
            records,
            wire_len: padded_len + records * RECORD_OVERHEAD as u64,
        }
    }

    /// Application data bytes.
    pub fn data_len(&self) -> u64 {
        self.data_len
    }

    /// Data plus padding: the value of the message-length field.
    pub fn padded_len(&self) -> u64 {
        self.padded_len
    }

    /// Number of records.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Number of segments.
    pub fn segments(&self) -> u64 {
        self.records.div_ceil(self.records_per_segment)
    }

    /// Total wire bytes of the message.
    pub fn wire_len(&self) -> u64 {
        self.wire_len
    }

    /// The segment holding wire offset `wire_offset` (clamped to the last).
    pub fn segment_index_at(&self, wire_offset: u64) -> u64 {
        let full_segment = self.records_per_segment * (self.record_size + RECORD_OVERHEAD as u64);
        (wire_offset / full_segment).min(self.segments() - 1)
    }

    /// Wire offset of record `index`'s first byte (records lie back to
    /// back, segment after segment).
    pub fn record_wire_offset(&self, index: u64) -> u64 {
        index * (self.record_size + RECORD_OVERHEAD as u64)
    }

    /// The record holding wire offset `wire_offset` (clamped to the last).
    pub fn record_at(&self, wire_offset: u64) -> u64 {
        (wire_offset / (self.record_size + RECORD_OVERHEAD as u64)).min(self.records - 1)
    }

    /// Record `index` (< [`Self::records`]).
    pub fn record(&self, index: u64) -> RecordPlan {
        let padded_start = index * self.record_size;
        let padded_len = self
            .record_size
            .min(self.padded_len - padded_start.min(self.padded_len));
        let data_len = self.data_len.saturating_sub(padded_start).min(padded_len);
        RecordPlan {
            padded_start,
            padded_len,
            data_len,
        }
    }

    /// Segment `index` (< [`Self::segments`]).
    pub fn segment(&self, index: u64) -> SegmentPlan {
        let first_record = index * self.records_per_segment;
        let records = self.records_per_segment.min(self.records - first_record);
        let full_record_wire = self.record_size + RECORD_OVERHEAD as u64;
        let wire_offset = first_record * full_record_wire;
        let last = self.record(first_record + records - 1);
        let wire_len = (records - 1) * full_record_wire + last.wire_len();
        SegmentPlan {
            wire_offset,
            wire_len,
            first_record,
            records,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_message_is_one_empty_record() {
        let l = MessageLayout::new(0, 0, 16384);
        assert_eq!(l.records(), 1);
        assert_eq!(l.wire_len(), 22);
        assert_eq!(l.segment(0).wire_len, 22);
    }

    #[test]
    fn exactly_one_full_record() {
        let l = MessageLayout::new(16384, 16384, 16384);
        assert_eq!(l.records(), 1);
        assert_eq!(l.wire_len(), 16384 + 22);
    }

    #[test]
    fn segments_tile_the_message_and_stay_under_64k() {
        for (len, rs) in [
            (1u64, 16384),
            (65536, 16384),
            (1 << 20, 16384),
            (100_000, 1000),
            (7, 3),
        ] {
            let l = MessageLayout::new(len, len, rs);
            let mut next = 0;
            let mut records = 0;
            for s in 0..l.segments() {
                let seg = l.segment(s);
                assert_eq!(seg.wire_offset, next);
                assert!(seg.wire_len as usize <= MAX_SEGMENT_LEN);
                assert_eq!(seg.first_record, records);
                next += seg.wire_len;
                records += seg.records;
            }
            assert_eq!(next, l.wire_len());
            assert_eq!(records, l.records());
        }
    }

    #[test]
    fn padding_fills_the_tail_records() {
        let l = MessageLayout::new(10, 40_000, 16384);
        assert_eq!(l.records(), 3);
        assert_eq!(l.record(0).data_len, 10);
        assert_eq!(l.record(1).data_len, 0);
        assert_eq!(l.record(2).padded_len, 40_000 - 2 * 16384);
    }
}
