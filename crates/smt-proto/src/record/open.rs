//! The receive side: a complete segment is opened record by record, each
//! with the sequence number the receiver *expects* for it.

use super::{
    SeqLayout, CONTENT_APPLICATION_DATA, LEGACY_VERSION, MAX_RECORD_CIPHERTEXT,
    MAX_RECORD_PLAINTEXT,
};
use crate::crypto::{PacketCipher, RECORD_HEADER_LEN, TAG_LEN};

/// Why a segment could not be opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// A record failed authentication: forged, corrupted, replayed into the
    /// wrong message, reordered, or under the wrong key.
    Auth,
    /// Record framing is wrong (header, length, records not tiling the
    /// segment). The header is authenticated as AAD, so a bad header that
    /// still frames correctly fails as [`OpenError::Auth`] instead.
    Framing,
    /// The record index would overflow into the message-ID bits.
    IndexOverflow,
    /// An authenticated record's inner plaintext exceeds 2^14 + 1 bytes
    /// (RFC 8446 §5.4).
    Overflow,
    /// An authenticated record carries a content type other than
    /// application data, or no content type at all.
    ContentType,
}

/// What one opened segment held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenedSegment {
    /// Records opened.
    pub records: u64,
    /// Padded plaintext bytes (data + padding): counts against the
    /// message-length field.
    pub padded_len: u64,
}

/// Opens every record of `segment` in place, appending the application
/// data to `out`. `first_record` is the index the first record must have.
/// On error, nothing is appended and the segment must be discarded.
pub fn open_segment(
    cipher: &dyn PacketCipher,
    seq_layout: SeqLayout,
    id: u64,
    first_record: u64,
    segment: &mut [u8],
    out: &mut Vec<u8>,
) -> Result<OpenedSegment, OpenError> {
    let out_start = out.len();
    let result = open_records(cipher, seq_layout, id, first_record, segment, out);
    if result.is_err() {
        out.truncate(out_start);
    }
    result
}

/// Opens a segment's records where they lie: on success `buf` holds the
/// plaintext (each record's header, tag, content type and padding removed,
/// the data moved down over them); on error `buf` is left cleared. Saves
/// the copy into a second buffer when the segment buffer becomes the
/// message (a one-packet message, opened straight from its payload).
pub fn open_segment_in_place(
    cipher: &dyn PacketCipher,
    seq_layout: SeqLayout,
    id: u64,
    first_record: u64,
    buf: &mut Vec<u8>,
) -> Result<OpenedSegment, OpenError> {
    let mut opened = OpenedSegment {
        records: 0,
        padded_len: 0,
    };
    let (mut read, mut write) = (0, 0);
    while read < buf.len() {
        let result = open_one(
            cipher,
            seq_layout,
            id,
            first_record + opened.records,
            &mut buf[read..],
        );
        let (consumed, data, inner_len) = match result {
            Ok(r) => r,
            Err(e) => {
                buf.clear();
                return Err(e);
            }
        };
        // The data sits after the record header: moving it down to `write`
        // (never past `read`) overwrites only bytes already consumed.
        buf.copy_within(read + data.start..read + data.end, write);
        write += data.len();
        read += consumed;
        opened.records += 1;
        opened.padded_len += inner_len as u64 - 1;
    }
    buf.truncate(write);
    Ok(opened)
}

/// Opens the record at the start of `rest` in place: (bytes the record
/// took, where its data is within `rest`, inner plaintext length).
fn open_one(
    cipher: &dyn PacketCipher,
    seq_layout: SeqLayout,
    id: u64,
    index: u64,
    rest: &mut [u8],
) -> Result<(usize, std::ops::Range<usize>, usize), OpenError> {
    let (header, after) = split_record(rest)?;
    let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
    let body = &mut after[..len];
    let seq = seq_layout.seq(id, index).ok_or(OpenError::IndexOverflow)?;
    let inner_len = cipher
        .open_in_place(seq, &header, body)
        .map_err(|_| OpenError::Auth)?;
    if inner_len > MAX_RECORD_PLAINTEXT + 1 {
        return Err(OpenError::Overflow);
    }
    let data_len = strip_padding(&body[..inner_len])?.len();
    let start = RECORD_HEADER_LEN;
    Ok((RECORD_HEADER_LEN + len, start..start + data_len, inner_len))
}

fn open_records(
    cipher: &dyn PacketCipher,
    seq_layout: SeqLayout,
    id: u64,
    first_record: u64,
    segment: &mut [u8],
    out: &mut Vec<u8>,
) -> Result<OpenedSegment, OpenError> {
    let mut opened = OpenedSegment {
        records: 0,
        padded_len: 0,
    };
    let mut rest = segment;
    while !rest.is_empty() {
        let (header, after) = split_record(rest)?;
        let (body, next) =
            after.split_at_mut(usize::from(u16::from_be_bytes([header[3], header[4]])));
        let seq = seq_layout
            .seq(id, first_record + opened.records)
            .ok_or(OpenError::IndexOverflow)?;
        let inner_len = cipher
            .open_in_place(seq, &header, body)
            .map_err(|_| OpenError::Auth)?;
        // RFC 8446 §5.4: TLSInnerPlaintext is at most 2^14 + 1 bytes.
        if inner_len > MAX_RECORD_PLAINTEXT + 1 {
            return Err(OpenError::Overflow);
        }
        let data = strip_padding(&body[..inner_len])?;
        out.extend_from_slice(data);
        opened.records += 1;
        opened.padded_len += inner_len as u64 - 1;
        rest = next;
    }
    Ok(opened)
}

/// Checks the record header at the start of `buf` and that the whole record
/// is present; returns the header and everything after it.
fn split_record(buf: &mut [u8]) -> Result<([u8; RECORD_HEADER_LEN], &mut [u8]), OpenError> {
    if buf.len() < RECORD_HEADER_LEN {
        return Err(OpenError::Framing);
    }
    let (h, after) = buf.split_at_mut(RECORD_HEADER_LEN);
    let header = [h[0], h[1], h[2], h[3], h[4]];
    let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
    let framed = header[0] == CONTENT_APPLICATION_DATA
        && header[1..3] == LEGACY_VERSION
        && (1 + TAG_LEN..=MAX_RECORD_CIPHERTEXT).contains(&len)
        && len <= after.len();
    if framed {
        Ok((header, after))
    } else {
        Err(OpenError::Framing)
    }
}

/// Strips `TLSInnerPlaintext` padding: the last non-zero byte is the content
/// type, which must be application data.
fn strip_padding(inner: &[u8]) -> Result<&[u8], OpenError> {
    let ct_at = inner
        .iter()
        .rposition(|&b| b != 0)
        .ok_or(OpenError::ContentType)?;
    if inner[ct_at] != CONTENT_APPLICATION_DATA {
        return Err(OpenError::ContentType);
    }
    Ok(&inner[..ct_at])
}

#[cfg(test)]
mod tests {
    use super::super::{seal_message, MessageLayout};
    use super::*;
    use crate::crypto::NullCipher;

    fn sealed(data: &[u8], padded: u64, rs: usize) -> Vec<u8> {
        let layout = MessageLayout::new(data.len() as u64, padded, rs);
        seal_message(&NullCipher, SeqLayout::DEFAULT, 6, data, layout)
            .unwrap()
            .wire
    }

    #[test]
    fn round_trip_strips_padding() {
        let data: Vec<u8> = (0..100u8).collect();
        let mut wire = sealed(&data, 250, 64);
        let mut out = Vec::new();
        let o = open_segment(&NullCipher, SeqLayout::DEFAULT, 6, 0, &mut wire, &mut out).unwrap();
        assert_eq!(out, data);
        assert_eq!(o.padded_len, 250);
        assert_eq!(o.records, 4);
    }

    #[test]
    fn in_place_open_matches_open_into_a_buffer() {
        for (len, padded, rs) in [(0, 0, 64), (5, 5, 64), (100, 250, 64), (1000, 1000, 300)] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let wire = sealed(&data, padded, rs);
            let (mut copy, mut out) = (wire.clone(), Vec::new());
            let a = open_segment(&NullCipher, SeqLayout::DEFAULT, 6, 0, &mut copy, &mut out);
            let mut in_place = wire.clone();
            let b = open_segment_in_place(&NullCipher, SeqLayout::DEFAULT, 6, 0, &mut in_place);
            assert_eq!(a, b);
            assert_eq!(in_place, out);
            assert_eq!(in_place, data);
        }
        let mut cut = sealed(b"hello", 5, 64);
        cut.pop();
        let e = open_segment_in_place(&NullCipher, SeqLayout::DEFAULT, 6, 0, &mut cut);
        assert_eq!(e, Err(OpenError::Framing));
        assert!(cut.is_empty(), "cleared on error");
    }

    #[test]
    fn truncated_segment_is_a_framing_error() {
        let mut wire = sealed(b"hello", 5, 64);
        wire.pop();
        let mut out = vec![1];
        let e = open_segment(&NullCipher, SeqLayout::DEFAULT, 6, 0, &mut wire, &mut out);
        assert_eq!(e, Err(OpenError::Framing));
        assert_eq!(out, [1], "nothing appended on error");
    }

    #[test]
    fn all_zero_inner_plaintext_has_no_content_type() {
        let mut wire = sealed(b"x", 1, 64);
        wire[5] = 0;
        wire[6] = 0;
        let e = open_segment(
            &NullCipher,
            SeqLayout::DEFAULT,
            6,
            0,
            &mut wire,
            &mut Vec::new(),
        );
        assert_eq!(e, Err(OpenError::ContentType));
    }
}
