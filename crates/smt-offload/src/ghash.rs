//! GHASH, the authenticator inside AES-GCM (NIST SP 800-38D §6.4), kept as
//! running state so a record's tag can be built from pieces that arrive in
//! different segments, as a NIC's crypto engine does.
//!
//! aws-lc-rs offers AES-GCM only as a one-shot seal over a whole buffer, so
//! the engine's streaming path pairs aws-lc-rs's AES-CTR with this GHASH.
//! Blocks are 128-bit big-endian integers: the first bit of the block is
//! the most significant bit of the `u128`.

/// The reduction constant R = 11100001 || 0^120 (SP 800-38D §6.3).
const R: u128 = 0xe1 << 120;

/// Block length of AES and GHASH.
pub(crate) const BLOCK: usize = 16;

/// Running GHASH over AAD then ciphertext, for one record.
#[derive(Clone, Debug)]
pub(crate) struct Ghash {
    h: u128,
    acc: u128,
    /// Ciphertext bytes not yet forming a whole block.
    pending: [u8; BLOCK],
    pending_len: usize,
    aad_len: u64,
    text_len: u64,
}

impl Ghash {
    /// Starts a hash under the hash subkey `h` = E_K(0^128), absorbing the
    /// whole associated data (zero-padded to a block, as GCM specifies).
    pub(crate) fn new(h: [u8; BLOCK], aad: &[u8]) -> Self {
        let mut hash = Self {
            h: u128::from_be_bytes(h),
            acc: 0,
            pending: [0; BLOCK],
            pending_len: 0,
            aad_len: aad.len() as u64,
            text_len: 0,
        };
        for chunk in aad.chunks(BLOCK) {
            hash.absorb(padded(chunk));
        }
        hash
    }

    /// Absorbs ciphertext; pieces may have any length.
    pub(crate) fn update(&mut self, mut text: &[u8]) {
        self.text_len += text.len() as u64;
        if self.pending_len > 0 {
            let take = (BLOCK - self.pending_len).min(text.len());
            self.pending[self.pending_len..self.pending_len + take].copy_from_slice(&text[..take]);
            self.pending_len += take;
            text = &text[take..];
            if self.pending_len < BLOCK {
                return;
            }
            self.absorb(self.pending);
            self.pending_len = 0;
        }
        let mut blocks = text.chunks_exact(BLOCK);
        for block in &mut blocks {
            self.absorb(padded(block));
        }
        let rest = blocks.remainder();
        self.pending[..rest.len()].copy_from_slice(rest);
        self.pending_len = rest.len();
    }

    /// Pads the last partial block, absorbs the length block and returns
    /// S, which XORed with E_K(J0) is the tag.
    pub(crate) fn finish(mut self) -> [u8; BLOCK] {
        if self.pending_len > 0 {
            self.absorb(padded(&self.pending[..self.pending_len]));
        }
        let lengths = (u128::from(self.aad_len * 8) << 64) | u128::from(self.text_len * 8);
        self.absorb(lengths.to_be_bytes());
        self.acc.to_be_bytes()
    }

    fn absorb(&mut self, block: [u8; BLOCK]) {
        self.acc = gf_mul(self.acc ^ u128::from_be_bytes(block), self.h);
    }
}

/// `chunk` (at most a block) followed by zeros.
fn padded(chunk: &[u8]) -> [u8; BLOCK] {
    let mut block = [0; BLOCK];
    block[..chunk.len()].copy_from_slice(chunk);
    block
}

/// Multiplication in GF(2^128) with GCM's bit order, SP 800-38D §6.3
/// Algorithm 1: walk X's bits from the first; V is Y times x^i.
fn gf_mul(x: u128, y: u128) -> u128 {
    let mut z = 0;
    let mut v = y;
    for i in 0..128 {
        if (x >> (127 - i)) & 1 == 1 {
            z ^= v;
        }
        v = if v & 1 == 0 { v >> 1 } else { (v >> 1) ^ R };
    }
    z
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The multiplicative identity in GCM's bit order is the block whose
    /// first bit is set.
    #[test]
    fn one_is_the_leading_bit() {
        let one = 1u128 << 127;
        let y = 0x0388_dace_60b6_a392_f328_c2b9_71b2_fe78;
        assert_eq!(gf_mul(one, y), y);
        assert_eq!(gf_mul(y, one), y);
    }

    #[test]
    fn multiplication_commutes() {
        let a = 0x66e9_4bd4_ef8a_2c3b_884c_fa59_ca34_2b2e;
        let b = 0x0388_dace_60b6_a392_f328_c2b9_71b2_fe78;
        assert_eq!(gf_mul(a, b), gf_mul(b, a));
    }

    /// Test case 2 of the GCM specification (McGrew and Viega, "The
    /// Galois/Counter Mode of Operation", appendix B): key 0^128, IV 0^96,
    /// one zero plaintext block, no AAD. H, C and GHASH(H, A, C) are
    /// printed there; GHASH also equals T XOR E_K(J0) of that case.
    #[test]
    fn gcm_spec_test_case_2() {
        let h = 0x66e9_4bd4_ef8a_2c3b_884c_fa59_ca34_2b2e_u128.to_be_bytes();
        let c = 0x0388_dace_60b6_a392_f328_c2b9_71b2_fe78_u128.to_be_bytes();
        let mut hash = Ghash::new(h, &[]);
        hash.update(&c);
        assert_eq!(
            u128::from_be_bytes(hash.finish()),
            0xf38c_bb1a_d692_23dc_c345_7ae5_b6b0_f885
        );
    }

    /// Feeding the same bytes in any split gives the same hash.
    #[test]
    fn split_does_not_matter() {
        let h = [0x42; BLOCK];
        let text: Vec<u8> = (0..=200u8).collect();
        let mut whole = Ghash::new(h, b"header");
        whole.update(&text);
        let expected = whole.finish();
        for split in [0, 1, 15, 16, 17, 100, 201] {
            let mut parts = Ghash::new(h, b"header");
            parts.update(&text[..split]);
            parts.update(&text[split..]);
            assert_eq!(parts.finish(), expected, "split at {split}");
        }
    }
}
