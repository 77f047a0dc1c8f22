//! One TLS 1.3 handshake, driven with bytes through `smt_proto`'s
//! [`Handshake`] trait.

use std::fmt;
use std::sync::Arc;

use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};
use rustls_pki_types::ServerName;
use smt_crypto::secrets::{session_keys, TrafficSecrets};
use smt_proto::handshake::{Handshake, HandshakeError, PeerIdentity};
use smt_proto::{Role, SessionKeys};

use crate::error::TlsConfigError;
use crate::keylog::{KeyLogWriter, SecretCapture};
use crate::suites::{CipherSuite, KxGroup};

/// One side of a TLS 1.3 handshake over SMT's handshake byte stream.
///
/// Call order (what the endpoint does): [`Handshake::write`] to collect
/// bytes for the peer (the client's first call yields its ClientHello),
/// [`Handshake::read`] with the peer's bytes in stream order, and
/// [`Handshake::take_keys`] after each, until it returns the keys. Every
/// call does work bounded by the bytes it is given.
///
/// Keys exist for the client once it has processed the server's flight and
/// its own Finished has been collected by `write`; for the server once it
/// has verified the client's Finished. With mutual TLS, the client's keys
/// come before the server has judged the client's certificate (as in any
/// TLS 1.3 handshake): a rejected client learns it from the server's
/// alert, if it still reads, or from the server ignoring it.
///
/// After an error, `read` keeps returning it, `take_keys` returns `None`,
/// and `write` still hands out the alert rustls queued for the peer.
pub struct TlsHandshake {
    conn: Connection,
    role: Role,
    capture: Arc<SecretCapture>,
    state: State,
}

enum State {
    /// Messages are still to come.
    Running,
    /// The handshake is complete; the keys wait for `take_keys`.
    Ready(SessionKeys),
    /// The keys were handed out.
    Taken,
    Failed(HandshakeError),
}

impl TlsHandshake {
    pub(crate) fn client(
        config: &Arc<ClientConfig>,
        server_name: ServerName<'static>,
        key_log: Option<Arc<KeyLogWriter>>,
    ) -> Result<Self, TlsConfigError> {
        let capture = Arc::new(SecretCapture::new(key_log, config.key_log.clone()));
        let mut config = ClientConfig::clone(config);
        config.key_log = capture.clone();
        let conn = ClientConnection::new(Arc::new(config), server_name)?;
        Ok(Self::new(conn.into(), Role::Client, capture))
    }

    pub(crate) fn server(
        config: &Arc<ServerConfig>,
        key_log: Option<Arc<KeyLogWriter>>,
    ) -> Result<Self, TlsConfigError> {
        let capture = Arc::new(SecretCapture::new(key_log, config.key_log.clone()));
        let mut config = ServerConfig::clone(config);
        config.key_log = capture.clone();
        let conn = ServerConnection::new(Arc::new(config))?;
        Ok(Self::new(conn.into(), Role::Server, capture))
    }

    fn new(conn: Connection, role: Role, capture: Arc<SecretCapture>) -> Self {
        Self {
            conn,
            role,
            capture,
            state: State::Running,
        }
    }

    /// This side's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// True until the handshake has completed or failed.
    pub fn is_handshaking(&self) -> bool {
        matches!(self.state, State::Running)
    }

    /// Whether this handshake resumed an earlier session (a TLS 1.3 PSK
    /// with (EC)DHE: resumption keeps forward secrecy).
    pub fn is_resumed(&self) -> bool {
        self.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
    }

    /// The negotiated cipher suite, once the server has chosen it.
    pub fn cipher_suite(&self) -> Option<CipherSuite> {
        CipherSuite::from_rustls(self.conn.negotiated_cipher_suite()?.suite())
    }

    /// The negotiated key-exchange group, once the server has chosen it.
    pub fn kx_group(&self) -> Option<KxGroup> {
        KxGroup::from_rustls(self.conn.negotiated_key_exchange_group()?.name())
    }

    /// The peer's certificate (DER), once it has been verified — the
    /// server's always, the client's with mutual TLS.
    pub fn peer_certificate(&self) -> Option<&[u8]> {
        let leaf = self.conn.peer_certificates()?.first()?;
        Some(leaf.as_ref())
    }

    fn fail(&mut self, error: HandshakeError) -> HandshakeError {
        self.state = State::Failed(error.clone());
        error
    }

    /// Feeds `data` to rustls record by record and processes what it holds.
    fn process(&mut self, mut data: &[u8]) -> Result<(), HandshakeError> {
        while !data.is_empty() {
            match self.conn.read_tls(&mut data) {
                // rustls reads nothing more after the peer's close_notify.
                Ok(0) => {
                    return Err(HandshakeError::Protocol(
                        "the peer closed the TLS session".into(),
                    ))
                }
                Ok(_) => {}
                Err(e) => return Err(HandshakeError::Protocol(e.to_string())),
            }
            self.conn
                .process_new_packets()
                .map_err(|e| handshake_error(&e))?;
        }
        Ok(())
    }

    /// The session keys from the secrets rustls logged and the suite it
    /// negotiated.
    fn derive_keys(&self) -> Result<SessionKeys, HandshakeError> {
        let suite = self
            .cipher_suite()
            .ok_or_else(|| internal("the negotiated cipher suite is not one SMT offers"))?;
        let (client, server) = self
            .capture
            .application_secrets()
            .ok_or_else(|| internal("rustls did not log the application traffic secrets"))?;
        let (hash, aead) = suite.algorithms();
        let secrets = TrafficSecrets::new(hash, aead, &client, &server)
            .map_err(|e| internal(&e.to_string()))?;
        Ok(session_keys(self.role, &secrets))
    }
}

impl Handshake for TlsHandshake {
    fn read(&mut self, data: &[u8]) -> Result<(), HandshakeError> {
        if let State::Failed(e) = &self.state {
            return Err(e.clone());
        }
        if let Err(e) = self.process(data) {
            return Err(self.fail(e));
        }
        if matches!(self.state, State::Running) && !self.conn.is_handshaking() {
            self.state = match self.derive_keys() {
                Ok(keys) => State::Ready(keys),
                Err(e) => return Err(self.fail(e)),
            };
        }
        Ok(())
    }

    fn write(&mut self, out: &mut Vec<u8>) {
        while self.conn.wants_write() {
            match self.conn.write_tls(out) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }

    /// The peer's verified certificate chain and, on the server, the
    /// name the client asked for (SNI).
    fn peer_identity(&self) -> PeerIdentity {
        let mut identity = PeerIdentity::default();
        identity.certificates = self
            .conn
            .peer_certificates()
            .map(|chain| chain.iter().map(|c| c.as_ref().to_vec()).collect())
            .unwrap_or_default();
        if let Connection::Server(server) = &self.conn {
            identity.server_name = server.server_name().map(str::to_owned);
        }
        identity
    }

    fn take_keys(&mut self) -> Option<SessionKeys> {
        // The client's Finished must be on its way before the keys it
        // protects are used (and the server has nothing queued by then).
        if self.conn.wants_write() {
            return None;
        }
        match std::mem::replace(&mut self.state, State::Taken) {
            State::Ready(keys) => Some(keys),
            other => {
                self.state = other;
                None
            }
        }
    }
}

impl fmt::Debug for TlsHandshake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Running => "running",
            State::Ready(_) => "ready",
            State::Taken => "keys taken",
            State::Failed(_) => "failed",
        };
        f.debug_struct("TlsHandshake")
            .field("role", &self.role)
            .field("state", &state)
            .field("cipher_suite", &self.cipher_suite())
            .field("kx_group", &self.kx_group())
            .finish_non_exhaustive()
    }
}

/// What a rustls error means for the application: certificate trouble by
/// kind, everything else a protocol failure with rustls's own words.
pub(crate) fn handshake_error(error: &rustls::Error) -> HandshakeError {
    use rustls::CertificateError as C;
    let message = error.to_string();
    match error {
        rustls::Error::InvalidCertificate(
            C::NotValidForName | C::NotValidForNameContext { .. },
        ) => HandshakeError::WrongName(message),
        rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented => {
            HandshakeError::BadCertificate(message)
        }
        _ => HandshakeError::Protocol(message),
    }
}

fn internal(why: &str) -> HandshakeError {
    HandshakeError::Protocol(format!("internal error: {why}"))
}

#[cfg(test)]
mod tests {
    use rustls::{AlertDescription, CertificateError, Error};

    use super::*;

    #[test]
    fn certificate_errors_map_by_kind() {
        let cases = [
            (
                Error::InvalidCertificate(CertificateError::UnknownIssuer),
                "bad",
            ),
            (Error::InvalidCertificate(CertificateError::Expired), "bad"),
            (
                Error::InvalidCertificate(CertificateError::BadSignature),
                "bad",
            ),
            (Error::NoCertificatesPresented, "bad"),
            (
                Error::InvalidCertificate(CertificateError::NotValidForName),
                "name",
            ),
            (Error::DecryptError, "protocol"),
            (
                Error::AlertReceived(AlertDescription::BadCertificate),
                "protocol",
            ),
        ];
        for (error, want) in cases {
            let got = match handshake_error(&error) {
                HandshakeError::BadCertificate(m) => ("bad", m),
                HandshakeError::WrongName(m) => ("name", m),
                HandshakeError::Protocol(m) => ("protocol", m),
                other => panic!("{error:?} mapped to {other:?}"),
            };
            assert_eq!(got.0, want, "{error:?}");
            assert_eq!(got.1, error.to_string());
        }
    }
}
