//! 0-RTT sessions with SMT-tickets (SMT paper §4.5.2): the client sends its
//! encrypted first request with its key share, no round trip first.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use crate::{ZeroRttServer, ZeroRttServerHandshake};
use smt_crypto::AeadAlgorithm;
use smt_proto::{Handshake, HandshakeAcceptor, HandshakeKind};
use smt_tls::TlsServer;

use crate::keylog::SessionKeyLog;
use crate::psk_nonce::PskServerHandshake;

/// Answers TLS 1.3 handshakes, 0-RTT SMT-ticket hellos and (with a master
/// secret) the PSK nonce exchange.
pub struct ServerAcceptor {
    tls: Option<TlsServer>,
    zero_rtt: Option<Arc<ZeroRttServer>>,
    psk: Option<(Vec<u8>, AeadAlgorithm)>,
    key_log: Option<Arc<SessionKeyLog>>,
}

impl ServerAcceptor {
    /// An acceptor for either or both kinds of handshake.
    pub fn new(tls: Option<TlsServer>, zero_rtt: Option<Arc<ZeroRttServer>>) -> Self {
        Self {
            tls,
            zero_rtt,
            psk: None,
            key_log: None,
        }
    }

    /// Also answers 0-RTT SMT-ticket hellos with `zero_rtt` (replacing
    /// any given to [`ServerAcceptor::new`]).
    pub fn with_zero_rtt(mut self, zero_rtt: Arc<ZeroRttServer>) -> Self {
        self.zero_rtt = Some(zero_rtt);
        self
    }

    /// Also answers the PSK nonce exchange for clients holding `master`
    /// (see [`crate::psk::PskClient`]).
    pub fn with_psk(mut self, master: &[u8], algorithm: AeadAlgorithm) -> Self {
        self.psk = Some((master.to_vec(), algorithm));
        self
    }

    /// Logs the traffic keys of every PSK session it answers to `log`
    /// (none: no key log, the default); see [`SessionKeyLog`]. For
    /// debugging only.
    pub fn with_key_log(mut self, log: Option<Arc<SessionKeyLog>>) -> Self {
        self.key_log = log;
        self
    }
}

impl std::fmt::Debug for ServerAcceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerAcceptor")
            .field("tls", &self.tls.is_some())
            .field("zero_rtt", &self.zero_rtt.is_some())
            .field("psk", &self.psk.is_some())
            .finish()
    }
}

impl HandshakeAcceptor for ServerAcceptor {
    fn accept(&mut self, peer: SocketAddr) -> Option<Box<dyn Handshake>> {
        self.tls.as_mut()?.accept(peer)
    }

    fn accept_kind(&mut self, peer: SocketAddr, kind: HandshakeKind) -> Option<Box<dyn Handshake>> {
        match kind {
            HandshakeKind::TLS13 => self.accept(peer),
            HandshakeKind::SMT_TICKET => {
                let server = self.zero_rtt.clone()?;
                Some(Box::new(ZeroRttServerHandshake::new(
                    server,
                    SystemTime::now(),
                )))
            }
            HandshakeKind::PSK_NONCE => {
                let (master, algorithm) = self.psk.as_ref()?;
                let hs = PskServerHandshake::new(master, peer, *algorithm);
                Some(Box::new(hs.with_key_log(self.key_log.clone())))
            }
            _ => None,
        }
    }
}
