//! Resource bounds on what peers can make the endpoint hold (issue #6):
//! bytes of partially received messages per peer and in total, partial
//! requests per peer and in total, sessions created by the key resolver,
//! handshakes in progress. The limits live in [`crate::Config`]; what is
//! held is published in [`crate::Stats::usage`].
//!
//! Accounting is a running total per peer that only grows between ticks
//! (every allocation is charged before it happens; the one exception: a
//! request's place is given back when it completes, `recv.rs` `deliver`)
//! and is recounted exactly at every tick, when frees are seen. So the figure is never
//! below what is really held, a check against it is a hard bound, and the
//! work stays bounded: a check that fails on a stale figure recounts at
//! most once per tick.

use super::HashMap;
use std::time::Instant;

use super::peers::PeerId;
use super::{Endpoint, ServerState};
use crate::rpc::Incoming;
use crate::rpc::ServerSlot;
use crate::timer::Timer;

pub(crate) use super::peer::Charge;

/// What partially received messages hold, for the bounds.
/// What the endpoint holds for peers' requests: partially received
/// messages, requests in service, and credit.
#[derive(Default)]
pub(crate) struct Load {
    /// What partially received messages hold, and when it was last
    /// recounted.
    pub(crate) ledger: Ledger,
    /// Server RPCs in service: delivered to the application, not yet
    /// answered or abandoned (bounded by `Config::max_pending_requests`).
    pub(crate) in_service: usize,
    /// Credit given to peers and heard from them (`credit.rs`).
    pub(crate) credits: super::credit::Credits,
}

#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// What they hold in total (per peer: in `Peer::usage`).
    pub total: Charge,
    /// Peers charged since the last recount or holding something then:
    /// what the next recount looks at.
    pub charged: Vec<PeerId>,
    /// When the last recount was.
    pub recounted: Option<Instant>,
}

impl Endpoint {
    /// Whether `more` can be charged to `peer` within every bound,
    /// recounting first (at most once per tick) if the running figures say
    /// no.
    pub(crate) fn admit(&mut self, now: Instant, peer: PeerId, more: Charge) -> bool {
        if self.fits(peer, more) {
            return true;
        }
        let stale = self
            .load
            .ledger
            .recounted
            .is_none_or(|at| now >= at + self.config.tick);
        if stale {
            self.recount_usage(now);
            if self.fits(peer, more) {
                return true;
            }
        }
        self.evict_for(peer, more)
    }

    /// When only the totals refuse `peer`, makes room by evicting partial
    /// requests of the peer holding the most, if that is another peer that
    /// would still hold more than `peer`: so a few peers (or one attacker
    /// with many addresses) filling the totals cannot lock everyone else
    /// out. Only requests with nothing authenticated yet are evicted; their
    /// clients, if genuine, hear RPC_UNKNOWN and send again under a new ID
    /// (never executed twice: the request was never delivered). At most
    /// `EVICTIONS` per call; the scan stops once it has them, and at worst
    /// reads the whole table (at most `max_incoming_total` partial
    /// requests, and only when the totals refuse a packet).
    fn evict_for(&mut self, peer: PeerId, more: Charge) -> bool {
        const EVICTIONS: usize = 8;
        let cfg = &self.config;
        let mine = self.usage_of(peer);
        let peer_fits = mine.bytes + more.bytes <= cfg.max_buffered_per_peer
            && mine.requests + more.requests <= cfg.max_incoming_per_peer;
        let heaviest = self.peers.slots().max_by_key(|(_, _, p)| p.usage.bytes);
        let Some((heavy, theirs)) = heaviest.map(|(id, _, p)| (id, p.usage)) else {
            return false;
        };
        let heavier = theirs.bytes > mine.bytes + more.bytes;
        if !peer_fits || heavy == peer || !heavier {
            return false;
        }
        let victims = self.unauthenticated_partials(heavy, EVICTIONS);
        for (slot, c) in victims {
            tracing::debug!(?slot, "evicting an unauthenticated partial request");
            self.drop_server_at(slot);
            self.counters.stats.partial_evicted += 1;
            self.discharge(heavy, c);
            if self.fits(peer, more) {
                return true;
            }
        }
        false
    }

    /// Up to `most` partial requests of `peer` with nothing authenticated
    /// yet, with what each holds: what `evict_for` may evict.
    fn unauthenticated_partials(&self, peer: PeerId, most: usize) -> Vec<(ServerSlot, Charge)> {
        let slots = self
            .peers
            .at(peer)
            .map(|p| p.rpcs.servers_of(None))
            .unwrap_or_default();
        slots
            .into_iter()
            .filter_map(|slot| Some((slot, self.rpcs.servers.get(slot)?)))
            .filter_map(|(slot, s)| match &s.state {
                ServerState::Receiving(inc) if inc.authenticated_bytes() == 0 => Some((
                    slot,
                    Charge {
                        bytes: inc.buffered_bytes(),
                        requests: 1,
                    },
                )),
                _ => None,
            })
            .take(most)
            .collect()
    }

    /// Takes back what a freed message was charged.
    pub(crate) fn discharge(&mut self, peer: PeerId, less: Charge) {
        if let Some(c) = self.peers.at_mut(peer).map(|p| &mut p.usage) {
            c.bytes = c.bytes.saturating_sub(less.bytes);
            c.requests = c.requests.saturating_sub(less.requests);
        }
        let t = &mut self.load.ledger.total;
        t.bytes = t.bytes.saturating_sub(less.bytes);
        t.requests = t.requests.saturating_sub(less.requests);
        self.publish_usage(Some(peer));
    }

    fn fits(&self, peer: PeerId, more: Charge) -> bool {
        fits(
            &self.config,
            self.usage_of(peer),
            self.load.ledger.total,
            more,
        )
    }

    /// Adds what was just allocated for `peer`.
    pub(crate) fn charge(&mut self, peer: PeerId, more: Charge) {
        let entry = self.peers.at_mut(peer).map(|p| (peer, p));
        let (ledger, stats) = (&mut self.load.ledger, &mut self.counters.stats);
        let (charged, total) = (&mut ledger.charged, &mut ledger.total);
        add_charge(entry, charged, total, &mut stats.usage, more);
    }

    /// What `peer`'s partially received messages hold (zero for a peer
    /// without a session).
    fn usage_of(&self, peer: PeerId) -> Charge {
        self.peers.at(peer).map(|p| p.usage).unwrap_or_default()
    }

    /// Counts exactly what every partially received message holds. Looks
    /// at the peers charged since the last recount and those holding
    /// something, not at every peer: the work per tick follows the
    /// messages in flight, not the number of sessions.
    pub(crate) fn recount_usage(&mut self, now: Instant) {
        let mut usage: HashMap<PeerId, Charge> = HashMap::default();
        let mut total = Charge::default();
        for (peer, inc, request) in self.partial_messages() {
            let c = Charge {
                bytes: inc.buffered_bytes(),
                requests: usize::from(request),
            };
            usage.entry(peer).or_default().add(c);
            total.add(c);
        }
        // The list is reused (no allocation per tick).
        let mut charged = std::mem::take(&mut self.load.ledger.charged);
        for id in &charged {
            if let Some(p) = self.peers.at_mut(*id) {
                p.charged = false;
                set_usage(p, Charge::default());
            }
        }
        charged.clear();
        for (id, c) in &usage {
            if let Some(p) = self.peers.at_mut(*id) {
                set_usage(p, *c);
                if !p.charged {
                    p.charged = true;
                    charged.push(*id);
                }
            }
        }
        self.load.ledger.charged = charged;
        self.load.ledger.total = total;
        self.load.ledger.recounted = Some(now);
        self.recount_handshake_bytes();
        self.publish_usage(None);
    }

    /// Every message being received: (peer, state, whether a request).
    fn partial_messages(&self) -> impl Iterator<Item = (PeerId, &Incoming, bool)> {
        let responses = self
            .rpcs
            .clients
            .values()
            .filter_map(|c| Some((c.peer_id, c.response.as_ref()?, false)));
        let requests = self
            .rpcs
            .servers
            .slots()
            .filter_map(|(_, p, s)| match &s.state {
                ServerState::Receiving(inc) => Some((p, inc, true)),
                _ => None,
            });
        responses.chain(requests)
    }

    /// Writes the usage gauges into the endpoint's stats, and into the
    /// peer's if `peer` is given.
    fn publish_usage(&mut self, peer: Option<PeerId>) {
        if let Some(peer) = peer {
            if let Some(p) = self.peers.at_mut(peer) {
                let u = &mut p.session.stats.usage;
                u.incoming_bytes = p.usage.bytes as u64;
                u.partial_requests = p.usage.requests as u64;
            }
        }
        let u = &mut self.counters.stats.usage;
        u.incoming_bytes = self.load.ledger.total.bytes as u64;
        u.partial_requests = self.load.ledger.total.requests as u64;
        u.peak_incoming_bytes = u.peak_incoming_bytes.max(u.incoming_bytes);
        u.sessions = self.peers.len() as u64;
        u.handshakes = self.peers.handshakes.len() as u64;
    }

    /// Whether the key resolver may create one more session. Counts the
    /// resolver's sessions still alive (pruning those removed since).
    pub(crate) fn may_resolve(&mut self) -> bool {
        self.peers.resolved_count() < self.config.max_resolved_sessions
    }

    /// Arms the idle sweep if a handshake's session exists and it is not
    /// armed yet.
    pub(crate) fn arm_idle_sweep(&mut self, now: Instant) {
        let Some(timeout) = self.config.session_idle_timeout else {
            return;
        };
        if self.peers.handshake_count() > 0 && !self.time.timers.is_set(Timer::IdleSweep) {
            self.time.timers.set(Timer::IdleSweep, now + timeout / 4);
        }
    }

    /// Whether one more session fits `Config::max_sessions`, evicting the
    /// least proven one if it would not: a session whose peer never used
    /// its keys (oldest first), else the handshake session heard from least
    /// recently with nothing under way. Installed and resolved sessions are
    /// never evicted (see `Config::max_sessions`). O(1) while there is
    /// room; past it, at worst one pass over the sessions and the RPCs.
    pub(crate) fn make_room_for_session(&mut self) -> bool {
        if self.peers.len() < self.config.max_sessions {
            return true;
        }
        let before = self.peers.len();
        while let Some((peer, made)) = self.peers.unvalidated.pop_front() {
            self.drop_if_unproven(peer, made);
            if self.peers.len() < before {
                self.counters.stats.sessions_displaced += 1;
                return true;
            }
        }
        let peers = &self.peers;
        let victim = peers
            .iter()
            .filter(|(a, p)| p.origin == super::Origin::Handshake && !peers.is_busy(a, p))
            .min_by_key(|(a, p)| (p.heard, **a))
            .map(|(a, _)| *a);
        let Some(victim) = victim else {
            return false;
        };
        tracing::debug!(peer = %victim, "evicting the least recently heard session: too many");
        self.remove_session(victim);
        self.counters.stats.sessions_displaced += 1;
        true
    }

    /// Forgets sessions a handshake made whose peer has sent nothing
    /// authenticated for `session_idle_timeout` and that hold no RPC or
    /// handshake. A session never heard from is timed from this sweep.
    pub(crate) fn sweep_idle_sessions(&mut self, now: Instant) {
        let Some(timeout) = self.config.session_idle_timeout else {
            return;
        };
        for peer in self.peers.idle_handshake_sessions(now, timeout) {
            tracing::debug!(%peer, "forgetting an idle handshake session");
            self.counters.stats.sessions_evicted += 1;
            self.remove_session(peer);
        }
        self.arm_idle_sweep(now);
    }
}

/// Bytes a peer holding `mine` may still take before a bound is reached
/// (for one holding the peer entry already).
pub(crate) fn spare(cfg: &crate::Config, total: &Charge, mine: usize) -> usize {
    let for_peer = cfg.max_buffered_per_peer.saturating_sub(mine);
    let for_all = cfg.max_buffered_total.saturating_sub(total.bytes);
    for_peer.min(for_all)
}

/// Whether `more` can be charged to a peer holding `mine` while everyone
/// holds `all`, within every bound (a free function: the receive path asks
/// with the peer in hand, `recv.rs`).
pub(crate) fn fits(cfg: &crate::Config, mine: Charge, all: Charge, more: Charge) -> bool {
    mine.bytes + more.bytes <= cfg.max_buffered_per_peer
        && all.bytes + more.bytes <= cfg.max_buffered_total
        && mine.requests + more.requests <= cfg.max_incoming_per_peer
        && all.requests + more.requests <= cfg.max_incoming_total
}

/// Sets what a peer's partially received messages hold, and its gauges.
fn set_usage(p: &mut super::Peer, usage: Charge) {
    p.usage = usage;
    let u = &mut p.session.stats.usage;
    u.incoming_bytes = usage.bytes as u64;
    u.partial_requests = usage.requests as u64;
}

/// Charges `more` to a peer (if it has a session: its address and entry)
/// and to the total, and publishes the gauges: the per-packet form of
/// [`Endpoint::charge`], for callers that already hold the peer. A peer
/// charged for the first time since the last recount joins `charged`, the
/// peers the next recount looks at.
pub(crate) fn add_charge(
    peer: Option<(PeerId, &mut super::Peer)>,
    charged: &mut Vec<PeerId>,
    total: &mut Charge,
    usage: &mut crate::stats::Usage,
    more: Charge,
) {
    if let Some((id, p)) = peer {
        if !p.charged {
            p.charged = true;
            charged.push(id);
        }
        p.usage.add(more);
        let u = &mut p.session.stats.usage;
        u.incoming_bytes = p.usage.bytes as u64;
        u.partial_requests = p.usage.requests as u64;
    }
    total.add(more);
    usage.incoming_bytes = total.bytes as u64;
    usage.partial_requests = total.requests as u64;
    usage.peak_incoming_bytes = usage.peak_incoming_bytes.max(usage.incoming_bytes);
}
