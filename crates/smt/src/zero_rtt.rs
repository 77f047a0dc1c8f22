//! 0-RTT sessions with SMT-tickets (seed 001 §4.5.2): the client sends its
//! encrypted first request with its key share, no round trip first.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use smt_proto::{handshake_kind, Handshake, HandshakeAcceptor};
use smt_ticket::{ZeroRttServer, ZeroRttServerHandshake};
use smt_tls::TlsServer;

/// Answers TLS 1.3 handshakes and 0-RTT SMT-ticket hellos.
pub struct ServerAcceptor {
    tls: Option<TlsServer>,
    zero_rtt: Option<Arc<ZeroRttServer>>,
}

impl ServerAcceptor {
    /// An acceptor for either or both kinds of handshake.
    pub fn new(tls: Option<TlsServer>, zero_rtt: Option<Arc<ZeroRttServer>>) -> Self {
        Self { tls, zero_rtt }
    }
}

impl std::fmt::Debug for ServerAcceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerAcceptor")
            .field("tls", &self.tls.is_some())
            .field("zero_rtt", &self.zero_rtt.is_some())
            .finish()
    }
}

impl HandshakeAcceptor for ServerAcceptor {
    fn accept(&mut self, peer: SocketAddr) -> Option<Box<dyn Handshake>> {
        self.tls.as_mut()?.accept(peer)
    }

    fn accept_kind(&mut self, peer: SocketAddr, kind: u8) -> Option<Box<dyn Handshake>> {
        match kind {
            handshake_kind::TLS13 => self.accept(peer),
            handshake_kind::SMT_TICKET => {
                let server = self.zero_rtt.clone()?;
                Some(Box::new(ZeroRttServerHandshake::new(
                    server,
                    SystemTime::now(),
                )))
            }
            _ => None,
        }
    }
}
