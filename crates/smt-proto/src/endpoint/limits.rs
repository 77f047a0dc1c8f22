//! Resource bounds on what peers can make the endpoint hold (issue #6):
//! bytes of partially received messages per peer and in total, partial
//! requests per peer and in total (sessions and handshakes are bounded
//! where they are made: `Endpoint::make_room_for_session`, `handshake/
//! admit.rs`). The limits live in [`crate::Config`]; what is held is
//! published in [`crate::Stats::usage`]. The [`Ledger`] works on the
//! parts of the endpoint handed to it; what it names for eviction the
//! endpoint frees (`RpcParts::admit`).
//!
//! Accounting is a running total per peer that only grows between ticks
//! (every allocation is charged before it happens; the one exception: a
//! request's place is given back when it completes, `recv/admit.rs` `deliver`)
//! and is recounted exactly at every tick, when frees are seen. So the figure is never
//! below what is really held, a check against it is a hard bound, and the
//! work stays bounded: a check that fails on a stale figure recounts at
//! most once per tick.

use super::HashMap;
use std::time::Instant;

use super::peers::{PeerId, Peers};
use super::table::RpcTables;
use super::ServerState;
use crate::config::Config;
use crate::rpc::Incoming;
use crate::rpc::ServerSlot;
use crate::stats::{Stats, Usage};

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

impl Ledger {
    /// Whether `more` can be charged to `peer` within every bound, by the
    /// running figures.
    pub(super) fn fits(&self, cfg: &Config, peers: &Peers, peer: PeerId, more: Charge) -> bool {
        let mine = peers.at(peer).map(|p| p.usage).unwrap_or_default();
        fits(cfg, mine, self.total, more)
    }

    /// Whether the figures are older than a tick: a refusal on them may
    /// be worth a recount (at most once per tick).
    pub(super) fn is_stale(&self, now: Instant, tick: std::time::Duration) -> bool {
        self.recounted.is_none_or(|at| now >= at + tick)
    }

    /// Adds what was just allocated for `peer`.
    #[inline]
    pub(super) fn charge(
        &mut self,
        peers: &mut Peers,
        usage: &mut Usage,
        peer: PeerId,
        more: Charge,
    ) {
        let entry = peers.at_mut(peer).map(|p| (peer, p));
        add_charge(entry, &mut self.charged, &mut self.total, usage, more);
    }

    /// Takes back what a freed message was charged.
    pub(super) fn discharge(
        &mut self,
        peers: &mut Peers,
        stats: &mut Stats,
        peer: PeerId,
        less: Charge,
    ) {
        if let Some(c) = peers.at_mut(peer).map(|p| &mut p.usage) {
            c.bytes = c.bytes.saturating_sub(less.bytes);
            c.requests = c.requests.saturating_sub(less.requests);
        }
        let t = &mut self.total;
        t.bytes = t.bytes.saturating_sub(less.bytes);
        t.requests = t.requests.saturating_sub(less.requests);
        self.publish(peers, stats, Some(peer));
    }

    /// What to evict so that `peer` may take `more`, when only the totals
    /// refuse it: partial requests of the peer holding the most, if that
    /// is another peer that would still hold more than `peer`, so a few
    /// peers (or one attacker with many addresses) filling the totals
    /// cannot lock everyone else out. Only requests with nothing
    /// authenticated yet; their clients, if genuine, hear RPC_UNKNOWN and
    /// send again under a new ID (never executed twice: the request was
    /// never delivered). At most `EVICTIONS`: the heavy peer and its
    /// requests with what each holds, which the endpoint frees and
    /// discharges one by one until `peer` fits.
    pub(super) fn victims(
        &self,
        cfg: &Config,
        peers: &Peers,
        rpcs: &RpcTables,
        peer: PeerId,
        more: Charge,
    ) -> Option<(PeerId, Vec<(ServerSlot, Charge)>)> {
        const EVICTIONS: usize = 8;
        let mine = peers.at(peer).map(|p| p.usage).unwrap_or_default();
        let peer_fits = mine.bytes + more.bytes <= cfg.max_buffered_per_peer
            && mine.requests + more.requests <= cfg.max_incoming_per_peer;
        let heaviest = peers.slots().max_by_key(|(_, _, p)| p.usage.bytes);
        let (heavy, theirs) = heaviest.map(|(id, _, p)| (id, p.usage))?;
        let heavier = theirs.bytes > mine.bytes + more.bytes;
        if !peer_fits || heavy == peer || !heavier {
            return None;
        }
        Some((
            heavy,
            unauthenticated_partials(peers, rpcs, heavy, EVICTIONS),
        ))
    }

    /// Counts exactly what every partially received message holds (and
    /// what handshakes hold out of order), and publishes it. Looks at the
    /// peers charged since the last recount and those holding something,
    /// not at every peer: the work per tick follows the messages in
    /// flight, not the number of sessions.
    pub(super) fn recount(
        &mut self,
        now: Instant,
        peers: &mut Peers,
        rpcs: &RpcTables,
        stats: &mut Stats,
    ) {
        let (usage, total) = tally_usage(rpcs);
        self.charge_anew(peers, &usage);
        self.total = total;
        self.recounted = Some(now);
        stats.usage.handshake_bytes = peers.handshake_bytes() as u64;
        self.publish(peers, stats, None);
    }

    /// Clears the usage of the peers charged at the last recount and
    /// charges those in `usage`, which become the new charged list (reused:
    /// no allocation per tick).
    fn charge_anew(&mut self, peers: &mut Peers, usage: &HashMap<PeerId, Charge>) {
        let mut charged = std::mem::take(&mut self.charged);
        for id in &charged {
            if let Some(p) = peers.at_mut(*id) {
                p.charged = false;
                set_usage(p, Charge::default());
            }
        }
        charged.clear();
        for (id, c) in usage {
            if let Some(p) = peers.at_mut(*id) {
                set_usage(p, *c);
                if !p.charged {
                    p.charged = true;
                    charged.push(*id);
                }
            }
        }
        self.charged = charged;
    }

    /// Writes the usage gauges into the endpoint's stats, and into the
    /// peer's if `peer` is given.
    fn publish(&self, peers: &mut Peers, stats: &mut Stats, peer: Option<PeerId>) {
        if let Some(p) = peer.and_then(|peer| peers.at_mut(peer)) {
            let u = &mut p.session.stats.usage;
            u.incoming_bytes = p.usage.bytes as u64;
            u.partial_requests = p.usage.requests as u64;
        }
        let u = &mut stats.usage;
        u.incoming_bytes = self.total.bytes as u64;
        u.partial_requests = self.total.requests as u64;
        u.peak_incoming_bytes = u.peak_incoming_bytes.max(u.incoming_bytes);
        u.sessions = peers.len() as u64;
        u.handshakes = peers.handshakes.len() as u64;
    }
}

/// Up to `most` partial requests of `peer` with nothing authenticated
/// yet, with what each holds: what `Ledger::victims` may evict.
fn unauthenticated_partials(
    peers: &Peers,
    rpcs: &RpcTables,
    peer: PeerId,
    most: usize,
) -> Vec<(ServerSlot, Charge)> {
    let slots = peers
        .at(peer)
        .map(|p| p.rpcs.servers_of(None))
        .unwrap_or_default();
    slots
        .into_iter()
        .filter_map(|slot| Some((slot, rpcs.servers.get(slot)?)))
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

/// Every message being received: (peer, state, whether a request).
fn partial_messages(rpcs: &RpcTables) -> impl Iterator<Item = (PeerId, &Incoming, bool)> {
    let responses = rpcs
        .clients
        .values()
        .filter_map(|c| Some((c.peer_id, c.response.as_ref()?, false)));
    let requests = rpcs.servers.slots().filter_map(|(_, p, s)| match &s.state {
        ServerState::Receiving(inc) => Some((p, inc, true)),
        _ => None,
    });
    responses.chain(requests)
}

/// Bytes a peer holding `mine` may still take before a bound is reached
/// (for one holding the peer entry already).
pub(crate) fn spare(cfg: &crate::Config, total: &Charge, mine: usize) -> usize {
    let for_peer = cfg.max_buffered_per_peer.saturating_sub(mine);
    let for_all = cfg.max_buffered_total.saturating_sub(total.bytes);
    for_peer.min(for_all)
}

/// Whether `more` can be charged to a peer holding `mine` while everyone
/// holds `all`, within every bound (the receive path asks with the peer
/// in hand, `recv.rs`).
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
/// [`Ledger::charge`], for callers that already hold the peer. A peer
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

/// What the partial messages in `rpcs` hold, by peer and in all.
fn tally_usage(rpcs: &RpcTables) -> (HashMap<PeerId, Charge>, Charge) {
    let mut usage: HashMap<PeerId, Charge> = HashMap::default();
    let mut total = Charge::default();
    for (peer, inc, request) in partial_messages(rpcs) {
        let c = Charge {
            bytes: inc.buffered_bytes(),
            requests: usize::from(request),
        };
        usage.entry(peer).or_default().add(c);
        total.add(c);
    }
    (usage, total)
}
