//! The TLS 1.3 record framing a NIC follows in the byte stream (RFC 8446
//! §5.2): a 5-byte header that stays plaintext and is the AAD, then the
//! encrypted body whose last 16 bytes are the tag.
//!
//! The NIC learns where records start and end only from these headers, so
//! a segment that starts where the context does not expect a header is
//! misread; see `context.rs`.

use std::fmt;

use crate::gcm::TAG_LEN;

/// Length of the record header.
pub const HEADER_LEN: usize = 5;
/// `opaque_type` of every TLS 1.3 protected record: application_data.
pub const CONTENT_TYPE_APPLICATION_DATA: u8 = 0x17;
/// `legacy_record_version` of every TLS 1.3 protected record.
pub(crate) const LEGACY_VERSION: [u8; 2] = [0x03, 0x03];
/// Largest body (`TLSCiphertext.length`): 2^14 + 256 (RFC 8446 §5.2).
pub const MAX_BODY_LEN: usize = (1 << 14) + 256;
/// Smallest body: one byte of inner content type and the tag.
pub(crate) const MIN_BODY_LEN: usize = 1 + TAG_LEN;
/// Largest whole record.
pub const MAX_RECORD_LEN: usize = HEADER_LEN + MAX_BODY_LEN;

/// A record header the engine accepted.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordHeader([u8; HEADER_LEN]);

impl RecordHeader {
    /// Accepts a TLS 1.3 application-data header with a body length in
    /// [`MIN_BODY_LEN`]`..=`[`MAX_BODY_LEN`].
    pub(crate) fn parse(bytes: [u8; HEADER_LEN]) -> Result<Self, BadHeader> {
        let header = Self(bytes);
        let framing_ok = bytes[0] == CONTENT_TYPE_APPLICATION_DATA
            && bytes[1..3] == LEGACY_VERSION
            && (MIN_BODY_LEN..=MAX_BODY_LEN).contains(&header.body_len());
        if framing_ok {
            Ok(header)
        } else {
            Err(BadHeader(bytes))
        }
    }

    /// Bytes after the header: ciphertext and tag.
    pub(crate) fn body_len(&self) -> usize {
        usize::from(u16::from_be_bytes([self.0[3], self.0[4]]))
    }

    /// Plaintext bytes the record encrypts.
    pub(crate) fn text_len(&self) -> usize {
        self.body_len() - TAG_LEN
    }

    pub(crate) fn bytes(&self) -> &[u8; HEADER_LEN] {
        &self.0
    }
}

impl fmt::Debug for RecordHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RecordHeader({:02x?})", self.0)
    }
}

/// Five bytes where the context expected a record header that are not one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BadHeader(pub(crate) [u8; HEADER_LEN]);

/// Builds a record as software hands it to an offloading NIC: the header,
/// the TLS 1.3 inner plaintext (`data || 0x17`) and [`TAG_LEN`] zero bytes
/// where the NIC writes the tag. Appends to `out`.
///
/// `data` must leave room for the content type: at most 2^14 bytes.
pub fn plaintext_record(data: &[u8], out: &mut Vec<u8>) -> Result<(), RecordTooLong> {
    if data.len() > 1 << 14 {
        return Err(RecordTooLong(data.len()));
    }
    let body_len = data.len() + 1 + TAG_LEN;
    // NOTE(unwrap): body_len <= 2^14 + 17, which fits in 16 bits.
    let len = u16::try_from(body_len).expect("checked above");
    out.push(CONTENT_TYPE_APPLICATION_DATA);
    out.extend_from_slice(&LEGACY_VERSION);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(data);
    out.push(CONTENT_TYPE_APPLICATION_DATA);
    out.extend_from_slice(&[0; TAG_LEN]);
    Ok(())
}

/// The caller asked for a record with more than 2^14 bytes of data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordTooLong(pub usize);

impl fmt::Display for RecordTooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a TLS 1.3 record carries at most 16384 bytes, {} were given",
            self.0
        )
    }
}

impl std::error::Error for RecordTooLong {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_limits() {
        let h = |len: u16| {
            let [a, b] = len.to_be_bytes();
            RecordHeader::parse([0x17, 0x03, 0x03, a, b])
        };
        assert!(h(16).is_err());
        assert_eq!(h(17).map(|h| h.body_len()), Ok(17));
        assert_eq!(h(16640).map(|h| h.text_len()), Ok(16624));
        assert!(h(16641).is_err());
        assert!(RecordHeader::parse([0x16, 0x03, 0x03, 0, 20]).is_err());
        assert!(RecordHeader::parse([0x17, 0x03, 0x01, 0, 20]).is_err());
    }

    #[test]
    fn plaintext_record_layout() {
        let mut out = vec![0xa5];
        plaintext_record(b"abc", &mut out).unwrap();
        let mut expected = vec![0xa5, 0x17, 0x03, 0x03, 0x00, 0x14, b'a', b'b', b'c', 0x17];
        expected.extend_from_slice(&[0; TAG_LEN]);
        assert_eq!(out, expected);
        assert_eq!(
            plaintext_record(&vec![0; 16385], &mut out),
            Err(RecordTooLong(16385))
        );
    }
}
