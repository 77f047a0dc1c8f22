//! Traffic keys: an AEAD algorithm, its key and the per-direction IV.

use std::fmt;

use aws_lc_rs::aead;

/// Length of the AEAD nonce and of the static IV it is derived from
/// (RFC 8446 §5.3: `iv_length` is 12 for every TLS 1.3 AEAD).
pub const IV_LEN: usize = 12;

/// The record-protection AEADs SMT supports (the AES-GCM suites of RFC 8446
/// §B.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AeadAlgorithm {
    /// AES-128-GCM, a 16-byte key (`TLS_AES_128_GCM_SHA256`).
    Aes128Gcm,
    /// AES-256-GCM, a 32-byte key (`TLS_AES_256_GCM_SHA384`).
    Aes256Gcm,
}

impl AeadAlgorithm {
    /// Length of this algorithm's key in bytes.
    pub const fn key_len(self) -> usize {
        match self {
            Self::Aes128Gcm => 16,
            Self::Aes256Gcm => 32,
        }
    }

    /// The algorithm's usual name, e.g. `"AES-128-GCM"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Aes128Gcm => "AES-128-GCM",
            Self::Aes256Gcm => "AES-256-GCM",
        }
    }

    pub(crate) fn aws_lc(self) -> &'static aead::Algorithm {
        match self {
            Self::Aes128Gcm => &aead::AES_128_GCM,
            Self::Aes256Gcm => &aead::AES_256_GCM,
        }
    }

    pub(crate) fn ring(self) -> &'static ring::aead::Algorithm {
        match self {
            Self::Aes128Gcm => &ring::aead::AES_128_GCM,
            Self::Aes256Gcm => &ring::aead::AES_256_GCM,
        }
    }
}

impl fmt::Display for AeadAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Key material was rejected: the caller handed in bytes that cannot be a
/// key for the chosen algorithm.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The key is not [`AeadAlgorithm::key_len`] bytes long.
    WrongKeyLength {
        /// The algorithm the key was meant for.
        algorithm: AeadAlgorithm,
        /// The length that was passed.
        actual: usize,
    },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WrongKeyLength { algorithm, actual } => write!(
                f,
                "{algorithm} needs a {}-byte key, but {actual} bytes were given",
                algorithm.key_len()
            ),
        }
    }
}

impl std::error::Error for KeyError {}

/// One direction's record-protection secret: algorithm, key and static IV.
///
/// Constructed only through [`TrafficKey::new`], so the key length always
/// matches the algorithm. `Debug` shows the algorithm and never the key or IV.
#[derive(Clone, PartialEq, Eq)]
pub struct TrafficKey {
    algorithm: AeadAlgorithm,
    key: KeyBytes,
    iv: [u8; IV_LEN],
}

impl TrafficKey {
    /// Checks that `key` fits `algorithm` and keeps a copy of it.
    pub fn new(algorithm: AeadAlgorithm, key: &[u8], iv: [u8; IV_LEN]) -> Result<Self, KeyError> {
        if key.len() != algorithm.key_len() {
            return Err(KeyError::WrongKeyLength {
                algorithm,
                actual: key.len(),
            });
        }
        Ok(Self {
            algorithm,
            key: KeyBytes::copy_from(key),
            iv,
        })
    }

    /// The AEAD this key is for.
    pub fn algorithm(&self) -> AeadAlgorithm {
        self.algorithm
    }

    /// The raw key, exactly [`AeadAlgorithm::key_len`] bytes.
    pub fn key(&self) -> &[u8] {
        self.key.as_slice()
    }

    /// The static IV that record sequence numbers are XORed into.
    pub fn iv(&self) -> &[u8; IV_LEN] {
        &self.iv
    }
}

impl fmt::Debug for TrafficKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrafficKey")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

/// Key bytes in a fixed buffer big enough for the longest key, so a
/// `TrafficKey` needs no heap allocation.
#[derive(Clone, PartialEq, Eq)]
struct KeyBytes {
    buf: [u8; KeyBytes::MAX],
    len: usize,
}

impl KeyBytes {
    const MAX: usize = 32;

    /// `bytes` is at most [`Self::MAX`] long: [`TrafficKey::new`] checked it.
    fn copy_from(bytes: &[u8]) -> Self {
        let mut buf = [0; Self::MAX];
        buf[..bytes.len()].copy_from_slice(bytes);
        Self {
            buf,
            len: bytes.len(),
        }
    }

    fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl TrafficKey {
    /// A fresh key and IV from the operating system's CSPRNG.
    pub fn random(algorithm: AeadAlgorithm) -> Self {
        let mut key = [0u8; 32];
        let mut iv = [0u8; IV_LEN];
        // NOTE(unwrap): the system RNG failing is unrecoverable for any
        // cryptographic library; aws-lc aborts in the same situation.
        aws_lc_rs::rand::fill(&mut key).expect("system random number generator failed");
        aws_lc_rs::rand::fill(&mut iv).expect("system random number generator failed");
        // NOTE(unwrap): the slice has exactly the algorithm's key length.
        Self::new(algorithm, &key[..algorithm.key_len()], iv).expect("key length matches")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_length_is_checked_per_algorithm() {
        assert!(TrafficKey::new(AeadAlgorithm::Aes128Gcm, &[7; 16], [0; 12]).is_ok());
        assert!(TrafficKey::new(AeadAlgorithm::Aes256Gcm, &[7; 32], [0; 12]).is_ok());
        assert_eq!(
            TrafficKey::new(AeadAlgorithm::Aes128Gcm, &[7; 32], [0; 12]),
            Err(KeyError::WrongKeyLength {
                algorithm: AeadAlgorithm::Aes128Gcm,
                actual: 32
            })
        );
        assert!(TrafficKey::new(AeadAlgorithm::Aes256Gcm, &[7; 16], [0; 12]).is_err());
        assert!(TrafficKey::new(AeadAlgorithm::Aes256Gcm, &[], [0; 12]).is_err());
    }

    #[test]
    fn key_error_says_what_was_expected() {
        let err = TrafficKey::new(AeadAlgorithm::Aes256Gcm, &[0; 31], [0; 12]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "AES-256-GCM needs a 32-byte key, but 31 bytes were given"
        );
    }

    #[test]
    fn accessors_return_what_was_given() {
        let key = TrafficKey::new(AeadAlgorithm::Aes128Gcm, &[0xab; 16], [0xcd; 12]).unwrap();
        assert_eq!(key.algorithm(), AeadAlgorithm::Aes128Gcm);
        assert_eq!(key.key(), &[0xab; 16]);
        assert_eq!(key.iv(), &[0xcd; 12]);
    }

    #[test]
    fn debug_never_prints_key_or_iv() {
        let key = TrafficKey::new(AeadAlgorithm::Aes128Gcm, &[0xab; 16], [0xcd; 12]).unwrap();
        let shown = format!("{key:?} {key:#?}");
        assert!(shown.contains("Aes128Gcm"), "{shown}");
        for needle in ["ab", "AB", "171", "cd", "CD", "205"] {
            assert!(!shown.contains(needle), "{needle} leaked in {shown}");
        }
    }
}
