//! Every peer with a session, in a slab: a packet finds its peer by one
//! hash of its source address (`Peers::id`), and everything after that
//! names the peer by its [`PeerId`], an index. Replacing a peer's session
//! gives it a new `PeerId`, so a key kept from the old session never
//! finds the new one.
//!
//! Iteration is in slot order: deterministic for a given sequence of
//! operations (simulations must not depend on a hasher's seed).

use std::net::SocketAddr;
use std::time::Instant;

use super::handshake::{BudgetAt, HandshakeConn};
use super::peer::{Budget, Origin, Peer};
use super::table::{PeerRpcs, RpcKey};
use super::HashMap;
use crate::rpc::ServerSlot;
use crate::rpc::{MsgKey, RpcHandle, ServerRpcHandle};
use crate::slab::Slab;

/// Peers remembered as unreachable at once ([`Peers::quarantine`]).
const MAX_UNREACHABLE: usize = 1024;

pub(crate) use super::peer::id::PeerId;

/// Where the last DATA packet of a receive batch went, for the next one of
/// the same message (`Endpoint::process_on_route`, `recv.rs`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LastRoute {
    pub(crate) from: SocketAddr,
    pub(crate) peer: PeerId,
    pub(crate) phase: bool,
    pub(crate) key: ServerRpcHandle,
    pub(crate) msg: MsgKey,
    /// Packets that took the route, and their bytes, not yet in the
    /// peer's counters.
    pub(crate) datagrams: u64,
    pub(crate) bytes: u64,
}

/// The peers, by slot, with the one address map that demultiplexes, and
/// how many peers' sessions the key resolver made and how many a
/// handshake installed (counts of `Peer::origin`, kept as peers come,
/// go and change origin).
#[derive(Debug, Default)]
pub(crate) struct Peers {
    slab: Slab<(SocketAddr, Peer)>,
    by_addr: HashMap<SocketAddr, PeerId>,
    resolved: usize,
    handshaked: usize,
    /// Peers whose key-update announcement is not confirmed yet (tick.rs
    /// announces again; the peer's `key_update_unconfirmed` counts).
    pub(crate) key_updates: Vec<SocketAddr>,
    /// Sessions a responder's handshake made that the peer has not used
    /// yet, oldest first, with the tick each was made at: for
    /// `Config::max_unvalidated_sessions` and their expiry (entries whose
    /// session has since been proven or replaced are skipped when they
    /// come up).
    pub(crate) unvalidated: std::collections::VecDeque<(SocketAddr, u64)>,
    /// Peers the network reported unreachable, and until when calls and
    /// handshakes to them fail without sending (`peer_unreachable`).
    pub(crate) unreachable: HashMap<SocketAddr, Instant>,
    /// Handshakes in progress (or just finished, answering late copies),
    /// by peer address: each with where its peer is on the way to keys
    /// (`HandshakeConn::state`).
    pub(crate) handshakes: std::collections::BTreeMap<SocketAddr, HandshakeConn>,
    /// The route of the last DATA packet of the receive batch being
    /// handled (`recv.rs`); `None` between calls.
    pub(crate) last_route: Option<LastRoute>,
}

impl Peers {
    /// The peer at `addr`: the one address hash of a packet.
    #[inline]
    pub(super) fn id(&self, addr: &SocketAddr) -> Option<PeerId> {
        self.by_addr.get(addr).copied()
    }

    #[inline]
    pub(super) fn at(&self, id: PeerId) -> Option<&Peer> {
        self.slab.get(id.index(), id.generation()).map(|(_, p)| p)
    }

    #[inline]
    pub(super) fn at_mut(&mut self, id: PeerId) -> Option<&mut Peer> {
        self.slab
            .get_mut(id.index(), id.generation())
            .map(|(_, p)| p)
    }

    /// The peer in slot `id` with its address.
    #[inline]
    pub(super) fn entry_mut(&mut self, id: PeerId) -> Option<(SocketAddr, &mut Peer)> {
        let (addr, p) = self.slab.get_mut(id.index(), id.generation())?;
        Some((*addr, p))
    }

    /// Our call with internal key `k`: the per-packet RPC lookup.
    #[inline]
    pub(super) fn client(&self, k: &RpcKey) -> Option<RpcHandle> {
        self.at(k.peer)?.rpcs.client(k.epoch, k.id)
    }

    /// The peer's request with internal key `k`: the per-packet RPC lookup.
    #[inline]
    pub(super) fn server(&self, k: &RpcKey) -> Option<ServerSlot> {
        self.at(k.peer)?.rpcs.server(k.epoch, k.id)
    }

    /// Whether `id` is an ID we allocate in the session of the peer in
    /// slot `peer` (an RPC of ours, not of the peer's).
    #[inline]
    pub(super) fn is_local_id(&self, peer: PeerId, id: u64) -> bool {
        self.at(peer).is_some_and(|s| s.session.is_local_id(id))
    }

    /// The internal key of the wire key `key` (one address hash).
    pub(super) fn rpc_key(&self, key: &ServerRpcHandle) -> Option<RpcKey> {
        Some(RpcKey {
            peer: self.id(&key.peer)?,
            epoch: key.epoch,
            id: key.id,
        })
    }

    /// The slot of the server RPC with wire key `key`.
    pub(super) fn server_slot(&self, key: &ServerRpcHandle) -> Option<ServerSlot> {
        self.server(&self.rpc_key(key)?)
    }

    /// The RPC index of the peer in slot `id`.
    pub(super) fn rpcs_mut(&mut self, id: PeerId) -> Option<&mut PeerRpcs> {
        self.at_mut(id).map(|p| &mut p.rpcs)
    }

    pub(super) fn get(&self, addr: &SocketAddr) -> Option<&Peer> {
        self.at(self.id(addr)?)
    }

    pub(super) fn get_mut(&mut self, addr: &SocketAddr) -> Option<&mut Peer> {
        self.at_mut(self.id(addr)?)
    }

    pub(super) fn contains_key(&self, addr: &SocketAddr) -> bool {
        self.by_addr.contains_key(addr)
    }

    /// Adds `peer` at `addr` under a new `PeerId`, returning the peer it
    /// replaces.
    pub(super) fn insert(&mut self, addr: SocketAddr, peer: Peer) -> Option<Peer> {
        self.count_origin(peer.origin, true);
        let old = self.remove(&addr);
        let (index, generation) = self.slab.insert((addr, peer));
        self.by_addr.insert(addr, PeerId::new(index, generation));
        old
    }

    pub(super) fn remove(&mut self, addr: &SocketAddr) -> Option<Peer> {
        let id = self.by_addr.remove(addr)?;
        let (_, old) = self.slab.remove(id.index(), id.generation())?;
        self.count_origin(old.origin, false);
        Some(old)
    }

    /// Changes the origin of the peer at `addr` in place (it keeps its
    /// slot).
    pub(super) fn set_origin(&mut self, addr: &SocketAddr, origin: Origin) {
        let Some(p) = self.get_mut(addr) else {
            return;
        };
        let was = std::mem::replace(&mut p.origin, origin);
        self.count_origin(was, false);
        self.count_origin(origin, true);
    }

    /// Whether what comes from `addr` is vouched for: its session has
    /// authenticated a packet from it, the application installed its keys
    /// for that address (it chose to talk to it), or a handshake with it
    /// was opened by us or with a valid retry token. (Keys the resolver
    /// derived for any address that asks are not a voucher, nor are keys a
    /// responder's handshake made that the peer has not used yet: a PSK
    /// hello and its reply are exchanged without the key.)
    pub(super) fn vouched_for(&self, addr: &SocketAddr) -> bool {
        self.get(addr)
            .is_some_and(|p| p.proven || p.origin == Origin::Installed)
            || self
                .handshakes
                .get(addr)
                .is_some_and(|c| c.vouches_for_its_packets())
    }

    /// The handshakes a flood of spoofed openings could have made: all but
    /// the finished ones whose peer proved its address (by a retry token
    /// or an authenticated packet) and the ones we started. A finished
    /// handshake stays `handshake_abort_ticks` (100 ms) to answer late
    /// copies; counting those made a server that completed more than
    /// `retry_above_handshakes` genuine handshakes in that time answer
    /// every new client with a RETRY, and a 0-RTT client pay a round trip
    /// (`smt bench-handshake`'s 0-RTT tail).
    pub(super) fn busy_handshakes(&self) -> usize {
        let settled = |peer: &SocketAddr, c: &HandshakeConn| {
            c.initiator
                || (c.keys_installed()
                    && (c.opened_with_token() || self.get(peer).is_some_and(|p| p.validated())))
        };
        self.handshakes
            .iter()
            .filter(|(peer, c)| !settled(peer, c))
            .count()
    }

    /// Whether `addr` holds something a sweep must not end: RPCs, or a
    /// handshake.
    pub(super) fn is_busy(&self, addr: &SocketAddr, peer: &Peer) -> bool {
        !peer.rpcs.is_empty() || self.handshakes.contains_key(addr)
    }

    /// The sessions a handshake made whose peer has sent nothing
    /// authenticated for `timeout` and that hold no RPC or handshake (a
    /// session never heard from is timed from now).
    pub(super) fn idle_handshake_sessions(
        &mut self,
        now: Instant,
        timeout: std::time::Duration,
    ) -> Vec<SocketAddr> {
        let handshakes = &self.handshakes;
        let mut idle = Vec::new();
        let handshaken = self
            .slab
            .iter_mut()
            .map(|(_, _, (a, p))| (&*a, p))
            .filter(|(_, p)| p.origin == Origin::Handshake);
        for (addr, p) in handshaken {
            let heard = *p.heard.get_or_insert(now);
            let busy = !p.rpcs.is_empty() || handshakes.contains_key(addr);
            if now >= heard + timeout && !busy {
                idle.push(*addr);
            }
        }
        idle
    }

    /// What handshakes hold for out-of-order bytes, counted exactly (the
    /// running figure should agree; a recount keeps an error from lasting).
    pub(super) fn handshake_bytes(&self) -> usize {
        self.handshakes.values().map(|c| c.held_bytes()).sum()
    }

    /// The session to evict when `Config::max_sessions` is reached and no
    /// unproven one is left: the handshake session heard from least
    /// recently with nothing under way (installed and resolved sessions
    /// are never evicted).
    pub(super) fn least_recently_heard(&self) -> Option<SocketAddr> {
        self.iter()
            .filter(|(a, p)| p.origin == Origin::Handshake && !self.is_busy(a, p))
            .min_by_key(|(a, p)| (p.heard, **a))
            .map(|(a, _)| *a)
    }

    /// Remembers `peer` as unreachable until `until`; at most
    /// [`MAX_UNREACHABLE`] at once (forged ICMP cannot grow it).
    pub(super) fn quarantine(&mut self, now: Instant, peer: SocketAddr, until: Instant) {
        if self.unreachable.len() >= MAX_UNREACHABLE {
            self.unreachable.retain(|_, until| *until > now);
        }
        if self.unreachable.len() < MAX_UNREACHABLE {
            self.unreachable.insert(peer, until);
        }
    }

    /// Whether `peer` was reported unreachable a moment ago.
    pub(super) fn is_quarantined(&mut self, now: Instant, peer: SocketAddr) -> bool {
        if self.unreachable.is_empty() {
            return false; // the per-call case: no hashing
        }
        match self.unreachable.get(&peer) {
            Some(&until) if until > now => true,
            Some(_) => {
                self.unreachable.remove(&peer);
                false
            }
            None => false,
        }
    }

    /// The amplification budget of the address of the handshake with
    /// `addr`: the handshake's own, or, once a responder's keys made a
    /// session, that session's ([`BudgetAt`]); `None` without a handshake,
    /// or if that session is gone.
    pub(super) fn handshake_budget(&self, addr: &SocketAddr) -> Option<Budget> {
        match self.handshakes.get(addr)?.budget {
            BudgetAt::Own(budget) => Some(budget),
            BudgetAt::Peer(id) => self.at(id).map(|p| p.budget),
        }
    }

    /// [`Peers::handshake_budget`], to credit or spend.
    pub(super) fn handshake_budget_mut(&mut self, addr: &SocketAddr) -> Option<&mut Budget> {
        let conn = self.handshakes.get_mut(addr)?;
        match &mut conn.budget {
            BudgetAt::Own(budget) => Some(budget),
            BudgetAt::Peer(id) => {
                let id = *id;
                self.slab
                    .get_mut(id.index(), id.generation())
                    .map(|(_, p)| &mut p.budget)
            }
        }
    }

    /// Keeps a datagram from a peer whose handshake has not produced keys
    /// yet (1-RTT data can overtake the client's Finished); it is handled
    /// once the keys are installed. False if there is no such handshake or
    /// its buffer is full.
    pub(super) fn stash_early(&mut self, from: SocketAddr, datagram: &[u8]) -> bool {
        self.handshakes
            .get_mut(&from)
            .is_some_and(|c| c.state.stash_early(datagram))
    }

    /// Keeps the route of a DATA packet stored for a message still being
    /// received (`recv.rs`: only for a peer whose address is validated).
    pub(super) fn remember_route(
        &mut self,
        peer: PeerId,
        phase: bool,
        key: ServerRpcHandle,
        msg: MsgKey,
    ) {
        self.last_route = Some(LastRoute {
            from: key.peer,
            peer,
            phase,
            key,
            msg,
            datagrams: 0,
            bytes: 0,
        });
    }

    /// The route a DATA packet (`ty`, key phase `phase`, ID `id`) from
    /// `from` takes, if it is the last route's: its peer, RPC and message.
    #[inline]
    pub(super) fn route_for(
        &self,
        from: SocketAddr,
        (data, phase, id): (bool, bool, u64),
    ) -> Option<(PeerId, ServerRpcHandle, MsgKey)> {
        let r = self.last_route.as_ref()?;
        let on_route = data && r.from == from && phase == r.phase && id == r.key.id;
        on_route.then_some((r.peer, r.key, r.msg))
    }

    /// Counts a packet of `len` bytes that took the route (added to its
    /// peer's counters when the route ends).
    #[inline]
    pub(super) fn count_on_route(&mut self, len: usize) {
        if let Some(route) = self.last_route.as_mut() {
            route.datagrams += 1;
            route.bytes += len as u64;
        }
    }

    /// Ends the route: the packets that took it are counted in their peer's
    /// statistics.
    pub(super) fn forget_route(&mut self) {
        let Some(route) = self.last_route.take() else {
            return;
        };
        if route.datagrams == 0 {
            // A lone packet's route: nothing took it, nothing to count
            // (and no lookup of the peer).
            return;
        }
        if let Some(p) = self.at_mut(route.peer) {
            p.session.stats.datagrams_rx += route.datagrams;
            p.session.stats.bytes_rx += route.bytes;
        }
    }

    /// Peers whose sessions the key resolver made.
    pub(super) fn resolved_count(&self) -> usize {
        self.resolved
    }

    /// Peers whose sessions a handshake installed.
    pub(super) fn handshake_count(&self) -> usize {
        self.handshaked
    }

    fn count_origin(&mut self, origin: Origin, added: bool) {
        let count = match origin {
            Origin::Resolved => &mut self.resolved,
            Origin::Handshake => &mut self.handshaked,
            Origin::Installed => return,
        };
        *count = match added {
            true => *count + 1,
            false => count.saturating_sub(1),
        };
    }

    pub(super) fn len(&self) -> usize {
        self.slab.len()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&SocketAddr, &Peer)> {
        self.slab.iter().map(|(_, _, (a, p))| (a, p))
    }

    /// Every peer with its slot and address.
    pub(super) fn slots(&self) -> impl Iterator<Item = (PeerId, &SocketAddr, &Peer)> {
        self.slab
            .iter()
            .map(|(index, generation, (a, p))| (PeerId::new(index, generation), a, p))
    }
}
