//! What can go wrong configuring a TLS client or server.

use std::fmt;
use std::io;

/// A client or server could not be configured. Every variant is the local
/// caller's to fix: the message says what was wrong with which input.
#[derive(Debug)]
#[non_exhaustive]
pub enum TlsConfigError {
    /// No certificate found in the input named by the field.
    NoCertificates(&'static str),
    /// A certificate cannot be used (as a trust anchor, or in a chain).
    BadCertificate(String),
    /// The private key cannot be parsed, is of an unsupported type, or does
    /// not belong to the leaf certificate.
    BadPrivateKey(String),
    /// The name to connect to is neither a DNS name nor an IP address.
    BadServerName(String),
    /// [`TlsOptions::cipher_suites`](crate::TlsOptions::cipher_suites) was given an empty list.
    NoCipherSuites,
    /// [`TlsOptions::kx_groups`](crate::TlsOptions::kx_groups) was given an empty list.
    NoKxGroups,
    /// The key-log file could not be opened for appending.
    KeyLog(io::Error),
    /// rustls refused the configuration.
    Tls(String),
    /// A caller's rustls config enables a cipher suite SMT cannot carry
    /// (named): a TLS 1.2 suite (SMT carries TLS 1.3 only) or a TLS 1.3
    /// suite other than AES-GCM (SMT's records are AES-GCM).
    UnsupportedCipherSuite(String),
    /// A caller's rustls config enables TLS early data
    /// (`ClientConfig::enable_early_data`, `ServerConfig::max_early_data_size`):
    /// SMT does not carry it (its 0-RTT is the SMT-ticket exchange).
    EarlyData,
}

impl fmt::Display for TlsConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoCertificates(what) => write!(
                f,
                "no certificate found in the {what} (expected PEM CERTIFICATE blocks or one DER certificate)"
            ),
            Self::BadCertificate(why) => write!(f, "unusable certificate: {why}"),
            Self::BadPrivateKey(why) => write!(f, "unusable private key: {why}"),
            Self::BadServerName(name) => write!(
                f,
                "{name:?} is not a DNS name or IP address to verify the server's certificate against"
            ),
            Self::NoCipherSuites => f.write_str("no TLS cipher suite enabled: enable at least one"),
            Self::NoKxGroups => f.write_str("no key-exchange group enabled: enable at least one"),
            Self::KeyLog(e) => write!(f, "cannot open the TLS key-log file: {e}"),
            Self::Tls(why) => write!(f, "TLS configuration refused: {why}"),
            Self::UnsupportedCipherSuite(suite) => write!(
                f,
                "the rustls config enables {suite}, which SMT cannot carry: SMT carries TLS 1.3 \
                 with TLS13_AES_128_GCM_SHA256 or TLS13_AES_256_GCM_SHA384 only; build the \
                 config on smt_tls::crypto_provider() (or TlsOptions::crypto_provider)"
            ),
            Self::EarlyData => f.write_str(
                "the rustls config enables TLS early data, which SMT does not carry (its 0-RTT \
                 is the SMT-ticket exchange): leave ClientConfig::enable_early_data false and \
                 ServerConfig::max_early_data_size 0",
            ),
        }
    }
}

impl std::error::Error for TlsConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::KeyLog(e) => Some(e),
            _ => None,
        }
    }
}

impl From<rustls::Error> for TlsConfigError {
    fn from(e: rustls::Error) -> Self {
        match e {
            rustls::Error::InconsistentKeys(_) => Self::BadPrivateKey(e.to_string()),
            _ => Self::Tls(e.to_string()),
        }
    }
}
