//! Session keys for simulated pairs.
//!
//! Real AES-GCM keys come from smt-relay (`smt_relay::KeyKind`), which has the
//! AEAD backend; smt-crypto depends on this crate, so this crate's own
//! tests cannot reach it and use [`TestKeys`] instead.

use std::sync::Arc;

use super::SplitMix64;
use crate::crypto::{CryptoError, NullCipher, PacketCipher, RECORD_HEADER_LEN, TAG_LEN};
use crate::{Role, SessionKeys};

/// Where a simulated pair's session keys come from.
pub trait KeySource {
    /// The client's and the server's keys of one session.
    fn session(&self) -> (SessionKeys, SessionKeys);
}

/// Keys this crate can make without an AEAD backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestKeys {
    /// No protection: every record and control packet authenticates.
    Null,
    /// A [`KeyedCipher`] per direction, keys drawn from the seed: packets
    /// made without the keys are refused, as under AES-GCM.
    Keyed(u64),
}

impl KeySource for TestKeys {
    fn session(&self) -> (SessionKeys, SessionKeys) {
        match *self {
            Self::Null => null_session(),
            Self::Keyed(seed) => keyed_session(seed),
        }
    }
}

impl KeySource for (SessionKeys, SessionKeys) {
    fn session(&self) -> (SessionKeys, SessionKeys) {
        self.clone()
    }
}

/// Client and server keys of one session with the null cipher.
pub fn null_session() -> (SessionKeys, SessionKeys) {
    let a: Arc<dyn PacketCipher> = Arc::new(NullCipher);
    let b: Arc<dyn PacketCipher> = Arc::new(NullCipher);
    (
        SessionKeys::new(Role::Client, a.clone(), b.clone()),
        SessionKeys::new(Role::Server, b, a),
    )
}

/// Client and server keys of one [`KeyedCipher`] session drawn from `seed`.
fn keyed_session(seed: u64) -> (SessionKeys, SessionKeys) {
    let mut rng = SplitMix64::new(seed);
    let c2s: Arc<dyn PacketCipher> = Arc::new(KeyedCipher::new(rng.next_u64()));
    let s2c: Arc<dyn PacketCipher> = Arc::new(KeyedCipher::new(rng.next_u64()));
    (
        SessionKeys::new(Role::Client, c2s.clone(), s2c.clone()),
        SessionKeys::new(Role::Server, s2c, c2s),
    )
}

/// A deterministic stand-in for an AEAD in tests. **Not cryptography.**
///
/// The tag is a keyed hash of (sequence number, record header, ciphertext)
/// and the "encryption" a keystream drawn from (key, sequence number); the
/// control MAC hashes the packet under the same key in another domain. It
/// binds what a real AEAD binds, so a record opened under another key or
/// sequence number, or changed on the way, is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyedCipher {
    key: u64,
}

impl KeyedCipher {
    /// A cipher keyed by `key`: records sealed under another key do not open.
    pub fn new(key: u64) -> Self {
        Self { key }
    }

    /// A keyed hash of `parts`, each length-delimited.
    fn tag(&self, parts: &[&[u8]]) -> [u8; TAG_LEN] {
        let mut h = SplitMix64::new(self.key).next_u64();
        for part in parts {
            for chunk in part.chunks(8) {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                h = SplitMix64::new(h ^ u64::from_le_bytes(word)).next_u64();
            }
            h = SplitMix64::new(h ^ part.len() as u64).next_u64();
        }
        let mut tag = [0u8; TAG_LEN];
        SplitMix64::new(h).fill(&mut tag);
        tag
    }

    fn record_tag(&self, seq: u64, aad: &[u8; RECORD_HEADER_LEN], ct: &[u8]) -> [u8; TAG_LEN] {
        self.tag(&[b"record", &seq.to_le_bytes(), aad, ct])
    }

    /// XORs the keystream of record `seq` from byte `offset` into `buf`.
    fn keystream(&self, seq: u64, offset: usize, buf: &mut [u8]) {
        let mut stream = SplitMix64::new(self.key ^ SplitMix64::new(seq).next_u64());
        for _ in 0..offset / 8 {
            stream.next_u64();
        }
        let mut skip = offset % 8;
        let mut at = 0;
        while at < buf.len() {
            let pad = stream.next_u64().to_le_bytes();
            let n = (8 - skip).min(buf.len() - at);
            let pad = &pad[skip..skip + n];
            buf[at..at + n]
                .iter_mut()
                .zip(pad)
                .for_each(|(b, p)| *b ^= p);
            at += n;
            skip = 0;
        }
    }
}

impl PacketCipher for KeyedCipher {
    fn seal_in_place(
        &self,
        seq: u64,
        aad: &[u8; RECORD_HEADER_LEN],
        buf: &mut [u8],
    ) -> Result<(), CryptoError> {
        let tag_at = buf.len().checked_sub(TAG_LEN).ok_or(CryptoError)?;
        let (body, tag) = buf.split_at_mut(tag_at);
        self.keystream(seq, 0, body);
        tag.copy_from_slice(&self.record_tag(seq, aad, body));
        Ok(())
    }

    fn open_in_place(
        &self,
        seq: u64,
        aad: &[u8; RECORD_HEADER_LEN],
        buf: &mut [u8],
    ) -> Result<usize, CryptoError> {
        let tag_at = buf.len().checked_sub(TAG_LEN).ok_or(CryptoError)?;
        let (body, tag) = buf.split_at_mut(tag_at);
        if self.record_tag(seq, aad, body) != *tag {
            return Err(CryptoError);
        }
        self.keystream(seq, 0, body);
        Ok(tag_at)
    }

    fn control_tag(&self, packet: &[u8]) -> [u8; TAG_LEN] {
        self.tag(&[b"control", packet])
    }

    fn record_limit(&self) -> u64 {
        u64::MAX
    }

    fn apply_keystream(&self, seq: u64, offset: usize, buf: &mut [u8]) -> Result<(), CryptoError> {
        self.keystream(seq, offset, buf);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AAD: [u8; RECORD_HEADER_LEN] = [0x17, 3, 3, 0, 21];

    fn sealed(cipher: &KeyedCipher, seq: u64) -> Vec<u8> {
        let mut buf = b"hello".to_vec();
        buf.resize(5 + TAG_LEN, 0);
        cipher.seal_in_place(seq, &AAD, &mut buf).unwrap();
        buf
    }

    #[test]
    fn keyed_cipher_round_trips_and_hides_the_plaintext() {
        let c = KeyedCipher::new(1);
        let mut buf = sealed(&c, 7);
        assert_ne!(&buf[..5], b"hello");
        assert_eq!(c.open_in_place(7, &AAD, &mut buf), Ok(5));
        assert_eq!(&buf[..5], b"hello");
    }

    #[test]
    fn keyed_cipher_refuses_another_key_seq_header_or_byte() {
        let c = KeyedCipher::new(1);
        let buf = sealed(&c, 7);
        let refuses = |cipher: &KeyedCipher, seq, aad: &[u8; 5], mut b: Vec<u8>| {
            cipher.open_in_place(seq, aad, &mut b) == Err(CryptoError)
        };
        assert!(refuses(&KeyedCipher::new(2), 7, &AAD, buf.clone()));
        assert!(refuses(&c, 8, &AAD, buf.clone()));
        assert!(refuses(&c, 7, &[0x17, 3, 3, 0, 22], buf.clone()));
        let mut flipped = buf;
        flipped[2] ^= 1;
        assert!(refuses(&c, 7, &AAD, flipped));
    }

    /// The keystream from any offset is the matching part of the whole.
    #[test]
    fn keyed_keystream_at_an_offset() {
        let c = KeyedCipher::new(3);
        let mut whole = [0u8; 40];
        c.apply_keystream(9, 0, &mut whole).unwrap();
        for offset in [0, 1, 7, 8, 13, 39] {
            let mut part = vec![0u8; 40 - offset];
            c.apply_keystream(9, offset, &mut part).unwrap();
            assert_eq!(part, whole[offset..], "offset {offset}");
        }
    }

    #[test]
    fn keyed_control_tags_depend_on_the_key() {
        let (a, b) = (KeyedCipher::new(1), KeyedCipher::new(2));
        assert_ne!(a.control_tag(b"x"), b.control_tag(b"x"));
        assert_ne!(a.control_tag(b"x"), a.control_tag(b"y"));
        assert!(a.verify_control_tag(b"x", &a.control_tag(b"x")).is_ok());
    }
}
