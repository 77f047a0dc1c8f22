//! One message's reassembly and decryption, as a receiver would do it: DATA
//! payloads placed by wire offset, records opened strictly in order with
//! the sequence number the receiver expects (`docs/protocol.md` §§ 6–8),
//! through smt-proto's record module.

use std::collections::BTreeMap;

use serde::Serialize;
use smt_crypto::AesGcmCipher;
use smt_proto::crypto::RECORD_HEADER_LEN;
use smt_proto::record::{open_segment, OpenError, SeqLayout};

/// What became of one record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RecordReport {
    /// The record's index in its message (the low 16 bits of its sequence number).
    pub index: u64,
    /// Where the record starts in the message's wire bytes.
    pub wire_offset: u64,
    /// Bytes of the record on the wire (header, ciphertext, tag).
    pub wire_len: usize,
    /// The frame whose packet completed it.
    pub frame: u64,
    /// `ok`, `auth_failed`, `out_of_place`, `framing`, `content_type`,
    /// `index_overflow` or `overflow` (`docs/protocol.md` § 6).
    pub status: &'static str,
    /// Application data bytes (when it opened).
    pub data_len: usize,
    /// Padding bytes (when it opened).
    pub padding: usize,
    /// Where a record that failed here does open, if it opens elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub belongs_to: Option<String>,
}

/// The header fields every packet of a message repeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lengths {
    pub message_len: u32,
    pub wire_len: u32,
}

/// A message being reassembled.
#[derive(Debug)]
pub(crate) struct Message {
    pub id: u64,
    pub phase: bool,
    pub lengths: Lengths,
    pub first_frame: u64,
    pub last_frame: u64,
    pub epoch: Option<usize>,
    pub packets: u64,
    pub retransmissions: u64,
    pub duplicates: u64,
    /// Received payloads by wire offset.
    pieces: BTreeMap<u64, Vec<u8>>,
    /// Segments by offset: their length.
    segments: BTreeMap<u64, u64>,
    pub opened_to: u64,
    pub records: Vec<RecordReport>,
    pub records_opened: u64,
    pub padded_len: u64,
    pub plaintext: Vec<u8>,
    pub complete_at: Option<u64>,
    pub problems: Vec<String>,
}

/// What a DATA packet did to its message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Placed {
    New,
    /// The same bytes were held already.
    Duplicate,
    /// Other bytes were held at this offset; the first copy is kept.
    Conflict,
    /// Its lengths disagree with the message's; dropped (or, when nothing
    /// had opened yet, the message started over with it).
    Disagrees {
        restarted: bool,
    },
}

/// A record ready to be opened.
pub(crate) struct Ready {
    pub index: u64,
    pub wire_offset: u64,
    pub bytes: Vec<u8>,
}

impl Message {
    pub(crate) fn new(id: u64, phase: bool, lengths: Lengths, frame: u64) -> Self {
        Self {
            id,
            phase,
            lengths,
            first_frame: frame,
            last_frame: frame,
            epoch: None,
            packets: 0,
            retransmissions: 0,
            duplicates: 0,
            pieces: BTreeMap::new(),
            segments: BTreeMap::new(),
            opened_to: 0,
            records: Vec::new(),
            records_opened: 0,
            padded_len: 0,
            plaintext: Vec::new(),
            complete_at: None,
            problems: Vec::new(),
        }
    }

    /// Places one DATA payload.
    pub(crate) fn place(
        &mut self,
        frame: u64,
        lengths: Lengths,
        segment: (u64, u64),
        wire_offset: u64,
        payload: &[u8],
        retransmit: bool,
    ) -> Placed {
        self.packets += 1;
        self.last_frame = frame;
        self.retransmissions += u64::from(retransmit);
        let known_segment = self.segments.get(&segment.0);
        if lengths != self.lengths || known_segment.is_some_and(|&len| len != segment.1) {
            if self.records_opened > 0 {
                return Placed::Disagrees { restarted: false };
            }
            *self = Self::new(self.id, self.phase, lengths, frame);
            self.packets = 1;
            self.place_piece(segment, wire_offset, payload);
            return Placed::Disagrees { restarted: true };
        }
        match self.pieces.get(&wire_offset) {
            Some(held) if held.as_slice() == payload => {
                self.duplicates += 1;
                Placed::Duplicate
            }
            Some(_) => Placed::Conflict,
            None => {
                self.place_piece(segment, wire_offset, payload);
                Placed::New
            }
        }
    }

    fn place_piece(&mut self, segment: (u64, u64), wire_offset: u64, payload: &[u8]) {
        self.segments.insert(segment.0, segment.1);
        self.pieces.insert(wire_offset, payload.to_vec());
    }

    /// Whether every record has opened.
    pub(crate) fn is_complete(&self) -> bool {
        self.complete_at.is_some()
    }

    /// The next record, if all its bytes are here.
    pub(crate) fn next_record(&self) -> Option<Ready> {
        if self.opened_to >= u64::from(self.lengths.wire_len) {
            return None;
        }
        let header = self.gather(self.opened_to, RECORD_HEADER_LEN)?;
        let len = RECORD_HEADER_LEN + usize::from(u16::from_be_bytes([header[3], header[4]]));
        // Bounded by the segment: a record never crosses one, and the
        // receiver refuses one that claims to (framing).
        let len = len.min(self.segment_rest(self.opened_to).max(RECORD_HEADER_LEN));
        Some(Ready {
            index: self.records_opened,
            wire_offset: self.opened_to,
            bytes: self.gather(self.opened_to, len)?,
        })
    }

    /// Bytes from `at` to the end of the segment holding it.
    fn segment_rest(&self, at: u64) -> usize {
        match self.segments.range(..=at).next_back() {
            Some((&start, &len)) if at < start + len => (start + len - at) as usize,
            _ => usize::MAX,
        }
    }

    /// `len` contiguous wire bytes from `at`, if they all arrived.
    fn gather(&self, at: u64, len: usize) -> Option<Vec<u8>> {
        let end = at + len as u64;
        let mut out = Vec::with_capacity(len);
        let mut pos = at;
        let start = self.pieces.range(..=at).next_back().map_or(at, |(&o, _)| o);
        for (&offset, piece) in self.pieces.range(start..end) {
            if offset > pos {
                return None;
            }
            let skip = (pos - offset) as usize;
            let take = piece.get(skip..)?;
            let take = &take[..take.len().min((end - pos) as usize)];
            out.extend_from_slice(take);
            pos += take.len() as u64;
            if pos >= end {
                return Some(out);
            }
        }
        None
    }

    /// Opens `ready` with `cipher` (the receiver's expected sequence
    /// number); on success appends its data and moves on.
    pub(crate) fn open(
        &mut self,
        cipher: &AesGcmCipher,
        layout: SeqLayout,
        ready: &Ready,
        frame: u64,
    ) -> Result<(), OpenError> {
        let record = ready.bytes.clone();
        let mut data = Vec::new();
        let opened = open_segment(cipher, layout, self.id, ready.index, &record, &mut data)?;
        self.records.push(RecordReport {
            index: ready.index,
            wire_offset: ready.wire_offset,
            wire_len: ready.bytes.len(),
            frame,
            status: "ok",
            data_len: data.len(),
            padding: (opened.padded_len as usize).saturating_sub(data.len()),
            belongs_to: None,
        });
        self.plaintext.extend_from_slice(&data);
        self.records_opened += 1;
        self.padded_len += opened.padded_len;
        self.opened_to += ready.bytes.len() as u64;
        if self.opened_to >= u64::from(self.lengths.wire_len) {
            self.finish(frame);
        }
        Ok(())
    }

    fn finish(&mut self, frame: u64) {
        self.complete_at = Some(frame);
        if self.padded_len != u64::from(self.lengths.message_len) {
            self.problems.push(format!(
                "protocol violation: the records carry {} padded bytes, the header says {}",
                self.padded_len, self.lengths.message_len
            ));
        }
    }

    /// Records a failure of `ready` and forgets its bytes (as a receiver
    /// drops the segment), so a retransmitted copy can take their place.
    pub(crate) fn fail(
        &mut self,
        ready: &Ready,
        frame: u64,
        e: OpenError,
        belongs_to: Option<String>,
    ) {
        let status = match (e, &belongs_to) {
            (OpenError::Auth, Some(_)) => "out_of_place",
            (OpenError::Auth, None) => "auth_failed",
            (OpenError::Framing, _) => "framing",
            (OpenError::ContentType, _) => "content_type",
            (OpenError::IndexOverflow, _) => "index_overflow",
            (OpenError::Overflow, _) => "overflow",
        };
        self.records.push(RecordReport {
            index: ready.index,
            wire_offset: ready.wire_offset,
            wire_len: ready.bytes.len(),
            frame,
            status,
            data_len: 0,
            padding: 0,
            belongs_to,
        });
        let end = ready.wire_offset + ready.bytes.len() as u64;
        let first = self
            .pieces
            .range(..=ready.wire_offset)
            .next_back()
            .map_or(ready.wire_offset, |(&o, _)| o);
        let doomed: Vec<u64> = self.pieces.range(first..end).map(|(&o, _)| o).collect();
        for offset in doomed {
            self.pieces.remove(&offset);
        }
    }

    /// The first wire byte not yet here, for an incomplete message.
    pub(crate) fn first_gap(&self) -> u64 {
        let mut pos = self.opened_to;
        for (&offset, piece) in self.pieces.range(..) {
            if offset + piece.len() as u64 <= pos {
                continue;
            }
            if offset > pos {
                break;
            }
            pos = offset + piece.len() as u64;
        }
        pos
    }

    /// Wire bytes held (for messages that cannot be decrypted).
    pub(crate) fn bytes_held(&self) -> u64 {
        self.pieces.values().map(|p| p.len() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg() -> Message {
        Message::new(
            2,
            false,
            Lengths {
                message_len: 10,
                wire_len: 32,
            },
            1,
        )
    }

    #[test]
    fn gathers_across_pieces_and_stops_at_gaps() {
        let mut m = msg();
        let l = m.lengths;
        assert_eq!(m.place(1, l, (0, 32), 0, &[1, 2, 3], false), Placed::New);
        assert_eq!(m.place(2, l, (0, 32), 6, &[7, 8], false), Placed::New);
        assert_eq!(m.gather(0, 3), Some(vec![1, 2, 3]));
        assert_eq!(m.gather(1, 4), None);
        assert_eq!(m.first_gap(), 3);
        assert_eq!(m.place(3, l, (0, 32), 3, &[4, 5, 6], true), Placed::New);
        assert_eq!(m.gather(1, 7), Some(vec![2, 3, 4, 5, 6, 7, 8]));
        assert_eq!(
            m.place(4, l, (0, 32), 3, &[4, 5, 6], true),
            Placed::Duplicate
        );
        assert_eq!(
            m.place(5, l, (0, 32), 3, &[4, 5, 0], false),
            Placed::Conflict
        );
        assert_eq!(m.first_gap(), 8);
    }

    #[test]
    fn disagreeing_lengths_restart_an_unopened_message() {
        let mut m = msg();
        let l = m.lengths;
        m.place(1, l, (0, 32), 0, &[1], false);
        let other = Lengths {
            message_len: 5,
            wire_len: 27,
        };
        assert_eq!(
            m.place(2, other, (0, 27), 0, &[9], false),
            Placed::Disagrees { restarted: true }
        );
        assert_eq!(m.lengths, other);
        assert_eq!(m.gather(0, 1), Some(vec![9]));
    }
}
