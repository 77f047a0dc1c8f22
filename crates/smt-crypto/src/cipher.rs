//! AES-GCM record protection and the control-packet MAC.
//!
//! Two AES-GCM implementations share each traffic key, chosen per call by
//! what costs least (`examples/aead_calls.rs` measures them side by side):
//! ring seals and opens in place, which is every small record, for about
//! 20 % fewer instructions per call than aws-lc's EVP AEAD layer; aws-lc
//! seals and opens large records from one buffer into another in one pass
//! (`seal_out_of_place_scatter` / `open_separate_gather`), which ring
//! cannot, saving a copy of the record. Both produce the same bytes: GCM
//! is deterministic, and the NIST vectors run through both.

use std::fmt;

use std::sync::OnceLock;

use aws_lc_rs::aead;
use aws_lc_rs::cipher::{EncryptingKey, EncryptionContext, UnboundCipherKey};
use ring::aead as ring_aead;
use smt_proto::crypto::{
    CryptoError, OffloadKey, OffloadSuite, PacketCipher, RECORD_HEADER_LEN, TAG_LEN,
};

use crate::control_mac::ControlMac;
use crate::key::{AeadAlgorithm, TrafficKey, IV_LEN};

/// Records one AES-GCM key may protect: 2^24.5 rounded down (RFC 8446 §5.5).
pub const AES_GCM_RECORD_LIMIT: u64 = 23_726_566;

/// Records with at least this much data are sealed from the caller's
/// buffer into the wire buffer in one pass by aws-lc (`seal_to`); smaller
/// ones are copied and sealed in place by ring, which costs fewer
/// instructions below this size even with the copy (callgrind,
/// `examples/aead_calls.rs`, "record path": 3,352 against 3,505 at 1 KiB,
/// 5,770 against 5,827 at 2 KiB, 10,518 against 10,384 at 4 KiB). Large
/// records also save a pass over memory this way.
const SEAL_ONE_PASS_FROM: usize = 4096;

/// Records with at least this much data are opened from the packet into
/// the message buffer in one pass by aws-lc (`open_to`); smaller ones are
/// copied and opened in place by ring (the two are level at 1 KiB:
/// 3,453 against 3,433 instructions; ring wins below, aws-lc above).
const OPEN_ONE_PASS_FROM: usize = 1024;

/// The per-record nonce of RFC 8446 §5.3: `seq` as a 64-bit big-endian
/// number, left-padded to [`IV_LEN`] bytes and XORed with the static IV.
#[inline]
pub fn record_nonce(iv: &[u8; IV_LEN], seq: u64) -> [u8; IV_LEN] {
    // One 64-bit XOR rather than eight byte ones.
    let (head, tail) = iv.split_at(IV_LEN - 8);
    let mut low = [0u8; 8];
    low.copy_from_slice(tail);
    let low = (u64::from_be_bytes(low) ^ seq).to_be_bytes();
    let mut nonce = [0u8; IV_LEN];
    nonce[..IV_LEN - 8].copy_from_slice(head);
    nonce[IV_LEN - 8..].copy_from_slice(&low);
    nonce
}

/// The static IV as the nonce rule uses it: the first four bytes as they
/// are, the last eight as the number each record's sequence number is
/// XORed into.
#[derive(Clone, Copy)]
struct NonceBase {
    head: [u8; IV_LEN - 8],
    tail: u64,
}

impl NonceBase {
    fn new(iv: &[u8; IV_LEN]) -> Self {
        let (head, tail) = iv.split_at(IV_LEN - 8);
        let mut h = [0; IV_LEN - 8];
        h.copy_from_slice(head);
        let mut t = [0; 8];
        t.copy_from_slice(tail);
        Self {
            head: h,
            tail: u64::from_be_bytes(t),
        }
    }

    #[inline]
    fn nonce(self, seq: u64) -> [u8; IV_LEN] {
        let mut nonce = [0; IV_LEN];
        nonce[..IV_LEN - 8].copy_from_slice(&self.head);
        nonce[IV_LEN - 8..].copy_from_slice(&(self.tail ^ seq).to_be_bytes());
        nonce
    }
}

/// AES-GCM ([`AeadAlgorithm::Aes128Gcm`] or [`AeadAlgorithm::Aes256Gcm`])
/// record protection for one direction of one session.
///
/// Records are sealed exactly as TLS 1.3 seals them (RFC 8446 §5.2-5.3), so
/// a record this produces is a record a TLS stack with the same key accepts.
/// Control packets are authenticated with AES-CMAC under a key derived
/// from, and distinct from, the traffic key:
///
/// ```text
/// prk         = HKDF-Extract(salt = "smt control v2", ikm = key || iv)
/// control_key = HKDF-Expand(prk, info = "smt ctrl", len(key))
/// tag         = AES-CMAC(control_key, packet)
/// ```
///
/// `Debug` shows only the algorithm.
pub struct AesGcmCipher {
    algorithm: AeadAlgorithm,
    /// ring: in place (every small record, and `seal_raw`/`open_raw`).
    key: ring_aead::LessSafeKey,
    /// aws-lc: from one buffer into another (large records,
    /// `seal_raw_to`/`open_raw_to`).
    one_pass: aead::LessSafeKey,
    /// The static IV split as RFC 8446 §5.3 XORs the sequence number into it, so
    /// each record's nonce is one 64-bit XOR ([`AesGcmCipher::nonce`]).
    nonce_base: NonceBase,
    control_mac: ControlMac,
    /// The key itself, for a NIC that takes record protection over
    /// (`offload_key`).
    traffic: TrafficKey,
    /// AES-CTR under the same key, made on first use: partial decryption
    /// (`apply_keystream`) needs the bare keystream.
    ctr: OnceLock<Option<EncryptingKey>>,
}

impl AesGcmCipher {
    /// Expands `key` into AES key schedules (one per implementation) and
    /// derives its control MAC key.
    pub fn new(key: &TrafficKey) -> Self {
        let algorithm = key.algorithm();
        // NOTE(unwrap): `TrafficKey::new` checked the length against this
        // very algorithm, and a right-length AES key is always accepted.
        let one_pass = aead::UnboundKey::new(algorithm.aws_lc(), key.key())
            .expect("TrafficKey guarantees the key length");
        // NOTE(unwrap): as above.
        let in_place = ring_aead::UnboundKey::new(algorithm.ring(), key.key())
            .expect("TrafficKey guarantees the key length");
        Self {
            algorithm,
            key: ring_aead::LessSafeKey::new(in_place),
            one_pass: aead::LessSafeKey::new(one_pass),
            nonce_base: NonceBase::new(key.iv()),
            control_mac: ControlMac::derive(key),
            traffic: key.clone(),
            ctr: OnceLock::new(),
        }
    }

    /// Record `seq`'s nonce: [`record_nonce`] with the IV's halves
    /// taken apart once, at key set-up.
    #[inline]
    fn nonce(&self, seq: u64) -> [u8; IV_LEN] {
        self.nonce_base.nonce(seq)
    }

    /// AES-CTR under the record key.
    fn ctr_key(&self) -> Option<&EncryptingKey> {
        self.ctr
            .get_or_init(|| {
                let alg = match self.algorithm {
                    AeadAlgorithm::Aes128Gcm => &aws_lc_rs::cipher::AES_128,
                    AeadAlgorithm::Aes256Gcm => &aws_lc_rs::cipher::AES_256,
                };
                UnboundCipherKey::new(alg, self.traffic.key())
                    .and_then(EncryptingKey::ctr)
                    .ok()
            })
            .as_ref()
    }

    /// The AEAD in use.
    pub fn algorithm(&self) -> AeadAlgorithm {
        self.algorithm
    }

    /// Encrypts `buf[..buf.len() - TAG_LEN]` in place under an explicit
    /// nonce and associated data of any length, writing the tag into the
    /// last [`TAG_LEN`] bytes. The [`PacketCipher`] methods call this with
    /// the record nonce and header; test vectors call it directly.
    ///
    /// Fails if `buf` is shorter than [`TAG_LEN`].
    pub fn seal_raw(
        &self,
        nonce: &[u8; IV_LEN],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<(), CryptoError> {
        let (plaintext, tag_out) = buf.split_last_chunk_mut::<TAG_LEN>().ok_or(CryptoError)?;
        self.seal_body(nonce, aad, plaintext, tag_out)
    }

    /// Checks the tag in the last [`TAG_LEN`] bytes of `buf` under an
    /// explicit nonce and associated data, and decrypts the rest in place.
    /// Returns the plaintext length. On error `buf` must be discarded.
    pub fn open_raw(
        &self,
        nonce: &[u8; IV_LEN],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<usize, CryptoError> {
        self.key
            .open_in_place(
                ring_aead::Nonce::assume_unique_for_key(*nonce),
                ring_aead::Aad::from(aad),
                buf,
            )
            .map(|plaintext| plaintext.len())
            .map_err(|_| CryptoError)
    }

    /// Encrypts `plaintext || extra` into `out` in one pass (aws-lc), under
    /// an explicit nonce and associated data of any length: `out` is
    /// `plaintext.len() + extra.len() + TAG_LEN` bytes and ends with the
    /// tag; `plaintext` is left untouched. The same bytes as
    /// [`AesGcmCipher::seal_raw`] on the concatenation. Large records
    /// take this path; test vectors call it directly.
    ///
    /// Fails if `out` has the wrong length.
    pub fn seal_raw_to(
        &self,
        nonce: &[u8; IV_LEN],
        aad: &[u8],
        plaintext: &[u8],
        extra: &[u8],
        out: &mut [u8],
    ) -> Result<(), CryptoError> {
        let (data, rest) = out
            .split_at_mut_checked(plaintext.len())
            .ok_or(CryptoError)?;
        self.one_pass
            .seal_out_of_place_scatter(
                aead::Nonce::assume_unique_for_key(*nonce),
                aead::Aad::from(aad),
                plaintext,
                data,
                extra,
                rest,
            )
            .map_err(|_| CryptoError)
    }

    /// Checks the tag at the end of `ciphertext` and decrypts the rest into
    /// the start of `out` in one pass (aws-lc), under an explicit nonce and
    /// associated data; returns the plaintext length. `out` must hold at
    /// least that many bytes. On error `out` must be discarded.
    pub fn open_raw_to(
        &self,
        nonce: &[u8; IV_LEN],
        aad: &[u8],
        ciphertext: &[u8],
        out: &mut [u8],
    ) -> Result<usize, CryptoError> {
        let body = ciphertext.len().checked_sub(TAG_LEN).ok_or(CryptoError)?;
        let out = out.get_mut(..body).ok_or(CryptoError)?;
        let (ciphertext, tag) = ciphertext.split_at(body);
        self.one_pass
            .open_separate_gather(
                aead::Nonce::assume_unique_for_key(*nonce),
                aead::Aad::from(aad),
                ciphertext,
                tag,
                out,
            )
            .map_err(|_| CryptoError)?;
        Ok(body)
    }
}

impl AesGcmCipher {
    /// ring's in-place seal of `body`, the tag stored into `tag_out`: a
    /// fixed-size array, so one 16-byte store rather than a call to
    /// `memcpy`.
    #[inline]
    fn seal_body(
        &self,
        nonce: &[u8; IV_LEN],
        aad: &[u8],
        body: &mut [u8],
        tag_out: &mut [u8; TAG_LEN],
    ) -> Result<(), CryptoError> {
        let tag = self
            .key
            .seal_in_place_separate_tag(
                ring_aead::Nonce::assume_unique_for_key(*nonce),
                ring_aead::Aad::from(aad),
                body,
            )
            .map_err(|_| CryptoError)?;
        tag_out.copy_from_slice(tag.as_ref());
        Ok(())
    }
}

impl PacketCipher for AesGcmCipher {
    fn seal_in_place(
        &self,
        seq: u64,
        aad: &[u8; RECORD_HEADER_LEN],
        buf: &mut [u8],
    ) -> Result<(), CryptoError> {
        self.seal_raw(&self.nonce(seq), aad, buf)
    }

    fn open_in_place(
        &self,
        seq: u64,
        aad: &[u8; RECORD_HEADER_LEN],
        buf: &mut [u8],
    ) -> Result<usize, CryptoError> {
        self.open_raw(&self.nonce(seq), aad, buf)
    }

    fn seal_to(
        &self,
        seq: u64,
        aad: &[u8; RECORD_HEADER_LEN],
        plaintext: &[u8],
        extra: &[u8],
        out: &mut [u8],
    ) -> Result<(), CryptoError> {
        let nonce = self.nonce(seq);
        if plaintext.len() >= SEAL_ONE_PASS_FROM {
            // One pass: read the caller's bytes, write ciphertext (no copy
            // into `out` first).
            return self.seal_raw_to(&nonce, aad, plaintext, extra, out);
        }
        // A small record: copied and sealed in place by ring, which costs
        // less than aws-lc's one pass (see `SEAL_ONE_PASS_FROM`).
        let (body, tag_out) = out.split_last_chunk_mut::<TAG_LEN>().ok_or(CryptoError)?;
        if body.len() != plaintext.len() + extra.len() {
            return Err(CryptoError);
        }
        let (data, extra_out) = body.split_at_mut(plaintext.len());
        data.copy_from_slice(plaintext);
        // `extra` is the content type alone unless the record is padded:
        // one store, not a call to `memcpy`.
        match (extra, &mut *extra_out) {
            ([content_type], [slot]) => *slot = *content_type,
            _ => extra_out.copy_from_slice(extra),
        }
        self.seal_body(&nonce, aad, body, tag_out)
    }

    /// ring decrypts from `buf[from..]` to `buf[..]` in its one pass.
    fn open_within(
        &self,
        seq: u64,
        aad: &[u8; RECORD_HEADER_LEN],
        buf: &mut [u8],
        from: usize,
    ) -> Result<usize, CryptoError> {
        self.key
            .open_within(
                ring_aead::Nonce::assume_unique_for_key(self.nonce(seq)),
                ring_aead::Aad::from(aad),
                buf,
                from..,
            )
            .map(|plaintext| plaintext.len())
            .map_err(|_| CryptoError)
    }

    fn open_to(
        &self,
        seq: u64,
        aad: &[u8; RECORD_HEADER_LEN],
        ciphertext: &[u8],
        out: &mut [u8],
    ) -> Result<usize, CryptoError> {
        // The trait's contract: room for the whole ciphertext, whichever
        // path runs.
        let work = out.get_mut(..ciphertext.len()).ok_or(CryptoError)?;
        let nonce = self.nonce(seq);
        let body_len = ciphertext.len().checked_sub(TAG_LEN).ok_or(CryptoError)?;
        if body_len >= OPEN_ONE_PASS_FROM {
            return self.open_raw_to(&nonce, aad, ciphertext, work);
        }
        // A small record: the body copied and opened in place by ring, the
        // tag read where it lies (see `OPEN_ONE_PASS_FROM`).
        let (body, tag) = ciphertext.split_at(body_len);
        let tag = ring_aead::Tag::try_from(tag).map_err(|_| CryptoError)?;
        let work = &mut work[..body_len];
        work.copy_from_slice(body);
        self.key
            .open_in_place_separate_tag(
                ring_aead::Nonce::assume_unique_for_key(nonce),
                ring_aead::Aad::from(aad),
                tag,
                work,
                0..,
            )
            .map(|plaintext| plaintext.len())
            .map_err(|_| CryptoError)
    }

    fn control_tag(&self, packet: &[u8]) -> [u8; TAG_LEN] {
        self.control_mac.tag(packet)
    }

    fn record_limit(&self) -> u64 {
        AES_GCM_RECORD_LIMIT
    }

    fn offload_key(&self) -> Option<OffloadKey> {
        let suite = match self.algorithm {
            AeadAlgorithm::Aes128Gcm => OffloadSuite::Aes128Gcm,
            AeadAlgorithm::Aes256Gcm => OffloadSuite::Aes256Gcm,
        };
        Some(OffloadKey {
            suite,
            key: self.traffic.key().to_vec(),
            iv: *self.traffic.iv(),
        })
    }

    /// GCM's keystream: AES-CTR from counter block 2 (SP 800-38D's
    /// inc32(J0)) under the record nonce, `offset` bytes in.
    fn apply_keystream(&self, seq: u64, offset: usize, buf: &mut [u8]) -> Result<(), CryptoError> {
        let ctr = self.ctr_key().ok_or(CryptoError)?;
        let nonce = self.nonce(seq);
        let block = |index: usize| {
            let mut b = [0u8; 16];
            b[..IV_LEN].copy_from_slice(&nonce);
            // A record is at most ~1041 blocks: the 32-bit counter never
            // wraps, so aws-lc's 128-bit increment agrees with GCM's.
            b[IV_LEN..].copy_from_slice(&(2 + index as u32).to_be_bytes());
            b
        };
        let skip = offset % 16;
        let mut done = 0;
        if skip != 0 {
            let mut first = [0u8; 16];
            let context = EncryptionContext::Iv128(block(offset / 16).into());
            ctr.less_safe_encrypt(&mut first, context)
                .map_err(|_| CryptoError)?;
            done = (16 - skip).min(buf.len());
            for (b, k) in buf[..done].iter_mut().zip(&first[skip..]) {
                *b ^= k;
            }
        }
        if done < buf.len() {
            let context = EncryptionContext::Iv128(block(offset.div_ceil(16)).into());
            ctr.less_safe_encrypt(&mut buf[done..], context)
                .map_err(|_| CryptoError)?;
        }
        Ok(())
    }
}

impl fmt::Debug for AesGcmCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AesGcmCipher")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: [u8; RECORD_HEADER_LEN] = [0x17, 0x03, 0x03, 0x00, 0x20];

    fn cipher(algorithm: AeadAlgorithm, fill: u8) -> AesGcmCipher {
        let key = vec![fill; algorithm.key_len()];
        AesGcmCipher::new(&TrafficKey::new(algorithm, &key, [fill ^ 0x5a; IV_LEN]).unwrap())
    }

    fn sealed(c: &AesGcmCipher, seq: u64, plaintext: &[u8]) -> Vec<u8> {
        let mut buf = plaintext.to_vec();
        buf.extend_from_slice(&[0; TAG_LEN]);
        c.seal_in_place(seq, &HEADER, &mut buf).unwrap();
        buf
    }

    #[test]
    fn nonce_xors_big_endian_seq_into_the_last_eight_bytes() {
        let iv = [0xff; IV_LEN];
        let nonce = record_nonce(&iv, 0x0102_0304_0506_0708);
        assert_eq!(
            nonce,
            [0xff, 0xff, 0xff, 0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8, 0xf7]
        );
        assert_eq!(record_nonce(&iv, 0), iv);
    }

    #[test]
    fn the_kept_nonce_base_gives_the_record_nonce() {
        let iv = [
            0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xa9, 0xba, 0xcb,
        ];
        let base = NonceBase::new(&iv);
        for seq in [0, 1, 0x1234 << 16 | 7, u64::MAX] {
            assert_eq!(base.nonce(seq), record_nonce(&iv, seq), "{seq:#x}");
        }
    }

    /// `open_within` opens a record lying after other bytes down to the
    /// start of the buffer, as the trait's default (open in place, then
    /// move) does, and refuses what that refuses.
    #[test]
    fn open_within_matches_open_then_move() {
        let c = cipher(AeadAlgorithm::Aes128Gcm, 12);
        for len in [0, 1, 15, 16, 17, 65, 300] {
            let plain: Vec<u8> = (0..len).map(|i| (i * 5) as u8).collect();
            let record = sealed(&c, 9, &plain);
            for from in [0, 1, 5, 16] {
                let mut buf = vec![0xcc; from];
                buf.extend_from_slice(&record);
                let n = c.open_within(9, &HEADER, &mut buf, from).unwrap();
                assert_eq!(&buf[..n], &plain[..], "{len} bytes from {from}");
                let mut bad = vec![0xcc; from];
                bad.extend_from_slice(&record);
                bad[from] ^= 1;
                assert_eq!(c.open_within(9, &HEADER, &mut bad, from), Err(CryptoError));
                let mut other_seq = vec![0xcc; from];
                other_seq.extend_from_slice(&record);
                let wrong = c.open_within(10, &HEADER, &mut other_seq, from);
                assert_eq!(wrong, Err(CryptoError));
            }
        }
    }

    /// Whole segments of several padded records open in place (each record
    /// decrypted down over the bytes before it) to what opening them into
    /// another buffer gives.
    #[test]
    fn segments_open_in_place_as_into_a_buffer() {
        use smt_proto::record::{open_segment, open_segment_in_place, seal_message};
        use smt_proto::record::{MessageLayout, SeqLayout};
        let c = cipher(AeadAlgorithm::Aes256Gcm, 13);
        for (len, padded, record_size) in [
            (0, 0, 64),
            (64, 64, 1024),
            (100, 250, 64),
            (3000, 3001, 700),
        ] {
            let data: Vec<u8> = (0..len).map(|i| (i * 11) as u8).collect();
            let layout = MessageLayout::new(len, padded, record_size);
            let wire = seal_message(&c, SeqLayout::DEFAULT, 5, &data, layout)
                .unwrap()
                .wire;
            let mut out = Vec::new();
            let into = open_segment(&c, SeqLayout::DEFAULT, 5, 0, &wire, &mut out);
            let mut buf = wire.clone();
            let in_place = open_segment_in_place(&c, SeqLayout::DEFAULT, 5, 0, &mut buf);
            assert_eq!(into, in_place, "{len} bytes");
            assert_eq!((&out, &buf), (&data, &data), "{len} bytes");
            let mut bad = wire.clone();
            let last = bad.len() - 1;
            bad[last] ^= 1;
            let refused = open_segment_in_place(&c, SeqLayout::DEFAULT, 5, 0, &mut bad);
            assert!(refused.is_err() && bad.is_empty(), "{len} bytes");
        }
    }

    #[test]
    fn round_trip_both_algorithms() {
        for algorithm in [AeadAlgorithm::Aes128Gcm, AeadAlgorithm::Aes256Gcm] {
            let c = cipher(algorithm, 1);
            let plaintext = b"hello, records\x17";
            let mut buf = sealed(&c, 42, plaintext);
            assert_ne!(
                &buf[..plaintext.len()],
                plaintext,
                "{algorithm}: not encrypted"
            );
            let n = c.open_in_place(42, &HEADER, &mut buf).unwrap();
            assert_eq!(&buf[..n], plaintext);
        }
    }

    /// The keystream from any offset turns a sealed record's ciphertext
    /// back into its plaintext there, and the plaintext into ciphertext.
    #[test]
    fn keystream_at_any_offset_matches_the_seal() {
        for algorithm in [AeadAlgorithm::Aes128Gcm, AeadAlgorithm::Aes256Gcm] {
            let c = cipher(algorithm, 3);
            let plain: Vec<u8> = (0..200u32).map(|i| (i * 13) as u8).collect();
            let sealed = sealed(&c, 77, &plain);
            for (from, to) in [(0, 200), (0, 1), (5, 21), (16, 48), (17, 200), (199, 200)] {
                let mut part = sealed[from..to].to_vec();
                c.apply_keystream(77, from, &mut part).unwrap();
                assert_eq!(part, plain[from..to], "{algorithm} {from}..{to}");
                c.apply_keystream(77, from, &mut part).unwrap();
                assert_eq!(part, sealed[from..to]);
            }
        }
    }

    #[test]
    fn offload_key_is_the_traffic_key() {
        let key = TrafficKey::new(AeadAlgorithm::Aes256Gcm, &[9; 32], [4; IV_LEN]).unwrap();
        let k = AesGcmCipher::new(&key).offload_key().unwrap();
        assert_eq!(
            (k.suite, &k.key[..], k.iv),
            (OffloadSuite::Aes256Gcm, &[9; 32][..], [4; IV_LEN])
        );
    }

    #[test]
    fn empty_plaintext_seals_to_a_bare_tag() {
        let c = cipher(AeadAlgorithm::Aes128Gcm, 2);
        let mut buf = sealed(&c, 0, &[]);
        assert_eq!(buf.len(), TAG_LEN);
        assert_eq!(c.open_in_place(0, &HEADER, &mut buf), Ok(0));
    }

    #[test]
    fn buffers_shorter_than_a_tag_are_rejected() {
        let c = cipher(AeadAlgorithm::Aes128Gcm, 3);
        let mut short = [0; TAG_LEN - 1];
        assert_eq!(c.seal_in_place(0, &HEADER, &mut short), Err(CryptoError));
        assert_eq!(c.open_in_place(0, &HEADER, &mut short), Err(CryptoError));
        assert_eq!(c.open_in_place(0, &HEADER, &mut []), Err(CryptoError));
    }

    #[test]
    fn every_single_bit_flip_is_caught() {
        let c = cipher(AeadAlgorithm::Aes256Gcm, 4);
        let record = sealed(&c, 7, b"sixteen bytes!!\x17");
        for bit in 0..record.len() * 8 {
            let mut bad = record.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(
                c.open_in_place(7, &HEADER, &mut bad),
                Err(CryptoError),
                "bit {bit}"
            );
        }
    }

    #[test]
    fn wrong_seq_header_or_key_is_caught() {
        let c = cipher(AeadAlgorithm::Aes128Gcm, 5);
        let record = sealed(&c, 1 << 16 | 3, b"payload\x17");
        let mut other_header = HEADER;
        other_header[4] ^= 1;
        let cases: [(&AesGcmCipher, u64, &[u8; 5]); 4] = [
            (&c, 1 << 16 | 4, &HEADER),
            (&c, 2 << 16 | 3, &HEADER),
            (&c, 1 << 16 | 3, &other_header),
            (&cipher(AeadAlgorithm::Aes128Gcm, 6), 1 << 16 | 3, &HEADER),
        ];
        for (who, seq, header) in cases {
            let mut buf = record.clone();
            assert_eq!(
                who.open_in_place(seq, header, &mut buf),
                Err(CryptoError),
                "seq {seq:#x}"
            );
        }
    }

    #[test]
    fn trait_methods_are_raw_methods_with_the_record_nonce() {
        let c = cipher(AeadAlgorithm::Aes128Gcm, 7);
        let seq = 0xdead_beef_0001;
        let via_trait = sealed(&c, seq, b"same\x17");
        let mut via_raw = b"same\x17".to_vec();
        via_raw.extend_from_slice(&[0; TAG_LEN]);
        c.seal_raw(
            &record_nonce(&[7 ^ 0x5a; IV_LEN], seq),
            &HEADER,
            &mut via_raw,
        )
        .unwrap();
        assert_eq!(via_trait, via_raw);
    }

    /// The out-of-place paths produce and accept exactly the bytes of the
    /// in-place ones (which the RFC 8448 and NIST vectors pin down), for
    /// both algorithms and lengths around the AES block size.
    #[test]
    fn out_of_place_seal_and_open_match_in_place() {
        for algorithm in [AeadAlgorithm::Aes128Gcm, AeadAlgorithm::Aes256Gcm] {
            let c = cipher(algorithm, 9);
            // Both sides of each path switch (`OPEN_ONE_PASS_FROM`,
            // `SEAL_ONE_PASS_FROM`) included.
            for len in [0, 1, 15, 16, 17, 100, 1023, 1024, 4095, 4096, 16_384] {
                let data: Vec<u8> = (0..len).map(|i| (i * 31) as u8).collect();
                let extra = [0x17, 0, 0, 0];
                let mut body = data.clone();
                body.extend_from_slice(&extra);
                let expected = sealed(&c, 77, &body);
                let mut out = vec![0xaa; expected.len()];
                c.seal_to(77, &HEADER, &data, &extra, &mut out).unwrap();
                assert_eq!(out, expected, "{algorithm}, {len} bytes");
                let mut plain = vec![0x55; expected.len() + 3];
                let n = c.open_to(77, &HEADER, &expected, &mut plain).unwrap();
                assert_eq!(&plain[..n], &body[..], "{algorithm}, {len} bytes");
                let mut bad = expected.clone();
                bad[0] ^= 1;
                assert_eq!(c.open_to(77, &HEADER, &bad, &mut plain), Err(CryptoError));
                let short = &mut plain[..expected.len() - 1];
                assert_eq!(c.open_to(77, &HEADER, &expected, short), Err(CryptoError));
            }
        }
    }

    /// `seal_to` wants `out` exactly as long as the sealed body, on both
    /// paths; anything else is an error, never a record with the tag in
    /// the wrong place.
    #[test]
    fn seal_to_rejects_a_wrong_output_length() {
        let c = cipher(AeadAlgorithm::Aes128Gcm, 11);
        for len in [64, 8192] {
            let data = vec![7; len];
            for out_len in [len + TAG_LEN, len + 1 + TAG_LEN + 1, len] {
                let mut out = vec![0; out_len];
                assert_eq!(
                    c.seal_to(1, &HEADER, &data, &[0x17], &mut out),
                    Err(CryptoError),
                    "{len} bytes into {out_len}"
                );
            }
        }
    }

    #[test]
    fn control_tag_is_deterministic_and_key_dependent() {
        let a = cipher(AeadAlgorithm::Aes128Gcm, 8);
        let packet = b"a control packet";
        assert_eq!(
            a.control_tag(packet),
            cipher(AeadAlgorithm::Aes128Gcm, 8).control_tag(packet)
        );
        assert_ne!(
            a.control_tag(packet),
            cipher(AeadAlgorithm::Aes128Gcm, 9).control_tag(packet)
        );
        assert_ne!(a.control_tag(packet), a.control_tag(b"a control packet!"));
        assert!(a.verify_control_tag(packet, &a.control_tag(packet)).is_ok());
        let mut bad = a.control_tag(packet);
        bad[15] ^= 0x80;
        assert_eq!(a.verify_control_tag(packet, &bad), Err(CryptoError));
    }

    #[test]
    fn control_key_depends_on_the_iv_too() {
        let key = [0x11; 16];
        let one =
            AesGcmCipher::new(&TrafficKey::new(AeadAlgorithm::Aes128Gcm, &key, [1; 12]).unwrap());
        let two =
            AesGcmCipher::new(&TrafficKey::new(AeadAlgorithm::Aes128Gcm, &key, [2; 12]).unwrap());
        assert_ne!(one.control_tag(b"p"), two.control_tag(b"p"));
    }

    #[test]
    fn record_limit_is_rfc8446_aes_gcm_limit() {
        let limit = cipher(AeadAlgorithm::Aes128Gcm, 10).record_limit();
        assert_eq!(limit, AES_GCM_RECORD_LIMIT);
        // 2^24.5 = 2^24 * sqrt(2); the limit is its floor.
        let exact = 2f64.powf(24.5);
        assert!((limit as f64) <= exact && exact < (limit + 1) as f64);
    }

    #[test]
    fn debug_never_prints_key_material() {
        let c = cipher(AeadAlgorithm::Aes256Gcm, 0xab);
        let shown = format!("{c:?} {c:#?}");
        assert!(shown.contains("Aes256Gcm"), "{shown}");
        assert!(
            !shown.contains("171") && !shown.to_lowercase().contains("ab,"),
            "{shown}"
        );
    }
}
