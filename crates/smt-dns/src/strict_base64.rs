//! Strict base64 (RFC 4648 §4: standard alphabet, `=` padding) for ticket records, on the
//! `base64` crate.
//!
//! Strict means canonical: the length is a multiple of four, padding appears only at the end
//! (at most two `=`), and the bits that padding leaves unused are zero. So every ticket has
//! exactly one text form, and a record that differs from what [`encode`] emits is rejected
//! rather than guessed at.

use base64::engine::general_purpose::STANDARD;
use base64::{DecodeError, Engine as _};

use crate::error::MalformedRecord;

const PAD: u8 = b'=';

/// Length of the base64 text for `len` bytes.
pub(crate) const fn encoded_len(len: usize) -> usize {
    len.div_ceil(3) * 4
}

/// Encodes `bytes` as padded standard base64.
pub(crate) fn encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Decodes canonical padded standard base64; `offset` in an error counts from the start of
/// `text`. The crate's `STANDARD` engine is already strict (canonical padding required,
/// trailing bits rejected); this only names its errors as record errors.
pub(crate) fn decode(text: &[u8]) -> Result<Vec<u8>, MalformedRecord> {
    // Checked first: the crate reports a wrong length as a padding error.
    if !text.len().is_multiple_of(4) {
        return Err(MalformedRecord::Base64Length { len: text.len() });
    }
    STANDARD.decode(text).map_err(|e| malformed(text, e))
}

/// The record error for the crate's decode error on `text`.
fn malformed(text: &[u8], error: DecodeError) -> MalformedRecord {
    match error {
        // The crate reports a `=` before the end as a symbol outside the alphabet.
        DecodeError::InvalidByte(offset, PAD) => MalformedRecord::Base64Padding { offset },
        DecodeError::InvalidByte(offset, byte) => MalformedRecord::Base64Symbol { offset, byte },
        DecodeError::InvalidLength(len) => MalformedRecord::Base64Length { len },
        DecodeError::InvalidLastSymbol { offset, .. } => MalformedRecord::Base64Padding { offset },
        // The crate does not say where: the first `=` is the misplaced one.
        DecodeError::InvalidPadding => MalformedRecord::Base64Padding {
            offset: text.iter().position(|&c| c == PAD).unwrap_or(text.len()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4648 §10 test vectors.
    const VECTORS: [(&str, &str); 7] = [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ];

    #[test]
    fn rfc4648_vectors() {
        for (plain, coded) in VECTORS {
            assert_eq!(encode(plain.as_bytes()), coded);
            assert_eq!(decode(coded.as_bytes()).unwrap(), plain.as_bytes());
            assert_eq!(encoded_len(plain.len()), coded.len());
        }
    }

    #[test]
    fn every_byte_value_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(encode(&all).as_bytes()).unwrap(), all);
    }

    #[test]
    fn rejects_non_canonical_text() {
        let cases: [(&str, MalformedRecord); 8] = [
            ("Zg=", MalformedRecord::Base64Length { len: 3 }),
            ("Zh==", MalformedRecord::Base64Padding { offset: 1 }),
            ("Zm9=", MalformedRecord::Base64Padding { offset: 2 }),
            ("Z===", MalformedRecord::Base64Padding { offset: 1 }),
            ("Zg==Zm9v", MalformedRecord::Base64Padding { offset: 2 }),
            (
                "Zm9v Zg=",
                MalformedRecord::Base64Symbol {
                    offset: 4,
                    byte: b' ',
                },
            ),
            (
                "Zm-v",
                MalformedRecord::Base64Symbol {
                    offset: 2,
                    byte: b'-',
                },
            ),
            // A `=` before the last symbols is misplaced padding.
            ("Z=g=", MalformedRecord::Base64Padding { offset: 1 }),
        ];
        for (text, want) in cases {
            assert_eq!(decode(text.as_bytes()), Err(want), "{text:?}");
        }
    }
}
