//! What the driver hands the NIC when it creates a flow context: the
//! cipher, key, IV and the record sequence number to start from (Linux's
//! `tls12_crypto_info_aes_gcm_*`, which TLS 1.3 offload reuses).

use std::fmt;

/// Length of the TLS 1.3 AEAD nonce and of the static IV it comes from
/// (RFC 8446 §5.3).
pub const IV_LEN: usize = 12;

/// The TLS 1.3 AES-GCM suites an autonomous-offload NIC supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CipherSuite {
    /// `TLS_AES_128_GCM_SHA256`: a 16-byte key.
    Aes128Gcm,
    /// `TLS_AES_256_GCM_SHA384`: a 32-byte key.
    Aes256Gcm,
}

impl CipherSuite {
    /// Length of this suite's key in bytes.
    pub const fn key_len(self) -> usize {
        match self {
            Self::Aes128Gcm => 16,
            Self::Aes256Gcm => 32,
        }
    }
}

/// The key material of one flow context.
///
/// Built only through [`CryptoInfo::new`], so the key length always fits
/// the suite. `Debug` shows the suite and the starting sequence number,
/// never the key or IV.
#[derive(Clone, PartialEq, Eq)]
pub struct CryptoInfo {
    suite: CipherSuite,
    key: Vec<u8>,
    iv: [u8; IV_LEN],
    rec_seq: u64,
}

impl CryptoInfo {
    /// Checks that `key` fits `suite`. `rec_seq` is the sequence number of
    /// the first record the context will encrypt (kTLS's `rec_seq`).
    pub fn new(
        suite: CipherSuite,
        key: &[u8],
        iv: [u8; IV_LEN],
        rec_seq: u64,
    ) -> Result<Self, KeyLengthError> {
        if key.len() != suite.key_len() {
            return Err(KeyLengthError {
                suite,
                actual: key.len(),
            });
        }
        Ok(Self {
            suite,
            key: key.to_vec(),
            iv,
            rec_seq,
        })
    }

    /// The same key with another starting sequence number.
    pub fn starting_at(&self, rec_seq: u64) -> Self {
        Self {
            rec_seq,
            ..self.clone()
        }
    }

    /// The AEAD.
    pub fn suite(&self) -> CipherSuite {
        self.suite
    }

    /// The raw key, exactly [`CipherSuite::key_len`] bytes.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The static IV that sequence numbers are XORed into.
    pub fn iv(&self) -> &[u8; IV_LEN] {
        &self.iv
    }

    /// Sequence number of the first record the context encrypts.
    pub fn rec_seq(&self) -> u64 {
        self.rec_seq
    }
}

impl fmt::Debug for CryptoInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CryptoInfo")
            .field("suite", &self.suite)
            .field("rec_seq", &format_args!("{:#x}", self.rec_seq))
            .finish_non_exhaustive()
    }
}

/// The caller passed a key whose length does not fit the suite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyLengthError {
    /// The suite the key was meant for.
    pub suite: CipherSuite,
    /// The length that was passed.
    pub actual: usize,
}

impl fmt::Display for KeyLengthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} needs a {}-byte key, but {} bytes were given",
            self.suite,
            self.suite.key_len(),
            self.actual
        )
    }
}

impl std::error::Error for KeyLengthError {}
