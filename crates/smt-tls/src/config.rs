//! Client and server configuration: trust anchors, credentials and the
//! algorithms offered, turned into rustls configs once and shared by every
//! handshake.

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::client::Resumption;
use rustls::crypto::{aws_lc_rs, CryptoProvider};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use smt_proto::handshake::{Handshake, HandshakeAcceptor};

use crate::error::TlsConfigError;
use crate::handshake::TlsHandshake;
use crate::keylog::{KeyLogPolicy, KeyLogWriter};
use crate::suites::{CipherSuite, KxGroup};

/// What a [`TlsClient`] or [`TlsServer`] offers beyond its certificates.
///
/// The default: both suites (AES-128 first), groups X25519MLKEM768, X25519,
/// P-256 in that order of preference, and no key log. A server picks the
/// client's most preferred suite and group that it also supports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsOptions {
    cipher_suites: Vec<CipherSuite>,
    kx_groups: Vec<KxGroup>,
    key_log: KeyLogPolicy,
}

impl Default for TlsOptions {
    fn default() -> Self {
        Self {
            cipher_suites: vec![CipherSuite::Aes128GcmSha256, CipherSuite::Aes256GcmSha384],
            kx_groups: vec![KxGroup::X25519Mlkem768, KxGroup::X25519, KxGroup::Secp256r1],
            key_log: KeyLogPolicy::Off,
        }
    }
}

impl TlsOptions {
    /// Offers these suites, most preferred first.
    pub fn cipher_suites(mut self, suites: &[CipherSuite]) -> Self {
        self.cipher_suites = suites.to_vec();
        self
    }

    /// Offers these key-exchange groups, most preferred first.
    pub fn kx_groups(mut self, groups: &[KxGroup]) -> Self {
        self.kx_groups = groups.to_vec();
        self
    }

    /// Writes an NSS key log as `policy` says (off by default).
    pub fn key_log(mut self, policy: KeyLogPolicy) -> Self {
        self.key_log = policy;
        self
    }

    /// The rustls crypto provider these options describe (aws-lc-rs, only
    /// the suites and groups chosen): the base for a caller's own
    /// `rustls::ClientConfig` / `ServerConfig` that
    /// [`TlsClient::from_config`] / [`TlsServer::from_config`] accept.
    pub fn crypto_provider(&self) -> Result<Arc<CryptoProvider>, TlsConfigError> {
        self.provider()
    }

    fn provider(&self) -> Result<Arc<CryptoProvider>, TlsConfigError> {
        if self.cipher_suites.is_empty() {
            return Err(TlsConfigError::NoCipherSuites);
        }
        if self.kx_groups.is_empty() {
            return Err(TlsConfigError::NoKxGroups);
        }
        Ok(Arc::new(CryptoProvider {
            cipher_suites: self.cipher_suites.iter().map(|s| s.rustls()).collect(),
            kx_groups: self.kx_groups.iter().map(|g| g.rustls()).collect(),
            ..aws_lc_rs::default_provider()
        }))
    }
}

/// The client side: trusts one CA (or a few) and nothing else, and starts
/// one [`TlsHandshake`] per server. Cheap to clone.
#[derive(Clone, Debug)]
pub struct TlsClient {
    config: Arc<ClientConfig>,
    key_log: Option<Arc<KeyLogWriter>>,
}

impl TlsClient {
    /// A client trusting the CA certificates in `ca_certs` (PEM, one or
    /// more `CERTIFICATE` blocks, or a single DER certificate), with the
    /// default [`TlsOptions`]. `client_auth`: a certificate chain (PEM or
    /// one DER certificate) and its private key (PEM, or DER PKCS#8 / SEC1 /
    /// PKCS#1) to present when a server asks for one.
    pub fn new(
        ca_certs: &[u8],
        client_auth: Option<(&[u8], &[u8])>,
    ) -> Result<Self, TlsConfigError> {
        Self::with_options(ca_certs, client_auth, &TlsOptions::default())
    }

    /// As [`TlsClient::new`], offering what `options` says.
    pub fn with_options(
        ca_certs: &[u8],
        client_auth: Option<(&[u8], &[u8])>,
        options: &TlsOptions,
    ) -> Result<Self, TlsConfigError> {
        let builder = ClientConfig::builder_with_provider(options.provider()?)
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_root_certificates(roots(ca_certs, "CA certificates")?);
        let mut config = match client_auth {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => builder.with_client_auth_cert(
                certs(chain, "client certificate chain")?,
                private_key(key)?,
            )?,
        };
        // Session resumption: tickets from earlier sessions (kept in this
        // client's memory, shared by its handshakes) are offered again.
        config.resumption = Resumption::in_memory_sessions(256);
        Ok(Self {
            config: Arc::new(config),
            key_log: options.key_log.open().map_err(TlsConfigError::KeyLog)?,
        })
    }

    /// A client from the caller's own rustls config: its certificate
    /// verifier (a platform verifier, `WebPkiServerVerifier` over any roots,
    /// a custom one), client certificate, ALPN, resumption store and key
    /// log are used as they are. What SMT requires is checked here:
    /// every cipher suite of its crypto provider is one SMT carries
    /// (TLS 1.3 AES-GCM: start from [`crypto_provider`], which also rules
    /// out TLS 1.2, whose suites it lacks), and early data is off. The
    /// config's key log receives every secret, as with TLS over TCP.
    pub fn from_config(config: Arc<ClientConfig>) -> Result<Self, TlsConfigError> {
        check_suites(config.crypto_provider())?;
        if config.enable_early_data {
            return Err(TlsConfigError::EarlyData);
        }
        Ok(Self {
            config,
            key_log: None,
        })
    }

    /// A handshake with the server called `server_name` (a DNS name or an
    /// IP address; its certificate must carry it), ready to write its
    /// ClientHello.
    pub fn handshake(&self, server_name: &str) -> Result<Box<dyn Handshake>, TlsConfigError> {
        Ok(Box::new(self.start(server_name)?))
    }

    /// As [`TlsClient::handshake`], with the name already parsed (a DNS
    /// name is sent as SNI and checked in the certificate; an IP address
    /// is checked against the certificate's IP-address names).
    pub fn handshake_to(
        &self,
        server_name: ServerName<'static>,
    ) -> Result<Box<dyn Handshake>, TlsConfigError> {
        Ok(Box::new(TlsHandshake::client(
            &self.config,
            server_name,
            self.key_log.clone(),
        )?))
    }

    /// As [`TlsClient::handshake`], as the concrete type (which can say
    /// what was negotiated).
    pub fn start(&self, server_name: &str) -> Result<TlsHandshake, TlsConfigError> {
        let name = ServerName::try_from(server_name)
            .map_err(|_| TlsConfigError::BadServerName(server_name.to_owned()))?
            .to_owned();
        TlsHandshake::client(&self.config, name, self.key_log.clone())
    }
}

/// The server side: one certificate chain and key, and optionally a CA
/// whose certificates clients must present (mutual TLS). Cheap to clone.
///
/// TLS 1.3 session tickets are sent for resumption (stateful, in the
/// server's memory).
#[derive(Clone, Debug)]
pub struct TlsServer {
    config: Arc<ServerConfig>,
    key_log: Option<Arc<KeyLogWriter>>,
}

impl TlsServer {
    /// A server presenting `cert_chain` (PEM, leaf first, or one DER
    /// certificate) with `key` (PEM, or DER PKCS#8 / SEC1 / PKCS#1), with
    /// the default [`TlsOptions`]. `client_ca`: when set, every client must
    /// present a certificate issued by one of these CA certificates.
    pub fn new(
        cert_chain: &[u8],
        key: &[u8],
        client_ca: Option<&[u8]>,
    ) -> Result<Self, TlsConfigError> {
        Self::with_options(cert_chain, key, client_ca, &TlsOptions::default())
    }

    /// As [`TlsServer::new`], offering what `options` says.
    pub fn with_options(
        cert_chain: &[u8],
        key: &[u8],
        client_ca: Option<&[u8]>,
        options: &TlsOptions,
    ) -> Result<Self, TlsConfigError> {
        let provider = options.provider()?;
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let roots = Arc::new(roots(ca, "client CA certificates")?);
                let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider)
                    .build()
                    .map_err(|e| TlsConfigError::BadCertificate(e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config =
            builder.with_single_cert(certs(cert_chain, "certificate chain")?, private_key(key)?)?;
        // Two tickets per session for resumption. They travel in the
        // handshake stream after the server's Finished, protected with the
        // application traffic key at TLS sequence numbers 0 and 1: SMT's
        // own records under that key start at 2 << 16 (message ID 2), so
        // the nonces never meet.
        config.send_tls13_tickets = 2;
        Ok(Self {
            config: Arc::new(config),
            key_log: options.key_log.open().map_err(TlsConfigError::KeyLog)?,
        })
    }

    /// A server from the caller's own rustls config (certificate
    /// resolver, client verifier, ALPN, session storage, tickets and key
    /// log as they are), checked as [`TlsClient::from_config`] checks a
    /// client's: only cipher suites SMT carries (TLS 1.3 AES-GCM), and no
    /// early data (`max_early_data_size` 0).
    pub fn from_config(config: Arc<ServerConfig>) -> Result<Self, TlsConfigError> {
        check_suites(config.crypto_provider())?;
        if config.max_early_data_size != 0 {
            return Err(TlsConfigError::EarlyData);
        }
        Ok(Self {
            config,
            key_log: None,
        })
    }

    /// A server handshake, waiting for a ClientHello.
    pub fn start(&self) -> Result<TlsHandshake, TlsConfigError> {
        TlsHandshake::server(&self.config, self.key_log.clone())
    }
}

impl HandshakeAcceptor for TlsServer {
    /// A new server handshake for any peer; `None` only if rustls refuses
    /// to start one, which a config it accepted does not make it do.
    fn accept(&mut self, _peer: SocketAddr) -> Option<Box<dyn Handshake>> {
        let handshake = self.start().ok()?;
        Some(Box::new(handshake))
    }
}

/// The crypto provider for rustls configs used with SMT: aws-lc-rs with
/// the TLS 1.3 AES-GCM suites (`TLS13_AES_128_GCM_SHA256` first, then
/// `TLS13_AES_256_GCM_SHA384`) and the default groups (X25519MLKEM768,
/// X25519, P-256). It has no TLS 1.2 suite, so a config built on it
/// speaks TLS 1.3 only:
///
/// ```
/// use std::sync::Arc;
/// let roots = rustls::RootCertStore::empty(); // or webpki-roots, or the platform's
/// let config = rustls::ClientConfig::builder_with_provider(smt_tls::crypto_provider())
///     .with_protocol_versions(&[&rustls::version::TLS13])
///     .unwrap()
///     .with_root_certificates(roots)
///     .with_no_client_auth();
/// let client = smt_tls::TlsClient::from_config(Arc::new(config)).unwrap();
/// # let _ = client;
/// ```
pub fn crypto_provider() -> Arc<CryptoProvider> {
    // NOTE(unwrap): the default options have suites and groups.
    TlsOptions::default()
        .provider()
        .expect("the default options are valid")
}

/// Every suite of `provider` is one SMT can carry, and there is one.
fn check_suites(provider: &CryptoProvider) -> Result<(), TlsConfigError> {
    if provider.cipher_suites.is_empty() {
        return Err(TlsConfigError::NoCipherSuites);
    }
    let unsupported = provider
        .cipher_suites
        .iter()
        .find(|s| CipherSuite::from_rustls(s.suite()).is_none());
    match unsupported {
        Some(suite) => Err(TlsConfigError::UnsupportedCipherSuite(format!(
            "{:?}",
            suite.suite()
        ))),
        None => Ok(()),
    }
}

/// PEM (any number of `CERTIFICATE` blocks) or one DER certificate.
fn certs(input: &[u8], what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    if !is_pem(input) {
        if input.is_empty() {
            return Err(TlsConfigError::NoCertificates(what));
        }
        return Ok(vec![CertificateDer::from(input.to_vec())]);
    }
    let certs = CertificateDer::pem_slice_iter(input)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsConfigError::BadCertificate(format!("{what}: {e}")))?;
    if certs.is_empty() {
        return Err(TlsConfigError::NoCertificates(what));
    }
    Ok(certs)
}

fn roots(input: &[u8], what: &'static str) -> Result<RootCertStore, TlsConfigError> {
    let mut roots = RootCertStore::empty();
    for cert in certs(input, what)? {
        roots
            .add(cert)
            .map_err(|e| TlsConfigError::BadCertificate(format!("{what}: {e}")))?;
    }
    Ok(roots)
}

/// PEM (`PRIVATE KEY`, `EC PRIVATE KEY` or `RSA PRIVATE KEY`) or DER.
fn private_key(input: &[u8]) -> Result<PrivateKeyDer<'static>, TlsConfigError> {
    let key = if is_pem(input) {
        PrivateKeyDer::from_pem_slice(input).map_err(|e| e.to_string())
    } else {
        PrivateKeyDer::try_from(input)
            .map(|key| key.clone_key())
            .map_err(str::to_owned)
    };
    key.map_err(TlsConfigError::BadPrivateKey)
}

fn is_pem(input: &[u8]) -> bool {
    input.windows(11).any(|w| w == b"-----BEGIN ")
}

/// The certificates of a PEM text (or one DER certificate), as DER: for
/// tools that need raw certificates, e.g. to verify an SMT-ticket.
pub fn certificates_der(input: &[u8]) -> Result<Vec<Vec<u8>>, TlsConfigError> {
    Ok(certs(input, "certificates")?
        .into_iter()
        .map(|c| c.as_ref().to_vec())
        .collect())
}
