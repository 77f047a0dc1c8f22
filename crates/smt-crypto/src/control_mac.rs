//! The control-packet MAC (docs/protocol.md § 5): AES-CMAC (RFC 4493,
//! NIST SP 800-38B) under a key derived from, and distinct from, the
//! direction's traffic key.
//!
//! ```text
//! prk         = HKDF-Extract(salt = "smt control v2", ikm = key || iv)   (SHA-256)
//! control_key = HKDF-Expand(prk, info = "smt ctrl", len(key))
//! tag         = AES-CMAC(control_key, packet)                            (16 bytes)
//! ```
//!
//! Why CMAC: control packets carry no sequence number, so a nonce-based MAC
//! (GMAC) would need a nonce on the wire or state both ends keep in step,
//! and a repeated GMAC nonce gives away the hash key, after which any
//! packet can be forged. CMAC is a deterministic PRF: no nonce, nothing to
//! keep unique, and a 28–40 byte packet costs three or four AES blocks. The
//! AES key size follows the traffic key's (AES-128-CMAC for AES-128-GCM
//! sessions, AES-256-CMAC for AES-256-GCM ones).

use aes::cipher::consts::U16;
use aes::cipher::{BlockCipher, BlockEncrypt, BlockSizeUser, KeyInit};
use aes::{Aes128Enc, Aes256Enc};
use aws_lc_rs::hkdf;
use cmac::digest::InnerInit;
use cmac::{Cmac, CmacCore, Mac};
use smt_proto::crypto::TAG_LEN;

use crate::key::{TrafficKey, IV_LEN};
use crate::okm::OkmLen;

/// HKDF-Extract salt for the control-packet MAC key. Version 1 was
/// HMAC-SHA256 under a key with the salt "smt control v1"; the two do not
/// interoperate.
pub(crate) const CONTROL_SALT: &[u8] = b"smt control v2";
/// HKDF-Expand info for the control-packet MAC key.
pub(crate) const CONTROL_INFO: &[u8] = b"smt ctrl";

/// An expanded AES-CMAC key: the AES encryption key schedule (CMAC never
/// decrypts). Its subkeys K1/K2 are recomputed per tag by the `cmac` crate
/// (one AES block). The `aes` crate's schedule holds room for its portable
/// fallback too: 704 bytes for AES-128, 960 for AES-256, about what the
/// HMAC key's precomputed SHA-256 states took before.
#[derive(Clone)]
// The AES-128 variant is 256 bytes smaller; boxing the other would add a
// heap allocation and a pointer chase per tag to save it.
#[allow(clippy::large_enum_variant)]
pub(crate) enum ControlMac {
    Aes128(Aes128Enc),
    Aes256(Aes256Enc),
}

impl ControlMac {
    /// The control MAC of `key`'s direction (the recipe above).
    pub(crate) fn derive(key: &TrafficKey) -> Self {
        let key_len = key.key().len();
        // `key || iv` on the stack: at most a 32-byte key plus the IV.
        let mut ikm = [0; 32 + IV_LEN];
        ikm[..key_len].copy_from_slice(key.key());
        ikm[key_len..key_len + IV_LEN].copy_from_slice(key.iv());
        let prk =
            hkdf::Salt::new(hkdf::HKDF_SHA256, CONTROL_SALT).extract(&ikm[..key_len + IV_LEN]);
        let mut control_key = [0; 32];
        // NOTE(unwrap): 16 or 32 bytes is far below HKDF-SHA256's 255 * 32 limit.
        prk.expand(&[CONTROL_INFO], OkmLen(key_len))
            .and_then(|okm| okm.fill(&mut control_key[..key_len]))
            .expect("16 or 32 bytes is a valid HKDF-SHA256 output length");
        // NOTE(unwrap): a traffic key is 16 or 32 bytes long (`TrafficKey::new`).
        Self::from_key(&control_key[..key_len]).expect("traffic keys are 16 or 32 bytes")
    }

    /// AES-128-CMAC for a 16-byte key, AES-256-CMAC for a 32-byte one;
    /// `None` for any other length.
    pub(crate) fn from_key(key: &[u8]) -> Option<Self> {
        match key.len() {
            16 => Aes128Enc::new_from_slice(key).ok().map(Self::Aes128),
            32 => Aes256Enc::new_from_slice(key).ok().map(Self::Aes256),
            _ => None,
        }
    }

    /// AES-CMAC of `packet`, the full 16 bytes.
    pub(crate) fn tag(&self, packet: &[u8]) -> [u8; TAG_LEN] {
        match self {
            Self::Aes128(aes) => cmac_of(aes, packet),
            Self::Aes256(aes) => cmac_of(aes, packet),
        }
    }
}

/// One CMAC over `packet` with a borrowed key schedule (`&Aes*Enc` is a
/// block cipher too, so the schedule is not copied per tag).
fn cmac_of<C>(aes: &C, packet: &[u8]) -> [u8; TAG_LEN]
where
    C: BlockCipher + BlockEncrypt + BlockSizeUser<BlockSize = U16>,
{
    let mut mac = Cmac::from_core(CmacCore::inner_init(aes));
    mac.update(packet);
    mac.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use aws_lc_rs::{cmac as lc_cmac, hmac};
    use hex_literal::hex;

    use super::*;
    use crate::key::AeadAlgorithm;

    /// RFC 4493 § 4's message: its four examples MAC the first 0, 16, 40
    /// and 64 bytes.
    const MESSAGE: [u8; 64] = hex!(
        "6bc1bee2 2e409f96 e93d7e11 7393172a ae2d8a57 1e03ac9c 9eb76fac 45af8e51
         30c81c46 a35ce411 e5fbc119 1a0a52ef f69f2445 df4f9b17 ad2b417b e66c3710"
    );
    const LENGTHS: [usize; 4] = [0, 16, 40, 64];

    /// RFC 4493 § 4 (AES-128), Examples 1-4.
    #[test]
    fn aes128_cmac_matches_rfc4493() {
        let mac = ControlMac::from_key(&hex!("2b7e1516 28aed2a6 abf71588 09cf4f3c")).unwrap();
        let tags = [
            hex!("bb1d6929 e9593728 7fa37d12 9b756746"),
            hex!("070a16b4 6b4d4144 f79bdd9d d04a287c"),
            hex!("dfa66747 de9ae630 30ca3261 1497c827"),
            hex!("51f0bebf 7e3b9d92 fc497417 79363cfe"),
        ];
        for (len, tag) in LENGTHS.into_iter().zip(tags) {
            assert_eq!(mac.tag(&MESSAGE[..len]), tag, "{len} bytes");
        }
    }

    /// NIST SP 800-38B Appendix D.3 (CMAC-AES256), Examples 9-12: the same
    /// messages as RFC 4493.
    #[test]
    fn aes256_cmac_matches_sp800_38b() {
        let key = hex!("603deb10 15ca71be 2b73aef0 857d7781 1f352c07 3b6108d7 2d9810a3 0914dff4");
        let mac = ControlMac::from_key(&key).unwrap();
        let tags = [
            hex!("028962f6 1b7bf89e fc6b551f 4667d983"),
            hex!("28a7023f 452e8f82 bd4bf28d 8c37c35c"),
            hex!("aaf3d8f1 de5640c2 32f5b169 b9c911e6"),
            hex!("e1992190 549f6ed5 696a2c05 6c315410"),
        ];
        for (len, tag) in LENGTHS.into_iter().zip(tags) {
            assert_eq!(mac.tag(&MESSAGE[..len]), tag, "{len} bytes");
        }
    }

    #[test]
    fn only_aes_key_lengths_make_a_mac() {
        for len in [0, 15, 17, 24, 31, 33] {
            assert!(ControlMac::from_key(&vec![1; len]).is_none(), "{len}");
        }
    }

    /// The whole recipe computed a second way: HKDF by hand with
    /// aws-lc-rs's HMAC (RFC 5869 § 2.2-2.3) and aws-lc's own CMAC, for
    /// every packet length a control packet can have and both key sizes,
    /// so a mix-up of salt and info, of the IKM order or of CMAC's padding
    /// (partial against whole last blocks) would show.
    #[test]
    fn derived_mac_matches_hkdf_by_hand_and_aws_lc_cmac() {
        for (algorithm, lc) in [
            (AeadAlgorithm::Aes128Gcm, lc_cmac::AES_128),
            (AeadAlgorithm::Aes256Gcm, lc_cmac::AES_256),
        ] {
            let key = vec![0x22; algorithm.key_len()];
            let key = TrafficKey::new(algorithm, &key, [0x33; 12]).unwrap();
            let mut ikm = key.key().to_vec();
            ikm.extend_from_slice(key.iv());
            let prk = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, CONTROL_SALT), &ikm);
            let t1 = hmac::sign(
                &hmac::Key::new(hmac::HMAC_SHA256, prk.as_ref()),
                &[CONTROL_INFO, &[1]].concat(),
            );
            let control_key = &t1.as_ref()[..algorithm.key_len()];
            let reference = lc_cmac::Key::new(lc, control_key).unwrap();
            let ours = ControlMac::derive(&key);
            let packet: Vec<u8> = (0..200u32).map(|i| (i * 7 + 1) as u8).collect();
            for len in 0..packet.len() {
                let want = lc_cmac::sign(&reference, &packet[..len]).unwrap();
                assert_eq!(
                    ours.tag(&packet[..len]),
                    want.as_ref(),
                    "{algorithm}, {len} B"
                );
            }
        }
    }
}
