//! Arbitrary bytes opened as one segment with the NullCipher.
//!
//! Input format (the seed writer in `crates/smt-proto/tests/integration/record_layer.rs`
//! uses the same): byte 0 selects the sequence-number split (bits 0-1: 16,
//! 24, 8 or 2 index bits), whether the segment starts just below the index
//! limit (bit 2) and whether the message ID may exceed its bits (bit 3);
//! byte 1 is the first record index (or the distance below the limit);
//! bytes 2..10 are the message ID, big-endian; the rest is the segment.
//!
//! `open_segment` must never panic; on error it appends nothing; on success
//! the records tile the segment exactly and the data fits in them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smt_proto::crypto::NullCipher;
use smt_proto::record::{open_segment, SeqLayout, RECORD_OVERHEAD};

const INDEX_BITS: [u8; 4] = [16, 24, 8, 2];
const MARKER: &[u8] = b"kept";

fuzz_target!(|data: &[u8]| {
    if data.len() < 10 {
        return;
    }
    let (selector, first, id) = (data[0], data[1], &data[2..10]);
    let layout =
        SeqLayout::new(INDEX_BITS[usize::from(selector & 3)]).expect("every split is valid");
    let first_record = if selector & 4 != 0 {
        layout
            .max_records()
            .saturating_sub(u64::from(first & 3) + 1)
    } else {
        u64::from(first)
    };
    let mut id = u64::from_be_bytes(id.try_into().expect("8 bytes"));
    if selector & 8 == 0 {
        id &= layout.id_limit() - 1;
    }

    let mut segment = data[10..].to_vec();
    let mut out = MARKER.to_vec();
    match open_segment(
        &NullCipher,
        layout,
        id,
        first_record,
        &mut segment,
        &mut out,
    ) {
        Err(_) => assert_eq!(out, MARKER, "data appended on error"),
        Ok(opened) => {
            let wire = opened.padded_len + opened.records * RECORD_OVERHEAD as u64;
            assert_eq!(
                wire,
                (data.len() - 10) as u64,
                "records do not tile the segment"
            );
            let appended = (out.len() - MARKER.len()) as u64;
            assert!(
                appended <= opened.padded_len,
                "more data than padded plaintext"
            );
            // Every opened record had an index inside its bits (an empty
            // segment opens no record and checks no index).
            if opened.records > 0 {
                assert!(first_record + opened.records <= layout.max_records());
            }
        }
    }
});
