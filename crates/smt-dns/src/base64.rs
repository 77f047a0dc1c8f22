//! Strict base64 (RFC 4648 §4: standard alphabet, `=` padding) for ticket records.
//!
//! Strict means canonical: the length is a multiple of four, padding appears only at the end
//! (at most two `=`), and the bits that padding leaves unused are zero. So every ticket has
//! exactly one text form, and a record that differs from what [`encode`] emits is rejected
//! rather than guessed at.

use crate::error::MalformedRecord;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const PAD: u8 = b'=';

/// Length of the base64 text for `len` bytes.
pub(crate) const fn encoded_len(len: usize) -> usize {
    len.div_ceil(3) * 4
}

/// Encodes `bytes` as padded standard base64.
pub(crate) fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(encoded_len(bytes.len()));
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        let sextets =
            [n >> 18, n >> 12, n >> 6, n].map(|s| char::from(ALPHABET[(s & 0x3f) as usize]));
        // 1 input byte -> 2 symbols, 2 -> 3, 3 -> 4; the rest is padding.
        let used = chunk.len() + 1;
        out.extend(&sextets[..used]);
        out.extend(std::iter::repeat_n(char::from(PAD), 4 - used));
    }
    out
}

/// Decodes canonical padded standard base64; `offset` in an error counts from the start of
/// `text`.
pub(crate) fn decode(text: &[u8]) -> Result<Vec<u8>, MalformedRecord> {
    if !text.len().is_multiple_of(4) {
        return Err(MalformedRecord::Base64Length { len: text.len() });
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let quads = text.len() / 4;
    for (i, quad) in text.chunks_exact(4).enumerate() {
        decode_quad(quad, i * 4, i + 1 == quads, &mut out)?;
    }
    Ok(out)
}

/// Decodes one group of four symbols starting at `offset`; only the `last` group may be padded.
fn decode_quad(
    quad: &[u8],
    offset: usize,
    last: bool,
    out: &mut Vec<u8>,
) -> Result<(), MalformedRecord> {
    let pads = quad.iter().rev().take_while(|&&c| c == PAD).count();
    if pads > 2 || (pads > 0 && !last) {
        let at = quad.iter().position(|&c| c == PAD).unwrap_or(0);
        return Err(MalformedRecord::Base64Padding {
            offset: offset + at,
        });
    }
    let mut n = 0u32;
    for (j, &c) in quad[..4 - pads].iter().enumerate() {
        let v = sextet(c).ok_or(MalformedRecord::Base64Symbol {
            offset: offset + j,
            byte: c,
        })?;
        n |= u32::from(v) << (18 - 6 * j);
    }
    let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
    let kept = 3 - pads;
    // Non-canonical: padding hides set bits, so two texts would map to one ticket.
    if bytes[kept..].iter().any(|&b| b != 0) {
        return Err(MalformedRecord::Base64Padding {
            offset: offset + 4 - pads - 1,
        });
    }
    out.extend_from_slice(&bytes[..kept]);
    Ok(())
}

/// The 6-bit value of one base64 symbol, or `None` outside the alphabet.
fn sextet(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
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
            (
                "Z=g=",
                MalformedRecord::Base64Symbol {
                    offset: 1,
                    byte: b'=',
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(decode(text.as_bytes()), Err(want), "{text:?}");
        }
    }
}
