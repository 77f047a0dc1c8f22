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

/// Opens every record of `segment`, appending the application data to
/// `out`. `first_record` is the index the first record must have. On
/// error, nothing is appended and the segment must be discarded.
pub fn open_segment(
    cipher: &dyn PacketCipher,
    seq_layout: SeqLayout,
    id: u64,
    first_record: u64,
    segment: &[u8],
    out: &mut Vec<u8>,
) -> Result<OpenedSegment, OpenError> {
    let start = out.len();
    out.resize(start + segment.len(), 0);
    let result = open_segment_into(
        cipher,
        seq_layout,
        id,
        first_record,
        segment,
        &mut out[start..],
    );
    match result {
        Ok((opened, written)) => {
            out.truncate(start + written);
            Ok(opened)
        }
        Err(e) => {
            out.truncate(start);
            Err(e)
        }
    }
}

/// Opens every record of `segment` straight into `out` (at least
/// `segment.len()` bytes: a segment's plaintext is shorter than it, and
/// the rest is scratch space), the application data of each record right
/// after the last's: one pass that reads ciphertext and writes plaintext,
/// with no copy before or after. Returns what was opened and how many
/// bytes of `out` now hold data. `first_record` is the index the first
/// record must have. On error `out` holds nothing useful and the segment
/// must be discarded.
pub fn open_segment_into(
    cipher: &dyn PacketCipher,
    seq_layout: SeqLayout,
    id: u64,
    first_record: u64,
    segment: &[u8],
    out: &mut [u8],
) -> Result<(OpenedSegment, usize), OpenError> {
    if out.len() < segment.len() {
        return Err(OpenError::Framing);
    }
    let mut opened = OpenedSegment {
        records: 0,
        padded_len: 0,
    };
    let (mut read, mut written) = (0, 0);
    while read < segment.len() {
        let (header, body) = record_at(&segment[read..])?;
        let seq = seq_layout
            .seq(id, first_record + opened.records)
            .ok_or(OpenError::IndexOverflow)?;
        let inner_len = cipher
            .open_to(seq, &header, body, &mut out[written..])
            .map_err(|_| OpenError::Auth)?;
        // RFC 8446 §5.4: TLSInnerPlaintext is at most 2^14 + 1 bytes.
        if inner_len > MAX_RECORD_PLAINTEXT + 1 {
            return Err(OpenError::Overflow);
        }
        // The content type and padding after the data are overwritten by
        // the next record's data.
        written += strip_padding(&out[written..written + inner_len])?.len();
        read += RECORD_HEADER_LEN + body.len();
        opened.records += 1;
        opened.padded_len += inner_len as u64 - 1;
    }
    Ok((opened, written))
}

/// Opens a segment's records where they lie: on success `buf` holds the
/// plaintext (each record's header, tag, content type and padding removed,
/// the data moved down over them); on error `buf` is left cleared. Saves
/// the copy into a second buffer when the segment buffer becomes the
/// message (a one-packet message, opened straight from its payload). Each
/// record is opened by one [`PacketCipher::open_within`] call, which
/// decrypts it down over its own header (and any earlier record's
/// leftovers) in the same pass: no move of the data afterwards.
pub fn open_segment_in_place(
    cipher: &dyn PacketCipher,
    seq_layout: SeqLayout,
    id: u64,
    first_record: u64,
    buf: &mut Vec<u8>,
) -> Result<OpenedSegment, OpenError> {
    let open = |seq, header: &[u8; RECORD_HEADER_LEN], region: &mut [u8], from| {
        cipher
            .open_within(seq, header, region, from)
            .map_err(|_| OpenError::Auth)
    };
    in_place(open, seq_layout, id, first_record, buf)
}

/// [`open_segment_in_place`] for a segment a NIC has decrypted and
/// authenticated whole (receive offload): the records are checked and
/// their data moved down as if they had been opened, without the AEAD.
pub(crate) fn open_decrypted_in_place(
    seq_layout: SeqLayout,
    id: u64,
    first_record: u64,
    buf: &mut Vec<u8>,
) -> Result<OpenedSegment, OpenError> {
    let taken = |_, _: &[u8; RECORD_HEADER_LEN], region: &mut [u8], from: usize| {
        let inner_len = region.len() - from - TAG_LEN;
        region.copy_within(from..from + inner_len, 0);
        Ok(inner_len)
    };
    in_place(taken, seq_layout, id, first_record, buf)
}

/// The records of `buf` opened by `open`, each one's data right after
/// the last's, from the start of `buf`. `open` is given a record's
/// sequence number, its header and `region` (from where its plaintext goes
/// to the record's end), with the body (ciphertext, tag) at
/// `region[from..]`; it leaves the inner plaintext at the start of
/// `region` and returns its length.
fn in_place(
    open: impl Fn(u64, &[u8; RECORD_HEADER_LEN], &mut [u8], usize) -> Result<usize, OpenError>,
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
        let index = first_record + opened.records;
        let (end, data_len, inner_len) =
            match open_one(&open, seq_layout, id, index, buf, read, write) {
                Ok(r) => r,
                Err(e) => {
                    buf.clear();
                    return Err(e);
                }
            };
        write += data_len;
        read = end;
        opened.records += 1;
        opened.padded_len += inner_len as u64 - 1;
    }
    buf.truncate(write);
    Ok(opened)
}

/// Opens the record at `buf[read..]` with `open`, its plaintext written
/// from `write` (never past `read`: only bytes already consumed are
/// overwritten): (where the record ends, its data length, its inner
/// plaintext length).
fn open_one(
    open: &impl Fn(u64, &[u8; RECORD_HEADER_LEN], &mut [u8], usize) -> Result<usize, OpenError>,
    seq_layout: SeqLayout,
    id: u64,
    index: u64,
    buf: &mut [u8],
    read: usize,
    write: usize,
) -> Result<(usize, usize, usize), OpenError> {
    let (header, body) = record_at(&buf[read..])?;
    let end = read + RECORD_HEADER_LEN + body.len();
    let seq = seq_layout.seq(id, index).ok_or(OpenError::IndexOverflow)?;
    let region = &mut buf[write..end];
    let inner_len = open(seq, &header, region, read + RECORD_HEADER_LEN - write)?;
    if inner_len > MAX_RECORD_PLAINTEXT + 1 {
        return Err(OpenError::Overflow);
    }
    let data_len = strip_padding(&region[..inner_len])?.len();
    Ok((end, data_len, inner_len))
}

/// Which packets of a segment arrived decrypted by the NIC: `have[i]` is
/// 2 for packet `i` (1 for one that arrived as it was sent), every packet
/// but the last `mss` bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PacketMarks<'a> {
    pub have: &'a [u8],
    pub mss: usize,
}

/// Records a NIC decrypted: whole (all their bytes came decrypted and the
/// NIC checked the tag: opened without the AEAD) or partly (finished in
/// software).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct OffloadTally {
    pub whole: u64,
    pub partial: u64,
}

impl OffloadTally {
    pub(crate) fn add(&mut self, other: OffloadTally) {
        self.whole += other.whole;
        self.partial += other.partial;
    }

    /// Adds these records to the endpoint's and the peer's counters.
    pub(crate) fn count(self, endpoint: &mut crate::Stats, peer: Option<&mut crate::Stats>) {
        for stats in std::iter::once(endpoint).chain(peer) {
            stats.records_offloaded += self.whole;
            stats.records_partially_offloaded += self.partial;
        }
    }
}

/// How much of a byte range arrived decrypted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Coverage {
    None,
    Some,
    All,
}

impl PacketMarks<'_> {
    /// The packets indices overlapping `range` (non-empty).
    fn packets(&self, range: &std::ops::Range<usize>) -> std::ops::RangeInclusive<usize> {
        range.start / self.mss..=(range.end - 1) / self.mss
    }

    fn coverage(&self, range: &std::ops::Range<usize>) -> Coverage {
        let (mut yes, mut no) = (false, false);
        for i in self.packets(range) {
            match self.have.get(i) {
                Some(2) => yes = true,
                _ => no = true,
            }
        }
        match (yes, no) {
            (true, false) => Coverage::All,
            (true, true) => Coverage::Some,
            _ => Coverage::None,
        }
    }
}

/// [`open_segment_into`] for a segment some of whose packets the NIC
/// decrypted (the kTLS offload paper's receive offload). Record by record:
///
/// - every byte of it (body and tag) in decrypted packets: the NIC
///   authenticated it; its plaintext is taken as is;
/// - none: opened as always;
/// - some (a packet lost, reordered or refused in the NIC): the decrypted
///   bytes are turned back into ciphertext with the record's keystream
///   ([`PacketCipher::apply_keystream`]), in `segment` itself, and the
///   record is opened in software (the kTLS offload paper's partial decryption), so
///   nothing is taken on the NIC's word that its tag did not cover.
///
/// Each record has the sequence number the receiver expects, as always.
pub(crate) fn open_marked_into(
    cipher: &dyn PacketCipher,
    seq_layout: SeqLayout,
    id: u64,
    first_record: u64,
    segment: &mut [u8],
    marks: PacketMarks<'_>,
    out: &mut [u8],
) -> Result<(OpenedSegment, usize, OffloadTally), OpenError> {
    if out.len() < segment.len() || marks.mss == 0 {
        return Err(OpenError::Framing);
    }
    let mut opened = OpenedSegment {
        records: 0,
        padded_len: 0,
    };
    let mut tally = OffloadTally::default();
    let (mut read, mut written) = (0, 0);
    while read < segment.len() {
        let seq = seq_layout
            .seq(id, first_record + opened.records)
            .ok_or(OpenError::IndexOverflow)?;
        let record = open_marked_record(cipher, seq, read, segment, marks, &mut out[written..])?;
        written += strip_padding(&out[written..written + record.inner_len])?.len();
        read = record.end;
        opened.records += 1;
        opened.padded_len += record.inner_len as u64 - 1;
        tally.add(record.tally);
    }
    Ok((opened, written, tally))
}

/// One record of a marked segment, opened into the start of `out`.
struct MarkedRecord {
    /// Where the record ends in the segment.
    end: usize,
    /// Its inner plaintext's length (data, content type, padding).
    inner_len: usize,
    /// Whether the NIC decrypted it, whole or in part.
    tally: OffloadTally,
}

/// Opens the record at `segment[read..]` (sequence number `seq`) into
/// `out`, as [`open_marked_into`] says: taken as the NIC decrypted it if
/// every byte came decrypted, else opened in software (after turning a
/// partly decrypted body back into ciphertext).
fn open_marked_record(
    cipher: &dyn PacketCipher,
    seq: u64,
    read: usize,
    segment: &mut [u8],
    marks: PacketMarks<'_>,
    out: &mut [u8],
) -> Result<MarkedRecord, OpenError> {
    let (header, body) = record_at(&segment[read..])?;
    let body = read + RECORD_HEADER_LEN..read + RECORD_HEADER_LEN + body.len();
    let text = body.start..body.end - TAG_LEN;
    let mut tally = OffloadTally::default();
    let inner_len = match marks.coverage(&body) {
        Coverage::All => {
            tally.whole += 1;
            out[..text.len()].copy_from_slice(&segment[text.clone()]);
            text.len()
        }
        coverage => {
            if coverage == Coverage::Some {
                tally.partial += 1;
                encrypt_again(cipher, seq, &text, marks, segment)?;
            }
            cipher
                .open_to(seq, &header, &segment[body.clone()], out)
                .map_err(|_| OpenError::Auth)?
        }
    };
    if inner_len > MAX_RECORD_PLAINTEXT + 1 {
        return Err(OpenError::Overflow);
    }
    Ok(MarkedRecord {
        end: body.end,
        inner_len,
        tally,
    })
}

/// Turns the decrypted packets' share of a record's inner plaintext
/// (`text`, a range of `segment`) back into ciphertext.
fn encrypt_again(
    cipher: &dyn PacketCipher,
    seq: u64,
    text: &std::ops::Range<usize>,
    marks: PacketMarks<'_>,
    segment: &mut [u8],
) -> Result<(), OpenError> {
    if text.is_empty() {
        return Ok(());
    }
    for i in marks.packets(text) {
        if marks.have.get(i) != Some(&2) {
            continue;
        }
        let from = (i * marks.mss).max(text.start);
        let to = ((i + 1) * marks.mss).min(text.end);
        cipher
            .apply_keystream(seq, from - text.start, &mut segment[from..to])
            .map_err(|_| OpenError::Auth)?;
    }
    Ok(())
}

/// Checks the record header at the start of `buf` and that the whole
/// record is present; returns the header and the record's body
/// (ciphertext and tag).
fn record_at(buf: &[u8]) -> Result<([u8; RECORD_HEADER_LEN], &[u8]), OpenError> {
    let h = buf.get(..RECORD_HEADER_LEN).ok_or(OpenError::Framing)?;
    let header = [h[0], h[1], h[2], h[3], h[4]];
    let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
    let body = &buf[RECORD_HEADER_LEN..];
    let framed = header[0] == CONTENT_APPLICATION_DATA
        && header[1..3] == LEGACY_VERSION
        && (1 + TAG_LEN..=MAX_RECORD_CIPHERTEXT).contains(&len)
        && len <= body.len();
    if framed {
        Ok((header, &body[..len]))
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
        let wire = sealed(&data, 250, 64);
        let mut out = Vec::new();
        let o = open_segment(&NullCipher, SeqLayout::DEFAULT, 6, 0, &wire, &mut out).unwrap();
        assert_eq!(out, data);
        assert_eq!(o.padded_len, 250);
        assert_eq!(o.records, 4);
    }

    #[test]
    fn in_place_open_matches_open_into_a_buffer() {
        for (len, padded, rs) in [(0, 0, 64), (5, 5, 64), (100, 250, 64), (1000, 1000, 300)] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let wire = sealed(&data, padded, rs);
            let (copy, mut out) = (wire.clone(), Vec::new());
            let a = open_segment(&NullCipher, SeqLayout::DEFAULT, 6, 0, &copy, &mut out);
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
        let e = open_segment(&NullCipher, SeqLayout::DEFAULT, 6, 0, &wire, &mut out);
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
            &wire,
            &mut Vec::new(),
        );
        assert_eq!(e, Err(OpenError::ContentType));
    }
}
