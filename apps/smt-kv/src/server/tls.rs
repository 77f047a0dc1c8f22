//! The server's identity (one certificate for the TLS and SMT front ends)
//! and the rustls configuration of the TLS/TCP front end.

use std::sync::Arc;

use rustls::crypto::aws_lc_rs;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use smt_tls::certs::Ca;

use super::ServerError;

/// A certificate chain and its key, in PEM, and the CA that issued it
/// when this process made it (clients need it to verify the server).
#[derive(Clone)]
pub struct Identity {
    /// The certificate chain, leaf first (PEM).
    pub chain_pem: String,
    /// The leaf's private key (PEM).
    pub key_pem: String,
    /// The issuing CA's certificate, when known.
    pub ca_pem: Option<String>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Identity")
            .field("has_ca", &self.ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// A throwaway CA and a certificate from it for `names` (IP addresses
    /// or DNS names): for tests, benchmarks and trying the server out.
    pub fn generate(names: &[&str]) -> Result<Self, ServerError> {
        let err = |e: smt_tls::certs::CertError| ServerError::Identity(e.to_string());
        let ca = Ca::generate("smt-kv throwaway CA").map_err(err)?;
        let cert = ca.issue(names, false).map_err(err)?;
        Ok(Self {
            chain_pem: cert.chain_pem(),
            key_pem: cert.key_pem(),
            ca_pem: Some(ca.cert_pem().to_owned()),
        })
    }

    /// The rustls configuration for TLS 1.3 over TCP. The cipher suites
    /// are SMT's (AES-GCM), in the server's order of preference, so a
    /// client that prefers AES-256 or ChaCha20 (OpenSSL's default order,
    /// `redis-benchmark`) still gets AES-128-GCM, as SMT uses: the
    /// comparison is between transports, not ciphers.
    pub fn rustls_config(&self) -> Result<Arc<rustls::ServerConfig>, ServerError> {
        let bad =
            |what: &str, e: &dyn std::fmt::Display| ServerError::Identity(format!("{what}: {e}"));
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(self.chain_pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| bad("certificate chain", &e))?;
        if chain.is_empty() {
            return Err(ServerError::Identity("no certificate in the chain".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|e| bad("private key", &e))?;
        let provider = rustls::crypto::CryptoProvider {
            cipher_suites: vec![
                aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256,
                aws_lc_rs::cipher_suite::TLS13_AES_256_GCM_SHA384,
            ],
            ..aws_lc_rs::default_provider()
        };
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| bad("TLS versions", &e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| bad("certificate", &e))?;
        config.ignore_client_order = true;
        Ok(Arc::new(config))
    }

    /// The SMT front end's handshake server (TLS 1.3 carried by SMT).
    pub fn smt_tls_server(&self) -> Result<smt_tls::TlsServer, ServerError> {
        smt_tls::TlsServer::new(self.chain_pem.as_bytes(), self.key_pem.as_bytes(), None)
            .map_err(|e| ServerError::Identity(e.to_string()))
    }
}
