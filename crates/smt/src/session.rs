//! Who sent a request: the session it arrived in and what establishing
//! that session proved about the peer.

use std::net::SocketAddr;

pub use smt_proto::PeerIdentity;

/// Names one session of this endpoint: unique among the endpoint's
/// sessions, never reused. A peer that comes back with new keys (a new
/// handshake, keys installed again, a restarted client on the same
/// address) is a new session with a new ID, so per-session state (a
/// login, say) keyed by it is not inherited by whoever holds the address
/// next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub(crate) u64);

impl SessionId {
    /// The number (counts up from 1 per endpoint).
    pub fn get(self) -> u64 {
        self.0
    }
}

/// How a session got its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionOrigin {
    /// The application installed them ([`crate::Endpoint::install_session`]).
    Installed,
    /// The key resolver gave them ([`crate::Endpoint::set_key_resolver`]).
    Resolved,
    /// The peer started a TLS 1.3 handshake with this endpoint.
    Tls,
    /// The peer sent a 0-RTT SMT-ticket hello.
    ZeroRttTicket,
    /// The peer ran the PSK nonce exchange (it holds the master secret).
    Psk,
    /// The peer started a handshake of another kind (the HANDSHAKE
    /// packet's kind byte).
    Handshake(u8),
    /// This endpoint started the handshake (it called the peer first).
    Initiated,
    /// Not known: the session existed before this endpoint kept track.
    Unknown,
}

impl SessionOrigin {
    /// The origin of a handshake of `kind` a peer started.
    pub(crate) fn accepted(kind: smt_proto::HandshakeKind) -> Self {
        use smt_proto::HandshakeKind as k;
        match kind {
            k::TLS13 => Self::Tls,
            k::SMT_TICKET => Self::ZeroRttTicket,
            k::PSK_NONCE => Self::Psk,
            other => Self::Handshake(other.0),
        }
    }
}

/// The session a request arrived in: its ID, the peer's address, how the
/// session was established and what that proved about the peer (a
/// client's verified certificate with mutual TLS, the server name it
/// asked for). From [`crate::IncomingRequest::session`].
#[derive(Clone, Debug)]
pub struct SessionInfo {
    pub(crate) id: SessionId,
    pub(crate) peer: SocketAddr,
    pub(crate) origin: SessionOrigin,
    pub(crate) identity: PeerIdentity,
}

impl SessionInfo {
    /// The session's ID (new for every session, also from one address).
    pub fn id(&self) -> SessionId {
        self.id
    }

    /// The peer's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// How the session got its keys.
    pub fn origin(&self) -> SessionOrigin {
        self.origin
    }

    /// What the handshake proved about the peer (empty for sessions from
    /// installed or resolved keys, and for handshakes that prove nothing
    /// beyond the address).
    pub fn identity(&self) -> &PeerIdentity {
        &self.identity
    }

    /// The peer's verified certificate (DER), with mutual TLS.
    pub fn peer_certificate(&self) -> Option<&[u8]> {
        self.identity.certificates.first().map(Vec::as_slice)
    }

    /// The server name the client asked for (TLS SNI).
    pub fn server_name(&self) -> Option<&str> {
        self.identity.server_name.as_deref()
    }
}
