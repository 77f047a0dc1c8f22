//! What the endpoint keeps per peer: the session (keys by epoch, message
//! IDs, replay guard, counters), where its keys came from, when it was
//! last heard, and what its partially received messages hold. One map
//! entry per peer, so a packet resolves its peer once, instead of one
//! lookup in each of five maps kept in step by hand.

use std::ops::{Deref, DerefMut};
use std::time::Instant;

use super::limits::Charge;
use super::table::PeerRpcs;
use crate::session::Session;

/// Where a peer's session keys came from: decides whether the session may
/// be forgotten (a handshake can make it again) and what it counts against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// `install_session`: only the application replaces or removes it.
    Installed,
    /// The key resolver (counts against `Config::max_resolved_sessions`);
    /// never evicted, since the resolver would derive the same keys with a
    /// fresh replay guard.
    Resolved,
    /// A handshake: forgotten when the peer goes silent or idle.
    Handshake,
}

/// One peer's state. Derefs to its [`Session`], whose fields the protocol
/// reads on every packet.
#[derive(Debug)]
pub(crate) struct Peer {
    pub session: Session,
    pub origin: Origin,
    /// When the peer last sent something that authenticated.
    pub heard: Option<Instant>,
    /// What its partially received messages hold (limits.rs): never below
    /// the truth, exact after each recount.
    pub usage: Charge,
    /// The peer is in `Endpoint::charged` (it has been charged since the
    /// last recount, or held something at it), so a recount looks at it.
    pub charged: bool,
    /// The address is validated: something authenticated under this
    /// session arrived from it ([`Peer::proven`]), or the handshake that
    /// made the session opened with a valid retry token. Whoever sends from
    /// it receives there, so it is not a spoofed victim. Until then, what
    /// we send it in reaction to its packets is bounded by
    /// [`AMPLIFICATION`] times what it sent.
    pub validated: bool,
    /// The peer has used its keys: something authenticated under this
    /// session arrived. Only then is it an authenticated peer: a session a
    /// responder's handshake made without it (a PSK hello and its reply,
    /// which anyone can exchange, retry token or not) is held within
    /// `Config::max_unvalidated_sessions` and expires with its handshake.
    pub proven: bool,
    /// The tick a responder's handshake made the session at (0 for
    /// others): names it in `Endpoint::unvalidated`.
    pub made: u64,
    /// Datagram bytes received from the address (authenticated or not),
    /// and bytes of reactive control packets sent to it, while it is not
    /// validated.
    pub rx_bytes: u64,
    pub reactive_tx_bytes: u64,
    /// Its RPCs by (key epoch, message ID).
    pub rpcs: PeerRpcs,
}

/// Before a peer's address is validated, reactive packets to it (RESEND,
/// GRANT, BUSY, RPC_UNKNOWN, NEED_ACK, handshake retransmissions) carry at
/// most this many times the bytes received from it, as QUIC limits a
/// server before address validation (RFC 9000 §8): a spoofed source cannot
/// use us as an amplifier.
pub(crate) const AMPLIFICATION: u64 = 3;

impl Peer {
    pub fn new(session: Session, origin: Origin) -> Self {
        Self {
            session,
            origin,
            heard: None,
            usage: Charge::default(),
            charged: false,
            validated: false,
            proven: false,
            made: 0,
            rx_bytes: 0,
            reactive_tx_bytes: 0,
            rpcs: PeerRpcs::default(),
        }
    }
}

impl Peer {
    /// Records that something authenticated arrived at `now`.
    pub fn authenticated(&mut self, now: Instant) {
        self.heard = Some(now);
        self.validated = true;
        self.proven = true;
    }

    /// Whether a reactive packet of `len` bytes may go to the peer, and
    /// if so counts it.
    pub fn may_react(&mut self, len: usize) -> bool {
        if self.validated {
            return true;
        }
        let after = self.reactive_tx_bytes + len as u64;
        if after > AMPLIFICATION * self.rx_bytes {
            return false;
        }
        self.reactive_tx_bytes = after;
        true
    }
}

impl Deref for Peer {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.session
    }
}

impl DerefMut for Peer {
    fn deref_mut(&mut self) -> &mut Session {
        &mut self.session
    }
}
