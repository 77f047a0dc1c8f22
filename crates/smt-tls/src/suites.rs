//! The cipher suites and key-exchange groups SMT offers, and how they map
//! to rustls' and smt-crypto's names.

use rustls::crypto::{aws_lc_rs, SupportedKxGroup};
use rustls::SupportedCipherSuite;
use smt_crypto::{AeadAlgorithm, TlsHash};

/// The TLS 1.3 cipher suites SMT offers: the AES-GCM ones, whose records
/// `smt-crypto` protects (and NICs can offload).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CipherSuite {
    /// `TLS_AES_128_GCM_SHA256` (0x1301), the default first choice.
    Aes128GcmSha256,
    /// `TLS_AES_256_GCM_SHA384` (0x1302).
    Aes256GcmSha384,
}

impl CipherSuite {
    /// The suite's hash and record AEAD, as `smt-crypto` names them.
    pub fn algorithms(self) -> (TlsHash, AeadAlgorithm) {
        match self {
            Self::Aes128GcmSha256 => (TlsHash::Sha256, AeadAlgorithm::Aes128Gcm),
            Self::Aes256GcmSha384 => (TlsHash::Sha384, AeadAlgorithm::Aes256Gcm),
        }
    }

    pub(crate) fn rustls(self) -> SupportedCipherSuite {
        match self {
            Self::Aes128GcmSha256 => aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256,
            Self::Aes256GcmSha384 => aws_lc_rs::cipher_suite::TLS13_AES_256_GCM_SHA384,
        }
    }

    pub(crate) fn from_rustls(suite: rustls::CipherSuite) -> Option<Self> {
        match suite {
            rustls::CipherSuite::TLS13_AES_128_GCM_SHA256 => Some(Self::Aes128GcmSha256),
            rustls::CipherSuite::TLS13_AES_256_GCM_SHA384 => Some(Self::Aes256GcmSha384),
            _ => None,
        }
    }
}

/// Key-exchange groups SMT offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KxGroup {
    /// The post-quantum hybrid X25519 + ML-KEM-768 (0x11ec), preferred.
    /// Its shares make the ClientHello and ServerHello about 1.1 KB larger.
    X25519Mlkem768,
    /// X25519 (0x001d).
    X25519,
    /// NIST P-256 (0x0017).
    Secp256r1,
}

impl KxGroup {
    pub(crate) fn rustls(self) -> &'static dyn SupportedKxGroup {
        match self {
            Self::X25519Mlkem768 => aws_lc_rs::kx_group::X25519MLKEM768,
            Self::X25519 => aws_lc_rs::kx_group::X25519,
            Self::Secp256r1 => aws_lc_rs::kx_group::SECP256R1,
        }
    }

    pub(crate) fn from_rustls(group: rustls::NamedGroup) -> Option<Self> {
        match group {
            rustls::NamedGroup::X25519MLKEM768 => Some(Self::X25519Mlkem768),
            rustls::NamedGroup::X25519 => Some(Self::X25519),
            rustls::NamedGroup::secp256r1 => Some(Self::Secp256r1),
            _ => None,
        }
    }
}
