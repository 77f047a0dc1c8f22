//! AES-GCM as a NIC's crypto engine applies it to TLS 1.3 records: a
//! one-shot seal when a whole record passes at once, and a streaming form
//! (AES-CTR at any byte position plus a running [`Ghash`]) when a record
//! is split across segments or rebuilt from a resync's replayed prefix.
//!
//! Both produce the bytes RFC 8446 §5.2 specifies: nonce = IV XOR the
//! 64-bit sequence number, AAD = the 5-byte record header, the tag after
//! the ciphertext. The tests prove the two forms agree byte for byte.

use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::cipher::{self, EncryptingKey, EncryptionContext, UnboundCipherKey};

use crate::crypto_info::{CipherSuite, CryptoInfo, IV_LEN};

/// Block length of AES.
const BLOCK: usize = 16;

/// Length of the GCM tag TLS 1.3 uses.
pub const TAG_LEN: usize = 16;

/// A flow context's key schedule: the AEAD for whole records and the raw
/// AES-CTR key plus hash subkey for records that arrive in pieces.
pub(crate) struct RecordCipher {
    aead: LessSafeKey,
    ctr: EncryptingKey,
    iv: [u8; IV_LEN],
}

impl RecordCipher {
    /// Expands the key twice (AEAD and CTR forms).
    pub(crate) fn new(info: &CryptoInfo) -> Self {
        let (aead_alg, ctr_alg) = match info.suite() {
            CipherSuite::Aes128Gcm => (&aead::AES_128_GCM, &cipher::AES_128),
            CipherSuite::Aes256Gcm => (&aead::AES_256_GCM, &cipher::AES_256),
        };
        // NOTE(unwrap): `CryptoInfo::new` checked the key length against
        // this very suite, and AES accepts every key of the right length.
        let aead_key = UnboundKey::new(aead_alg, info.key()).expect("CryptoInfo checked the key");
        let ctr_key = UnboundCipherKey::new(ctr_alg, info.key())
            .and_then(EncryptingKey::ctr)
            .expect("CryptoInfo checked the key");
        Self {
            aead: LessSafeKey::new(aead_key),
            ctr: ctr_key,
            iv: *info.iv(),
        }
    }

    /// The record nonce of RFC 8446 §5.3.
    pub(crate) fn nonce(&self, seq: u64) -> [u8; IV_LEN] {
        let mut nonce = self.iv;
        for (n, s) in nonce[IV_LEN - 8..].iter_mut().zip(seq.to_be_bytes()) {
            *n ^= s;
        }
        nonce
    }

    /// Seals a whole record body in place: `body` is the plaintext followed
    /// by [`TAG_LEN`] bytes that receive the tag. `body` is at least a tag
    /// long (the caller parsed the header).
    pub(crate) fn seal_whole(&self, seq: u64, header: &[u8], body: &mut [u8]) {
        let (text, tag_out) = body.split_at_mut(body.len() - TAG_LEN);
        let nonce = Nonce::assume_unique_for_key(self.nonce(seq));
        // NOTE(unwrap): sealing fails only for inputs past GCM's 64 GiB
        // limit; a record body is at most 2^14 + 256 bytes.
        let tag = self
            .aead
            .seal_in_place_separate_tag(nonce, Aad::from(header), text)
            .expect("a TLS record is far below GCM's length limit");
        tag_out.copy_from_slice(tag.as_ref());
    }

    /// Opens a whole record body in place: `body` is the ciphertext
    /// followed by the tag. On success the ciphertext part holds the
    /// plaintext; on failure `body` is left as it was (a NIC that cannot
    /// authenticate a record hands its bytes up untouched).
    pub(crate) fn open_whole(&self, seq: u64, header: &[u8], body: &mut [u8]) -> bool {
        let mut copy = body.to_vec();
        if !self.open_detached(self.nonce(seq), header, &mut copy) {
            return false;
        }
        let text = body.len() - TAG_LEN;
        body[..text].copy_from_slice(&copy[..text]);
        true
    }

    /// Seals `text` in place (it becomes ciphertext) and returns the tag.
    pub(crate) fn seal_detached(
        &self,
        nonce: [u8; IV_LEN],
        aad: &[u8],
        text: &mut [u8],
    ) -> [u8; TAG_LEN] {
        // NOTE(unwrap): sealing fails only past GCM's 64 GiB limit; what
        // passes here is at most a record (or a published test vector).
        let tag = self
            .aead
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), text)
            .expect("far below GCM's length limit");
        let mut out = [0; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        out
    }

    /// Checks the tag at the end of `sealed` (ciphertext || tag) and
    /// decrypts it in place; `sealed` is scratch afterwards either way.
    pub(crate) fn open_detached(&self, nonce: [u8; IV_LEN], aad: &[u8], sealed: &mut [u8]) -> bool {
        self.aead
            .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(aad), sealed)
            .is_ok()
    }

    /// Picks up opening a record whose first ciphertext bytes (`text`)
    /// went by before its sequence number was known.
    pub(crate) fn resume(&self, seq: u64, header: &[u8], text: Vec<u8>) -> GcmStream {
        GcmStream {
            nonce: self.nonce(seq),
            pos: text.len() as u64,
            aad: header.to_vec(),
            text,
        }
    }

    /// Starts sealing a record whose body will arrive in pieces.
    pub(crate) fn start(&self, seq: u64, header: &[u8]) -> GcmStream {
        GcmStream::new(self.nonce(seq), header)
    }

    /// AES-CTR keystream XORed into `buf`, which starts `pos` bytes into
    /// the plaintext of the message under `nonce` (counter block 2 is the
    /// first, SP 800-38D's inc32(J0)).
    fn ctr_xor(&self, nonce: &[u8; IV_LEN], pos: u64, buf: &mut [u8]) {
        let mut done = 0;
        let skip = (pos % BLOCK as u64) as usize;
        if skip != 0 {
            let keystream = self.block(counter_block(nonce, first_counter(pos)));
            done = (BLOCK - skip).min(buf.len());
            xor(&mut buf[..done], &keystream[skip..skip + done]);
        }
        if done == buf.len() {
            return;
        }
        let counter = counter_block(nonce, first_counter(pos + done as u64));
        self.ctr_apply(counter, &mut buf[done..]);
    }

    /// E_K(block), computed as the CTR keystream of one zero block.
    fn block(&self, block: u128) -> [u8; BLOCK] {
        let mut out = [0; BLOCK];
        self.ctr_apply(block, &mut out);
        out
    }

    fn ctr_apply(&self, counter: u128, buf: &mut [u8]) {
        let context = EncryptionContext::Iv128(counter.to_be_bytes().into());
        // NOTE(unwrap): CTR takes any length, and the context is the
        // 128-bit IV CTR mode asks for.
        self.ctr
            .less_safe_encrypt(buf, context)
            .expect("AES-CTR with a 128-bit counter block");
    }
}

/// The counter of the block holding plaintext byte `pos`.
///
/// aws-lc's CTR increments the whole 128-bit block while GCM's inc32
/// increments only the low 32 bits. They agree here: a record has at most
/// 2^14 + 256 bytes, ~1041 blocks, so the low word never wraps.
fn first_counter(pos: u64) -> u32 {
    2 + (pos / BLOCK as u64) as u32
}

/// nonce || be32(counter): GCM's counter block for a 96-bit IV.
fn counter_block(nonce: &[u8; IV_LEN], counter: u32) -> u128 {
    let mut block = [0; BLOCK];
    block[..IV_LEN].copy_from_slice(nonce);
    block[IV_LEN..].copy_from_slice(&counter.to_be_bytes());
    u128::from_be_bytes(block)
}

fn xor(buf: &mut [u8], keystream: &[u8]) {
    for (b, k) in buf.iter_mut().zip(keystream) {
        *b ^= k;
    }
}

/// One record's AES-GCM in progress, as a NIC keeps it between two
/// segments that split the record: the counter position (how much of the
/// record body has passed) and what the tag still needs.
///
/// A NIC carries the running GHASH over the ciphertext. The model keeps
/// the record's bytes so far instead (at most 2^14 + 256) and computes the
/// tag at the record's end with aws-lc-rs's one-shot AES-GCM, whose
/// carry-less-multiply GHASH is an order of magnitude faster than a
/// portable one: the bytes on the wire are the same, and a model NIC
/// running on the application's cores should not be slower than it must.
/// Each piece is en- or decrypted at once with AES-CTR at its position.
#[derive(Clone, Debug)]
pub(crate) struct GcmStream {
    nonce: [u8; IV_LEN],
    pos: u64,
    aad: Vec<u8>,
    /// Sealing: the plaintext so far. Opening: the ciphertext so far.
    text: Vec<u8>,
}

impl GcmStream {
    fn new(nonce: [u8; IV_LEN], aad: &[u8]) -> Self {
        Self {
            nonce,
            pos: 0,
            aad: aad.to_vec(),
            text: Vec::new(),
        }
    }

    /// Starts a stream under an explicit 96-bit nonce and AAD of any length
    /// (published AES-GCM vectors use both).
    pub(crate) fn with_nonce(_cipher: &RecordCipher, nonce: [u8; IV_LEN], aad: &[u8]) -> Self {
        Self::new(nonce, aad)
    }

    /// Makes room for `len` bytes of the record's text up front.
    pub(crate) fn reserve(&mut self, len: usize) {
        self.text.reserve(len);
    }

    /// Encrypts the next `buf.len()` plaintext bytes in place.
    pub(crate) fn encrypt(&mut self, cipher: &RecordCipher, buf: &mut [u8]) {
        self.text.extend_from_slice(buf);
        cipher.ctr_xor(&self.nonce, self.pos, buf);
        self.pos += buf.len() as u64;
    }

    /// Decrypts the next `buf.len()` ciphertext bytes in place. Nothing is
    /// authenticated until [`GcmStream::verify`].
    pub(crate) fn decrypt(&mut self, cipher: &RecordCipher, buf: &mut [u8]) {
        self.text.extend_from_slice(buf);
        cipher.ctr_xor(&self.nonce, self.pos, buf);
        self.pos += buf.len() as u64;
    }

    /// The tag over everything encrypted.
    pub(crate) fn finish(mut self, cipher: &RecordCipher) -> [u8; TAG_LEN] {
        cipher.seal_detached(self.nonce, &self.aad, &mut self.text)
    }

    /// Whether `tag` authenticates everything decrypted.
    pub(crate) fn verify(mut self, cipher: &RecordCipher, tag: &[u8; TAG_LEN]) -> bool {
        self.text.extend_from_slice(tag);
        cipher.open_detached(self.nonce, &self.aad, &mut self.text)
    }
}

impl std::fmt::Debug for RecordCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordCipher").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cipher(fill: u8) -> RecordCipher {
        let info = CryptoInfo::new(CipherSuite::Aes128Gcm, &[fill; 16], [fill; IV_LEN], 0);
        RecordCipher::new(&info.unwrap())
    }

    /// Test case 2 of the GCM specification: K = 0, IV = 0, P = 0^128.
    #[test]
    fn gcm_spec_test_case_2() {
        let c = cipher(0);
        let mut stream = GcmStream::with_nonce(&c, [0; IV_LEN], &[]);
        let mut buf = [0; 16];
        stream.encrypt(&c, &mut buf);
        assert_eq!(
            u128::from_be_bytes(buf),
            0x0388_dace_60b6_a392_f328_c2b9_71b2_fe78
        );
        assert_eq!(
            u128::from_be_bytes(stream.finish(&c)),
            0xab6e_47d4_2cec_13bd_f53a_67b2_1257_bddf
        );
    }

    /// The streaming form, fed in any pieces, equals the one-shot seal.
    #[test]
    fn streaming_equals_one_shot() {
        let c = cipher(7);
        let header = [0x17, 0x03, 0x03, 0x01, 0x10];
        let plain: Vec<u8> = (0..256u32).map(|i| (i * 7) as u8).collect();
        let mut whole = plain.clone();
        whole.extend_from_slice(&[0; TAG_LEN]);
        c.seal_whole(9, &header, &mut whole);
        for cuts in [[0, 0], [1, 2], [15, 16], [16, 33], [100, 255], [256, 256]] {
            let mut buf = plain.clone();
            let mut stream = c.start(9, &header);
            let (a, rest) = buf.split_at_mut(cuts[0]);
            let (b, d) = rest.split_at_mut(cuts[1] - cuts[0]);
            for piece in [a, b, d] {
                stream.encrypt(&c, piece);
            }
            buf.extend_from_slice(&stream.finish(&c));
            assert_eq!(buf, whole, "cuts {cuts:?}");
        }
    }
}
