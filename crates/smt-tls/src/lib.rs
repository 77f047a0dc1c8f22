//! TLS 1.3 session establishment for SMT, with rustls.
//!
//! SMT protects its messages with TLS 1.3 records but carries them in its
//! own transport, so it needs from TLS only the handshake: certificates in,
//! traffic keys out. This crate runs a rustls handshake over the byte
//! stream `smt_proto` carries in HANDSHAKE packets and hands the endpoint
//! [`SessionKeys`](smt_proto::SessionKeys):
//!
//! ```text
//! TlsClient::handshake(name) ─► TlsHandshake ◄─ TlsServer::accept(peer)   (HandshakeAcceptor)
//!             write()/read() bytes, in order, both ways (smt_proto::Handshake)
//!             rustls ─KeyLog─► CLIENT_/SERVER_TRAFFIC_SECRET_0 (+ SSLKEYLOGFILE, opt-in)
//!             take_keys() ─► smt_crypto::secrets::session_keys(role, TrafficSecrets)
//! ```
//!
//! - TLS 1.3 only; suites `TLS_AES_128_GCM_SHA256` (preferred) and
//!   `TLS_AES_256_GCM_SHA384`; groups X25519MLKEM768 (preferred), X25519,
//!   P-256 ([`TlsOptions`]).
//! - Keys come from the application traffic *secrets*, captured through a
//!   per-handshake [`rustls::KeyLog`], not from rustls's extracted keys, so
//!   the session can rekey ([`smt_crypto::TrafficSecrets`] implements
//!   KeyUpdate, RFC 8446 §7.2).
//! - Trust is explicit: a client trusts the CA certificates it is given
//!   and no others; a server with a client CA requires client certificates
//!   (mutual TLS). [`certs`] makes such a CA and its certificates.
//! - Errors: an invalid or untrusted certificate is
//!   `HandshakeError::BadCertificate`, a certificate for another name
//!   `WrongName`, everything else (tampering, malformed messages, alerts)
//!   `Protocol` with rustls's message.
//! - Session resumption with TLS 1.3 tickets (PSK with (EC)DHE, so it keeps
//!   forward secrecy; rustls offers no PSK-only mode).
//!
//! - A caller's own rustls config works too ([`TlsClient::from_config`],
//!   [`TlsServer::from_config`]): its verifier (platform, webpki, custom),
//!   credentials and key log are used as they are; SMT's restrictions
//!   (TLS 1.3 AES-GCM suites only, no early data) are checked there and
//!   reported as [`TlsConfigError`]s that say what to change.
//!
//! The rustls connection is private; only byte slices, rustls configs and
//! this crate's own types cross its API.
#![warn(missing_docs, unreachable_pub)]

pub mod certs;
mod config;
mod error;
mod handshake;
mod keylog;
mod suites;

pub use config::{certificates_der, crypto_provider, TlsClient, TlsOptions, TlsServer};
pub use error::TlsConfigError;
pub use handshake::TlsHandshake;
pub use keylog::KeyLogPolicy;
/// The rustls this crate is built with, for callers' own configs
/// ([`TlsClient::from_config`], [`TlsServer::from_config`]).
pub use rustls;
/// A server's name as rustls parses it (a DNS name or an IP address).
pub use rustls_pki_types::ServerName;
pub use suites::{CipherSuite, KxGroup};
