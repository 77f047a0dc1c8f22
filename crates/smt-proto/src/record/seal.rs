//! The send side: a message becomes a buffer of sealed records, segment
//! after segment, kept for retransmission (retransmits never re-encrypt).
//!
//! Records are sealed from the caller's bytes straight into the wire
//! buffer ([`PacketCipher::seal_to`]: one pass that reads plaintext and
//! writes ciphertext; no framing copy first). A small message is sealed
//! whole when it is sent ([`seal_message_into`]); a large one keeps the
//! caller's [`Bytes`] and seals each record just before its first packet
//! leaves ([`frame_message_into`], [`SealedMessage::seal_through`]):
//! sealing a 64 MiB message takes tens to hundreds of milliseconds of CPU,
//! and done in one call it would keep the endpoint from receiving,
//! answering and ticking meanwhile, while its peer counted that time as
//! silence.

use std::sync::Arc;

use bytes::Bytes;

use super::{record_header, MessageLayout, SeqLayout, CONTENT_APPLICATION_DATA};
use super::{RecordPlan, MAX_RECORD_PLAINTEXT};
use crate::crypto::{CryptoError, PacketCipher, RECORD_HEADER_LEN, TAG_LEN};

/// What follows a record's data inside its encryption: the content type,
/// then as many zeros as the record's padding (at most a whole record's
/// worth).
static CONTENT_TYPE_AND_ZEROS: [u8; MAX_RECORD_PLAINTEXT + 1] = {
    let mut tail = [0; MAX_RECORD_PLAINTEXT + 1];
    tail[0] = CONTENT_APPLICATION_DATA;
    tail
};

/// A message in its wire form: records `..sealed_records()` are sealed;
/// the rest (lazy sealing only) are not written yet and must be sealed
/// ([`SealedMessage::seal_through`]) before any of their bytes leave.
#[derive(Debug)]
pub struct SealedMessage {
    /// All segments back to back.
    pub wire: Vec<u8>,
    /// Where the records and segments are.
    pub layout: MessageLayout,
    sealed: u64,
    /// What sealed the records: kept after the last record, so the data
    /// can be had again if the message must be re-sent under another ID
    /// ([`SealedMessage::recover`]).
    sealer: Option<Sealer>,
}

#[derive(Debug)]
struct Sealer {
    cipher: Arc<dyn PacketCipher>,
    seq_layout: SeqLayout,
    id: u64,
    /// The data (lazy sealing), sealed from as packets leave.
    data: Option<Plaintext>,
}

/// A lazily sealed message's data: the caller's own bytes, shared, or a
/// copy of bytes it only lent (in a buffer the endpoint reuses).
#[derive(Debug)]
pub enum Plaintext {
    /// The caller's bytes (a reference count, no copy).
    Shared(Bytes),
    /// A copy the message owns.
    Copied(Vec<u8>),
}

impl std::ops::Deref for Plaintext {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Plaintext::Shared(b) => b,
            Plaintext::Copied(v) => v,
        }
    }
}

impl SealedMessage {
    /// Takes what a finished message holds: its wire form, and its data
    /// if sealed lazily (a copy, or the caller's shared bytes), for reuse
    /// or for the driver to free. By reference: moving the message out of
    /// its RPC to take them was a measurable copy per RPC.
    pub fn take_buffers(&mut self) -> (Vec<u8>, Option<Plaintext>) {
        let data = self.sealer.as_mut().and_then(|s| s.data.take());
        (std::mem::take(&mut self.wire), data)
    }

    /// Records sealed so far (all of them unless sealed lazily).
    pub fn sealed_records(&self) -> u64 {
        self.sealed
    }

    /// Seals every record holding a byte before wire offset `end`, in
    /// order; bounded by the records that range covers (a packet's worth
    /// is at most two records). Records already sealed are left alone.
    #[inline]
    pub fn seal_through(&mut self, end: u64) -> Result<(), CryptoError> {
        // Asked for every packet sent; a message sealed whole (every small
        // one) answers here, in its caller, without a call.
        if self.sealed == self.layout.records() || end == 0 {
            return Ok(());
        }
        self.seal_more(end)
    }

    /// [`Self::seal_through`] once there is something to seal.
    #[inline(never)]
    fn seal_more(&mut self, end: u64) -> Result<(), CryptoError> {
        let layout = self.layout;
        let sealer = self.sealer.as_ref().ok_or(CryptoError)?;
        let data = sealer.data.as_ref().ok_or(CryptoError)?;
        let last = layout.record_at(end - 1);
        while self.sealed <= last {
            let index = self.sealed;
            let seq = sealer.seq_layout.seq(sealer.id, index).ok_or(CryptoError)?;
            let at = layout.record_wire_offset(index) as usize;
            let plan = layout.record(index);
            let record = &mut self.wire[at..at + plan.wire_len() as usize];
            seal_record(&*sealer.cipher, seq, chunk(data, &plan), &plan, record)?;
            self.sealed += 1;
        }
        Ok(())
    }

    /// The message's data again, for a request the server lost, which goes
    /// again under a new ID: the caller's bytes if they were shared (lazy
    /// sealing), else `None` with the data appended to `out` (copied from
    /// the message's own copy, or opened from the sealed records of a small
    /// message: keeping every request's plaintext for this rare case would
    /// cost a copy of every request). Fails for a message sealed without
    /// its key kept ([`seal_message`]); a record always opens (we sealed
    /// it).
    pub fn recover(&self, out: &mut Vec<u8>) -> Result<Option<Bytes>, CryptoError> {
        let sealer = self.sealer.as_ref().ok_or(CryptoError)?;
        match &sealer.data {
            Some(Plaintext::Shared(data)) => return Ok(Some(data.clone())),
            Some(Plaintext::Copied(data)) => {
                out.extend_from_slice(data);
                return Ok(None);
            }
            None => {}
        }
        for index in 0..self.layout.records() {
            let at = self.layout.record_wire_offset(index) as usize;
            let plan = self.layout.record(index);
            let record = &self.wire[at..at + plan.wire_len() as usize];
            let (header, body) = record.split_at(RECORD_HEADER_LEN);
            let header: &[u8; RECORD_HEADER_LEN] = header.try_into().map_err(|_| CryptoError)?;
            let seq = sealer.seq_layout.seq(sealer.id, index).ok_or(CryptoError)?;
            let start = out.len();
            out.resize(start + body.len(), 0);
            sealer
                .cipher
                .open_to(seq, header, body, &mut out[start..])?;
            out.truncate(start + plan.data_len as usize);
        }
        Ok(None)
    }
}

/// Makes message `id` of `data` (kept, not copied again) padded to
/// `layout.padded_len()`, to be sealed record by record with `cipher` as
/// its packets leave ([`SealedMessage::seal_through`]). `wire` (a reused
/// buffer) becomes the wire form; its old bytes are overwritten record by
/// record before any leaves. Fails, like [`seal_message`], if a record's
/// sequence number does not fit `seq_layout`.
pub fn frame_message_into(
    cipher: Arc<dyn PacketCipher>,
    seq_layout: SeqLayout,
    id: u64,
    data: Plaintext,
    layout: MessageLayout,
    mut wire: Vec<u8>,
) -> Result<SealedMessage, CryptoError> {
    debug_assert_eq!(data.len() as u64, layout.data_len());
    // The last record's sequence number is the largest.
    seq_layout
        .seq(id, layout.records() - 1)
        .ok_or(CryptoError)?;
    wire.resize(layout.wire_len() as usize, 0);
    Ok(SealedMessage {
        wire,
        layout,
        sealed: 0,
        sealer: Some(Sealer {
            cipher,
            seq_layout,
            id,
            data: Some(data),
        }),
    })
}

/// Seals `data` padded to `layout.padded_len()` as message `id`, whole,
/// into `wire` (a reused buffer whose old bytes are all overwritten),
/// keeping `cipher` so the data can be recovered
/// ([`SealedMessage::recover`]).
pub fn seal_message_into(
    cipher: Arc<dyn PacketCipher>,
    seq_layout: SeqLayout,
    id: u64,
    data: &[u8],
    layout: MessageLayout,
    mut wire: Vec<u8>,
) -> Result<SealedMessage, CryptoError> {
    wire.resize(layout.wire_len() as usize, 0);
    seal_records(&*cipher, seq_layout, id, data, layout, &mut wire)?;
    Ok(SealedMessage {
        wire,
        layout,
        sealed: layout.records(),
        sealer: Some(Sealer {
            cipher,
            seq_layout,
            id,
            data: None,
        }),
    })
}

/// Seals `data` padded to `layout.padded_len()` as message `id`.
///
/// The caller has checked that the message fits: the record count fits the
/// index bits and `id` fits the ID bits; a violation is reported as an
/// error rather than silently wrapping into another sequence space.
pub fn seal_message(
    cipher: &dyn PacketCipher,
    seq_layout: SeqLayout,
    id: u64,
    data: &[u8],
    layout: MessageLayout,
) -> Result<SealedMessage, CryptoError> {
    let mut wire = vec![0u8; layout.wire_len() as usize];
    seal_records(cipher, seq_layout, id, data, layout, &mut wire)?;
    Ok(SealedMessage {
        wire,
        layout,
        sealed: layout.records(),
        sealer: None,
    })
}

/// Seals every record of `data` into `wire` (exactly the wire length):
/// one [`PacketCipher::seal_to`] call per record, with the sequence
/// numbers checked once (the last record's is the largest).
fn seal_records(
    cipher: &dyn PacketCipher,
    seq_layout: SeqLayout,
    id: u64,
    data: &[u8],
    layout: MessageLayout,
    wire: &mut [u8],
) -> Result<(), CryptoError> {
    debug_assert_eq!(data.len() as u64, layout.data_len());
    let records = layout.records();
    if records == 1 {
        // Every small message: no loop, one check.
        let seq = seq_layout.seq(id, 0).ok_or(CryptoError)?;
        return seal_record(cipher, seq, data, &layout.record(0), wire);
    }
    seq_layout.seq(id, records - 1).ok_or(CryptoError)?;
    // Record `index`'s sequence number is `first | index`: the check above
    // keeps every index inside its bits.
    let first = seq_layout.seq(id, 0).ok_or(CryptoError)?;
    let mut at = 0usize;
    for index in 0..records {
        let plan = layout.record(index);
        let end = at + plan.wire_len() as usize;
        let out = wire.get_mut(at..end).ok_or(CryptoError)?;
        seal_record(cipher, first | index, chunk(data, &plan), &plan, out)?;
        at = end;
    }
    Ok(())
}

/// The part of `data` record `plan` carries.
fn chunk<'a>(data: &'a [u8], plan: &RecordPlan) -> &'a [u8] {
    let start = (plan.padded_start as usize).min(data.len());
    &data[start..start + plan.data_len as usize]
}

/// Writes one record into `out` (exactly its wire length; every byte is
/// written): header, then `data || 0x17 || zero padding` sealed, then the
/// tag.
fn seal_record(
    cipher: &dyn PacketCipher,
    seq: u64,
    data: &[u8],
    plan: &RecordPlan,
    out: &mut [u8],
) -> Result<(), CryptoError> {
    let padded_len = plan.padded_len as usize;
    let header = record_header((padded_len + 1 + TAG_LEN) as u16);
    let (head, body) = out.split_at_mut(RECORD_HEADER_LEN);
    head.copy_from_slice(&header);
    let tail = CONTENT_TYPE_AND_ZEROS
        .get(..1 + padded_len - data.len())
        .ok_or(CryptoError)?;
    cipher.seal_to(seq, &header, data, tail, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::NullCipher;

    #[test]
    fn null_sealed_record_is_plaintext_with_tls_framing() {
        let layout = MessageLayout::new(3, 3, 16384);
        let m = seal_message(&NullCipher, SeqLayout::DEFAULT, 2, b"abc", layout).unwrap();
        let mut expected = vec![0x17, 0x03, 0x03, 0x00, 20, b'a', b'b', b'c', 0x17];
        expected.extend_from_slice(&[0; 16]);
        assert_eq!(m.wire, expected);
    }

    /// A message gives back exactly its data: the caller's bytes when
    /// sealed lazily, its records opened when sealed whole.
    #[test]
    fn plaintext_is_recovered_from_either_kind_of_message() {
        let data: Vec<u8> = (0..40_000u32).map(|i| (i * 7) as u8).collect();
        let layout = MessageLayout::new(40_000, 40_000, 16384);
        let cipher: Arc<dyn PacketCipher> = Arc::new(crate::sim::KeyedCipher::new(3));
        let bytes = Bytes::from(data.clone());
        for through in [0, 1, 20_000, layout.wire_len()] {
            let (c, b) = (cipher.clone(), bytes.clone());
            let b = Plaintext::Shared(b);
            let mut m =
                frame_message_into(c, SeqLayout::DEFAULT, 9, b, layout, Vec::new()).unwrap();
            m.seal_through(through).unwrap();
            let mut out = Vec::new();
            let kept = m.recover(&mut out).unwrap();
            assert_eq!(kept.as_deref(), Some(&data[..]), "sealed through {through}");
            assert!(out.is_empty());
        }
        let m =
            seal_message_into(cipher, SeqLayout::DEFAULT, 9, &data, layout, vec![1; 9]).unwrap();
        let mut out = vec![5];
        assert_eq!(m.recover(&mut out), Ok(None));
        assert_eq!(out[0], 5, "appended");
        assert_eq!(&out[1..], &data[..]);
    }

    /// A message framed and then sealed record by record (in any number of
    /// steps) is byte for byte the message sealed at once.
    #[test]
    fn lazily_sealed_message_equals_the_eagerly_sealed_one() {
        /// A toy cipher that makes every byte depend on `seq`.
        #[derive(Debug)]
        struct Xor;
        impl PacketCipher for Xor {
            fn seal_in_place(
                &self,
                seq: u64,
                _aad: &[u8; RECORD_HEADER_LEN],
                buf: &mut [u8],
            ) -> Result<(), CryptoError> {
                buf.iter_mut().for_each(|b| *b ^= seq as u8 ^ 0x5a);
                Ok(())
            }
            fn open_in_place(
                &self,
                _seq: u64,
                _aad: &[u8; RECORD_HEADER_LEN],
                _buf: &mut [u8],
            ) -> Result<usize, CryptoError> {
                Err(CryptoError)
            }
            fn control_tag(&self, _packet: &[u8]) -> [u8; TAG_LEN] {
                [0; TAG_LEN]
            }
            fn record_limit(&self) -> u64 {
                u64::MAX
            }
        }
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let layout = MessageLayout::new(data.len() as u64, 100_003, 4000);
        let eager = seal_message(&Xor, SeqLayout::DEFAULT, 9, &data, layout).unwrap();
        let cipher: Arc<dyn PacketCipher> = Arc::new(Xor);
        // A reused buffer full of another message's bytes.
        let old = vec![0xee; 200_000];
        let mut lazy = frame_message_into(
            cipher.clone(),
            SeqLayout::DEFAULT,
            9,
            Plaintext::Copied(data.clone()),
            layout,
            old.clone(),
        )
        .unwrap();
        assert_eq!(lazy.sealed_records(), 0);
        for end in [1, 1, 3000, 4100, 65_000, 65_000, layout.wire_len()] {
            lazy.seal_through(end).unwrap();
            let done = layout
                .record_wire_offset(lazy.sealed_records())
                .min(layout.wire_len());
            assert!(done >= end, "everything before {end} is sealed");
            assert_eq!(lazy.wire[..done as usize], eager.wire[..done as usize]);
        }
        assert_eq!(lazy.wire, eager.wire);
        let whole = seal_message_into(cipher, SeqLayout::DEFAULT, 9, &data, layout, old).unwrap();
        assert_eq!(whole.wire, eager.wire);
    }
}
