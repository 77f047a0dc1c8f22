//! XTS-AES-128 through OpenSSL's EVP interface.
//!
//! Why OpenSSL: on this project's machine it reaches ~5-6 GB/s on a
//! 4112-byte data unit (AES-NI, several blocks in flight), against ~0.4 GB/s
//! for the RustCrypto `xts-mode` crate, which encrypts one block at a time
//! (`examples/crypto_speed.rs` prints both next to `openssl speed`).
//! A context is initialised with the key once and re-initialised with
//! only the tweak per page: setting the key (the AES key schedules) per
//! page would cost a third of the speed.

use std::fmt;

use openssl::cipher::Cipher;
use openssl::cipher_ctx::CipherCtx;

use crate::tweak::Tweak;

/// An XTS-AES-128 key: the data key K1 and the tweak key K2, 16 bytes each.
#[derive(Clone, PartialEq, Eq)]
pub struct XtsKey([u8; 32]);

/// Why bytes are not an XTS-AES-128 key.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum XtsKeyError {
    /// Not 32 bytes.
    Length(usize),
    /// K1 equals K2, which IEEE 1619-2018 and OpenSSL refuse (it makes the
    /// tweak predictable from the data key).
    DuplicateHalves,
}

impl fmt::Display for XtsKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Length(n) => write!(
                f,
                "an XTS-AES-128 key is 32 bytes (data key then tweak key), not {n}"
            ),
            Self::DuplicateHalves => write!(
                f,
                "the two halves of an XTS key must differ (IEEE 1619-2018 §5.1); make a new random key"
            ),
        }
    }
}

impl std::error::Error for XtsKeyError {}

impl XtsKey {
    /// The key from its 32 bytes (K1 ‖ K2).
    pub fn new(bytes: &[u8]) -> Result<Self, XtsKeyError> {
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|_| XtsKeyError::Length(bytes.len()))?;
        if key[..16] == key[16..] {
            return Err(XtsKeyError::DuplicateHalves);
        }
        Ok(Self(key))
    }

    /// A fresh random key from OpenSSL's CSPRNG.
    pub fn random() -> Self {
        loop {
            let mut key = [0u8; 32];
            // NOTE(unwrap): RAND_bytes fails only if the CSPRNG cannot be
            // seeded, in which case no key can be made at all.
            openssl::rand::rand_bytes(&mut key).expect("OpenSSL's CSPRNG is seeded");
            if let Ok(k) = Self::new(&key) {
                return k;
            }
        }
    }

    /// The 32 bytes, for an independent implementation in tests.
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Debug for XtsKey {
    /// Never prints the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("XtsKey(..)")
    }
}

/// XTS-AES-128 under one key: an encryption and a decryption context,
/// keyed once; each call sets only the tweak. Data units of any length
/// from 16 bytes (ciphertext stealing for partial blocks).
pub struct XtsCipher {
    enc: CipherCtx,
    dec: CipherCtx,
}

impl fmt::Debug for XtsCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("XtsCipher(..)")
    }
}

impl XtsCipher {
    /// Keys both contexts once with `key`; infallible because [`XtsKey`]
    /// was checked when it was made.
    pub fn new(key: &XtsKey) -> Self {
        let cipher = Cipher::aes_128_xts();
        // NOTE(unwrap): allocation and keying fail only for a key OpenSSL
        // refuses; XtsKey::new already refused duplicate halves and lengths.
        let mut enc = CipherCtx::new().expect("OpenSSL allocates a cipher context");
        enc.encrypt_init(Some(cipher), Some(&key.0), None)
            .expect("a checked XTS key is accepted");
        let mut dec = CipherCtx::new().expect("OpenSSL allocates a cipher context");
        dec.decrypt_init(Some(cipher), Some(&key.0), None)
            .expect("a checked XTS key is accepted");
        Self { enc, dec }
    }

    /// Encrypts `data` in place as one data unit. Panics below 16 bytes.
    pub fn encrypt(&mut self, tweak: &Tweak, data: &mut [u8]) {
        run(&mut self.enc, true, tweak, data);
    }

    /// Decrypts `data` in place as one data unit. Panics below 16 bytes.
    pub fn decrypt(&mut self, tweak: &Tweak, data: &mut [u8]) {
        run(&mut self.dec, false, tweak, data);
    }
}

fn run(ctx: &mut CipherCtx, encrypt: bool, tweak: &Tweak, data: &mut [u8]) {
    assert!(data.len() >= 16, "an XTS data unit is at least one block");
    let iv = Some(&tweak.bytes()[..]);
    // NOTE(unwrap): with the key already set, re-initialising with a
    // 16-byte IV and updating a data unit of >= 16 bytes cannot fail.
    let init = match encrypt {
        true => ctx.encrypt_init(None, None, iv),
        false => ctx.decrypt_init(None, None, iv),
    };
    init.expect("a 16-byte tweak is a valid XTS IV");
    let len = data.len();
    let out = ctx
        .cipher_update_inplace(data, len)
        .expect("XTS takes any data unit of at least one block");
    debug_assert_eq!(out, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        assert_eq!(XtsKey::new(&[1; 31]), Err(XtsKeyError::Length(31)));
        assert_eq!(XtsKey::new(&[1; 32]), Err(XtsKeyError::DuplicateHalves));
        assert!(XtsKey::new(&(0..32).collect::<Vec<u8>>()).is_ok());
        assert_eq!(format!("{:?}", XtsKey::random()), "XtsKey(..)");
    }

    #[test]
    fn decrypt_inverts_encrypt_and_the_tweak_matters() {
        let mut x = XtsCipher::new(&XtsKey::random());
        let plain: Vec<u8> = (0..4112u32).map(|i| i as u8).collect();
        let mut a = plain.clone();
        x.encrypt(&Tweak::address(4096), &mut a);
        let mut b = plain.clone();
        x.encrypt(&Tweak::address(8192), &mut b);
        assert_ne!(a, plain);
        assert_ne!(a, b);
        x.decrypt(&Tweak::address(4096), &mut a);
        assert_eq!(a, plain);
    }
}
