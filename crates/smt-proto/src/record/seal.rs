//! The send side: a message becomes a buffer of sealed records, segment
//! after segment, kept for retransmission (retransmits never re-encrypt).
//!
//! The endpoint seals lazily ([`frame_message_into`] then
//! [`SealedMessage::seal_through`]): a message is framed at once (headers,
//! plaintext, content type, padding, room for the tag: one copy) and each
//! record is sealed in place just before its first packet leaves. Sealing a
//! 64 MiB message takes tens to hundreds of milliseconds of CPU; done in
//! one call it would keep the endpoint from receiving, answering and
//! ticking meanwhile, and its peer would count that time as silence.

use std::sync::Arc;

use super::{record_header, MessageLayout, SeqLayout, CONTENT_APPLICATION_DATA};
use crate::crypto::{CryptoError, PacketCipher, RECORD_HEADER_LEN, TAG_LEN};

/// A message in its wire form: records `..sealed_records()` are sealed;
/// the rest (lazy sealing only) still hold framed plaintext and must be
/// sealed ([`SealedMessage::seal_through`]) before any of their bytes
/// leave.
#[derive(Debug)]
pub struct SealedMessage {
    /// All segments back to back.
    pub wire: Vec<u8>,
    /// Where the records and segments are.
    pub layout: MessageLayout,
    sealed: u64,
    /// What sealed the records and seals the rest (lazy sealing only):
    /// kept after the last record, to open them again if the message must
    /// be re-sent under another ID ([`SealedMessage::recover_plaintext`]).
    sealer: Option<Sealer>,
}

#[derive(Debug)]
struct Sealer {
    cipher: Arc<dyn PacketCipher>,
    seq_layout: SeqLayout,
    id: u64,
}

impl SealedMessage {
    /// Records sealed so far (all of them unless framed lazily).
    pub fn sealed_records(&self) -> u64 {
        self.sealed
    }

    /// Seals every record holding a byte before wire offset `end`, in
    /// order; bounded by the records that range covers (a packet's worth
    /// is at most two records). Records already sealed are left alone.
    pub fn seal_through(&mut self, end: u64) -> Result<(), CryptoError> {
        let Some(sealer) = &self.sealer else {
            return Ok(());
        };
        let layout = self.layout;
        if self.sealed == layout.records() {
            return Ok(());
        }
        let last = match end {
            0 => return Ok(()),
            end => layout.record_at(end - 1),
        };
        while self.sealed <= last {
            let index = self.sealed;
            let seq = sealer.seq_layout.seq(sealer.id, index).ok_or(CryptoError)?;
            let at = layout.record_wire_offset(index) as usize;
            let len = layout.record(index).wire_len() as usize;
            let record = &mut self.wire[at..at + len];
            let (header, body) = record.split_at_mut(RECORD_HEADER_LEN);
            let header: &[u8; RECORD_HEADER_LEN] =
                (&*header).try_into().map_err(|_| CryptoError)?;
            sealer.cipher.seal_in_place(seq, header, body)?;
            self.sealed += 1;
        }
        Ok(())
    }

    /// Appends the message's data to `out`, opening the records sealed so
    /// far with the key that sealed them (the wire buffer is used up). For
    /// a request the server lost, which goes again under a new ID: keeping
    /// a plaintext copy of every request for that rare case cost a copy of
    /// every request. Fails for an eagerly sealed message (no key kept) or
    /// if a record does not open (it always does: we sealed it).
    pub fn recover_plaintext(&mut self, out: &mut Vec<u8>) -> Result<(), CryptoError> {
        let sealer = self.sealer.as_ref().ok_or(CryptoError)?;
        out.reserve(self.layout.data_len() as usize);
        for index in 0..self.layout.records() {
            let at = self.layout.record_wire_offset(index) as usize;
            let plan = self.layout.record(index);
            let record = &mut self.wire[at..at + plan.wire_len() as usize];
            let (header, body) = record.split_at_mut(RECORD_HEADER_LEN);
            if index < self.sealed {
                let header: &[u8; RECORD_HEADER_LEN] =
                    (&*header).try_into().map_err(|_| CryptoError)?;
                let seq = sealer.seq_layout.seq(sealer.id, index).ok_or(CryptoError)?;
                sealer.cipher.open_in_place(seq, header, body)?;
            }
            out.extend_from_slice(&body[..plan.data_len as usize]);
        }
        Ok(())
    }
}

/// Frames `data` padded to `layout.padded_len()` as message `id` into
/// `wire` (a reused buffer), to be sealed record by record with `cipher`
/// ([`SealedMessage::seal_through`]). Fails, like [`seal_message`], if a
/// record's sequence number does not fit `seq_layout`.
pub fn frame_message_into(
    cipher: Arc<dyn PacketCipher>,
    seq_layout: SeqLayout,
    id: u64,
    data: &[u8],
    layout: MessageLayout,
    mut wire: Vec<u8>,
) -> Result<SealedMessage, CryptoError> {
    debug_assert_eq!(data.len() as u64, layout.data_len());
    // The last record's sequence number is the largest.
    seq_layout
        .seq(id, layout.records() - 1)
        .ok_or(CryptoError)?;
    // Appended record by record rather than zero-filled and then
    // overwritten: for a megabyte message the zero fill was a second pass
    // over memory (and, in fresh pages, the one that faulted them in).
    wire.clear();
    wire.reserve(layout.wire_len() as usize);
    for index in 0..layout.records() {
        let plan = layout.record(index);
        let start = (plan.padded_start as usize).min(data.len());
        let chunk = &data[start..start + plan.data_len as usize];
        append_record(chunk, plan.padded_len as usize, &mut wire);
    }
    debug_assert_eq!(wire.len() as u64, layout.wire_len());
    Ok(SealedMessage {
        wire,
        layout,
        sealed: 0,
        sealer: Some(Sealer {
            cipher,
            seq_layout,
            id,
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
    debug_assert_eq!(data.len() as u64, layout.data_len());
    // Zero-filled: padding after each record's content type stays zero.
    let mut wire = vec![0u8; layout.wire_len() as usize];
    let mut at = 0usize;
    for index in 0..layout.records() {
        let plan = layout.record(index);
        let seq = seq_layout.seq(id, index).ok_or(CryptoError)?;
        let start = (plan.padded_start as usize).min(data.len());
        let chunk = &data[start..start + plan.data_len as usize];
        let record_len = plan.wire_len() as usize;
        seal_record(
            cipher,
            seq,
            chunk,
            plan.padded_len as usize,
            &mut wire[at..at + record_len],
        )?;
        at += record_len;
    }
    Ok(SealedMessage {
        wire,
        layout,
        sealed: layout.records(),
        sealer: None,
    })
}

/// Writes one record into `out` (exactly its wire length, zero-filled):
/// header, `data || 0x17 || zero padding`, tag.
fn seal_record(
    cipher: &dyn PacketCipher,
    seq: u64,
    data: &[u8],
    padded_len: usize,
    out: &mut [u8],
) -> Result<(), CryptoError> {
    let header = frame_record(data, padded_len, out);
    cipher.seal_in_place(seq, &header, &mut out[RECORD_HEADER_LEN..])
}

/// Appends one record, unsealed: header, `data || 0x17 || zero padding`,
/// and room for the tag (zeros).
fn append_record(data: &[u8], padded_len: usize, wire: &mut Vec<u8>) {
    let ciphertext_len = padded_len + 1 + TAG_LEN;
    wire.extend_from_slice(&record_header(ciphertext_len as u16));
    wire.extend_from_slice(data);
    wire.push(CONTENT_APPLICATION_DATA);
    let zeros = padded_len - data.len() + TAG_LEN;
    wire.resize(wire.len() + zeros, 0);
}

/// Writes one record's header and plaintext (`data || 0x17`; the padding
/// and the tag's room stay zero) into `out`, exactly its wire length and
/// zero-filled; returns the header.
fn frame_record(data: &[u8], padded_len: usize, out: &mut [u8]) -> [u8; RECORD_HEADER_LEN] {
    let ciphertext_len = padded_len + 1 + TAG_LEN;
    let header = record_header(ciphertext_len as u16);
    out[..RECORD_HEADER_LEN].copy_from_slice(&header);
    let body = &mut out[RECORD_HEADER_LEN..];
    body[..data.len()].copy_from_slice(data);
    body[data.len()] = CONTENT_APPLICATION_DATA;
    header
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

    /// A partly sealed message gives back exactly its data.
    #[test]
    fn plaintext_is_recovered_from_a_partly_sealed_message() {
        let data: Vec<u8> = (0..40_000u32).map(|i| (i * 7) as u8).collect();
        let layout = MessageLayout::new(40_000, 40_000, 16384);
        let cipher: Arc<dyn PacketCipher> = Arc::new(crate::sim::KeyedCipher::new(3));
        for through in [0, 1, 20_000, layout.wire_len()] {
            let mut m = frame_message_into(
                cipher.clone(),
                SeqLayout::DEFAULT,
                9,
                &data,
                layout,
                Vec::new(),
            )
            .unwrap();
            m.seal_through(through).unwrap();
            let mut out = Vec::new();
            m.recover_plaintext(&mut out).unwrap();
            assert_eq!(out, data, "sealed through {through}");
        }
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
        let mut lazy =
            frame_message_into(cipher, SeqLayout::DEFAULT, 9, &data, layout, Vec::new()).unwrap();
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
    }
}
