//! The TLS 1.3 record layer: layouts, seal/open round trips segment by
//! segment, padding, and the ways a receiver must refuse records.
//!
//! The [`NullCipher`] ignores the sequence number, so it cannot show that a
//! record opened under the wrong message ID or index is refused. For that
//! this file has [`ChecksumCipher`], a test-only [`PacketCipher`] whose
//! "tag" is a keyed FNV-1a checksum of (seq, header, ciphertext) and whose
//! "encryption" is a keystream drawn from (key, seq). It is not
//! cryptography; it only binds what a real AEAD binds, deterministically.

use smt_proto::crypto::{CryptoError, NullCipher, PacketCipher, RECORD_HEADER_LEN, TAG_LEN};
use smt_proto::record::{
    open_segment, record_header, seal_message, MessageLayout, OpenError, OpenedSegment, SeqLayout,
    MAX_RECORD_CIPHERTEXT, MAX_RECORD_PLAINTEXT, MAX_SEGMENT_LEN, RECORD_OVERHEAD,
};

const MIB: u64 = 1 << 20;
const ID: u64 = 0x0000_1122_3344_5566;

// ---------------------------------------------------------------------------
// A test-only cipher that binds the sequence number
// ---------------------------------------------------------------------------

/// FNV-1a, 64-bit.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) -> &mut Self {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self
    }
}

/// Keyed checksum "AEAD" for tests: detects any change to seq, header or
/// ciphertext with certainty for single-byte changes (FNV-1a's steps are
/// bijections) and with overwhelming likelihood otherwise.
#[derive(Debug, Clone, Copy)]
struct ChecksumCipher {
    key: u64,
}

impl ChecksumCipher {
    fn tag(&self, seq: u64, aad: &[u8], data: &[u8]) -> [u8; TAG_LEN] {
        let mut tag = [0; TAG_LEN];
        for (half, salt) in [0x36u8, 0x5c].into_iter().enumerate() {
            let mut h = Fnv::new();
            h.write(&self.key.to_be_bytes()).write(&[salt]);
            h.write(&seq.to_be_bytes()).write(aad).write(data);
            tag[half * 8..half * 8 + 8].copy_from_slice(&h.0.to_be_bytes());
        }
        tag
    }

    /// XORs a keystream that depends on key and seq into `buf`.
    fn keystream(&self, seq: u64, buf: &mut [u8]) {
        let mut x = (self.key ^ seq.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
        for b in buf {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b ^= x as u8;
        }
    }
}

impl PacketCipher for ChecksumCipher {
    fn seal_in_place(
        &self,
        seq: u64,
        aad: &[u8; RECORD_HEADER_LEN],
        buf: &mut [u8],
    ) -> Result<(), CryptoError> {
        let tag_at = buf.len().checked_sub(TAG_LEN).ok_or(CryptoError)?;
        let (body, tag) = buf.split_at_mut(tag_at);
        self.keystream(seq, body);
        tag.copy_from_slice(&self.tag(seq, aad, body));
        Ok(())
    }

    fn open_in_place(
        &self,
        seq: u64,
        aad: &[u8; RECORD_HEADER_LEN],
        buf: &mut [u8],
    ) -> Result<usize, CryptoError> {
        let tag_at = buf.len().checked_sub(TAG_LEN).ok_or(CryptoError)?;
        let (body, tag) = buf.split_at_mut(tag_at);
        if self.tag(seq, aad, body)[..] != tag[..] {
            return Err(CryptoError);
        }
        self.keystream(seq, body);
        Ok(tag_at)
    }

    fn control_tag(&self, packet: &[u8]) -> [u8; TAG_LEN] {
        self.tag(u64::MAX, b"ctrl!", packet)
    }

    fn record_limit(&self) -> u64 {
        u64::MAX
    }
}

const KEYED: ChecksumCipher = ChecksumCipher {
    key: 0x0123_4567_89ab_cdef,
};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// Recognisable message bytes.
fn message(len: u64) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ (i >> 8) as u8).collect()
}

fn seal(cipher: &dyn PacketCipher, id: u64, data: &[u8], padded: u64, rs: usize) -> Vec<u8> {
    let layout = MessageLayout::new(data.len() as u64, padded, rs);
    seal_message(cipher, SeqLayout::DEFAULT, id, data, layout)
        .expect("message fits the sequence space")
        .wire
}

/// Wire bytes of segment `s` of `wire` under `layout`.
fn segment_of(layout: &MessageLayout, wire: &[u8], s: u64) -> Vec<u8> {
    let seg = layout.segment(s);
    wire[seg.wire_offset as usize..(seg.wire_offset + seg.wire_len) as usize].to_vec()
}

/// Wire offset of record `r` (records are laid out back to back).
fn record_offset(layout: &MessageLayout, r: u64) -> usize {
    (0..r).map(|i| layout.record(i).wire_len()).sum::<u64>() as usize
}

fn open(
    cipher: &dyn PacketCipher,
    id: u64,
    first_record: u64,
    segment: &[u8],
) -> Result<(OpenedSegment, Vec<u8>), OpenError> {
    let buf = segment.to_vec();
    let mut out = Vec::new();
    let opened = open_segment(cipher, SeqLayout::DEFAULT, id, first_record, &buf, &mut out)?;
    Ok((opened, out))
}

/// Opens every segment of a sealed message in order; returns the data.
fn open_all(cipher: &dyn PacketCipher, id: u64, layout: &MessageLayout, wire: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut padded = 0;
    for s in 0..layout.segments() {
        let seg = layout.segment(s);
        let bytes = segment_of(layout, wire, s);
        let opened = open_segment(
            cipher,
            SeqLayout::DEFAULT,
            id,
            seg.first_record,
            &bytes,
            &mut out,
        )
        .unwrap_or_else(|e| panic!("segment {s}: {e:?}"));
        assert_eq!(opened.records, seg.records, "segment {s}");
        padded += opened.padded_len;
    }
    assert_eq!(
        padded,
        layout.padded_len(),
        "padded bytes add up to the message-length field"
    );
    out
}

// ---------------------------------------------------------------------------
// Layouts
// ---------------------------------------------------------------------------

#[test]
fn record_overhead_is_header_type_and_tag() {
    assert_eq!(RECORD_OVERHEAD, 5 + 1 + 16);
    assert_eq!(MAX_RECORD_PLAINTEXT, 16384);
    assert_eq!(MAX_RECORD_CIPHERTEXT, 16384 + 256);
    assert_eq!(MAX_SEGMENT_LEN, 65536);
    assert_eq!(record_header(0x1234), [0x17, 0x03, 0x03, 0x12, 0x34]);
}

#[test]
fn layouts_of_interesting_sizes() {
    // (data bytes, records, segments, wire bytes) with 16384-byte records:
    // three full records (3 * 16406 = 49218 B) fit a 65536-byte segment.
    let table: [(u64, u64, u64, u64); 7] = [
        (0, 1, 1, 22),
        (1, 1, 1, 23),
        (16383, 1, 1, 16405),
        (16384, 1, 1, 16406),
        (16385, 2, 1, 16385 + 2 * 22),
        (65536, 4, 2, 65536 + 4 * 22),
        (MIB, 64, 22, MIB + 64 * 22),
    ];
    for (len, records, segments, wire) in table {
        let l = MessageLayout::new(len, len, MAX_RECORD_PLAINTEXT);
        assert_eq!(
            (l.records(), l.segments(), l.wire_len()),
            (records, segments, wire),
            "{len}-byte message"
        );
        check_tiling(&l);
    }
}

/// Records tile segments, segments tile the message, and every bound holds.
fn check_tiling(l: &MessageLayout) {
    let mut next_wire = 0;
    let mut next_record = 0;
    for s in 0..l.segments() {
        let seg = l.segment(s);
        assert_eq!(
            seg.wire_offset, next_wire,
            "segment {s} starts where the last ended"
        );
        assert_eq!(seg.first_record, next_record);
        assert!(
            seg.wire_len as usize <= MAX_SEGMENT_LEN,
            "segment {s} too long"
        );
        let records: u64 = (seg.first_record..seg.first_record + seg.records)
            .map(|r| l.record(r).wire_len())
            .sum();
        assert_eq!(
            records, seg.wire_len,
            "segment {s} holds whole records only"
        );
        next_wire += seg.wire_len;
        next_record += seg.records;
    }
    assert_eq!(next_wire, l.wire_len());
    assert_eq!(next_record, l.records());
    for r in 0..l.records() {
        let rec = l.record(r);
        assert!(rec.padded_len as usize <= MAX_RECORD_PLAINTEXT);
        assert!(rec.data_len <= rec.padded_len);
    }
}

#[test]
fn last_segment_of_a_mib_is_one_record() {
    let l = MessageLayout::new(MIB, MIB, MAX_RECORD_PLAINTEXT);
    let last = l.segment(21);
    assert_eq!(last.first_record, 63);
    assert_eq!(last.records, 1);
    assert_eq!(last.wire_offset, 21 * 3 * 16406);
    assert_eq!(last.wire_len, 16406);
}

// ---------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------

#[test]
fn seal_then_open_segment_by_segment() {
    for len in [0, 1, 16383, 16384, 16385, 65536, MIB] {
        let data = message(len);
        let layout = MessageLayout::new(len, len, MAX_RECORD_PLAINTEXT);
        for cipher in [&NullCipher as &dyn PacketCipher, &KEYED] {
            let sealed = seal_message(cipher, SeqLayout::DEFAULT, ID, &data, layout).expect("fits");
            assert_eq!(sealed.wire.len() as u64, layout.wire_len());
            assert_eq!(sealed.layout, layout);
            let out = open_all(cipher, ID, &layout, &sealed.wire);
            assert!(out == data, "{len}-byte message with {cipher:?}");
        }
    }
}

#[test]
fn small_records_round_trip() {
    for (len, rs) in [(100, 32), (1000, 1), (200_000, 1000), (5, 16384)] {
        let data = message(len);
        let layout = MessageLayout::new(len, len, rs);
        check_tiling(&layout);
        let wire = seal(&KEYED, ID, &data, len, rs);
        assert!(
            open_all(&KEYED, ID, &layout, &wire) == data,
            "{len} bytes in {rs}-byte records"
        );
    }
}

#[test]
fn segments_open_independently_in_any_order() {
    let data = message(MIB);
    let layout = MessageLayout::new(MIB, MIB, MAX_RECORD_PLAINTEXT);
    let wire = seal(&KEYED, ID, &data, MIB, MAX_RECORD_PLAINTEXT);
    let mut pieces = vec![Vec::new(); layout.segments() as usize];
    for s in (0..layout.segments()).rev() {
        let first = layout.segment(s).first_record;
        let (_, out) = open(&KEYED, ID, first, &segment_of(&layout, &wire, s)).expect("opens");
        pieces[s as usize] = out;
    }
    assert!(pieces.concat() == data);
}

#[test]
fn null_sealed_records_are_tls_framed_plaintext() {
    let wire = seal(&NullCipher, ID, b"abc", 3, MAX_RECORD_PLAINTEXT);
    let mut want = vec![0x17, 0x03, 0x03, 0x00, 0x14, b'a', b'b', b'c', 0x17];
    want.extend([0; TAG_LEN]);
    assert_eq!(wire, want);
}

#[test]
fn keyed_records_hide_the_plaintext_and_depend_on_seq() {
    let a = seal(&KEYED, 1, &[0; 64], 64, MAX_RECORD_PLAINTEXT);
    let b = seal(&KEYED, 2, &[0; 64], 64, MAX_RECORD_PLAINTEXT);
    assert_eq!(a[..5], b[..5], "same header");
    assert_ne!(a[5..], b[5..], "different message ID, different ciphertext");
    assert!(
        a[5..69].iter().any(|&x| x != 0),
        "the keystream was applied"
    );
}

// ---------------------------------------------------------------------------
// Padding (length concealment)
// ---------------------------------------------------------------------------

#[test]
fn padding_counts_in_the_message_length_and_is_stripped() {
    let data = message(10);
    let layout = MessageLayout::new(10, 40_000, MAX_RECORD_PLAINTEXT);
    assert_eq!(
        layout.padded_len(),
        40_000,
        "the message-length field carries the padded length"
    );
    assert_eq!(layout.records(), 3);
    assert_eq!(
        layout.wire_len(),
        40_000 + 3 * 22,
        "the wire shows only the padded length"
    );
    for cipher in [&NullCipher as &dyn PacketCipher, &KEYED] {
        let wire = seal(cipher, ID, &data, 40_000, MAX_RECORD_PLAINTEXT);
        let (opened, out) = open(cipher, ID, 0, &wire).expect("opens");
        assert_eq!(out, data, "{cipher:?}");
        assert_eq!(opened.padded_len, 40_000);
        assert_eq!(opened.records, 3);
    }
}

#[test]
fn padding_sits_after_the_content_type() {
    // data || 0x17 || zeros, per RFC 8446 §5.4; a record of pure padding is
    // 0x17 followed by zeros.
    let layout = MessageLayout::new(10, 40_000, MAX_RECORD_PLAINTEXT);
    let wire = seal(&NullCipher, ID, &message(10), 40_000, MAX_RECORD_PLAINTEXT);
    let first = &wire[5..5 + 16384 + 1];
    assert_eq!(first[..10], message(10)[..]);
    assert_eq!(first[10], 0x17);
    assert!(first[11..].iter().all(|&b| b == 0));
    let at = record_offset(&layout, 1);
    assert_eq!(
        wire[at..at + 5],
        [0x17, 0x03, 0x03, 0x40, 0x11],
        "16384 + 1 + 16 bytes"
    );
    assert_eq!(wire[at + 5], 0x17, "no data: the content type comes first");
    assert!(wire[at + 6..at + 5 + 16385].iter().all(|&b| b == 0));
}

#[test]
fn padding_within_one_record() {
    let wire = seal(&KEYED, ID, b"abc", 100, MAX_RECORD_PLAINTEXT);
    assert_eq!(wire.len(), 122);
    let (opened, out) = open(&KEYED, ID, 0, &wire).expect("opens");
    assert_eq!(out, b"abc");
    assert_eq!(opened.padded_len, 100);
}

#[test]
fn data_ending_in_zeros_or_the_content_type_survives_padding() {
    for data in [&[0u8, 0, 0][..], &[0x17], &[0x17, 0], &[]] {
        let wire = seal(&KEYED, ID, data, 50, 16);
        let layout = MessageLayout::new(data.len() as u64, 50, 16);
        assert_eq!(open_all(&KEYED, ID, &layout, &wire), data);
    }
}

// ---------------------------------------------------------------------------
// Refusals
// ---------------------------------------------------------------------------

#[test]
fn wrong_message_id_is_refused() {
    let wire = seal(&KEYED, ID, &message(1000), 1000, MAX_RECORD_PLAINTEXT);
    for wrong in [ID - 1, ID + 1, ID ^ (1 << 47), 0] {
        assert_eq!(
            open(&KEYED, wrong, 0, &wire).err(),
            Some(OpenError::Auth),
            "id {wrong:#x}"
        );
    }
    assert!(open(&KEYED, ID, 0, &wire).is_ok());
    // The NullCipher binds nothing: this is why the keyed test cipher exists.
    let null = seal(&NullCipher, ID, &message(1000), 1000, MAX_RECORD_PLAINTEXT);
    assert!(open(&NullCipher, ID + 1, 0, &null).is_ok());
}

#[test]
fn wrong_first_record_index_is_refused() {
    // 200000 bytes in 1000-byte records: 64 records per segment, 4 segments.
    let layout = MessageLayout::new(200_000, 200_000, 1000);
    assert_eq!(layout.segments(), 4);
    let wire = seal(&KEYED, ID, &message(200_000), 200_000, 1000);
    for s in 0..layout.segments() {
        let first = layout.segment(s).first_record;
        let bytes = segment_of(&layout, &wire, s);
        assert!(open(&KEYED, ID, first, &bytes).is_ok());
        for wrong in [first.wrapping_sub(1), first + 1, first + 64, 0, 1] {
            if wrong == first || wrong > u64::from(u16::MAX) {
                continue;
            }
            assert_eq!(
                open(&KEYED, ID, wrong, &bytes).err(),
                Some(OpenError::Auth),
                "segment {s} opened from record {wrong}"
            );
        }
    }
}

/// A small sealed message: 100 bytes in 32-byte records (four records).
fn small_keyed() -> (MessageLayout, Vec<u8>) {
    let layout = MessageLayout::new(100, 100, 32);
    (layout, seal(&KEYED, ID, &message(100), 100, 32))
}

#[test]
fn every_bit_flip_is_refused() {
    let (layout, wire) = small_keyed();
    let starts: Vec<usize> = (0..layout.records())
        .map(|r| record_offset(&layout, r))
        .collect();
    for at in 0..wire.len() {
        let in_record = at - starts.iter().rev().find(|&&s| s <= at).expect("a record");
        for bit in 0..8 {
            let mut bytes = wire.clone();
            bytes[at] ^= 1 << bit;
            let mut out = vec![0xee];
            let buf = bytes.clone();
            let got = open_segment(&KEYED, SeqLayout::DEFAULT, ID, 0, &buf, &mut out).map(|_| ());
            assert_eq!(
                out,
                [0xee],
                "nothing appended on error (byte {at} bit {bit})"
            );
            let want: &[OpenError] = match in_record {
                // Content type and legacy version: framing.
                0..=2 => &[OpenError::Framing],
                // Length: the records no longer tile (framing) or the
                // header, which is the AAD, no longer matches (auth).
                3 | 4 => &[OpenError::Framing, OpenError::Auth],
                // Ciphertext and tag.
                _ => &[OpenError::Auth],
            };
            let err = got.expect_err("a flipped bit must not open");
            assert!(
                want.contains(&err),
                "byte {at} (record offset {in_record}) bit {bit}: {err:?}"
            );
        }
    }
}

#[test]
fn null_cipher_refuses_a_nonzero_tag_only() {
    let mut wire = seal(&NullCipher, ID, b"hello", 5, MAX_RECORD_PLAINTEXT);
    let tag_at = wire.len() - TAG_LEN;
    for at in tag_at..wire.len() {
        let mut bytes = wire.clone();
        bytes[at] = 1;
        assert_eq!(
            open(&NullCipher, ID, 0, &bytes).err(),
            Some(OpenError::Auth)
        );
    }
    // A changed plaintext byte opens: the NullCipher gives no integrity.
    wire[5] = b'j';
    assert_eq!(open(&NullCipher, ID, 0, &wire).expect("opens").1, b"jello");
}

#[test]
fn records_spliced_between_messages_are_refused() {
    let (layout, a) = small_keyed();
    let b = seal(&KEYED, ID + 2, &message(100), 100, 32);
    assert_eq!(a.len(), b.len());
    // Record 1 of message B put where record 1 of message A was.
    let (r1, r2) = (record_offset(&layout, 1), record_offset(&layout, 2));
    let mut spliced = a.clone();
    spliced[r1..r2].copy_from_slice(&b[r1..r2]);
    assert_eq!(open(&KEYED, ID, 0, &spliced).err(), Some(OpenError::Auth));
    // B's whole segment presented as A's.
    assert_eq!(open(&KEYED, ID, 0, &b).err(), Some(OpenError::Auth));
    // B's record 1 alone, presented as A's record 1.
    assert_eq!(open(&KEYED, ID, 1, &b[r1..r2]).err(), Some(OpenError::Auth));
    assert!(open(&KEYED, ID + 2, 1, &b[r1..r2]).is_ok());
}

#[test]
fn reordered_dropped_or_duplicated_records_are_refused() {
    let (layout, wire) = small_keyed();
    let starts: Vec<usize> = (0..=layout.records())
        .map(|r| record_offset(&layout, r))
        .collect();
    let record = |r: usize| &wire[starts[r]..starts[r + 1]];
    let cases: [(&str, Vec<u8>); 3] = [
        (
            "records 0 and 1 swapped",
            [record(1), record(0), record(2), record(3)].concat(),
        ),
        (
            "record 1 dropped",
            [record(0), record(2), record(3)].concat(),
        ),
        (
            "record 0 twice",
            [record(0), record(0), record(1), record(2), record(3)].concat(),
        ),
    ];
    for (name, bytes) in cases {
        assert_eq!(
            open(&KEYED, ID, 0, &bytes).err(),
            Some(OpenError::Auth),
            "{name}"
        );
    }
}

#[test]
fn framing_errors() {
    let wire = seal(&NullCipher, ID, b"hello", 5, MAX_RECORD_PLAINTEXT);
    let edit = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut w = wire.clone();
        f(&mut w);
        open(&NullCipher, ID, 0, &w).err()
    };
    let framing = Some(OpenError::Framing);
    assert_eq!(edit(&|w| w[0] = 0x16), framing, "handshake content type");
    assert_eq!(
        edit(&|w| w[1..3].copy_from_slice(&[0x03, 0x01])),
        framing,
        "legacy version"
    );
    assert_eq!(
        edit(&|w| w[3..5].copy_from_slice(&[0x00, 0x10])),
        framing,
        "shorter than a tag"
    );
    assert_eq!(
        edit(&|w| w.truncate(w.len() - 1)),
        framing,
        "record cut short"
    );
    assert_eq!(
        edit(&|w| w.extend([0x17, 0x03, 0x03, 0x00])),
        framing,
        "partial header"
    );
    let over = (MAX_RECORD_CIPHERTEXT as u16 + 1).to_be_bytes();
    let mut big = vec![0x17, 0x03, 0x03, over[0], over[1]];
    big.resize(5 + MAX_RECORD_CIPHERTEXT + 1, 0);
    assert_eq!(
        open(&NullCipher, ID, 0, &big).err(),
        framing,
        "above 2^14 + 256"
    );
}

#[test]
fn an_empty_segment_opens_to_nothing() {
    // The wire layer never delivers an empty segment (segment length 0 is
    // refused); the record layer simply opens zero records.
    let (opened, out) = open(&KEYED, ID, 0, &[]).expect("nothing to refuse");
    assert_eq!(
        opened,
        OpenedSegment {
            records: 0,
            padded_len: 0
        }
    );
    assert!(out.is_empty());
}

#[test]
fn wrong_inner_content_type_is_refused() {
    let mut wire = seal(&NullCipher, ID, b"abc", 3, MAX_RECORD_PLAINTEXT);
    wire[8] = 0x16; // handshake instead of application data
    assert_eq!(
        open(&NullCipher, ID, 0, &wire).err(),
        Some(OpenError::ContentType)
    );
    wire[8] = 0x00; // now "abc" itself ends in 'c': content type 0x63
    assert_eq!(
        open(&NullCipher, ID, 0, &wire).err(),
        Some(OpenError::ContentType)
    );
}

/// RFC 8446 §5.4: "the full encoded TLSInnerPlaintext MUST NOT exceed
/// 2^14 + 1 octets", even though the ciphertext bound (2^14 + 256) would
/// leave room for more: an authenticated record with 16623 bytes of data
/// and padding is refused.
#[test]
fn oversized_inner_plaintext_is_rejected() {
    let len = MAX_RECORD_CIPHERTEXT; // inner plaintext 16640 - 16 = 16624 > 16385
    let mut record = record_header(len as u16).to_vec();
    record.resize(RECORD_HEADER_LEN + len - TAG_LEN - 1, 0x61); // 16623 data bytes
    record.push(0x17); // the content type ends the inner plaintext
    record.extend([0; TAG_LEN]); // the NullCipher's tag
    assert_eq!(record.len(), RECORD_HEADER_LEN + len);
    let got = open(&NullCipher, ID, 0, &record);
    assert_eq!(got.map(|(o, _)| o.padded_len), Err(OpenError::Overflow));
}

// ---------------------------------------------------------------------------
// The composite sequence number
// ---------------------------------------------------------------------------

#[test]
fn seq_composes_id_and_index() {
    let l = SeqLayout::DEFAULT;
    assert_eq!((l.id_bits(), l.index_bits()), (48, 16));
    assert_eq!(l.seq(ID, 0), Some(0x1122_3344_5566_0000));
    assert_eq!(l.seq(ID, 0xbeef), Some(0x1122_3344_5566_beef));
    let l = SeqLayout::new(24).expect("valid split");
    assert_eq!(l.seq(0x12_3456, 0x78_9abc), Some(0x0000_1234_5678_9abc));
    let l = SeqLayout::new(8).expect("valid split");
    assert_eq!(
        l.seq(0x00aa_bbcc_ddee_ff11, 0x22),
        Some(0xaabb_ccdd_eeff_1122)
    );
}

#[test]
fn seq_index_never_spills_into_id_bits() {
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    for bits in 1..=62u8 {
        let l = SeqLayout::new(bits).expect("valid split");
        assert_eq!(l.id_bits() + l.index_bits(), 64);
        let (ids, records) = (l.id_limit(), l.max_records());
        assert_eq!(l.seq(ids - 1, records - 1), Some(u64::MAX));
        assert_eq!(l.seq(0, 0), Some(0));
        assert_eq!(
            l.seq(1, 0),
            Some(records),
            "the first ID bit sits right above the index"
        );
        assert_eq!(
            l.seq(0, records),
            None,
            "index {records} needs {bits} + 1 bits"
        );
        assert_eq!(l.seq(ids - 1, records), None);
        assert_eq!(l.seq(ids, 0), None);
        assert_eq!(l.seq(u64::MAX, u64::MAX), None);
        for _ in 0..1000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (id, index) = (x % ids, x.rotate_left(17) % records);
            let seq = l.seq(id, index).expect("in range");
            assert_eq!(
                (seq >> bits, seq & (records - 1)),
                (id, index),
                "{bits} index bits"
            );
        }
    }
    assert!(SeqLayout::new(0).is_none());
    assert!(SeqLayout::new(63).is_none());
    assert!(SeqLayout::new(64).is_none());
}

#[test]
fn max_message_size_per_split() {
    // (index bits, message IDs, records, largest message in 16 KiB records)
    let table: [(u8, u64, u64, u64); 3] = [
        (16, 1 << 48, 1 << 16, 1 << 30), // 1 GiB (seed 001 §4.4.1)
        (24, 1 << 40, 1 << 24, 1 << 38), // 256 GiB, capped to < 4 GiB by the u32 wire length
        (8, 1 << 56, 1 << 8, 1 << 22),   // 4 MiB
    ];
    for (bits, ids, records, max_len) in table {
        let l = SeqLayout::new(bits).expect("valid split");
        assert_eq!((l.id_limit(), l.max_records()), (ids, records));
        assert_eq!(l.max_records() * MAX_RECORD_PLAINTEXT as u64, max_len);
    }
    // The 32-bit message-wire-length field bounds every split: full records
    // cost 16406 wire bytes each.
    assert_eq!(u64::from(u32::MAX) / 16406, 261_792);
    assert_eq!(261_792 * 16384_u64, 4_289_200_128);
}

#[test]
fn seal_refuses_records_beyond_the_index_space() {
    let l = SeqLayout::new(8).expect("valid split");
    let max = 256 * MAX_RECORD_PLAINTEXT as u64; // 4 MiB
    let fits = MessageLayout::new(max, max, MAX_RECORD_PLAINTEXT);
    assert_eq!(fits.records(), 256);
    let data = vec![0x42; max as usize + 1];
    assert!(seal_message(&NullCipher, l, 7, &data[..max as usize], fits).is_ok());
    let over = MessageLayout::new(max + 1, max + 1, MAX_RECORD_PLAINTEXT);
    assert_eq!(over.records(), 257);
    assert_eq!(
        seal_message(&NullCipher, l, 7, &data, over).err(),
        Some(CryptoError)
    );
    // And the ID must fit its bits.
    let one = MessageLayout::new(1, 1, MAX_RECORD_PLAINTEXT);
    assert_eq!(
        seal_message(&NullCipher, l, 1 << 56, b"x", one).err(),
        Some(CryptoError)
    );
    assert!(seal_message(&NullCipher, l, (1 << 56) - 1, b"x", one).is_ok());
}

#[test]
fn open_refuses_index_overflow() {
    let l = SeqLayout::new(2).expect("valid split"); // four records per message
    let layout = MessageLayout::new(4, 4, 1);
    let sealed = seal_message(&NullCipher, l, 3, b"abcd", layout).expect("exactly four records");
    let open_from = |first: u64, id: u64| {
        let buf = sealed.wire.clone();
        let mut out = b"kept".to_vec();
        let got = open_segment(&NullCipher, l, id, first, &buf, &mut out);
        (got, out)
    };
    assert_eq!(open_from(0, 3).0.map(|o| o.records), Ok(4));
    // The NullCipher does not check seq, so only the index bound can stop
    // record 3 being opened as index 4.
    let (got, out) = open_from(1, 3);
    assert_eq!(got, Err(OpenError::IndexOverflow));
    assert_eq!(out, b"kept", "nothing appended");
    assert_eq!(open_from(4, 3).0, Err(OpenError::IndexOverflow));
    assert_eq!(open_from(u64::MAX, 3).0, Err(OpenError::IndexOverflow));
    assert_eq!(
        open_from(0, 1 << 62).0,
        Err(OpenError::IndexOverflow),
        "ID beyond its bits"
    );
    assert!(open_from(0, u64::MAX).0.is_err());
}

// ---------------------------------------------------------------------------
// Fuzz seed corpus for `fuzz/fuzz_targets/record_open.rs`
// ---------------------------------------------------------------------------

/// Input format of the `record_open` target, byte 0 (selector): bits 0-1
/// pick the split (16, 24, 8 or 2 index bits), bit 2 starts the segment
/// just below the index limit, bit 3 lets the ID exceed its bits. Byte 1:
/// first record index (or distance below the limit). Bytes 2..10: message
/// ID, big-endian. The rest: the segment.
fn record_open_input(selector: u8, first: u8, id: u64, segment: &[u8]) -> Vec<u8> {
    let mut input = vec![selector, first];
    input.extend(id.to_be_bytes());
    input.extend_from_slice(segment);
    input
}

fn record_open_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let null = |data: &[u8], padded: u64, rs: usize| seal(&NullCipher, ID, data, padded, rs);
    let two_bits = SeqLayout::new(2).expect("valid split");
    let four = seal_message(
        &NullCipher,
        two_bits,
        3,
        b"abcd",
        MessageLayout::new(4, 4, 1),
    )
    .expect("fits")
    .wire;
    vec![
        (
            "seed-abc",
            record_open_input(0, 0, ID, &null(b"abc", 3, 16384)),
        ),
        (
            "seed-empty",
            record_open_input(0, 0, ID, &null(b"", 0, 16384)),
        ),
        (
            "seed-four-records",
            record_open_input(0, 0, ID, &null(&message(100), 100, 32)),
        ),
        (
            "seed-padded",
            record_open_input(1, 0, ID, &null(b"0123456789", 100, 64)),
        ),
        ("seed-index-overflow", record_open_input(3, 1, 3, &four)),
    ]
}

fn corpus_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/record_open")
}

/// Regenerates the seed files (see `seed_corpus_is_current`).
fn write_seed_corpus() {
    let dir = corpus_dir();
    std::fs::create_dir_all(&dir).expect("create corpus dir");
    for (name, bytes) in record_open_seeds() {
        std::fs::write(dir.join(name), bytes).expect("write seed");
    }
}

/// Set SMT_UPDATE_SNAPSHOTS=1 to regenerate the committed seeds.
#[test]
fn seed_corpus_is_current() {
    if std::env::var_os("SMT_UPDATE_SNAPSHOTS").is_some() {
        write_seed_corpus();
    }
    let dir = corpus_dir();
    if !dir.exists() {
        return; // A checkout without the fuzz crate.
    }
    for (name, bytes) in record_open_seeds() {
        let on_disk = std::fs::read(dir.join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}; rerun with SMT_UPDATE_SNAPSHOTS=1"));
        assert_eq!(
            on_disk, bytes,
            "{name} is stale; rerun with SMT_UPDATE_SNAPSHOTS=1"
        );
    }
}
