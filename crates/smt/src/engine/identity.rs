//! Which session each request arrived in, and what establishing it proved
//! about the peer ([`SessionInfo`]), kept outside the protocol core.
//!
//! Sessions begin in three ways, each seen here: the application installs
//! keys ([`Identities::installed`]); a handshake completes
//! (`Event::Connected`, [`Identities::connected`]): a responder's
//! handshake records what it proved when its keys are taken
//! ([`RecordingAcceptor`]), and the event makes that current; the key
//! resolver gives keys for a new peer ([`RecordingResolver`]), made
//! current by the peer's first request. Events come in order, so a request
//! queued before a new session's `Connected` keeps the old session.

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use smt_proto::{
    AddressProof, Handshake, HandshakeAcceptor, HandshakeError, HandshakeKind, KeyResolver,
    PeerIdentity, SessionKeys,
};

use super::FastMap;
use crate::session::{SessionId, SessionInfo, SessionOrigin};

/// Handshakes that took keys but whose session is not current yet (held
/// until the peer proves its address, or never): at most this many are
/// remembered, the oldest forgotten first.
const MAX_PENDING: usize = 4096;

/// Table entries kept for peers whose session ended are pruned once they
/// outnumber live ones by this factor (and this floor).
const PRUNE_FLOOR: usize = 64;

/// What a session will be once it is current.
#[derive(Clone, Debug)]
struct Pending {
    origin: SessionOrigin,
    identity: PeerIdentity,
}

/// Sessions recorded by handshakes and the resolver, by peer, oldest
/// first. Shared with the acceptor and resolver wrappers, which the core
/// calls under the engine's lock (so the mutex is never contended).
#[derive(Default)]
struct PendingTable {
    by_peer: FastMap<SocketAddr, Pending>,
    order: VecDeque<SocketAddr>,
}

impl PendingTable {
    fn record(&mut self, peer: SocketAddr, pending: Pending) {
        if self.by_peer.insert(peer, pending).is_none() {
            self.order.push_back(peer);
        }
        while self.by_peer.len() > MAX_PENDING {
            match self.order.pop_front() {
                Some(old) => {
                    self.by_peer.remove(&old);
                }
                None => break,
            }
        }
    }

    fn take(&mut self, peer: SocketAddr, resolved_only: bool) -> Option<Pending> {
        let pending = self.by_peer.get(&peer)?;
        if resolved_only && pending.origin != SessionOrigin::Resolved {
            return None;
        }
        self.order.retain(|p| *p != peer);
        self.by_peer.remove(&peer)
    }
}

type Shared = Arc<Mutex<PendingTable>>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, PendingTable> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// The current session of each peer, and the sessions about to be.
#[derive(Default)]
pub(crate) struct Identities {
    current: FastMap<SocketAddr, Arc<SessionInfo>>,
    pending: Shared,
    last_id: u64,
    /// A key resolver is set: sessions it made may wait in `pending` for
    /// their first request. Without one, a request looks only at
    /// `current` (no lock).
    resolving: bool,
}

impl Identities {
    /// Wraps a responder's acceptor so that its handshakes record what
    /// they prove.
    pub(super) fn acceptor(&self, inner: Box<dyn HandshakeAcceptor>) -> Box<dyn HandshakeAcceptor> {
        Box::new(RecordingAcceptor {
            inner,
            pending: self.pending.clone(),
        })
    }

    /// Wraps the key resolver so that the sessions it makes are recorded.
    pub(super) fn resolver(&mut self, inner: Box<dyn KeyResolver>) -> Box<dyn KeyResolver> {
        self.resolving = true;
        Box::new(RecordingResolver {
            inner,
            pending: self.pending.clone(),
        })
    }

    /// The application installed keys for `peer`.
    pub(super) fn installed(&mut self, peer: SocketAddr) {
        lock(&self.pending).take(peer, false);
        self.open(peer, SessionOrigin::Installed, PeerIdentity::default());
    }

    /// A handshake with `peer` completed: the one it recorded, or one this
    /// endpoint started.
    pub(super) fn connected(&mut self, peer: SocketAddr) {
        let pending = lock(&self.pending).take(peer, false);
        let (origin, identity) = match pending {
            Some(p) => (p.origin, p.identity),
            None => (SessionOrigin::Initiated, PeerIdentity::default()),
        };
        self.open(peer, origin, identity);
    }

    /// The session a request from `peer` arrived in.
    pub(super) fn for_request(&mut self, peer: SocketAddr) -> Arc<SessionInfo> {
        if self.resolving {
            let resolved = lock(&self.pending).take(peer, true);
            if let Some(p) = resolved {
                return self.open(peer, p.origin, p.identity);
            }
        }
        match self.current.get(&peer) {
            Some(session) => session.clone(),
            None => self.open(peer, SessionOrigin::Unknown, PeerIdentity::default()),
        }
    }

    /// Forgets peers without a session once they outnumber the live ones
    /// (amortised: the walk is paid for by as many new sessions).
    pub(super) fn prune(&mut self, live: usize, sessions: impl Iterator<Item = SocketAddr>) {
        if self.current.len() <= PRUNE_FLOOR.max(2 * live) {
            return;
        }
        let live: HashSet<SocketAddr> = sessions.collect();
        self.current.retain(|peer, _| live.contains(peer));
    }

    fn open(
        &mut self,
        peer: SocketAddr,
        origin: SessionOrigin,
        identity: PeerIdentity,
    ) -> Arc<SessionInfo> {
        self.last_id += 1;
        let session = Arc::new(SessionInfo {
            id: SessionId(self.last_id),
            peer,
            origin,
            identity,
        });
        self.current.insert(peer, session.clone());
        session
    }
}

/// Hands out the inner acceptor's handshakes wrapped in [`Recording`].
struct RecordingAcceptor {
    inner: Box<dyn HandshakeAcceptor>,
    pending: Shared,
}

impl RecordingAcceptor {
    fn wrap(
        &self,
        peer: SocketAddr,
        kind: HandshakeKind,
        inner: Option<Box<dyn Handshake>>,
    ) -> Option<Box<dyn Handshake>> {
        Some(Box::new(Recording {
            inner: inner?,
            peer,
            kind,
            pending: self.pending.clone(),
        }))
    }
}

impl HandshakeAcceptor for RecordingAcceptor {
    fn accept(&mut self, peer: SocketAddr) -> Option<Box<dyn Handshake>> {
        let inner = self.inner.accept(peer);
        self.wrap(peer, HandshakeKind::TLS13, inner)
    }

    fn accept_kind(&mut self, peer: SocketAddr, kind: HandshakeKind) -> Option<Box<dyn Handshake>> {
        let inner = self.inner.accept_kind(peer, kind);
        self.wrap(peer, kind, inner)
    }
}

/// A responder's handshake that records what it proved about the peer
/// when its keys are taken. Every method of [`Handshake`] is forwarded:
/// a method added to the trait must be forwarded here too (its default
/// would otherwise silently replace the inner handshake's).
struct Recording {
    inner: Box<dyn Handshake>,
    peer: SocketAddr,
    kind: HandshakeKind,
    pending: Shared,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl Handshake for Recording {
    fn read(&mut self, data: &[u8]) -> Result<(), HandshakeError> {
        self.inner.read(data)
    }

    fn write(&mut self, out: &mut Vec<u8>) {
        self.inner.write(out);
    }

    fn take_keys(&mut self) -> Option<SessionKeys> {
        let keys = self.inner.take_keys()?;
        let pending = Pending {
            origin: SessionOrigin::accepted(self.kind),
            identity: self.inner.peer_identity(),
        };
        lock(&self.pending).record(self.peer, pending);
        Some(keys)
    }

    fn take_next_keys(&mut self) -> Option<SessionKeys> {
        self.inner.take_next_keys()
    }

    fn address_proof(&self) -> AddressProof {
        self.inner.address_proof()
    }

    fn opening_address_proof(&self, opening: &[u8]) -> AddressProof {
        self.inner.opening_address_proof(opening)
    }

    fn peer_identity(&self) -> PeerIdentity {
        self.inner.peer_identity()
    }
}

/// The application's key resolver, recording the sessions it makes.
struct RecordingResolver {
    inner: Box<dyn KeyResolver>,
    pending: Shared,
}

impl KeyResolver for RecordingResolver {
    fn resolve(&mut self, peer: SocketAddr) -> Option<SessionKeys> {
        let keys = self.inner.resolve(peer)?;
        let pending = Pending {
            origin: SessionOrigin::Resolved,
            identity: PeerIdentity::default(),
        };
        lock(&self.pending).record(peer, pending);
        Some(keys)
    }
}
