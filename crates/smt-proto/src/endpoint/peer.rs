//! What the endpoint keeps per peer: the session (keys by epoch, message
//! IDs, replay guard, counters), where its keys came from, when it was
//! last heard, and what its partially received messages hold. One map
//! entry per peer, so a packet resolves its peer once, instead of one
//! lookup in each of five maps kept in step by hand.

use std::ops::{Deref, DerefMut};
use std::time::Instant;

use super::limits::Charge;
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
}

impl Peer {
    pub fn new(session: Session, origin: Origin) -> Self {
        Self {
            session,
            origin,
            heard: None,
            usage: Charge::default(),
        }
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
