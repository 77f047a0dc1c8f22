//! The send side: a message becomes a buffer of sealed records, segment
//! after segment, kept for retransmission (retransmits never re-encrypt).

use super::{record_header, MessageLayout, SeqLayout, CONTENT_APPLICATION_DATA};
use crate::crypto::{CryptoError, PacketCipher, RECORD_HEADER_LEN, TAG_LEN};

/// A message sealed into its wire form.
#[derive(Debug)]
pub struct SealedMessage {
    /// All segments back to back.
    pub wire: Vec<u8>,
    /// Where the records and segments are.
    pub layout: MessageLayout,
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
    seal_message_into(cipher, seq_layout, id, data, layout, Vec::new())
}

/// [`seal_message`] into `wire`, a reused buffer (its contents are
/// replaced; its capacity is kept if large enough).
pub fn seal_message_into(
    cipher: &dyn PacketCipher,
    seq_layout: SeqLayout,
    id: u64,
    data: &[u8],
    layout: MessageLayout,
    mut wire: Vec<u8>,
) -> Result<SealedMessage, CryptoError> {
    debug_assert_eq!(data.len() as u64, layout.data_len());
    // Zero-filled: padding after each record's content type stays zero.
    wire.clear();
    wire.resize(layout.wire_len() as usize, 0);
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
    Ok(SealedMessage { wire, layout })
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
    let ciphertext_len = padded_len + 1 + TAG_LEN;
    let header = record_header(ciphertext_len as u16);
    out[..RECORD_HEADER_LEN].copy_from_slice(&header);
    let body = &mut out[RECORD_HEADER_LEN..];
    body[..data.len()].copy_from_slice(data);
    body[data.len()] = CONTENT_APPLICATION_DATA;
    // Padding bytes after the content type are already zero.
    cipher.seal_in_place(seq, &header, body)
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
}
