//! One flow context: key schedule plus where the NIC believes it is in the
//! record stream, and the transmit state machine that walks segment bytes
//! record by record.
//!
//! The context holds no record sequence number per segment: it encrypts
//! whatever arrives with the state the previous descriptor on it left
//! (the SMT paper Fig. 2, "Out-seq"). Only a resync moves it. Because records
//! may span segments, the state can be "inside record n, k bytes in", with
//! the GCM counter position and GHASH carried over; a resync into the
//! middle of a record rebuilds that state from the record's replayed start.

use crate::crypto_info::CryptoInfo;
use crate::gcm::{GcmStream, RecordCipher, TAG_LEN};
use crate::record::{BadHeader, RecordHeader, HEADER_LEN, MAX_RECORD_LEN};

/// A flow context as the NIC keeps it.
#[derive(Debug)]
pub(crate) struct FlowContext {
    cipher: RecordCipher,
    state: TxState,
}

/// Where in the record stream the next byte of this context falls.
#[derive(Debug)]
enum TxState {
    /// At or inside a record header: `seq` is that record's sequence
    /// number, `have[..len]` the header bytes seen so far.
    Header {
        seq: u64,
        have: [u8; HEADER_LEN],
        len: usize,
    },
    /// Inside a record's body.
    Body(Body),
    /// The engine does not know where the next record starts (a resync
    /// came without the record's start, or the framing was lost). Segments
    /// are dropped until the next resync.
    Unsynced,
}

/// A record whose body is partly through the engine.
#[derive(Debug)]
struct Body {
    seq: u64,
    header: RecordHeader,
    /// Body bytes already passed (ciphertext, then tag).
    done: usize,
    crypt: Crypt,
}

#[derive(Debug)]
enum Crypt {
    /// Still encrypting the plaintext.
    Text(GcmStream),
    /// Plaintext done; the tag being written out.
    Tag([u8; TAG_LEN]),
}

/// Why a segment's bytes could not be encrypted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamError {
    /// The context was unsynchronised before the segment.
    Unsynced,
    /// No record header where one was due; the context is now unsynced.
    BadHeader(BadHeader),
}

/// Why a resync was refused. The context is unsynchronised afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ResyncError {
    /// A mid-record resync without the record's start.
    NoSyncData,
    /// The prefix is not `offset` bytes, too long for a record, not a
    /// record start, or a whole record or more.
    BadPrefix(&'static str),
}

impl FlowContext {
    /// A context ready for the record `info.rec_seq()` at its first byte.
    pub(crate) fn new(info: &CryptoInfo) -> Self {
        Self {
            cipher: RecordCipher::new(info),
            state: record_start(info.rec_seq()),
        }
    }

    /// Encrypts a segment's payload in place, record by record, from the
    /// context's current position. On error nothing of `payload` may be
    /// sent: parts of it are already encrypted, others not.
    pub(crate) fn encrypt(&mut self, payload: &mut [u8]) -> Result<(), StreamError> {
        if matches!(self.state, TxState::Unsynced) {
            return Err(StreamError::Unsynced);
        }
        self.advance(payload).map_err(|bad| {
            self.state = TxState::Unsynced;
            StreamError::BadHeader(bad)
        })
    }

    /// Moves the context to byte `offset` of record `seq`, replaying
    /// `prefix` (the record's first `offset` bytes, as posted) through the
    /// cipher without sending it. `prefix` is scratch afterwards.
    pub(crate) fn resync(
        &mut self,
        seq: u64,
        offset: usize,
        prefix: &mut [u8],
    ) -> Result<(), ResyncError> {
        self.state = TxState::Unsynced;
        check_prefix(offset, prefix)?;
        let mut state = record_start(seq);
        advance(&self.cipher, &mut state, prefix)
            .map_err(|_| ResyncError::BadPrefix("prefix does not start with a record header"))?;
        if !inside_record(&state, seq) && offset != 0 {
            return Err(ResyncError::BadPrefix("prefix covers a whole record"));
        }
        self.state = state;
        Ok(())
    }

    fn advance(&mut self, buf: &mut [u8]) -> Result<(), BadHeader> {
        advance(&self.cipher, &mut self.state, buf)
    }
}

/// The state at the first byte of record `seq`.
fn record_start(seq: u64) -> TxState {
    TxState::Header {
        seq,
        have: [0; HEADER_LEN],
        len: 0,
    }
}

/// Whether `state` is past the start of record `seq` but not past its end.
fn inside_record(state: &TxState, seq: u64) -> bool {
    match state {
        TxState::Header { seq: s, len, .. } => *s == seq && *len > 0,
        TxState::Body(body) => body.seq == seq,
        TxState::Unsynced => false,
    }
}

/// Shape checks on a resync's prefix that need no cipher.
fn check_prefix(offset: usize, prefix: &[u8]) -> Result<(), ResyncError> {
    if offset > 0 && prefix.is_empty() {
        return Err(ResyncError::NoSyncData);
    }
    if prefix.len() != offset {
        return Err(ResyncError::BadPrefix("prefix length differs from offset"));
    }
    if offset >= MAX_RECORD_LEN {
        return Err(ResyncError::BadPrefix("offset past the largest record"));
    }
    Ok(())
}

/// Walks `buf` through the record stream from `state`, encrypting record
/// bodies and writing tags in place.
fn advance(
    cipher: &RecordCipher,
    state: &mut TxState,
    mut buf: &mut [u8],
) -> Result<(), BadHeader> {
    while !buf.is_empty() {
        let used = match state {
            TxState::Header { .. } => header_bytes(cipher, state, buf)?,
            TxState::Body(_) => body_bytes(cipher, state, buf),
            // NOTE: callers check for Unsynced first; a stream that loses
            // its framing returns before reaching this state again.
            TxState::Unsynced => return Ok(()),
        };
        buf = &mut buf[used..];
    }
    Ok(())
}

/// Consumes header bytes; a record that lies whole in `buf` is sealed in
/// one go (the common case: SMT segments hold whole records).
fn header_bytes(
    cipher: &RecordCipher,
    state: &mut TxState,
    buf: &mut [u8],
) -> Result<usize, BadHeader> {
    let TxState::Header { seq, have, len } = state else {
        return Ok(0);
    };
    let seq = *seq;
    if *len == 0 {
        if let Some(used) = whole_record(cipher, seq, buf)? {
            *state = record_start(seq.wrapping_add(1));
            return Ok(used);
        }
    }
    let take = (HEADER_LEN - *len).min(buf.len());
    have[*len..*len + take].copy_from_slice(&buf[..take]);
    *len += take;
    if *len == HEADER_LEN {
        let header = RecordHeader::parse(*have)?;
        let mut stream = cipher.start(seq, header.bytes());
        stream.reserve(header.text_len());
        *state = TxState::Body(Body {
            seq,
            header,
            done: 0,
            crypt: Crypt::Text(stream),
        });
    }
    Ok(take)
}

/// Seals the record at the front of `buf` if all of it is there.
fn whole_record(
    cipher: &RecordCipher,
    seq: u64,
    buf: &mut [u8],
) -> Result<Option<usize>, BadHeader> {
    let Some(head) = buf.first_chunk::<HEADER_LEN>() else {
        return Ok(None);
    };
    let header = RecordHeader::parse(*head)?;
    let end = HEADER_LEN + header.body_len();
    if buf.len() < end {
        return Ok(None);
    }
    cipher.seal_whole(seq, header.bytes(), &mut buf[HEADER_LEN..end]);
    Ok(Some(end))
}

/// Consumes body bytes: encrypts plaintext, then writes the tag.
fn body_bytes(cipher: &RecordCipher, state: &mut TxState, buf: &mut [u8]) -> usize {
    let TxState::Body(body) = state else {
        return 0;
    };
    let n = (body.header.body_len() - body.done).min(buf.len());
    let text_left = body.header.text_len().saturating_sub(body.done);
    let (text, tag) = buf[..n].split_at_mut(text_left.min(n));
    body.encrypt_text(cipher, text);
    body.write_tag(tag);
    if body.done == body.header.body_len() {
        *state = record_start(body.seq.wrapping_add(1));
    }
    n
}

impl Body {
    fn encrypt_text(&mut self, cipher: &RecordCipher, text: &mut [u8]) {
        if let Crypt::Text(stream) = &mut self.crypt {
            stream.encrypt(cipher, text);
        }
        self.done += text.len();
        if self.done < self.header.text_len() {
            return;
        }
        let crypt = std::mem::replace(&mut self.crypt, Crypt::Tag([0; TAG_LEN]));
        self.crypt = match crypt {
            Crypt::Text(stream) => Crypt::Tag(stream.finish(cipher)),
            tag => tag,
        };
    }

    fn write_tag(&mut self, out: &mut [u8]) {
        let Crypt::Tag(tag) = &self.crypt else {
            return;
        };
        let at = self.done - self.header.text_len();
        out.copy_from_slice(&tag[at..at + out.len()]);
        self.done += out.len();
    }
}
