//! The narrow interface between the endpoint and a session-establishment
//! protocol (TLS 1.3 in `smt-tls`, or the 0-RTT SMT-ticket exchange).
//!
//! The endpoint carries the handshake's bytes reliably and in order inside
//! HANDSHAKE packets (`docs/protocol.md`); the implementation turns them
//! into [`SessionKeys`]. Nothing here names a TLS library.

use std::fmt;
use std::net::SocketAddr;

use crate::SessionKeys;

/// Why a handshake failed, worded for the application.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The peer's certificate is not valid or not trusted (untrusted CA,
    /// expired, wrong usage...).
    BadCertificate(String),
    /// The certificate is valid but for another name.
    WrongName(String),
    /// A 0-RTT ticket was expired, not yet valid, forged or replayed.
    BadTicket(String),
    /// The peer sent something the protocol does not allow (including a
    /// tampered handshake message), or sent an alert.
    Protocol(String),
    /// The peer did not complete the handshake in time.
    Timeout,
    /// No handshake is configured for this kind of peer.
    NotConfigured,
    /// The network reported the peer unreachable (ICMP) before it answered.
    Unreachable,
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadCertificate(m) => write!(f, "handshake failed: bad certificate: {m}"),
            Self::WrongName(m) => write!(f, "handshake failed: certificate is for another name: {m}"),
            Self::BadTicket(m) => write!(f, "handshake failed: bad SMT ticket: {m}"),
            Self::Protocol(m) => write!(f, "handshake failed: {m}"),
            Self::Timeout => f.write_str("handshake failed: the peer did not answer in time"),
            Self::NotConfigured => f.write_str(
                "no session with this peer and no handshake configured: install keys or configure TLS",
            ),
            Self::Unreachable => f.write_str(
                "handshake failed: the peer is unreachable (ICMP): nothing answers SMT at that address and port",
            ),
        }
    }
}

impl std::error::Error for HandshakeError {}

/// What proves that a handshake's peer receives packets at its address
/// (return routability), which decides whether its keys may replace an
/// established session with that address.
///
/// A responder whose keys come from the peer's first flight alone (the
/// 0-RTT exchange; anyone can build a hello from a published ticket and
/// send it from a spoofed address) must not let them replace a session the
/// address already has: the endpoint holds them aside until a packet
/// authenticated under the keys named here arrives from the address. Those
/// keys depend on something only the responder's reply carried, which an
/// off-path spoofer never sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AddressProof {
    /// The handshake itself proved it (TLS 1.3: the client's Finished
    /// covers the server's flight), or this side is the initiator.
    Proven,
    /// A control packet authenticated under the first keys proves it (they
    /// depend on the responder's reply, e.g. its nonce).
    FirstKeys,
    /// A control packet authenticated under the next epoch's keys proves it
    /// (the 0-RTT fs-key, which depends on the server's ephemeral key).
    NextKeys,
    /// Nothing can: the keys must never replace an established session.
    Never,
}

/// What a handshake proved about the peer beyond its address, for the
/// application to authorise requests by: given to the server's
/// application with each request of the session (the `smt` crate's
/// `IncomingRequest::session`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PeerIdentity {
    /// The certificate chain the peer presented and the handshake
    /// verified (DER, the peer's own certificate first): a TLS server's
    /// always, a client's with mutual TLS. Empty without.
    pub certificates: Vec<Vec<u8>>,
    /// The server name the client asked for (TLS SNI), as the server saw
    /// it.
    pub server_name: Option<String>,
}

/// One side of a session-establishment protocol, driven with bytes.
///
/// The endpoint calls [`Handshake::write`] to collect bytes to send,
/// delivers the peer's bytes in order through [`Handshake::read`], and
/// installs the keys from [`Handshake::take_keys`] as soon as they exist.
pub trait Handshake: Send + fmt::Debug {
    /// Consumes the next bytes the peer sent (in stream order).
    fn read(&mut self, data: &[u8]) -> Result<(), HandshakeError>;
    /// Appends any bytes that should now go to the peer.
    fn write(&mut self, out: &mut Vec<u8>);
    /// The session keys, once (the client: after it sent its Finished; the
    /// server: after it verified the client's Finished).
    fn take_keys(&mut self) -> Option<SessionKeys>;

    /// Keys for the session's *next* key epoch, once, if the protocol
    /// switches keys after the first ones (the 0-RTT exchange's fs-key
    /// replacing the SMT-key). Asked after [`Handshake::take_keys`].
    fn take_next_keys(&mut self) -> Option<SessionKeys> {
        None
    }

    /// What proves the peer's address once keys exist (see
    /// [`AddressProof`]); asked of responders when the peer already has a
    /// session. Default: the handshake proved it.
    fn address_proof(&self) -> AddressProof {
        AddressProof::Proven
    }

    /// What [`Handshake::address_proof`] will say once `opening` — the
    /// first bytes of the peer's stream, not read yet — has been read;
    /// asked of a responder before it reads anything, when the peer's
    /// address already has a session. A handshake whose opening cannot
    /// prove the address ([`AddressProof::Never`]) is then not started:
    /// the address proves itself first with a stateless RETRY round trip
    /// (`docs/protocol.md` § 4, *Returning addresses*), so a first flight
    /// is never consumed (e.g. entered in a replay cache) only to be
    /// refused. Default: [`Handshake::address_proof`].
    fn opening_address_proof(&self, opening: &[u8]) -> AddressProof {
        let _ = opening;
        self.address_proof()
    }

    /// What the handshake proved about the peer (see [`PeerIdentity`]),
    /// asked once the keys exist. Default: nothing beyond its address.
    fn peer_identity(&self) -> PeerIdentity {
        PeerIdentity::default()
    }
}

/// Makes the server side of a handshake when an unknown peer starts one.
pub trait HandshakeAcceptor: Send {
    /// A handshake for `peer`, or `None` to refuse it.
    fn accept(&mut self, peer: SocketAddr) -> Option<Box<dyn Handshake>>;

    /// A handshake of protocol `kind` (the HANDSHAKE packet's kind byte:
    /// 0 TLS 1.3, 1 SMT-ticket). By default only TLS 1.3 is accepted.
    fn accept_kind(
        &mut self,
        peer: SocketAddr,
        kind: crate::wire::HandshakeKind,
    ) -> Option<Box<dyn Handshake>> {
        if kind == crate::wire::HandshakeKind::TLS13 {
            self.accept(peer)
        } else {
            None
        }
    }
}
